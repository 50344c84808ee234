"""`orcactl mcp`'s first answers from its cache, before the MCP SDK has loaded: the thread that
gives them on real pipes, the cache file, and the server run by the SDK's own client."""

from __future__ import annotations

import contextlib
import json
import os
import select
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from orcactl.mcp_handshake import (
    CACHE_FORMAT,
    EARLY_ANSWERS_MAX_BYTES,
    EARLY_LINE_MAX_BYTES,
    EarlyAnswers,
    Handover,
    Recorder,
    code_key,
    filter_key,
    load_answers,
    save_answers,
)

pytestmark = pytest.mark.inprocess

VERSION = "2025-06-18"
INITIALIZE_RESULT = {
    "protocolVersion": VERSION,
    "capabilities": {"tools": {"listChanged": False}},
    "serverInfo": {"name": "orca", "version": "1"},
}
TOOLS_RESULT = {"tools": [{"name": "recall", "inputSchema": {"type": "object"}}]}
CLIENT = {"name": "t", "version": "0"}
# the stateless revision: no initialize; every request names its version in `_meta`
STATELESS = "2026-07-28"
META = "io.modelcontextprotocol/"
DISCOVER_RESULT = {
    "capabilities": {"tools": {"listChanged": True}},
    "supportedVersions": [STATELESS],
}
STATELESS_TOOLS = {**TOOLS_RESULT, "resultType": "complete", "ttlMs": 0}
STATELESS_ANSWERS = {
    "server/discover": DISCOVER_RESULT,
    "tools/list": STATELESS_TOOLS,
    "prompts/list": {"prompts": [], "resultType": "complete"},
    "resources/list": {"resources": [], "resultType": "complete"},
}
# what Claude Code 2.1.332 writes to an MCP server it has just started; 2.1.337 writes the same
# lines but for the version it names, and Codex 0.171.0 starts with initialize
RECORDED = Path(__file__).parent / "recorded"
CLAUDE_START = RECORDED / "claude-code-2.1.332" / "mcp-start.jsonl"
CLAUDE_STARTS = [CLAUDE_START, RECORDED / "claude-code-2.1.337" / "mcp-start.jsonl"]
CODEX_START = RECORDED / "codex-0.171.0" / "mcp-start.jsonl"
CLAUDE_FILTER = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}
# the SDK's acknowledgement of a subscription to CLAUDE_FILTER, without the subscription's id
ACKNOWLEDGEMENT = {"notifications": CLAUDE_FILTER}
KNOWN = {
    VERSION: {"initialize": INITIALIZE_RESULT, "tools/list": TOOLS_RESULT},
    STATELESS: {
        **STATELESS_ANSWERS,
        "subscriptions/listen": {filter_key({"notifications": CLAUDE_FILTER}): ACKNOWLEDGEMENT},
    },
}


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _initialize(request_id: object = 1, version: str = VERSION, **params: Any) -> bytes:
    """An initialize line; `params` replace its members (capabilities, clientInfo)."""
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
        **params,
    }
    return _line({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params})


INITIALIZED = _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
TOOLS_LIST = _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
TOOLS_CALL = _line(
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recall"}}
)


@contextmanager
def early_answers(sent: bytes, *, close_input: bool = True) -> Iterator[tuple[EarlyAnswers, int]]:
    """The thread on two real pipes, `sent` already written to its stdin; yields it and the
    read end of its stdout."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()

    def send() -> None:  # from a thread of its own: more than a pipe holds may be sent
        with contextlib.suppress(OSError):  # the thread stopped reading: the rest stays unsent
            os.write(stdin_write, sent)
        if close_input:
            os.close(stdin_write)

    sender = threading.Thread(target=send, daemon=True)
    early = EarlyAnswers("key", KNOWN, stdin_read, stdout_write)
    early.start()
    sender.start()
    try:
        yield early, stdout_read
    finally:
        for descriptor in (stdin_read, stdout_read, stdout_write):
            os.close(descriptor)
        sender.join(timeout=30)
        if not close_input:
            os.close(stdin_write)


def _answers(early: EarlyAnswers, stdout: int, expected: int) -> tuple[Handover, list[Any]]:
    """The handover and every answer written: `expected` answers are waited for before the
    thread is stopped; with none expected, the thread must stop by itself (a line it leaves
    to the SDK). Whatever else was written by the handover is read too."""
    written = b""
    deadline = time.monotonic() + 30
    while written.count(b"\n") < expected and time.monotonic() < deadline:
        if select.select([stdout], [], [], 1)[0]:
            written += os.read(stdout, 1 << 20)
    if expected == 0:
        early._thread.join(timeout=30)
        assert not early._thread.is_alive()
    handover = early.take_over()
    os.set_blocking(stdout, False)
    with contextlib.suppress(BlockingIOError):
        written += os.read(stdout, 1 << 20)
    return handover, [json.loads(line) for line in written.splitlines()]


def test_the_handshake_is_answered_from_the_cache_and_everything_read_is_handed_over() -> None:
    sent = _initialize() + INITIALIZED + TOOLS_LIST + TOOLS_CALL + b'{"jsonrpc": "2.0", "id": 4'
    with early_answers(sent) as (early, stdout):
        early._thread.join(timeout=30)  # tools/call ends its reading
        handover, answers = _answers(early, stdout, 2)
    assert answers == [
        {"jsonrpc": "2.0", "id": 1, "result": INITIALIZE_RESULT},
        {"jsonrpc": "2.0", "id": 2, "result": TOOLS_RESULT},
    ]
    # the SDK reads it all again, from the first line: it is initialized by the client's own
    # initialize, and tools/call (which no cache answers) and the rest are its to answer
    assert handover.read == sent
    assert handover.answered == {"1", "2"}


def test_a_ping_after_initialize_is_answered_and_ids_keep_their_type() -> None:
    ping = _line({"jsonrpc": "2.0", "id": "1", "method": "ping"})
    with early_answers(_initialize(1) + ping) as (early, stdout):
        handover, answers = _answers(early, stdout, 2)
    assert answers[1] == {"jsonrpc": "2.0", "id": "1", "result": {}}
    assert handover.answered == {"1", '"1"'}


def test_take_over_while_the_client_is_quiet_stops_reading_at_once() -> None:
    with early_answers(_initialize(), close_input=False) as (early, stdout):
        handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]
    assert handover.read == _initialize()


def _stateless(
    request_id: object, method: str, meta: dict[str, Any] | None = None, **params: Any
) -> bytes:
    """A request of the stateless revision; `meta` replaces members of its `_meta`."""
    envelope = {
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}},
        **(meta or {}),
    }
    envelope = {name: value for name, value in envelope.items() if value is not None}
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    return _line({**message, "params": {"_meta": envelope, **params}})


@pytest.mark.parametrize("start", CLAUDE_STARTS, ids=lambda path: path.parent.name)
def test_claude_codes_start_is_answered_from_the_cache_its_subscription_acknowledged(
    start: Path,
) -> None:
    sent = start.read_bytes()
    with early_answers(sent) as (early, stdout):
        early._thread.join(timeout=30)  # it read every line and the end of input
        handover, answers = _answers(early, stdout, 6)
    # each request answered with the cached answer for its method, in the order asked; the
    # subscription (a stream that stays open, which Claude Code waits to see acknowledged
    # before it asks anything more) acknowledged as the SDK acknowledged it, by its own id
    acknowledged = {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {f"{META}subscriptionId": "listen:0"}, **ACKNOWLEDGEMENT},
    }
    assert [answer.get("result", answer) for answer in answers] == [
        DISCOVER_RESULT,
        acknowledged,
        DISCOVER_RESULT,
        STATELESS_ANSWERS["prompts/list"],
        STATELESS_ANSWERS["resources/list"],
        STATELESS_TOOLS,
    ]
    assert [answer.get("id") for answer in answers] == ["server-discover-probe-1", None, 0, 1, 2, 3]
    assert handover.read == sent and handover.ended
    assert handover.answered == {'"server-discover-probe-1"', "0", "1", "2", "3"}
    # the SDK serves the stream once loaded; its own acknowledgement is then not sent again
    assert handover.acknowledged == {'"listen:0"'}


def test_codexs_start_is_answered_from_the_cache() -> None:
    # its initialize names capabilities of its own (experimental codex/auth-change, elicitation
    # by form and url) and its tools/list a progress token: none of them sends it to the SDK
    sent = CODEX_START.read_bytes()
    with early_answers(sent) as (early, stdout):
        early._thread.join(timeout=30)
        handover, answers = _answers(early, stdout, 2)
    assert answers == [
        {"jsonrpc": "2.0", "id": 0, "result": INITIALIZE_RESULT},
        {"jsonrpc": "2.0", "id": 1, "result": TOOLS_RESULT},
    ]
    assert handover.read == sent and handover.ended
    assert handover.answered == {"0", "1"}


def test_a_subscription_to_other_notifications_is_left_to_the_sdk_to_acknowledge() -> None:
    other = _stateless("listen:0", "subscriptions/listen", notifications={"toolsListChanged": True})
    with early_answers(other + _stateless(1, "tools/list")) as (early, stdout):
        early._thread.join(timeout=30)
        handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]  # read on, nothing acknowledged
    assert handover.acknowledged == set()


def test_a_second_subscription_of_the_same_id_is_left_to_the_sdk_with_all_after_it() -> None:
    # the SDK acknowledges each of the two, and its first acknowledgement alone is not sent
    # again: acknowledging both from the cache wrote the second one twice
    listen = _stateless("l", "subscriptions/listen", notifications=CLAUDE_FILTER)
    sent = listen + listen + _stateless(1, "tools/list")
    with early_answers(sent) as (early, stdout):
        early._thread.join(timeout=30)  # the second subscription ends its reading
        handover, answers = _answers(early, stdout, 1)
    assert answers == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {"_meta": {f"{META}subscriptionId": "l"}, **ACKNOWLEDGEMENT},
        }
    ]
    assert handover.acknowledged == {'"l"'}
    assert handover.answered == set()
    assert handover.read == sent


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(
            _stateless(1, "tools/list", {f"{META}protocolVersion": VERSION}),
            id="a version of the handshake",
        ),
        pytest.param(
            _stateless(1, "tools/list", {f"{META}protocolVersion": "2099-01-01"}),
            id="a version the cache has no answer for",
        ),
        pytest.param(
            _stateless(1, "tools/list", {f"{META}clientInfo": {"name": 5, "version": "0"}}),
            id="a name that is no text",
        ),
        pytest.param(_stateless(1, "tools/list", {f"{META}clientInfo": None}), id="no client"),
        pytest.param(
            _stateless(1, "tools/list", {f"{META}clientCapabilities": None}), id="no capabilities"
        ),
        pytest.param(
            _stateless(1, "tools/list", {f"{META}clientCapabilities": {"roots": 5}}),
            id="capabilities the SDK refuses",
        ),
        pytest.param(
            _stateless(1, "tools/list", {"example.com/other": 1}),
            id="a member of _meta not known here",
        ),
        pytest.param(_stateless(1, "tools/list", cursor="x"), id="a cursor"),
        pytest.param(
            _line({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}), id="no params"
        ),
        pytest.param(_stateless(1, "ping"), id="ping, which the stateless revision has not"),
        pytest.param(_stateless(1, "tools/call", name="recall"), id="a tool call"),
        pytest.param(
            _stateless(1, "subscriptions/listen", {f"{META}protocolVersion": VERSION}),
            id="a subscription of another version",
        ),
    ],
)
def test_a_stateless_request_the_cache_does_not_answer_is_left_to_the_sdk_with_all_after_it(
    first: bytes,
) -> None:
    sent = first + _stateless(7, "server/discover") + _stateless(8, "tools/list")
    with early_answers(sent) as (early, stdout):
        handover, answers = _answers(early, stdout, 0)
    assert answers == []
    assert handover.read == sent
    assert handover.answered == set()


def test_subscriptions_are_passed_over_twice_at_most_and_never_after_initialize() -> None:
    listen = [_stateless(f"listen:{n}", "subscriptions/listen", notifications={}) for n in range(3)]
    sent = (
        listen[0]
        + listen[1]
        + _stateless(1, "tools/list")
        + listen[2]
        + _stateless(2, "tools/list")
    )
    with early_answers(sent) as (early, stdout):
        early._thread.join(timeout=30)
        handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]  # the third subscription ends it
    assert handover.answered == {"1"}
    with early_answers(_initialize() + listen[0] + TOOLS_LIST) as (early, stdout):
        early._thread.join(timeout=30)
        handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]


def test_one_revision_at_a_time() -> None:
    # a client that asked in one revision is not answered in the other: the SDK judges that
    with early_answers(_stateless(1, "server/discover") + _initialize(2)) as (early, stdout):
        early._thread.join(timeout=30)
        _handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]
    with early_answers(_initialize(1) + _stateless(2, "server/discover")) as (early, stdout):
        early._thread.join(timeout=30)
        _handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(_initialize(version="2024-11-05"), id="a version the cache has no answer for"),
        pytest.param(TOOLS_LIST, id="tools/list before initialize"),
        pytest.param(_line({"jsonrpc": "2.0", "id": 1, "method": "ping"}), id="ping first"),
        pytest.param(_initialize(request_id=True), id="an id that is no string or integer"),
        pytest.param(_initialize(request_id=None), id="a null id"),
        pytest.param(
            _line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
            id="initialize without its params",
        ),
        pytest.param(_initialize()[:-2] + b', "extra": 1}\n', id="a member JSON-RPC does not have"),
        pytest.param(_initialize().replace(b'"t"', b'"\\ud800"'), id="a lone surrogate"),
        pytest.param(b"[" * 1_000 + b"]" * 1_000 + b"\n", id="nesting too deep"),
        pytest.param(b"not json\n", id="not JSON"),
        pytest.param(_initialize().replace(b'"2.0"', b'"1.0"'), id="another JSON-RPC version"),
    ],
)
def test_a_line_the_cache_does_not_answer_is_left_to_the_sdk_with_all_after_it(
    first: bytes,
) -> None:
    sent = first + _initialize(7) + TOOLS_LIST
    with early_answers(sent) as (early, stdout):
        handover, answers = _answers(early, stdout, 0)
    assert answers == []
    assert handover.read == sent
    assert handover.answered == set()


def test_a_repeated_id_or_a_second_initialize_goes_to_the_sdk() -> None:
    repeated = _line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    with early_answers(_initialize() + repeated + TOOLS_LIST) as (early, stdout):
        early._thread.join(timeout=30)
        handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]
    assert handover.answered == {"1"}
    with early_answers(_initialize() + _initialize(2)) as (early, stdout):
        early._thread.join(timeout=30)
        handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]


def test_tools_list_with_a_cursor_goes_to_the_sdk() -> None:
    paged = _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "x"}})
    with early_answers(_initialize() + paged) as (early, stdout):
        early._thread.join(timeout=30)
        _handover, answers = _answers(early, stdout, 1)
    assert [answer["id"] for answer in answers] == [1]


def test_a_long_line_without_an_end_stops_the_early_answers() -> None:
    sent = _initialize() + b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "x": "' + b"a" * 70_000
    with early_answers(sent, close_input=False) as (early, stdout):
        handover, answers = _answers(early, stdout, 0)  # it ends by itself, not at take_over
    assert [answer["id"] for answer in answers] == [1]
    # what it read goes to the SDK, whose own bound refuses the line once it is whole
    assert sent.startswith(handover.read) and len(handover.read) > EARLY_LINE_MAX_BYTES


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("XDG_CACHE_HOME",):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path / ".cache" / "orca" / "mcp-handshake.json"


def test_the_cache_is_read_back_only_under_its_key(cache_home: Path) -> None:
    save_answers("k1", KNOWN)
    assert load_answers("k1") == KNOWN
    assert load_answers("k2") == {}
    assert cache_home.stat().st_mode & 0o777 == 0o600  # orcactl's umask is 077; tests' may not be
    assert oct(cache_home.parent.stat().st_mode & 0o077) == "0o0"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"[]",
        json.dumps({"format": CACHE_FORMAT + 1, "key": "k", "versions": KNOWN}).encode(),
        json.dumps({"format": CACHE_FORMAT, "key": "k", "versions": []}).encode(),
        json.dumps({"format": CACHE_FORMAT, "key": "k", "versions": {VERSION: {}}}).encode(),
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "key": "k",
                "versions": {VERSION: {"initialize": {}, "tools/list": []}},
            }
        ).encode(),
        # answers too long to write before the SDK takes over without a client reading them
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "key": "k",
                "versions": {
                    VERSION: {"initialize": {"x": "a" * EARLY_ANSWERS_MAX_BYTES}, "tools/list": {}}
                },
            }
        ).encode(),
        # the stateless revision's answers, one every client asks for missing (the lists of
        # prompts and resources are kept only once a client has asked for them)
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "key": "k",
                "versions": {STATELESS: {m: {} for m in STATELESS_ANSWERS if m != "tools/list"}},
            }
        ).encode(),
        # acknowledgements that are not objects, or in a handshake's entry
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "key": "k",
                "versions": {STATELESS: {**STATELESS_ANSWERS, "subscriptions/listen": {"{}": []}}},
            }
        ).encode(),
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "key": "k",
                "versions": {VERSION: {**KNOWN[VERSION], "subscriptions/listen": {}}},
            }
        ).encode(),
        # an acknowledgement whose _meta is no object, which no acknowledgement is sent with
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "key": "k",
                "versions": {
                    STATELESS: {**STATELESS_ANSWERS, "subscriptions/listen": {"{}": {"_meta": "x"}}}
                },
            }
        ).encode(),
        # a lone surrogate, which no answer line can carry
        b'{"format": 1, "key": "k", "versions": {"v": {"initialize": {"x": "\\ud800"}, '
        b'"tools/list": {}}}}',
    ],
)
def test_a_damaged_cache_is_no_cache(cache_home: Path, content: bytes) -> None:
    cache_home.parent.mkdir(parents=True)
    cache_home.write_bytes(content)
    assert load_answers("k") == {}


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_cache_that_is_no_regular_file_is_never_waited_on(cache_home: Path, kind: str) -> None:
    cache_home.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(cache_home)  # opened for reading, it waits for a writer that never comes
    elif kind == "device":
        cache_home.symlink_to("/dev/zero")  # read, it never ends
    else:
        cache_home.mkdir()
    assert load_answers("k") == {}


def test_a_cache_that_cannot_be_written_is_only_slower(cache_home: Path) -> None:
    cache_home.parent.parent.mkdir(parents=True)
    cache_home.parent.write_text("a file where the cache directory goes")
    save_answers("k", KNOWN)  # no exception
    assert load_answers("k") == {}


def test_servers_recording_side_by_side_keep_each_others_answers(cache_home: Path) -> None:
    # both found the cache empty; each writes its own version's answers once it has them
    first, second = Recorder("k", load_answers("k")), Recorder("k", load_answers("k"))
    for recorder, version in ((first, VERSION), (second, "2025-11-25")):
        initialize = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT}
        recorder.asked(1, "initialize", initialize)
        recorder.asked(2, "tools/list", None)
    for recorder in (first, second):
        recorder.answered(1, INITIALIZE_RESULT)
        recorder.answered(2, TOOLS_RESULT)
    assert set(load_answers("k")) == {VERSION, "2025-11-25"}


def test_a_stateless_clients_answers_are_recorded_under_the_version_it_names(
    cache_home: Path,
) -> None:
    save_answers("k", {VERSION: KNOWN[VERSION]})
    recorder = Recorder("k", load_answers("k"))
    requests = [json.loads(line) for line in CLAUDE_START.read_bytes().splitlines()]
    for request in requests:
        recorder.asked(request["id"], request["method"], request["params"])
    assert not recorder.wants("listen:0")  # a stream, not an answer to keep
    # a request the SDK refused (an error, no result): nothing to record
    recorder.asked(9, "tools/list", {"_meta": {**requests[-1]["params"]["_meta"]}})
    recorder.answered(9, None)
    by_method = {
        "server/discover": DISCOVER_RESULT,
        **{m: STATELESS_ANSWERS[m] for m in ("prompts/list", "resources/list")},
        "tools/list": STATELESS_TOOLS,
    }
    for request in requests:
        if recorder.wants(request["id"]):
            before = load_answers("k")
            recorder.answered(request["id"], by_method[request["method"]])
    assert before == {VERSION: KNOWN[VERSION]}  # written once every method is known
    assert load_answers("k") == {**KNOWN, STATELESS: STATELESS_ANSWERS}  # beside the handshake's
    # the SDK's acknowledgement of the subscription, kept by the notifications asked for
    params = {"_meta": {f"{META}subscriptionId": "listen:0"}, **ACKNOWLEDGEMENT}
    assert recorder.acknowledged(params) == '"listen:0"'
    assert load_answers("k") == KNOWN
    assert recorder.acknowledged({"_meta": {}}) is None  # names no subscription


def _record_a_stateless_session(notifications: dict[str, Any]) -> None:
    """What one server records of a stateless client that lists everything and subscribes to
    `notifications`, which the SDK acknowledges as asked."""
    recorder = Recorder("k", load_answers("k"))
    requests = [json.loads(line) for line in CLAUDE_START.read_bytes().splitlines()]
    by_method = {**STATELESS_ANSWERS, "tools/list": STATELESS_TOOLS}
    for request in requests:
        params = request["params"]
        if request["method"] == "subscriptions/listen":
            params = {**params, "notifications": notifications}
        recorder.asked(request["id"], request["method"], params)
    for request in requests:
        if recorder.wants(request["id"]):
            recorder.answered(request["id"], by_method[request["method"]])
    meta = {"_meta": {f"{META}subscriptionId": "listen:0"}}
    assert recorder.acknowledged({**meta, "notifications": notifications}) == '"listen:0"'


def test_acknowledgements_recorded_for_ever_new_notifications_never_crowd_out_the_answers(
    cache_home: Path,
) -> None:
    # each subscription to notifications not asked for before added an acknowledgement: once
    # they outgrew what is answered early, no client was answered from the cache at its next
    # start (and the next recording started over)
    _record_a_stateless_session(CLAUDE_FILTER)
    for number in range(40):
        uri = f"file:///{number}/" + "x" * 2000
        _record_a_stateless_session({**CLAUDE_FILTER, "resourceSubscriptions": [uri]})
        recorded = load_answers("k").get(STATELESS, {})
        assert set(recorded) == {*STATELESS_ANSWERS, "subscriptions/listen"}, number
        assert (
            filter_key({"notifications": {"resourceSubscriptions": [uri], **CLAUDE_FILTER}})
            in (recorded["subscriptions/listen"])
        )
    # the one most asked for is kept as long as it is asked for
    _record_a_stateless_session(CLAUDE_FILTER)
    assert load_answers("k")[STATELESS]["subscriptions/listen"][
        filter_key({"notifications": CLAUDE_FILTER})
    ] == {"notifications": CLAUDE_FILTER}
    assert cache_home.stat().st_size < 64 * 1024


def test_the_key_changes_with_the_code_it_stands_for(tmp_path: Path) -> None:
    key = code_key()
    assert key is not None and key == code_key()
    source = Path(__file__).parent.parent / "orcactl" / "mcp_handshake.py"
    status = source.stat()
    try:
        os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns + 1))
        assert code_key() not in (None, key)
    finally:
        os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert code_key() == key
