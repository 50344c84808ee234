"""Project directories: naming, `project.json`, and the cross-process project lock.

`memory_root/projects/<project-id>/` holds one project's memory. `project.json` records the
identity the hashed directory name stands for and the last working directory seen there. It is
read again after the project lock is taken, and a file that is not a valid project record is
never overwritten: it is preserved as found and reported, so that a human can look at it.

Every directory here is created 0700 and every file 0600.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import filelock
import msgspec

from orcad.clock import format_time
from orcad.durable_files import replace_file_atomically
from orcad.errors import NotFound, StorageError, quoted
from orcad.limits import PROJECT_LOCK_TIMEOUT_S
from orcad.regular_files import NotARegularFile, read_regular_file

PROJECT_FILE = "project.json"
PROJECT_FILE_FORMAT = "orcad.project/1"
LOCK_FILE = ".lock"
JOBS_DIR = "jobs"
# the ids of jobs a forget deleted with their fact (jobstore.note_forgotten_jobs)
FORGOTTEN_JOBS_FILE = "forgotten-jobs.json"
# what a project's turn refused for what stands in place of these directories is said to
# cost (file_in_place_of_directories), by which doctor knows such a recorded fault
_PROJECT_CONSEQUENCE = "orcad cannot keep this project's files there"
_PROJECTS_CONSEQUENCE = "no project's memory can be kept there"
_PROJECT_ID = re.compile(r"[0-9a-f]{64}\Z")

T = TypeVar("T")


class ProjectLockTimeout(StorageError):
    """Another process held the project lock too long; transient, try again later."""


class ProjectRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: str = PROJECT_FILE_FORMAT
    project_id: str
    project_identity: str  # normalized Git origin or canonical path; its sha256 is the id
    root: str  # the last root seen (clones of one origin share the project)
    last_seen_cwd: str
    updated_at: str


class ProjectFile(msgspec.Struct, frozen=True, kw_only=True):
    """What reading project.json found: a record, nothing, or a problem to report."""

    record: ProjectRecord | None = None
    problem: str | None = None  # set when the file exists but is not a valid record


_record_decoder = msgspec.json.Decoder(ProjectRecord)


def is_project_id(value: str) -> bool:
    return bool(_PROJECT_ID.match(value))


def project_dir(projects_dir: Path, project_id: str) -> Path:
    """The directory of a project id; NotFound for anything that is not a project id (so no
    caller-supplied value can name a path outside the projects directory)."""
    if not is_project_id(project_id):
        raise NotFound(f"{quoted(project_id)} is not a project id (64 lowercase hex digits)")
    return projects_dir / project_id


def ensure_directories(directory: Path) -> None:
    """The project directory and its jobs directory, private; OSError passes through."""
    (directory / JOBS_DIR).mkdir(mode=0o700, parents=True, exist_ok=True)


def directories_error(directory: Path, exc: OSError) -> StorageError:
    """StorageError for ensure_directories' `exc`: a file where the project directory or its
    jobs directory should be is named as such, with what to do, rather than as "File exists"."""
    in_place = file_in_place_of_directories(directory)
    if in_place is not None:
        path, problem, advice = in_place
        return StorageError(
            f"{problem}; it was left as found: {advice}", path=str(path), reason="corrupt"
        )
    path = Path(exc.filename) if isinstance(exc.filename, str) else directory / JOBS_DIR
    return StorageError(f"cannot create {path}: {exc.strerror or exc}", path=str(path))


def file_in_place_of_directories(directory: Path) -> tuple[Path, str, str] | None:
    """The projects directory, the project directory or its jobs directory when no directory
    stands there (a file, or a symbolic link that leads nowhere or to no directory), what is
    wrong and what to do (a turn in the project is refused with it; doctor says the same);
    None when none is so. A link to a directory is the user's to make: orcad writes through it."""
    wrong = projects_dir_wrong(directory.parent)
    if wrong is not None:
        return (directory.parent, *wrong)
    for path in (directory, directory / JOBS_DIR):
        wrong = not_a_directory(path, _PROJECT_CONSEQUENCE)
        if wrong is not None:
            return (path, *wrong)
    return None


def names_no_directory_in_place(message: str) -> bool:
    """Whether a message says what file_in_place_of_directories found: no directory at
    projects/, a project's directory or its jobs/."""
    return any(f", so {said}" in message for said in (_PROJECT_CONSEQUENCE, _PROJECTS_CONSEQUENCE))


def projects_dir_wrong(projects_dir: Path) -> tuple[str, str] | None:
    """What is wrong with what stands at the projects directory, and what to do; None when it
    is a directory (or a link to one), or nothing is there."""
    return not_a_directory(projects_dir, _PROJECTS_CONSEQUENCE)


def not_a_directory(path: Path, consequence: str) -> tuple[str, str] | None:
    """What is wrong, ending in `consequence`, and what to do, when something other than a
    directory or a link to one stands at `path`; None when one of those or nothing is there."""
    try:
        mode = path.lstat().st_mode
    except OSError:  # nothing there: made when needed
        return None
    if stat.S_ISDIR(mode):
        return None
    move = f"(mv {shlex.quote(str(path))} {shlex.quote(f'{path}.not-a-directory')})"
    again = "and orcad makes the directory again"
    if not stat.S_ISLNK(mode):
        return (
            f"{path} is not a directory (a file is in its place), so {consequence}",
            f"move it aside {move}, {again}",
        )
    try:
        target = os.readlink(path)
    except OSError:  # replaced meanwhile
        return None
    try:
        leads_to = path.stat().st_mode
    except OSError:  # nothing at its end, or links that lead back to themselves
        return (
            f"{path} is a symbolic link to {target}, which leads nowhere (nothing is there, a "
            f"drive not mounted?, or it leads back to the link), so {consequence}",
            f"mount or create the directory it names, or move the link aside {move}, {again}",
        )
    if stat.S_ISDIR(leads_to):
        return None
    return (
        f"{path} is a symbolic link to {target}, which is not a directory, so {consequence}",
        f"point it at a directory, or move the link aside {move}, {again}",
    )


def project_file_missing(directory: Path) -> bool:
    """Whether nothing is at the project's project.json (one stat, for a hot path): a damaged
    or unreadable entry there counts as present, as read_project_file leaves it as found."""
    return not os.path.lexists(directory / PROJECT_FILE)


def read_project_file(directory: Path, project_id: str) -> ProjectFile:
    """What project.json says, or its problem. Anything but a regular file there (a FIFO, a
    device) is refused before a byte is read: reading a FIFO would wait for a writer for good."""
    path = directory / PROJECT_FILE
    try:
        data = read_regular_file(path)
    except FileNotFoundError:
        return ProjectFile()
    except NotARegularFile:
        return ProjectFile(problem=f"{path} is not a regular file; left as found")
    except OSError as exc:
        return ProjectFile(problem=f"cannot read {path}: {exc.strerror or exc}")
    try:
        record = _record_decoder.decode(data)
    except msgspec.DecodeError as exc:
        return ProjectFile(problem=f"{path} is not a valid project record ({exc}); left as found")
    if record.format != PROJECT_FILE_FORMAT or record.project_id != project_id:
        return ProjectFile(problem=f"{path} names another project or format; left as found")
    return ProjectFile(record=record)


def record_project_visit(
    directory: Path, *, project_id: str, identity: str, root: str, cwd: str, now: float
) -> ProjectFile:
    """Write project.json for a visit from `cwd`, unless it already says so or is corrupt.

    Call with the project lock held: the file is read here, after the lock was taken, so a
    file damaged while this process waited is seen and left alone.
    """
    found = read_project_file(directory, project_id)
    if found.problem is not None:
        return found
    current = found.record
    if (
        current is not None
        and current.project_identity == identity
        and current.root == root
        and current.last_seen_cwd == cwd
    ):
        return found
    record = ProjectRecord(
        project_id=project_id,
        project_identity=identity,
        root=root,
        last_seen_cwd=cwd,
        updated_at=format_time(now),
    )
    replace_file_atomically(
        directory / PROJECT_FILE, msgspec.json.format(msgspec.json.encode(record)) + b"\n"
    )
    return ProjectFile(record=record)


_locks: dict[Path, filelock.BaseFileLock] = {}
_locks_guard = threading.Lock()


def project_lock(directory: Path) -> filelock.BaseFileLock:
    """The project's lock object, made once: the lock file is kept between uses (no create and
    unlink per acquisition), and other processes using filelock on the same path exclude us."""
    with _locks_guard:
        lock = _locks.get(directory)
        if lock is None:
            lock = _locks[directory] = filelock.FileLock(
                directory / LOCK_FILE, mode=0o600, thread_local=False, preserve_lock_file=True
            )
        return lock


def run_with_project_lock(
    directory: Path, work: Callable[[], T], timeout: float = PROJECT_LOCK_TIMEOUT_S
) -> T:
    """Run `work()` holding the project's cross-process lock (blocking; call from a thread).

    ProjectLockTimeout after `timeout` seconds of contention; StorageError when the lock file
    cannot be created.
    """
    lock = project_lock(directory)
    try:
        lock.acquire(timeout=timeout)
    except filelock.Timeout as exc:
        raise ProjectLockTimeout(
            f"the lock of project directory {directory} was held by another process for "
            f"{timeout:.0f} s; try again later",
            path=str(directory),
            reason="locked",  # as for a database another process keeps locked
        ) from exc
    except OSError as exc:  # the lock file's own fault (a directory or a FIFO there, its mode)
        raise StorageError(
            f"cannot lock {lock.lock_file}: {exc.strerror or exc}", path=lock.lock_file
        ) from exc
    try:
        return work()
    finally:
        lock.release()


# what the lock file's fault says when a symbolic link or a directory stands in its place
_LOCK_FILE_IN_PLACE = (os.strerror(errno.ELOOP), os.strerror(errno.EISDIR))


def names_lock_file_in_place(message: str) -> bool:
    """Whether a message says what run_with_project_lock met for a project's .lock that is a
    symbolic link or a directory (doctor's memory check names either as it is now)."""
    return (
        "cannot lock " in message
        and f"/{LOCK_FILE}: " in message
        and any(said in message for said in _LOCK_FILE_IN_PLACE)
    )


def list_project_ids(projects_dir: Path) -> list[str]:
    try:
        names = os.listdir(projects_dir)
    except FileNotFoundError:  # none yet (or a link that leads nowhere: named when a turn
        return []  # needs the directory)
    except NotADirectoryError as exc:  # a file in its place: no errno a storage reason names
        wrong = projects_dir_wrong(projects_dir)
        problem, advice = wrong or (f"{projects_dir} is not a directory", "move it aside")
        raise StorageError(
            f"{problem}; it was left as found: {advice}", path=str(projects_dir)
        ) from exc
    return sorted(name for name in names if is_project_id(name) and (projects_dir / name).is_dir())
