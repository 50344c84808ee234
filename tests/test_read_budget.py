"""What the daemon holds of all clients' requests at once (orcad.server._ReadBudget): many
clients sending large lines and never reading cost it a bounded amount, requests of ordinary size
are never held up by them, and large lines that arrive together are all served."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from orcad import limits
from orcad.config import ServerConfig
from orcad.rpc import Router
from protocol.types import PingResult
from tests.inprocess import Serving, serving

pytestmark = pytest.mark.inprocess

MIB = 1024 * 1024
CHUNK = 65536  # orcad.server.RECEIVE_CHUNK


def echoed(size: int, tag: str = "a") -> bytes:
    """A request for a method nobody serves, with an id of about `size` bytes: its error
    answer, owed until written, echoes the id."""
    return b'{"jsonrpc":"2.0","method":"no.such","id":"' + tag.encode() * (size - 60) + b'"}\n'


def router() -> Router:
    routes = Router()
    routes.add("daemon.ping", lambda params: PingResult(protocol=1, version="t", pid=1))
    return routes


async def hog(path: str, line: bytes, lines: int) -> None:
    """A client that sends `lines` copies of `line` and never reads an answer."""
    stream = await trio.open_unix_socket(path)
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        for _ in range(lines):
            await stream.send_all(line)
        await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def peak_while(served: Serving, seconds: float) -> int:
    """The most the server held of its clients' bytes, sampled every millisecond."""
    peak = 0
    with trio.move_on_after(seconds):
        while True:
            peak = max(peak, served.server.buffered_bytes)
            await trio.sleep(0.001)
    return peak


async def until(condition: Callable[[], bool]) -> None:
    """Wait for `condition`, polled: the server's counts change with no event to wait on."""
    with trio.fail_after(5):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.01)


async def read_answers(stream: trio.SocketStream, count: int) -> list[dict]:
    received = b""
    while received.count(b"\n") < count:
        chunk = await stream.receive_some(MIB)
        assert chunk, "the daemon closed the connection"
        received += chunk
    return [json.loads(line) for line in received.splitlines()]


async def test_clients_that_send_large_lines_and_never_read_hold_no_more_than_the_bound(
    tmp_path: Path,
) -> None:
    # before the bound, each such client held two requests owed and a line arriving: 20 clients
    # sending lines of 1 MiB held about 60 MiB, and 250 sending 8 MiB lines took 3.7 GiB of RSS
    bound, clients = 2 * MIB, 20
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=bound)
    async with serving(router(), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        async with trio.open_nursery() as hogs:
            for _ in range(clients):
                hogs.start_soon(hog, path, echoed(MIB - 100), 4)
            peak = await peak_while(served, 2.0)
            # a request of ordinary size is still answered at once
            with trio.fail_after(2):
                await served.client.send_all(b'{"jsonrpc":"2.0","id":7,"method":"daemon.ping"}\n')
                [answer] = await read_answers(served.client, 1)
            assert answer["id"] == 7
            hogs.cancel_scope.cancel()
        # lines arriving and requests owed, each up to the bound and a line over it, and what
        # each connection may hold below its allowance
        most = 2 * (bound + MIB) + clients * (limits.READ_ALLOWANCE_BYTES + CHUNK)
        assert bound <= peak <= most, f"held {peak / MIB:.1f} MiB, at most {most / MIB:.1f}"
        await until(lambda: not served.server.buffered_bytes)  # given back as they go


async def test_large_lines_arriving_together_are_all_answered_however_small_the_bound(
    tmp_path: Path,
) -> None:
    # each line is larger than the bound: had every connection waited for room while holding
    # part of its line, none would have finished until its line timed out (clients that read
    # each answer before they send again, as the hooks, orcactl and its MCP server do)
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=512 * 1024)
    async with serving(router(), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        answers: dict[int, list[dict]] = {}

        async def client(number: int) -> None:
            stream = await trio.open_unix_socket(path)
            async with stream:
                line = echoed(900 * 1024, "abcdefgh"[number])
                for start in range(0, len(line), 100 * 1024):  # trickled, so all are partial
                    await stream.send_all(line[start : start + 100 * 1024])
                    await trio.sleep(0.01)
                first = await read_answers(stream, 1)
                await stream.send_all(line)  # and a second one, whole
                answers[number] = first + await read_answers(stream, 1)

        with trio.fail_after(10):
            async with trio.open_nursery() as clients:
                for number in range(8):
                    clients.start_soon(client, number)
        codes = []
        for number, pair in answers.items():  # each to its own request
            assert [a["id"][:3] for a in pair] == ["abcdefgh"[number] * 3] * 2
            codes += [a["error"]["code"] for a in pair]
        assert len(answers) == 8
        # run (no such method), or refused as busy while others were owed more than the bound
        assert set(codes) <= {-32601, -32001}
        assert codes.count(-32601) >= 8, codes
        await trio.testing.wait_all_tasks_blocked()
        assert served.server.buffered_bytes == 0


async def test_a_large_line_is_answered_busy_while_large_requests_owed_fill_the_bound(
    tmp_path: Path,
) -> None:
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=MIB)
    async with serving(router(), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        async with trio.open_nursery() as hogs:
            hogs.start_soon(hog, path, echoed(MIB - 100), 2)  # owed, and never read
            await until(lambda: served.server.buffered_bytes >= MIB - 100)
            with trio.fail_after(5):
                await served.client.send_all(echoed(600 * 1024, "q"))
                [busy] = await read_answers(served.client, 1)
                await served.client.send_all(echoed(1024, "s"))  # a small one is served
                [small] = await read_answers(served.client, 1)
            hogs.cancel_scope.cancel()
        assert busy["id"].startswith("qqq")
        assert busy["error"]["code"] == -32001
        assert "server.max_buffered_bytes" in busy["error"]["message"]
        assert small["error"]["code"] == -32601  # run: nobody serves that method


async def test_a_line_waiting_for_room_is_not_timed_out_for_the_wait(tmp_path: Path) -> None:
    # the wait is the daemon's: a client whose line is held up by others' bytes must not be
    # closed as one that trickles
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=MIB, request_line_timeout_s=0.5)
    async with serving(router(), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        async with trio.open_nursery() as hogs:
            for _ in range(6):  # lines never finished, past the bound
                hogs.start_soon(hog, path, echoed(MIB - 100)[: 900 * 1024], 1)
            await until(lambda: served.server.buffered_bytes >= 6 * limits.READ_ALLOWANCE_BYTES)
            started = trio.current_time()
            stream = await trio.open_unix_socket(path)
            async with stream:
                # sent whole at once, and read behind the six, each read over the bound in
                # turn until its line times out (their own waits are not timed either)
                with trio.fail_after(10):
                    await stream.send_all(echoed(900 * 1024, "z"))
                    [answer] = await read_answers(stream, 1)
                waited = trio.current_time() - started
            hogs.cancel_scope.cancel()
        assert waited > 3 * config.request_line_timeout_s
        assert answer["id"].startswith("zzz")
