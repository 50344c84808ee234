"""Problems the capture feature met (damaged files, failed projections, unreachable stores):
logged each time, listed in daemon.status once per distinct message."""

from __future__ import annotations

from collections.abc import Callable

import structlog

log = structlog.get_logger("orcad.capture")

ErrorRecorder = Callable[[str, str], None]


class Problems:
    def __init__(self, record_error: ErrorRecorder) -> None:
        self._record_error = record_error
        self._reported: set[str] = set()

    def report(self, kind: str, message: str) -> None:
        log.warning("capture.problem", kind=kind, problem=message)
        if message not in self._reported:
            self._reported.add(message)
            self._record_error(kind, message)
