"""The capture feature assembled: its parts, wired once, and what runs in the background.

- `index` (JobIndex): every job as last written, owned by the event loop.
- `projects` (ProjectAccess): project directories, their locks and project.json.
- `admissions` (Admissions): turn.completed's job files.
- `leases` (LeaseEngine): claim, renew, fail, release, retry, publish, recover.
- `problems` (Problems): what goes to daemon.status.

`run` loads the index (leases of a previous daemon's workers go back to pending) and runs the
built-in worker pool until cancelled, rebuilding meanwhile, once, every project's index.sqlite3
that is stale or missing (an older version's is of another format, so stale);
`on_session_opened` records project.json and wakes the workers, so pending and expired work
resumes whenever a session opens for a project.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog
import trio

from orcad import limits
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.capture.admission import Admissions
from orcad.capture.index import Barrier, JobIndex
from orcad.capture.jobstore import job_path
from orcad.capture.lease_engine import FactEmbedder, LeaseEngine
from orcad.capture.ledger import ledger_path, read_ledger
from orcad.capture.problems import ErrorRecorder, Problems
from orcad.capture.project_access import ProjectAccess
from orcad.capture.projections import ensure_markdown, index_state, rebuild_index
from orcad.capture.schedule import JobView, claimable_at
from orcad.capture.states import ACTIVE_STATES
from orcad.capture.worker import WorkerPool
from orcad.clock import Clock
from orcad.config import Config
from orcad.errors import NotFound, StorageError
from orcad.providers import ProviderConfigError, build_provider
from orcad.providers.heuristic import FactJudge
from orcad.secrets import redact
from orcad.session_snapshot import Session
from protocol.types import JobCounts, JobSummary

log = structlog.get_logger("orcad.capture")


class CaptureService:
    def __init__(
        self,
        *,
        projects_dir: Path,
        auto_memory: AutoMemorySwitch,
        config: Config,
        clock: Clock,
        record_error: ErrorRecorder,
        lock_timeout: float = limits.PROJECT_LOCK_TIMEOUT_S,
        embed_facts: FactEmbedder | None = None,
        judge: FactJudge | None = None,
    ) -> None:
        self.config = config
        self.judge = judge
        self.clock = clock
        self.problems = Problems(record_error)
        self.index = JobIndex()
        self.projects = ProjectAccess(
            projects_dir=projects_dir,
            auto_memory=auto_memory,
            clock=clock,
            index=self.index,
            problems=self.problems,
            lock_timeout=lock_timeout,
        )
        self.admissions = Admissions(projects=self.projects, index=self.index, clock=clock)
        self.leases = LeaseEngine(
            projects=self.projects,
            index=self.index,
            config=config,
            clock=clock,
            problems=self.problems,
            embed_facts=embed_facts,
        )
        self.pool: WorkerPool | None = None
        self.provider_broken = False  # no provider could be built: no built-in worker runs
        self.provider_problem: str | None = None  # why it could not be built, as reported
        # when an external worker last called jobs.claim (Clock.monotonic()): without built-in
        # workers, a queued job waits for one
        self.external_claim_at: float | None = None
        # called once a project's directory, its ledger alone, or job files are found gone
        # while orcad runs: drops the recall snapshots holding facts their project no longer holds
        self.on_project_gone: Callable[[], Awaitable[object]] | None = None
        self.user_memory_file: Path | None = None  # user.md, which projects.inspect points at

    async def wait_session_jobs(
        self,
        session_id: str,
        project_id: str,
        timeout: float,  # noqa: ASYNC109 (recall's interface)
    ) -> Barrier:
        """The recall barrier: the session's queued and running jobs for the project, except
        those that cannot finish for now (see JobIndex.wait_session_jobs), such as queued jobs
        of a project whose jobs may not run now (auto memory switched off since the session
        opened: the workers leave them, so waiting for them only adds the whole bound)."""
        deadline = trio.current_time() + timeout
        mine = [
            view
            for view in self.index.views(project_id)
            if view.session_id == session_id and view.state in ACTIVE_STATES
        ]
        if not mine:
            return "none"
        # the jobs queued at the call, its deadline too: the looks below take their time (in
        # threads), and a turn admitted meanwhile came after the call
        await self.drop_vanished(mine, [])  # a job gone with its directory: waited for in vain
        queued_may_run = True
        if any(view.state == "pending" for view in mine):
            queued_may_run = await self._jobs_may_run(project_id)
        now, elapsed = self.clock.now(), self.clock.monotonic()
        return await self.index.wait_session_jobs(
            session_id,
            project_id,
            max(0.0, deadline - trio.current_time()),
            among={view.job_id for view in mine},
            cannot_finish=lambda view: (
                (view.state == "pending" and not queued_may_run)
                or self.cannot_finish(
                    self.leases.deadlines.honoured_view(view, now, elapsed), now, now + timeout
                )
            ),
        )

    async def _jobs_may_run(self, project_id: str) -> bool:
        """ProjectAccess.jobs_may_run; a project whose files cannot be read now counts as
        one whose jobs may run (its workers hold it back for reschedule_s only)."""
        try:
            return await self.projects.jobs_may_run(project_id)
        except StorageError:
            return True

    def cannot_finish(self, view: JobView, now: float, ends: float) -> bool:
        """A queued job no worker will take before the barrier `ends` (wall clock): its
        project's ledger is damaged, the configured provider could not be built (the jobs wait
        for a restart with a fixed config), there are no built-in workers and no external one
        has asked for a job within `lease_s`, or it may not be claimed before then (a
        provider's Retry-After, a back-off). A recall waiting for it would only add its whole
        bound. Its wait is taken as the workers take it at `now`: one edited past any orcad
        sets is over."""
        if view.state != "pending":
            return False
        claimable = claimable_at(view, now)
        if self.provider_broken or (claimable is not None and claimable >= ends):
            return True
        if self.config.extraction.workers == 0 and not self._external_worker_near():
            return True
        return self.projects.held_for_damage(view)

    def _external_worker_near(self) -> bool:
        """Whether an external worker asked for a job within the last `lease_s` (one that
        polls, or holds a lease it renews as often): timed on the monotonic clock, which a
        wall clock set back or forward does not move."""
        seen = self.external_claim_at
        elapsed = self.clock.monotonic()
        return seen is not None and elapsed - seen <= self.config.extraction.lease_s

    async def drop_vanished_everywhere(self) -> None:
        """drop_vanished for every job and project known (jobs.list, projects.list), and the
        damaged job files listed read again."""
        await self.drop_vanished(self.index.views(), sorted(self.index.known_projects()))
        await self.leases.look_at_damaged()

    async def drop_vanished(self, views: list[JobView], project_ids: list[str]) -> None:
        """Forget the jobs among `views` whose files are gone, and the projects among
        `project_ids` whose directories are gone (moved aside or deleted while orcad runs):
        otherwise a job a dead worker held stays `leased` in every listing and count, and
        recalls wait for it in vain, until a restart. Said once in recent errors.

        A project that seems to have lost something is looked at again under its lock: orcad
        removes committed job files (retention, ledger.forget) before it drops them from the
        index, and an admission makes a removed directory again before it indexes its job, each
        under that lock; a look between the two steps is no proof of a file moved away."""
        seen = set(self.projects.ledgers_seen)
        gone_jobs, gone_projects = await trio.to_thread.run_sync(
            self._look_for_gone, views, project_ids
        )
        facts_gone = False
        for project_id in sorted({view.project_id for view in gone_jobs} | set(gone_projects)):
            mine = [view for view in gone_jobs if view.project_id == project_id]
            directory_gone = project_id in gone_projects
            facts_gone |= await self._drop_gone(project_id, mine, directory_gone=directory_gone)
        if project_ids:  # (a recall's barrier looks at no project: it stats no ledger)
            # every ledger seen, also one of a project forgotten with its directory: moved back
            # where it was, its ledger holds its facts again
            facts_gone |= await self._look_for_gone_ledgers(sorted(seen - set(gone_projects)))
        if facts_gone and self.on_project_gone is not None:
            await self.on_project_gone()

    async def _look_for_gone_ledgers(self, project_ids: list[str]) -> bool:
        """Whether the ledger of one of `project_ids` (each one orcad found or wrote before) is
        gone while its directory is there (candidates.jsonl deleted alone, or a directory made
        again without it): its facts went with it, as with a directory gone. Such a ledger is
        no longer taken as seen; one whose directory is not there stays so (its facts went
        with the directory, and come back with it if it is moved back)."""
        if not project_ids:
            return False
        gone = await trio.to_thread.run_sync(self._ledgers_gone, project_ids)
        self.projects.ledgers_seen.difference_update(gone)
        if gone:
            log.warning("ledger.vanished", projects=gone)
        return bool(gone)

    def _ledgers_gone(self, project_ids: list[str]) -> list[str]:
        """Those of `project_ids` whose directory is there without its ledger file. Blocking:
        call from a thread."""
        directory = self.projects.project_dir
        return [
            p
            for p in project_ids
            if not _exists(ledger_path(directory(p)), follow=False) and _exists(directory(p))
        ]

    def _ledgers_there(self, project_ids: list[str]) -> set[str]:
        """Those of `project_ids` whose ledger file is there. Blocking: call from a thread."""
        directory = self.projects.project_dir
        return {p for p in project_ids if _exists(ledger_path(directory(p)), follow=False)}

    async def note_ledgers(self) -> None:
        """Note, at a start, the projects whose ledger is there (see _look_for_gone_ledgers)."""
        project_ids = sorted(self.index.known_projects())
        there = await trio.to_thread.run_sync(self._ledgers_there, project_ids)
        self.projects.ledgers_seen.update(there)

    async def _drop_gone(
        self, project_id: str, views: list[JobView], *, directory_gone: bool
    ) -> bool:
        """drop_vanished for one project's `views` (and its directory), confirmed under its
        lock; whether anything was found gone (its directory or job files)."""
        async with self.projects.lock(project_id):
            gone_jobs, gone_projects = await trio.to_thread.run_sync(
                self._look_for_gone, views, [project_id] if directory_gone else []
            )
            # a job written again meanwhile (the same turn admitted anew) has a new view: kept
            gone_jobs = [view for view in gone_jobs if self.index.view(view.job_id) is view]
            self.index.drop(view.job_id for view in gone_jobs)
            if gone_projects:
                self.index.forget_project(project_id)
        if not gone_jobs and not gone_projects:
            return False
        jobs = sorted(view.job_id for view in gone_jobs)
        log.warning("jobs.vanished", project_id=project_id, jobs=jobs)
        what = f"{len(jobs)} job file(s)" if jobs else "its directory"
        self.problems.report(
            "job_files_gone",
            f"project {project_id}: {what} moved or deleted while orcad ran "
            f"({self.projects.project_dir(project_id)}); no longer listed or worked on",
        )
        self.index.notify()
        # job files gone without the directory may be a directory moved aside and made again
        # since (a turn of a session still open admitted meanwhile): its ledger is new
        return True

    def _look_for_gone(
        self, views: list[JobView], project_ids: list[str]
    ) -> tuple[list[JobView], list[str]]:
        """The views whose job files, and the projects whose directories, are not there.
        Blocking: call from a thread."""
        directory = self.projects.project_dir
        gone_jobs = [v for v in views if not _exists(job_path(directory(v.project_id), v.job_id))]
        return gone_jobs, [p for p in project_ids if not _exists(directory(p))]

    # --- lifecycle --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the job index, then run the built-in workers until cancelled."""
        await self.leases.load()
        await self.note_ledgers()
        self.pool = self.build_pool()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.refresh_indexes)
            if self.pool is None:
                task_status.started()
                await trio.sleep_forever()
            await self.pool.run(task_status=task_status)

    async def refresh_indexes(self) -> None:
        """Rebuild, once after a start, each project's index that is stale or missing (one of
        another format, an older version's, is stale): without it, a project no recall or
        capture reaches after an upgrade keeps an index doctor reports as stale. The index is a
        cache, so a project that cannot be read or locked now is left to its next recall."""
        try:
            project_ids = await trio.to_thread.run_sync(self.projects.list_project_ids)
        except OSError as exc:
            log.warning("index.refresh_skipped", error=str(exc))
            return
        for project_id in project_ids:
            try:  # (a project directory moved aside meanwhile is not made again, empty)
                async with self.projects.lock(project_id):
                    state = await self.projects.run_with_lock_held(
                        project_id, _refresh_index, make_directory=False
                    )
            except (StorageError, NotFound) as exc:  # a damaged ledger, a lock held, gone
                log.info("index.refresh_skipped", project_id=project_id, error=exc.message)
                continue
            except Exception as exc:  # a cache: never a reason to stop the workers beside it
                log.warning("index.refresh_failed", project_id=project_id, error=repr(exc))
                continue
            if state in ("stale", "missing"):
                log.info("index.refreshed", project_id=project_id, was=state)

    def build_pool(self) -> WorkerPool | None:
        extraction = self.config.extraction
        if extraction.workers == 0:
            log.info("workers.none", reason="extraction.workers is 0; jobs wait for jobs.claim")
            return None
        try:
            provider = build_provider(extraction, os.environ, self.judge)
        except ProviderConfigError as exc:
            self.problems.report("provider_config", str(exc))
            self.provider_broken = True
            self.provider_problem = str(exc)
            return None
        log.info("workers.started", workers=extraction.workers, provider=provider.name)
        return WorkerPool(self.leases, provider, extraction.workers)

    async def on_session_opened(self, session: Session) -> None:
        if session.auto_memory:
            try:
                await self.projects.record_visit(session)
            except StorageError as exc:
                self.problems.report("project_metadata", exc.message)
        self.index.notify()  # pending and expired work resumes when a session opens

    # --- daemon.status ----------------------------------------------------------------------

    def job_counts(self) -> JobCounts:
        now, elapsed = self.clock.now(), self.clock.monotonic()
        return self.index.job_counts(
            now, lambda view: self.leases.deadlines.honoured_view(view, now, elapsed)
        )

    def job_summaries(
        self, project_id: str | None = None, state: str | None = None
    ) -> list[JobSummary]:
        """Jobs as jobs.list and projects.inspect show them: a pending job's `not_before` only
        while its wait, timed as the workers time it, is not over (as job_counts counts it)."""
        now, elapsed = self.clock.now(), self.clock.monotonic()
        return self.index.summaries(
            project_id,
            state,
            now=now,
            honoured=lambda view: self.leases.deadlines.honoured_view(view, now, elapsed),
        )

    def project_count(self) -> int:
        return self.index.project_count()

    def workers_busy(self) -> int:
        return self.leases.busy_workers

    def provider_model(self) -> str | None:
        """The model the built-in workers record in provenance, redacted as there (a command
        line can carry a key); None when none runs."""
        return None if self.pool is None else redact(self.pool.provider.model)

    def extraction_problem(self) -> str | None:
        """Why no built-in worker runs though the configuration asks for some (its provider
        could not be built), redacted as in recent errors; None when they run or none is asked."""
        return None if self.provider_problem is None else redact(self.provider_problem)

    async def look_at_damaged(self) -> None:
        await self.leases.look_at_damaged()


def _refresh_index(directory: Path) -> str | None:
    """The index's state, rebuilt when stale or missing; None for a project with no facts
    published yet (nothing to index). A damaged one is left to doctor, which names it, and to
    the next recall, which rebuilds it. auto-memory.md is written again when it does not show
    the ledger: a stop between a forget's ledger write and this file's left the fact in it."""
    ledger = read_ledger(directory)
    if ledger.revision == 0:
        return None
    state = index_state(directory, ledger)
    if state in ("stale", "missing"):
        rebuild_index(directory, ledger)
    if ensure_markdown(directory, ledger):
        log.info("projection.refreshed", project_dir=str(directory), revision=ledger.revision)
    return state


def _exists(path: Path, *, follow: bool = True) -> bool:
    """Whether `path` is there; one that cannot be looked at (a permission) counts as there."""
    try:
        path.stat(follow_symlinks=follow)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        pass
    return True
