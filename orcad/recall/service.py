"""Recall for one turn: barrier, automatic and deliberate selection, caps, snapshot, context.

Order of work for a turn's first recall: wait at most `RECALL_BARRIER_S` for this session's
extraction jobs for its project queued before the call (spec: the five-second barrier), derive
the query terms once, search the project's automatic memory and the deliberate records at the
same time, apply the caps, render the context and fix the result as the turn's snapshot. Later
recalls of the same turn return that snapshot unchanged.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import structlog
import trio

from orcad.capture.ledger import CandidateRecord
from orcad.clock import Clock
from orcad.errors import Disabled
from orcad.limits import (
    RECALL_AUTOMATIC_MAX_ENTRIES,
    RECALL_BARRIER_S,
    RECALL_DELIBERATE_MAX_RECORDS,
)
from orcad.query import distinct_terms
from orcad.recall.embedding import Embeddings, PromptQuery
from orcad.recall.render import render_context
from orcad.recall.select import cap_automatic, cap_deliberate, to_entry, visible_record
from orcad.recall.snapshot_table import SnapshotKey
from orcad.recall.snapshots import SnapshotStore
from orcad.session_snapshot import Session
from orcad.sessions import SessionStore
from orcad.threads import run_sync_now
from protocol.types import Barrier, DeliberateEntry, RecallParams, RecallResult

log = structlog.get_logger("orcad.recall")

# Ranked candidates fetched beyond the entry caps, so that the size caps can skip a long entry
# and still fill the part with shorter, lower-ranked ones.
AUTOMATIC_FETCH = 2 * RECALL_AUTOMATIC_MAX_ENTRIES
DELIBERATE_FETCH = 2 * RECALL_DELIBERATE_MAX_RECORDS
SEARCH_THREADS = 4  # recalls searching at once; more only queue on the stores' locks


class AutomaticSearch(Protocol):
    def search_blocking(
        self, project_id: str, terms: list[str], limit: int, query: PromptQuery | None = None
    ) -> list[CandidateRecord]: ...


class DeliberateSearch(Protocol):
    def search_blocking(
        self,
        session: Session,
        prompt: str,
        terms: Sequence[str],
        limit: int,
        query: PromptQuery | None = None,
    ) -> list[DeliberateEntry]: ...


class SessionJobs(Protocol):
    # the capture feature's signature (a bounded wait that reports how it ended)
    async def wait_session_jobs(
        self,
        session_id: str,
        project_id: str,
        timeout: float,  # noqa: ASYNC109
    ) -> Barrier: ...


def new_snapshot_id() -> str:
    return "snap_" + secrets.token_hex(16)


def disabled_for_bare(session: Session, method: str) -> None:
    if session.bare:
        raise Disabled(
            f"{method} is disabled for bare sessions; open the session without `bare` "
            "to use memory",
            feature=method,
        )


class RecallService:
    def __init__(
        self,
        *,
        sessions: SessionStore,
        clock: Clock,
        snapshots: SnapshotStore,
        automatic: AutomaticSearch,
        deliberate: DeliberateSearch | None,
        jobs: SessionJobs | None,
        active_jobs: Callable[[], int] = lambda: 0,
        barrier_s: float = RECALL_BARRIER_S,
        embeddings: Embeddings | None = None,
        record_error: Callable[[str, str], None] | None = None,
    ) -> None:
        self.embeddings = embeddings
        self.record_error = record_error
        self.active_jobs = active_jobs
        self.sessions = sessions
        self.clock = clock
        self.snapshots = snapshots
        self.automatic = automatic
        self.deliberate = deliberate
        self.jobs = jobs
        self.barrier_s = barrier_s
        self._search_threads = trio.CapacityLimiter(SEARCH_THREADS)
        # drops the snapshots of a deliberate database deleted or replaced since the last
        # recall, before a snapshot is looked up (set by install)
        self.forget_replaced_database: Callable[[], Awaitable[None]] | None = None

    async def recall(self, params: RecallParams) -> RecallResult:
        """The turn's snapshot, taken now if this is its first recall in this opening of the
        session (its epoch) and its workspace."""
        session = await self.sessions.require(params.session_id, params.epoch)
        disabled_for_bare(session, "recall")
        if self.forget_replaced_database is not None:
            await self.forget_replaced_database()
        key = SnapshotKey(session.session_id, session.epoch, session.workspace_id, params.turn_id)
        return await self.snapshots.get_or_take(
            key,
            lambda: self.take(session, params),
        )

    async def take(self, session: Session, params: RecallParams) -> RecallResult:
        """A fresh recall for the turn (no snapshot consulted)."""
        barrier = await self.wait_barrier(session)
        terms = distinct_terms(params.prompt)  # each part keeps its most selective 12
        if terms:
            result = await run_sync_now(
                lambda: self._search_and_compose(session, params.prompt, terms, barrier),
                self._search_threads,
            )
        else:
            result = self._compose([], [], barrier)
        log.debug(
            "recall.taken",
            session_id=session.session_id,
            turn_id=params.turn_id,
            barrier=barrier,
            automatic=len(result.automatic),
            deliberate=len(result.deliberate),
            terms=len(terms),
        )
        return result

    def _search_and_compose(
        self,
        session: Session,
        prompt: str,
        terms: list[str],
        barrier: Barrier,
    ) -> RecallResult:
        """Both searches and the result in one worker thread: a thread hop costs about as much
        as the automatic search itself, and side by side the two only contend for the
        interpreter lock."""
        query = None if self.embeddings is None else self.embeddings.query(prompt)
        automatic: list[CandidateRecord] = []
        if session.auto_memory:
            try:
                automatic = self.automatic.search_blocking(
                    session.project_id, terms, AUTOMATIC_FETCH, query
                )
            except Exception as exc:  # one part's failure must not take the other down
                self._part_failed("automatic", exc, session)
        deliberate: list[DeliberateEntry] = []
        if self.deliberate is not None:
            try:
                deliberate = self.deliberate.search_blocking(
                    session, prompt, terms, DELIBERATE_FETCH, query
                )
            except Exception as exc:
                self._part_failed("deliberate", exc, session)
        return self._compose(automatic, deliberate, barrier)

    def _part_failed(self, part: str, exc: Exception, session: Session) -> None:
        message = f"{part} recall failed: {type(exc).__name__}: {exc}"
        log.warning("recall.part_failed", part=part, session_id=session.session_id, error=message)
        if self.record_error is not None:
            self.record_error("recall", message)

    def _compose(
        self,
        automatic: list[CandidateRecord],
        deliberate: list[DeliberateEntry],
        barrier: Barrier,
    ) -> RecallResult:
        """Caps, context and a new snapshot id: pure, so that it can run in the search thread."""
        now = self.clock.now()
        automatic_entries = cap_automatic(to_entry(record, now) for record in automatic)
        # capped as stored, escaped once chosen: a record cut to fit is cut between its own
        # characters (never inside an escape) and its marker counts them as memory.search has them
        deliberate_entries = list(map(visible_record, cap_deliberate(deliberate, now)))
        context = render_context(automatic_entries, deliberate_entries, now)
        return RecallResult(
            snapshot_id=new_snapshot_id(),
            barrier=barrier,
            automatic=automatic_entries,
            deliberate=deliberate_entries,
            context=context,
            bytes=len(context.encode("utf-8")),
        )

    async def wait_barrier(self, session: Session) -> Barrier:
        if self.jobs is None or not session.auto_memory:
            return "none"
        if self.active_jobs():  # only then can this session have something to wait for
            log.info("recall.barrier_wait", session_id=session.session_id)
        barrier = await self.jobs.wait_session_jobs(
            session.session_id, session.project_id, self.barrier_s
        )
        if barrier != "none":
            log.info("recall.barrier_done", session_id=session.session_id, barrier=barrier)
        return barrier
