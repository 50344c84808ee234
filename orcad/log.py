"""Structured logging: one JSON object per line on stderr, stable event names, no turn content."""

from __future__ import annotations

import logging
import sys
import traceback
from typing import TextIO

import structlog


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
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
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
