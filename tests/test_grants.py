"""Approval grants: each covers the scope it was given for; grants.list and grants.revoke.

Through the real dispatcher in process, with real SQLite files under tmp_path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from orcad.limits import DEFAULT_SESSION_IDLE_EXPIRY_S
from protocol.errors import RemoteError
from tests.deliberate_helpers import InProcessDaemon, SettableClock

pytestmark = pytest.mark.inprocess


@pytest.fixture
async def orca(tmp_path: Path) -> AsyncIterator[InProcessDaemon]:
    daemon = InProcessDaemon(tmp_path, SettableClock())
    yield daemon
    await daemon.aclose()


async def save(
    orca: InProcessDaemon, session: dict[str, Any], content: str, *, is_global: bool
) -> dict[str, Any]:
    return await orca.call(
        "memory.manage",
        {**session, "action": "save", "content": content, "kind": "fact", "is_global": is_global},
    )


async def change(
    orca: InProcessDaemon, session: dict[str, Any], action: str, record_id: str
) -> dict[str, Any]:
    params: dict[str, Any] = {**session, "action": action, "id": record_id}
    if action == "update":
        params["content"] = f"updated {record_id}"
    return await orca.call("memory.manage", params)


async def grant(
    orca: InProcessDaemon, session: dict[str, Any], decision: str, *, is_global: bool
) -> None:
    pending = await save(orca, session, f"granting {decision} {is_global}", is_global=is_global)
    assert pending["outcome"] == "pending_approval"
    approved = await orca.call(
        "memory.approve",
        {**session, "approval_id": pending["approval_id"], "decision": decision},
    )
    assert approved["outcome"] == "applied"


async def seeded_records(orca: InProcessDaemon, workspace: Path) -> tuple[str, str]:
    """A workspace record and a global record, saved in yolo mode (no grant involved)."""
    writer = await orca.open(workspace, mode="yolo")
    local = await save(orca, writer, "workspace record for the matrix", is_global=False)
    shared = await save(orca, writer, "global record for the matrix", is_global=True)
    return local["record"]["id"], shared["record"]["id"]


# (grant given, scope it was given for) -> which later changes apply without asking
MATRIX = [
    (None, None, {"workspace": "pending_approval", "global": "pending_approval"}),
    ("allow_workspace", False, {"workspace": "applied", "global": "pending_approval"}),
    ("allow_workspace", True, {"workspace": "pending_approval", "global": "applied"}),
    ("allow_session", False, {"workspace": "applied", "global": "pending_approval"}),
    ("allow_session", True, {"workspace": "pending_approval", "global": "applied"}),
    ("allow_once", False, {"workspace": "pending_approval", "global": "pending_approval"}),
]


@pytest.mark.parametrize(("decision", "granted_global", "expected"), MATRIX)
@pytest.mark.parametrize("action", ["save", "update", "forget"])
async def test_grant_scope_matrix(
    orca: InProcessDaemon,
    tmp_path: Path,
    *,
    decision: str | None,
    granted_global: bool | None,
    expected: dict[str, str],
    action: str,
) -> None:
    workspace = tmp_path / "ws"
    local_id, global_id = await seeded_records(orca, workspace)
    session = await orca.open(workspace)
    if decision is not None:
        await grant(orca, session, decision, is_global=bool(granted_global))
    for scope, record_id in (("workspace", local_id), ("global", global_id)):
        if action == "save":
            result = await save(orca, session, f"new {scope} fact", is_global=scope == "global")
        else:
            result = await change(orca, session, action, record_id)
        assert result["outcome"] == expected[scope], (scope, result["summary"])
    # a headless session never applies on a grant: it is denied, whatever the scope
    headless = await orca.open(workspace, interactive=False)
    for is_global in (False, True):
        denied = await save(orca, headless, f"headless {is_global}", is_global=is_global)
        assert denied["outcome"] == "denied"


@pytest.mark.parametrize("noticed", [True, False])
async def test_a_session_grant_ends_when_its_session_expires_even_if_it_is_joined_again(
    tmp_path: Path, noticed: bool
) -> None:
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock)
    try:
        workspace = tmp_path / "ws"
        session = await orca.open(workspace, session_id="claude-code:s1")
        await grant(orca, session, "allow_session", is_global=False)
        clock.advance(orca.daemon.sessions.idle_expiry_s + 1)
        if noticed:  # whether anything looked at the sessions meanwhile changes nothing
            await orca.call("daemon.status", {})
        joined = await orca.open(workspace, session_id="claude-code:s1", join=True)
        assert joined == session  # revived at the same epoch
        again = await save(orca, joined, "after the expiry", is_global=False)
        assert again["outcome"] == "pending_approval"
        assert (await orca.call("grants.list", {}))["grants"] == []
    finally:
        await orca.aclose()


async def test_a_workspace_grant_covers_only_its_own_workspace(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    first = await orca.open(tmp_path / "first")
    await grant(orca, first, "allow_workspace", is_global=False)
    other = await orca.open(tmp_path / "second")
    assert (await save(orca, other, "second workspace", is_global=False))[
        "outcome"
    ] == "pending_approval"
    assert (await save(orca, first, "first again", is_global=False))["outcome"] == "applied"


async def test_grants_are_listed_and_revoked(orca: InProcessDaemon, tmp_path: Path) -> None:
    session = await orca.open(tmp_path / "ws")
    await grant(orca, session, "allow_session", is_global=True)
    await grant(orca, session, "allow_workspace", is_global=False)
    other_session = await orca.open(tmp_path / "ws")  # a session grant is not a global grant
    await grant(orca, other_session, "allow_workspace", is_global=True)
    other = await orca.open(tmp_path / "other")
    await grant(orca, other, "allow_workspace", is_global=False)

    listed = (await orca.call("grants.list", {}))["grants"]
    by_scope = sorted((g["scope"], g["workspace_root"]) for g in listed)
    root = str((tmp_path / "ws").resolve())
    other_root = str((tmp_path / "other").resolve())
    assert by_scope == sorted(
        [("workspace", root), ("global", None), ("session", None), ("workspace", other_root)]
    )
    for_session = (await orca.call("grants.list", {"session_id": session["session_id"]}))["grants"]
    assert {g["scope"] for g in for_session} == {"workspace", "global", "session"}
    assert all(g["workspace_root"] in (root, None) for g in for_session)
    for_other_root = (await orca.call("grants.list", {"workspace": other_root}))["grants"]
    assert sorted(g["scope"] for g in for_other_root) == ["global", "workspace"]

    workspace_grant = next(g for g in listed if g["workspace_root"] == root)
    revoked = await orca.call("grants.revoke", {"grant_id": workspace_grant["grant_id"]})
    assert revoked == {"revoked": True}
    assert await orca.call("grants.revoke", {"grant_id": workspace_grant["grant_id"]}) == {
        "revoked": False
    }
    assert (await save(orca, session, "asks again", is_global=False))[
        "outcome"
    ] == "pending_approval"
    # the global change is still covered, twice over; revoke both and it asks
    assert (await save(orca, session, "global ok", is_global=True))["outcome"] == "applied"
    for grant_id in ("global", f"session:{session['session_id']}:global"):
        assert (await orca.call("grants.revoke", {"grant_id": grant_id}))["revoked"] is True
    assert (await save(orca, session, "global asks", is_global=True))[
        "outcome"
    ] == "pending_approval"
    left = (await orca.call("grants.list", {}))["grants"]
    assert [(g["scope"], g["workspace_root"]) for g in left] == [("workspace", other_root)]


@pytest.mark.parametrize("grant_id", ["", "everything", "workspace:nothex", "session:x:all"])
async def test_revoking_a_malformed_grant_id_is_refused(
    orca: InProcessDaemon, grant_id: str
) -> None:
    with pytest.raises(RemoteError) as caught:
        await orca.call("grants.revoke", {"grant_id": grant_id})
    assert caught.value.error.code == -32602


async def test_a_session_grant_ends_with_its_session_and_stays_in_its_workspace(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "first")
    await grant(orca, session, "allow_session", is_global=False)
    assert (await save(orca, session, "covered", is_global=False))["outcome"] == "applied"
    # the same session id opened anew in another workspace is asked there
    moved = await orca.open(tmp_path / "second", session_id=session["session_id"])
    assert (await save(orca, moved, "elsewhere", is_global=False))["outcome"] == "pending_approval"
    back = await orca.open(tmp_path / "first", session_id=session["session_id"])
    assert (await save(orca, back, "home again", is_global=False))["outcome"] == "applied"
    # closing the session ends its grants and its pending changes
    pending = await save(orca, back, "left pending", is_global=True)
    assert pending["outcome"] == "pending_approval"
    await orca.call("session.close", back)
    assert (await orca.call("grants.list", {}))["grants"] == []
    reopened = await orca.open(tmp_path / "first", session_id=session["session_id"])
    assert (await save(orca, reopened, "asks again", is_global=False))[
        "outcome"
    ] == "pending_approval"
    with pytest.raises(RemoteError) as caught:
        await orca.call(
            "memory.approve",
            {**reopened, "approval_id": pending["approval_id"], "decision": "allow_once"},
        )
    assert caught.value.code == -32014


async def test_a_session_grant_for_global_memory_holds_wherever_the_session_is_reopened(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    # global memory is the same from every workspace: the grant for it goes with the session,
    # while its grant for the first workspace's records stays there
    session = await orca.open(tmp_path / "first")
    await grant(orca, session, "allow_session", is_global=True)
    await grant(orca, session, "allow_session", is_global=False)
    moved = await orca.open(tmp_path / "second", session_id=session["session_id"])
    assert (await save(orca, moved, "global too", is_global=True))["outcome"] == "applied"
    assert (await save(orca, moved, "here", is_global=False))["outcome"] == "pending_approval"


@pytest.mark.parametrize("action", ["update", "forget"])
async def test_an_approval_never_applies_to_a_record_changed_since_it_was_asked_for(
    orca: InProcessDaemon, tmp_path: Path, action: str
) -> None:
    """The user approves the record the summary showed: another session's change to it
    meanwhile makes the approval a conflict, and that change is kept."""
    asker = await orca.open(tmp_path / "ws")
    writer = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, writer, "deploys run from main", is_global=False))["record"]
    pending = await change(orca, asker, action, record["id"])
    assert pending["outcome"] == "pending_approval"
    assert "deploys run from main" in pending["summary"]
    rewritten = "production database is db3, never db1"
    await orca.call(
        "memory.manage", {**writer, "action": "update", "id": record["id"], "content": rewritten}
    )
    with pytest.raises(RemoteError) as caught:
        await orca.call(
            "memory.approve",
            {**asker, "approval_id": pending["approval_id"], "decision": "allow_workspace"},
        )
    assert caught.value.error.code == -32013
    assert "changed" in caught.value.error.message
    [kept] = (await orca.call("memory.search", {**writer}))["records"]
    assert (kept["id"], kept["content"]) == (record["id"], rewritten)
    assert (await orca.call("grants.list", {}))["grants"] == []  # nothing was granted either


@pytest.mark.parametrize("removed", [("", "-wal", "-shm"), ("",)])
async def test_a_memory_database_deleted_under_orcad_takes_its_records_and_grants_with_it(
    tmp_path: Path, removed: tuple[str, ...]
) -> None:
    """Deleting the database removes the memory it held (spec: One local database): orcad
    stops serving the deleted file, and what it saves after lands in the new one."""
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock)
    try:
        session = await orca.open(tmp_path / "ws")
        await grant(orca, session, "allow_workspace", is_global=False)
        assert (await save(orca, session, "before deletion", is_global=False))[
            "outcome"
        ] == "applied"
        for suffix in removed:  # `rm memory.sqlite3*`, or the database file alone
            (orca.paths.deliberate_db.parent / f"memory.sqlite3{suffix}").unlink()
        assert (await orca.call("memory.search", session))["records"] == []
        assert (await orca.call("grants.list", {}))["grants"] == []
        assert (await save(orca, session, "asks again", is_global=False))[
            "outcome"
        ] == "pending_approval"
        writer = await orca.open(tmp_path / "ws", mode="yolo")
        assert (await save(orca, writer, "after deletion", is_global=False))["outcome"] == "applied"
    finally:
        await orca.aclose()
    restarted = InProcessDaemon(tmp_path, clock)
    try:
        session = await restarted.open(tmp_path / "ws", mode="yolo")
        records = (await restarted.call("memory.search", session))["records"]
        assert [record["content"] for record in records] == ["after deletion"]
    finally:
        await restarted.aclose()


async def test_a_session_grant_ends_when_its_session_expires_though_reopened_before_the_sweep(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    """The hourly sweep is not what ends a session: opened again after its idle expiry (as an
    agent resumes a session the next morning), it is asked again, as a joined one is."""
    session = await orca.open(tmp_path / "ws")
    await grant(orca, session, "allow_session", is_global=False)
    await grant(orca, session, "allow_session", is_global=True)
    assert (await save(orca, session, "covered", is_global=False))["outcome"] == "applied"
    orca.clock.advance(DEFAULT_SESSION_IDLE_EXPIRY_S + 1)
    reopened = await orca.open(tmp_path / "ws", session_id=session["session_id"])
    for is_global in (False, True):
        after = await save(orca, reopened, f"after expiry {is_global}", is_global=is_global)
        assert after["outcome"] == "pending_approval"
    assert (await orca.call("grants.list", {}))["grants"] == []


async def test_an_allow_session_approval_still_writing_when_its_session_closes_grants_nothing(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    """The session closes while the approved change waits for the database's write lock (held
    here by another process's connection): once written, the change stands, but the session it
    was allowed for is gone, and so is any grant for it. Reopened, the session is asked again."""
    session = await orca.open(tmp_path / "ws")
    pending = await save(orca, session, "written while the session closes", is_global=False)
    assert pending["outcome"] == "pending_approval"
    outcome: dict[str, Any] = {}

    async def approve() -> None:
        params = {**session, "approval_id": pending["approval_id"], "decision": "allow_session"}
        outcome.update(await orca.call("memory.approve", params))

    holder = sqlite3.connect(orca.paths.deliberate_db, timeout=10, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(approve)
            await trio.sleep(1.0)  # well inside the write's 5 s wait for the lock
            await orca.call("session.close", session)
            holder.execute("COMMIT")
    finally:
        holder.close()
    assert outcome["outcome"] == "applied"
    assert (await orca.call("grants.list", {}))["grants"] == []
    reopened = await orca.open(tmp_path / "ws", session_id=session["session_id"])
    after = await save(orca, reopened, "asked again after the close", is_global=False)
    assert after["outcome"] == "pending_approval"
