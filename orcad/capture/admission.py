"""Admission (turn.completed): a turn's source becomes a durable job, then an index entry.

The job file is created and fsynced in a worker thread; the job is put in the index on the
event loop, under the project's in-process lock, before `admit` returns, so that whatever the
client sends after its answer (on any connection) sees the job. Only this process admits jobs
for its index, and a job file is created without ever replacing one, so admission needs no
cross-process lock (every later change takes it).
"""

from __future__ import annotations

import msgspec
import structlog
import trio

from orcad import limits
from orcad.capture.index import JobIndex
from orcad.capture.jobstore import (
    create_job,
    make_jobs_directory,
    prepare_job_file,
    read_forgotten_jobs,
    read_job,
)
from orcad.capture.project_access import ProjectAccess
from orcad.capture.projects import project_file_missing
from orcad.capture.records import JobRecord, new_job
from orcad.capture.source import BuiltSource, build_source, derive_job_id
from orcad.clock import Clock
from orcad.failpoints import failpoint
from orcad.session_snapshot import Session
from orcad.threads import run_sync_now

log = structlog.get_logger("orcad.capture")

ADMISSION_THREADS = 8  # job files written at once (one per project); more only queue on the disk
INLINE_SOURCE_CHARS = 8 * 1024  # redacting this much inline costs less than a thread hop (~0.15 ms)
# and so many messages at most: each costs its own steps whatever its length, and a turn of a
# quarter of a million empty ones held the event loop for about 50 ms
INLINE_SOURCE_MESSAGES = 64


class Admission(msgspec.Struct, frozen=True, kw_only=True):
    """What turn.completed answers once the source is built (None job_id: not admitted)."""

    job_id: str | None
    duplicate: bool = False
    reason: str | None = None


async def acquire_soon(lock: trio.Lock) -> None:
    """Take `lock`, without the scheduling point `Lock.acquire` adds when it is free: the
    caller's next await (a thread hop) is one, and each costs ~10 us on a turn's answer."""
    try:
        lock.acquire_nowait()
    except trio.WouldBlock:
        await lock.acquire()


class Admissions:
    def __init__(self, *, projects: ProjectAccess, index: JobIndex, clock: Clock) -> None:
        self._projects = projects
        self._index = index
        self._clock = clock
        self._threads = trio.CapacityLimiter(ADMISSION_THREADS)

    async def build_source(self, messages: list[tuple[str, str]]) -> BuiltSource | None:
        if (
            len(messages) <= INLINE_SOURCE_MESSAGES
            and sum(len(content) for _, content in messages) <= INLINE_SOURCE_CHARS
        ):
            return build_source(messages)
        return await trio.to_thread.run_sync(build_source, messages)

    async def admit(self, session: Session, turn_id: str, source: BuiltSource) -> Admission:
        """A durable job for this turn, or the existing one (same session, turn and source
        digest), or `backlog_full` when the project already has 64 active jobs. The job is in
        the index when this returns."""
        project_id = session.project_id
        job_id = derive_job_id(session.session_id, turn_id, source.digest)
        elsewhere = self._index.view(job_id)
        if elsewhere is not None and elsewhere.project_id != project_id:
            # the session id was opened in another project before and reported this turn there:
            # it is that job (a job id names one job), not a second file the index cannot hold
            log.info("job.duplicate", job_id=job_id, state=elsewhere.state)
            return Admission(job_id=job_id, duplicate=True)
        record = new_job(
            job_id=job_id,
            project_id=project_id,
            session_id=session.session_id,
            turn_id=turn_id,
            source=source.text,
            source_digest=source.digest,
            source_bytes=source.size,
            source_truncated=source.truncated,
            now=self._clock.now(),
        )
        await self._projects.ensure_project(session)
        directory = self._projects.project_dir(project_id)
        new_file = prepare_job_file(directory, record)

        unnamed: list[bool] = []  # project.json is missing (the directory was removed, say)
        forgotten: list[bool] = []  # the job was made before, and deleted by a forget

        def create() -> tuple[JobRecord | None, bool]:
            if known:  # every job file is in the index (loaded at start, added on creation)
                existing = read_job(directory, job_id)
                if existing is not None:
                    return existing, True
            if job_id in read_forgotten_jobs(directory):  # a forget deleted it with its fact
                forgotten.append(True)
                return None, True
            if active >= limits.ACTIVE_JOBS_PER_PROJECT:
                return None, False
            unnamed.append(project_file_missing(directory))
            make_jobs_directory(directory)  # removed while orcad runs: the turn is still stored
            if not create_job(new_file):  # created meanwhile by another process
                return read_job(directory, job_id), True
            failpoint("jobs.after_job_write")
            return record, False

        lock = self._projects.lock(project_id)
        await acquire_soon(lock)
        try:
            active = self._index.active_jobs(project_id)
            known = job_id in self._index
            job, duplicate = await run_sync_now(create, self._threads)
            if job is not None and (not duplicate or not known):
                self._index.put(job)  # before the next admission counts
        finally:
            lock.release()
        if any(unnamed):  # what names the directory's project; gone with the directory, or
            # never written when something else (a remember) made the directory again
            await self._projects.restore_project_file(session)
        if forgotten:
            log.info("job.duplicate", job_id=job_id, state="forgotten")
            return Admission(job_id=job_id, duplicate=True)
        if job is None:
            log.info("job.refused", reason="backlog_full", project_id=project_id, active=active)
            return Admission(job_id=None, reason="backlog_full")
        if duplicate:
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
        return Admission(job_id=job.job_id, duplicate=duplicate)
