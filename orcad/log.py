"""Structured logging: one JSON object per line on stderr, stable event names, no turn content.

A line that cannot be written is dropped: the log may be a file on a full disk, or a pipe whose
reader has gone (`orcad 2>&1 | head`), and a failed write must not fail the request that
logged, nor, raised again from the handler that logs the failure, stop the daemon.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from typing import Any, TextIO

import structlog


class StreamLogger:
    """structlog's PrintLogger, except that a line it cannot write (OSError: ENOSPC, EPIPE, EIO;
    ValueError: the stream was closed) is dropped. The line after a failed one
    starts on a line of its own, since the failed one may have been written in part."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()  # lines from the event loop and worker threads
        self._cut = False  # the last write failed, perhaps halfway through its line

    def msg(self, message: str) -> None:
        with self._lock:
            try:
                self._stream.write(f"\n{message}\n" if self._cut else f"{message}\n")
                self._stream.flush()
            except (OSError, ValueError):
                self._cut = True
            else:
                self._cut = False

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


def configure_logging(stream: TextIO | None = None, *, level: int = logging.INFO) -> None:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=StreamLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=True,
    )


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
