"""Answers of handlers that block (work in a worker thread), on a real socket.

Each request is answered exactly once, whole, in one line, whatever the handler does; answers
on one connection never interleave, and a slow request holds up no other answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog.testing
import trio
import trio.testing

from orcad.rpc import Router
from protocol.types import PingResult, SessionCloseParams
from tests.inprocess import serving as serving_routes

pytestmark = pytest.mark.inprocess

THREADED = PingResult(protocol=1, version="threaded", pid=1)  # any result type does
THREADED_JSON = {"protocol": 1, "version": "threaded", "pid": 1}
LARGE = PingResult(protocol=1, version="x" * (1 << 20), pid=1)  # more than a socket buffer


class Behaviour:
    """What the session.close handler does, chosen by the session id."""

    def __init__(self) -> None:
        self.thread_may_answer = threading.Event()
        self.threads_done = 0
        self.answered = threading.Event()  # a thread's work is done

    async def close(self, params: SessionCloseParams) -> PingResult:
        kind = params.session_id
        if kind == "child tasks":
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, lambda: None)
            return THREADED
        if kind == "hang":
            await trio.sleep_forever()

        def work() -> PingResult:
            if kind == "wait":
                assert self.thread_may_answer.wait(10)
            if kind == "raise in the thread":
                raise RuntimeError("failed before the answer was final")
            self.threads_done += 1
            self.answered.set()
            return LARGE if kind == "large" else THREADED

        result = await trio.to_thread.run_sync(work)
        if kind == "raise after the thread":
            raise RuntimeError("bookkeeping failed after the thread's work")
        return result


def ping(params: object) -> PingResult:
    return PingResult(protocol=1, version="t", pid=1)


def request(request_id: int | None, session_id: str) -> bytes:
    message: dict[str, object] = {
        "jsonrpc": "2.0",
        "method": "session.close",
        "params": {"session_id": session_id, "epoch": 1},
    }
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message).encode() + b"\n"


PING = b'{"jsonrpc":"2.0","id":99,"method":"daemon.ping"}\n'


def routes(behaviour: Behaviour) -> Router:
    router = Router()
    router.add("daemon.ping", ping)
    router.add("session.close", behaviour.close)
    return router


@asynccontextmanager
async def serving(tmp_path: Path, behaviour: Behaviour) -> AsyncIterator[trio.SocketStream]:
    async with serving_routes(routes(behaviour), tmp_path) as served:
        yield served.client


async def read_lines(client: trio.SocketStream, count: int) -> list[dict[str, object]]:
    received = b""
    with trio.fail_after(10):
        while received.count(b"\n") < count:
            chunk = await client.receive_some()
            assert chunk, f"closed after {received[:200]!r}"
            received += chunk
    lines = received.split(b"\n")
    assert lines[count:] == [b""], f"more than {count} answers: {received[:200]!r}"
    return [json.loads(line) for line in lines[:count]]


async def answer_then_ping(client: trio.SocketStream, line: bytes) -> list[dict[str, object]]:
    """The request's answer, then the ping's: a second answer to the request would come
    before the ping's, so the pair shows that it was answered once."""
    await client.send_all(line)
    answers = await read_lines(client, 1)
    await client.send_all(PING)
    return answers + await read_lines(client, 1)


async def test_a_threaded_result_is_the_only_answer(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        answers = await answer_then_ping(client, request(1, "threaded"))
    assert answers[0] == {"jsonrpc": "2.0", "id": 1, "result": THREADED_JSON}
    assert answers[1]["id"] == 99
    assert behaviour.threads_done == 1


async def test_a_failure_in_the_thread_is_answered_as_an_internal_error(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        answers = await answer_then_ping(client, request(1, "raise in the thread"))
    assert answers[0]["error"]["code"] == -32603  # type: ignore[index]
    assert answers[1]["id"] == 99


async def test_a_failure_after_the_thread_is_answered_once_and_logged(tmp_path: Path) -> None:
    behaviour = Behaviour()
    with structlog.testing.capture_logs() as logs:
        async with serving(tmp_path, behaviour) as client:
            answers = await answer_then_ping(client, request(1, "raise after the thread"))
    assert answers[0]["error"]["code"] == -32603  # type: ignore[index]
    assert answers[1]["id"] == 99
    assert behaviour.threads_done == 1
    assert [entry["event"] for entry in logs if entry["log_level"] == "error"] == [
        "rpc.internal_error",
    ]


async def test_a_notification_is_not_answered(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        await client.send_all(request(None, "threaded"))
        await client.send_all(PING)
        answers = await read_lines(client, 1)
    assert answers[0]["id"] == 99


async def test_a_slow_request_holds_up_no_other_answer(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        await client.send_all(request(1, "wait"))
        await trio.testing.wait_all_tasks_blocked()  # its thread waits
        await client.send_all(PING)
        await client.send_all(request(2, "threaded"))
        early = await read_lines(client, 2)
        behaviour.thread_may_answer.set()
        late = await read_lines(client, 1)
    assert sorted(answer["id"] for answer in early) == [2, 99]  # type: ignore[type-var]
    assert late == [{"jsonrpc": "2.0", "id": 1, "result": THREADED_JSON}]


async def test_a_drain_during_a_threaded_request_still_sends_every_answer_owed(
    tmp_path: Path,
) -> None:
    behaviour = Behaviour()
    async with serving_routes(routes(behaviour), tmp_path) as served:
        await served.client.send_all(request(1, "wait"))
        await trio.testing.wait_all_tasks_blocked()  # its thread waits
        await served.client.send_all(PING)
        await trio.testing.wait_all_tasks_blocked()
        drained = served.start_draining()
        await trio.testing.wait_all_tasks_blocked()
        behaviour.thread_may_answer.set()
        answers = await read_lines(served.client, 2)
        with trio.fail_after(10):
            await drained.wait()
    assert sorted(answer["id"] for answer in answers) == [1, 99]  # type: ignore[type-var]


async def test_a_request_cancelled_in_its_handler_ends_cleanly(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving_routes(routes(behaviour), tmp_path) as served:
        await served.client.send_all(request(1, "hang"))
        await trio.testing.wait_all_tasks_blocked()
    # leaving cancelled the request in its handler; nothing may raise out of the server here


async def test_a_handler_with_child_tasks_is_answered_once(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        answers = await answer_then_ping(client, request(1, "child tasks"))
    assert answers[0] == {"jsonrpc": "2.0", "id": 1, "result": THREADED_JSON}
    assert answers[1]["id"] == 99


async def test_an_answer_the_socket_cannot_take_at_once_arrives_whole(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        await client.send_all(request(1, "large"))
        await client.send_all(PING)
        await trio.to_thread.run_sync(behaviour.answered.wait, 10)  # read only after that
        await trio.sleep(0.05)
        answers = await read_lines(client, 2)
    by_id = {answer["id"]: answer for answer in answers}
    assert by_id[1]["result"]["version"] == "x" * (1 << 20)  # type: ignore[index]
    assert by_id[99]["result"]["version"] == "t"  # type: ignore[index]


async def test_a_client_gone_before_its_answer_harms_no_other(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving_routes(routes(behaviour), tmp_path) as served:
        await served.client.send_all(request(1, "wait"))
        await trio.testing.wait_all_tasks_blocked()  # its thread waits
        await served.client.aclose()
        behaviour.thread_may_answer.set()
        other = await trio.open_unix_socket(str(tmp_path / "s.sock"))
        async with other:
            answers = await answer_then_ping(other, request(2, "threaded"))
    assert [answer["id"] for answer in answers] == [2, 99]
