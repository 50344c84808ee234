"""The daemon's composition: configuration, stores and services, and the method table.

Features install themselves into a `Daemon` by adding routes, lifecycle hooks and status
contributors; the server knows only the router.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
import trio

from orcad import __version__
from orcad.clock import Clock, SystemClock, format_time
from orcad.config import LoadedConfig
from orcad.log import describe_exception
from orcad.paths import Paths
from orcad.rpc import Router
from orcad.sessions import Session, SessionStore
from protocol.types import (
    PROTOCOL_VERSION,
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

log = structlog.get_logger("orcad.app")

RECENT_ERRORS_KEPT = 20

SessionHook = Callable[[Session], Awaitable[None]]
StartupReader = Callable[[Session], Awaitable[Startup]]
BackgroundTask = Callable[..., Awaitable[None]]  # started with nursery.start(task)


class CaptureStatus(Protocol):
    """What the automatic-memory feature reports in daemon.status."""

    def job_counts(self) -> JobCounts: ...
    def workers_busy(self) -> int: ...
    def project_count(self) -> int: ...


@dataclass
class Daemon:
    paths: Paths
    loaded: LoadedConfig
    clock: Clock = field(default_factory=SystemClock)
    router: Router = field(default_factory=Router)
    started_at: float = 0.0
    recent_errors: collections.deque[RecentError] = field(
        default_factory=lambda: collections.deque(maxlen=RECENT_ERRORS_KEPT)
    )
    session_opened_hooks: list[SessionHook] = field(default_factory=list)
    startup_reader: StartupReader | None = None
    background: list[BackgroundTask] = field(default_factory=list)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    capture_status: CaptureStatus | None = None
    # Feature services, set by their install functions (typed where they are defined).
    deliberate: Any = None
    capture: Any = None
    recall: Any = None
    sessions: SessionStore = field(init=False)
    connections: Callable[[], int] = lambda: 0

    def __post_init__(self) -> None:
        self.sessions = SessionStore(
            self.paths.state_db, self.clock, self.loaded.config.sessions.idle_expiry_s
        )
        self.started_at = self.clock.now()
        self.router.add("daemon.ping", self.ping, early=True)
        self.router.add("daemon.status", self.status)
        self.router.add("session.open", self.open_session)
        self.router.add("session.close", self.close_session)

    @property
    def config(self) -> Any:
        return self.loaded.config

    def record_error(self, kind: str, message: str) -> None:
        """Remember a problem for daemon.status (and doctor); the caller logs it."""
        self.recent_errors.append(
            RecentError(at=format_time(self.clock.now()), kind=kind, message=message)
        )

    def ping(self, params: PingParams) -> PingResult:
        return PingResult(protocol=PROTOCOL_VERSION, version=__version__, pid=os.getpid())

    def status(self, params: StatusParams) -> StatusResult:
        capture = self.capture_status
        now = self.clock.now()
        return StatusResult(
            version=__version__,
            pid=os.getpid(),
            started_at=format_time(self.started_at),
            uptime_s=round(now - self.started_at, 3),
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
        )

    async def open_session(self, params: SessionOpenParams) -> SessionOpenResult:
        joined = await self.sessions.join(params)
        if joined is not None:
            return await self._opened(joined, joined=True)
        session = await self.sessions.open(params, self.paths.config_file, self.config)
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
        )

    async def close_session(self, params: SessionCloseParams) -> Empty:
        await self.sessions.close_session(params.session_id, params.epoch)
        return Empty()

    async def run_background(self, nursery: trio.Nursery) -> None:
        for task in self.background:
            await nursery.start(task)

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
        self.sessions.close()


def build_daemon(paths: Paths, loaded: LoadedConfig, clock: Clock | None = None) -> Daemon:
    """A fully installed daemon (the process itself installs features after it starts serving)."""
    daemon = Daemon(paths=paths, loaded=loaded, clock=clock or SystemClock())
    install_features(daemon)
    daemon.router.mark_ready()
    return daemon


def install_features(daemon: Daemon) -> None:
    """Each feature adds its routes and hooks, in dependency order.

    Runs before any feature request is served, off the event loop in the daemon process: it
    imports the feature modules and opens their stores.
    """
    from orcad.deliberate.api import install as install_deliberate  # noqa: PLC0415

    install_deliberate(daemon)
    # automatic capture (turn.completed, jobs.*, projects.*, ledger.forget):
    from orcad.capture.api import install as install_capture  # noqa: PLC0415

    install_capture(daemon)
    # recall and explicit facts (recall, remember, startup):
    from orcad.recall.api import install as install_recall  # noqa: PLC0415

    install_recall(daemon)
