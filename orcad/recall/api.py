"""Recall and explicit facts as daemon methods: `recall`, `remember`, and the startup context.

`install(host, capture=..., deliberate=...)` is given the automatic memory (the capture
feature's project directories, locks and job barrier) and the deliberate-memory service
explicitly; it routes the two methods and returns the parts the composition root connects:
the snapshots (purged when memory is forgotten), the startup reader and the embedding status.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
import trio
import trio.lowlevel

from orcad.capture.project_access import ProjectAccess
from orcad.capture.service import CaptureService
from orcad.clock import format_time
from orcad.deliberate.api import DeliberateMemory
from orcad.deliberate.store import StoredRecord
from orcad.deliberate.vectors import VectorMatrix, hybrid_search, pending, progress, store_vectors
from orcad.explicit import append_fact, format_fact, read_bounded, remember_fact
from orcad.host import Host
from orcad.limits import (
    RECALL_BACKFILL_BATCH,
    RECALL_BACKFILL_IDLE_S,
    STARTUP_PROJECT_MAX_BYTES,
    STARTUP_USER_MAX_BYTES,
)
from orcad.recall import rank
from orcad.recall.automatic import ProjectMemorySearch
from orcad.recall.embedding import Array, Embeddings
from orcad.recall.service import RecallService, disabled_for_bare
from orcad.recall.snapshots import SnapshotStore
from orcad.sessions import Session
from protocol.types import (
    DeliberateEntry,
    EmbeddingStatus,
    RememberParams,
    RememberResult,
    Startup,
)

log = structlog.get_logger("orcad.recall")

PROJECT_MEMORY_FILE = "memory.md"


class ExplicitFacts:
    """`remember` and the startup context: user.md and each project's memory.md."""

    def __init__(self, host: Host, projects: ProjectAccess) -> None:
        self._host = host
        self._projects = projects

    def project_file(self, project_id: str) -> Path:
        return self._projects.project_dir(project_id) / PROJECT_MEMORY_FILE

    async def remember(self, params: RememberParams) -> RememberResult:
        session = await self._host.sessions.require(params.session_id, params.epoch)
        disabled_for_bare(session, "remember")
        if params.scope == "user":
            path = self._host.paths.user_memory_file
            size = await trio.to_thread.run_sync(remember_fact, path, params.text)
        else:
            # memory.md is written under the project's lock, like the ledger beside it
            line = format_fact(params.text)
            path = self.project_file(session.project_id)
            size = await self._projects.run_locked(
                session.project_id, lambda directory: append_fact(path, line)
            )
        return RememberResult(path=str(path), bytes=size)

    async def read_startup(self, session: Session) -> Startup:
        user_file = self._host.paths.user_memory_file
        project_file = self.project_file(session.project_id)

        def read() -> Startup:
            user, user_cut = read_bounded(user_file, STARTUP_USER_MAX_BYTES)
            project, project_cut = read_bounded(project_file, STARTUP_PROJECT_MAX_BYTES)
            return Startup(user=user, project=project, truncated=user_cut or project_cut)

        return await trio.to_thread.run_sync(read)


class DeliberateRecall:
    """The deliberate part of recall, from the deliberate-memory service: with the prompt's
    vector, hybrid (lexical and nearest vectors, ranked by orcad.recall.rank); without, the
    store's lexical search as before."""

    def __init__(self, service: DeliberateMemory, embeddings: Embeddings | None = None) -> None:
        self._service = service
        self._embeddings = embeddings
        self._matrix: list[VectorMatrix | None] = [None]

    def search_blocking(
        self,
        session: Session,
        prompt: str,
        terms: Sequence[str],
        limit: int,
        query_vector: Array | None = None,
    ) -> list[DeliberateEntry]:
        service = self._service
        if session.bare or not prompt.strip() or limit < 1:
            return []
        embeddings = self._embeddings
        model = None if embeddings is None else embeddings.model_id
        vector = query_vector if model is not None else None
        found = service.store.query_blocking(
            lambda connection: hybrid_search(
                connection, session.workspace_id, terms, vector, model, limit, self._matrix
            )
        )
        if vector is None or embeddings is None:  # lexical, as before: bm25 order
            return [to_entry(item.record) for item in found.found]
        cosines = {item.record.id: item.cosine for item in found.found}
        unembedded = [item.record for item in found.found if item.cosine is None]
        if unembedded:  # written since the backfill's last pass: embed them for this recall
            matrix = embeddings.embed([record.content for record in unembedded])
            if matrix is not None:
                for record, row in zip(unembedded, matrix, strict=True):
                    cosines[record.id] = float(row @ query_vector)
        weights = rank.query_weights(found.terms, found.frequency, found.total)
        by_key = {item.record.id: item.record for item in found.found}
        chosen = rank.rank(
            [
                rank.Candidate(
                    key=item.record.id,
                    text=item.record.content,
                    recorded_at=item.record.updated_at,
                    coverage=rank.coverage(rank.text_stems(item.record.content), weights),
                    cosine=cosines[item.record.id],
                )
                for item in found.found
            ],
            semantic=True,
            limit=limit,
            floor=embeddings.floor,
            gate=embeddings.gate,
            lexical_weight=embeddings.lexical_weight,
        )
        return [to_entry(by_key[c.key]) for c in chosen]


def to_entry(record: StoredRecord) -> DeliberateEntry:
    return DeliberateEntry(
        id=record.id,
        kind=record.kind,
        content=record.content,
        scope="global" if record.is_global else "workspace",
        updated_at=format_time(record.updated_at),
    )


class Backfill:
    """Embeds deliberate records that have no vector of the current model (records written
    since the last pass, or all of them after an upgrade or a model change), in small batches
    in the background; recall ranks them lexically until then."""

    def __init__(self, service: DeliberateMemory, embeddings: Embeddings) -> None:
        self._service = service
        self._embeddings = embeddings
        self.embedded = 0
        self.pending = 0
        self._seen_changes: int | None = None

    def step_blocking(self) -> int:
        """One batch: how many records were embedded (0 when there is nothing to do)."""
        service = self._service
        model = self._embeddings.model_id
        if model is None or service.store.damage is not None:
            return 0
        store = service.store

        def read(connection: sqlite3.Connection) -> list[tuple[int, str]] | None:
            if self._seen_changes == connection.total_changes and not self.pending:
                return None  # nothing written since the last pass found nothing to do
            self.embedded, self.pending = progress(connection, model)
            self._seen_changes = connection.total_changes
            return pending(connection, model, RECALL_BACKFILL_BATCH) if self.pending else []

        rows = store.query_blocking(read)
        if not rows:
            return 0
        vectors = self._embeddings.embed([content for _row, content in rows])
        if vectors is None:
            return 0
        stored = store.query_blocking(lambda c: store_vectors(c, model, rows, vectors))
        self.embedded += stored
        self.pending = max(0, self.pending - stored)
        self._seen_changes = None  # our own write moved the counter
        return len(rows)

    def refresh_blocking(self) -> None:
        """Read the progress now (status is right before the first batch is done)."""
        service = self._service
        model = self._embeddings.model_id
        if model is None or service.store.damage is not None:
            return
        self.embedded, self.pending = service.store.query_blocking(
            lambda connection: progress(connection, model)
        )

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await trio.to_thread.run_sync(self.refresh_blocking)
        except Exception as exc:  # reported by the first step's failure as well
            log.warning("recall.backfill_failed", error=f"{type(exc).__name__}: {exc}")
        task_status.started()
        while True:
            try:
                done = await trio.to_thread.run_sync(self.step_blocking)
            except Exception as exc:  # a damaged database or a broken model: retry later
                log.warning("recall.backfill_failed", error=f"{type(exc).__name__}: {exc}")
                done = 0
            if done:
                log.debug("recall.backfill_batch", embedded=done, pending=self.pending)
                await trio.lowlevel.checkpoint()
            else:
                await trio.sleep(RECALL_BACKFILL_IDLE_S)

    def status(self) -> EmbeddingStatus:
        embeddings = self._embeddings
        return EmbeddingStatus(
            state=embeddings.state,  # type: ignore[arg-type]
            setting=embeddings.setting,
            model=embeddings.model_id,
            reason=embeddings.reason,
            embedded=self.embedded,
            pending=self.pending,
        )


def load_embeddings(host: Host) -> Embeddings:
    config = host.config.recall
    embeddings = Embeddings.load(
        config.embedding,
        base_url=config.endpoint.base_url,
        model=config.endpoint.model,
        api_key_env=config.endpoint.api_key_env,
        timeout_s=config.endpoint.timeout_s,
    )
    if embeddings.state == "unavailable":
        log.warning("recall.embedding_unavailable", reason=embeddings.reason)
        host.record_error("embedding", f"recall is lexical only: {embeddings.reason}")
    else:
        log.info("recall.embedding_loaded", model=embeddings.model_id, setting=config.embedding)
    return embeddings


@dataclass(frozen=True)
class RecallFeature:
    """What the composition root connects after installing recall."""

    service: RecallService
    snapshots: SnapshotStore
    explicit: ExplicitFacts
    backfill: Backfill


def install(host: Host, *, capture: CaptureService, deliberate: DeliberateMemory) -> RecallFeature:
    snapshots = SnapshotStore(host.paths.state_db)
    snapshots.on_write_failed = lambda message: host.record_error("storage", message)
    host.share_state_db(snapshots.forget_database)

    async def recover_state_db(problem: str) -> None:
        await trio.to_thread.run_sync(host.recover_state_db, problem)

    snapshots.on_corrupt = recover_state_db
    embeddings = load_embeddings(host)
    backfill = Backfill(deliberate, embeddings)
    projects = capture.projects

    def active_jobs() -> int:
        """Queued and running extraction jobs of every session."""
        counts = capture.index.job_counts()
        return counts.pending + counts.leased

    service = RecallService(
        sessions=host.sessions,
        clock=host.clock,
        snapshots=snapshots,
        automatic=ProjectMemorySearch(
            projects.project_dir, host.record_error, embeddings=embeddings
        ),
        deliberate=DeliberateRecall(deliberate, embeddings),
        jobs=capture,
        active_jobs=active_jobs,
        embeddings=embeddings,
        record_error=host.record_error,
    )
    if embeddings.embedder is not None:
        host.run_in_background(backfill.run)
    explicit = ExplicitFacts(host, projects)
    host.router.add("recall", service.recall)
    host.router.add("remember", explicit.remember)
    host.run_in_background(snapshots.run_writer)
    host.close_at_exit(snapshots.aclose)
    return RecallFeature(service=service, snapshots=snapshots, explicit=explicit, backfill=backfill)
