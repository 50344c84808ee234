"""The `recall_snapshots` table of the daemon state database: its schema, and the blocking
reads, writes and purges that orcad.recall.snapshots.SnapshotStore runs on its SQLite worker."""

from __future__ import annotations

import collections
import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec
import structlog

from orcad.clock import format_time
from orcad.durable_files import fsync_directory
from orcad.recall.select import visible_result
from orcad.session_database import session_projects
from orcad.sqlite_worker import truncate_wal
from protocol.types import AutomaticEntry, RecallResult

log = structlog.get_logger("orcad.recall.snapshots")


class SnapshotKey(NamedTuple):
    """The turn a snapshot was taken for, in the session opening (epoch) and workspace that
    asked: an opening's epoch and workspace never change, and a reopen raises the epoch."""

    session_id: str
    epoch: int
    workspace_id: str
    turn_id: str


_SCHEMA = """
CREATE TABLE IF NOT EXISTS recall_snapshots (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    workspace_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    result BLOB NOT NULL,
    UNIQUE (session_id, epoch, workspace_id, turn_id)
);
"""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(RecallResult)


def owed_marker(database_path: Path) -> Path:
    """The file that says a snapshot purge is owed (it holds no text)."""
    return database_path.with_name(database_path.name + ".purge-owed")


def _mark_owed(marker: Path | None) -> None:
    if marker is None or marker.exists():
        return
    try:
        marker.touch(mode=0o600)
        fsync_directory(marker.parent)
    except OSError as exc:  # the purge is still owed in memory
        log.warning("recall.snapshot_purge_mark_failed", error=str(exc))


def _purge_all(connection: sqlite3.Connection, marker: Path) -> bool:
    """Delete every snapshot, leaving no copy in free pages, then the marker: which texts were
    forgotten is not known any more, and a snapshot is only a cache. Whether the WAL was
    emptied too (see truncate_wal)."""
    connection.execute("PRAGMA secure_delete = ON")
    connection.execute("DELETE FROM recall_snapshots")
    truncated = truncate_wal(connection)
    try:
        marker.unlink(missing_ok=True)
    except IsADirectoryError:  # not ours, yet it says the same: the purge is made all the same
        with contextlib.suppress(OSError):  # one that holds files stays, and is purged for again
            marker.rmdir()
    log.warning("recall.snapshots_dropped_for_owed_purge")
    return truncated


# whether a project's ledger still holds a fact: (project id or None, fact id, recorded_at)
FactHeld = Callable[[str | None, str, str], bool]


def drop_outdated_records(
    connection: sqlite3.Connection,
    updated_times: Callable[[list[str]], dict[str, float]],
    fact_held: FactHeld | None = None,
) -> tuple[int, bool]:
    """Delete the snapshots holding a deliberate record that `updated_times` no longer knows
    at the time the snapshot shows (a record it cannot read counts as gone), or an automatic
    fact that `fact_held` says its project no longer holds (a project directory moved aside
    takes its facts with it): how many, and whether the WAL was emptied (see truncate_wal)."""
    shown: dict[str, set[str]] = collections.defaultdict(set)
    facts: list[_Shown] = []
    query = "SELECT session_id, epoch, result FROM recall_snapshots"
    for session_id, epoch, encoded in connection.execute(query):
        with contextlib.suppress(msgspec.DecodeError):  # never answered (see _load_result)
            result = _decoder.decode(encoded)
            for entry in result.deliberate:
                shown[entry.id].add(entry.updated_at)
            facts += [(session_id, epoch, entry) for entry in result.automatic]
    outdated: list[str] = []
    if shown:
        try:
            current = updated_times(sorted(shown))
        except (sqlite3.Error, OSError) as exc:
            log.warning("recall.snapshot_check_unverified", error=str(exc))
            current = {}
        outdated = [
            record_id
            for record_id, times in shown.items()
            if record_id not in current or times != {format_time(current[record_id])}
        ]
    if facts and fact_held is not None:
        outdated += sorted(_not_held(connection, facts, fact_held))
    if not outdated:
        return 0, True
    needles = [_encoder.encode(entry_id) for entry_id in outdated]  # quoted, as in purge
    deleted, truncated = _purge(connection, needles, checkpoint_owed=False)
    return len(deleted), truncated


def facts_not_held(
    connection: sqlite3.Connection,
    fact_held: FactHeld,
    unwritten: Sequence[tuple[SnapshotKey, RecallResult]] = (),
) -> set[str]:
    """The ids of the automatic facts that the stored snapshots, and `unwritten` (snapshots
    not on disk), hold and `fact_held` says their project no longer holds (see _not_held)."""
    facts: list[_Shown] = [
        (key.session_id, key.epoch, entry)
        for key, result in unwritten
        for entry in result.automatic
    ]
    query = "SELECT session_id, epoch, result FROM recall_snapshots"
    for session_id, epoch, encoded in connection.execute(query):
        with contextlib.suppress(msgspec.DecodeError):  # never answered (see _load_result)
            result = _decoder.decode(encoded)
            facts += [(session_id, epoch, entry) for entry in result.automatic]
    return _not_held(connection, facts, fact_held) if facts else set()


_Shown = tuple[str, int, AutomaticEntry]  # a fact shown, with the session and epoch it was for


def _not_held(
    connection: sqlite3.Connection, facts: Sequence[_Shown], fact_held: FactHeld
) -> set[str]:
    """Those of `facts` not held, each judged in the project its session was opened in at the
    snapshot's epoch. A snapshot of an older opening (a session opened again since, perhaps in
    another project) or of a session the database no longer holds can never be answered
    again: its facts are judged in no project, which holds none."""
    opened = session_projects(connection, {session_id for session_id, _epoch, _entry in facts})
    gone = set()
    for session_id, epoch, entry in facts:
        at = opened.get(session_id)
        project_id = at[1] if at is not None and at[0] == epoch else None
        if not fact_held(project_id, entry.id, entry.recorded_at):
            gone.add(entry.id)
    return gone


def _create_schema(connection: sqlite3.Connection) -> None:
    """The table; one written before snapshots were keyed by epoch and workspace is dropped
    (its rows cannot tell which opening of a session they were taken for, and a snapshot is
    only a cache: those turns get a fresh recall), leaving no copy in free pages."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(recall_snapshots)")}
    if columns and "epoch" not in columns:
        connection.execute("PRAGMA secure_delete = ON")
        with connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("DROP TABLE IF EXISTS recall_snapshots")
        log.info("recall.snapshots_dropped_for_new_keys")
    connection.executescript(_SCHEMA)


def _holds(encoded: bytes, needles: Sequence[bytes]) -> bool:
    return any(needle in encoded for needle in needles)


def _load_keys(connection: sqlite3.Connection) -> list[SnapshotKey]:
    rows = connection.execute(
        "SELECT session_id, epoch, workspace_id, turn_id FROM recall_snapshots ORDER BY seq"
    )
    return [SnapshotKey(*row) for row in rows]


def _load_result(connection: sqlite3.Connection, key: SnapshotKey) -> RecallResult | None:
    row = connection.execute(
        "SELECT result FROM recall_snapshots "
        "WHERE session_id = ? AND epoch = ? AND workspace_id = ? AND turn_id = ?",
        key,
    ).fetchone()
    if row is None:
        return None
    try:
        return visible_result(_decoder.decode(row[0]))  # written raw by an older version
    except msgspec.DecodeError:
        log.warning("recall.snapshot_unreadable", session_id=key.session_id, turn_id=key.turn_id)
        return None


def _store(
    connection: sqlite3.Connection, rows: list[tuple[str, int, str, str, bytes]], keep: int
) -> None:
    with connection:
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany(
            "INSERT OR IGNORE INTO recall_snapshots "
            "(session_id, epoch, workspace_id, turn_id, result) VALUES (?, ?, ?, ?, ?)",
            rows,
        )
        connection.execute(
            "DELETE FROM recall_snapshots WHERE seq <= (SELECT MAX(seq) FROM recall_snapshots) - ?",
            (keep,),
        )


def _purge(
    connection: sqlite3.Connection, needles: list[bytes], *, checkpoint_owed: bool
) -> tuple[list[SnapshotKey], bool]:
    """Delete the rows whose result holds a needle, leaving no copy in free pages or the WAL;
    their keys, and whether the WAL was emptied (see truncate_wal). A checkpoint owed by an
    earlier purge is tried again without waiting for readers."""
    found: list[tuple[int, SnapshotKey]] = []
    query = "SELECT seq, session_id, epoch, workspace_id, turn_id, result FROM recall_snapshots"
    for seq, session_id, epoch, workspace_id, turn_id, result in (
        connection.execute(query) if needles else ()
    ):
        if _holds(bytes(result), needles):
            found.append((seq, SnapshotKey(session_id, epoch, workspace_id, turn_id)))
    if found:
        connection.execute("PRAGMA secure_delete = ON")
        with connection:
            connection.executemany(
                "DELETE FROM recall_snapshots WHERE seq = ?", [(seq,) for seq, _ in found]
            )
    truncated = truncate_wal(connection, wait=bool(found)) if found or checkpoint_owed else True
    return [key for _, key in found], truncated
