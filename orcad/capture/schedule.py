"""Scheduling for extraction workers: decide, then act. Pure module.

`plan(now, state)` looks at every known job and says which to try to claim, oldest first, and
when to look again if nothing is claimable now. The async worker carries the plan out; the job
store re-checks each claim under the project lock, so a plan made from a slightly old view is
harmless (the claim is just refused). `BuiltinLeases` keeps what the daemon's own workers hold
and `may_start` says whether they may start the next job: one an orcad died running runs alone.
`after_attempt` maps how a provider call ended to what the worker does with the lease.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

import msgspec

from orcad import limits
from orcad.capture.leases import honoured
from orcad.capture.records import JobRecord
from orcad.capture.states import ENDED_STATES, JobState
from orcad.clock import parse_time


class JobView(msgspec.Struct, frozen=True, kw_only=True):
    """What scheduling needs to know about one job (kept in memory for every job)."""

    job_id: str
    project_id: str
    session_id: str
    state: JobState
    created_at: float
    not_before: float | None = None
    lease_expires: float | None = None
    committed_at: float | None = None
    ended_at: float | None = None  # exhausted or cancelled: when (its last change)
    recoveries: int = 0  # orcads that died in a row holding its lease (runs_alone)


def view_of(job: JobRecord) -> JobView:
    return JobView(
        job_id=job.job_id,
        project_id=job.project_id,
        session_id=job.session_id,
        state=job.state,
        created_at=job.created_time(),
        not_before=job.not_before_time(),
        lease_expires=job.lease_expires(),
        committed_at=None if job.committed_at is None else parse_time(job.committed_at),
        ended_at=parse_time(job.updated_at) if job.state in ENDED_STATES else None,
        recoveries=job.recovery_count(),
    )


class PoolState(msgspec.Struct, frozen=True, kw_only=True):
    jobs: tuple[JobView, ...]
    running: frozenset[str] = frozenset()  # jobs this daemon's workers are working on
    skipped_projects: frozenset[str] = frozenset()  # auto memory off when last checked
    retry_at: float | None = None  # after a transient store failure of the whole pool
    held_until: dict[str, float] = {}  # project -> no claim before (its lock or store failed)


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    claim: tuple[JobView, ...]  # try these, in this order, until one claim succeeds
    wake_at: float | None  # look again then (None: only when something changes)


def claimable_at(job: JobView, now: float) -> float | None:
    """The earliest time the job can be claimed; None when it never can (terminal)."""
    if job.state == "pending":
        return honoured(job.not_before, now) if job.not_before is not None else float("-inf")
    if job.state == "leased":
        return honoured(job.lease_expires, now) if job.lease_expires is not None else float("-inf")
    return None


def plan(now: float, state: PoolState) -> Plan:
    if state.retry_at is not None and now < state.retry_at:
        return Plan(claim=(), wake_at=state.retry_at)  # rescheduled after a transient failure
    ready: list[JobView] = []
    wake_at: float | None = None
    for job in state.jobs:
        if job.job_id in state.running or job.project_id in state.skipped_projects:
            continue
        at = claimable_at(job, now)
        if at is None:
            continue
        at = max(at, state.held_until.get(job.project_id, at))  # only that project waits
        if at <= now:
            ready.append(job)
        elif wake_at is None or at < wake_at:
            wake_at = at
    ready.sort(key=lambda job: (job.created_at, job.job_id))
    return Plan(claim=tuple(ready), wake_at=wake_at)


def runs_alone(job: JobView) -> bool:
    """A job an orcad died running (its recoveries counted) runs with no other built-in lease
    held beside it: if its run is what kills orcad, no innocent job dies with it and has its
    own count raised, to end exhausted with it after RECOVERIES_MAX deaths."""
    return job.recoveries > 0


def may_start(job: JobView, alone_held: Collection[bool]) -> bool:
    """Whether the built-in workers may claim `job`, the next in order, while they hold leases
    of jobs that run alone or not (`alone_held`): none beside one that runs alone, and one that
    runs alone only once nothing else is held. When it may not, nothing behind it starts
    either (the workers wait for the leases held to end), so a job that runs alone is not
    starved by younger ones claimed before it."""
    if any(alone_held):
        return False
    return not alone_held or not runs_alone(job)


class BuiltinLeases:
    """The jobs this daemon's built-in workers hold or are claiming right now (job id -> runs
    alone), for `may_start`. Changed on the event loop only: a check and the `hold` that
    follows it run with no checkpoint between, so two workers cannot both pass it."""

    def __init__(self) -> None:
        self._held: dict[str, bool] = {}
        self._waited = False  # a worker was told to wait since a lease was last let go

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._held

    def ids(self) -> frozenset[str]:
        return frozenset(self._held)

    def may_start(self, job: JobView) -> bool:
        allowed = may_start(job, list(self._held.values()))
        self._waited = self._waited or not allowed
        return allowed

    def hold(self, job_id: str, *, alone: bool) -> None:
        self._held[job_id] = alone

    def let_go(self, job_id: str) -> bool:
        """Whether a worker waits for a lease held to end (the caller wakes the workers)."""
        self._held.pop(job_id, None)
        waited, self._waited = self._waited, False
        return waited


def lease_runs(job: JobView | None, now: float) -> bool:
    """Whether the job's lease, as last granted, still runs: a publish kept from the project
    lock is tried again until then (only an unexpired lease may publish: spec, Capture and
    Recovery)."""
    return (
        job is not None
        and job.state == "leased"
        and job.lease_expires is not None
        and now < job.lease_expires
    )


def reschedule_at(now: float, reschedule_s: float = limits.DEFAULT_RESCHEDULE_S) -> float:
    """When a worker tries again after a transient job-store or lock failure."""
    return now + reschedule_s


def retry_backoff(attempts: int, base_s: float, max_s: float, jitter: float) -> float:
    """The wait before trying a job again after its `attempts`-th failed attempt: `base_s`
    doubled per earlier failure, capped at `max_s`, scaled by 0.5 to 1 (`jitter` in [0, 1)) so
    that jobs that failed together do not all retry at the same moment."""
    exponential = base_s * 2.0 ** min(max(attempts - 1, 0), 62)
    return min(exponential, max_s) * (0.5 + 0.5 * min(max(jitter, 0.0), 1.0))


def renew_interval(lease_s: float) -> float:
    """A held lease is renewed this often, by wall clock, whatever the provider is doing."""
    return lease_s / limits.LEASE_RENEW_FRACTION


AttemptEnd = Literal["output", "provider_error", "timed_out", "cancelled", "crashed", "lease_lost"]
LeaseAction = Literal["publish", "fail", "release", "drop"]


def after_attempt(end: AttemptEnd) -> LeaseAction:
    """What a worker does with its lease once the provider call is over.

    Output is published (a malformed one becomes a failed attempt there); errors, timeouts and
    unexpected crashes are failed attempts; cancellation (shutdown) releases without using an
    attempt; a lost lease is dropped: the job is someone else's now.
    """
    return {
        "output": "publish",
        "provider_error": "fail",
        "timed_out": "fail",
        "crashed": "fail",
        "cancelled": "release",
        "lease_lost": "drop",
    }[end]  # type: ignore[return-value]


def ended_jobs_to_prune(jobs: list[JobView], keep: int = limits.ENDED_JOBS_KEPT) -> list[str]:
    """Exhausted and cancelled jobs beyond the newest `keep` to end, oldest first."""
    ended = sorted(
        (job for job in jobs if job.state in ENDED_STATES),
        key=lambda job: (job.ended_at or job.created_at, job.job_id),
    )
    excess = len(ended) - keep
    return [job.job_id for job in ended[:excess]] if excess > 0 else []


def committed_jobs_to_prune(
    jobs: list[JobView], keep: int = limits.COMMITTED_JOBS_KEPT
) -> list[str]:
    """Committed jobs beyond the newest `keep` (spec: Storage), oldest first."""
    committed = sorted(
        (job for job in jobs if job.state == "committed"),
        key=lambda job: (job.committed_at or job.created_at, job.job_id),
    )
    excess = len(committed) - keep
    return [job.job_id for job in committed[:excess]] if excess > 0 else []
