"""Doctor's findings type, and the checks for faults inside the stored data: damaged databases,
damaged job files and ledgers, faults the running daemon recorded, and a check that crashed."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from orcactl.approval import shell_word
from orcactl.commands.damaged_ledger import (
    LEDGER,
    PROJECT_FILE,
    job_written_by_newer,
    ledger_fix,
    project_file_fix,
)
from orcad.deliberate.schema import fts_index_problem, repair_steps
from orcad.paths import Paths
from orcad.sqlite_worker import integrity_problem, irregular_sibling
from orcad.state_db import damaged_copies, state_db_problem
from orcad.storage_faults import is_corruption, storage_error_of

Status = Literal["ok", "problem", "skipped"]


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str = ""


# what to do when the provider cannot be built: orcad builds it only when it starts
EXTRACTION_FIX = (
    "fix what it names (the [extraction] settings in config.toml, or orcad's environment), "
    "then restart orcad; turns captured meanwhile wait as pending jobs"
)


# Faults the daemon records (daemon.status recent_errors) that doctor shows, with their fix
# (a storage fault's depends on its cause: STORAGE_FIXES). Ledger and job-file damage are found
# by the index and jobs checks themselves.
DAEMON_FAULT_FIXES = {
    "storage": "fix what the message names (the file or directory, its permissions, or its "
    "file system); the daemon retries by itself",
    "state_db_damaged": "free space or fix permissions under the memory root, then restart orcad",
    "memory_db_corrupt": "see the databases check for the repair steps",
    "database_reopened": "leave a database's -wal and -shm alone while orcad runs (stop orcad "
    "before restoring or copying them); orcad serves on, from what the file holds now",
    "background_crashed": "a bug: the task was restarted; please report it with the daemon log "
    "(journalctl --user -u orcad)",
    "background_stopped": "a bug: the task was restarted; please report it with the daemon log "
    "(journalctl --user -u orcad)",
    "connection": "a bug: only that connection was closed; please report it with the daemon "
    "log (event connection.failed)",
    "job_store": "check the named file or lock; the project's jobs are tried again after "
    "extraction.reschedule_s",
    "provider_config": "fix the [extraction] configuration and restart orcad",
    "project_metadata_corrupt": "move the named project.json aside; it is rewritten at the next "
    "session in that project",
    # one part of a recall failed and the other still answered (orcad.recall.service)
    "recall": "that part of recall answered nothing while the other did; fix what the message "
    "names (the databases and storage checks say more), and recall tries it again at each turn",
}


# A storage fault's cause, as the operating system's words in its message say it, with its fix;
# the first that matches counts, and a cause not listed gets the "storage" fix above.
STORAGE_FIXES = (
    (
        ("No space left", "Disk quota exceeded", "disk is full", "free disk space"),
        "free disk space (or raise the quota) on the file system named in the message; the "
        "daemon retries by itself",
    ),
    (
        # a project's lock, user.md.lock, a database: nothing is wrong with the files
        ("held by another process", "is locked by another process", "database is locked"),
        "another process held the lock the message names (a stuck orcactl or orcad, a sqlite3 "
        "shell, a backup): let it finish or end it; nothing was changed, and the call works "
        "once the lock is free",
    ),
    (
        ("Too many levels of symbolic links",),
        "a symbolic link stands where orcad keeps a file of its own (after `cannot lock DIR`: "
        "DIR/.lock); remove the link, and orcad makes the file again",
    ),
    (
        ("which leads nowhere (nothing is there", "which is not a directory, so"),
        "a symbolic link stands where orcad keeps a directory and leads to none: mount or "
        "create the directory it names, or move the link aside as the message says, and orcad "
        "makes the directory again",
    ),
    (
        ("Not a directory", "File exists", "is not a directory (a file is in its place)"),
        "a file stands where orcad keeps a directory on the path named (a project's jobs/, "
        "say): move that file aside; the next session opened in that project makes the "
        "directory again",
    ),
)


def daemon_fault_fix(kind: str, message: str) -> str | None:
    """The fix for a fault the daemon recorded, None for a kind doctor does not show."""
    if kind == "storage":
        for words, fix in STORAGE_FIXES:
            if any(word in message for word in words):
                return fix
    return DAEMON_FAULT_FIXES.get(kind)


def guarded(check: str, run: Callable[[], list[Finding]]) -> list[Finding]:
    """Run one group of checks; if it fails unexpectedly, that is a finding, not a crash."""
    try:
        return run()
    except Exception as exc:  # doctor reports everything it can, whatever one check hits
        return [
            Finding(
                check,
                "problem",
                f"this check could not run: {type(exc).__name__}: {exc}",
                "the other checks are still valid; fix what this names and run doctor again",
            )
        ]


def _open_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)


def unchecked(path: Path, exc: sqlite3.Error) -> Finding:
    """A database whose check could not run (locked, a full disk, a file it may not read):
    nothing says it is damaged, and no repair is due, only the cause removed."""
    error = storage_error_of(exc, str(path))
    return Finding(
        "databases",
        "problem",
        f"{path} cannot be checked now ({exc}); it is not known to be damaged",
        (error.message if error is not None else f"{path}: {exc}")
        + "; then run orcactl doctor again",
    )


def _has_full_text_index(connection: sqlite3.Connection) -> bool:
    """False for a file orcad has not made its schema in yet (an empty one, say)."""
    row = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memories_fts'"
    ).fetchone()
    return row is not None


def check_memory_database(path: Path) -> Finding:
    """PRAGMA quick_check of memory.sqlite3, read-only (safe while orcad runs)."""
    if not path.exists():
        return Finding("databases", "ok", f"{path} does not exist yet")
    if not stat.S_ISREG(path.stat().st_mode):
        # opened read-only, a FIFO would hold doctor until some writer came
        return Finding(
            "databases",
            "problem",
            f"{path} is not a regular file (a FIFO, a device or a directory), so it holds no "
            "deliberate memory and orcad cannot keep any there",
            f"stop orcad, move it aside (mv {shell_word(str(path))} "
            f"{shell_word(f'{path}.not-a-database')}) and put the database "
            "file back, or start orcad without it to begin an empty one",
        )
    sibling = irregular_sibling(path)
    if sibling is not None:
        # SQLite fails on it only as a disk I/O error, and a read-only open may wait on a FIFO
        return Finding(
            "databases",
            "problem",
            f"{sibling} is not a regular file (a FIFO, a device or a directory), so SQLite "
            f"cannot use it beside {path}: deliberate memory cannot be changed (nor read, "
            "with a -shm)",
            f"stop orcad, move it aside if it is still there (mv {shell_word(str(sibling))} "
            f"{shell_word(f'{sibling}.not-a-database')}) and start orcad again",
        )
    problem: str | None
    index_problem: str | None = None
    try:
        connection = _open_read_only(path)
        try:
            problem = integrity_problem(connection)
            if problem is None and _has_full_text_index(connection):
                index_problem = fts_index_problem(connection, thorough=False)
        finally:
            connection.close()
    except sqlite3.Error as exc:
        if not is_corruption(exc):
            return unchecked(path, exc)
        problem = str(exc)
    if problem is None and index_problem is not None:
        # derived from the records, which are sound: orcad makes it again by itself
        return Finding(
            "databases",
            "ok",
            f"{path} passes quick_check; its full-text index cannot be read ({index_problem}), "
            "and orcad makes it again from the records at its next start or search",
        )
    if problem is None:
        return Finding("databases", "ok", f"{path} passes quick_check")
    return Finding(
        "databases",
        "problem",
        f"{path} is damaged ({problem}); orcad refuses changes to deliberate memory until it "
        "is repaired, and searches may miss records",
        repair_steps(path),
    )


def check_state_database(paths: Paths, daemon_running: bool) -> list[Finding]:
    """daemon-state.sqlite3: damaged now (checked only when no daemon holds it), or moved
    aside earlier (what was lost is said once more)."""
    found: list[Finding] = []
    path = paths.state_db
    if not daemon_running:
        try:
            problem = state_db_problem(path)
        except sqlite3.Error as exc:
            found.append(unchecked(path, exc))
            problem = None
        if problem is not None:
            found.append(
                Finding(
                    "databases",
                    "problem",
                    f"{path} is damaged ({problem})",
                    "start orcad: it moves the file aside and recreates it (open sessions must "
                    "then be opened again; recall snapshots of earlier turns are lost)",
                )
            )
    for copy in damaged_copies(path):
        found.append(
            Finding(
                "databases",
                "problem",
                f"{copy} is a damaged daemon state database that orcad moved aside and replaced; "
                "the session epochs and recall snapshots it held were lost (sessions were "
                "opened again), memory itself was not in it",
                f"nothing to repair; keep it for a bug report or delete it: rm {copy}*",
            )
        )
    if not found:
        state = "is sound" if path.exists() else "does not exist yet"  # orcad creates it
        found.append(Finding("databases", "ok", f"{path} {state}"))
    return found


def check_databases(paths: Paths, daemon_running: bool) -> list[Finding]:
    # Opening a WAL database, even read-only, may create its -wal and -shm; SQLite gives them
    # the database file's own mode, so they stay private (tested).
    return [
        check_memory_database(paths.deliberate_db),
        *check_state_database(paths, daemon_running),
    ]


def judged_as_it_is_now(error: Any) -> bool:
    """Whether a recorded fault is about a file in the memory root that another check judges
    as it is when doctor runs: a facts file a session start could not read, what a project's
    turn was refused for standing in the memory root (a file in place of a directory, a
    damaged forgotten-jobs.json), a project's .lock that is a symbolic link or a directory,
    and a damaged project.json (the memory check, and the index check through projects.list,
    which reads it anew). The recorded fault stays listed after its cause is fixed, so judging
    it here would name it twice, and go on failing once it is fixed."""
    from orcad.capture.jobstore import is_refused_for_what_stands_there  # noqa: PLC0415
    from orcad.capture.projects import names_lock_file_in_place  # noqa: PLC0415 - filelock
    from orcad.explicit import is_startup_fault  # noqa: PLC0415

    if error.kind == "project_metadata_corrupt":
        return True
    if error.kind == "storage" and is_startup_fault(error.message):
        return True
    return is_refused_for_what_stands_there(error.message) or names_lock_file_in_place(
        error.message
    )


# A path a storage fault names: it begins the message or follows a space or "(", and ends
# where the operating system's or SQLite's words follow (`cannot write PATH: No space left`)
_NAMED_PATH = re.compile(r"(?<![^\s(])(/.+?)(?=: )")
# A full file system in the operating system's and SQLite's words. Not a quota ("Disk quota
# exceeded"): the free space the disk check measures says nothing of the user's quota.
_FULL_DISK = ("No space left on device", "database or disk is full")


def _file_system_of(named: str) -> int | None:
    """The file system (st_dev) of a path a fault names, or of its directory when the file is
    not there (a job file that could not be written); None when neither is."""
    for path in (named, os.path.dirname(named)):
        try:
            return os.stat(path).st_dev
        except (OSError, ValueError):
            continue
    return None


def full_disk_with_room_now(error: Any, disks_with_room: frozenset[int]) -> bool:
    """Whether a recorded fault is a full file system that the disk check looks at and finds
    room on now (disks_with_room: their st_dev): every path the message names is on one of
    them. One that names no path, or a path elsewhere (projects/ linked to another disk), or a
    quota, is not the disk check's to judge."""
    if error.kind != "storage" or not any(words in error.message for words in _FULL_DISK):
        return False
    named = _NAMED_PATH.findall(error.message)
    return bool(named) and all(_file_system_of(path) in disks_with_room for path in named)


# How long a recorded fault that names no path counts as present. Nothing on disk can be
# looked at to judge it again, but orcad records it anew (moved to the end with its new time)
# each time it meets it: a job store retried every extraction.reschedule_s, a recall part at
# each turn, a restarted task that crashes again. One not met for this long is history.
UNMET_FAULT_EXPIRY_S = 15 * 60.0

# A path in a fault's message: it begins the message or follows a space or "("
_ANY_PATH = re.compile(r"(?<![^\s(])/[^\s/]")


def met_lately(at: object, now: float) -> bool:
    """Whether a problem recorded at `at` (RFC 3339) was met in the last UNMET_FAULT_EXPIRY_S.
    One stamped further ahead of now than that was met before the clock was set back and not
    since (it would have been stamped anew with the clock as it is), so it is history too,
    rather than present for as long as the clock was off. A time in no form read counts as
    now: the problem is shown."""
    try:
        then = datetime.fromisoformat(str(at)).timestamp()
    except (TypeError, ValueError, OverflowError, OSError):
        return True
    return abs(now - then) <= UNMET_FAULT_EXPIRY_S


def expired_without_path(error: Any, now: float) -> bool:
    """Whether a recorded fault names no path and was not met lately (a connection that
    failed, a crashed task, a part of recall that failed once): see met_lately."""
    if _ANY_PATH.search(error.message):
        return False
    return not met_lately(error.at, now)


# Faults the daemon recorded and mended itself: doctor says what was done, as nothing to fix.
MENDED_FAULTS = frozenset({"memory_index_rebuilt"})


def judge_daemon_errors(
    recent_errors: list[Any],
    disks_with_room: frozenset[int] = frozenset(),
    now: float | None = None,
) -> list[Finding]:
    """The storage faults and crashes the running daemon recorded, newest last, but those
    another check judges as they are now (judged_as_it_is_now, full_disk_with_room_now) and
    those naming no path that orcad has not met again lately (expired_without_path); then what
    orcad mended itself."""
    mended = [
        Finding("daemon", "ok", f"{error.at} {error.kind}: {error.message}")
        for error in recent_errors
        if error.kind in MENDED_FAULTS
    ]
    return _judge_faults(recent_errors, disks_with_room, now) + mended


def _judge_faults(
    recent_errors: list[Any], disks_with_room: frozenset[int], now: float | None
) -> list[Finding]:
    now = time.time() if now is None else now
    found = []
    judged_now = 0
    full_then = 0
    not_met_since = 0
    for error in recent_errors:
        fix = daemon_fault_fix(error.kind, error.message)
        if fix is None:
            continue
        if judged_as_it_is_now(error):
            judged_now += 1
            continue
        if full_disk_with_room_now(error, disks_with_room):
            full_then += 1
            continue
        if expired_without_path(error, now):
            not_met_since += 1
            continue
        found.append(Finding("daemon", "problem", f"{error.at} {error.kind}: {error.message}", fix))
    if found:
        return found
    left = []
    if judged_now:
        left.append(
            f"{judged_now} recorded about files in the memory root, which the memory and index "
            "checks judge as they are now"
        )
    if full_then:
        left.append(f"{full_then} recorded of a full disk, on which the disk check finds room now")
    if not_met_since:
        minutes = round(UNMET_FAULT_EXPIRY_S / 60)
        left.append(
            f"{not_met_since} naming no file, recorded over {minutes} minutes ago and not met "
            "since (orcactl status still lists them)"
        )
    if left:
        return [
            Finding(
                "daemon",
                "ok",
                f"no other storage faults or crashes recorded ({'; '.join(left)})",
            )
        ]
    return [Finding("daemon", "ok", "no storage faults or crashes recorded")]


def damaged_job_fix(path: str | Path, problem: str) -> str:
    """What to do about a job file orcad could not take as a job (its problem as orcad said
    it); doctor gives it with the daemon running and without."""
    if job_written_by_newer(path, problem):
        return (
            f"do not move {path}: install the newer orcad again (pip install --upgrade) and "
            "restart orcad, which runs the job"
        )
    return f"restore {path} from a backup, or move it out of jobs/ to give the job up"


def judge_damaged_jobs(damaged: list[Any]) -> list[Finding]:
    return [
        Finding(
            "jobs",
            "problem",
            f"job {job.job_id} (project {job.project_id}): {job.problem}"
            if job_written_by_newer(job.path, job.problem)
            else f"job {job.job_id} (project {job.project_id}): its file {job.path} is damaged "
            "and was kept as found; the job is held",
            damaged_job_fix(job.path, job.problem),
        )
        for job in damaged
    ]


def judge_damaged_project(project_id: str, directory: Path, problem: str | None) -> Finding:
    """A damaged project file, with the fix for the file the problem names (the ledger's when
    it names none)."""
    detail = problem or "its files are damaged"
    fixes = []
    if PROJECT_FILE in detail:
        fixes.append(project_file_fix(directory / PROJECT_FILE, detail))
    if PROJECT_FILE not in detail or LEDGER in detail:
        fixes.append(ledger_fix(directory / LEDGER, detail))
    fixes.append(f"then orcactl inspect --project {project_id} shows the project")
    return Finding("index", "problem", f"project {project_id}: {detail}", "; ".join(fixes))
