"""Names a client gives over the socket (session, turn, worker, provider and model): one
holding a control character is refused wherever it enters."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import RemoteError
from protocol.types import JobCounts
from tests.harness import DaemonProcess

pytestmark = pytest.mark.daemon

# C0 controls (a newline, also a final one, a tab, an escape, NUL), DEL and a C1 control (NEL)
CONTROLLED_IDS = [
    "two\nlines",
    "ends-in-newline\n",
    "tab\there",
    "\x1b[2Jclear",
    "nul\x00",
    "del\x7f",
    "nel\x85",
]

# every other method that takes a session id, with the rest of its params well formed
SESSION_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("session.close", {"epoch": 1}),
    ("recall", {"epoch": 1, "turn_id": "t1", "prompt": "how do we deploy?"}),
    ("remember", {"epoch": 1, "text": "We deploy with make", "scope": "user"}),
    ("memory.search", {"epoch": 1}),
    ("memory.manage", {"epoch": 1, "action": "forget", "id": "mem_" + "0" * 32}),
    ("memory.approve", {"epoch": 1, "approval_id": "apr_" + "0" * 32, "decision": "deny"}),
    (
        "turn.completed",
        {
            "epoch": 1,
            "turn_id": "t1",
            "outcome": "succeeded",
            "verifier": "passed",
            "transcript_committed": True,
            "messages": [{"role": "user", "content": "We deploy with make"}],
        },
    ),
    ("grants.list", {}),
]


def _refusal(daemon: DaemonProcess, method: str, params: dict[str, Any]) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        daemon.call(method, params)
    return caught.value


def _stored_session_ids(daemon: DaemonProcess) -> list[str]:
    """The sessions in the state database, read only (it is made at the first open)."""
    path = daemon.orca.memory_root / "daemon-state.sqlite3"
    if not path.exists():
        return []
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        tables = db.execute("SELECT name FROM sqlite_master WHERE name = 'sessions'").fetchall()
        return [row[0] for row in db.execute("SELECT session_id FROM sessions")] if tables else []
    finally:
        db.close()


@pytest.mark.parametrize("session_id", CONTROLLED_IDS, ids=ascii)
def test_a_session_id_with_a_control_character_is_refused_naming_it_and_opens_nothing(
    daemon: DaemonProcess, tmp_path: Path, session_id: str
) -> None:
    # such an id was opened and stored: a newline in it broke orcactl's tables and log readers
    for join in (False, True):
        params = {"cwd": str(tmp_path), "session_id": session_id, "join": join}
        refused = _refusal(daemon, "session.open", params)
        assert (refused.code, refused.data["field"]) == (-32602, "session_id")
        assert "control character" in refused.error.message
    assert daemon.call("daemon.status").sessions == 0
    assert _stored_session_ids(daemon) == []
    assert "session.opened" not in [event["event"] for event in daemon.log_events()]
    for method, rest in SESSION_CALLS:
        refused = _refusal(daemon, method, {**rest, "session_id": session_id})
        assert (refused.code, refused.data["field"]) == (-32602, "session_id"), method


def test_a_session_id_of_printable_characters_from_any_script_still_opens(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    session_id = "claude-code:séance-日本-0199a213"
    opened = daemon.call("session.open", {"cwd": str(tmp_path), "session_id": session_id})
    assert opened.session_id == session_id
    assert _stored_session_ids(daemon) == [session_id]


@pytest.mark.parametrize("turn_id", CONTROLLED_IDS, ids=ascii)
def test_a_turn_id_with_a_control_character_is_refused_and_nothing_is_captured(
    daemon: DaemonProcess, tmp_path: Path, turn_id: str
) -> None:
    # a turn id is kept with every fact it gave and shown in recall and orcactl's tables, as a
    # session id is
    opened = daemon.call("session.open", {"cwd": str(tmp_path)})
    ids = {"session_id": opened.session_id, "epoch": opened.epoch}
    turn = dict(SESSION_CALLS[-2][1], **ids, turn_id=turn_id)
    refused = _refusal(daemon, "turn.completed", turn)
    assert (refused.code, refused.data["field"]) == (-32602, "turn_id")
    assert "control character" in refused.error.message
    assert daemon.call("daemon.status").jobs == JobCounts()  # no job, in any state
    recall = {**ids, "turn_id": turn_id, "prompt": "how do we deploy?"}
    refused = _refusal(daemon, "recall", recall)
    assert (refused.code, refused.data["field"]) == (-32602, "turn_id")


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("jobs.claim", {"worker": "w\n1"}, "worker"),
        ("jobs.publish", {"provider": "openai\x1b[2J", "model": "m"}, "provider"),
        ("jobs.publish", {"provider": "openai", "model": "gpt\n-4o"}, "model"),
    ],
)
def test_a_worker_provider_or_model_name_with_a_control_character_is_refused(
    daemon: DaemonProcess, method: str, params: dict[str, Any], field: str
) -> None:
    # an external worker's names are logged and kept with the job and its facts
    job = {"job_id": "job_" + "0" * 32, "token": 1, "output": '{"facts": []}'}
    full = {**job, **params} if method == "jobs.publish" else params
    refused = _refusal(daemon, method, full)
    assert (refused.code, refused.data["field"]) == (-32602, field)
    assert "control character" in refused.error.message


@pytest.mark.parametrize(("method", "params"), SESSION_CALLS, ids=[m for m, _ in SESSION_CALLS])
def test_a_session_id_is_at_most_256_characters_in_every_call(
    daemon: DaemonProcess, method: str, params: dict[str, Any]
) -> None:
    # 256, the longest session.open gives: an unknown session; one more: bad params, by name
    longest = daemon.call("session.open", {"cwd": "/", "session_id": "s" * 256})
    assert longest.session_id == "s" * 256
    if method == "grants.list":  # a filter: an unknown session has no grants
        assert daemon.call(method, {**params, "session_id": "u" * 256}).grants == []
    else:
        unknown = _refusal(daemon, method, {**params, "session_id": "u" * 256})
        assert unknown.code == -32014, unknown.error
    longer = _refusal(daemon, method, {**params, "session_id": "u" * 257})
    assert longer.code == -32602 and longer.error.data["field"] == "session_id", longer.error
