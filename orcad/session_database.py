"""The sessions table of the daemon state database: its schema and upgrades, and the record of
when each session was last called, written and swept as below (sessions.py has the rest).

When a session was last called is kept in memory and stored in its row, so that the idle expiry
holds across a daemon restart: the stored time is written at open and close, by a background
writer as soon as it trails the last call by SESSION_LAST_USE_WRITE_S, and for every session at
a clean stop. After a restart a session is idle from its stored time, which a crash leaves at
most that much behind its last call.

A session's row is kept while it may still be called or joined: the periodic sweep deletes
those no call has touched for the retention (far past the idle expiry, so only sessions that
ended or expired long ago), a bounded number per pass; a start runs one pass too, for the rows
idle that long before the latest call stored, so that a daemon restarted more often than the
sweep runs does not keep every row for good. Each deletion first raises the stored
epoch floor to the deleted epoch, and an id without a row opens above the floor: a pruned id
opened again gets an epoch above any it had, so a holder of an old one stays fenced.
"""

from __future__ import annotations

import collections
import contextlib
import math
import os
import sqlite3
from collections.abc import Awaitable, Callable, Collection, Iterator
from pathlib import Path
from typing import TypeVar

import msgspec
import structlog
import trio

from orcad import limits
from orcad.clock import Clock
from orcad.errors import StorageError
from orcad.session_snapshot import Session, _session_decoder
from orcad.sqlite_worker import SQLiteWorker, connect_private
from orcad.storage_faults import may_be_a_stale_view

log = structlog.get_logger("orcad.sessions")

T = TypeVar("T")


_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    snapshot TEXT NOT NULL,
    last_used REAL
);
CREATE TABLE IF NOT EXISTS epoch_base (
    only INTEGER PRIMARY KEY CHECK (only = 1),
    base INTEGER NOT NULL
);
"""


# PRAGMA user_version of a state database whose sessions' last calls are stored as this module
# stores them (see the module's docstring). An older one stored them at open, close and by the
# hourly sweep only, so a session in use may have one up to SESSION_SWEEP_INTERVAL_S behind.
LAST_USE_KEPT_VERSION = 1


def _create_schema(connection: sqlite3.Connection) -> bool:
    """The tables, with `last_used` added to a database written before it existed (its rows
    count from their open); whether the database holds sessions whose last calls were stored
    by an older version (see `_count_as_used`)."""
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    older = version < LAST_USE_KEPT_VERSION and _has_sessions_table(connection)
    connection.executescript(_SCHEMA)
    columns = {row[1] for row in connection.execute("PRAGMA table_info(sessions)")}
    if "last_used" not in columns:
        with connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ALTER TABLE sessions ADD COLUMN last_used REAL")
            connection.execute(
                "UPDATE sessions SET last_used = json_extract(snapshot, '$.opened_at')"
            )
    connection.execute("CREATE INDEX IF NOT EXISTS sessions_last_used ON sessions (last_used)")
    if connection.execute("SELECT 1 FROM sessions WHERE last_used IS NULL LIMIT 1").fetchone():
        # rows an older version added to this table (run over it after a newer one): without
        # a last call no sweep would ever prune them; they count from their open, as above
        with connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                "UPDATE sessions SET last_used = json_extract(snapshot, '$.opened_at') "
                "WHERE last_used IS NULL"
            )
    if version < LAST_USE_KEPT_VERSION and not older:
        connection.execute(f"PRAGMA user_version = {LAST_USE_KEPT_VERSION}")
    return older


def _has_sessions_table(connection: sqlite3.Connection) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'"
    return connection.execute(query).fetchone() is not None


class _OpenedIn(msgspec.Struct):
    project_id: str


_opened_in_decoder = msgspec.json.Decoder(_OpenedIn)


def session_projects(
    connection: sqlite3.Connection, session_ids: Collection[str]
) -> dict[str, tuple[int, str]]:
    """The epoch each of `session_ids` was last opened at and the project it was opened in, as
    the state database holds them: a session it does not hold, or whose row cannot be read,
    is left out."""
    found: dict[str, tuple[int, str]] = {}
    if not session_ids or not _has_sessions_table(connection):
        return found
    query = "SELECT session_id, epoch, snapshot FROM sessions"
    for session_id, epoch, snapshot in connection.execute(query):
        if session_id in session_ids:
            with contextlib.suppress(msgspec.DecodeError):
                found[session_id] = (epoch, _opened_in_decoder.decode(snapshot).project_id)
    return found


def _count_as_used(connection: sqlite3.Connection, now: float, idle_expiry_s: float) -> None:
    """On a database an older version wrote: the open sessions that may have been called
    within the idle expiry count as called now, as that version counted every session after a
    restart, so that an upgrade does not expire a session in use; the others keep their time."""
    recent = now - idle_expiry_s - limits.SESSION_SWEEP_INTERVAL_S
    with connection:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(
            "UPDATE sessions SET last_used = ? WHERE last_used >= ? AND last_used < ? "
            "AND NOT coalesce(json_extract(snapshot, '$.closed'), 0)",
            (now, recent, now),
        )
        connection.execute(f"PRAGMA user_version = {LAST_USE_KEPT_VERSION}")


def start_epochs_above(path: Path, base: int) -> None:
    """A state database (a new one replacing a damaged one, or one put in place of the file
    orcad had open) whose sessions open above `base`, the rows it holds included, so that a
    process still holding an epoch from the lost database is fenced, not matched."""
    connection = connect_private(path)
    try:
        _create_schema(connection)
        with connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute(
                "INSERT INTO epoch_base (only, base) VALUES (1, ?) "
                "ON CONFLICT(only) DO UPDATE SET base = max(base, excluded.base)",
                (base,),
            )
            connection.execute("UPDATE sessions SET epoch = ? WHERE epoch < ?", (base, base))
    finally:
        connection.close()


def _first_epoch(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT base FROM epoch_base").fetchone()
    return (int(row[0]) if row else 0) + 1


class StateFileReplaced(StorageError):
    """The state database was found deleted or replaced when a connection was to be opened:
    the file at the path is made again (or has its epochs raised) before any use."""


class SessionDatabase:
    """The state database's connection and each session's calls as known in memory: when it
    was last called and when that was stored, its idle expiry, the last-use writer and the
    sweep. SessionStore adds opening, joining, checking and closing sessions."""

    def __init__(
        self,
        database_path: Path,
        clock: Clock,
        idle_expiry_s: float = limits.DEFAULT_SESSION_IDLE_EXPIRY_S,
    ) -> None:
        self.database_path = database_path
        self._db = SQLiteWorker(lambda: self._connect(database_path))
        # (device, inode) of the file orcad keeps its sessions in: the one it first opened, or
        # the one a replacement made (`adopt_file`); kept while no connection is open, so that
        # a call made while a lost file is being replaced waits for it rather than making a
        # new, empty file of its own
        self._opened_file: tuple[int, int] | None = None
        # True while the file is being made again (`replacing`): the new file may take the lost
        # one's inode number, and so look like it before its epochs are raised
        self._replacing = False
        self._clock = clock
        self.idle_expiry_s = idle_expiry_s
        self._cache: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self._open_epochs: dict[str, int] = {}  # session id -> its open epoch (daemon.status)
        self._last_used: dict[str, float] = {}  # session id -> time of its latest call
        # session id -> Clock.monotonic() of its latest call in this process: the idle expiry
        # is timed on it, as a wall clock set forward would end every session at once and one
        # set back would keep them all open as much longer (the wall time is what is stored)
        self._last_call_elapsed: dict[str, float] = {}
        self._stored_last_use: dict[str, float] = {}  # session id -> that time in its row
        self._last_use_due = trio.Event()  # a stored time trails its last call: write it
        # while count_open_rows runs: the sessions closed or pruned meanwhile (not to count)
        self._ended_while_counting: set[str] | None = None
        # Opens the database again after an I/O error or damage SQLite reported, replacing it if
        # damaged (the daemon sets it), told what SQLite said and which file the connection that
        # said it had open; the call is then run once more.
        self.on_corrupt: Callable[[str, tuple[int, int] | None], Awaitable[None]] | None = None
        # Told, before the call that found it, that the file open is no longer the one at the
        # path (deleted, or another put in its place); the daemon sets it.
        self.on_replaced: Callable[[], Awaitable[None]] | None = None
        # Told the id of a session closed or expired (what lasts as long as a session ends).
        self.on_ended: list[Callable[[str], None]] = []

    def _connect(self, path: Path) -> sqlite3.Connection:
        if self.on_replaced is not None and (self._replacing or self.file_replaced()):
            # (a connection dropped for a replacement not yet made): nothing is created here
            raise StateFileReplaced(
                f"{path} was deleted or replaced while orcad ran, and is being made again; "
                "try again"
            )
        connection = connect_private(path)
        try:
            if _create_schema(connection):
                _count_as_used(connection, self._clock.now(), self.idle_expiry_s)
            status = os.stat(path)
        except (sqlite3.Error, OSError):
            connection.close()
            raise
        if self._opened_file is None:
            self._opened_file = (status.st_dev, status.st_ino)
        return connection

    def close(self) -> None:
        self._db.close()

    @contextlib.contextmanager
    def replacing(self) -> Iterator[None]:
        """While the file is made again in place of one lost or damaged: no connection is
        opened (a call waits for the new file, see `_run`). A new file often takes the inode
        number of the deleted one, so until `adopt_file` it can pass for the file it replaces,
        before its epochs are raised."""
        self._replacing = True
        try:
            yield
        finally:
            self._replacing = False

    def adopt_file(self) -> None:
        """The file now at the path is the one sessions are kept in (it was just made or had
        its epochs raised, in place of one lost or damaged)."""
        self._opened_file = self.file_identity()

    def file_replaced(self) -> bool:
        """Whether the file sessions are kept in is no longer the one at the path: it was
        deleted (a connection would go on writing epochs into a file no start will read) or
        another was put in its place (its epochs may be below those handed out since), or it
        was emptied in place (`: > file`; in WAL mode a database once opened is never empty),
        which its WAL, holding the last changes, then no longer fits."""
        opened = self._opened_file
        if opened is None:
            return False
        try:
            status = os.stat(self.database_path)
        except FileNotFoundError:
            return True
        except OSError:  # cannot be looked at now: the call says what is wrong
            return False
        return (status.st_dev, status.st_ino) != opened or status.st_size == 0

    def file_identity(self) -> tuple[int, int] | None:
        """(device, inode) of the file at the path now, None when there is none to look at."""
        try:
            status = os.stat(self.database_path)
        except OSError:
            return None
        return (status.st_dev, status.st_ino)

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the database; one SQLite reports damaged is replaced (what it held is
        lost, and said) and `work` runs again on the new one, whatever call found it. So is
        one deleted or replaced since it was opened, before `work` runs."""
        if self.on_replaced is not None and self.file_replaced():
            await self.on_replaced()
        try:
            return await self._db.run(work)
        except StateFileReplaced:  # lost after the look above, before the connection
            if self.on_replaced is None:
                raise
            await self.on_replaced()
        except sqlite3.DatabaseError as exc:
            if not may_be_a_stale_view(exc) or self.on_corrupt is None:
                raise
            await self.on_corrupt(str(exc), self._opened_file)
        return await self._db.run(work)

    def _idle(self, session_id: str, now: float) -> bool:
        """Whether the session had no call for the idle expiry: timed on the monotonic clock
        since a call in this process, else (a session not called since the start) on the wall
        clock from its stored last call."""
        elapsed = self._last_call_elapsed.get(session_id)
        if elapsed is not None:
            return self._clock.monotonic() - elapsed > self.idle_expiry_s
        last = self._last_used.get(session_id)
        return last is not None and now - last > self.idle_expiry_s

    def _used(self, session_id: str, now: float) -> None:
        """A call at `now`; the writer is woken once the stored time trails it too far."""
        self._last_used[session_id] = now
        self._last_call_elapsed[session_id] = self._clock.monotonic()
        stored = self._stored_last_use.get(session_id, -math.inf)
        if now - stored >= limits.SESSION_LAST_USE_WRITE_S:
            self._last_use_due.set()

    def _forget_use(self, session_id: str) -> None:
        self._last_used.pop(session_id, None)
        self._last_call_elapsed.pop(session_id, None)
        self._stored_last_use.pop(session_id, None)

    def expire_idle(self) -> list[str]:
        """Stop counting sessions idle past the expiry as open; their next call gets not_found."""
        now = self._clock.now()
        expired = [sid for sid in self._open_epochs if self._idle(sid, now)]
        for session_id in expired:
            del self._open_epochs[session_id]
            log.info("session.expired", session_id=session_id, idle_s=self.idle_expiry_s)
            self._ended(session_id)
        return expired

    def _ended(self, session_id: str) -> None:
        for listener in self.on_ended:
            listener(session_id)

    async def run_last_use_writer(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Background task: store the last use of the sessions called since it was stored,
        whenever one's stored time trails its last call by SESSION_LAST_USE_WRITE_S: a session
        in use costs one small write per interval at most, and one not called costs none."""
        task_status.started()
        while True:
            await self._last_use_due.wait()
            self._last_use_due = trio.Event()
            try:
                await self.store_last_use()
            except sqlite3.Error as exc:  # a full disk or a lock held elsewhere: the next call
                log.warning("session.last_use_write_failed", error=str(exc))
                await trio.sleep(limits.SESSION_LAST_USE_WRITE_S)

    async def store_last_use(self) -> None:
        """Write the time of the last call of each session called since its row was written."""
        due = [
            (used, session_id, used)
            for session_id, used in self._last_used.items()
            if used > self._stored_last_use.get(session_id, -math.inf)
        ]
        if not due:
            return

        def write(connection: sqlite3.Connection) -> None:
            with connection:
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(
                    "UPDATE sessions SET last_used = ? WHERE session_id = ? "
                    "AND (last_used IS NULL OR last_used < ?)",
                    due,
                )

        await self._run(write)
        for used, session_id, _ in due:
            if session_id in self._last_used:  # not closed or pruned meanwhile
                stored = self._stored_last_use.get(session_id, -math.inf)
                self._stored_last_use[session_id] = max(stored, used)

    async def aclose(self) -> None:
        """At a clean stop: store every session's last call, then close the database."""
        try:
            await self.store_last_use()
        except sqlite3.Error as exc:
            log.warning("session.last_use_write_failed", error=str(exc))
        self.close()

    @property
    def retention_s(self) -> float:
        """How long a row is kept after its session's last call: far past the idle expiry."""
        return max(limits.SESSION_ROW_RETENTION_S, 2 * self.idle_expiry_s)

    async def run_sweeper(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Background task: count the sessions still open from before a start, prune the rows
        the daemon before could have swept (`sweep_at_start`), then sweep once per
        SESSION_SWEEP_INTERVAL_S (the first an interval after the start, by when the sessions
        still in use have made a call)."""
        task_status.started()
        try:
            await self.count_open_rows()
        except sqlite3.Error as exc:  # counted as each is called again, as before
            log.warning("session.count_failed", error=str(exc))
        await self._sweep_until_done(self.sweep_at_start)
        while True:
            await trio.sleep(limits.SESSION_SWEEP_INTERVAL_S)
            await self._sweep_until_done(self.sweep)

    async def _sweep_until_done(self, sweep: Callable[[], Awaitable[list[str]]]) -> None:
        """Sweep passes, each a transaction of its own, SESSION_SWEEP_CATCH_UP_S apart for as
        long as each deletes as many rows as a pass may."""
        while True:
            try:
                pruned = await sweep()
            except sqlite3.Error as exc:  # a full disk or a lock held elsewhere: next time
                log.warning("session.sweep_failed", error=str(exc))
                return
            if len(pruned) < limits.SESSION_SWEEP_MAX_ROWS:
                return
            await trio.sleep(limits.SESSION_SWEEP_CATCH_UP_S)

    async def count_open_rows(self) -> int:
        """Count as open (daemon.status) the sessions whose rows say they are open and were
        called within the idle expiry: a restart ends no session, so they are open as they
        were. Those this process has already seen called are left as they are; how many were
        added."""
        since = self._clock.now() - self.idle_expiry_s

        def read(connection: sqlite3.Connection) -> list[tuple[str, int, float]]:
            rows = connection.execute(
                "SELECT session_id, epoch, snapshot, last_used FROM sessions WHERE last_used >= ?",
                (since,),
            ).fetchall()
            return [
                (str(session_id), int(epoch), float(last_used))
                for session_id, epoch, snapshot, last_used in rows
                if _open_snapshot(snapshot)
            ]

        ended: set[str] = set()
        self._ended_while_counting = ended
        try:
            rows = await self._run(read)
        finally:
            self._ended_while_counting = None
        added = 0
        for session_id, epoch, last_used in rows:
            known = session_id in self._last_used or session_id in self._open_epochs
            if known or session_id in ended:
                continue
            self._open_epochs[session_id] = epoch
            self._last_used[session_id] = self._stored_last_use[session_id] = last_used
            added += 1
        if added:
            log.info("session.counted_open", sessions=added)
        return added

    async def sweep(self) -> list[str]:
        """Expire idle sessions, store when each session in memory was last called, and delete
        the rows (at most SESSION_SWEEP_MAX_ROWS) of sessions untouched for the retention,
        raising the epoch floor to their epochs first; the ids deleted."""
        self.expire_idle()
        await self.store_last_use()
        cutoff = self._clock.now() - self.retention_s
        return await self._prune(lambda _connection: cutoff)

    async def sweep_at_start(self) -> list[str]:
        """At a start, before the first hourly sweep: delete the rows (at most
        SESSION_SWEEP_MAX_ROWS) of sessions untouched for the retention before the latest call
        the database holds, which the daemon that stored that call could have swept already.
        A daemon that never runs for a whole interval still prunes its rows this way, while a
        start after a long time without orcad prunes nothing here: the sessions that were
        still in use then get the interval to make a call first. The ids deleted."""
        await self.store_last_use()
        now = self._clock.now()
        retention = self.retention_s

        def cutoff(connection: sqlite3.Connection) -> float | None:
            latest = connection.execute("SELECT max(last_used) FROM sessions").fetchone()[0]
            return None if latest is None else min(now, float(latest)) - retention

        return await self._prune(cutoff)

    async def _prune(self, cutoff_of: Callable[[sqlite3.Connection], float | None]) -> list[str]:
        """Delete the rows (at most SESSION_SWEEP_MAX_ROWS) whose last call is before the
        cutoff read in the same transaction, raising the epoch floor to their epochs first."""

        def prune(connection: sqlite3.Connection) -> list[str]:
            with connection:
                connection.execute("BEGIN IMMEDIATE")
                cutoff = cutoff_of(connection)
                if cutoff is None:
                    return []
                rows = connection.execute(
                    "SELECT session_id, epoch FROM sessions WHERE last_used < ? "
                    "ORDER BY last_used LIMIT ?",
                    (cutoff, limits.SESSION_SWEEP_MAX_ROWS),
                ).fetchall()
                if not rows:
                    return []
                connection.execute(
                    "INSERT INTO epoch_base (only, base) VALUES (1, ?) "
                    "ON CONFLICT(only) DO UPDATE SET base = MAX(base, excluded.base)",
                    (max(int(epoch) for _, epoch in rows),),
                )
                connection.executemany(
                    "DELETE FROM sessions WHERE session_id = ?", [(sid,) for sid, _ in rows]
                )
            return [str(session_id) for session_id, _ in rows]

        pruned = await self._run(prune)
        for session_id in pruned:
            self.note_ended(session_id)
            self._cache.pop(session_id, None)
            self._forget_use(session_id)
            self._open_epochs.pop(session_id, None)
        if pruned:
            log.info("session.rows_pruned", count=len(pruned), retention_s=self.retention_s)
        return pruned

    def note_ended(self, session_id: str) -> None:
        """A session closed or pruned: not to be counted open by a count running now."""
        if self._ended_while_counting is not None:
            self._ended_while_counting.add(session_id)

    @staticmethod
    def _load(
        connection: sqlite3.Connection, session_id: str
    ) -> tuple[Session, float | None] | None:
        """The session's snapshot and the last use stored with it."""
        row = connection.execute(
            "SELECT snapshot, last_used FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        return (_session_decoder.decode(row[0]), row[1]) if row else None


def _open_snapshot(snapshot: str) -> bool:
    """Whether a row's snapshot is of a session not closed (one that does not decode is not
    counted; its next call finds what is wrong with it)."""
    try:
        return not _session_decoder.decode(snapshot).closed
    except msgspec.DecodeError:
        return False
