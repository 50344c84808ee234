"""Built-in extraction workers (`extraction.workers` of them; 0 means none).

Each worker loops: plan (schedule.plan through LeaseEngine.claim_pass), claim the oldest
claimable job of a project whose auto memory is on now, call the provider under the overall
`timeout_s` deadline while renewing the lease every lease_s / 3, then publish, fail or release
as schedule.after_attempt says. When nothing is claimable it sleeps until the plan's wake time
or until a job changes or a session opens. A transient job-store or lock failure on one
project holds that project's jobs for `reschedule_s` (spec: Capture and Recovery) while the
worker goes on with other projects; only a failure of the whole job store makes the worker
itself wait. On shutdown a held lease is released without using an attempt. A job an orcad died
running (recoveries counted) runs alone: the pool claims it only once no other lease of its
workers is held, and nothing else while it runs (schedule.may_start), so a job whose run kills
orcad takes no innocent job's lease down with it.
"""

from __future__ import annotations

import math

import structlog
import trio

from orcad.capture import leases, schedule
from orcad.capture.lease_engine import LeaseEngine
from orcad.capture.projects import ProjectLockTimeout
from orcad.capture.records import JobRecord, Provenance
from orcad.errors import ExtractionRejected, LeaseLost, NotFound, StorageError
from orcad.limits import RELEASE_GRACE_S
from orcad.log import describe_exception
from orcad.providers import Provider, ProviderError

log = structlog.get_logger("orcad.capture.worker")


class WorkerPool:
    def __init__(self, engine: LeaseEngine, provider: Provider, workers: int) -> None:
        self.engine = engine
        self.provider = provider
        self.workers = workers
        # jobs this pool's workers hold or are claiming: one an orcad died running runs alone
        self.leases = schedule.BuiltinLeases()

    @property
    def provenance(self) -> Provenance:
        return Provenance(
            provider=self.provider.name,
            model=self.provider.model,
            prompt_version=self.provider.prompt_version,
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for number in range(self.workers):
                nursery.start_soon(self.work, number)
            task_status.started()

    async def work(self, number: int) -> None:
        engine = self.engine
        owner = leases.builtin_owner(engine.instance, number)
        retry_at: float | None = None
        while True:
            changed = engine.index.changed_event()
            extraction = engine.config.extraction
            try:
                found = await engine.claim_pass(
                    owner,
                    extraction.lease_s,
                    running=self.leases.ids(),
                    retry_at=retry_at,
                    builtin=self.leases,
                )
            except StorageError as exc:
                retry_at = self._reschedule(owner, exc)
                continue
            if found.job is not None:
                retry_at = None
                project_id = found.job.project_id
                try:
                    await self.attempt(owner, found.job)
                except StorageError as exc:
                    engine.hold_project(project_id, exc)
                except Exception as exc:  # a bug must not stop the worker for good
                    # type and frames only: an exception's message may quote turn text
                    log.error(
                        "worker.crashed",
                        worker=owner,
                        job_id=found.job.job_id,
                        **describe_exception(exc),
                    )
                    engine.hold_project(
                        project_id, StorageError(f"worker error: {type(exc).__name__}")
                    )
                continue
            if retry_at is not None:
                # rescheduled: wait the whole back-off out, whatever changes meanwhile
                await trio.sleep(max(0.0, retry_at - engine.clock.now()))
                retry_at = None
                continue
            await self._sleep(changed, found.wake_at)

    def _reschedule(self, owner: str, error: StorageError) -> float:
        reschedule_s = self.engine.config.extraction.reschedule_s
        log.warning("worker.rescheduled", worker=owner, delay_s=reschedule_s, error=error.message)
        self.engine.problems.report("job_store", error.message)
        return schedule.reschedule_at(self.engine.clock.now(), reschedule_s)

    async def _sleep(self, changed: trio.Event, wake_at: float | None) -> None:
        """Until something changes, or until `wake_at` (wall-clock seconds)."""
        delay = math.inf if wake_at is None else max(0.0, wake_at - self.engine.clock.now())
        with trio.move_on_after(delay):
            await changed.wait()

    async def attempt(self, owner: str, job: JobRecord) -> None:
        """One provider call for a leased job, then publish, fail, release or drop."""
        assert job.lease is not None
        token = job.lease.token
        engine = self.engine
        self.leases.hold(job.job_id, alone=job.recovery_count() > 0)  # claim_pass did already
        engine.busy_workers += 1
        settled = False  # the lease was published, failed, released or lost
        try:
            end, output, retry_after = await self._extract(job, token)
            action = schedule.after_attempt(end)
            try:
                if action == "publish":
                    await self._publish(job.job_id, token, output)
                elif action == "fail":
                    await engine.fail(job.job_id, token, output, retry_after)
                elif action == "drop":
                    log.info("lease.lost", job_id=job.job_id, worker=owner, token=token)
            except (LeaseLost, NotFound) as exc:
                log.info("lease.lost", job_id=job.job_id, worker=owner, error=exc.message)
            except ProjectLockTimeout:
                settled = True  # releasing needs the same lock; the lease will expire instead
                raise
            settled = True
        finally:
            # cancelled (shutdown) or a store failure: hand the lease back, using no attempt
            if not settled:
                with trio.CancelScope(shield=True), trio.move_on_after(RELEASE_GRACE_S):
                    await self._release_quietly(job.job_id, token)
            engine.busy_workers -= 1
            if self.leases.let_go(job.job_id):
                engine.index.notify()  # a worker waiting for the leases held to end plans again

    async def _publish(self, job_id: str, token: int, output: str) -> None:
        """Publish the provider's answer. A project lock another process holds past its bound
        is waited for again while the lease runs, instead of dropping the answer and asking the
        provider again after the lease ran out; the publish checks the lease under the lock, so
        one that ran out meanwhile still writes nothing."""
        engine = self.engine
        while True:
            try:
                await engine.publish(job_id, token, output, self.provenance)
                return
            except ExtractionRejected as exc:
                log.info("job.output_rejected", job_id=job_id, error=exc.message)
                return
            except ProjectLockTimeout as exc:
                # the lease as this daemon honours it (JobDeadlines): the wall clock set forward
                # meanwhile does not end it, nor set back lengthen it
                now, elapsed = engine.clock.now(), engine.clock.monotonic()
                view = engine.index.view(job_id)
                if view is not None:
                    view = engine.deadlines.honoured_view(view, now, elapsed)
                if not schedule.lease_runs(view, now):
                    raise
                log.warning("publish.lock_timeout", job_id=job_id, error=exc.message)
                engine.problems.report("job_store", exc.message)

    async def _release_quietly(self, job_id: str, token: int) -> None:
        try:
            await self.engine.release(job_id, token)
        except (LeaseLost, NotFound):
            pass
        except StorageError as exc:
            log.warning("job.release_failed", job_id=job_id, error=exc.message)

    async def _extract(
        self, job: JobRecord, token: int
    ) -> tuple[schedule.AttemptEnd, str, float | None]:
        """Call the provider with the lease kept renewed; (how it ended, output or error
        message, retry_after)."""
        extraction = self.engine.config.extraction
        lost = trio.Event()
        end: schedule.AttemptEnd = "timed_out"
        text = f"provider gave no answer within timeout_s={extraction.timeout_s:g} s"
        retry_after: float | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._keep_renewed, job.job_id, token, lost, nursery.cancel_scope)
            deadline = trio.current_time() + extraction.timeout_s
            with trio.move_on_at(deadline):
                try:
                    text = await self.provider.extract(job.source, deadline=deadline)
                    end = "output"
                except ProviderError as exc:
                    end, text, retry_after = "provider_error", exc.message, exc.retry_after
                except Exception as exc:  # a provider bug must not kill the worker
                    log.error("provider.crashed", job_id=job.job_id, **describe_exception(exc))
                    end, text = "crashed", f"provider raised {type(exc).__name__}"
            nursery.cancel_scope.cancel()
        if lost.is_set():
            return "lease_lost", "", None
        return end, text, retry_after

    async def _keep_renewed(
        self, job_id: str, token: int, lost: trio.Event, provider_scope: trio.CancelScope
    ) -> None:
        """Renew every lease_s / 3 by the clock, whatever the provider is (not) sending."""
        lease_s = self.engine.config.extraction.lease_s
        while True:
            await trio.sleep(schedule.renew_interval(lease_s))
            try:
                await self.engine.renew(job_id, token, lease_s)
            except (LeaseLost, NotFound):
                lost.set()
                provider_scope.cancel()
                return
            except StorageError as exc:  # try again next tick; publish re-checks the lease
                log.warning("lease.renew_failed", job_id=job_id, error=exc.message)
