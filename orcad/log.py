"""Structured logging: one JSON object per line on stderr, stable event names, no turn content.

A line that cannot be written is dropped: the log may be a file on a full disk, or a pipe whose
reader has gone (`orcad 2>&1 | head`), and a failed write must not fail the request that
logged, nor, raised again from the handler that logs the failure, stop the daemon.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, TextIO

import structlog

# orcad.log is only appended to. Past this size it becomes orcad.log.1 (the one before that is
# dropped) and a new log begins: when orcactl starts a daemon, and while the daemon runs.
DAEMON_LOG_ROTATE_BYTES = 8 * 1024 * 1024
DAEMON_LOG_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK


def move_aside_if_past_bound(log_path: Path, *, only: os.stat_result | None = None) -> bool:
    """Move a log grown past its bound to `orcad.log.1`; anything but a regular file is left as
    it is. A symbolic link (the log kept elsewhere) is followed: the file it names is what grows,
    so that file is moved aside beside itself. With `only`, the file is moved only if it is that
    one (the log a daemon writes, not one that replaced it meanwhile). True when it was moved;
    raises OSError when it could not be (none there, orcad.log.1 a directory)."""
    real = Path(os.path.realpath(log_path))
    info = real.lstat()
    if not stat.S_ISREG(info.st_mode) or info.st_size <= DAEMON_LOG_ROTATE_BYTES:
        return False
    if only is not None and (info.st_dev, info.st_ino) != (only.st_dev, only.st_ino):
        return False
    os.replace(real, real.with_name(real.name + ".1"))
    return True


class RunningLogRotation:
    """Rotation of the log a running daemon writes on one descriptor (its stderr), so that the
    log of a daemon that runs for months stays bounded too. The new log is put on the same
    descriptor, so every writer to stderr follows it.

    The check is one fstat per line written. The rotation is taken under orcactl's
    `orcad.log.lock` without waiting (a start rotating the log at that moment does it for both).
    A rotation that fails (orcad.log.1 a directory, the disk full) is tried again only once
    the log has grown by another 1 MiB: it is housekeeping, and the log grows as before."""

    RETRY_AFTER_BYTES = 1024 * 1024

    def __init__(self, path: Path, fd: int) -> None:
        self._path = path
        self._fd = fd
        self._due_at = DAEMON_LOG_ROTATE_BYTES

    @classmethod
    def of(cls, path: Path, fd: int) -> RunningLogRotation | None:
        """The rotation of `fd`'s file, or None when that is not the regular file at `path`: a
        stderr that is a terminal, a pipe or a file the user chose is left alone."""
        try:
            writing = os.fstat(fd)
            there = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(writing.st_mode):
            return None
        if (writing.st_dev, writing.st_ino) != (there.st_dev, there.st_ino):
            return None
        return cls(path, fd)

    def after_write(self) -> None:
        try:
            info = os.fstat(self._fd)
        except OSError:
            return
        if info.st_size <= self._due_at:
            return
        try:
            self._rotate(info)
        except OSError:  # filelock.Timeout included
            self._due_at = info.st_size + self.RETRY_AFTER_BYTES
        else:
            self._due_at = DAEMON_LOG_ROTATE_BYTES

    def _rotate(self, writing: os.stat_result) -> None:
        import filelock  # noqa: PLC0415  (only a rotation needs it)

        lock = filelock.FileLock(str(self._path.with_name(self._path.name + ".lock")), mode=0o600)
        with lock.acquire(timeout=0):
            if not move_aside_if_past_bound(self._path, only=writing):
                # orcad.log is another file now (moved aside by hand, say): this one is not it
                raise OSError("the log written is no longer the one at its path")
            # stdout too, when it is the same log (orcactl starts orcad so): left on the old
            # one, it would hold that file open, and its disk space, once the next rotation
            # drops it
            writers = [self._fd, *(fd for fd in (1, 2) if fd != self._fd and _is(fd, writing))]
            fresh = os.open(self._path, DAEMON_LOG_OPEN_FLAGS, 0o600)
            try:
                for fd in writers:
                    os.dup2(fresh, fd)
            finally:
                os.close(fresh)


def _is(fd: int, file: os.stat_result) -> bool:
    """Whether descriptor `fd` is open on `file`."""
    try:
        info = os.fstat(fd)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == (file.st_dev, file.st_ino)


class StreamLogger:
    """structlog's PrintLogger, except that a line it cannot write (OSError: ENOSPC, EPIPE, EIO;
    ValueError: the stream was closed) is dropped. The line after a failed one
    starts on a line of its own, since the failed one may have been written in part."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()  # lines from the event loop and worker threads
        self._cut = False  # the last write failed, perhaps halfway through its line
        self._rotation: RunningLogRotation | None = None

    def rotate_as(self, *paths: Path) -> None:
        """Rotate the stream's file while it is written, when it is the file at one of `paths`."""
        with self._lock:
            try:
                fd = self._stream.fileno()
            except (OSError, ValueError):  # a stream with no descriptor: nothing to rotate
                return
            for path in paths:
                self._rotation = RunningLogRotation.of(path, fd)
                if self._rotation is not None:
                    return

    def msg(self, message: str) -> None:
        with self._lock:
            try:
                self._stream.write(f"\n{message}\n" if self._cut else f"{message}\n")
                self._stream.flush()
            except (OSError, ValueError):
                self._cut = True
            else:
                self._cut = False
                if self._rotation is not None:
                    self._rotation.after_write()

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


class StreamLoggerFactory:
    """One StreamLogger for the stream, whatever the logger's name."""

    def __init__(self, stream: TextIO) -> None:
        self.logger = StreamLogger(stream)

    def __call__(self, *_args: Any) -> StreamLogger:
        return self.logger


def say(message: str) -> None:
    """A line for the user on stderr, dropped when it cannot be written (see the module)."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def configure_logging(stream: TextIO | None = None, *, level: int = logging.INFO) -> StreamLogger:
    """JSON lines on `stream` (stderr by default); returns the logger that writes them."""
    factory = StreamLoggerFactory(stream or sys.stderr)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    return factory.logger


def describe_exception(exc: BaseException) -> dict[str, str]:
    """Log fields for an unexpected exception: its type and frames, never its message.

    Exception messages can quote request content (a cwd, a fact, a prompt); frames cannot.
    """
    chain: list[str] = []
    frames: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 8:
        chain.append(type(seen).__qualname__)
        frames[:0] = traceback.format_tb(seen.__traceback__)
        seen = seen.__cause__ or seen.__context__
    return {"error_type": " <- ".join(chain), "traceback": "".join(frames)}
