"""The job waits this daemon set (a lease's expiry, a retry's `not_before`), also timed on the
monotonic clock. Touched only from the event loop and the threads that hold a project's lock.

A job file keeps its waits as wall-clock times, which stay readable and hold across restarts.
A wall clock set back would stretch them, though: a lease granted for a minute just before the
clock went back a day would hold its job for a day and a minute (its worker may have died), and
a back-off as long; set forward, it would end them at once (the provider's answer to a running
attempt thrown away, and the attempt counted as failed). So the daemon notes, for every wait it
writes, when it ends on the monotonic clock, and honours that end, taken in wall-clock terms at
the time of the look: a wait lasts what it was set for, whatever the wall clock does meanwhile.
A wait found in a job file at a start (an external worker's lease, a back-off of an earlier
orcad) is noted the same way when it is read: what remained of it then, and never more than it
was set for, is what it lasts. A file changed behind this daemon's back holds another wait,
honoured as stored.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from orcad.capture.records import JobRecord
from orcad.capture.schedule import JobView
from orcad.clock import format_time, parse_time

_SAME_S = 0.001  # stored times have milliseconds: closer than that, the stored one is kept


class _Noted(msgspec.Struct, frozen=True):
    stored: str  # the wait as written in the job file: a later change of it is not this one
    ends: float  # Clock.monotonic() when it ends


class JobDeadlines:
    def __init__(self) -> None:
        self._leases: dict[str, _Noted] = {}  # job id -> its lease's expiry
        self._not_before: dict[str, _Noted] = {}  # job id -> its not_before

    def __len__(self) -> int:
        return len(self._leases) + len(self._not_before)

    def note(self, job: JobRecord, now: float, elapsed: float) -> None:
        """`job` as just written at wall time `now`, monotonic time `elapsed`."""
        lease = job.lease.expires_at if job.lease is not None else None
        _note(self._leases, job.job_id, lease, now, elapsed)
        _note(self._not_before, job.job_id, job.not_before, now, elapsed)

    def note_found(self, job: JobRecord, now: float, elapsed: float) -> None:
        """`job` as found in its file at wall time `now`, monotonic time `elapsed` (at a start,
        or restored): what remains of each of its waits, and never more than the wait was set
        for when the job was last written (`updated_at`, the time a claim, renew or failure
        wrote it), so that a wall clock set back while no orcad ran does not stretch it."""
        written = parse_time(job.updated_at)
        lease = job.lease.expires_at if job.lease is not None else None
        _note(self._leases, job.job_id, lease, now, elapsed, written=written)
        _note(self._not_before, job.job_id, job.not_before, now, elapsed, written=written)

    def honoured(self, job: JobRecord, now: float, elapsed: float) -> JobRecord:
        """`job` with its waits as they are honoured at `now` (wall) and `elapsed` (monotonic):
        a wait noted here ends at its monotonic end, in wall-clock terms now."""
        lease = job.lease
        if lease is not None:
            expires = _honoured(self._leases.get(job.job_id), lease.expires_at, now, elapsed)
            if expires != lease.expires_at:
                job = msgspec.structs.replace(
                    job, lease=msgspec.structs.replace(lease, expires_at=expires)
                )
        if job.not_before is not None:
            not_before = _honoured(self._not_before.get(job.job_id), job.not_before, now, elapsed)
            if not_before != job.not_before:
                job = msgspec.structs.replace(job, not_before=not_before)
        return job

    def honoured_view(self, view: JobView, now: float, elapsed: float) -> JobView:
        """A job's view with its waits as `honoured` takes them (for planning claims)."""
        lease = self._leases.get(view.job_id)
        not_before = self._not_before.get(view.job_id)
        if lease is None and not_before is None:
            return view
        lease_expires = _in_wall_terms(view.lease_expires, lease, now, elapsed)
        not_before_at = _in_wall_terms(view.not_before, not_before, now, elapsed)
        if lease_expires == view.lease_expires and not_before_at == view.not_before:
            return view
        return msgspec.structs.replace(view, lease_expires=lease_expires, not_before=not_before_at)

    def prune(self, indexed: Callable[[str], JobView | None]) -> None:
        """Forget the waits no job holds any more, by `indexed` (a job's view, None when it is
        gone): a job written again, or gone. A wait over is kept while its job still holds it:
        forgotten, it would be honoured as stored, and the wall clock set back after its end
        would make it run again (a lease that ran out held again, a back-off served twice)."""
        for noted, held in ((self._leases, _lease_of), (self._not_before, _not_before_of)):
            for job_id in [
                job_id
                for job_id, wait in noted.items()
                if (view := indexed(job_id)) is None or held(view) != parse_time(wait.stored)
            ]:
                del noted[job_id]


def _lease_of(view: JobView) -> float | None:
    return view.lease_expires


def _not_before_of(view: JobView) -> float | None:
    return view.not_before


def _note(
    noted: dict[str, _Noted],
    job_id: str,
    stored: str | None,
    now: float,
    elapsed: float,
    *,
    written: float | None = None,
) -> None:
    if stored is None:
        noted.pop(job_id, None)
    elif (held := noted.get(job_id)) is None or held.stored != stored:
        remaining = parse_time(stored) - now
        if written is not None:  # set at `written` for this long: no more is left of it
            remaining = min(remaining, parse_time(stored) - written)
        noted[job_id] = _Noted(stored, elapsed + max(0.0, remaining))


def _honoured(noted: _Noted | None, stored: str, now: float, elapsed: float) -> str:
    if noted is None or noted.stored != stored:
        return stored
    ends = now + max(0.0, noted.ends - elapsed)  # the monotonic end, on the wall clock now
    return format_time(ends) if abs(ends - parse_time(stored)) >= _SAME_S else stored


def _in_wall_terms(
    stored: float | None, noted: _Noted | None, now: float, elapsed: float
) -> float | None:
    if stored is None or noted is None or parse_time(noted.stored) != stored:
        return stored
    return now + max(0.0, noted.ends - elapsed)
