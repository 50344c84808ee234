"""Reading a file that must be regular, without ever waiting on it: the read side's one guard.

Reading a FIFO waits for a writer that may never come, and a device such as /dev/zero never
ends, so the path is opened without blocking and anything but a regular file is refused before
a byte is read. Standard library only: `orcactl hook`, which runs on every prompt, uses it too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


class NotARegularFile(OSError):
    """A FIFO, device, socket or directory where a file was expected."""


@contextlib.contextmanager
def open_regular_file(path: Path | str, *, follow_symlinks: bool = True) -> Iterator[BinaryIO]:
    """The regular file at `path`, open for reading in binary, for a reader that seeks or checks
    the size first. Anything but a regular file raises NotARegularFile; with
    `follow_symlinks=False` a symbolic link is not followed either (OSError, ELOOP). Other errors
    are raised as opening and reading raise them (FileNotFoundError, PermissionError, ...)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    descriptor = os.open(path, flags if follow_symlinks else flags | os.O_NOFOLLOW)
    try:
        # checked before open() wraps it: open() refuses a directory itself, naming the number
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotARegularFile(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(descriptor)
        raise
    with open(descriptor, "rb") as file:
        yield file


def read_regular_file(path: Path | str, limit: int = -1, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file at `path` (its first `limit` when given), as
    open_regular_file opens it."""
    with open_regular_file(path, follow_symlinks=follow_symlinks) as file:
        return file.read(limit)
