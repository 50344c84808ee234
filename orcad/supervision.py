"""What the service manager hears from a running daemon: readiness, a health line, stopping."""

from __future__ import annotations

import trio

from orcad.app import Daemon
from orcad.notify import Notifier
from protocol.types import StatusParams, StatusResult

HEALTH_REPORT_INTERVAL_S = 30.0  # how often `systemctl --user status orcad` gets fresh numbers


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def describe_health(status: StatusResult) -> str:
    """One short line for STATUS=: what is busy, what is queued, what went wrong."""
    jobs = status.jobs
    parts = [
        f"workers {status.workers.busy}/{status.workers.configured} busy",
        f"jobs {jobs.pending} pending, {jobs.leased} leased, {jobs.exhausted} exhausted",
        _plural(status.sessions, "session"),
        _plural(status.projects, "project"),
    ]
    if status.recent_errors:
        parts.append(_plural(len(status.recent_errors), "recent error"))
    return "; ".join(parts)


class Supervisor:
    """Hooks for `serve`: READY=1 once accepting, STOPPING=1 on the stop signal, and a periodic
    STATUS= health line in between."""

    def __init__(
        self, notifier: Notifier, daemon: Daemon, interval_s: float = HEALTH_REPORT_INTERVAL_S
    ) -> None:
        self.notifier = notifier
        self.daemon = daemon
        self.interval_s = interval_s
        self._ready = trio.Event()
        if notifier.enabled:
            daemon.background.append(self.report_health)

    def ready(self) -> None:
        self.notifier.ready(f"serving on {self.daemon.paths.socket}")
        self._ready.set()

    def stopping(self) -> None:
        self.notifier.stopping("stopping: finishing requests in flight, releasing leases")

    async def report_health(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        await self._ready.wait()
        while True:
            status = self.daemon.status(StatusParams())
            self.notifier.status(f"serving; {describe_health(status)}")
            await trio.sleep(self.interval_s)
