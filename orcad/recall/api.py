"""Installs recall and explicit facts into the daemon: `recall`, `remember`, startup context."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import trio
import trio.lowlevel

from orcad.clock import format_time
from orcad.deliberate.store import StoredRecord
from orcad.deliberate.vectors import VectorMatrix, hybrid_search, pending, progress, store_vectors
from orcad.explicit import append_fact, format_fact, read_bounded, remember_fact
from orcad.limits import (
    RECALL_BACKFILL_BATCH,
    RECALL_BACKFILL_IDLE_S,
    STARTUP_PROJECT_MAX_BYTES,
    STARTUP_USER_MAX_BYTES,
)
from orcad.recall import rank
from orcad.recall.automatic import ProjectMemorySearch
from orcad.recall.embedding import Array, Embeddings
from orcad.recall.service import RecallService, SessionJobs, disabled_for_bare
from orcad.recall.snapshots import SnapshotStore
from orcad.sessions import Session
from protocol.types import (
    DeliberateEntry,
    EmbeddingStatus,
    RememberParams,
    RememberResult,
    Startup,
)

if TYPE_CHECKING:
    from orcad.app import Daemon

log = structlog.get_logger("orcad.recall")

PROJECT_MEMORY_FILE = "memory.md"


class ExplicitFacts:
    """`remember` and the startup context: user.md and each project's memory.md."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon

    def project_file(self, project_id: str) -> Path:
        return project_directory(self._daemon, project_id) / PROJECT_MEMORY_FILE

    async def remember(self, params: RememberParams) -> RememberResult:
        session = await self._daemon.sessions.require(params.session_id, params.epoch)
        disabled_for_bare(session, "remember")
        capture = self._daemon.capture
        if params.scope == "user":
            path = self._daemon.paths.user_memory_file
            size = await trio.to_thread.run_sync(remember_fact, path, params.text)
        elif capture is not None and hasattr(capture, "run_locked"):
            # memory.md is written under the project's lock, like the ledger beside it
            line = format_fact(params.text)
            path = self.project_file(session.project_id)
            size = await capture.run_locked(
                session.project_id, lambda directory: append_fact(path, line)
            )
        else:
            path = self.project_file(session.project_id)
            size = await trio.to_thread.run_sync(remember_fact, path, params.text)
        return RememberResult(path=str(path), bytes=size)

    async def read_startup(self, session: Session) -> Startup:
        user_file = self._daemon.paths.user_memory_file
        project_file = self.project_file(session.project_id)

        def read() -> Startup:
            user, user_cut = read_bounded(user_file, STARTUP_USER_MAX_BYTES)
            project, project_cut = read_bounded(project_file, STARTUP_PROJECT_MAX_BYTES)
            return Startup(user=user, project=project, truncated=user_cut or project_cut)

        return await trio.to_thread.run_sync(read)


def project_directory(daemon: Daemon, project_id: str) -> Path:
    """The project's memory directory, as the capture feature names it when installed."""
    capture = daemon.capture
    if capture is not None and hasattr(capture, "project_dir"):
        return Path(capture.project_dir(project_id))
    return daemon.paths.projects_dir / project_id


class DeliberateRecall:
    """The deliberate part of recall, from the deliberate-memory service when installed: with
    the prompt's vector, hybrid (lexical and nearest vectors, ranked by orcad.recall.rank);
    without, the store's lexical search as before."""

    def __init__(self, daemon: Daemon, embeddings: Embeddings | None = None) -> None:
        self._daemon = daemon
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
        service = self._daemon.deliberate
        if service is None:
            return []
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

    def __init__(self, daemon: Daemon, embeddings: Embeddings) -> None:
        self._daemon = daemon
        self._embeddings = embeddings
        self.embedded = 0
        self.pending = 0
        self._seen_changes: int | None = None

    def step_blocking(self) -> int:
        """One batch: how many records were embedded (0 when there is nothing to do)."""
        service = self._daemon.deliberate
        model = self._embeddings.model_id
        if service is None or model is None or service.store.damage is not None:
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
        service = self._daemon.deliberate
        model = self._embeddings.model_id
        if service is None or model is None or service.store.damage is not None:
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


def load_embeddings(daemon: Daemon) -> Embeddings:
    config = daemon.config.recall
    embeddings = Embeddings.load(
        config.embedding,
        base_url=config.endpoint.base_url,
        model=config.endpoint.model,
        api_key_env=config.endpoint.api_key_env,
        timeout_s=config.endpoint.timeout_s,
    )
    if embeddings.state == "unavailable":
        log.warning("recall.embedding_unavailable", reason=embeddings.reason)
        daemon.record_error("embedding", f"recall is lexical only: {embeddings.reason}")
    else:
        log.info("recall.embedding_loaded", model=embeddings.model_id, setting=config.embedding)
    return embeddings


def active_job_count(daemon: Daemon) -> int:
    """Queued and running extraction jobs of every session (0 without capture)."""
    status = daemon.capture_status
    if status is None:
        return 0
    counts = status.job_counts()
    return counts.pending + counts.leased


def install(daemon: Daemon) -> RecallService:
    snapshots = SnapshotStore(daemon.paths.state_db)
    snapshots.on_write_failed = lambda message: daemon.record_error("storage", message)
    daemon.state_db_users.append(snapshots.forget_database)

    async def recover_state_db(problem: str) -> None:
        await trio.to_thread.run_sync(daemon.recover_state_db, problem)

    snapshots.on_corrupt = recover_state_db
    jobs: SessionJobs | None = (
        daemon.capture if hasattr(daemon.capture, "wait_session_jobs") else None
    )
    embeddings = load_embeddings(daemon)
    backfill = Backfill(daemon, embeddings)
    service = RecallService(
        sessions=daemon.sessions,
        clock=daemon.clock,
        snapshots=snapshots,
        automatic=ProjectMemorySearch(
            lambda project_id: project_directory(daemon, project_id),
            daemon.record_error,
            embeddings=embeddings,
        ),
        deliberate=DeliberateRecall(daemon, embeddings),
        jobs=jobs,
        active_jobs=lambda: active_job_count(daemon),
        embeddings=embeddings,
        record_error=daemon.record_error,
    )
    daemon.embedding_status = backfill.status
    if embeddings.embedder is not None:
        daemon.background.append(backfill.run)
    explicit = ExplicitFacts(daemon)

    daemon.router.add("recall", service.recall)
    daemon.router.add("remember", explicit.remember)
    daemon.startup_reader = explicit.read_startup
    daemon.background.append(snapshots.run_writer)
    daemon.closers.append(snapshots.aclose)
    daemon.recall = service
    return service
