"""The job index: every job as last written or read, owned by the event loop.

Job files are the truth; this index (filled by scanning at start, updated on the event loop
after every write, before the request that made it is answered) serves scheduling, counts,
listings and the recall barrier. Every change goes through `put` and `drop`, which keep the
counts current (daemon.status reads them on every call) and wake whoever waits: workers on
`changed_event`, recalls on a job finishing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Collection, Iterable
from typing import Literal

import msgspec
import trio

from orcad.capture.jobstore import DamagedJobFile
from orcad.capture.records import JobRecord, summary_of
from orcad.capture.schedule import JobView, claimable_at, view_of
from orcad.capture.states import ACTIVE_STATES, TERMINAL_STATES
from orcad.clock import format_time
from orcad.errors import NotFound, quoted
from protocol.types import DamagedJob, JobCounts, JobSummary

Barrier = Literal["clear", "timed_out", "none"]

_SAME_S = 0.001  # stored times have milliseconds: closer than that, the stored text is shown


class JobIndex:
    def __init__(self) -> None:
        self._views: dict[str, JobView] = {}
        self._summaries: dict[str, JobSummary] = {}
        self._state_counts: collections.Counter[str] = collections.Counter()
        self._active_by_project: collections.Counter[str] = collections.Counter()
        self._projects: set[str] = set()
        # pending jobs with a retry's not_before -> that time (daemon.status counts the ones not
        # passed yet)
        self._not_before: dict[str, float] = {}
        self._damaged: dict[str, DamagedJobFile] = {}  # job id -> its file that does not parse
        self._finished: dict[str, trio.Event] = {}  # job id -> set once the job is terminal
        self._changed = trio.Event()

    # --- changes ----------------------------------------------------------------------------

    def put(self, job: JobRecord, *, notify: bool = True) -> None:
        """The job as just written or read; wakes the workers unless told not to."""
        self._drop_view(job.job_id)
        view = view_of(job)
        self._views[job.job_id] = view
        self._state_counts[view.state] += 1
        if view.state in ACTIVE_STATES:
            self._active_by_project[view.project_id] += 1
        if view.state == "pending" and view.not_before is not None:
            self._not_before[job.job_id] = view.not_before
        self._summaries[job.job_id] = summary_of(job)
        self._projects.add(job.project_id)
        if job.state in TERMINAL_STATES:
            self._job_finished(job.job_id)
        if notify:
            self.notify()

    def drop(self, job_ids: Iterable[str]) -> None:
        """Jobs whose files are gone (deleted, or found damaged)."""
        for job_id in job_ids:
            self._drop_view(job_id)
            self._summaries.pop(job_id, None)
            self._job_finished(job_id)

    def mark_damaged(self, found: DamagedJobFile) -> None:
        """A job whose file no longer parses: out of the index, listed as damaged."""
        self.drop([found.job_id])
        self._damaged[found.job_id] = found

    def forget_damaged(self, job_id: str) -> None:
        """A damaged job file no longer there (moved away, deleted) or sound again."""
        self._damaged.pop(job_id, None)

    def add_project(self, project_id: str) -> None:
        self._projects.add(project_id)

    def forget_project(self, project_id: str) -> None:
        """A project whose directory is gone (moved or deleted): no longer listed, nor its
        jobs or damaged job files."""
        self.drop([view.job_id for view in self.views(project_id)])
        self._projects.discard(project_id)
        for job_id in [j for j, found in self._damaged.items() if found.project_id == project_id]:
            del self._damaged[job_id]

    def _drop_view(self, job_id: str) -> None:
        old = self._views.pop(job_id, None)
        self._not_before.pop(job_id, None)
        if old is not None:
            self._state_counts[old.state] -= 1
            if old.state in ACTIVE_STATES:
                self._active_by_project[old.project_id] -= 1

    def _job_finished(self, job_id: str) -> None:
        event = self._finished.pop(job_id, None)
        if event is not None:
            event.set()

    # --- change notification (workers wait on it) -------------------------------------------

    def changed_event(self) -> trio.Event:
        """An event set at the next change to any job (take it before planning)."""
        return self._changed

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # --- reads ------------------------------------------------------------------------------

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._views

    def view(self, job_id: str) -> JobView | None:
        return self._views.get(job_id)

    def damaged_file(self, job_id: str) -> DamagedJobFile | None:
        return self._damaged.get(job_id)

    def project_of(self, job_id: str) -> str:
        view = self._views.get(job_id)
        if view is None:
            raise NotFound(f"unknown job {quoted(job_id)}; list jobs with jobs.list")
        return view.project_id

    def views(self, project_id: str | None = None) -> list[JobView]:
        return [
            view
            for view in self._views.values()
            if project_id is None or view.project_id == project_id
        ]

    def active_jobs(self, project_id: str) -> int:
        return self._active_by_project[project_id]

    def job_counts(
        self, now: float | None = None, honoured: Callable[[JobView], JobView] | None = None
    ) -> JobCounts:
        """The jobs by state; with `now` (wall time) also the pending jobs still waiting out a
        retry's `not_before` at `now`, their waits taken as `honoured` gives them (a job whose
        wait is over is simply pending: it runs once a worker is free)."""
        counts = self._state_counts
        waits = []
        if now is not None:
            for job_id in self._not_before:
                wait = self._wait(job_id, now, honoured)
                if wait is not None:
                    waits.append(wait)
        return JobCounts(
            pending=counts["pending"],
            leased=counts["leased"],
            committed=counts["committed"],
            exhausted=counts["exhausted"],
            cancelled=counts["cancelled"],
            damaged=len(self._damaged),
            waiting_retry=len(waits),
            next_try_at=min(waits, key=lambda wait: wait[0])[1] if waits else None,
        )

    def _wait(
        self, job_id: str, now: float, honoured: Callable[[JobView], JobView] | None
    ) -> tuple[float, str] | None:
        """When a pending job with a retry's `not_before` can be claimed, as a time and as
        shown (the stored text when that is the time), or None when that is not after `now`."""
        stored = self._not_before.get(job_id)
        if stored is None:
            return None
        view = self._views[job_id]
        if honoured is not None:
            view = honoured(view)
        at = claimable_at(view, now)
        if at is None or at <= now:
            return None
        summary = self._summaries.get(job_id)
        if summary is not None and summary.not_before is not None and abs(at - stored) < _SAME_S:
            return at, summary.not_before
        return at, format_time(at)

    def project_count(self) -> int:
        return len(self._projects)

    def known_projects(self) -> set[str]:
        return set(self._projects)

    def summaries(
        self,
        project_id: str | None = None,
        state: str | None = None,
        *,
        now: float | None = None,
        honoured: Callable[[JobView], JobView] | None = None,
    ) -> list[JobSummary]:
        """Jobs as jobs.list shows them, oldest first; with `now` (wall time) a pending job's
        `not_before` is the time its wait ends as `honoured` gives it, and None once that is
        not after `now` (as job_counts counts it)."""
        found = [
            summary
            for summary in self._summaries.values()
            if (project_id is None or summary.project_id == project_id)
            and (state is None or summary.state == state)
        ]
        if now is not None:
            found = [self._waiting(summary, now, honoured) for summary in found]
        return sorted(found, key=lambda summary: (summary.created_at, summary.job_id))

    def _waiting(
        self, summary: JobSummary, now: float, honoured: Callable[[JobView], JobView] | None
    ) -> JobSummary:
        if summary.not_before is None:
            return summary
        wait = self._wait(summary.job_id, now, honoured)
        shown = wait[1] if wait is not None else None
        if shown == summary.not_before:
            return summary
        return msgspec.structs.replace(summary, not_before=shown)

    def damaged_files(self) -> list[DamagedJobFile]:
        return list(self._damaged.values())

    def damaged_jobs(self, project_id: str | None = None) -> list[DamagedJob]:
        """Job files that do not parse (kept as found), for jobs.list and doctor."""
        return [
            DamagedJob(
                job_id=found.job_id,
                project_id=found.project_id,
                path=found.path,
                problem=found.problem,
            )
            for found in sorted(self._damaged.values(), key=lambda found: found.path)
            if project_id is None or found.project_id == project_id
        ]

    # --- the recall barrier -----------------------------------------------------------------

    async def wait_session_jobs(
        self,
        session_id: str,
        project_id: str,
        timeout: float,  # noqa: ASYNC109 (recall's interface: a bounded wait that says how it ended)
        *,
        among: Collection[str] | None = None,
        cannot_finish: Callable[[JobView], bool] = lambda view: False,
    ) -> Barrier:
        """Wait until every job of the session for the project that is queued or running now
        is finished (committed, exhausted or cancelled): "clear"; "timed_out" after `timeout`
        seconds; "none" when the session has no such job. Jobs admitted later are not waited
        for, nor those outside `among` (the jobs queued when the caller was called), nor those
        that `cannot_finish` for now, nor those of another project (the session id opened there
        before): they cannot change what this project recalls."""
        waiting = [
            self._finished_event(view.job_id)
            for view in self._views.values()
            if view.session_id == session_id
            and view.project_id == project_id
            and view.state in ACTIVE_STATES
            and (among is None or view.job_id in among)
            and not cannot_finish(view)
        ]
        if not waiting:
            return "none"
        with trio.move_on_after(timeout):
            for event in waiting:
                await event.wait()
            return "clear"
        return "timed_out"

    def _finished_event(self, job_id: str) -> trio.Event:
        event = self._finished.get(job_id)
        if event is None:
            event = self._finished[job_id] = trio.Event()
        return event
