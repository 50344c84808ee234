"""JSON-RPC dispatch without sockets: every envelope rule and error shape."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
import structlog.testing
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from orcad import limits
from orcad.errors import NotFound
from orcad.rpc import Dispatcher, Router
from protocol.types import PingParams, PingResult, SessionCloseParams

pytestmark = pytest.mark.pure


def ping(params: PingParams) -> PingResult:
    """A handler that cannot block: answered inline."""
    return PingResult(protocol=1, version="test", pid=1)


async def close(params: SessionCloseParams) -> PingResult:
    if params.session_id.startswith("boom"):
        raise RuntimeError(f"secret internal detail about {params.session_id}")
    raise NotFound(f"unknown session {params.session_id!r}")


@pytest.fixture
def dispatcher() -> Dispatcher:
    router = Router()
    router.add("daemon.ping", ping)
    router.add("session.close", close)
    router.mark_ready()
    return Dispatcher(router)


@pytest.fixture(params=["server path", "general path"])
def path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def answer(dispatcher: Dispatcher, message: Any, path: str = "server path") -> Any:
    """Answer as the server does (`begin`, deferring when needed) or via the general path."""
    line = message if isinstance(message, bytes) else json.dumps(message).encode()
    if path == "server path":
        outcome = dispatcher.begin(line)
        reply = await outcome() if callable(outcome) else outcome
    else:
        reply = await dispatcher.handle_line(line)
    return None if reply is None else json.loads(reply)


async def test_ping(dispatcher: Dispatcher, path: str) -> None:
    reply = await answer(
        dispatcher, path=path, message={"jsonrpc": "2.0", "id": 7, "method": "daemon.ping"}
    )
    assert reply == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"protocol": 1, "version": "test", "pid": 1},
    }


async def test_parse_error(dispatcher: Dispatcher, path: str) -> None:
    reply = await answer(dispatcher, path=path, message=b"{not json")
    assert reply["id"] is None
    assert reply["error"]["code"] == -32700
    assert reply["error"]["data"]["kind"] == "parse_error"


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "daemon.ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "daemon.ping"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        {"jsonrpc": "2.0", "id": 1.5, "method": "daemon.ping"},
        {"jsonrpc": "2.0", "id": True, "method": "daemon.ping"},
        {"jsonrpc": "2.0", "id": 1, "method": "daemon.ping", "extra": 1},
        "a string",
        17,
    ],
)
async def test_invalid_requests(dispatcher: Dispatcher, path: str, message: Any) -> None:
    reply = await answer(dispatcher, path=path, message=message)
    assert reply["error"]["code"] == -32600
    assert reply["error"]["data"]["kind"] == "invalid_request"


@pytest.mark.parametrize(
    "message",
    [
        {"method": "daemon.ping"},
        {"jsonrpc": "1.0", "method": "daemon.ping"},
        {"jsonrpc": "2.0", "method": 5},
        {"jsonrpc": "2.0", "method": "daemon.ping", "extra": 1},
        {"foo": "boo"},
    ],
)
async def test_invalid_request_without_id_is_answered_with_a_null_id(
    dispatcher: Dispatcher, path: str, message: Any
) -> None:
    # Not a valid request object, hence not a notification: the sender is owed an error.
    reply = await answer(dispatcher, path=path, message=message)
    assert reply is not None
    assert reply["id"] is None
    assert (reply["error"]["code"], reply["error"]["data"]["kind"]) == (-32600, "invalid_request")
    in_batch = await answer(
        dispatcher, path=path, message=[message, {"jsonrpc": "2.0", "method": "daemon.ping"}]
    )
    assert [(r["id"], r["error"]["code"]) for r in in_batch] == [(None, -32600)]


async def test_empty_batch_is_one_invalid_request(dispatcher: Dispatcher, path: str) -> None:
    reply = await answer(dispatcher, path=path, message=[])
    assert isinstance(reply, dict)
    assert reply["error"]["code"] == -32600


async def test_batch_mixes_results_errors_and_notifications(
    dispatcher: Dispatcher, path: str
) -> None:
    reply = await answer(
        dispatcher,
        path=path,
        message=[
            {"jsonrpc": "2.0", "id": 1, "method": "daemon.ping"},
            {"jsonrpc": "2.0", "method": "daemon.ping"},
            {"jsonrpc": "2.0", "id": 2, "method": "nope"},
            3,
        ],
    )
    assert [r.get("id") for r in reply] == [1, 2, None]
    assert reply[0]["result"]["protocol"] == 1
    assert reply[1]["error"]["code"] == -32601
    assert reply[2]["error"]["code"] == -32600


async def test_a_batch_over_the_limit_is_refused_whole_and_runs_nothing(path: str) -> None:
    # Answers of a batch are written as one line: 8 MiB of `daemon.status` once built a 100 MB
    # answer while every other client waited for it.
    calls: list[int] = []

    def counted_ping(params: PingParams) -> PingResult:
        calls.append(1)
        return ping(params)

    router = Router()
    router.add("daemon.ping", counted_ping)
    router.mark_ready()
    dispatcher = Dispatcher(router)
    request = {"jsonrpc": "2.0", "id": 1, "method": "daemon.ping"}
    full = await answer(dispatcher, path=path, message=[request] * limits.MAX_BATCH_REQUESTS)
    assert len(full) == len(calls) == limits.MAX_BATCH_REQUESTS
    calls.clear()
    for size in (limits.MAX_BATCH_REQUESTS + 1, 100_000):
        reply = await answer(dispatcher, path=path, message=[request] * size)
        assert reply["id"] is None
        assert (reply["error"]["code"], reply["error"]["data"]) == (
            -32600,
            {"kind": "invalid_request", "limit": limits.MAX_BATCH_REQUESTS},
        )
    assert calls == []


async def test_a_batch_holding_a_lone_surrogate_answers_each_request_by_its_id(
    dispatcher: Dispatcher, path: str
) -> None:
    # JSON, but no text: one member holding half a surrogate pair must not take the answers of
    # the others with it (a client matching answers by id would wait for them for ever)
    line = (
        b'[{"jsonrpc": "2.0", "id": 1, "method": "daemon.ping"},'
        b' {"jsonrpc": "2.0", "id": 2, "method": "daemon.ping", "params": {"x": "\\ud800"}},'
        b' {"jsonrpc": "2.0", "method": "daemon.ping", "params": {"y": "\\udfff"}},'
        b' {"jsonrpc": "2.0", "method": "daemon.ping"},'
        b" 3]"
    )
    reply = await answer(dispatcher, line, path)
    assert isinstance(reply, list)
    assert [member["id"] for member in reply] == [1, 2, None]
    not_run, surrogate, not_object = (member["error"] for member in reply)
    assert (not_run["code"], not_run["data"]["kind"]) == (-32600, "invalid_request")
    assert "[1]" in not_run["message"]
    assert (surrogate["code"], surrogate["data"]) == (
        -32602,
        {"kind": "invalid_params", "field": "x"},
    )
    assert not_object["code"] == -32600
    notifications = line.replace(b'"id": 1, ', b"").replace(b'"id": 2, ', b"")
    assert await answer(dispatcher, notifications.replace(b" 3]", b" {}]"), path) == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": '"jsonrpc" must be "2.0"',
                "data": {"kind": "invalid_request"},
            },
        }
    ]


async def test_batch_of_notifications_gets_no_answer(dispatcher: Dispatcher, path: str) -> None:
    assert (
        await answer(dispatcher, path=path, message=[{"jsonrpc": "2.0", "method": "daemon.ping"}])
        is None
    )


async def test_notification_gets_no_answer_even_on_error(dispatcher: Dispatcher, path: str) -> None:
    assert await answer(dispatcher, path=path, message={"jsonrpc": "2.0", "method": "nope"}) is None
    assert (
        await answer(
            dispatcher,
            path=path,
            message={"jsonrpc": "2.0", "method": "daemon.ping", "params": {"x": 1}},
        )
        is None
    )


async def test_unknown_method(dispatcher: Dispatcher, path: str) -> None:
    reply = await answer(
        dispatcher,
        path=path,
        message={"jsonrpc": "2.0", "id": "a", "method": "recall", "params": {}},
    )
    assert reply["id"] == "a"
    assert reply["error"]["code"] == -32601
    assert reply["error"]["data"]["kind"] == "method_not_found"


@pytest.mark.parametrize("params", [[], [1], "x", 0])
async def test_ping_refuses_params_that_are_no_object_as_every_method_does(
    dispatcher: Dispatcher, path: str, params: Any
) -> None:
    for method in ("daemon.ping", "session.close"):
        reply = await answer(
            dispatcher,
            path=path,
            message={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        )
        assert reply["error"]["code"] == -32602, method
        assert reply["error"]["data"] == {"kind": "invalid_params", "field": "params"}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"bogus": 1}, "bogus"),
        ({"ev`il": 1}, "ev`il"),  # an unknown name is reported whole, whatever it holds
        ({"`": 1}, "`"),
        ({"a` - at `$.epoch": 1}, "a` - at `$.epoch"),
        ({"session_id": "s"}, "epoch"),
        ({"session_id": "s", "epoch": "1"}, "epoch"),
        ({"session_id": "s", "epoch": 0}, "epoch"),
        ({"session_id": "", "epoch": 1}, "session_id"),
        ([1, 2], "params"),
    ],
)
async def test_invalid_params_name_the_field(
    dispatcher: Dispatcher, path: str, params: Any, field: str
) -> None:
    reply = await answer(
        dispatcher,
        path=path,
        message={"jsonrpc": "2.0", "id": 1, "method": "session.close", "params": params},
    )
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"kind": "invalid_params", "field": field}
    assert field in reply["error"]["message"]


@pytest.mark.parametrize(
    "params",
    [b'{"session_id":"s","epoch":1e400}', b'{"session_id":"s","epoch":-1e999}', b"[1e400]"],
)
async def test_a_number_out_of_range_in_params_gets_one_answer_whatever_the_path(
    dispatcher: Dispatcher, path: str, params: bytes
) -> None:
    # Valid JSON that no request can hold: the line cannot be read as a request, whether it is
    # answered at once or after startup, alone or in a batch (README, What one client can do).
    line = b'{"jsonrpc":"2.0","id":1,"method":"session.close","params":%s}' % params
    reply = await answer(dispatcher, path=path, message=line)
    assert reply["id"] is None
    assert (reply["error"]["code"], reply["error"]["data"]) == (-32600, {"kind": "invalid_request"})


async def test_daemon_errors_carry_code_and_kind(dispatcher: Dispatcher, path: str) -> None:
    reply = await answer(
        dispatcher,
        path=path,
        message={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session.close",
            "params": {"session_id": "s", "epoch": 1},
        },
    )
    assert reply["error"]["code"] == -32014
    assert reply["error"]["data"]["kind"] == "not_found"


async def test_internal_error_leaks_nothing(dispatcher: Dispatcher, path: str) -> None:
    reply = await answer(
        dispatcher,
        path=path,
        message={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session.close",
            "params": {"session_id": "boom", "epoch": 1},
        },
    )
    assert reply["error"]["code"] == -32603
    assert reply["error"]["data"] == {"kind": "internal"}
    assert "secret internal detail" not in json.dumps(reply)
    assert "Traceback" not in json.dumps(reply)


@settings(max_examples=300)
@given(line=st.binary(max_size=512))
async def test_arbitrary_bytes_get_a_well_formed_answer_or_none(line: bytes) -> None:
    router = Router()
    router.add("daemon.ping", ping)
    router.mark_ready()
    dispatcher = Dispatcher(router)
    outcome = dispatcher.begin(line)
    reply = await outcome() if callable(outcome) else outcome
    assert reply == await dispatcher.handle_line(line)  # both paths agree
    if reply is None:
        return
    decoded = msgspec.json.decode(reply)
    for item in decoded if isinstance(decoded, list) else [decoded]:
        assert item["jsonrpc"] == "2.0"
        assert ("result" in item) != ("error" in item)
        if "error" in item:
            assert item["error"]["code"] in {-32700, -32600, -32601, -32602}
            assert isinstance(item["error"]["data"]["kind"], str)


async def test_before_ready_only_early_methods_answer_and_the_rest_wait() -> None:
    router = Router()
    router.add("daemon.ping", ping, early=True)
    dispatcher = Dispatcher(router)
    ping_line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "daemon.ping"}).encode()
    assert json.loads(dispatcher.begin(ping_line))["result"]["protocol"] == 1  # inline, at once

    close_line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session.close",
            "params": {"session_id": "s", "epoch": 1},
        }
    ).encode()
    outcome = dispatcher.begin(close_line)
    assert callable(outcome)
    answers: list[Any] = []

    async def answer_later() -> None:
        answers.append(json.loads(await outcome()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer_later)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []  # not refused with -32601 while features are being installed
        router.add("session.close", close)
        router.mark_ready()
    assert answers[0]["error"]["data"]["kind"] == "not_found"


def unencodable_ping(params: PingParams) -> Any:
    return {"pid": object()}  # a handler bug: nothing msgspec can encode


async def unencodable_close(params: SessionCloseParams) -> Any:
    return {"at": object()}


async def test_a_result_that_cannot_be_encoded_is_an_internal_error(path: str) -> None:
    router = Router()
    router.add("daemon.ping", unencodable_ping)
    router.add("session.close", unencodable_close)
    router.mark_ready()
    dispatcher = Dispatcher(router)
    close = {"session_id": "s", "epoch": 1}
    for method, params in (("daemon.ping", {}), ("session.close", close)):
        reply = await answer(
            dispatcher,
            path=path,
            message={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        )
        assert (reply["id"], reply["error"]["data"]) == (1, {"kind": "internal"})
    batch = await answer(
        dispatcher,
        path=path,
        message=[
            {"jsonrpc": "2.0", "id": 1, "method": "daemon.ping"},
            {"jsonrpc": "2.0", "id": 2, "method": "nope"},
        ],
    )
    assert [(r["id"], r["error"]["code"]) for r in batch] == [(1, -32603), (2, -32601)]


async def test_internal_error_log_names_the_failure_but_not_its_message(
    dispatcher: Dispatcher, path: str
) -> None:
    with structlog.testing.capture_logs() as logs:
        await answer(
            dispatcher,
            path=path,
            message={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session.close",
                "params": {"session_id": "boom-REQUEST-CONTENT", "epoch": 1},
            },
        )
    (entry,) = [e for e in logs if e["event"] == "rpc.internal_error"]
    assert entry["method"] == "session.close"
    assert entry["error_type"] == "RuntimeError"
    assert "in close" in entry["traceback"]  # the frame that raised
    assert "REQUEST-CONTENT" not in repr(logs)  # the message quoted the request


async def test_requests_waiting_for_a_failed_startup_are_answered_at_once() -> None:
    router = Router()
    router.add("daemon.ping", ping, early=True)
    dispatcher = Dispatcher(router)
    close = {"jsonrpc": "2.0", "id": 2, "method": "session.close"}
    answers: list[Any] = []

    async def wait_for_answer() -> None:
        answers.append(await answer(dispatcher, path="server path", message=close))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_for_answer)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []
        router.mark_failed("the projects directory is not a directory")
    (waited,) = answers
    assert (waited["id"], waited["error"]["code"]) == (2, -32603)
    assert "could not start" in waited["error"]["message"]
    later = await answer(dispatcher, path="general path", message=close)
    assert later["error"]["data"]["kind"] == "internal"
    pinged = await answer(
        dispatcher,
        path="general path",
        message={"jsonrpc": "2.0", "id": 3, "method": "daemon.ping"},
    )
    assert pinged["result"]["protocol"] == 1
