"""Answers written by a handler's worker thread (orcad.rpc.claim_direct_answer), on a real socket.

Each request is answered exactly once, whole, in one line, whatever the handler does after
claiming; other answers on the connection wait for the claim and never interleave with it.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog.testing
import trio
import trio.testing

from orcad.rpc import Router, claim_direct_answer
from orcad.server import _ThreadAnswerWriter
from protocol.types import PingResult, SessionCloseParams
from tests.inprocess import serving as serving_routes

DIRECT = PingResult(protocol=1, version="direct", pid=1)  # any result type does for the router
DIRECT_JSON = {"protocol": 1, "version": "direct", "pid": 1}


class Behaviour:
    """What the session.close handler does, chosen by the session id."""

    def __init__(self) -> None:
        self.thread_may_answer = threading.Event()
        self.claims: list[bool] = []

    async def close(self, params: SessionCloseParams) -> PingResult:
        kind = params.session_id
        if kind == "claim from a child task":
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.claim_in_child)
            return DIRECT
        direct = claim_direct_answer()
        self.claims.append(direct is not None)
        if kind == "claim then hang":
            await trio.sleep_forever()

        def work() -> None:
            if kind == "wait":
                assert self.thread_may_answer.wait(10)
            if kind == "raise before answering":
                raise RuntimeError("failed before the answer was final")
            if direct is not None:
                direct.send(DIRECT)

        await trio.to_thread.run_sync(work)
        if kind == "raise after answering":
            raise RuntimeError("bookkeeping failed after the answer went out")
        if kind == "differs":
            return PingResult(protocol=1, version="other", pid=1)
        return DIRECT

    async def claim_in_child(self) -> None:
        self.claims.append(claim_direct_answer() is not None)


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
            assert chunk, f"closed after {received!r}"
            received += chunk
    lines = received.split(b"\n")
    assert lines[count:] == [b""], f"more than {count} answers: {received!r}"
    return [json.loads(line) for line in lines[:count]]


async def answer_then_ping(client: trio.SocketStream, line: bytes) -> list[dict[str, object]]:
    """The request's answer, then the ping's: a second answer to the request would come
    before the ping's, so the pair shows that it was answered once."""
    await client.send_all(line)
    answers = await read_lines(client, 1)
    await client.send_all(PING)
    return answers + await read_lines(client, 1)


async def test_a_direct_answer_is_the_only_answer(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        answers = await answer_then_ping(client, request(1, "direct"))
    assert answers[0] == {"jsonrpc": "2.0", "id": 1, "result": DIRECT_JSON}
    assert answers[1]["id"] == 99
    assert behaviour.claims == [True]


async def test_a_failure_before_the_direct_answer_is_answered_normally(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        answers = await answer_then_ping(client, request(1, "raise before answering"))
    assert answers[0]["error"]["code"] == -32603  # type: ignore[index]
    assert answers[1]["id"] == 99
    assert behaviour.claims == [True]


async def test_a_failure_after_the_direct_answer_sends_nothing_more(tmp_path: Path) -> None:
    behaviour = Behaviour()
    with structlog.testing.capture_logs() as logs:
        async with serving(tmp_path, behaviour) as client:
            answers = await answer_then_ping(client, request(1, "raise after answering"))
    assert answers[0] == {"jsonrpc": "2.0", "id": 1, "result": DIRECT_JSON}
    assert answers[1]["id"] == 99
    assert behaviour.claims == [True]
    assert [entry["event"] for entry in logs if entry["log_level"] == "error"] == [
        "rpc.error_after_direct_answer",  # the client has its answer; the error is logged only
        "rpc.internal_error",
    ]


async def test_a_returned_result_unlike_the_direct_answer_is_logged(tmp_path: Path) -> None:
    behaviour = Behaviour()
    with structlog.testing.capture_logs() as logs:
        async with serving(tmp_path, behaviour) as client:
            await client.send_all(request(1, "differs"))
            answers = await read_lines(client, 1)
    assert answers == [{"jsonrpc": "2.0", "id": 1, "result": DIRECT_JSON}]
    assert any(entry["event"] == "rpc.direct_answer_differs" for entry in logs)


async def test_a_notification_claims_nothing(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        await client.send_all(request(None, "direct"))
        await client.send_all(PING)
        answers = await read_lines(client, 1)
    assert answers[0]["id"] == 99
    assert behaviour.claims == [False]


async def test_other_answers_wait_for_the_claim_and_never_interleave(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        await client.send_all(request(1, "wait"))
        await trio.testing.wait_all_tasks_blocked()  # claimed; its thread waits
        await client.send_all(PING)
        await client.send_all(request(2, "direct"))
        with trio.move_on_after(0.2):
            early = await client.receive_some()
            raise AssertionError(f"answered while the claim was held: {early!r}")
        behaviour.thread_may_answer.set()
        answers = await read_lines(client, 3)
    assert [answer["id"] for answer in answers] == [1, 99, 2]
    # the third request found the writer taken and was answered the usual way
    assert behaviour.claims == [True, False]


async def test_a_drain_during_a_claim_still_sends_every_answer_owed(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving_routes(routes(behaviour), tmp_path) as served:
        await served.client.send_all(request(1, "wait"))
        await trio.testing.wait_all_tasks_blocked()  # claimed; its thread waits
        await served.client.send_all(PING)  # read, answered, but queued behind the claim
        await trio.testing.wait_all_tasks_blocked()
        drained = served.start_draining()
        await trio.testing.wait_all_tasks_blocked()
        behaviour.thread_may_answer.set()
        answers = await read_lines(served.client, 2)
        with trio.fail_after(10):
            await drained.wait()
    assert sorted(answer["id"] for answer in answers) == [1, 99]  # type: ignore[type-var]


async def test_a_request_cancelled_while_it_holds_the_claim_ends_cleanly(
    tmp_path: Path,
) -> None:
    behaviour = Behaviour()
    async with serving_routes(routes(behaviour), tmp_path) as served:
        await served.client.send_all(request(1, "claim then hang"))
        await trio.testing.wait_all_tasks_blocked()
        assert behaviour.claims == [True]
    # leaving cancelled the request in its handler; releasing the claim from any other task
    # than the one that made it would have raised out of the server's nursery here


async def test_only_the_requests_own_task_can_claim(tmp_path: Path) -> None:
    behaviour = Behaviour()
    async with serving(tmp_path, behaviour) as client:
        await client.send_all(request(1, "claim from a child task"))
        answers = await read_lines(client, 1)
    assert answers == [{"jsonrpc": "2.0", "id": 1, "result": DIRECT_JSON}]
    assert behaviour.claims == [False]


async def test_an_answer_the_socket_cannot_take_is_finished_by_the_event_loop() -> None:
    ours, peer = socket.socketpair()
    with ours, peer:
        ours.setblocking(False)
        while True:  # fill the peer's receive buffer and our send buffer
            try:
                ours.send(b"x" * 65536)
            except BlockingIOError:
                break
        send_lock = trio.Lock()
        writer = _ThreadAnswerWriter(ours.fileno(), send_lock)
        assert writer.claim()
        assert not writer.claim()  # one claim per request
        answer = b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
        await trio.to_thread.run_sync(writer.write_from_thread, answer)
        assert writer.remaining(b"the loop's own answer") == answer
        assert send_lock.locked()  # held until the request's task ends
        send_lock.release()


async def test_a_partly_written_answer_leaves_its_exact_rest_to_the_event_loop() -> None:
    ours, peer = socket.socketpair()
    with ours, peer:
        ours.setblocking(False)
        peer.setblocking(False)
        while True:  # fill both buffers, then make a little room
            try:
                ours.send(b"x" * 4096)
            except BlockingIOError:
                break
        drained = 0
        while drained < 65536:
            drained += len(peer.recv(65536))
        writer = _ThreadAnswerWriter(ours.fileno(), trio.Lock())
        assert writer.claim()
        answer = bytes(range(256)) * 4096  # 1 MiB: more than the room made
        await trio.to_thread.run_sync(writer.write_from_thread, answer)
        rest = writer.remaining(b"unused")
        assert rest is not None and 0 < len(rest) < len(answer)
        assert answer.endswith(rest)  # what went out is exactly the start of the answer
        with pytest.raises(RuntimeError):
            writer.write_from_thread(answer)  # once only


async def test_a_closed_peer_is_reported_as_gone() -> None:
    ours, peer = socket.socketpair()
    with ours:
        peer.close()
        writer = _ThreadAnswerWriter(ours.fileno(), trio.Lock())
        assert writer.claim()
        await trio.to_thread.run_sync(writer.write_from_thread, b"{}\n")
        try:
            writer.remaining(b"{}\n")
        except trio.BrokenResourceError:
            pass
        else:
            raise AssertionError("a write to a closed peer must count as a client gone")
