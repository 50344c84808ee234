"""What all connections together hold of what their clients sent (orcad.server._Holdings):
over server.max_buffered_bytes, those whose clients left an answer unread or a line unfinished
longest are closed, so many clients that send large lines and never read cost a bounded
amount; clients that read their answers are served as before, and nobody waits on others."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.lowlevel
import trio.testing

from orcad import limits
from orcad.config import ServerConfig
from orcad.rpc import Router
from protocol.types import PingResult
from tests.inprocess import Serving, serving

pytestmark = pytest.mark.inprocess

MIB = 1024 * 1024


def echoed(size: int, tag: str = "a") -> bytes:
    """A request for a method nobody serves, with an id of about `size` bytes: its error
    answer, owed until written, echoes the id."""
    return b'{"jsonrpc":"2.0","method":"no.such","id":"' + tag.encode() * (size - 60) + b'"}\n'


def router() -> Router:
    routes = Router()
    routes.add("daemon.ping", lambda params: PingResult(protocol=1, version="t", pid=1))
    return routes


async def hog(path: str, data: bytes, times: int, closed: list[str]) -> None:
    """A client that sends `data` `times` times and never reads; `closed` gets a word when the
    daemon closes it."""
    stream = await trio.open_unix_socket(path)
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        for _ in range(times):
            await stream.send_all(data)
        await trio.sleep_forever()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        closed.append("closed")
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Wait for `condition`, polled: the server's counts change with no event to wait on."""
    with trio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.01)


async def read_answers(stream: trio.SocketStream, count: int) -> list[dict]:
    received = b""
    while received.count(b"\n") < count:
        chunk = await stream.receive_some(MIB)
        assert chunk, "the daemon closed the connection"
        received += chunk
    return [json.loads(line) for line in received.splitlines()]


async def peak_while(served: Serving, seconds: float) -> int:
    peak = 0
    with trio.move_on_after(seconds):
        while True:
            peak = max(peak, served.server.buffered_bytes)
            await trio.sleep(0.005)
    return peak


async def test_clients_that_send_large_lines_and_never_read_are_closed_past_the_bound(
    tmp_path: Path,
) -> None:
    # each connection's own bounds held (two requests owed, a line arriving) but nothing bound
    # them together: 250 clients sending 8 MiB lines and never reading took 3.7 GiB
    bound, clients = 2 * MIB, 12
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=bound)
    async with serving(router(), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        closed: list[str] = []
        async with trio.open_nursery() as hogs:
            for _ in range(clients):
                hogs.start_soon(hog, path, echoed(MIB - 100), 4, closed)
            await until(lambda: served.server.buffered_bytes > bound)
            # past the time a client may leave an answer unread, what is held comes down
            await trio.sleep(limits.SHED_AFTER_S + 1.5)
            held = await peak_while(served, 1.0)
            with trio.fail_after(2):  # and a request of ordinary size is answered at once
                await served.client.send_all(b'{"jsonrpc":"2.0","id":7,"method":"daemon.ping"}\n')
                [answer] = await read_answers(served.client, 1)
            hogs.cancel_scope.cancel()
        assert answer["id"] == 7
        assert closed, "no client was closed"
        # the bound, and at most a line read by each client left (its own bounds)
        assert held <= bound + clients * MIB, f"held {held / MIB:.1f} MiB"
        await until(lambda: served.server.buffered_bytes == 0)


async def test_clients_that_read_their_answers_are_never_closed_however_large_their_lines(
    tmp_path: Path,
) -> None:
    # eight clients at once, each with lines larger than the bound in flight, reading each
    # answer before sending again: all served, none closed
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=512 * 1024)
    async with serving(router(), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        answers: dict[int, list[dict]] = {}

        async def client(number: int) -> None:
            tag = "abcdefgh"[number]
            stream = await trio.open_unix_socket(path)
            async with stream:
                got = []
                for _ in range(3):
                    await stream.send_all(echoed(900 * 1024, tag))
                    got += await read_answers(stream, 1)
                answers[number] = got

        with trio.fail_after(20):
            async with trio.open_nursery() as clients:
                for number in range(8):
                    clients.start_soon(client, number)
        assert sorted(answers) == list(range(8))
        for number, got in answers.items():
            assert [a["id"][:3] for a in got] == ["abcdefgh"[number] * 3] * 3
            assert {a["error"]["code"] for a in got} == {-32601}  # run: nobody serves it
        await trio.testing.wait_all_tasks_blocked()
        assert served.server.buffered_bytes == 0


async def test_a_client_that_reads_is_served_beside_clients_that_do_not(tmp_path: Path) -> None:
    # it neither waits for them to let go of their bytes nor is closed for theirs
    bound = MIB
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=bound)
    async with serving(router(), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        closed: list[str] = []
        async with trio.open_nursery() as hogs:
            for _ in range(6):  # requests owed, and lines never finished
                hogs.start_soon(hog, path, echoed(MIB - 100), 3, closed)
                hogs.start_soon(hog, path, echoed(MIB - 100)[: 900 * 1024], 1, closed)
            await until(lambda: served.server.buffered_bytes > 4 * bound)
            stream = await trio.open_unix_socket(path)
            async with stream:
                with trio.fail_after(limits.SHED_AFTER_S + 5):
                    for _ in range(5):
                        await stream.send_all(echoed(900 * 1024, "z"))
                        [answer] = await read_answers(stream, 1)
                        assert answer["id"].startswith("zzz")
            hogs.cancel_scope.cancel()


def slow_router(release: trio.Event) -> Router:
    routes = router()

    async def slow_close(params: object) -> PingResult:
        await release.wait()
        return PingResult(protocol=1, version="t", pid=1)

    routes.add("session.close", slow_close)  # type: ignore[arg-type]
    return routes


def slow_request(size: int, tag: str) -> bytes:
    head = b'{"jsonrpc":"2.0","method":"session.close","params":{"session_id":"s","epoch":1},"id":"'
    return head + tag.encode() * (size - len(head) - 3) + b'"}\n'


async def test_a_client_sending_or_reading_slowly_is_not_closed_while_others_fill_the_bound(
    tmp_path: Path,
) -> None:
    # requests owed by slow handlers put the daemon over the bound; a client whose line took
    # 0.7 s to arrive (pieces 80 ms apart), or that reads a large answer in pieces, was closed
    # as one that left its line unfinished or its answer unread
    release = trio.Event()
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=2 * MIB)
    async with serving(slow_router(release), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        answered: dict[str, str] = {}

        async def held(tag: str) -> None:
            stream = await trio.open_unix_socket(path)
            async with stream:
                await stream.send_all(slow_request(900 * 1024, tag))
                await read_answers(stream, 1)

        async def sends_slowly() -> None:
            line = echoed(900 * 1024, "z")
            stream = await trio.open_unix_socket(path)
            async with stream:
                for start in range(0, len(line), 100 * 1024):
                    await stream.send_all(line[start : start + 100 * 1024])
                    await trio.sleep(0.08)
                [answer] = await read_answers(stream, 1)
                answered["sender"] = answer["id"][:3]

        async def reads_slowly() -> None:
            stream = await trio.open_unix_socket(path)
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            async with stream:
                await stream.send_all(echoed(900 * 1024, "y"))
                received = b""
                while not received.endswith(b"\n"):
                    received += await stream.receive_some(64 * 1024)
                    await trio.sleep(0.05)
                answered["reader"] = json.loads(received)["id"][:3]

        with trio.fail_after(20):
            async with trio.open_nursery() as clients:
                for tag in "abc":
                    clients.start_soon(held, tag)
                await until(lambda: served.server.buffered_bytes > 2 * MIB)
                clients.start_soon(sends_slowly)
                clients.start_soon(reads_slowly)
                await until(lambda: len(answered) == 2, 15)
                release.set()
        assert answered == {"sender": "zzz", "reader": "yyy"}


def large_answer_router(version_bytes: int) -> Router:
    """daemon.ping answering far more than it was asked: as a search or a batch can."""
    routes = Router()
    version = "v" * version_bytes
    routes.add("daemon.ping", lambda params: PingResult(protocol=1, version=version, pid=1))
    return routes


async def test_a_client_that_never_reads_answers_far_larger_than_its_requests_is_closed(
    tmp_path: Path,
) -> None:
    # a line of 64 pings (3 KB) answered with 16 MiB: counted by its request alone, 24 KB of
    # such lines made the daemon hold 128 MiB for a client that never read, far past the bound,
    # until send_timeout_s, and its memory stayed with the process after
    bound = 2 * MIB
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=bound)
    batch = [{"jsonrpc": "2.0", "id": n, "method": "daemon.ping"} for n in range(64)]
    line = json.dumps(batch).encode() + b"\n"
    async with serving(large_answer_router(256 * 1024), tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        async with trio.open_nursery() as hogs:
            hogs.start_soon(hog, path, line, 8, [])
            await until(lambda: served.server.connections == 2)
            # closed (it sends no more, so it is the server that says so), long before
            # send_timeout_s
            await until(lambda: served.server.connections == 1, limits.SHED_AFTER_S + 5)
            with trio.fail_after(2):  # the others are served as before
                await served.client.send_all(b'{"jsonrpc":"2.0","id":7,"method":"daemon.ping"}\n')
                [answer] = await read_answers(served.client, 1)
            hogs.cancel_scope.cancel()
        assert answer["id"] == 7
        await until(lambda: served.server.buffered_bytes == 0)


async def test_batches_owed_to_a_client_that_does_not_read_are_not_all_made_at_once(
    tmp_path: Path,
) -> None:
    # with handlers that wait (a search, a recall), every batch read was answered at once:
    # eight lines of 3 KB made 128 MiB of answers together before any could be written
    routes = Router()
    version = "v" * 256 * 1024

    async def slow_ping(params: object) -> PingResult:
        await trio.lowlevel.checkpoint()
        return PingResult(protocol=1, version=version, pid=1)

    routes.add("daemon.ping", slow_ping)
    config = ServerConfig(max_message_bytes=MIB, max_buffered_bytes=1024 * MIB)
    batch = [{"jsonrpc": "2.0", "id": n, "method": "daemon.ping"} for n in range(64)]
    line = json.dumps(batch).encode() + b"\n"
    async with serving(routes, tmp_path, config) as served:
        path = str(tmp_path / "s.sock")
        async with trio.open_nursery() as hogs:
            hogs.start_soon(hog, path, line, 8, [])
            await until(lambda: served.server.buffered_bytes > 16 * MIB)
            held = await peak_while(served, 1.5)
            hogs.cancel_scope.cancel()
        # the connection's bound on what it owes (two lines), and the one answer over it
        assert held <= 2 * MIB + len(batch) * (len(version) + 100), f"held {held / MIB:.1f} MiB"
