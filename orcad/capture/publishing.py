"""Publishing one job's extracted facts: the blocking step `jobs.publish` and the built-in
workers run in a thread holding the project lock.

Order (each step durable before the next): fencing check on the job as stored, at the clock
reading taken under the lock; ledger merge and atomic replace (a job merged before is a no-op,
so a publish repeated after a crash adds nothing); the job committed; committed jobs beyond the
newest 128 pruned; then the projections, whose failure never undoes the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import structlog

from orcad.capture import leases, schedule
from orcad.capture.jobstore import delete_jobs, read_job, write_job
from orcad.capture.ledger import Provenance as LedgerProvenance
from orcad.capture.ledger import merge_job_candidates, read_ledger, write_ledger
from orcad.capture.projections import IndexVectors, publish_projections
from orcad.capture.records import JobRecord, Provenance, PublishOutcome
from orcad.capture.schedule import JobView, view_of
from orcad.clock import format_time, stamp_after
from orcad.errors import NotFound
from orcad.failpoints import failpoint
from orcad.secrets import redact, secret_kinds
from protocol.types import ExtractedFact

log = structlog.get_logger("orcad.capture")


class PublishResult(msgspec.Struct, frozen=True, kw_only=True):
    job: JobRecord
    added: int
    duplicates: int
    rejected: int


class Published(msgspec.Struct, frozen=True, kw_only=True):
    result: PublishResult
    pruned: list[str]  # job ids whose files were removed (retention)
    problems: list[str]  # projection failures to report; the commit stands


def publish_job(
    directory: Path,
    *,
    job_id: str,
    token: int,
    facts: Sequence[ExtractedFact],
    provenance: Provenance,
    now: float,
    project_views: Sequence[JobView],
    vectors: IndexVectors | None = None,
    honoured: Callable[[JobRecord], JobRecord] | None = None,
) -> Published:
    """Commit `facts` for the job if `token` still holds its lease (LeaseLost otherwise).

    Blocking; call with the project lock held. `project_views` are the project's other jobs as
    indexed, for retention; `vectors` are the facts' embeddings, for the index; `honoured`
    gives the job with its lease as the daemon honours it now (JobDeadlines.honoured).
    """
    job = read_job(directory, job_id)
    if job is None:
        raise NotFound(f"job {job_id} no longer exists")
    if honoured is not None:
        job = honoured(job)
    leases.check_holder(job, token, now)  # fencing, where the write happens
    # a command line (the command provider's model) or a worker's own name can carry a key
    provenance = Provenance(
        provider=redact(provenance.provider),
        model=redact(provenance.model),
        prompt_version=redact(provenance.prompt_version),
    )
    refused = [kinds for kinds in (secret_kinds(fact.fact) for fact in facts) if kinds]
    if refused:  # the merge drops them; say which kinds, never the values
        log.info("ledger.secrets_refused", job_id=job_id, facts=len(refused), kinds=refused)
    before = read_ledger(directory)
    ledger, merged = merge_job_candidates(
        before,
        job_id,
        facts,
        LedgerProvenance(
            session_id=job.session_id,
            turn_id=job.turn_id,
            provider=provenance.provider,
            model=provenance.model,
            prompt_version=provenance.prompt_version,
        ),
        now,
        forgotten=job.forgotten_digests(),
    )
    if ledger is not before:
        write_ledger(directory, ledger)
    failpoint("publish.after_ledger_commit")
    outcome = PublishOutcome(
        added=merged.added, duplicates=merged.duplicates, rejected=merged.rejected
    )
    committed = leases.commit(job, token=token, now=now, provenance=provenance, outcome=outcome)
    # retention keeps the newest commits by their time: this one is the newest, even when the
    # wall clock was set back since the project's last commit
    latest = max(
        (v.committed_at for v in project_views if v.committed_at is not None), default=None
    )
    if (stamp := stamp_after(latest, now)) != now:
        at = format_time(stamp)
        committed = msgspec.structs.replace(committed, committed_at=at, updated_at=at)
    write_job(directory, committed)
    failpoint("publish.after_job_commit")
    others = [view for view in project_views if view.job_id != job_id]
    pruned = schedule.committed_jobs_to_prune([*others, view_of(committed)])
    delete_jobs(directory, pruned)
    problems = publish_projections(directory, ledger, vectors)
    result = PublishResult(
        job=committed, added=merged.added, duplicates=merged.duplicates, rejected=merged.rejected
    )
    return Published(result=result, pruned=pruned, problems=problems)
