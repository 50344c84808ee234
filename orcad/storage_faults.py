"""Which operating-system and SQLite failures are storage faults, and what each one means.

A full disk, a quota, a read-only file system, a file orcad may not write (its mode, its owner,
an immutable flag), a file size limit (`ulimit -f`), a damaged database or one another process
keeps locked is not a bug in orcad: the client gets -32017 `storage` with the reason, and the
fault is recorded for daemon.status and doctor. Everything else stays an internal error.
"""

from __future__ import annotations

import errno
import os
import resource
import sqlite3
import subprocess
import sys
from typing import Literal

from orcad.errors import StorageError

FaultReason = Literal[
    "disk_full", "read_only", "corrupt", "io_error", "locked", "permission_denied", "file_too_large"
]

_ERRNO_REASONS: dict[int, FaultReason] = {
    errno.ENOSPC: "disk_full",
    errno.EDQUOT: "disk_full",
    errno.EROFS: "read_only",
    errno.EIO: "io_error",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",  # (an immutable or append-only file, a sealed one)
    errno.EFBIG: "file_too_large",  # RLIMIT_FSIZE: Python ignores SIGXFSZ, so the write fails
}
# Primary result codes (https://sqlite.org/rescode.html); extended codes keep them in the low byte.
_SQLITE_REASONS: dict[int, FaultReason] = {
    13: "disk_full",  # SQLITE_FULL: "database or disk is full"
    8: "read_only",  # SQLITE_READONLY
    11: "corrupt",  # SQLITE_CORRUPT: "database disk image is malformed"
    26: "corrupt",  # SQLITE_NOTADB: "file is not a database"
    10: "io_error",  # SQLITE_IOERR
    5: "locked",  # SQLITE_BUSY: another connection held the lock past the busy timeout
    6: "locked",  # SQLITE_LOCKED
}
# Extended codes whose cause their primary code does not say: SQLite could not grow the
# database's -shm file, which a full disk or a quota refuses (a WAL database then cannot even be
# read), reported as SQLITE_IOERR ("disk I/O error").
_SQLITE_EXTENDED_REASONS: dict[int, FaultReason] = {
    4874: "disk_full",  # SQLITE_IOERR_SHMSIZE
}
# Faults of the moment, not of the file: a lock another process holds, a full disk, a read-only
# or failing disk, a permission or a file size limit. A database they keep from being read may
# well be sound, and reading it another way meets them as well.
PASSING_FAULTS: frozenset[FaultReason] = frozenset(
    {"locked", "disk_full", "read_only", "io_error", "permission_denied", "file_too_large"}
)
_ADVICE: dict[FaultReason, str] = {
    "disk_full": "free disk space (or raise the quota) and try again; nothing was half-written",
    # SQLite says "readonly database" for a file whose mode forbids writing as for a read-only
    # mount, and cannot tell which
    "read_only": "the file or its file system is read-only (its mode, or a read-only mount); "
    "make it writable (chmod u+w, or remount read-write) and try again",
    "corrupt": "the database is damaged; orcactl doctor says how to repair it",
    "io_error": "the disk reported an I/O error; check it (dmesg) and try again",
    "locked": "another process keeps the database locked (a sqlite3 shell, a backup); "
    "end it and try again",
    "permission_denied": "orcad's user may not change that file or its directory (their owner, "
    "mode or an immutable flag); make them that user's again, writable by it (chmod u+rw, "
    "directories u+rwx; chattr -i), and try again",
    "file_too_large": "orcad's file size limit (ulimit -f) is below the file's size; raise it "
    "where orcad is started (the shell, or LimitFSIZE= of its service) and restart orcad",
}


def advice(reason: str) -> str | None:
    """What to do about a passing fault (a full disk, a lock, a read-only or failing disk), or
    None for damage (whose message names its own repair) and reasons of other kinds."""
    if reason not in PASSING_FAULTS:
        return None
    return _ADVICE[reason]


# Python's sqlite3 says this when a TEXT value is not UTF-8. orcad only ever writes str, so
# such a value is damage SQLite did not notice (a torn page read as rows) or bytes another
# program put there.
_UNDECODABLE = "could not decode to utf-8 column"


def fault_text(exc: BaseException) -> str:
    """`exc` as a message may quote it: text that is not UTF-8 is named, not echoed (a damaged
    page read as text is thousands of replacement characters)."""
    text = str(exc)
    if text.lower().startswith(_UNDECODABLE):
        column = text.split(" with text ", 1)[0][len(_UNDECODABLE) - len("column") :]
        return f"{column} holds text that is not UTF-8"
    return text


def fault_reason(exc: BaseException) -> FaultReason | None:
    """The storage fault behind `exc` (or the exceptions it was raised from), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _ERRNO_REASONS:
            return _ERRNO_REASONS[current.errno]
        if isinstance(current, sqlite3.Error):
            code = getattr(current, "sqlite_errorcode", None)
            if code is not None and code in _SQLITE_EXTENDED_REASONS:
                return _SQLITE_EXTENDED_REASONS[code]
            if code is not None and code & 0xFF in _SQLITE_REASONS:
                return _SQLITE_REASONS[code & 0xFF]
            text = str(current).lower()
            if "disk is full" in text:
                return "disk_full"
            if "malformed" in text or "not a database" in text or text.startswith(_UNDECODABLE):
                return "corrupt"
        current = current.__cause__ or current.__context__
    return None


# The most SQLite writes at once: a page of the largest size, with a WAL frame's header.
_LARGEST_DATABASE_WRITE = 65536 + 24


def database_fault_reason(exc: BaseException, database: str) -> FaultReason | None:
    """fault_reason for a failure of the SQLite database `database`. SQLite keeps the errno of
    a write refused by the file size limit to itself and reports an I/O error (EFBIG) or a full
    disk (a short write), so the database, its journal or its WAL grown to the limit says so."""
    reason = fault_reason(exc)
    if reason in ("io_error", "disk_full") and _at_file_size_limit(database):
        return "file_too_large"
    if reason == "io_error" and _marked_unwritable(database):
        return "permission_denied"
    return reason


def _at_file_size_limit(database: str) -> bool:
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return False
    for path in (database, f"{database}-wal", f"{database}-journal"):
        try:
            size = os.stat(path).st_size
        except OSError:
            continue
        if size + _LARGEST_DATABASE_WRITE > limit:
            return True
    return False


# Read in a child process: a descriptor this process opened on the database and then closed
# would drop every POSIX lock SQLite holds on the file here (SQLite keeps track of its own
# opens, not of others'), and another process could then checkpoint or recover it under orcad.
# Linux's FS_IOC_GETFLAGS, and its immutable and append-only flags (chattr +i, +a):
_READ_FLAGS = """
import array, fcntl, os, sys
for path in sys.argv[1:]:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        continue
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(descriptor, 0x80086601, flags, True)
    except OSError:
        continue
    if flags[0] & (0x10 | 0x20):
        print(path)
"""
_READ_FLAGS_TIMEOUT_S = 5.0


def _marked_unwritable(database: str) -> bool:
    """Whether the database, its journal or its WAL is immutable or append-only: SQLite keeps
    the errno (EPERM) of a write refused on a file it has open to itself and reports an I/O
    error, which sends the user to the disk. Asked only after such an error."""
    if not sys.platform.startswith("linux"):
        return False
    paths = [database, f"{database}-wal", f"{database}-journal"]
    try:
        found = subprocess.run(
            [sys.executable, "-I", "-c", _READ_FLAGS, *paths],
            capture_output=True,
            timeout=_READ_FLAGS_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return bool(found.stdout.strip())


def is_corruption(exc: BaseException) -> bool:
    return fault_reason(exc) == "corrupt"


# SQLITE_IOERR_SHORT_READ: a read past the end of a file, as of a WAL frame that was cut off.
_SHORT_READ = 522


def may_be_a_stale_view(exc: BaseException) -> bool:
    """Whether `exc` is a short read or damage SQLite reported, as a connection open while the
    database's -wal was cut short or its -shm written over reports them on every call: what it
    knows of the WAL (kept in the -shm, shared by the process's connections to the file) names
    frames that are gone. Once every such connection is closed, a new one may find it sound.
    A write the disk or a permission refused is not one: a new connection would not help, and
    may not even open (an immutable file), where the old one still reads."""
    if not isinstance(exc, sqlite3.Error):
        return False
    return getattr(exc, "sqlite_errorcode", None) == _SHORT_READ or fault_reason(exc) == "corrupt"


def storage_error_of(exc: BaseException, where: str = "") -> StorageError | None:
    """A StorageError saying what happened and what to do, or None for anything else. `where`
    names the file, a database's when the failure is SQLite's."""
    reason = database_fault_reason(exc, where) if where else fault_reason(exc)
    if reason is None:
        return None
    filename = getattr(exc, "filename", None)
    place = where or (str(filename) if filename else "")
    detail = getattr(exc, "strerror", None) or fault_text(exc) or type(exc).__name__
    prefix = f"{place}: " if place else ""
    return StorageError(f"{prefix}{detail}; {_ADVICE[reason]}", reason=reason)
