"""The way into a project's memory directory: its locks, its project.json, and whether its
jobs may run now.

Every change to a project's jobs or ledger runs in a thread holding the project's
cross-process lock, behind a per-project trio lock so that this process never contends with
itself. Whether a project's jobs may be handed to a worker depends on its auto-memory setting
and on its ledger being readable; each is read again only when one of the files it was read
from changes (a recall asks at every turn while its session has a job queued).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec
import structlog
import trio

from orcad import limits
from orcad.auto_memory_switch import AutoMemorySwitch, project_config_file
from orcad.capture.index import JobIndex
from orcad.capture.ledger import LedgerCorrupt, LedgerFileState, ledger_file_state, read_ledger
from orcad.capture.problems import Problems
from orcad.capture.projections import restore_markdown
from orcad.capture.projects import (
    PROJECT_FILE,
    ProjectFile,
    directories_error,
    ensure_directories,
    list_project_ids,
    project_dir,
    read_project_file,
    record_project_visit,
    run_with_project_lock,
)
from orcad.capture.schedule import JobView
from orcad.clock import Clock
from orcad.durable_files import FileSignature, file_signature
from orcad.errors import NotFound, StorageError
from orcad.session_snapshot import Session

log = structlog.get_logger("orcad.capture")

T = TypeVar("T")


class SwitchReading(msgspec.Struct, frozen=True, kw_only=True):
    """A project's auto-memory switch as read from its files, good while each file keeps the
    signature it had when it was read: project.json, the user's config, the project's own."""

    root: str  # the project root project.json names ("" when it names none)
    files: tuple[FileSignature | None, ...]
    enabled: bool


class ProjectAccess:
    def __init__(
        self,
        *,
        projects_dir: Path,
        auto_memory: AutoMemorySwitch,
        clock: Clock,
        index: JobIndex,
        problems: Problems,
        lock_timeout: float = limits.PROJECT_LOCK_TIMEOUT_S,
    ) -> None:
        self.projects_dir = projects_dir
        self._auto_memory = auto_memory
        self._clock = clock
        self._index = index
        self._problems = problems
        self._lock_timeout = lock_timeout
        self._locks: collections.defaultdict[str, trio.Lock] = collections.defaultdict(trio.Lock)
        self._ensured: set[str] = set()  # project directories created (with project.json)
        self._ledger_checks: dict[str, tuple[LedgerFileState, bool]] = {}  # project -> usable
        self._switches: dict[str, SwitchReading] = {}
        # projects whose ledger orcad last found there or wrote: one found gone later took its
        # facts with it (CaptureService.drop_vanished)
        self.ledgers_seen: set[str] = set()

    def project_dir(self, project_id: str) -> Path:
        return project_dir(self.projects_dir, project_id)

    def list_project_ids(self) -> list[str]:
        return list_project_ids(self.projects_dir)

    # --- locking ----------------------------------------------------------------------------

    def lock(self, project_id: str) -> trio.Lock:
        """The project's in-process lock: hold it across a read of the index and the change
        made from it."""
        return self._locks[project_id]

    async def run_locked(self, project_id: str, work: Callable[[Path], T]) -> T:
        """Run `work(project_dir)` in a thread holding the project lock (in-process first)."""
        async with self._locks[project_id]:
            return await self.run_with_lock_held(project_id, work)

    async def run_with_lock_held(
        self, project_id: str, work: Callable[[Path], T], *, make_directory: bool = True
    ) -> T:
        """`run_locked` for a caller already holding the project's in-process lock. Without
        `make_directory`, for work on a job already stored, a project directory that is gone
        (moved aside while orcad runs) is NotFound rather than made again, empty: the job
        went with it, and an empty directory would be listed as a project with no identity."""
        directory = self.project_dir(project_id)
        return await trio.to_thread.run_sync(self._locked_blocking, directory, work, make_directory)

    def _locked_blocking(
        self, directory: Path, work: Callable[[Path], T], make_directory: bool
    ) -> T:
        if not make_directory and not directory.is_dir():
            raise NotFound(
                f"project directory {directory} is gone (moved or deleted while orcad runs), "
                "and its jobs with it"
            )
        try:
            ensure_directories(directory)
        except OSError as exc:
            raise directories_error(directory, exc) from exc
        return run_with_project_lock(directory, lambda: work(directory), self._lock_timeout)

    # --- project.json -----------------------------------------------------------------------

    async def record_visit(self, session: Session, *, only_if_missing: bool = False) -> ProjectFile:
        """project.json for a session's project: identity and the last working directory.

        With `only_if_missing` (the first admission in this process: sessions survive restarts,
        so the open hook may not have run here), an existing file is read and left as it is.
        """

        def work(directory: Path) -> ProjectFile:
            if only_if_missing:
                found = read_project_file(directory, session.project_id)
                if found.record is not None or found.problem is not None:
                    return found
            else:  # a session opened: a Markdown view deleted by hand comes back now
                _restore_markdown(directory)
            return record_project_visit(
                directory,
                project_id=session.project_id,
                identity=session.project_identity,
                root=session.project_root,
                cwd=session.cwd,
                now=self._clock.now(),
            )

        found = await self.run_locked(session.project_id, work)
        self._index.add_project(session.project_id)
        self._ensured.add(session.project_id)
        if found.problem is not None:
            self._problems.report("project_metadata_corrupt", found.problem)
        return found

    async def ensure_project(self, session: Session) -> None:
        """The project's directory and project.json, before its first job in this process
        (sessions survive restarts, so the session-open hook may not have run here)."""
        if session.project_id not in self._ensured:
            await self.record_visit(session, only_if_missing=True)

    async def restore_project_file(self, session: Session) -> None:
        """project.json again for a project whose file is missing when a job is stored (its
        directory removed while orcad runs, then made anew by that job or by a remember):
        without it the project is listed with no identity or cwd. A failure is reported, not
        raised: the job it follows is already stored."""
        try:
            await self.record_visit(session, only_if_missing=True)
        except StorageError as exc:
            self._problems.report("project_metadata", exc.message)

    async def read_project(self, project_id: str) -> ProjectFile:
        directory = self.project_dir(project_id)
        return await trio.to_thread.run_sync(read_project_file, directory, project_id)

    # --- whether jobs may run ---------------------------------------------------------------

    async def jobs_may_run(self, project_id: str) -> bool:
        """Whether the project's jobs may be handed to a worker now: its auto memory is on
        (user config plus the trusted project's config; the root is the last one recorded in
        project.json) and its ledger is not damaged. A damaged ledger cannot take a publish,
        so extracting would call a provider for nothing (moving it aside lets the jobs run).
        The files are read again only when one of them changed, so an edit counts at once;
        until then the answer costs a thread and a few stat calls rather than the reads (the
        recall barrier asks at every turn)."""
        directory = self.project_dir(project_id)
        checked = self._ledger_checks.get(project_id)
        known = self._switches.get(project_id)

        def read() -> tuple[SwitchReading, LedgerFileState, str | None]:
            if known is not None and known.files == self._switch_files(directory, known.root):
                switch = known
            else:
                switch = self._read_switch(directory, project_id)
            state = ledger_file_state(directory)
            if checked is not None and checked[0] == state:
                return switch, state, None
            try:
                read_ledger(directory)
            except LedgerCorrupt as exc:
                return switch, state, exc.message
            return switch, state, None

        switch, state, damage = await trio.to_thread.run_sync(read)
        self._switches[project_id] = switch
        if checked is None or checked[0] != state:
            checked = self._ledger_checks[project_id] = (state, damage is None)
            if damage is not None:
                self._problems.report("ledger_corrupt", damage)
                log.warning("jobs.held", project_id=project_id, reason="ledger_corrupt")
        return switch.enabled and checked[1]

    def _read_switch(self, directory: Path, project_id: str) -> SwitchReading:
        """The switch from disk (blocking). Each file's signature is taken before the file is
        read, so that a change made meanwhile is seen at the next call."""
        project_file = file_signature(directory / PROJECT_FILE)
        found = read_project_file(directory, project_id)
        root = found.record.root if found.record is not None else ""
        files = (project_file, *self._settings_files(root))
        enabled = self._auto_memory.read(root)
        return SwitchReading(root=root, files=files, enabled=enabled)

    def _switch_files(self, directory: Path, root: str) -> tuple[FileSignature | None, ...]:
        return (file_signature(directory / PROJECT_FILE), *self._settings_files(root))

    def _settings_files(self, root: str) -> tuple[FileSignature | None, FileSignature | None]:
        own = file_signature(project_config_file(root)) if root else None
        return file_signature(self._auto_memory.config_file), own

    def ledger_damaged(self, project_id: str) -> bool:
        """The project's ledger was found damaged at its last check (and not changed since)."""
        checked = self._ledger_checks.get(project_id)
        return checked is not None and not checked[1]

    def ledger_written(self, project_id: str, state: LedgerFileState) -> None:
        """The ledger was just read and written whole: usable at this file state."""
        self._ledger_checks[project_id] = (state, True)
        if state is not None:
            self.ledgers_seen.add(project_id)

    def ledger_suspect(self, project_id: str) -> None:
        """The ledger failed to parse during a change: read it again before the next claim."""
        self._ledger_checks.pop(project_id, None)

    def held_for_damage(self, view: JobView) -> bool:
        """A queued job of a project whose ledger is damaged: it cannot finish before the
        ledger is repaired, so a recall must not wait for it."""
        return view.state == "pending" and self.ledger_damaged(view.project_id)


def _restore_markdown(directory: Path) -> None:
    """auto-memory.md written again if it is missing (with the project lock held); a ledger
    that cannot be read or a view that cannot be written is logged, and the session opens."""
    try:
        if restore_markdown(directory):
            log.info("projection.restored", project_dir=str(directory))
    except (StorageError, OSError) as exc:
        log.warning("projection.restore_failed", project_dir=str(directory), error=str(exc))
