"""The daemon state database's health: checked at start, moved aside and recreated if damaged.

`memory/daemon-state.sqlite3` holds session epochs with each session's configuration snapshot
(`sessions`) and recall snapshots (`recall_snapshots`). Both are daemon bookkeeping, not memory:
a damaged file is renamed `daemon-state.sqlite3.damaged-<UTC time>` (with its -wal and -shm) and
an empty one takes its place, so that sessions can be opened again. What is lost is said in the
log, in daemon.status and by doctor: open sessions must be opened again (at epochs above any
the lost file could hold, so an old holder stays fenced) and a turn asked again gets a fresh
recall instead of its snapshot.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from pathlib import Path

from orcad.sqlite_worker import integrity_problem, irregular_sibling
from orcad.storage_faults import PASSING_FAULTS, fault_reason

DAMAGED_SUFFIX = ".damaged-"
LOST_BOOKKEEPING = (
    "lost: the epochs of sessions opened before (agents must open their sessions again; new "
    "epochs start above any the lost file held, so stale holders stay fenced) and the recall "
    "snapshots of earlier turns (a repeated recall is computed afresh)"
)
LOSS = (
    f"{LOST_BOOKKEEPING}; memory itself (ledgers, job files, memory.sqlite3, grants) is not in "
    "this file and is intact"
)


def loss_with_memory(gone: Path, held: str, deliberate_db: Path) -> str:
    """What is lost when the state database went with the directory `gone` (the memory root,
    or its projects/ directory), deleted while orcad ran: the memory it `held` (ledgers, job
    files...) went too, which LOSS would call intact."""
    kept = (
        ""
        if deliberate_db.is_relative_to(gone)
        else f"; memory.sqlite3 ({deliberate_db}) and its grants are not under it"
    )
    return (
        f"{LOST_BOOKKEEPING}; and {gone} was deleted too, so the {held} under it are gone "
        f"(restore them from a backup, with orcad stopped, if there is one){kept}"
    )


def state_db_problem(path: Path) -> str | None:
    """The damage that makes the state database unusable, or None (also when it does not exist
    yet). Anything that is not SQLite's own database there counts (damaged pages, another kind
    of file, a directory), since the file holds only bookkeeping. sqlite3.Error when it cannot
    be checked now (PASSING_FAULTS): it must be kept."""
    if not path.exists():
        return None
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:  # deleted meanwhile
        return None
    if not stat.S_ISREG(mode):
        # SQLite fails on a FIFO or a device only once it reads or syncs, as a disk error,
        # which would keep it in place for good
        return "not a regular file"
    sibling = irregular_sibling(path)
    if sibling is not None:  # the same disk error, from the file SQLite keeps beside it
        return f"its {sibling.name} is not a regular file"
    try:
        connection = sqlite3.connect(str(path), isolation_level=None)
    except sqlite3.Error as exc:
        if fault_reason(exc) in PASSING_FAULTS:
            raise
        return str(exc)
    try:
        return integrity_problem(connection)
    except sqlite3.Error as exc:
        if fault_reason(exc) in PASSING_FAULTS:
            raise
        return str(exc)
    finally:
        connection.close()


def move_aside(path: Path, now: float | None = None) -> Path:
    """Rename the database and its -wal and -shm beside it; the new name of the database."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    target = path.with_name(f"{path.name}{DAMAGED_SUFFIX}{stamp}")
    serial = 1
    while target.exists():
        serial += 1
        target = path.with_name(f"{path.name}{DAMAGED_SUFFIX}{stamp}-{serial}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}{suffix}", f"{target}{suffix}")
    descriptor = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return target


def damaged_copies(path: Path) -> list[Path]:
    """State databases moved aside earlier (doctor lists them)."""
    if not path.parent.is_dir():
        return []
    prefix = path.name + DAMAGED_SUFFIX
    return sorted(
        entry
        for entry in path.parent.iterdir()
        if entry.name.startswith(prefix) and not entry.name.endswith(("-wal", "-shm"))
    )
