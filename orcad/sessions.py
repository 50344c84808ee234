"""Sessions: persisted epochs and the configuration snapshot taken at open.

Opening an existing session id again returns a strictly higher epoch, durable before the
answer; calls carrying an older epoch are stale. An open with `join` attaches to a session that
is open at its current epoch instead (cooperating processes of one agent session: its hooks and
its MCP server), so they never fence each other, even when they join at once a session that is
not open (the first opens it, the others join that epoch). A session no call has touched for
the idle expiry stops counting as open and must be opened (or joined) again. A session's snapshot
(mode, interactive, auto_approve, bare, history, auto memory, workspace and project) never
changes after open.

How the time of a session's last call is stored and how old rows are swept: session_database.
"""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

import msgspec
import structlog
import trio

from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.errors import InvalidParams, NotFound, StaleSession, quoted
from orcad.identity import ProjectIdentity, derive_project
from orcad.session_database import SessionDatabase, _first_epoch
from orcad.session_snapshot import Session, _session_decoder
from orcad.workspace import Workspace, canonical_directory, derive_workspace
from protocol.types import SessionOpenParams

log = structlog.get_logger("orcad.sessions")

SESSION_CACHE_MAX = 4096  # snapshots kept in memory; older ones are read from the database


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


class SessionStore(SessionDatabase):
    """Owns the `sessions` table of the daemon state database."""

    @property
    def open_count(self) -> int:
        self.expire_idle()
        return len(self._open_epochs)

    def is_open_at(self, session_id: str, epoch: int) -> bool:
        """Whether the session is still open at `epoch`: not closed, reopened or expired since
        a call at that epoch was let through (a call that waits may outlast it)."""
        return self._open_epochs.get(session_id) == epoch and not self._idle(
            session_id, self._clock.now()
        )

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

        # The epoch this process last knew the session at: the file may hold a lower one (an
        # older copy restored over it in place), and a process may still hold the one known.
        known = self._cache.get(session_id)
        known_epoch = max(known.epoch if known else 0, self._open_epochs.get(session_id, 0))

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
                epoch = max(row[0] + 1 if row else _first_epoch(connection), known_epoch + 1)
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
            self._last_call_elapsed[session_id] = self._clock.monotonic()
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
                f"unknown session {quoted(session_id)}; call session.open first",
                session_id=session_id,
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
        self.note_ended(session_id)
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
