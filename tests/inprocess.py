"""A Server over given routes on a real Unix socket, inside the test's own trio run: for tests
of the server and dispatcher themselves, where handlers must be controlled from the test."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from orcad.config import ServerConfig
from orcad.rpc import Dispatcher, Router
from orcad.server import Server


@dataclass
class Serving:
    server: Server
    client: trio.SocketStream  # one connection, already open
    nursery: trio.Nursery  # the server's connections nursery, for helper tasks

    def start_draining(self) -> trio.Event:
        """Start the server's drain in the background; the event is set once it is done."""
        drained = trio.Event()

        async def drain() -> None:
            await self.server.wait_drained()
            drained.set()

        self.nursery.start_soon(drain)
        return drained


@asynccontextmanager
async def serving(
    router: Router, tmp_path: Path, config: ServerConfig | None = None
) -> AsyncIterator[Serving]:
    """The server listening at `tmp_path/s.sock` with one client connected; everything is
    cancelled on leaving."""
    router.mark_ready()
    server = Server(Dispatcher(router), config or ServerConfig())
    path = str(tmp_path / "s.sock")
    listen_socket = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await listen_socket.bind(path)
    listen_socket.listen()
    try:
        async with trio.open_nursery() as connections:
            await connections.start(server.serve, trio.SocketListener(listen_socket), connections)
            client = await trio.open_unix_socket(path)
            try:
                yield Serving(server, client, connections)
            finally:
                await client.aclose()
                connections.cancel_scope.cancel()
    finally:  # a failing test leaves no socket open for a later one to warn of
        listen_socket.close()
