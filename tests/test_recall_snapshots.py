"""The snapshot store: first recall of a turn fixes it; bounded; persisted behind; coalesced."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest
import trio
import trio.lowlevel

from orcad import sqlite_worker
from orcad.recall.snapshot_table import SnapshotKey
from orcad.recall.snapshots import RETAKES_AFTER_PURGE, SnapshotStore
from protocol.types import AutomaticEntry, DeliberateEntry, RecallResult

pytestmark = pytest.mark.inprocess


def key(session_id: str, turn_id: str, epoch: int = 1, workspace_id: str = "ws_a") -> SnapshotKey:
    return SnapshotKey(session_id, epoch, workspace_id, turn_id)


def result(snapshot: str, context: str = "") -> RecallResult:
    return RecallResult(
        snapshot_id=snapshot,
        barrier="none",
        automatic=[],
        deliberate=[],
        context=context,
        bytes=len(context.encode()),
    )


class Taker:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> RecallResult:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        return result(f"snap_{self.calls}")


async def test_second_recall_of_a_turn_returns_the_first_snapshot() -> None:
    store = SnapshotStore(None)
    take = Taker()
    first = await store.get_or_take(key("s", "t1"), take)
    again = await store.get_or_take(key("s", "t1"), take)
    other = await store.get_or_take(key("s", "t2"), take)
    assert again == first
    assert other.snapshot_id != first.snapshot_id
    assert take.calls == 2


async def test_concurrent_first_recalls_are_coalesced() -> None:
    store = SnapshotStore(None)
    take = Taker()
    results: list[RecallResult] = []

    async def ask() -> None:
        results.append(await store.get_or_take(key("s", "t"), take))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(ask)
    assert take.calls == 1
    assert {r.snapshot_id for r in results} == {"snap_1"}


async def test_a_failed_take_does_not_fix_a_snapshot() -> None:
    store = SnapshotStore(None)

    async def fail() -> RecallResult:
        raise RuntimeError("search failed")

    try:
        await store.get_or_take(key("s", "t"), fail)
    except RuntimeError:
        pass
    assert (await store.get_or_take(key("s", "t"), Taker())).snapshot_id == "snap_1"


async def test_memory_is_bounded_and_the_table_answers_for_evicted_turns(tmp_path: Path) -> None:
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database, memory_capacity=2, persisted_capacity=3)
    take = Taker()
    for turn in range(4):
        await store.get_or_take(key("s", f"t{turn}"), take)
    await store.flush()
    assert store.statistics()["in_memory"] == 2
    assert store.statistics()["persisted_keys"] == 3
    # t1 was evicted from memory but is in the table; t0 fell out of both bounds
    assert (await store.get_or_take(key("s", "t1"), take)).snapshot_id == "snap_2"
    assert (await store.get_or_take(key("s", "t0"), take)).snapshot_id == "snap_5"
    await store.aclose()


async def test_snapshots_survive_a_new_store_on_the_same_database(tmp_path: Path) -> None:
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database)
    first = await store.get_or_take(key("ses_a", "turn-1"), Taker())
    await store.aclose()

    reopened = SnapshotStore(database)
    take = Taker()
    assert await reopened.get_or_take(key("ses_a", "turn-1"), take) == first
    assert take.calls == 0
    await reopened.aclose()


async def test_a_snapshot_is_answered_only_to_the_opening_and_workspace_it_was_taken_for(
    tmp_path: Path,
) -> None:
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database)
    take = Taker()
    first = await store.get_or_take(key("ses_a", "turn-1"), take)
    reopened = await store.get_or_take(key("ses_a", "turn-1", epoch=2), take)  # opened again
    moved = await store.get_or_take(key("ses_a", "turn-1", workspace_id="ws_b"), take)
    assert take.calls == 3
    assert len({first.snapshot_id, reopened.snapshot_id, moved.snapshot_id}) == 3
    await store.aclose()

    restarted = SnapshotStore(database)  # the same from the table
    take = Taker()
    assert await restarted.get_or_take(key("ses_a", "turn-1"), take) == first
    assert await restarted.get_or_take(key("ses_a", "turn-1", epoch=2), take) == reopened
    assert take.calls == 0
    await restarted.get_or_take(key("ses_a", "turn-1", epoch=3), take)
    assert take.calls == 1  # a later opening takes its own
    await restarted.aclose()


async def test_a_table_of_snapshots_keyed_by_session_and_turn_alone_is_dropped(
    tmp_path: Path,
) -> None:
    database = tmp_path / "state.sqlite3"
    connection = sqlite3.connect(database)  # as a version that keyed by session and turn wrote it
    connection.executescript(
        "CREATE TABLE recall_snapshots (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "session_id TEXT NOT NULL, turn_id TEXT NOT NULL, result BLOB NOT NULL, "
        "UNIQUE (session_id, turn_id));"
    )
    with connection:
        connection.execute(
            "INSERT INTO recall_snapshots (session_id, turn_id, result) VALUES (?, ?, ?)",
            ("ses_a", "turn-1", msgspec.json.encode(result("snap_old", "other project"))),
        )
    connection.close()
    store = SnapshotStore(database)
    take = Taker()
    assert (await store.get_or_take(key("ses_a", "turn-1"), take)).snapshot_id == "snap_1"
    await store.aclose()
    connection = sqlite3.connect(database)
    try:
        rows = connection.execute(
            "SELECT session_id, epoch, workspace_id, turn_id FROM recall_snapshots"
        ).fetchall()
    finally:
        connection.close()
    assert rows == [("ses_a", 1, "ws_a", "turn-1")]


async def test_the_writer_task_persists_in_the_background(tmp_path: Path) -> None:
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database, write_delay_s=0)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run_writer)
        await store.get_or_take(key("s", "t"), Taker())
        await store.wait_all_written()
        assert store.statistics()["persisted_keys"] == 1
        nursery.cancel_scope.cancel()
    reopened = SnapshotStore(database)
    take = Taker()
    assert (await reopened.get_or_take(key("s", "t"), take)).snapshot_id == "snap_1"
    assert take.calls == 0
    await reopened.aclose()
    await store.aclose()


async def test_purge_drops_snapshots_holding_forgotten_text_everywhere(tmp_path: Path) -> None:
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database, write_delay_s=0.0)
    await store.get_or_take(key("s", "written"), lambda: _ready(result("a", "uses quartz-lemur")))
    await store.flush()
    await store.get_or_take(key("s", "unwritten"), lambda: _ready(result("b", 'quartz-lemur "x"')))
    await store.get_or_take(key("s", "kept"), lambda: _ready(result("c", "uses blue runners")))
    assert await store.purge(["quartz-lemur"]) == 2
    await store.flush()
    assert await store.purge(["quartz-lemur"]) == 0  # idempotent
    await store.aclose()
    for sibling in await trio.Path(tmp_path).iterdir():
        assert b"quartz-lemur" not in await sibling.read_bytes(), sibling
    reopened = SnapshotStore(database)
    take = Taker()
    assert (await reopened.get_or_take(key("s", "written"), take)).snapshot_id == "snap_1"
    assert (await reopened.get_or_take(key("s", "kept"), take)).snapshot_id == "c"
    await reopened.aclose()


async def test_a_purge_read_past_by_another_connection_leaves_no_text_once_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_worker, "SQLITE_BUSY_TIMEOUT_MS", 50)  # a reader is waited for
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database, write_delay_s=0.0)
    await store.get_or_take(key("s", "t"), lambda: _ready(result("a", "uses quartz-lemur")))
    await store.flush()
    reader = sqlite3.connect(database, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM recall_snapshots").fetchone()  # a snapshot of the WAL
    try:
        assert await store.purge(["quartz-lemur"]) == 1
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    await store.flush()  # what the writer does next
    for sibling in await trio.Path(tmp_path).iterdir():
        assert b"quartz-lemur" not in await sibling.read_bytes(), sibling
    await store.aclose()


async def test_a_purge_the_database_refused_is_owed_and_never_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_worker, "SQLITE_BUSY_TIMEOUT_MS", 1000)
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database, write_delay_s=0.0)
    await store.get_or_take(key("s", "t"), lambda: _ready(result("a", "uses quartz-lemur")))
    await store.flush()
    store.forget_database()  # its keys are read again from the table
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the lock
    try:
        assert await store.purge(["quartz-lemur"]) == 1  # from memory; the table refused
        started = trio.current_time()
        again = await store.get_or_take(key("s", "t"), Taker())
        assert trio.current_time() - started < 0.5  # the retry did not wait on the lock
        assert again.snapshot_id == "snap_1" and "quartz-lemur" not in again.context
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await store.flush()  # the owed purge, then the new snapshot
    assert b"quartz-lemur" not in database.read_bytes()
    reopened = SnapshotStore(database)
    assert (await reopened.get_or_take(key("s", "t"), Taker())).snapshot_id == "snap_1"
    await reopened.aclose()
    await store.aclose()


async def test_a_purge_still_owed_when_the_daemon_stops_is_made_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the owed needles lived in memory only: a stop while another process still held the lock
    # left the snapshot on disk, and after a restart its turn was answered with forgotten text
    monkeypatch.setattr(sqlite_worker, "SQLITE_BUSY_TIMEOUT_MS", 50)
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database, write_delay_s=0.0)
    await store.get_or_take(key("s", "t"), lambda: _ready(result("a", "uses quartz-lemur")))
    await store.get_or_take(key("s", "other"), lambda: _ready(result("b", "uses blue runners")))
    await store.flush()
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the lock, past the stop
    try:
        assert await store.purge(["quartz-lemur"]) == 1  # from memory; the table refused
        await store.aclose()  # the stop's retry is refused too
        assert (tmp_path / "state.sqlite3.purge-owed").exists()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    reopened = SnapshotStore(database)
    again = await reopened.get_or_take(key("s", "t"), Taker())
    assert again.snapshot_id == "snap_1" and "quartz-lemur" not in again.context
    await reopened.aclose()
    for sibling in await trio.Path(tmp_path).iterdir():
        assert b"quartz-lemur" not in await sibling.read_bytes(), sibling
    assert not (tmp_path / "state.sqlite3.purge-owed").exists()


@pytest.mark.parametrize("holds_a_file", [False, True])
async def test_a_directory_where_the_purge_marker_goes_is_purged_for_not_a_failure(
    tmp_path: Path, holds_a_file: bool
) -> None:
    # unlinking it after the purge raised IsADirectoryError: every recall of the daemon
    # answered an internal error for as long as the directory was there
    database = tmp_path / "state.sqlite3"
    store = SnapshotStore(database, write_delay_s=0.0)
    await store.get_or_take(key("s", "t"), lambda: _ready(result("a", "uses quartz-lemur")))
    await store.aclose()
    marker = tmp_path / "state.sqlite3.purge-owed"
    marker.mkdir()
    if holds_a_file:
        (marker / "notes").write_text("mine")
    reopened = SnapshotStore(database)
    again = await reopened.get_or_take(key("s", "t"), Taker())
    assert again.snapshot_id == "snap_1" and "quartz-lemur" not in again.context
    await reopened.aclose()
    assert b"quartz-lemur" not in database.read_bytes()
    assert marker.exists() == holds_a_file  # nothing of the user's is deleted


async def _ready(value: RecallResult) -> RecallResult:
    return value


class RacedTaker:
    """A recall that reads `text` (as a store does before a forget commits), then waits until
    released; once the memory is forgotten, its next takes read without it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.forgotten = False
        self.read = trio.Event()
        self.release = trio.Event()
        self.calls = 0

    async def __call__(self) -> RecallResult:
        self.calls += 1
        seen = "" if self.forgotten else self.text
        self.read.set()
        await self.release.wait()
        return result(f"snap_{self.calls}", seen)


@pytest.mark.parametrize("persisted", [False, True])
async def test_a_recall_in_flight_during_a_purge_does_not_keep_what_was_forgotten(
    tmp_path: Path, persisted: bool
) -> None:
    store = SnapshotStore(tmp_path / "state.sqlite3" if persisted else None, write_delay_s=0)
    take = RacedTaker("garnet-lynx")
    answers: list[RecallResult] = []

    async def ask() -> None:
        answers.append(await store.get_or_take(key("s", "t"), take))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await take.read.wait()  # the recall has read the memory...
        take.forgotten = True  # ...which is forgotten now, and its copies purged
        assert await store.purge(["garnet-lynx"]) == 0  # nothing was kept yet
        take.release.set()
    # the recall read it again without the forgotten text: that is what it answered and kept
    assert take.calls == 2
    assert [answer.context for answer in answers] == [""]
    await store.flush()
    kept = await store.get_or_take(key("s", "t"), take)
    assert kept == answers[0] and take.calls == 2
    if persisted:
        reopened = SnapshotStore(tmp_path / "state.sqlite3")
        assert (await reopened.get_or_take(key("s", "t"), take)).context == ""
        await reopened.aclose()
    await store.aclose()


async def test_a_purge_of_other_text_lets_a_recall_in_flight_keep_its_snapshot() -> None:
    store = SnapshotStore(None)
    take = RacedTaker("garnet-lynx")
    answers: list[RecallResult] = []

    async def ask() -> None:
        answers.append(await store.get_or_take(key("s", "t"), take))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await take.read.wait()
        await store.purge(["something else"])
        take.release.set()
    assert take.calls == 1 and answers[0].context == "garnet-lynx"
    assert await store.get_or_take(key("s", "t"), take) == answers[0]


async def test_a_recall_raced_by_a_forget_on_every_take_is_answered_but_never_kept() -> None:
    store = SnapshotStore(None)
    calls = 0

    async def raced() -> RecallResult:
        nonlocal calls
        calls += 1
        await store.purge(["garnet-lynx"])  # forgotten while each take reads it
        return result(f"snap_{calls}", "garnet-lynx")

    first = await store.get_or_take(key("s", "t"), raced)
    assert calls == RETAKES_AFTER_PURGE + 1  # taken again, up to the bound
    assert first.snapshot_id == f"snap_{calls}"
    second = await store.get_or_take(key("s", "t"), raced)  # nothing was kept for the turn
    assert second.snapshot_id != first.snapshot_id
    assert store.statistics() == {"in_memory": 0, "persisted_keys": 0, "unwritten": 0}


async def test_a_snapshot_persisted_with_raw_control_characters_is_answered_escaped(
    tmp_path: Path,
) -> None:
    database = tmp_path / "state.sqlite3"
    raw = "Deploys retitle \x1b]0;owned\x07 the terminal \u202eesaeler"
    shown = "Deploys retitle \\x1b]0;owned\\x07 the terminal \\u202eesaeler"
    entry = AutomaticEntry(
        id="cand_1",
        category="project",
        text=raw,
        age_s=1.0,
        session_id="ses_a",
        turn_id="turn-0",
        recorded_at="2026-11-30T07:00:00.000Z",
    )
    record = DeliberateEntry(
        id="mem_1", kind="fact", content=raw, scope="workspace", updated_at=entry.recorded_at
    )
    old = msgspec.structs.replace(
        result("snap_old", f"- {shown}\n"), automatic=[entry], deliberate=[record]
    )
    store = SnapshotStore(database)  # as a version that answered entries raw persisted it
    await store.get_or_take(key("ses_a", "turn-1"), lambda: _ready(old))
    await store.aclose()

    reopened = SnapshotStore(database)
    take = Taker()
    again = await reopened.get_or_take(key("ses_a", "turn-1"), take)
    assert take.calls == 0
    assert again.snapshot_id == "snap_old"
    assert [e.text for e in again.automatic] == [shown]
    assert [e.content for e in again.deliberate] == [shown]
    assert (again.context, again.bytes) == (old.context, old.bytes)  # escaped already
    await reopened.aclose()
