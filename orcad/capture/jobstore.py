"""Job files: `<project dir>/jobs/<job-id>.json`, one JSON object each (see records.py).

Every write replaces the whole file atomically and durably (temp file, fsync, rename, fsync of
the directory), so a reader or a restarted daemon sees either the old job or the new one. The
caller holds the project lock around read-modify-write. Blocking functions: call from a thread.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import NamedTuple

import msgspec

from orcad import limits
from orcad.capture.projects import (
    FORGOTTEN_JOBS_FILE,
    JOBS_DIR,
    directories_error,
    ensure_directories,
    list_project_ids,
    names_no_directory_in_place,
)
from orcad.capture.records import JOB_FILE_FORMAT, JobRecord, NewerJobFile, decode_job, encode_job
from orcad.durable_files import create_file_exclusively, fsync_directory, replace_file_atomically
from orcad.errors import NotFound, StorageError, quoted
from orcad.failpoints import failpoint
from orcad.regular_files import NotARegularFile, read_regular_file

_JOB_ID = re.compile(r"job_[0-9a-f]{32}\Z")
_JOB_FILE = re.compile(r"(job_[0-9a-f]{32})\.json\Z")
# a crash's leftover temp (durable_files names it `.<file>.<pid>-<random>.tmp`; without the
# pid before temps named their writer)
_TEMP_FILE = re.compile(r"\.job_[0-9a-f]{32}\.json\.(?:[0-9]+-)?[0-9a-f]+\.tmp\Z")


class CorruptJobFile(StorageError):
    """A job file that is not a job record; it is left as found."""


def is_job_id(value: str) -> bool:
    return bool(_JOB_ID.match(value))


def job_path(project_dir: Path, job_id: str) -> Path:
    if not is_job_id(job_id):
        raise NotFound(f"{quoted(job_id)} is not a job id")
    return project_dir / JOBS_DIR / f"{job_id}.json"


def read_job(project_dir: Path, job_id: str) -> JobRecord | None:
    """The job in its file; None when there is no such file.

    Anything but a regular file there (a FIFO, a device, a directory) is a damaged job file,
    refused before a byte is read: reading a FIFO would wait for a writer for good, and with
    it every caller of the job store."""
    path = job_path(project_dir, job_id)
    try:
        data = read_regular_file(path)
    except FileNotFoundError:
        return None
    except NotARegularFile as exc:
        raise _damaged(path, "it is not a regular file") from exc
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}", path=str(path)) from exc
    try:
        return decode_job(data)
    except NewerJobFile as exc:
        raise CorruptJobFile(
            f"job file {path} was written by a newer orcad (format {exc.written_format!r}; "
            f"this one reads {JOB_FILE_FORMAT!r}); it is not damaged, do not move it: it was "
            "left as found and its job is held until that newer orcad is installed again",
            path=str(path),
        ) from exc
    except msgspec.DecodeError as exc:
        raise _damaged(path, str(exc)) from exc


def _damaged(path: Path, problem: str) -> CorruptJobFile:
    return CorruptJobFile(
        f"job file {path} is damaged ({problem}); it was left as found and its job is held: "
        "restore the file from a backup, or move it out of jobs/ to give the job up",
        path=str(path),
    )


def write_job(project_dir: Path, job: JobRecord) -> None:
    """Replace the job's file with `job`, durably, before returning."""
    replace_file_atomically(job_path(project_dir, job.job_id), encode_job(job))


class NewJobFile(NamedTuple):
    """A new job's file, encoded on the event loop so that the thread that writes it does
    nothing but the system calls (see Admissions.admit)."""

    path: Path
    data: bytes


def prepare_job_file(project_dir: Path, job: JobRecord) -> NewJobFile:
    return NewJobFile(job_path(project_dir, job.job_id), encode_job(job))


def make_jobs_directory(project_dir: Path) -> None:
    """The project's jobs directory, made again if someone removed it while orcad runs (only
    a project's locked paths and a session's open make it otherwise); StorageError if it
    cannot be made (a file where it should be)."""
    try:
        ensure_directories(project_dir)
    except OSError as exc:
        raise directories_error(project_dir, exc) from exc


def create_job(new: NewJobFile) -> bool:
    """Write a new job file durably unless one exists; False (and nothing written) if it does.

    No lock is needed: the final name is taken by a hard link, which never replaces a file.
    """
    return create_file_exclusively(new.path, new.data)


def job_file_exists(project_dir: Path, job_id: str) -> bool:
    return job_path(project_dir, job_id).exists()


class ForgottenJobs(msgspec.Struct, frozen=True, kw_only=True):
    """The ids of jobs deleted by a forget, oldest first (no text: the ids are digests)."""

    version: int = 1
    job_ids: list[str] = msgspec.field(default_factory=list)


def read_forgotten_jobs(project_dir: Path) -> frozenset[str]:
    """The ids of the jobs a forget deleted with the fact they held: the same turn reported
    again (a repeated Stop hook) makes no job, so the fact is not extracted anew. None when
    there is no such file. A file that is not such a list (truncated, edited, a FIFO) raises
    StorageError and is left as found: which turns it named is unknown, so neither a new job
    nor a forget (which would write it whole, without them) may go ahead until it is dealt with."""
    return frozenset(_forgotten_job_list(project_dir))


def _forgotten_job_list(project_dir: Path) -> list[str]:
    path = project_dir / FORGOTTEN_JOBS_FILE
    try:
        data = read_regular_file(path)
    except (FileNotFoundError, NotADirectoryError):  # none (a file in place of the directory
        return []  # is named by whatever makes the directory)
    except NotARegularFile as exc:
        raise ForgottenJobsDamaged(path, "it is not a regular file") from exc
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}", path=str(path)) from exc
    try:
        noted = msgspec.json.decode(data, type=ForgottenJobs)
    except msgspec.DecodeError as exc:
        raise ForgottenJobsDamaged(path, str(exc)) from exc
    return noted.job_ids


_FORGOTTEN_JOBS_ROLE = "It lists the turns whose facts were forgotten"


class ForgottenJobsDamaged(StorageError):
    """A forgotten-jobs.json that is not such a list: `wrong` says what is wrong with it and
    `advice` what to do (its project's new turns and forgets are refused with them, and doctor
    says the same)."""

    def __init__(self, path: Path, problem: str) -> None:
        self.wrong = (
            f"{path} is damaged ({problem}); it was left as found. {_FORGOTTEN_JOBS_ROLE}, so "
            "that reporting one again does not teach its fact anew: until it is dealt with, "
            "this project's new turns and forgets are refused."
        )
        self.advice = (
            "Restore it from a backup, or move it aside (a turn it listed, reported again, may "
            "then be learnt anew)"
        )
        super().__init__(f"{self.wrong} {self.advice}", path=str(path), reason="corrupt")


def is_refused_for_what_stands_there(message: str) -> bool:
    """Whether a recorded fault is one a project's turns are refused with for what stands in
    the memory root now: no directory at projects/, a project's directory or its jobs/
    (file_in_place_of_directories), or a forgotten-jobs.json that is damaged
    (ForgottenJobsDamaged) or may not be read. Doctor's memory check judges each of these as
    it is when doctor runs, so such a recorded fault says nothing more."""
    return (
        names_no_directory_in_place(message)
        or _FORGOTTEN_JOBS_ROLE in message
        or ("cannot read " in message and f"/{FORGOTTEN_JOBS_FILE}: " in message)
    )


def note_forgotten_jobs(project_dir: Path, job_ids: list[str]) -> None:
    """Add `job_ids` to the project's forgotten jobs, durably, keeping the newest
    FORGOTTEN_JOBS_KEPT. Call with the project lock held, before the jobs are deleted. A
    damaged list raises StorageError (read_forgotten_jobs) before anything is written."""
    if not job_ids:
        return
    kept = _forgotten_job_list(project_dir)  # raises on damage: never written over
    merged = list(dict.fromkeys([*(i for i in kept if i not in job_ids), *job_ids]))
    noted = ForgottenJobs(job_ids=merged[-limits.FORGOTTEN_JOBS_KEPT :])
    replace_file_atomically(project_dir / FORGOTTEN_JOBS_FILE, msgspec.json.encode(noted))


def delete_jobs(project_dir: Path, job_ids: list[str]) -> None:
    """Remove job files (retention), then make the removal durable."""
    if not job_ids:
        return
    for job_id in job_ids:
        with contextlib.suppress(FileNotFoundError):
            job_path(project_dir, job_id).unlink()
    try:
        fsync_directory(project_dir / JOBS_DIR)
    except OSError as exc:
        raise StorageError(f"cannot sync {project_dir / JOBS_DIR}: {exc.strerror or exc}") from exc
    failpoint("jobs.after_prune")


class DamagedJobFile(msgspec.Struct, frozen=True, kw_only=True):
    """A job file that does not parse: its job is known only by the file's name."""

    job_id: str
    project_id: str
    path: str
    problem: str


def damaged_job_file(project_id: str, job_id: str, error: StorageError) -> DamagedJobFile:
    return DamagedJobFile(
        job_id=job_id,
        project_id=project_id,
        path=str(error.data.get("path", "")),
        problem=error.message,
    )


class ScanResult(msgspec.Struct, frozen=True, kw_only=True):
    jobs: list[JobRecord]
    projects: list[str]
    problems: list[str]  # directories that could not be listed
    damaged: list[DamagedJobFile] = []  # job files that do not parse, left as found


def scan_all_jobs(projects_dir: Path) -> ScanResult:
    """Every job file of every project (daemon start); temp files left by a crash are removed."""
    jobs: list[JobRecord] = []
    problems: list[str] = []
    damaged: list[DamagedJobFile] = []
    project_ids = list_project_ids(projects_dir)
    for project_id in project_ids:
        directory = projects_dir / project_id / JOBS_DIR
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(f"cannot list {directory}: {exc.strerror or exc}")
            continue
        for name in names:
            if _TEMP_FILE.match(name):
                with contextlib.suppress(OSError):
                    (directory / name).unlink()
                continue
            matched = _JOB_FILE.match(name)
            if not matched:
                continue
            try:
                job = read_job(projects_dir / project_id, matched.group(1))
            except CorruptJobFile as exc:
                damaged.append(damaged_job_file(project_id, matched.group(1), exc))
                continue
            except StorageError as exc:
                problems.append(exc.message)
                continue
            if job is None:
                continue
            if job.job_id != matched.group(1) or job.project_id != project_id:
                problems.append(
                    f"job file {directory / name} names another job or project; left as found"
                )
                continue
            jobs.append(job)
    return ScanResult(jobs=jobs, projects=project_ids, problems=problems, damaged=damaged)
