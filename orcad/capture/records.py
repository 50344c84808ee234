"""The job file's content: one extraction job, as stored in `jobs/<job-id>.json`.

Times are RFC 3339 UTC strings (readable with `cat`); `fence` is the last fencing token ever
issued for the job, so the next claim's token is strictly greater, across daemon restarts too.
Pure module.
"""

from __future__ import annotations

import re

import msgspec

from orcad.capture.states import JobState
from orcad.clock import format_time, parse_time
from protocol.types import JobSummary

JOB_FILE_FORMAT = "orcad.job/1"


class LeaseRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    owner: str  # the worker name given to jobs.claim, or orcad:<instance>:w<n> for built-ins
    token: int  # fencing token: must match for renew, publish, fail and release
    expires_at: str
    claimed_at: str


class AttemptError(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    at: str
    attempt: int
    worker: str
    message: str  # redacted and shortened; never turn content


class Provenance(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    provider: str
    model: str
    prompt_version: str


class PublishOutcome(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    added: int
    duplicates: int
    rejected: int


class JobRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: str = JOB_FILE_FORMAT
    job_id: str
    project_id: str
    session_id: str
    turn_id: str
    state: JobState
    created_at: str
    updated_at: str
    source_digest: str  # sha256 hex of `source` as admitted (UTF-8): the idempotency key's part
    # (a forget may cut a fact's text out of `source` later; the digest stays)
    source_bytes: int
    source_truncated: bool
    source: str  # the exact bounded, redacted input every attempt is given
    attempts: int = 0  # failed attempts so far (a release uses none)
    fence: int = 0
    lease: LeaseRecord | None = None
    not_before: str | None = None  # no claim before this (a provider's Retry-After)
    errors: list[AttemptError] = []  # newest last, the last few only
    provenance: Provenance | None = None  # of the publish that committed the job
    outcome: PublishOutcome | None = None
    committed_at: str | None = None
    # facts forgotten (ledger.forget) while the job waited, as ledger.forgotten_digest: its
    # publish never adds them back (unless keep_evidence, ledger.forget also cut their text out
    # of `source`). Absent until a forget tells the job, so that a job file stays readable by an
    # older orcad, and cleared when the job commits.
    forgotten: list[str] | msgspec.UnsetType = msgspec.UNSET
    # how often a daemon died holding the job's lease (leases.recover); absent until it first
    # happens, for the same reason, and cleared by jobs.retry
    recoveries: int | msgspec.UnsetType = msgspec.UNSET

    def forgotten_digests(self) -> list[str]:
        return [] if isinstance(self.forgotten, msgspec.UnsetType) else self.forgotten

    def recovery_count(self) -> int:
        return 0 if isinstance(self.recoveries, msgspec.UnsetType) else self.recoveries

    def lease_expires(self) -> float | None:
        return parse_time(self.lease.expires_at) if self.lease is not None else None

    def not_before_time(self) -> float | None:
        return parse_time(self.not_before) if self.not_before is not None else None

    def created_time(self) -> float:
        return parse_time(self.created_at)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(JobRecord)


def encode_job(job: JobRecord) -> bytes:
    return _encoder.encode(job) + b"\n"


class NewerJobFile(msgspec.DecodeError):
    """A job file of a later format than this orcad's: a newer version wrote it (this one was
    run again after it). It is no job here, but not a damaged file either."""

    def __init__(self, written_format: str) -> None:
        super().__init__(f"format {written_format!r} is newer than {JOB_FILE_FORMAT!r}")
        self.written_format = written_format


def newer_format(data: bytes, current: str) -> str | None:
    """The format named by `data`'s "format" member when it is a later version of `current`'s
    family ("orcad.job/2" for "orcad.job/1"): a newer orcad wrote the file. Read only once the
    file is not one of this format (a later one may add or change fields); else None."""
    try:
        fields = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        # (RecursionError: nested deeper than msgspec follows, which no version writes; the
        # check field by field then names the damage)
        return None
    written = fields.get("format") if isinstance(fields, dict) else None
    if not isinstance(written, str):
        return None
    family, _, version = current.rpartition("/")
    number = re.fullmatch(re.escape(family) + r"/([1-9][0-9]{0,8})", written)
    if number is None or int(number.group(1)) <= int(version):
        return None
    return written


def decode_job(data: bytes) -> JobRecord:
    """The job in a job file; msgspec.DecodeError (a ValueError) when it is not one, and
    NewerJobFile, one of those, when a newer orcad wrote it."""
    try:
        job = _decoder.decode(data)
    except msgspec.DecodeError:
        written = newer_format(data, JOB_FILE_FORMAT)
        if written is not None:
            raise NewerJobFile(written) from None
        raise
    if job.format != JOB_FILE_FORMAT:
        written = newer_format(data, JOB_FILE_FORMAT)
        if written is not None:
            raise NewerJobFile(written)
        raise msgspec.DecodeError(f"unknown job file format {job.format[:40]!r}")
    for name, value in _times(job):
        try:
            parse_time(value)
        except ValueError as exc:  # read later by the scheduler, where it would stop orcad
            raise msgspec.DecodeError(f"{name} is not a time: {value[:40]!r}") from exc
    return job


def _times(job: JobRecord) -> list[tuple[str, str]]:
    """The job's time fields that are set, by name."""
    times = [
        ("created_at", job.created_at),
        ("updated_at", job.updated_at),
        ("not_before", job.not_before),
        ("committed_at", job.committed_at),
    ]
    if job.lease is not None:
        times += [("lease.expires_at", job.lease.expires_at)]
        times += [("lease.claimed_at", job.lease.claimed_at)]
    return [(name, value) for name, value in times if value is not None]


def new_job(
    *,
    job_id: str,
    project_id: str,
    session_id: str,
    turn_id: str,
    source: str,
    source_digest: str,
    source_bytes: int,
    source_truncated: bool,
    now: float,
) -> JobRecord:
    stamp = format_time(now)
    return JobRecord(
        job_id=job_id,
        project_id=project_id,
        session_id=session_id,
        turn_id=turn_id,
        state="pending",
        created_at=stamp,
        updated_at=stamp,
        source_digest=source_digest,
        source_bytes=source_bytes,
        source_truncated=source_truncated,
        source=source,
    )


def summary_of(job: JobRecord) -> JobSummary:
    return JobSummary(
        job_id=job.job_id,
        project_id=job.project_id,
        session_id=job.session_id,
        turn_id=job.turn_id,
        state=job.state,
        attempts=job.attempts,
        created_at=job.created_at,
        updated_at=job.updated_at,
        last_error=job.errors[-1].message if job.errors else None,
        not_before=job.not_before if job.state == "pending" else None,
    )
