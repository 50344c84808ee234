"""Durable file writes, in one place: every file that holds truth is replaced atomically.

A temp file is written beside the target and fsynced, then renamed over it (or hard-linked to
a name that must not exist yet), then the directory is fsynced. Readers see the old bytes or the
new ones, never a mixture; after a crash the target is whole. OSError becomes StorageError.
`file_signature` is what every cache of a file's contents is keyed by.

A temp file is named `.<target>.<pid>-<random>.tmp`, and this process keeps the set of temps it
is writing right now, so a temp that no live writer owns (a crash's leftover, which may hold text
since forgotten) can be told apart from one being written and removed (`remove_leftover_temps`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from orcad.errors import StorageError
from orcad.failpoints import failpoint

FileSignature = tuple[int, int, int, int]  # (device, inode, size, mtime in ns)


def file_signature(path: Path) -> FileSignature | None:
    """What changes whenever a file is replaced, moved aside or edited; None when it cannot be
    stat'ed (absent, or unreadable: reading it then says why). Every cache of a file's
    contents in the daemon is keyed by this."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


_writing: set[str] = set()  # the names of the temps this process is writing now (each unique)
_writing_guard = threading.Lock()
# `.<target>.<pid>-<random>.tmp`, and the side files SQLite may add (`-journal`); a temp written
# before the pid was part of the name has none
_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.(?:(?P<pid>[0-9]+)-)?(?P<token>[0-9a-f]{16})\.tmp")


@contextlib.contextmanager
def temp_beside(path: Path) -> Iterator[Path]:
    """A new temp file name beside `path`, known to be in use by this process until the block
    ends (remove_leftover_temps leaves it alone meanwhile). The caller creates and removes it."""
    temp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(8)}.tmp")
    with _writing_guard:
        _writing.add(temp.name)
    try:
        yield temp
    finally:
        with _writing_guard:
            _writing.discard(temp.name)


def _write_synced(temp: Path, data: bytes) -> None:
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _write_all(descriptor, data)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def remove_stale_temps(path: Path) -> None:
    """Temps left by a crash between write and rename are garbage (call under the file's lock)."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()


def remove_leftover_temps(directory: Path, target: str = "*", max_age_s: float = 0.0) -> None:
    """Remove the temps (and their side files) of `target` files in `directory` that no live
    writer is using: safe without the files' lock. A temp is in use while this process writes it
    (temp_beside), or while the process named in it lives and it is younger than `max_age_s`
    (a writer in another process); a temp without a pid in its name was left by an earlier
    version, and only one daemon uses a memory root at a time."""
    for temp in directory.glob(f".{target}.*.tmp*"):
        if not _in_use(temp, max_age_s):
            with contextlib.suppress(OSError):
                temp.unlink()


def _in_use(temp: Path, max_age_s: float) -> bool:
    name = _TEMP_NAME.match(temp.name)
    if name is None or name["pid"] is None:
        return False
    pid = int(name["pid"])
    if pid == os.getpid():
        with _writing_guard:
            return name.group(0) in _writing  # the temp itself, also for its side files
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False  # its writer died
    except PermissionError:
        pass  # a live process of another user
    try:
        return time.time() - temp.stat().st_mtime < max_age_s
    except OSError:
        return False


def replace_file_atomically(path: Path, data: bytes, *, failpoints: str | None = None) -> None:
    """Replace `path` with `data` durably. With `failpoints="x"`, the points
    `x.after_temp_write` and `x.after_rename` are honoured (crash tests)."""
    with temp_beside(path) as temp:
        try:
            _write_synced(temp, data)
            if failpoints:
                failpoint(f"{failpoints}.after_temp_write")
            os.replace(temp, path)
            if failpoints:
                failpoint(f"{failpoints}.after_rename")
            fsync_directory(path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise StorageError(
                f"cannot write {path}: {exc.strerror or exc}", path=str(path)
            ) from exc


def replace_file_unless_changed(path: Path, data: bytes, read: FileSignature | None) -> bool:
    """Replace `path` with `data` durably, as replace_file_atomically does, unless the file is
    no longer the one that was read (`read`: its signature then, None when it was absent): an
    editor saved it meanwhile. Checked once the new bytes are on disk, right before the rename,
    so the window in which an edit is lost is no longer the time a large file takes to write.
    False (nothing changed) when it was changed."""
    with temp_beside(path) as temp:
        try:
            _write_synced(temp, data)
            if file_signature(path) != read:
                temp.unlink()
                return False
            os.replace(temp, path)
            fsync_directory(path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise StorageError(
                f"cannot write {path}: {exc.strerror or exc}", path=str(path)
            ) from exc
    return True


def create_file_exclusively(path: Path, data: bytes) -> bool:
    """Write a new file durably unless `path` exists; False (nothing written) if it does.

    The hard link fails when the name is taken, so an existing file is never replaced, even by
    another process, and no lock is needed. Where the system allows it (Linux), the data goes
    to an unnamed file that is linked into place: no temp name to create, remove or leave behind.
    """
    try:
        created = _link_unnamed_file(path, data)
        if created is None:
            created = _link_temp_file(path, data)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}", path=str(path)) from exc
    return created


_O_TMPFILE: int | None = getattr(os, "O_TMPFILE", None)
_PROC_FD_LINKS = os.path.isdir("/proc/self/fd")  # how an unnamed file's descriptor is linked


def _link_unnamed_file(path: Path, data: bytes) -> bool | None:
    """create_file_exclusively through O_TMPFILE; None when the file system cannot do it."""
    if _O_TMPFILE is None or not _PROC_FD_LINKS:
        return None
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            descriptor = os.open(path.parent, os.O_WRONLY | _O_TMPFILE, 0o600)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                return None  # this file system has no unnamed files
            raise
        try:
            _write_all(descriptor, data)
            os.fsync(descriptor)  # the data is durable before the name points at it
            try:
                os.link(f"/proc/self/fd/{descriptor}", path.name, dst_dir_fd=directory)
            except FileExistsError:
                return False
        finally:
            os.close(descriptor)  # an unnamed file that was not linked disappears here
        os.fsync(directory)
        return True
    finally:
        os.close(directory)


def _link_temp_file(path: Path, data: bytes) -> bool:
    with temp_beside(path) as temp:
        try:
            _write_synced(temp, data)
            try:
                os.link(temp, path)
            except FileExistsError:
                return False
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)
            fsync_directory(path.parent)
        except OSError:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
    return True
