"""Sessions: persisted epochs and the configuration snapshot taken at open.

Opening an existing session id again returns a strictly higher epoch, durable before the
answer; calls carrying an older epoch are stale. An open with `join` attaches to a session that
is open at its current epoch instead (cooperating processes of one agent session: its hooks and
its MCP server), so they never fence each other, even when they join at once a session that is
not open (the first opens it, the others join that epoch). A session no call has touched for
the idle expiry stops counting as open and must be opened (or joined) again. A session's snapshot
(mode, interactive, auto_approve, bare, history, auto memory, workspace and project) never
changes after open.

When a session was last called is kept in memory and stored in its row, so that the idle expiry
holds across a daemon restart: the stored time is written at open and close, by a background
writer as soon as it trails the last call by SESSION_LAST_USE_WRITE_S, and for every session at
a clean stop. After a restart a session is idle from its stored time, which a crash leaves at
most that much behind its last call.

A session's row is kept while it may still be called or joined: the periodic sweep deletes
those no call has touched for the retention (far past the idle expiry, so only sessions that
ended or expired long ago), a bounded number per pass. Each deletion first raises the stored
epoch floor to the deleted epoch, and an id without a row opens above the floor: a pruned id
opened again gets an epoch above any it had, so a holder of an old one stays fenced.
"""

from __future__ import annotations

import collections
import math
import secrets
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import msgspec
import structlog
import trio

from orcad import limits
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.clock import Clock
from orcad.errors import InvalidParams, NotFound, StaleSession
from orcad.identity import ProjectIdentity, derive_project
from orcad.sqlite_worker import SQLiteWorker, connect_private
from orcad.storage_faults import is_corruption
from orcad.workspace import Workspace, canonical_directory, derive_workspace
from protocol.types import History, Mode, SessionOpenParams

log = structlog.get_logger("orcad.sessions")

T = TypeVar("T")


class Session(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    epoch: int
    cwd: str
    workspace_id: str
    workspace_root: str
    project_id: str
    project_identity: str
    project_root: str
    history: History
    mode: Mode
    interactive: bool
    auto_approve: bool
    bare: bool
    auto_memory: bool
    opened_at: float
    closed: bool = False


_session_decoder = msgspec.json.Decoder(Session)

SESSION_CACHE_MAX = 4096  # snapshots kept in memory; older ones are read from the database

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
    if version < LAST_USE_KEPT_VERSION and not older:
        connection.execute(f"PRAGMA user_version = {LAST_USE_KEPT_VERSION}")
    return older


def _has_sessions_table(connection: sqlite3.Connection) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sessions'"
    return connection.execute(query).fetchone() is not None


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
    """A new state database (replacing a damaged one) whose sessions start above `base`, so
    that a process still holding an epoch from the lost database is fenced, not matched."""
    connection = connect_private(path)
    try:
        _create_schema(connection)
        connection.execute("INSERT OR REPLACE INTO epoch_base (only, base) VALUES (1, ?)", (base,))
    finally:
        connection.close()


def _first_epoch(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT base FROM epoch_base").fetchone()
    return (int(row[0]) if row else 0) + 1


def new_session_id() -> str:
    return "ses_" + secrets.token_hex(16)


def _derive_identity(
    cwd: str, switch: AutoMemorySwitch
) -> tuple[Path, Workspace, ProjectIdentity, bool]:
    try:
        directory = canonical_directory(cwd)
        workspace = derive_workspace(str(directory))
    except ValueError as exc:
        raise InvalidParams(str(exc), field="cwd") from exc
    project = derive_project(Path(workspace.root))
    return directory, workspace, project, switch.read(project.root)


class SessionStore:
    """Owns the `sessions` table of the daemon state database."""

    def __init__(
        self,
        database_path: Path,
        clock: Clock,
        idle_expiry_s: float = limits.DEFAULT_SESSION_IDLE_EXPIRY_S,
    ) -> None:
        self._db = SQLiteWorker(lambda: self._connect(database_path))
        self._clock = clock
        self.idle_expiry_s = idle_expiry_s
        self._cache: collections.OrderedDict[str, Session] = collections.OrderedDict()
        self._open_epochs: dict[str, int] = {}  # session id -> its open epoch (daemon.status)
        self._last_used: dict[str, float] = {}  # session id -> time of its latest call
        self._stored_last_use: dict[str, float] = {}  # session id -> that time in its row
        self._last_use_due = trio.Event()  # a stored time trails its last call: write it
        # Replaces a damaged database (the daemon sets it); the call is then run once more.
        self.on_corrupt: Callable[[str], Awaitable[None]] | None = None
        # Told the id of a session closed or expired (what lasts as long as a session ends).
        self.on_ended: list[Callable[[str], None]] = []

    def _connect(self, path: Path) -> sqlite3.Connection:
        connection = connect_private(path)
        try:
            if _create_schema(connection):
                _count_as_used(connection, self._clock.now(), self.idle_expiry_s)
        except sqlite3.Error:
            connection.close()
            raise
        return connection

    def close(self) -> None:
        self._db.close()

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the database; one SQLite reports damaged is replaced (what it held is
        lost, and said) and `work` runs again on the new one, whatever call found it."""
        try:
            return await self._db.run(work)
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc) or self.on_corrupt is None:
                raise
            await self.on_corrupt(str(exc))
        return await self._db.run(work)

    @property
    def open_count(self) -> int:
        self.expire_idle()
        return len(self._open_epochs)

    def _idle(self, session_id: str, now: float) -> bool:
        last = self._last_used.get(session_id)
        return last is not None and now - last > self.idle_expiry_s

    def _used(self, session_id: str, now: float) -> None:
        """A call at `now`; the writer is woken once the stored time trails it too far."""
        self._last_used[session_id] = now
        stored = self._stored_last_use.get(session_id, -math.inf)
        if now - stored >= limits.SESSION_LAST_USE_WRITE_S:
            self._last_use_due.set()

    def _forget_use(self, session_id: str) -> None:
        self._last_used.pop(session_id, None)
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

    def _remember(self, session: Session) -> None:
        """Cache a snapshot; the least recently used beyond the bound are read again on demand."""
        self._cache[session.session_id] = session
        self._cache.move_to_end(session.session_id)
        while len(self._cache) > SESSION_CACHE_MAX:
            self._cache.popitem(last=False)

    async def open_or_join(
        self, params: SessionOpenParams, switch: AutoMemorySwitch
    ) -> tuple[Session, bool]:
        """The session `params` asks for, and whether it was joined (see `join`) or opened."""
        joined = await self.join(params)
        if joined is not None:
            return joined, True
        return await self._open(params, switch)

    async def open(self, params: SessionOpenParams, switch: AutoMemorySwitch) -> Session:
        session, _joined = await self._open(params, switch)
        return session

    async def _open(
        self, params: SessionOpenParams, switch: AutoMemorySwitch
    ) -> tuple[Session, bool]:
        """Open the session at a new epoch. With `join`, a session found open by then is joined
        instead: another process of the agent (joining too) opened it since `join` looked, and
        the two must share one epoch, not fence each other."""
        # Path resolution, the Git lookup and the config reads touch the disk: off the loop.
        directory, workspace, project, auto_memory = await trio.to_thread.run_sync(
            _derive_identity, params.cwd, switch
        )
        session_id = params.session_id or new_session_id()
        now = self._clock.now()
        if self._idle(session_id, now):
            # it expired unnoticed (the sweep is hourly): what lasts as long as a session
            # (grants) ends before it is opened again, as when it is joined
            self.expire_idle()

        def persist(connection: sqlite3.Connection) -> tuple[Session, bool]:
            with connection:
                connection.execute("BEGIN IMMEDIATE")
                row = connection.execute(
                    "SELECT epoch, snapshot FROM sessions WHERE session_id = ?", (session_id,)
                ).fetchone()
                if row and params.join:
                    current = _session_decoder.decode(row[1])
                    if not current.closed:
                        return current, True
                epoch = row[0] + 1 if row else _first_epoch(connection)
                session = Session(
                    session_id=session_id,
                    epoch=epoch,
                    cwd=str(directory),
                    workspace_id=workspace.id,
                    workspace_root=workspace.root,
                    project_id=project.id,
                    project_identity=project.identity,
                    project_root=project.root,
                    history=params.history,
                    mode=params.mode,
                    interactive=params.interactive,
                    auto_approve=params.auto_approve,
                    bare=params.bare,
                    auto_memory=auto_memory and not params.bare,
                    opened_at=now,
                )
                connection.execute(
                    "INSERT INTO sessions (session_id, epoch, snapshot, last_used) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
                    "epoch = excluded.epoch, snapshot = excluded.snapshot, "
                    "last_used = excluded.last_used",
                    (session_id, epoch, msgspec.json.encode(session).decode(), now),
                )
            return session, False

        session, joined = await self._run(persist)
        self._remember(session)
        self._open_epochs[session_id] = session.epoch
        if joined:
            self._used(session_id, now)
        else:  # written with the row
            self._last_used[session_id] = self._stored_last_use[session_id] = now
        if joined:
            log.info("session.joined", session_id=session_id, epoch=session.epoch, revived=False)
        else:
            log.info(
                "session.opened", session_id=session_id, epoch=session.epoch, mode=session.mode
            )
        return session, joined

    async def join(self, params: SessionOpenParams) -> Session | None:
        """The session `join` attaches to at its current epoch, or None to open as usual.

        A session that only went idle past the expiry is joined too, at the same epoch: expiry
        says its processes fell silent, not that another process superseded them, so a
        cooperating process still holding that epoch (an MCP server) must not be fenced by it.
        """
        if not params.join or params.session_id is None:
            return None
        session = await self._current(params.session_id)
        now = self._clock.now()
        if session is None or session.closed:
            return None
        revived = self._idle(session.session_id, now)
        if revived:  # it did expire: what lasts as long as a session (grants) ends, as it would
            self._ended(session.session_id)  # have had anything noticed the expiry first
        self._open_epochs[session.session_id] = session.epoch
        self._used(session.session_id, now)
        log.info(
            "session.joined", session_id=session.session_id, epoch=session.epoch, revived=revived
        )
        return session

    async def _current(self, session_id: str) -> Session | None:
        """The session's row as last written; a session this process has not seen called
        (as after a restart) counts as last called when its row says."""
        session = self._cache.get(session_id)
        if session is None:
            loaded = await self._run(lambda c: self._load(c, session_id))
            if loaded is None:
                return None
            session, stored_last_use = loaded
            self._remember(session)
            known = session_id in self._last_used
            if stored_last_use is not None and not session.closed and not known:
                self._last_used[session_id] = stored_last_use
                self._stored_last_use[session_id] = stored_last_use
                if self._idle(session_id, self._clock.now()):  # it expired while orcad was down
                    log.info("session.expired", session_id=session_id, idle_s=self.idle_expiry_s)
        return session

    async def require(self, session_id: str, epoch: int) -> Session:
        """The open session at this epoch; StaleSession for an older epoch, NotFound otherwise
        (its data naming the session: what tells a client to open it again)."""
        session = await self._current(session_id)
        if session is None:
            raise NotFound(
                f"unknown session {session_id!r}; call session.open first", session_id=session_id
            )
        if epoch < session.epoch:
            raise StaleSession(
                f"session {session_id} was reopened (epoch {session.epoch}); this caller holds "
                f"epoch {epoch} and must stop",
                current_epoch=session.epoch,
            )
        if epoch > session.epoch:
            raise NotFound(f"session {session_id} has no epoch {epoch}", session_id=session_id)
        if session.closed:
            raise NotFound(
                f"session {session_id} is closed; open it again to continue", session_id=session_id
            )
        now = self._clock.now()
        if self._idle(session_id, now):
            self.expire_idle()
            raise NotFound(
                f"session {session_id} expired after {self.idle_expiry_s:g} s without a call; "
                "open it again to continue",
                session_id=session_id,
            )
        self._used(session_id, now)
        # Open at this epoch: counted even when opened before a restart (only its epoch lasted).
        self._open_epochs[session_id] = session.epoch
        return session

    async def close_session(self, session_id: str, epoch: int) -> None:
        session = await self.require(session_id, epoch)
        closed = msgspec.structs.replace(session, closed=True)
        now = self._clock.now()

        def persist(connection: sqlite3.Connection) -> int:
            with connection:
                connection.execute("BEGIN IMMEDIATE")
                row = connection.execute(
                    "SELECT epoch FROM sessions WHERE session_id = ?", (session_id,)
                ).fetchone()
                if row is None:  # lost with a damaged database: closing it needs no row
                    return epoch
                current = int(row[0])
                if current == epoch:
                    connection.execute(
                        "UPDATE sessions SET snapshot = ?, last_used = ? "
                        "WHERE session_id = ? AND epoch = ?",
                        (msgspec.json.encode(closed).decode(), now, session_id, epoch),
                    )
            return current

        current = await self._run(persist)
        if current != epoch:  # reopened while this close waited: the new epoch stays open
            raise StaleSession(
                f"session {session_id} was reopened (epoch {current}); this caller holds "
                f"epoch {epoch} and must stop",
                current_epoch=current,
            )
        cached = self._cache.get(session_id)
        if cached is not None and cached.epoch == epoch:
            del self._cache[session_id]  # a later call reads the closed snapshot from the database
        if self._open_epochs.get(session_id) == epoch:
            del self._open_epochs[session_id]
        self._forget_use(session_id)
        log.info("session.closed", session_id=session_id, epoch=epoch)
        self._ended(session_id)

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
        """Background task: sweep once per SESSION_SWEEP_INTERVAL_S (the first an interval
        after the start, by when the sessions still in use have made a call)."""
        task_status.started()
        while True:
            await trio.sleep(limits.SESSION_SWEEP_INTERVAL_S)
            try:
                await self.sweep()
            except sqlite3.Error as exc:  # a full disk or a lock held elsewhere: next time
                log.warning("session.sweep_failed", error=str(exc))

    async def sweep(self) -> list[str]:
        """Expire idle sessions, store when each session in memory was last called, and delete
        the rows (at most SESSION_SWEEP_MAX_ROWS) of sessions untouched for the retention,
        raising the epoch floor to their epochs first; the ids deleted."""
        self.expire_idle()
        await self.store_last_use()
        cutoff = self._clock.now() - self.retention_s

        def prune(connection: sqlite3.Connection) -> list[str]:
            with connection:
                connection.execute("BEGIN IMMEDIATE")
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
            self._cache.pop(session_id, None)
            self._forget_use(session_id)
            self._open_epochs.pop(session_id, None)
        if pruned:
            log.info("session.rows_pruned", count=len(pruned), retention_s=self.retention_s)
        return pruned

    @staticmethod
    def _load(
        connection: sqlite3.Connection, session_id: str
    ) -> tuple[Session, float | None] | None:
        """The session's snapshot and the last use stored with it."""
        row = connection.execute(
            "SELECT snapshot, last_used FROM sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        return (_session_decoder.decode(row[0]), row[1]) if row else None
