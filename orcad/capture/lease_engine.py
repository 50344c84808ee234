"""The lease engine: claim, renew, fail, release, retry, publish and recover jobs.

The daemon's own workers and external workers (jobs.*) go through the same engine. Each
change reads the job from its file in a thread holding the project's locks, applies a pure
lease rule (`leases`) at the clock reading taken there, writes the result, and puts it in the
index on the event loop before the project's in-process lock is let go; fencing is checked
where the write happens (`publishing` for a publish). A publish embeds its facts (with the
`embed_facts` it was given, recall's model) before it takes the lock, for the index. Which job
to claim next is planned by `schedule.plan`; a project whose lock or job files fail is held
back for `reschedule_s`.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec
import structlog
import trio

from orcad import limits
from orcad.capture import leases, schedule
from orcad.capture.deadlines import JobDeadlines
from orcad.capture.index import JobIndex
from orcad.capture.jobstore import (
    CorruptJobFile,
    DamagedJobFile,
    damaged_job_file,
    delete_jobs,
    job_path,
    read_job,
    scan_all_jobs,
    write_job,
)
from orcad.capture.ledger import LedgerCorrupt, LedgerFileState, ledger_file_state
from orcad.capture.output import MalformedOutput, parse_extractor_output
from orcad.capture.problems import Problems
from orcad.capture.project_access import ProjectAccess
from orcad.capture.projections import IndexVectors
from orcad.capture.publishing import Published, PublishResult, publish_job
from orcad.capture.records import JobRecord, Provenance
from orcad.capture.schedule import PoolState
from orcad.capture.states import ENDED_STATES
from orcad.clock import Clock, format_time, stamp_after
from orcad.config import Config
from orcad.errors import Conflict, ExtractionRejected, NotFound, StorageError
from orcad.secrets import secret_kinds

# the embeddings of a job's facts for the project's index (its directory), within recall's
# deadline (orcad.recall.automatic.fact_embedder); never raises, None when there is no model
# or it failed (the backfill embeds them then)
FactEmbedder = Callable[[Sequence[str], Path], IndexVectors | None]

log = structlog.get_logger("orcad.capture")


class ClaimPass(msgspec.Struct, frozen=True, kw_only=True):
    job: JobRecord | None  # leased to the caller, or None
    wake_at: float | None  # when something may become claimable (plan), if nothing was


class LeaseEngine:
    def __init__(
        self,
        *,
        projects: ProjectAccess,
        index: JobIndex,
        config: Config,
        clock: Clock,
        problems: Problems,
        embed_facts: FactEmbedder | None = None,
    ) -> None:
        self.projects = projects
        self.embed_facts = embed_facts
        self.index = index
        self.config = config
        self.clock = clock
        self.problems = problems
        self.instance = secrets.token_hex(6)  # names this daemon's built-in lease owners
        self.busy_workers = 0
        self._held_until: dict[str, float] = {}  # project -> no claim before (lock/store failed)
        self._jitter = random.Random()  # spreads retries of jobs that failed together
        self.deadlines = JobDeadlines()  # the waits written here, on the monotonic clock too

    # --- start ------------------------------------------------------------------------------

    async def load(self) -> None:
        """Index every job file; hand leases of a previous daemon's workers back to pending."""
        scan = await trio.to_thread.run_sync(scan_all_jobs, self.projects.projects_dir)
        for problem in scan.problems:
            self.problems.report("job_store", problem)
        for found in scan.damaged:
            self._mark_damaged(found)
        for project_id in scan.projects:
            self.index.add_project(project_id)
        orphans: list[JobRecord] = []
        now, elapsed = self.clock.now(), self.clock.monotonic()
        for job in scan.jobs:
            self.index.put(job, notify=False)
            # what remains of a wait found here runs on the monotonic clock from now on: the
            # wall clock set back, since it was written or later, does not hold the job longer
            self.deadlines.note_found(job, now, elapsed)
            if leases.held_by_previous_daemon(job, self.instance):
                orphans.append(job)
        for job in orphans:
            try:
                await self._recover(job)
            except StorageError as exc:
                self.problems.report("job_store", exc.message)
        log.info("jobs.loaded", jobs=len(scan.jobs), projects=len(scan.projects))
        self.index.notify()

    async def _recover(self, stale: JobRecord) -> None:
        recovered: list[JobRecord] = []

        def rule(job: JobRecord, now: float) -> JobRecord:
            if not leases.held_by_previous_daemon(job, self.instance):
                return job  # changed since the scan
            recovered.append(leases.recover(job, now=now))
            return recovered[0]

        try:
            await self._change(stale.job_id, rule)
        except NotFound:
            return  # removed since the scan
        for job in recovered:
            if job.state == "exhausted":
                log.warning(
                    "job.exhausted",
                    job_id=job.job_id,
                    attempts=job.attempts,
                    reason="orcad_stopped",
                    recoveries=job.recoveries,
                )
            else:
                log.info(
                    "job.recovered",
                    job_id=job.job_id,
                    project_id=job.project_id,
                    recoveries=job.recoveries,
                )

    async def look_at_damaged(self) -> None:
        """Read again the job files listed as damaged: one moved away or deleted (as the advice
        says, to give its job up) is no longer listed, and one restored from a backup is its
        job again, as a restart would make it. Each project's under its lock, as any change."""
        by_project: dict[str, list[str]] = {}
        for listed in self.index.damaged_files():
            by_project.setdefault(listed.project_id, []).append(listed.job_id)
        for project_id, job_ids in sorted(by_project.items()):
            await self._look_at_damaged_of(project_id, job_ids)

    async def _look_at_damaged_of(self, project_id: str, job_ids: list[str]) -> None:
        def work(directory: Path) -> list[_ReadAgain]:
            return [_read_again(directory, job_id) for job_id in job_ids]

        try:
            async with self.projects.lock(project_id):
                found = await self.projects.run_with_lock_held(
                    project_id, work, make_directory=False
                )
        except NotFound:  # the directory moved away or deleted, and these files with it
            for job_id in job_ids:
                self.index.forget_damaged(job_id)
            log.info("job.damaged_files_gone", project_id=project_id, jobs=sorted(job_ids))
            return
        except StorageError:  # unreadable now: left listed
            return
        sound: list[JobRecord] = []
        for job_id, job, damaged in found:
            if damaged:
                continue
            self.index.forget_damaged(job_id)
            if job is None:
                log.info("job.damaged_file_gone", job_id=job_id, project_id=project_id)
            elif job.job_id != job_id or job.project_id != project_id:
                path = job_path(self.projects.project_dir(project_id), job_id)
                self.problems.report(
                    "job_store", f"job file {path} names another job or project; left as found"
                )
            elif job_id not in self.index:
                log.info("job.damaged_file_restored", job_id=job_id, project_id=project_id)
                self.index.put(job)
                self.deadlines.note_found(job, self.clock.now(), self.clock.monotonic())
                sound.append(job)
        for job in sound:
            if leases.held_by_previous_daemon(job, self.instance):
                try:
                    await self._recover(job)
                except StorageError as exc:
                    self.problems.report("job_store", exc.message)

    def _mark_damaged(self, found: DamagedJobFile) -> None:
        self.index.mark_damaged(found)
        self.problems.report("job_file_damaged", f"job {found.job_id}: {found.problem}")

    # --- one change ---------------------------------------------------------------------------

    async def _change(
        self,
        job_id: str,
        rule: Callable[[JobRecord, float], JobRecord],
        check: Callable[[], None] | None = None,
    ) -> JobRecord:
        """Apply a lease rule to the job as stored, under the project lock, and write it;
        `check` runs first under the same lock (so what it counts cannot change meanwhile).
        A job that ends there (exhausted or cancelled) may take the oldest such job file of
        its project past ENDED_JOBS_KEPT with it."""
        ended: list[bool] = []
        written: list[tuple[float, float]] = []  # (wall, monotonic) of the write

        def work(directory: Path) -> JobRecord:
            job = read_job(directory, job_id)
            if job is None:
                raise NotFound(f"job {job_id} no longer exists")
            now, elapsed = self.clock.now(), self.clock.monotonic()
            job = self.deadlines.honoured(job, now, elapsed)
            changed = rule(job, now)
            # retention keeps the newest to end by this time: one ending now is the newest, even
            # when the wall clock was set back since the project's last job ended
            ends = changed.state in ENDED_STATES and job.state not in ENDED_STATES
            if ends and (stamp := stamp_after(latest_ended, now)) != now:
                changed = msgspec.structs.replace(changed, updated_at=format_time(stamp))
            if changed is not job:
                write_job(directory, changed)
                written.append((now, elapsed))
            ended.append(changed.state in ENDED_STATES and job.state not in ENDED_STATES)
            return changed

        project_id = self.index.project_of(job_id)
        async with self.projects.lock(project_id):
            if check is not None:
                check()
            latest_ended = max(
                (v.ended_at for v in self.index.views(project_id) if v.ended_at is not None),
                default=None,
            )
            try:
                changed = await self.projects.run_with_lock_held(
                    project_id, work, make_directory=False
                )
            except NotFound:
                self.index.drop([job_id])  # its file was removed behind our back
                raise
            except CorruptJobFile as exc:
                self._mark_damaged(damaged_job_file(project_id, job_id, exc))
                raise
            self.index.put(changed)  # before another task can take the project's turn
            if written:
                self.deadlines.note(changed, *written[0])
            if ended == [True]:
                await self._prune_ended(project_id)
        return changed

    async def _prune_ended(self, project_id: str) -> None:
        """Delete the project's exhausted and cancelled job files past ENDED_JOBS_KEPT, oldest
        to end first (the project's lock held). A failure is logged and left for the next job
        that ends: the change that ended one is made either way."""
        pruned = schedule.ended_jobs_to_prune(self.index.views(project_id))
        if not pruned:
            return
        try:
            await self.projects.run_with_lock_held(
                project_id, lambda directory: delete_jobs(directory, pruned), make_directory=False
            )
        except (StorageError, NotFound) as exc:
            log.warning("jobs.prune_failed", project_id=project_id, error=exc.message)
            return
        self.index.drop(pruned)
        log.info("jobs.pruned", project_id=project_id, ended=len(pruned))

    # --- claiming ---------------------------------------------------------------------------

    async def claim_pass(
        self,
        owner: str,
        lease_s: float,
        *,
        project_id: str | None = None,
        running: frozenset[str] = frozenset(),
        retry_at: float | None = None,
        builtin: schedule.BuiltinLeases | None = None,
    ) -> ClaimPass:
        """Claim the oldest claimable job (of projects whose jobs may run, see
        ProjectAccess.jobs_may_run).

        When a project's jobs were held back for a damaged ledger, the pass asks to be
        repeated after reschedule_s, to notice the file being fixed or moved aside.

        A built-in worker passes its pool's `builtin` leases: the job claimed is held there
        (until the worker lets it go), and the pass claims nothing while schedule.may_start
        says the next job in order must wait for those held to end."""
        now, elapsed = self.clock.now(), self.clock.monotonic()
        self._held_until = {p: at for p, at in self._held_until.items() if at > now}
        self.deadlines.prune(self.index.view)
        state = PoolState(
            jobs=tuple(
                self.deadlines.honoured_view(view, now, elapsed)
                for view in self.index.views(project_id)
            ),
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
            if builtin is not None and view.job_id in builtin:
                continue  # another worker of this daemon holds it or is claiming it
            job, holding = None, False
            try:
                if view.project_id not in may_run:
                    may_run[view.project_id] = await self.projects.jobs_may_run(view.project_id)
                    if self.projects.ledger_damaged(view.project_id):
                        retry = schedule.reschedule_at(now, self.config.extraction.reschedule_s)
                        wake_at = retry if wake_at is None else min(wake_at, retry)
                if not may_run[view.project_id]:
                    continue
                if builtin is not None:
                    # checked and held with no checkpoint between (see BuiltinLeases)
                    if view.job_id in builtin:
                        continue  # another worker of this daemon took it meanwhile
                    if not builtin.may_start(view):
                        break  # next in order: it waits, and nothing younger starts before it
                    builtin.hold(view.job_id, alone=schedule.runs_alone(view))
                    holding = True
                job = await self.claim_job(view.job_id, owner, lease_s)
            except (NotFound, CorruptJobFile):
                continue  # the job file is gone or damaged (and now out of the index)
            except StorageError as exc:  # that project's lock or files: the others go on
                held = self.hold_project(view.project_id, exc)
                wake_at = held if wake_at is None else min(wake_at, held)
                continue
            finally:
                if builtin is not None and holding and job is None and builtin.let_go(view.job_id):
                    self.index.notify()  # a worker that waited for it plans again
            if job is not None:
                if builtin is not None:  # as read under the lock, which the index follows
                    builtin.hold(job.job_id, alone=job.recovery_count() > 0)
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
        self.problems.report("job_store", error.message)
        self.index.notify()  # a worker waiting on the held project plans again
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

    # --- a lease held -----------------------------------------------------------------------

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
        state, or when the project's backlog is already full. A job whose file is damaged is
        known by that file, not unknown: StorageError naming it and what to do."""
        damaged = self.index.damaged_file(job_id)
        if damaged is not None:
            raise StorageError(damaged.problem, path=damaged.path, job_id=job_id)
        project_id = self.index.project_of(job_id)
        view = self.index.view(job_id)
        if view is not None and view.state != "exhausted":  # its state first, not the backlog
            raise Conflict(
                f"job {job_id} is {view.state}; only an exhausted job is retried",
                job_id=job_id,
                state=view.state,
            )

        def backlog_has_room() -> None:  # under the project lock, like admission's count
            if self.index.active_jobs(project_id) >= limits.ACTIVE_JOBS_PER_PROJECT:
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
        project_id = self.index.project_of(job_id)
        vectors = None
        # before the lock: a model takes its time. A fact that looks like a secret is refused
        # by the merge, and never goes to a model (which may be an endpoint elsewhere) either.
        texts = [fact.fact for fact in facts if not secret_kinds(fact.fact)]
        if texts and self.embed_facts is not None:
            vectors = await trio.to_thread.run_sync(
                self.embed_facts, texts, self.projects.project_dir(project_id)
            )

        written: list[tuple[float, float]] = []  # (wall, monotonic) of the publish

        def work(directory: Path) -> tuple[Published, LedgerFileState]:
            now, elapsed = self.clock.now(), self.clock.monotonic()
            written.append((now, elapsed))
            published = publish_job(
                directory,
                job_id=job_id,
                token=token,
                facts=facts,
                provenance=provenance,
                now=now,
                project_views=project_views,
                vectors=vectors,
                honoured=lambda job: self.deadlines.honoured(job, now, elapsed),
            )
            return published, ledger_file_state(directory)

        async with self.projects.lock(project_id):
            project_views = self.index.views(project_id)
            try:
                published, ledger_state = await self.projects.run_with_lock_held(
                    project_id, work, make_directory=False
                )
            except LedgerCorrupt:
                self.projects.ledger_suspect(project_id)
                raise
            self.projects.ledger_written(project_id, ledger_state)
            self.index.drop(published.pruned)
            self.index.put(published.result.job)
            self.deadlines.note(published.result.job, *written[0])
        result, pruned = published.result, published.pruned
        for problem in published.problems:
            self.problems.report("projection_failed", problem)
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


class _ReadAgain(NamedTuple):
    job_id: str
    job: JobRecord | None  # None: the file is gone
    damaged: bool  # still damaged, or cannot be read now: left listed


def _read_again(directory: Path, job_id: str) -> _ReadAgain:
    try:
        return _ReadAgain(job_id, read_job(directory, job_id), damaged=False)
    except StorageError:  # (CorruptJobFile included)
        return _ReadAgain(job_id, None, damaged=True)
