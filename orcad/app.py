"""The daemon's composition root: configuration, the session store, the daemon's own methods
(daemon.*, session.*), and the features, installed in order and wired to each other here.

A `Daemon` is the host every feature is given (orcad.host.Host): a router, the sessions, the
clock, the paths, error recording and lifecycle registration. What one feature needs of
another is handed to it explicitly in `install_features`; the server knows only the router.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog
import trio

from orcad import __version__
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.clock import Clock, SystemClock, format_time
from orcad.config import Config, LoadedConfig
from orcad.errors import StorageError
from orcad.host import BackgroundTask, Closer, SessionHook
from orcad.log import describe_exception
from orcad.paths import Paths
from orcad.rpc import AsyncHandler, Router, SyncHandler
from orcad.session_database import start_epochs_above
from orcad.session_snapshot import Session
from orcad.sessions import SessionStore
from orcad.state_db import LOSS, loss_with_memory, move_aside, state_db_problem
from orcad.storage_faults import advice, fault_reason, is_corruption, storage_error_of
from orcad.supervision import supervised
from protocol.types import (
    PROTOCOL_VERSION,
    EmbeddingStatus,
    Empty,
    JobCounts,
    PingParams,
    PingResult,
    ProjectRef,
    RecentError,
    SessionCloseParams,
    SessionOpenParams,
    SessionOpenResult,
    Startup,
    StatusParams,
    StatusResult,
    WorkersStatus,
    WorkspaceRef,
)

if TYPE_CHECKING:
    from orcad.capture.service import CaptureService
    from orcad.deliberate.service import DeliberateMemory
    from orcad.recall.api import RecallFeature

log = structlog.get_logger("orcad.app")

RECENT_ERRORS_KEPT = 20

StartupReader = Callable[[Session], Awaitable[Startup]]


class FaultRecordingRouter(Router):
    """A router whose async handlers answer a storage fault (full disk, read-only file system,
    damaged database) with -32017 `storage` and record it for daemon.status, on every method."""

    def __init__(self, record: Callable[[str, str], None] | None = None) -> None:
        super().__init__()
        self.record = record

    def add(self, method: str, handler: AsyncHandler | SyncHandler, *, early: bool = False) -> None:
        if inspect.iscoroutinefunction(handler):
            handler = self._guard(method, handler)
        super().add(method, handler, early=early)

    def _guard(self, method: str, handler: AsyncHandler) -> AsyncHandler:
        async def guarded(params: Any) -> Any:
            try:
                return await handler(params)
            except StorageError as exc:
                behind = fault_reason(exc)  # the OS or SQLite fault it was raised from
                if "reason" not in exc.data and behind is not None:  # a store's: say which
                    exc.data["reason"] = behind
                # and what to do, which a store that only named the file left out; a lock
                # another process held past its timeout (a project's, a memory file's) is no
                # such fault, and its message says what to do about it
                what_to_do = None
                if behind is not None and behind == exc.data.get("reason"):
                    what_to_do = advice(behind)
                if what_to_do is not None and what_to_do not in exc.message:
                    exc.message = f"{exc.message}; {what_to_do}"
                self._note(method, exc)
                raise
            except (OSError, sqlite3.Error) as exc:
                translated = storage_error_of(exc)
                if translated is None:
                    raise
                self._note(method, translated)
                raise translated from exc

        return guarded

    def _note(self, method: str, error: StorageError) -> None:
        log.warning("storage.fault", method=method, error=error.message)
        if self.record is not None:
            self.record("storage", f"{method}: {error.message}")


class CaptureStatus(Protocol):
    """What the automatic-memory feature reports in daemon.status."""

    def job_counts(self) -> JobCounts: ...
    def workers_busy(self) -> int: ...
    def project_count(self) -> int: ...
    def provider_model(self) -> str | None: ...
    def extraction_problem(self) -> str | None: ...
    async def look_at_damaged(self) -> None: ...


@dataclass
class Daemon:
    paths: Paths
    loaded: LoadedConfig
    clock: Clock = field(default_factory=SystemClock)
    router: Router = field(default_factory=FaultRecordingRouter)
    started_at: float = 0.0
    started_elapsed: float = 0.0  # Clock.monotonic() at the start: the uptime is timed on it
    recent_errors: collections.deque[RecentError] = field(
        default_factory=lambda: collections.deque(maxlen=RECENT_ERRORS_KEPT)
    )
    session_opened_hooks: list[SessionHook] = field(default_factory=list)
    startup_reader: StartupReader | None = None
    background: list[BackgroundTask] = field(default_factory=list)
    closers: list[Closer] = field(default_factory=list)
    capture_status: CaptureStatus | None = None
    embedding_status: Callable[[], EmbeddingStatus] | None = None
    sessions: SessionStore = field(init=False)
    auto_memory_switch: AutoMemorySwitch = field(init=False)
    connections: Callable[[], int] = lambda: 0
    # Blocking callables that drop a connection to the state database (before it is replaced).
    state_db_users: list[Callable[[], None]] = field(default_factory=list)
    _state_db_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # the memory root and its projects/ as found at the start (device, inode; None: not there),
    # to tell a state database deleted alone from one deleted with the memory around it
    _memory_dirs: dict[Path, tuple[int, int] | None] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        if isinstance(self.router, FaultRecordingRouter) and self.router.record is None:
            self.router.record = self.record_error
        self._memory_dirs = {
            directory: _identity(directory)
            for directory in (self.paths.memory_root, self.paths.projects_dir)
        }
        self.sessions = SessionStore(
            self.paths.state_db, self.clock, self.loaded.config.sessions.idle_expiry_s
        )
        self.auto_memory_switch = AutoMemorySwitch(self.paths.config_file, self.config)
        self.state_db_users.append(self.sessions.close)
        self.sessions.on_corrupt = self._recover_state_db_async
        self.sessions.on_replaced = self._replace_lost_state_db_async
        self.run_in_background(self.sessions.run_sweeper)
        self.run_in_background(self.sessions.run_last_use_writer)
        self.started_at = self.clock.now()
        self.started_elapsed = self.clock.monotonic()
        self.router.add("daemon.ping", self.ping, early=True)
        self.router.add("daemon.status", self.status_answer)
        self.router.add("session.open", self.open_session)
        self.router.add("session.close", self.close_session)

    @property
    def config(self) -> Config:
        return self.loaded.config

    def run_in_background(self, task: BackgroundTask) -> None:
        self.background.append(task)

    def close_at_exit(self, closer: Closer) -> None:
        self.closers.append(closer)

    def on_session_opened(self, hook: SessionHook) -> None:
        self.session_opened_hooks.append(hook)

    def share_state_db(self, drop_connection: Callable[[], None]) -> None:
        self.state_db_users.append(drop_connection)

    def record_error(self, kind: str, message: str) -> None:
        """Remember a problem for daemon.status (and doctor); the caller logs it. A problem
        already listed moves to the end with its new time instead of crowding others out.
        A secret quoted by an error (a URL's password, a key in an endpoint's answer) is
        replaced, since daemon.status and doctor show these to anyone who asks."""
        # imported here, not with this module, which orcad loads before it answers a ping; the
        # features import the detector as they are installed, so it is in by the first error
        from orcad.secrets import redact  # noqa: PLC0415

        message = redact(message)
        for entry in self.recent_errors:
            if entry.kind == kind and entry.message == message:
                self.recent_errors.remove(entry)
                break
        self.recent_errors.append(
            RecentError(at=format_time(self.clock.now()), kind=kind, message=message)
        )

    def ping(self, params: PingParams) -> PingResult:
        return PingResult(protocol=PROTOCOL_VERSION, version=__version__, pid=os.getpid())

    async def status_answer(self, params: StatusParams) -> StatusResult:
        """daemon.status, after the job files counted as damaged are looked at again (a
        deleted or restored one is no longer counted)."""
        if self.capture_status is not None:
            await self.capture_status.look_at_damaged()
        return self.status(params)

    def status(self, params: StatusParams) -> StatusResult:
        capture = self.capture_status
        return StatusResult(
            version=__version__,
            pid=os.getpid(),
            started_at=format_time(self.started_at),
            uptime_s=round(self.clock.monotonic() - self.started_elapsed, 3),
            socket=str(self.paths.socket),
            memory_root=str(self.paths.memory_root),
            deliberate_db=str(self.paths.deliberate_db),
            workers=WorkersStatus(
                configured=self.config.extraction.workers,
                busy=capture.workers_busy() if capture else 0,
            ),
            jobs=capture.job_counts() if capture else JobCounts(),
            sessions=self.sessions.open_count,
            projects=capture.project_count() if capture else 0,
            recent_errors=list(self.recent_errors),
            config_path=self.loaded.path,
            unknown_config_keys=self.loaded.unknown_keys,
            provider=self.config.extraction.provider,
            provider_model=capture.provider_model() if capture else None,
            extraction_problem=capture.extraction_problem() if capture else None,
            embedding=self.embedding_status() if self.embedding_status else None,
        )

    async def open_session(self, params: SessionOpenParams) -> SessionOpenResult:
        try:
            session, joined = await self.sessions.open_or_join(params, self.auto_memory_switch)
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                # off the event loop: after an I/O error it asks a child process about the file
                translated = await trio.to_thread.run_sync(
                    storage_error_of, exc, str(self.paths.state_db)
                )
                if translated is None:
                    raise
                raise translated from exc
            await trio.to_thread.run_sync(self.recover_state_db, str(exc))
            session, joined = await self.sessions.open_or_join(params, self.auto_memory_switch)
        if joined:
            return await self._opened(session, joined=True)
        for hook in self.session_opened_hooks:
            await hook(session)
        return await self._opened(session, joined=False)

    async def _opened(self, session: Session, *, joined: bool) -> SessionOpenResult:
        if self.startup_reader is not None and not session.bare:
            startup = await self.startup_reader(session)
        else:
            startup = Startup(user="", project="", truncated=False)
        return SessionOpenResult(
            session_id=session.session_id,
            epoch=session.epoch,
            project=ProjectRef(
                id=session.project_id, identity=session.project_identity, root=session.project_root
            ),
            workspace=WorkspaceRef(id=session.workspace_id, root=session.workspace_root),
            auto_memory=session.auto_memory,
            startup=startup,
            joined=joined,
            mode=session.mode,
            interactive=session.interactive,
            auto_approve=session.auto_approve,
        )

    async def close_session(self, params: SessionCloseParams) -> Empty:
        await self.sessions.close_session(params.session_id, params.epoch)
        return Empty()

    def check_state_db(self) -> None:
        """At start, before any session is served (blocking): a damaged state database is
        moved aside and recreated. One that cannot be checked now (locked by another process,
        on a full disk) is kept as it is: session calls answer -32017 with the cause until it
        is gone."""
        problem = self._state_db_damage()
        if problem is not None:
            with self._state_db_lock:
                self.recreate_state_db(problem)

    def _state_db_damage(self) -> str | None:
        """`state_db_problem`, with a check that cannot run recorded as a storage fault."""
        return self._checked_state_db()[0]

    def _checked_state_db(self) -> tuple[str | None, bool]:
        """`_state_db_damage`, and whether the check could run at all."""
        path = self.paths.state_db
        try:
            return state_db_problem(path), True
        except sqlite3.Error as exc:
            error = storage_error_of(exc, str(path))
            message = error.message if error is not None else f"{path}: {exc}"
            log.warning("state_db.unchecked", path=str(path), error=message)
            self.record_error("storage", message)
            return None, False

    async def _recover_state_db_async(
        self, reported: str, opened: tuple[int, int] | None = None
    ) -> None:
        await trio.to_thread.run_sync(self.recover_state_db, reported, opened)

    def recover_state_db(self, reported: str, opened: tuple[int, int] | None = None) -> None:
        """SQLite reported an I/O error or damage on a connection to the state database while
        running (blocking): every connection to it is closed first, so that the check sees the
        file as a new connection does (see may_be_a_stale_view), and it is replaced if damaged;
        a second report of the same fault finds it replaced already.

        Found sound, the file changed under the connections (its WAL cut short, written over in
        place): it is kept, opened again, with its epochs raised, since what changed may have
        taken the last epochs handed out. Kept as it was, every call would fail the same way
        until a restart, which would then hand out epochs from the older state.
        `opened`: the file the reporting connection had open (None: not known)."""
        with self._state_db_lock, self.sessions.replacing():
            if opened is not None and self.sessions.file_identity() != opened:
                return  # replaced since that connection was opened
            for drop_connection in self.state_db_users:
                drop_connection()
            problem, checked = self._checked_state_db()
            if problem is not None:
                self.recreate_state_db(problem)
            elif checked and not self.sessions.file_replaced():
                self._raise_epochs_of_reopened(reported)

    def _raise_epochs_of_reopened(self, reported: str) -> None:
        path = self.paths.state_db
        try:
            start_epochs_above(path, int(self.clock.now()))
        except (OSError, sqlite3.Error) as exc:  # the next call that fails tries again
            error = storage_error_of(exc, str(path))
            self.record_error("storage", error.message if error else f"{path}: {exc}")
            return
        log.warning("state_db.reopened", path=str(path), error=reported)
        self.record_error(
            "database_reopened",
            f"{path}: {reported} on the connections orcad had open, while a new connection "
            "finds it sound: its -wal was cut short or its -shm written over while orcad ran "
            "(a copy or restore of those files). It was opened again and kept; changes in the "
            "part cut off are lost, and sessions open at epochs above the time now, so a "
            "process holding an earlier one stays fenced",
        )

    def recreate_state_db(self, problem: str) -> None:
        """Move the damaged state database aside (blocking, under the state database lock);
        the next use creates a new one."""
        for drop_connection in self.state_db_users:
            drop_connection()
        path = self.paths.state_db
        lost = self._lost()
        try:
            moved = move_aside(path, self.clock.now())
        except OSError as exc:
            error = storage_error_of(exc, str(path))
            message = error.message if error is not None else f"{path}: {exc}"
            log.error("state_db.move_failed", path=str(path), problem=problem, error=message)
            self.record_error("state_db_damaged", f"{path} is damaged ({problem}): {message}")
            raise StorageError(f"{path} is damaged and cannot be moved aside: {message}") from exc
        # Epochs restart above the current time in seconds: above any counter the lost file held.
        start_epochs_above(path, int(self.clock.now()))
        self.sessions.adopt_file()
        log.error(
            "state_db.recreated", path=str(path), moved_to=str(moved), problem=problem, lost=lost
        )
        self.record_error(
            "state_db_recreated",
            f"{path} was damaged ({problem}); moved to {moved} and recreated; {lost}",
        )

    async def _replace_lost_state_db_async(self) -> None:
        await trio.to_thread.run_sync(self.replace_lost_state_db)

    def replace_lost_state_db(self) -> None:
        """The state database open was deleted, or another file put in its place, while orcad
        ran (blocking): every connection to it is dropped, and the file now at the path (a new
        one if there is none; one that is damaged is moved aside as at start) has its epochs
        raised above the current time in seconds, as for a damaged one. Otherwise the epochs
        handed out meanwhile would go with a file no start reads, or back to an older copy's,
        and a session opened after that would get one a process still holding an old one may
        have."""
        with self._state_db_lock:
            if not self.sessions.file_replaced():
                return  # a call made at the same moment handled it
            with self.sessions.replacing():
                path = self.paths.state_db
                emptied = _is_empty(path)  # (before the connections close: see below)
                for drop_connection in self.state_db_users:
                    drop_connection()
                made_again = True
                if not os.path.lexists(path):
                    found = "it was deleted; a new one was made"
                elif emptied:
                    # closing a connection checkpoints its WAL into the file, which wrote pages of
                    # the lost database into the emptied one: they are dropped again
                    with contextlib.suppress(OSError):
                        os.truncate(path, 0)
                    found = "it was emptied in place; it was made again"
                else:
                    problem = self._state_db_damage()
                    if problem is not None:
                        self.recreate_state_db(f"put in place while orcad ran: {problem}")
                        return
                    found = "another file was put in its place; it is used, its epochs raised"
                    made_again = False
                try:
                    if made_again:
                        # the WAL of the lost file must not be read into the new one
                        for suffix in ("-wal", "-shm"):
                            with contextlib.suppress(FileNotFoundError):
                                os.unlink(f"{path}{suffix}")
                    start_epochs_above(path, int(self.clock.now()))
                    self.sessions.adopt_file()
                except (OSError, sqlite3.Error) as exc:
                    error = storage_error_of(exc, str(path))
                    message = error.message if error is not None else f"{path}: {exc}"
                    log.error("state_db.replace_failed", path=str(path), error=message)
                    self.record_error("state_db_damaged", f"{path} cannot be made again: {message}")
                    raise StorageError(f"{path} cannot be made again: {message}") from exc
                lost = self._lost()
                log.error("state_db.recreated", path=str(path), problem=found, lost=lost)
                self.record_error(
                    "state_db_recreated", f"{path} was lost while orcad ran ({found}); {lost}"
                )

    def _lost(self) -> str:
        """What went with the state database: its bookkeeping alone (LOSS), or, when the memory
        root or its projects/ was deleted (or replaced) since the start, the memory there too."""
        held = {
            self.paths.memory_root: "ledgers, job files and user.md",
            self.paths.projects_dir: "ledgers and job files",
        }
        for directory, at_start in self._memory_dirs.items():
            now = _identity(directory)
            if at_start is not None and now not in ((-1, -1), at_start):
                return loss_with_memory(directory, held[directory], self.paths.deliberate_db)
        return LOSS

    async def run_background(self, nursery: trio.Nursery) -> None:
        """Start each background task under supervision: a crash after it started is recorded
        and the task restarted with back-off, instead of taking the daemon down."""
        for task in self.background:
            name = getattr(task, "__qualname__", repr(task))
            await nursery.start(supervised, name, task, self.record_error)

    async def aclose(self) -> None:
        for closer in reversed(self.closers):
            try:
                await closer()
            except Exception as exc:
                log.error(
                    "daemon.close_failed",
                    closer=getattr(closer, "__qualname__", "?"),
                    **describe_exception(exc),
                )
        await self.sessions.aclose()


@dataclass(frozen=True)
class Features:
    """The installed features, for the composition root and for tests that drive one."""

    deliberate: DeliberateMemory
    capture: CaptureService
    recall: RecallFeature


def build_daemon(
    paths: Paths, loaded: LoadedConfig, clock: Clock | None = None
) -> tuple[Daemon, Features]:
    """A fully installed daemon (the process itself installs features after it starts serving)."""
    daemon = Daemon(paths=paths, loaded=loaded, clock=clock or SystemClock())
    features = install_features(daemon)
    daemon.router.mark_ready()
    return daemon, features


def install_features(daemon: Daemon) -> Features:
    """Install each feature in dependency order and connect what one needs of another.

    Runs before any feature request is served, off the event loop in the daemon process: it
    imports the feature modules and opens their stores.
    """
    from orcad.capture.api import install as install_capture  # noqa: PLC0415
    from orcad.capture.ledger import HeldFacts  # noqa: PLC0415
    from orcad.deliberate.api import install as install_deliberate  # noqa: PLC0415
    from orcad.providers.fact_classifier import sentence_judge  # noqa: PLC0415
    from orcad.recall.api import embeddings_of  # noqa: PLC0415
    from orcad.recall.api import install as install_recall  # noqa: PLC0415
    from orcad.recall.automatic import fact_embedder  # noqa: PLC0415

    daemon.check_state_db()
    # memory.search, memory.manage, memory.approve, grants.*:
    deliberate = install_deliberate(daemon)
    # recall's model (loaded in the background), also used to embed facts as they are published
    # and, when it is the built-in one, by the offline extractor's fact classifier
    embeddings = embeddings_of(daemon)
    judge = sentence_judge(daemon.config.extraction.provider, embeddings)
    # turn.completed, jobs.*, projects.*, ledger.forget:
    capture, capture_routes = install_capture(
        daemon, embed_facts=fact_embedder(embeddings), judge=judge
    )
    daemon.capture_status = capture
    # recall, remember, the startup context:
    recall = install_recall(daemon, capture=capture, deliberate=deliberate, embeddings=embeddings)
    daemon.startup_reader = recall.explicit.read_startup
    daemon.embedding_status = recall.backfill.status
    # a forgotten fact or record leaves no copy in a recall snapshot:
    deliberate.purge_copies = recall.snapshots.purge
    capture_routes.purge_copies = recall.snapshots.purge
    capture_routes.owe_purge = recall.snapshots.owe_purge_blocking
    # a forget or update a crash cut short before it dropped them leaves none either, nor
    # does a project's directory moved aside while orcad was stopped:
    recall.snapshots.drop_outdated_records_blocking(
        deliberate.store.updated_times_blocking,
        HeldFacts(daemon.paths.projects_dir),
    )
    # ... nor one moved aside or deleted while it runs, once orcad notices (job_files_gone)
    capture.on_project_gone = lambda: recall.snapshots.drop_facts_not_held(
        HeldFacts(daemon.paths.projects_dir)
    )
    return Features(deliberate=deliberate, capture=capture, recall=recall)


def _is_empty(path: os.PathLike[str]) -> bool:
    """Whether the file at `path` holds nothing (one that cannot be looked at is not taken so)."""
    try:
        return os.stat(path).st_size == 0
    except OSError:
        return False


def _identity(directory: Path) -> tuple[int, int] | None:
    """The directory's (device, inode), None when it is not there; one that cannot be looked
    at (a permission) counts as the same as before."""
    try:
        found = os.stat(directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return (-1, -1)
    return (found.st_dev, found.st_ino)
