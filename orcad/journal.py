"""Log lines for the systemd journal: `<priority>event key=value ...`, no timestamp.

journald stamps each line itself and reads the `<N>` prefix as the syslog priority, so
`journalctl --user -u orcad -p warning` filters properly. Used only when stderr really is the
journal (JOURNAL_STREAM names stderr's device and inode); otherwise orcad logs JSON lines.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import structlog

from orcad.log import StreamLoggerFactory

# syslog priorities (sd-daemon.h SD_ERR ... SD_DEBUG)
PRIORITIES = {"critical": 2, "error": 3, "warning": 4, "info": 6, "debug": 7}


def stderr_is_journal(environ: Mapping[str, str], stream: TextIO | None = None) -> bool:
    value = environ.get("JOURNAL_STREAM", "")
    device, _, inode = value.partition(":")
    if not (device.isdigit() and inode.isdigit()):
        return False
    try:
        info = os.fstat((stream or sys.stderr).fileno())
    except (OSError, ValueError):
        return False
    return (info.st_dev, info.st_ino) == (int(device), int(inode))


def render_journal_line(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> str:
    priority = PRIORITIES.get(str(event.pop("level", "info")), 6)
    name = event.pop("event", "")
    traceback = event.pop("exception", None)
    line = f"<{priority}>{name}"
    if event:
        line += " " + structlog.processors.LogfmtRenderer(bool_as_flag=False)(_logger, _name, event)
    if traceback:
        line += "\n" + "\n".join(f"<{priority}>  {row}" for row in str(traceback).splitlines())
    return line


def configure_journal_logging(stream: TextIO | None = None, *, level: int = logging.INFO) -> None:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            render_journal_line,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=StreamLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=True,
    )
