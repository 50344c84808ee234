"""The capture service: admits turns as durable jobs and runs the lease engine over job files.

Job files are the truth; an in-memory index of every job (built by scanning at start, updated
on the event loop after every write, before the request that made it is answered) serves
scheduling, counts and waits.

Every change to a project's jobs or ledger runs in a thread holding the project's cross-process
lock, behind a per-project trio lock so that this process never contends with itself; the
lease rule is checked inside, on the job as just read from disk, at the clock reading taken
there.
"""

from __future__ import annotations

import collections
import random
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal, TypeVar

import msgspec
import structlog
import trio

from orcad import limits
from orcad.capture import leases, schedule
from orcad.capture.jobstore import (
    CorruptJobFile,
    DamagedJobFile,
    create_job,
    damaged_job_file,
    prepare_job_file,
    read_job,
    scan_all_jobs,
    write_job,
)
from orcad.capture.ledger import (
    Ledger,
    LedgerCorrupt,
    LedgerFileState,
    ledger_file_state,
    read_ledger,
)
from orcad.capture.output import MalformedOutput, parse_extractor_output
from orcad.capture.projects import (
    ProjectFile,
    ensure_directories,
    list_project_ids,
    project_dir,
    read_project_file,
    record_project_visit,
    run_with_project_lock,
)
from orcad.capture.publishing import Published, PublishResult, publish_job
from orcad.capture.records import JobRecord, Provenance, new_job, summary_of
from orcad.capture.schedule import JobView, PoolState, view_of
from orcad.capture.source import BuiltSource, build_source, derive_job_id
from orcad.capture.states import ACTIVE_STATES, TERMINAL_STATES
from orcad.clock import Clock
from orcad.config import Config
from orcad.errors import Conflict, ExtractionRejected, NotFound, StorageError
from orcad.failpoints import failpoint
from orcad.sessions import Session, read_auto_memory
from orcad.threads import run_sync_now
from protocol.types import DamagedJob, JobCounts, JobSummary

log = structlog.get_logger("orcad.capture")

T = TypeVar("T")
Barrier = Literal["clear", "timed_out", "none"]
ErrorRecorder = Callable[[str, str], None]
ADMISSION_THREADS = 8  # job files written at once (one per project); more only queue on the disk
INLINE_SOURCE_CHARS = 8 * 1024  # redacting this much inline costs less than a thread hop (~0.15 ms)


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """What turn.completed answers once the source is built (None job_id: not admitted)."""

    job_id: str | None
    duplicate: bool = False
    reason: str | None = None


class ClaimPass(msgspec.Struct, frozen=True, kw_only=True):
    job: JobRecord | None  # leased to the caller, or None
    wake_at: float | None  # when something may become claimable (plan), if nothing was


async def acquire_soon(lock: trio.Lock) -> None:
    """Take `lock`, without the scheduling point `Lock.acquire` adds when it is free: the
    caller's next await (a thread hop) is one, and each costs ~10 us on a turn's answer."""
    try:
        lock.acquire_nowait()
    except trio.WouldBlock:
        await lock.acquire()


class CaptureService:
    def __init__(
        self,
        *,
        projects_dir: Path,
        config_file: Path,
        config: Config,
        clock: Clock,
        record_error: ErrorRecorder,
        lock_timeout: float = limits.PROJECT_LOCK_TIMEOUT_S,
    ) -> None:
        self.projects_dir = projects_dir
        self.config_file = config_file
        self.config = config
        self.clock = clock
        self.instance = secrets.token_hex(6)  # names this daemon's built-in lease owners
        self._record_error = record_error
        self._lock_timeout = lock_timeout
        self._jobs: dict[str, JobView] = {}  # change only through _put_view/_drop_view
        self._admission_threads = trio.CapacityLimiter(ADMISSION_THREADS)
        self._state_counts: collections.Counter[str] = collections.Counter()
        self._active_by_project: collections.Counter[str] = collections.Counter()
        self._summaries: dict[str, JobSummary] = {}
        self._projects: set[str] = set()
        self._ensured: set[str] = set()  # project directories created (with project.json)
        self._project_locks: collections.defaultdict[str, trio.Lock] = collections.defaultdict(
            trio.Lock
        )
        self._changed = trio.Event()
        self._finished: dict[str, trio.Event] = {}  # job id -> set once the job is terminal
        self._reported: set[str] = set()  # problems already in recent_errors
        self._ledger_checks: dict[str, tuple[LedgerFileState, bool]] = {}  # project -> usable
        self._damaged: dict[str, DamagedJobFile] = {}  # job id -> its file that does not parse
        self._held_until: dict[str, float] = {}  # project -> no claim before (lock/store failed)
        self._jitter = random.Random()  # spreads retries of jobs that failed together
        self.busy_workers = 0

    # --- status (daemon.status) -----------------------------------------------------------

    def job_counts(self) -> JobCounts:
        counts = self._state_counts  # kept current on every index change: O(1) per recall
        return JobCounts(
            pending=counts["pending"],
            leased=counts["leased"],
            committed=counts["committed"],
            exhausted=counts["exhausted"],
            cancelled=counts["cancelled"],
            damaged=len(self._damaged),
        )

    def workers_busy(self) -> int:
        return self.busy_workers

    def project_count(self) -> int:
        return len(self._projects)

    def views(self, project_id: str | None = None) -> list[JobView]:
        return [
            view
            for view in self._jobs.values()
            if project_id is None or view.project_id == project_id
        ]

    def active_jobs(self, project_id: str) -> int:
        return self._active_by_project[project_id]

    def _put_view(self, view: JobView) -> None:
        self._drop_view(view.job_id)
        self._jobs[view.job_id] = view
        self._state_counts[view.state] += 1
        if view.state in ACTIVE_STATES:
            self._active_by_project[view.project_id] += 1

    def _drop_view(self, job_id: str) -> None:
        old = self._jobs.pop(job_id, None)
        if old is not None:
            self._state_counts[old.state] -= 1
            if old.state in ACTIVE_STATES:
                self._active_by_project[old.project_id] -= 1

    def known_projects(self) -> set[str]:
        return set(self._projects)

    # --- for recall -------------------------------------------------------------------------

    def project_dir(self, project_id: str) -> Path:
        return project_dir(self.projects_dir, project_id)

    async def read_committed_ledger(self, project_id: str) -> Ledger:
        return await trio.to_thread.run_sync(read_ledger, self.project_dir(project_id))

    async def wait_session_jobs(self, session_id: str, timeout: float) -> Barrier:  # noqa: ASYNC109 (recall's interface)
        """Wait until every job of the session that is queued or running now is finished
        (committed, exhausted or cancelled): "clear"; "timed_out" after `timeout` seconds;
        "none" when the session has no such job. Jobs admitted later are not waited for."""
        waiting = [
            self._finished_event(view.job_id)
            for view in self._jobs.values()
            if view.session_id == session_id
            and view.state in ACTIVE_STATES
            and not self._held_for_damage(view)
        ]
        if not waiting:
            return "none"
        with trio.move_on_after(timeout):
            for event in waiting:
                await event.wait()
            return "clear"
        return "timed_out"

    def _held_for_damage(self, view: JobView) -> bool:
        """A queued job of a project whose ledger is damaged: it cannot finish before the
        ledger is repaired, so a recall must not wait for it."""
        checked = self._ledger_checks.get(view.project_id)
        return view.state == "pending" and checked is not None and not checked[1]

    def _finished_event(self, job_id: str) -> trio.Event:
        event = self._finished.get(job_id)
        if event is None:
            event = self._finished[job_id] = trio.Event()
        return event

    # --- change notification (workers wait on it) -------------------------------------------

    def changed_event(self) -> trio.Event:
        """An event set at the next change to any job (take it before planning)."""
        return self._changed

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def summaries(
        self, project_id: str | None = None, state: str | None = None
    ) -> list[JobSummary]:
        """Jobs as jobs.list shows them, oldest first."""
        found = [
            summary
            for summary in self._summaries.values()
            if (project_id is None or summary.project_id == project_id)
            and (state is None or summary.state == state)
        ]
        return sorted(found, key=lambda summary: (summary.created_at, summary.job_id))

    def damaged_jobs(self, project_id: str | None = None) -> list[DamagedJob]:
        """Job files that do not parse (kept as found), for jobs.list and doctor."""
        return [
            DamagedJob(
                job_id=found.job_id,
                project_id=found.project_id,
                path=found.path,
                problem=found.problem,
            )
            for found in sorted(self._damaged.values(), key=lambda found: found.path)
            if project_id is None or found.project_id == project_id
        ]

    def _mark_damaged(self, found: DamagedJobFile) -> None:
        """A job whose file no longer parses: out of the index, listed as damaged, reported."""
        self._unindex([found.job_id])
        self._damaged[found.job_id] = found
        self.report("job_file_damaged", f"job {found.job_id}: {found.problem}")

    def _index(self, job: JobRecord) -> None:
        self._record(job)

    def _record(self, job: JobRecord) -> None:
        self._put_view(view_of(job))
        self._summaries[job.job_id] = summary_of(job)
        self._projects.add(job.project_id)
        if job.state in TERMINAL_STATES:
            self._job_finished(job.job_id)
        self.notify()

    def _unindex(self, job_ids: Iterable[str]) -> None:
        for job_id in job_ids:
            self._drop_view(job_id)
            self._summaries.pop(job_id, None)
            self._job_finished(job_id)

    def _job_finished(self, job_id: str) -> None:
        event = self._finished.pop(job_id, None)
        if event is not None:
            event.set()

    def report(self, kind: str, message: str) -> None:
        """A problem for daemon.status (once per distinct message) and the log."""
        log.warning("capture.problem", kind=kind, problem=message)
        if message not in self._reported:
            self._reported.add(message)
            self._record_error(kind, message)

    # --- locking ----------------------------------------------------------------------------

    async def run_locked(self, project_id: str, work: Callable[[Path], T]) -> T:
        """Run `work(project_dir)` in a thread holding the project lock (in-process first)."""
        directory = self.project_dir(project_id)
        async with self._project_locks[project_id]:
            return await trio.to_thread.run_sync(self._locked_blocking, directory, work)

    def _locked_blocking(self, directory: Path, work: Callable[[Path], T]) -> T:
        try:
            ensure_directories(directory)
        except OSError as exc:
            raise StorageError(f"cannot create {directory}: {exc.strerror or exc}") from exc
        return run_with_project_lock(directory, lambda: work(directory), self._lock_timeout)

    # --- start ------------------------------------------------------------------------------

    async def load(self) -> None:
        """Index every job file; hand leases of a previous daemon's workers back to pending."""
        scan = await trio.to_thread.run_sync(scan_all_jobs, self.projects_dir)
        for problem in scan.problems:
            self.report("job_store", problem)
        for found in scan.damaged:
            self._mark_damaged(found)
        self._projects.update(scan.projects)
        orphans: list[JobRecord] = []
        for job in scan.jobs:
            self._put_view(view_of(job))
            self._summaries[job.job_id] = summary_of(job)
            if leases.held_by_previous_daemon(job, self.instance):
                orphans.append(job)
        for job in orphans:
            try:
                await self._recover(job)
            except StorageError as exc:
                self.report("job_store", exc.message)
        log.info("jobs.loaded", jobs=len(scan.jobs), projects=len(scan.projects))
        self.notify()

    async def _recover(self, stale: JobRecord) -> None:
        def work(directory: Path) -> JobRecord | None:
            job = read_job(directory, stale.job_id)
            if job is None or not leases.held_by_previous_daemon(job, self.instance):
                return None
            recovered = leases.recover(job, now=self.clock.now())
            write_job(directory, recovered)
            return recovered

        recovered = await self.run_locked(stale.project_id, work)
        if recovered is not None:
            self._index(recovered)
            log.info("job.recovered", job_id=recovered.job_id, project_id=recovered.project_id)

    # --- projects ---------------------------------------------------------------------------

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
            return record_project_visit(
                directory,
                project_id=session.project_id,
                identity=session.project_identity,
                root=session.project_root,
                cwd=session.cwd,
                now=self.clock.now(),
            )

        found = await self.run_locked(session.project_id, work)
        self._projects.add(session.project_id)
        self._ensured.add(session.project_id)
        if found.problem is not None:
            self.report("project_metadata_corrupt", found.problem)
        return found

    async def read_project(self, project_id: str) -> ProjectFile:
        directory = self.project_dir(project_id)
        return await trio.to_thread.run_sync(read_project_file, directory, project_id)

    async def jobs_may_run(self, project_id: str) -> bool:
        """Whether the project's jobs may be handed to a worker now: its auto memory is on
        (user config plus the trusted project's config, read from disk; the root is the last
        one recorded in project.json) and its ledger is not damaged. A damaged ledger cannot
        take a publish, so extracting would call a provider for nothing; it is re-read only
        when the file changes (moving it aside lets the jobs run)."""
        checked = self._ledger_checks.get(project_id)

        def read() -> tuple[bool, LedgerFileState, str | None]:
            directory = self.project_dir(project_id)
            found = read_project_file(directory, project_id)
            root = found.record.root if found.record is not None else ""
            enabled = read_auto_memory(self.config_file, root, self.config)
            state = ledger_file_state(directory)
            if checked is not None and checked[0] == state:
                return enabled, state, None
            try:
                read_ledger(directory)
            except LedgerCorrupt as exc:
                return enabled, state, exc.message
            return enabled, state, None

        enabled, state, damage = await trio.to_thread.run_sync(read)
        if checked is None or checked[0] != state:
            checked = self._ledger_checks[project_id] = (state, damage is None)
            if damage is not None:
                self.report("ledger_corrupt", damage)
                log.warning("jobs.held", project_id=project_id, reason="ledger_corrupt")
        return enabled and checked[1]

    def list_project_ids(self) -> list[str]:
        return list_project_ids(self.projects_dir)

    # --- admission (turn.completed) ---------------------------------------------------------

    async def build_source(self, messages: list[tuple[str, str]]) -> BuiltSource | None:
        if sum(len(content) for _, content in messages) <= INLINE_SOURCE_CHARS:
            return build_source(messages)
        return await trio.to_thread.run_sync(build_source, messages)

    async def ensure_project(self, session: Session) -> None:
        """The project's directory and project.json, before its first job in this process
        (sessions survive restarts, so the session-open hook may not have run here)."""
        if session.project_id not in self._ensured:
            await self.record_visit(session, only_if_missing=True)

    async def admit(self, session: Session, turn_id: str, source: BuiltSource) -> Admission:
        """A durable job for this turn, or the existing one (same session, turn and source
        digest), or `backlog_full` when the project already has 64 active jobs. The job is in
        the index when this returns, so the caller's next request sees it."""
        project_id = session.project_id
        job_id = derive_job_id(session.session_id, turn_id, source.digest)
        record = new_job(
            job_id=job_id,
            project_id=project_id,
            session_id=session.session_id,
            turn_id=turn_id,
            source=source.text,
            source_digest=source.digest,
            source_bytes=source.size,
            source_truncated=source.truncated,
            now=self.clock.now(),
        )
        await self.ensure_project(session)
        directory = self.project_dir(project_id)
        new_file = prepare_job_file(directory, record)

        def create() -> tuple[JobRecord | None, bool]:
            if known:  # every job file is in the index (loaded at start, added on creation)
                existing = read_job(directory, job_id)
                if existing is not None:
                    return existing, True
            if active >= limits.ACTIVE_JOBS_PER_PROJECT:
                return None, False
            if not create_job(new_file):  # created meanwhile by another process
                return read_job(directory, job_id), True
            failpoint("jobs.after_job_write")
            return record, False

        # Only this process admits jobs for its index, and a job file is created without ever
        # replacing one, so the cross-process lock is not needed here (it is for every change).
        lock = self._project_locks[project_id]
        await acquire_soon(lock)
        try:
            active = self.active_jobs(project_id)
            known = job_id in self._jobs
            job, duplicate = await run_sync_now(create, self._admission_threads)
            if job is not None and (not duplicate or not known):
                self._record(job)  # before the next admission counts
        finally:
            lock.release()
        admission = (
            Admission(job_id=None, reason="backlog_full")
            if job is None
            else Admission(job_id=job.job_id, duplicate=duplicate)
        )
        if job is None:
            log.info("job.refused", reason="backlog_full", project_id=project_id, active=active)
        elif admission.duplicate:
            log.info("job.duplicate", job_id=job.job_id, state=job.state)
        else:
            log.info(
                "job.admitted",
                job_id=job.job_id,
                project_id=project_id,
                session_id=session.session_id,
                bytes=source.size,
                truncated=source.truncated,
            )
        return admission

    # --- the lease engine -------------------------------------------------------------------

    def _project_of(self, job_id: str) -> str:
        view = self._jobs.get(job_id)
        if view is None:
            raise NotFound(f"unknown job {job_id!r}; list jobs with jobs.list")
        return view.project_id

    async def _change(
        self,
        job_id: str,
        rule: Callable[[JobRecord, float], JobRecord],
        check: Callable[[], None] | None = None,
    ) -> JobRecord:
        """Apply a lease rule to the job as stored, under the project lock, and write it;
        `check` runs first under the same lock (so what it counts cannot change meanwhile)."""

        def work(directory: Path) -> JobRecord:
            job = read_job(directory, job_id)
            if job is None:
                raise NotFound(f"job {job_id} no longer exists")
            changed = rule(job, self.clock.now())
            if changed is not job:
                write_job(directory, changed)
            return changed

        project_id = self._project_of(job_id)
        directory = self.project_dir(project_id)
        async with self._project_locks[project_id]:
            if check is not None:
                check()
            try:
                changed = await trio.to_thread.run_sync(self._locked_blocking, directory, work)
            except NotFound:
                self._unindex([job_id])  # its file was removed behind our back
                raise
            except CorruptJobFile as exc:
                self._mark_damaged(damaged_job_file(project_id, job_id, exc))
                raise
            self._index(changed)  # before another task can take the project's turn
        return changed

    async def claim_pass(
        self,
        owner: str,
        lease_s: float,
        *,
        project_id: str | None = None,
        running: frozenset[str] = frozenset(),
        retry_at: float | None = None,
    ) -> ClaimPass:
        """Claim the oldest claimable job (of projects whose jobs may run, see jobs_may_run).

        When a project's jobs were held back for a damaged ledger, the pass asks to be
        repeated after reschedule_s, to notice the file being fixed or moved aside."""
        now = self.clock.now()
        self._held_until = {p: at for p, at in self._held_until.items() if at > now}
        state = PoolState(
            jobs=tuple(self.views(project_id)),
            running=running,
            retry_at=retry_at,
            held_until=dict(self._held_until),
        )
        work_plan = schedule.plan(now, state)
        wake_at = work_plan.wake_at
        may_run: dict[str, bool] = {}
        for view in work_plan.claim:
            if view.project_id in self._held_until:
                continue  # held during this pass
            try:
                if view.project_id not in may_run:
                    may_run[view.project_id] = await self.jobs_may_run(view.project_id)
                    if not self._ledger_checks[view.project_id][1]:
                        retry = schedule.reschedule_at(now, self.config.extraction.reschedule_s)
                        wake_at = retry if wake_at is None else min(wake_at, retry)
                if not may_run[view.project_id]:
                    continue
                job = await self.claim_job(view.job_id, owner, lease_s)
            except (NotFound, CorruptJobFile):
                continue  # the job file is gone or damaged (and now out of the index)
            except StorageError as exc:  # that project's lock or files: the others go on
                held = self.hold_project(view.project_id, exc)
                wake_at = held if wake_at is None else min(wake_at, held)
                continue
            if job is not None:
                return ClaimPass(job=job, wake_at=None)
        return ClaimPass(job=None, wake_at=wake_at)

    def hold_project(self, project_id: str, error: StorageError) -> float:
        """No claim of the project's jobs for reschedule_s (its lock or store failed); other
        projects' jobs are not held up. When it may be tried again."""
        reschedule_s = self.config.extraction.reschedule_s
        until = schedule.reschedule_at(self.clock.now(), reschedule_s)
        self._held_until[project_id] = until
        log.warning(
            "project.rescheduled", project_id=project_id, delay_s=reschedule_s, error=error.message
        )
        self.report("job_store", error.message)
        self.notify()  # a worker waiting on the held project plans again
        return until

    async def claim_job(self, job_id: str, owner: str, lease_s: float) -> JobRecord | None:
        """Lease one job to `owner`; None when it is not claimable (any more)."""
        max_retries = self.config.extraction.max_retries
        claimed: list[bool] = []

        def rule(job: JobRecord, now: float) -> JobRecord:
            try:
                changed = leases.claim(
                    job, now=now, owner=owner, lease_s=lease_s, max_retries=max_retries
                )
            except leases.NotClaimable:
                return job
            claimed.append(changed.state == "leased")
            return changed

        job = await self._change(job_id, rule)
        if job.state == "exhausted" and claimed == [False]:
            log.info("job.exhausted", job_id=job_id, attempts=job.attempts, reason="lease_expired")
        if claimed != [True] or job.lease is None:
            return None
        log.info(
            "job.claimed",
            job_id=job_id,
            worker=owner,
            token=job.lease.token,
            attempt=job.attempts + 1,
        )
        return job

    async def renew(self, job_id: str, token: int, lease_s: float) -> JobRecord:
        return await self._change(
            job_id, lambda job, now: leases.renew(job, token=token, now=now, lease_s=lease_s)
        )

    async def release(self, job_id: str, token: int) -> JobRecord:
        job = await self._change(job_id, lambda job, now: leases.release(job, token=token, now=now))
        log.info("job.released", job_id=job_id, token=token)
        return job

    async def fail(
        self, job_id: str, token: int, error: str, retry_after: float | None = None
    ) -> JobRecord:
        extraction = self.config.extraction
        jitter = self._jitter.random()

        def rule(job: JobRecord, now: float) -> JobRecord:
            backoff_s = schedule.retry_backoff(
                job.attempts + 1, extraction.retry_base_s, extraction.retry_max_s, jitter
            )
            return leases.fail(
                job,
                token=token,
                now=now,
                error=error,
                max_retries=extraction.max_retries,
                retry_after=retry_after,
                backoff_s=backoff_s,
            )

        job = await self._change(job_id, rule)
        event = "job.exhausted" if job.state == "exhausted" else "job.failed"
        log.info(event, job_id=job_id, attempts=job.attempts, error=job.errors[-1].message)
        return job

    async def retry(self, job_id: str) -> JobRecord:
        """An exhausted job pending again, attempts reset (jobs.retry): Conflict for any other
        state, or when the project's backlog is already full."""
        project_id = self._project_of(job_id)
        view = self._jobs.get(job_id)
        if view is not None and view.state != "exhausted":  # its state first, not the backlog
            raise Conflict(
                f"job {job_id} is {view.state}; only an exhausted job is retried",
                job_id=job_id,
                state=view.state,
            )

        def backlog_has_room() -> None:  # under the project lock, like admission's count
            if self.active_jobs(project_id) >= limits.ACTIVE_JOBS_PER_PROJECT:
                raise Conflict(
                    f"project {project_id} already has {limits.ACTIVE_JOBS_PER_PROJECT} active "
                    "jobs; retry this one when some have finished",
                    job_id=job_id,
                )

        def rule(job: JobRecord, now: float) -> JobRecord:
            try:
                return leases.retry(job, now=now)
            except leases.NotRetryable as exc:
                raise Conflict(str(exc), job_id=job_id, state=job.state) from exc

        job = await self._change(job_id, rule, backlog_has_room)
        log.info("job.retried", job_id=job_id, project_id=project_id)
        return job

    async def publish(
        self, job_id: str, token: int, output: str, provenance: Provenance
    ) -> PublishResult:
        """Parse the extractor output and, if the lease still holds, merge its facts into the
        ledger and commit the job. Malformed output is a failed attempt (ExtractionRejected)."""
        try:
            facts = parse_extractor_output(output)
        except MalformedOutput as exc:
            job = await self.fail(job_id, token, f"extractor output rejected: {exc.reason}")
            raise ExtractionRejected(
                f"the extractor output was rejected ({exc.reason}); the attempt was counted "
                f"({job.attempts} so far) and the lease released",
                job_id=job_id,
                state=job.state,
                attempts=job.attempts,
            ) from exc
        project_id = self._project_of(job_id)

        def work(directory: Path) -> tuple[Published, LedgerFileState]:
            published = publish_job(
                directory,
                job_id=job_id,
                token=token,
                facts=facts,
                provenance=provenance,
                now=self.clock.now(),
                project_views=project_views,
            )
            return published, ledger_file_state(directory)

        async with self._project_locks[project_id]:
            project_views = self.views(project_id)
            directory = self.project_dir(project_id)
            try:
                published, ledger_state = await trio.to_thread.run_sync(
                    self._locked_blocking, directory, work
                )
            except LedgerCorrupt:
                self._ledger_checks.pop(project_id, None)  # read it again before the next claim
                raise
            self._ledger_checks[project_id] = (ledger_state, True)  # just read and written whole
            self._unindex(published.pruned)
            self._index(published.result.job)
        result, pruned = published.result, published.pruned
        for problem in published.problems:
            self.report("projection_failed", problem)
        log.info(
            "job.committed",
            job_id=job_id,
            project_id=project_id,
            added=result.added,
            duplicates=result.duplicates,
            rejected=result.rejected,
            pruned=len(pruned),
        )
        return result
