"""Installs recall and explicit facts into the daemon: `recall`, `remember`, startup context."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from orcad.explicit import append_fact, format_fact, read_bounded, remember_fact
from orcad.limits import STARTUP_PROJECT_MAX_BYTES, STARTUP_USER_MAX_BYTES
from orcad.recall.automatic import ProjectMemorySearch
from orcad.recall.service import Announcer, RecallService, SessionJobs, disabled_for_bare
from orcad.recall.snapshots import SnapshotStore
from orcad.rpc import claim_direct_answer
from orcad.sessions import Session
from protocol.types import (
    DeliberateEntry,
    RecallParams,
    RecallResult,
    RememberParams,
    RememberResult,
    Startup,
)

if TYPE_CHECKING:
    from orcad.app import Daemon

PROJECT_MEMORY_FILE = "memory.md"


class ExplicitFacts:
    """`remember` and the startup context: user.md and each project's memory.md."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon

    def project_file(self, project_id: str) -> Path:
        return project_directory(self._daemon, project_id) / PROJECT_MEMORY_FILE

    async def remember(self, params: RememberParams) -> RememberResult:
        session = await self._daemon.sessions.require(params.session_id, params.epoch)
        disabled_for_bare(session, "remember")
        capture = self._daemon.capture
        if params.scope == "user":
            path = self._daemon.paths.user_memory_file
            size = await trio.to_thread.run_sync(remember_fact, path, params.text)
        elif capture is not None and hasattr(capture, "run_locked"):
            # memory.md is written under the project's lock, like the ledger beside it
            line = format_fact(params.text)
            path = self.project_file(session.project_id)
            size = await capture.run_locked(
                session.project_id, lambda directory: append_fact(path, line)
            )
        else:
            path = self.project_file(session.project_id)
            size = await trio.to_thread.run_sync(remember_fact, path, params.text)
        return RememberResult(path=str(path), bytes=size)

    async def read_startup(self, session: Session) -> Startup:
        user_file = self._daemon.paths.user_memory_file
        project_file = self.project_file(session.project_id)

        def read() -> Startup:
            user, user_cut = read_bounded(user_file, STARTUP_USER_MAX_BYTES)
            project, project_cut = read_bounded(project_file, STARTUP_PROJECT_MAX_BYTES)
            return Startup(user=user, project=project, truncated=user_cut or project_cut)

        return await trio.to_thread.run_sync(read)


def project_directory(daemon: Daemon, project_id: str) -> Path:
    """The project's memory directory, as the capture feature names it when installed."""
    capture = daemon.capture
    if capture is not None and hasattr(capture, "project_dir"):
        return Path(capture.project_dir(project_id))
    return daemon.paths.projects_dir / project_id


class DeliberateRecall:
    """The deliberate part of recall, from the deliberate-memory service when installed."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon

    def search_blocking(
        self, session: Session, prompt: str, terms: Sequence[str], limit: int
    ) -> list[DeliberateEntry]:
        service = self._daemon.deliberate
        if service is None:
            return []
        entries: list[DeliberateEntry] = service.search_for_recall_blocking(session, prompt, limit)
        return entries


def active_job_count(daemon: Daemon) -> int:
    """Queued and running extraction jobs of every session (0 without capture)."""
    status = daemon.capture_status
    if status is None:
        return 0
    counts = status.job_counts()
    return counts.pending + counts.leased


def claim_recall_announcer() -> Announcer | None:
    """The recall request's writer, claimed for the search thread, if it is free."""
    direct = claim_direct_answer()
    return None if direct is None else direct.send


def install(daemon: Daemon) -> RecallService:
    snapshots = SnapshotStore(daemon.paths.state_db)
    snapshots.on_write_failed = lambda message: daemon.record_error("storage", message)
    daemon.state_db_users.append(snapshots.forget_database)

    async def recover_state_db(problem: str) -> None:
        await trio.to_thread.run_sync(daemon.recover_state_db, problem)

    snapshots.on_corrupt = recover_state_db
    jobs: SessionJobs | None = (
        daemon.capture if hasattr(daemon.capture, "wait_session_jobs") else None
    )
    service = RecallService(
        sessions=daemon.sessions,
        clock=daemon.clock,
        snapshots=snapshots,
        automatic=ProjectMemorySearch(
            lambda project_id: project_directory(daemon, project_id), daemon.record_error
        ),
        deliberate=DeliberateRecall(daemon),
        jobs=jobs,
        active_jobs=lambda: active_job_count(daemon),
    )
    explicit = ExplicitFacts(daemon)

    async def recall(params: RecallParams) -> RecallResult:
        return await service.recall(params, claim_announcer=claim_recall_announcer)

    daemon.router.add("recall", recall)
    daemon.router.add("remember", explicit.remember)
    daemon.startup_reader = explicit.read_startup
    daemon.background.append(snapshots.run_writer)
    daemon.closers.append(snapshots.aclose)
    daemon.recall = service
    return service
