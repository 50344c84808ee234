"""Automatic-memory capture's routes: `turn.completed`, `jobs.list`, `jobs.claim`,
`jobs.renew`, `jobs.publish`, `jobs.fail`, `jobs.release`, `jobs.retry`, `projects.list`,
`projects.inspect`, `ledger.forget`.

Each route checks its request, calls one part of the capture service (orcad.capture.service)
and turns what it returns into the wire result. `install` builds the service from the host's
collaborators and registers the routes, the session-open hook and the background run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from orcad.capture import inspection, leases
from orcad.capture.admission import Admission
from orcad.capture.eligibility import TurnFacts, ineligible_reason
from orcad.capture.lease_engine import FactEmbedder
from orcad.capture.projects import is_project_id
from orcad.capture.records import Provenance
from orcad.capture.service import CaptureService
from orcad.config import Config
from orcad.errors import InvalidParams
from orcad.host import Host
from orcad.providers.heuristic import FactJudge
from orcad.rpc import AsyncHandler, SyncHandler
from orcad.sessions import SessionStore
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

log = structlog.get_logger("orcad.capture")

EXTERNAL_PROMPT_VERSION = "external"  # jobs.publish does not say which prompt a worker used


TextPurger = Callable[[list[str]], Awaitable[object]]


class CaptureRoutes:
    def __init__(self, service: CaptureService, sessions: SessionStore, config: Config) -> None:
        self.service = service
        self.sessions = sessions
        self.config = config
        self.purge_copies: TextPurger | None = None  # drops other copies of a forgotten fact
        self.owe_purge: Callable[[], None] | None = None  # ... even if orcad dies before that

    # --- turn.completed ---------------------------------------------------------------------

    async def turn_completed(self, params: TurnCompletedParams) -> TurnCompletedResult:
        session = await self.sessions.require(params.session_id, params.epoch)
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
            source = await self.service.admissions.build_source(
                [(message.role, message.content) for message in params.messages]
            )
            if source is None:
                reason = "no_content"
        if reason is not None or source is None:
            log.info("turn.ineligible", session_id=session.session_id, reason=reason)
            return TurnCompletedResult(eligible=False, reason=reason, job_id=None, duplicate=False)
        return turn_result(await self.service.admissions.admit(session, params.turn_id, source))

    # --- jobs.* -----------------------------------------------------------------------------

    async def list_jobs(self, params: JobsListParams) -> JobsListResult:
        _check_project_id(params.project_id)  # a typo lists no jobs: say so
        await self.service.drop_vanished_everywhere()
        index = self.service.index
        damaged = index.damaged_jobs(params.project_id) if params.state is None else []
        return JobsListResult(
            jobs=self.service.job_summaries(params.project_id, params.state), damaged=damaged
        )

    async def claim(self, params: JobsClaimParams) -> JobsClaimResult:
        if params.worker.startswith(leases.BUILTIN_OWNER_PREFIX):
            raise InvalidParams(
                f"worker names starting with {leases.BUILTIN_OWNER_PREFIX!r} are reserved for "
                "the daemon's own workers",
                field="worker",
            )
        _check_project_id(params.project_id)
        self.service.external_claim_at = self.service.clock.monotonic()  # a worker is about
        lease_s = params.lease_s or self.config.extraction.lease_s
        found = await self.service.leases.claim_pass(
            params.worker, lease_s, project_id=params.project_id
        )
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
        lease_s = params.lease_s or self.config.extraction.lease_s
        job = await self.service.leases.renew(params.job_id, params.token, lease_s)
        assert job.lease is not None
        return JobsRenewResult(expires_at=job.lease.expires_at)

    async def publish(self, params: JobsPublishParams) -> JobsPublishResult:
        provenance = Provenance(
            provider=params.provider, model=params.model, prompt_version=EXTERNAL_PROMPT_VERSION
        )
        result = await self.service.leases.publish(
            params.job_id, params.token, params.output, provenance
        )
        return JobsPublishResult(
            state="committed",
            added=result.added,
            duplicates=result.duplicates,
            rejected=result.rejected,
        )

    async def fail(self, params: JobsFailParams) -> JobsFailResult:
        job = await self.service.leases.fail(params.job_id, params.token, params.error)
        return JobsFailResult(state=job.state, attempts=job.attempts)

    async def release(self, params: JobsReleaseParams) -> JobsReleaseResult:
        job = await self.service.leases.release(params.job_id, params.token)
        return JobsReleaseResult(state=job.state)

    async def retry(self, params: JobsRetryParams) -> JobsRetryResult:
        job = await self.service.leases.retry(params.job_id)
        return JobsRetryResult(state=job.state)

    # --- inspection -------------------------------------------------------------------------

    async def list_projects(self, params: ProjectsListParams) -> ProjectsListResult:
        return await inspection.list_projects(self.service)

    async def inspect_project(self, params: ProjectsInspectParams) -> ProjectsInspectResult:
        return await inspection.inspect_project(self.service, params)

    async def forget(self, params: LedgerForgetParams) -> LedgerForgetResult:
        return await inspection.forget(self.service, params, self.purge_copies, self.owe_purge)


def turn_result(admission: Admission) -> TurnCompletedResult:
    if admission.job_id is None:
        return TurnCompletedResult(
            eligible=False, reason=admission.reason, job_id=None, duplicate=False
        )
    return TurnCompletedResult(
        eligible=True, reason=None, job_id=admission.job_id, duplicate=admission.duplicate
    )


def install(
    host: Host, *, embed_facts: FactEmbedder | None = None, judge: FactJudge | None = None
) -> tuple[CaptureService, CaptureRoutes]:
    """Capture's routes and background run; `embed_facts` (recall's model) gives published
    facts their vectors in the index, and `judge` (the fact classifier over that model) reads
    what the offline extractor's rules do not keep."""
    service = CaptureService(
        projects_dir=host.paths.projects_dir,
        auto_memory=host.auto_memory_switch,
        config=host.config,
        clock=host.clock,
        record_error=host.record_error,
        embed_facts=embed_facts,
        judge=judge,
    )
    service.user_memory_file = host.paths.user_memory_file
    api = CaptureRoutes(service, host.sessions, host.config)
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
        host.router.add(method, handler)
    host.on_session_opened(service.on_session_opened)
    host.run_in_background(service.run)
    return service, api


def _check_project_id(project_id: str | None) -> None:
    """-32602 naming `project_id` unless it is absent or a project's id."""
    if project_id is not None and not is_project_id(project_id):
        raise InvalidParams(
            "project_id must be 64 lowercase hex digits (see projects.list)", field="project_id"
        )
