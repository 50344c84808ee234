"""Keeping the daemon up and telling the service manager: background tasks run supervised
(restarted with back-off after a crash), and readiness, a health line and stopping are sent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog
import trio

from orcad.limits import (
    HEALTH_REPORT_INTERVAL_S,
    RESTART_FIRST_DELAY_S,
    RESTART_MAX_DELAY_S,
    RESTART_STABLE_AFTER_S,
)
from orcad.log import describe_exception
from orcad.notify import Notifier
from protocol.types import StatusParams, StatusResult

if TYPE_CHECKING:
    from orcad.app import Daemon

log = structlog.get_logger("orcad.supervision")


def restart_delay(previous_delay: float | None, ran_s: float) -> float:
    """How long to wait before starting a crashed task again."""
    if previous_delay is None or ran_s >= RESTART_STABLE_AFTER_S:
        return RESTART_FIRST_DELAY_S
    return min(previous_delay * 2, RESTART_MAX_DELAY_S)


def _innermost(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def supervised(
    name: str,
    task: Callable[..., Awaitable[None]],
    record: Callable[[str, str], None],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run `task` (started with `nursery.start`) and start it again whenever it crashes or
    returns after it started (background tasks run until the daemon stops, so a return is a
    bug too); a failure before it first started is a startup failure and propagates."""
    started = False
    delay: float | None = None
    while True:
        began = trio.current_time()
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(task)
                if not started:
                    started = True
                    task_status.started()
            delay = restart_delay(delay, trio.current_time() - began)
            log.error("background.stopped", task=name, restart_in_s=delay)
            record(
                "background_stopped",
                f"background task {name} stopped on its own; it is restarted after "
                f"{RESTART_FIRST_DELAY_S:g} s, doubling to {RESTART_MAX_DELAY_S:g} s while it "
                "keeps stopping",
            )
        except Exception as exc:
            cause: Any = _innermost(exc)
            if not started:  # a startup failure: reported as itself, not as a nursery's group
                raise cause from None if cause is exc else cause
            delay = restart_delay(delay, trio.current_time() - began)
            log.error(
                "background.crashed", task=name, restart_in_s=delay, **describe_exception(cause)
            )
            # One message per task and error type, whatever the delay: a task that keeps
            # crashing keeps one entry current instead of pushing other problems out.
            record(
                "background_crashed",
                f"background task {name} crashed ({type(cause).__name__}); it is restarted "
                f"after {RESTART_FIRST_DELAY_S:g} s, doubling to {RESTART_MAX_DELAY_S:g} s while "
                "it keeps crashing (event background.crashed in the log has the details)",
            )
        await trio.sleep(delay)


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
