"""A trio client: concurrent requests on one connection, matched by id."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio

from protocol.client import (
    CLIENT_MAX_LINE_BYTES,
    DaemonUnavailable,
    ProtocolViolation,
    RequestRefused,
)
from protocol.errors import ErrorObject, RemoteError
from protocol.framing import LineFramer, LineTooLong
from protocol.jsonrpc import Request, Response, encode_line, params_object, response_decoder
from protocol.types import METHODS, Params


class TrioClient:
    """Requests in flight at once on one connection. An error the daemon ties to no request
    (a line it could not read: too large, nested too deep) cannot be told apart from the answers
    still owed, so it ends the client: every call in flight, and every later one, raises
    RequestRefused with it."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._send_lock = trio.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[Response]] = {}
        self._closed: BaseException | None = None
        self._refusal: ErrorObject | None = None  # why the daemon closed, when it said

    async def call(self, method: str, params: Params | dict[str, Any] | None = None) -> Any:
        """Send one request; return its decoded result or raise RemoteError."""
        if self._closed is not None:
            if self._refusal is not None:
                raise RequestRefused(self._refusal) from self._closed
            raise ConnectionError("connection closed") from self._closed
        request_id = next(self._ids)
        send, receive = trio.open_memory_channel[Response](1)
        self._waiting[request_id] = send
        try:
            async with self._send_lock:
                await self._stream.send_all(
                    encode_line(Request(method, params_object(params), request_id))
                )
            try:
                response = await receive.receive()
            except trio.EndOfChannel:
                if self._refusal is not None:
                    raise RequestRefused(self._refusal) from self._closed
                raise ConnectionError("the daemon closed the connection") from self._closed
        finally:
            self._waiting.pop(request_id, None)
        if response.error is not None:
            raise RemoteError(response.error)
        raw = response.result
        if method in METHODS:
            return msgspec.json.decode(raw, type=METHODS[method][1])
        return msgspec.json.decode(raw)

    async def _read_responses(self) -> None:
        framer = LineFramer(CLIENT_MAX_LINE_BYTES)
        try:
            while True:
                data = await self._stream.receive_some(65536)
                if not data:
                    break
                for event in framer.feed(data):
                    if isinstance(event, LineTooLong):
                        raise ProtocolViolation("response line exceeds the client limit")
                    response = response_decoder.decode(event)
                    if response.id is None and response.error is not None:
                        self._refusal = response.error
                        return  # refuses every call in flight (finally), not one at random
                    channel = (
                        self._waiting.get(response.id) if isinstance(response.id, int) else None
                    )
                    if channel is not None:
                        channel.send_nowait(response)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._closed = exc
        finally:
            self._closed = self._closed or ConnectionError("closed")
            for channel in self._waiting.values():
                channel.close()


@asynccontextmanager
async def open_client(socket_path: str) -> AsyncIterator[TrioClient]:
    try:
        stream = await trio.open_unix_socket(socket_path)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise DaemonUnavailable(f"no daemon answers at {socket_path}") from exc
    async with stream, trio.open_nursery() as nursery:
        client = TrioClient(stream)
        nursery.start_soon(client._read_responses)
        try:
            yield client
        finally:
            nursery.cancel_scope.cancel()
