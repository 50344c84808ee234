"""Problems the capture feature met (damaged files, failed projections, unreachable stores):
logged each time, and each time listed in daemon.status, where a message already listed moves
to the end with its new time (`Daemon.record_error`), so one that comes back after newer
problems pushed it out is listed again, and nothing here grows with the problems met."""

from __future__ import annotations

from collections.abc import Callable

import structlog

log = structlog.get_logger("orcad.capture")

ErrorRecorder = Callable[[str, str], None]


class Problems:
    def __init__(self, record_error: ErrorRecorder) -> None:
        self._record_error = record_error

    def report(self, kind: str, message: str) -> None:
        log.warning("capture.problem", kind=kind, problem=message)
        self._record_error(kind, message)
