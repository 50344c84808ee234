"""Lease rules: claim, take-over, renew, publish, fail, release and restart recovery.

Each rule takes a job record and the current time and returns the new record (or raises); the
job store applies it under the project lock and writes the result durably. Pure module.

- A claim issues token `fence + 1`, so tokens strictly increase per job (the fence is stored).
- Pending jobs are claimable once `not_before` (a provider's Retry-After) has passed; leased
  jobs once their lease has expired. A time further ahead than orcad ever sets one (a hand-edited
  job file) counts as passed, so it cannot hold a job for good. Taking over an expired lease
  counts the holder's attempt as failed ("lease expired"), since it did not finish in time.
- Renew, publish, fail and release need the current token and an unexpired lease; anything else
  raises LeaseLost and changes nothing.
- Failed attempts are retried up to `max_retries` times, then the job is exhausted (spec:
  Capture and Recovery); each retry waits a back-off (schedule.retry_backoff) or a provider's
  Retry-After, whichever is longer. A release is a cancellation: no attempt is used.
- An exhausted job can be retried on request: pending again with its attempts reset.
- Leases of a previous daemon's built-in workers are returned to pending at start without using
  an attempt: that daemon is gone (the single-instance lock is ours), and a daemon killed or a
  machine switched off says nothing about the job. Only a job that limits.RECOVERIES_MAX daemons
  in a row died holding (no attempt of it failed, expired, was released or committed between)
  ends exhausted, as one failed attempt saying so: a job whose run kills orcad itself (out of
  memory, a crash in native code) must not take it down at every start for good. A committed
  job keeps no count, so that an orcad older than the count still reads its file.
"""

from __future__ import annotations

import msgspec

from orcad.capture.records import (
    AttemptError,
    JobRecord,
    LeaseRecord,
    Provenance,
    PublishOutcome,
)
from orcad.capture.states import JobEvent, next_state
from orcad.clock import format_time
from orcad.errors import LeaseLost
from orcad.limits import JOB_WAIT_MAX_S, RECOVERIES_MAX, RETRY_AFTER_MAX_S
from orcad.secrets import ELLIPSIS, redact, shorten_redacted

JOB_ERRORS_KEPT = 8  # newest attempt errors kept in a job file
ERROR_MESSAGE_MAX_CHARS = 500
ERROR_INPUT_MAX_CHARS = 16 * 1024  # of a longer error only this start is redacted and kept
BUILTIN_OWNER_PREFIX = "orcad:"  # built-in workers are orcad:<instance>:w<n>


class NotClaimable(ValueError):
    """The job is not claimable now (another worker got it first, or it is finished)."""


def builtin_owner(instance: str, worker_number: int) -> str:
    return f"{BUILTIN_OWNER_PREFIX}{instance}:w{worker_number}"


def honoured(at: float, now: float) -> float:
    """A lease's expiry or a job's `not_before` as it is honoured at `now`: one further ahead
    than orcad ever sets (a job file edited by hand) is `now`, already passed."""
    return now if at - now > JOB_WAIT_MAX_S else at


def is_claimable(job: JobRecord, now: float) -> bool:
    if job.state == "pending":
        not_before = job.not_before_time()
        return not_before is None or now >= honoured(not_before, now)
    if job.state == "leased":
        expires = job.lease_expires()
        return expires is None or now >= honoured(expires, now)
    return False


def claim(job: JobRecord, *, now: float, owner: str, lease_s: float, max_retries: int) -> JobRecord:
    """The job leased to `owner` with a new token, or exhausted when taking over an expired
    lease used its last attempt. NotClaimable when it cannot be claimed now."""
    if not is_claimable(job, now):
        raise NotClaimable(f"job {job.job_id} is {job.state} and not claimable")
    attempts = job.attempts
    errors = job.errors
    if job.state == "leased":
        attempts += 1
        previous = job.lease.owner if job.lease is not None else "?"
        errors = _with_error(
            errors, now, attempts, previous, "lease expired before the attempt finished"
        )
        if attempts > max_retries:
            return msgspec.structs.replace(
                job,
                state=next_state(job.state, "expire_final"),
                attempts=attempts,
                errors=errors,
                lease=None,
                recoveries=msgspec.UNSET,  # an attempt failed with orcad alive
                updated_at=format_time(now),
            )
        event: JobEvent = "take_over"
    else:
        event = "claim"
    token = job.fence + 1
    stamp = format_time(now)
    return msgspec.structs.replace(
        job,
        state=next_state(job.state, event),
        attempts=attempts,
        errors=errors,
        # an expired lease taken over is an attempt that failed with orcad alive: the count of
        # orcads dying in a row starts again, as after `fail`
        recoveries=job.recoveries if event == "claim" else msgspec.UNSET,
        fence=token,
        lease=LeaseRecord(
            owner=owner, token=token, expires_at=format_time(now + lease_s), claimed_at=stamp
        ),
        not_before=None,
        updated_at=stamp,
    )


# What a worker whose call found the job unleased should do: only a pending job is claimed.
_NO_LEASE_ADVICE: dict[str, str] = {
    "pending": "claim it again",
    "leased": "claim it again",  # a leased job always holds a lease; kept for completeness
    "committed": "its output is already published; drop this attempt",
    "exhausted": "its attempts are used up (jobs.retry makes it pending again); drop this attempt",
    "cancelled": "it was cancelled; drop this attempt",
}


def check_holder(job: JobRecord, token: int, now: float) -> LeaseRecord:
    """The job's lease if `token` holds it unexpired at `now`; LeaseLost otherwise."""
    lease = job.lease
    if job.state != "leased" or lease is None:
        raise LeaseLost(
            f"job {job.job_id} is {job.state} and holds no lease; {_NO_LEASE_ADVICE[job.state]}",
            job_id=job.job_id,
            state=job.state,
        )
    if lease.token != token:
        raise LeaseLost(
            f"token {token} is not the current token of job {job.job_id}; another worker "
            "took it over; drop this attempt",
            job_id=job.job_id,
        )
    expires = job.lease_expires()
    if expires is not None and now >= expires:
        raise LeaseLost(
            f"the lease of job {job.job_id} expired at {lease.expires_at}; drop this attempt",
            job_id=job.job_id,
        )
    return lease


def renew(job: JobRecord, *, token: int, now: float, lease_s: float) -> JobRecord:
    lease = check_holder(job, token, now)
    return msgspec.structs.replace(
        job,
        state=next_state(job.state, "renew"),
        lease=msgspec.structs.replace(lease, expires_at=format_time(now + lease_s)),
        updated_at=format_time(now),
    )


def release(job: JobRecord, *, token: int, now: float) -> JobRecord:
    check_holder(job, token, now)
    return msgspec.structs.replace(
        job,
        state=next_state(job.state, "release"),
        lease=None,
        recoveries=msgspec.UNSET,  # an attempt ended with orcad alive: the count starts again
        updated_at=format_time(now),
    )


def fail(
    job: JobRecord,
    *,
    token: int,
    now: float,
    error: str,
    max_retries: int,
    retry_after: float | None = None,
    backoff_s: float = 0.0,
) -> JobRecord:
    """One failed attempt: pending again, not before the longer of `backoff_s` and the
    provider's `retry_after`, or exhausted."""
    lease = check_holder(job, token, now)
    attempts = job.attempts + 1
    errors = _with_error(job.errors, now, attempts, lease.owner, error)
    event: JobEvent = "fail_final" if attempts > max_retries else "fail"
    not_before = None
    delay = max(backoff_s, min(retry_after or 0.0, RETRY_AFTER_MAX_S))
    if event == "fail" and delay > 0:
        not_before = format_time(now + delay)
    return msgspec.structs.replace(
        job,
        state=next_state(job.state, event),
        attempts=attempts,
        errors=errors,
        lease=None,
        recoveries=msgspec.UNSET,  # an attempt ended with orcad alive: the count starts again
        not_before=not_before,
        updated_at=format_time(now),
    )


def commit(
    job: JobRecord,
    *,
    token: int,
    now: float,
    provenance: Provenance,
    outcome: PublishOutcome,
) -> JobRecord:
    check_holder(job, token, now)
    stamp = format_time(now)
    return msgspec.structs.replace(
        job,
        state=next_state(job.state, "publish"),
        lease=None,
        provenance=provenance,
        outcome=outcome,
        committed_at=stamp,
        updated_at=stamp,
        forgotten=msgspec.UNSET,  # applied by this publish; nothing is left to tell
        recoveries=msgspec.UNSET,  # ended with orcad alive; an older orcad reads the file
    )


class NotRetryable(ValueError):
    """Only an exhausted job can be retried."""


def retry(job: JobRecord, *, now: float) -> JobRecord:
    """An exhausted job pending again with no attempts used; its errors stay as history."""
    if job.state != "exhausted":
        raise NotRetryable(f"job {job.job_id} is {job.state}; only an exhausted job is retried")
    return msgspec.structs.replace(
        job,
        state=next_state(job.state, "retry"),
        attempts=0,
        recoveries=msgspec.UNSET,
        lease=None,
        not_before=None,
        updated_at=format_time(now),
    )


def held_by_previous_daemon(job: JobRecord, instance: str) -> bool:
    """Leased by a built-in worker of a daemon that is no longer running."""
    if job.state != "leased" or job.lease is None:
        return False
    owner = job.lease.owner
    return owner.startswith(BUILTIN_OWNER_PREFIX) and not owner.startswith(
        f"{BUILTIN_OWNER_PREFIX}{instance}:"
    )


def recover(job: JobRecord, *, now: float) -> JobRecord:
    """Back to pending without using an attempt, the holder having died with its daemon; or
    exhausted when RECOVERIES_MAX daemons have died holding it."""
    recoveries = job.recovery_count() + 1
    if recoveries < RECOVERIES_MAX:
        return msgspec.structs.replace(
            job,
            state=next_state(job.state, "recover"),
            recoveries=recoveries,
            lease=None,
            updated_at=format_time(now),
        )
    attempts = job.attempts + 1
    owner = job.lease.owner if job.lease is not None else "?"
    message = f"orcad stopped {recoveries} times while running this job"
    return msgspec.structs.replace(
        job,
        state=next_state(job.state, "recover_final"),
        attempts=attempts,
        errors=_with_error(job.errors, now, attempts, owner, message),
        recoveries=recoveries,
        lease=None,
        updated_at=format_time(now),
    )


def clean_error_message(message: str) -> str:
    """Error text safe to store: redacted, one line, shortened.

    Only the start of a long message is read (jobs.fail takes any length, and this runs under
    the project lock): redaction costs time per character, and only the start is kept. The
    word that cut goes through is dropped, since half a secret may not be recognised.
    """
    cut = len(message) > ERROR_INPUT_MAX_CHARS
    if cut:
        head = message[:ERROR_INPUT_MAX_CHARS]
        if not head[-1].isspace() and not message[ERROR_INPUT_MAX_CHARS].isspace():
            words = head.rsplit(None, 1)
            head = words[0] if len(words) == 2 else ""
        message = head
    flat = " ".join(redact(message).split())
    if cut:
        flat = f"{flat} {ELLIPSIS}" if flat else ELLIPSIS
    return shorten_redacted(flat, ERROR_MESSAGE_MAX_CHARS) or "unspecified error"


def _with_error(
    errors: list[AttemptError], now: float, attempt: int, worker: str, message: str
) -> list[AttemptError]:
    entry = AttemptError(
        at=format_time(now), attempt=attempt, worker=worker, message=clean_error_message(message)
    )
    return [*errors, entry][-JOB_ERRORS_KEPT:]
