"""Installs automatic-memory capture into the daemon.

Routes: `turn.completed`, `jobs.list`, `jobs.claim`, `jobs.renew`, `jobs.publish`, `jobs.fail`,
`jobs.release`, `jobs.retry`, `projects.list`, `projects.inspect`, `ledger.forget`.
Background: the job index is loaded at start (leases of a previous daemon's workers go back to
pending) and the built-in worker pool runs until shutdown. A session-open hook records
project.json and wakes the workers, so pending and expired work resumes whenever a session
opens for a project.

What other features may use (`daemon.capture` is a CaptureService, `daemon.capture_status` too):

- `await daemon.capture.wait_session_jobs(session_id, timeout) -> "clear" | "timed_out" |
  "none"`: waits for the session's jobs that are queued (pending) or running (leased) at the
  moment of the call to finish (committed, exhausted or cancelled); "none" when there are none.
  Jobs admitted after the call are not waited for.
- `daemon.capture.project_dir(project_id) -> Path`: the project's memory directory
  (`memory_root/projects/<project-id>`); NotFound for a value that is not a project id.
- `await daemon.capture.read_committed_ledger(project_id) -> orcad.capture.ledger.Ledger`: the
  last committed ledger (`ledger.read_ledger` in a thread; no lock needed, the file is only
  ever replaced whole).
- `await daemon.capture.run_locked(project_id, fn)`: runs `fn(project_dir)` in a thread under
  the project's cross-process lock, for anything that must not interleave with a publish.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import structlog
import trio

from orcad.capture import inspection, leases
from orcad.capture.eligibility import TurnFacts, ineligible_reason
from orcad.capture.projects import is_project_id
from orcad.capture.records import Provenance
from orcad.capture.service import Admission, CaptureService
from orcad.capture.worker import WorkerPool
from orcad.errors import InvalidParams, StorageError
from orcad.providers import ProviderConfigError, build_provider
from orcad.rpc import AsyncHandler, SyncHandler
from orcad.sessions import Session
from protocol.types import (
    ClaimedJob,
    JobsClaimParams,
    JobsClaimResult,
    JobsFailParams,
    JobsFailResult,
    JobsListParams,
    JobsListResult,
    JobsPublishParams,
    JobsPublishResult,
    JobsReleaseParams,
    JobsReleaseResult,
    JobsRenewParams,
    JobsRenewResult,
    JobsRetryParams,
    JobsRetryResult,
    Lease,
    LedgerForgetParams,
    LedgerForgetResult,
    ProjectsInspectParams,
    ProjectsInspectResult,
    ProjectsListParams,
    ProjectsListResult,
    TurnCompletedParams,
    TurnCompletedResult,
)

if TYPE_CHECKING:
    from orcad.app import Daemon

log = structlog.get_logger("orcad.capture")

EXTERNAL_PROMPT_VERSION = "external"  # jobs.publish does not say which prompt a worker used


class CaptureApi:
    def __init__(self, daemon: Daemon, service: CaptureService) -> None:
        self.daemon = daemon
        self.service = service
        self.pool: WorkerPool | None = None

    # --- lifecycle --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the job index, then run the built-in workers until cancelled."""
        await self.service.load()
        self.pool = self.build_pool()
        if self.pool is None:
            task_status.started()
            await trio.sleep_forever()
        await self.pool.run(task_status=task_status)

    def build_pool(self) -> WorkerPool | None:
        extraction = self.daemon.config.extraction
        if extraction.workers == 0:
            log.info("workers.none", reason="extraction.workers is 0; jobs wait for jobs.claim")
            return None
        try:
            provider = build_provider(extraction, os.environ)
        except ProviderConfigError as exc:
            self.service.report("provider_config", str(exc))
            return None
        log.info("workers.started", workers=extraction.workers, provider=provider.name)
        return WorkerPool(self.service, provider, extraction.workers)

    async def on_session_opened(self, session: Session) -> None:
        if session.auto_memory:
            try:
                await self.service.record_visit(session)
            except StorageError as exc:
                self.service.report("project_metadata", exc.message)
        self.service.notify()  # pending and expired work resumes when a session opens

    # --- turn.completed ---------------------------------------------------------------------

    async def turn_completed(self, params: TurnCompletedParams) -> TurnCompletedResult:
        session = await self.daemon.sessions.require(params.session_id, params.epoch)
        reason = ineligible_reason(
            TurnFacts(
                bare=session.bare,
                auto_memory=session.auto_memory,
                history=session.history,
                root=params.root,
                subagent=params.subagent,
                outcome=params.outcome,
                verifier=params.verifier,
                transcript_committed=params.transcript_committed,
            )
        )
        source = None
        if reason is None:
            source = await self.service.build_source(
                [(message.role, message.content) for message in params.messages]
            )
            if source is None:
                reason = "no_content"
        if reason is not None or source is None:
            log.info("turn.ineligible", session_id=session.session_id, reason=reason)
            return TurnCompletedResult(eligible=False, reason=reason, job_id=None, duplicate=False)
        return turn_result(await self.service.admit(session, params.turn_id, source))

    # --- jobs.* -----------------------------------------------------------------------------

    def list_jobs(self, params: JobsListParams) -> JobsListResult:
        damaged = self.service.damaged_jobs(params.project_id) if params.state is None else []
        return JobsListResult(
            jobs=self.service.summaries(params.project_id, params.state), damaged=damaged
        )

    async def claim(self, params: JobsClaimParams) -> JobsClaimResult:
        if params.worker.startswith(leases.BUILTIN_OWNER_PREFIX):
            raise InvalidParams(
                f"worker names starting with {leases.BUILTIN_OWNER_PREFIX!r} are reserved for "
                "the daemon's own workers",
                field="worker",
            )
        if params.project_id is not None and not is_project_id(params.project_id):
            raise InvalidParams(
                "project_id must be 64 lowercase hex digits (see projects.list)", field="project_id"
            )
        lease_s = params.lease_s or self.daemon.config.extraction.lease_s
        found = await self.service.claim_pass(params.worker, lease_s, project_id=params.project_id)
        job = found.job
        if job is None or job.lease is None:
            return JobsClaimResult(job=None, lease=None)
        return JobsClaimResult(
            job=ClaimedJob(
                job_id=job.job_id,
                project_id=job.project_id,
                session_id=job.session_id,
                turn_id=job.turn_id,
                source=job.source,
                attempt=job.attempts + 1,
            ),
            lease=Lease(token=job.lease.token, expires_at=job.lease.expires_at),
        )

    async def renew(self, params: JobsRenewParams) -> JobsRenewResult:
        lease_s = params.lease_s or self.daemon.config.extraction.lease_s
        job = await self.service.renew(params.job_id, params.token, lease_s)
        assert job.lease is not None
        return JobsRenewResult(expires_at=job.lease.expires_at)

    async def publish(self, params: JobsPublishParams) -> JobsPublishResult:
        provenance = Provenance(
            provider=params.provider, model=params.model, prompt_version=EXTERNAL_PROMPT_VERSION
        )
        result = await self.service.publish(params.job_id, params.token, params.output, provenance)
        return JobsPublishResult(
            state="committed",
            added=result.added,
            duplicates=result.duplicates,
            rejected=result.rejected,
        )

    async def fail(self, params: JobsFailParams) -> JobsFailResult:
        job = await self.service.fail(params.job_id, params.token, params.error)
        return JobsFailResult(state=job.state, attempts=job.attempts)

    async def release(self, params: JobsReleaseParams) -> JobsReleaseResult:
        job = await self.service.release(params.job_id, params.token)
        return JobsReleaseResult(state=job.state)

    async def retry(self, params: JobsRetryParams) -> JobsRetryResult:
        job = await self.service.retry(params.job_id)
        return JobsRetryResult(state=job.state)

    # --- inspection -------------------------------------------------------------------------

    async def list_projects(self, params: ProjectsListParams) -> ProjectsListResult:
        return await inspection.list_projects(self.service)

    async def inspect_project(self, params: ProjectsInspectParams) -> ProjectsInspectResult:
        return await inspection.inspect_project(self.service, params)

    async def forget(self, params: LedgerForgetParams) -> LedgerForgetResult:
        return await inspection.forget(self.service, params, self._purge_copies)

    async def _purge_copies(self, texts: list[str]) -> None:
        recall = self.daemon.recall
        if recall is not None and hasattr(recall, "snapshots"):
            await recall.snapshots.purge(texts)


def turn_result(admission: Admission) -> TurnCompletedResult:
    if admission.job_id is None:
        return TurnCompletedResult(
            eligible=False, reason=admission.reason, job_id=None, duplicate=False
        )
    return TurnCompletedResult(
        eligible=True, reason=None, job_id=admission.job_id, duplicate=admission.duplicate
    )


def install(daemon: Daemon) -> CaptureService:
    service = CaptureService(
        projects_dir=daemon.paths.projects_dir,
        config_file=daemon.paths.config_file,
        config=daemon.config,
        clock=daemon.clock,
        record_error=daemon.record_error,
    )
    api = CaptureApi(daemon, service)
    routes: dict[str, AsyncHandler | SyncHandler] = {
        "turn.completed": api.turn_completed,
        "jobs.list": api.list_jobs,
        "jobs.claim": api.claim,
        "jobs.renew": api.renew,
        "jobs.publish": api.publish,
        "jobs.fail": api.fail,
        "jobs.release": api.release,
        "jobs.retry": api.retry,
        "projects.list": api.list_projects,
        "projects.inspect": api.inspect_project,
        "ledger.forget": api.forget,
    }
    for method, handler in routes.items():
        daemon.router.add(method, handler)
    daemon.session_opened_hooks.append(api.on_session_opened)
    daemon.background.append(api.run)
    daemon.capture = service
    daemon.capture_status = service
    return service
