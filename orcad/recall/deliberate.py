"""The deliberate part of recall: ranking the deliberate records for a prompt (hybrid with the
prompt's vector, lexical without), and the background backfill that embeds records written
before the model, or under another one.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import structlog
import trio
import trio.lowlevel

from orcad.clock import format_time
from orcad.deliberate.service import DeliberateMemory
from orcad.deliberate.store import StoredRecord
from orcad.deliberate.vectors import (
    VectorMatrix,
    hybrid_search,
    load_matrix,
    pending,
    progress,
    store_vectors,
)
from orcad.limits import (
    RECALL_BACKFILL_BATCH,
    RECALL_BACKFILL_IDLE_S,
    RECALL_BACKFILL_REFUSED_RETRY_S,
)
from orcad.recall import rank
from orcad.recall.embedding import Embeddings, PromptQuery
from orcad.sessions import Session
from protocol.types import DeliberateEntry, EmbeddingStatus

# nearest vectors fetched per record recall may show: a correction is worded like what it
# corrects but may be a little farther from the prompt, and must come along to rank above it;
# and with at most two alike shown, records cut from one template take fewer places
NEAREST_PER_SHOWN = 1.5
# embedded when a batch fails, to tell a model that is failing from records it refuses
PROBE_TEXT = "probe"
log = structlog.get_logger("orcad.recall")


class DeliberateRecall:
    """The deliberate part of recall, from the deliberate-memory service: with the prompt's
    vector, hybrid (lexical and nearest vectors, ranked by orcad.recall.rank); without, the
    store's lexical search as before."""

    def __init__(
        self,
        service: DeliberateMemory,
        embeddings: Embeddings | None = None,
        matrix: list[VectorMatrix | None] | None = None,
    ) -> None:
        self._service = service
        self._embeddings = embeddings
        # the vectors in memory, shared with the Backfill (which drops them when it is done)
        self._matrix: list[VectorMatrix | None] = [None] if matrix is None else matrix

    def search_blocking(
        self,
        session: Session,
        prompt: str,
        terms: Sequence[str],
        limit: int,
        query: PromptQuery | None = None,
    ) -> list[DeliberateEntry]:
        service = self._service
        if session.bare or not prompt.strip() or limit < 1:
            return []
        embeddings = self._embeddings
        model = None if embeddings is None else embeddings.model_id
        vector = query.vector if query is not None and model is not None else None
        found = service.store.query_blocking(
            lambda connection: hybrid_search(
                connection,
                session.workspace_id,
                terms,
                vector,
                model,
                limit,
                self._matrix,
                nearest=int(NEAREST_PER_SHOWN * limit),
                int8=embeddings is not None and embeddings.int8_products,
            )
        )
        if vector is None or query is None or embeddings is None:  # lexical, as before: bm25
            return [to_entry(item.record) for item in found.found]
        cosines = {item.record.id: item.cosine for item in found.found}
        unembedded = [item.record for item in found.found if item.cosine is None]
        if unembedded:  # written since the backfill's last pass: embed them for this recall
            matrix = embeddings.embed([record.content for record in unembedded])
            if matrix is not None:
                for record, row in zip(unembedded, matrix, strict=True):
                    cosines[record.id] = float(row @ vector)
        weights = rank.query_weights(found.terms, found.frequency, found.total)
        weight_total = sum(weights.values())
        by_key = {item.record.id: item.record for item in found.found}
        gates = query.gates
        chosen = rank.rank(
            [
                rank.Candidate(
                    key=item.record.id,
                    text=item.record.content,
                    recorded_at=item.record.updated_at,
                    coverage=rank.coverage(
                        rank.text_stems(item.record.content), weights, weight_total
                    ),
                    cosine=cosines[item.record.id],
                )
                for item in found.found
            ],
            semantic=True,
            limit=limit,
            floor=embeddings.floor,
            gate=gates.gate,
            lexical_weight=embeddings.lexical_weight,
            lexical_gate=gates.lexical,
            distinctive=embeddings.distinctive(found.terms, found.frequency),
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
    in the background; recall ranks them lexically until then. When a batch fails while the
    model embeds a probe, its records are embedded one at a time, and those the model refuses
    (an endpoint's 400 for a text too long for it) are left to their words and tried again
    after RECALL_BACKFILL_REFUSED_RETRY_S: one such record must not keep every older one
    without a vector. They stay counted as pending, and the refusal is recorded."""

    def __init__(
        self,
        service: DeliberateMemory,
        embeddings: Embeddings,
        matrix: list[VectorMatrix | None] | None = None,
        record_error: Callable[[str, str], None] | None = None,
    ) -> None:
        self._service = service
        self._embeddings = embeddings
        # recall's vectors in memory: reloaded at most once a second while batches are written
        # (orcad.deliberate.vectors), so dropped after the last one, for the next recall to see
        # every record just embedded
        self._matrix: list[VectorMatrix | None] = [None] if matrix is None else matrix
        self.embedded = 0
        self.pending = 0
        self.counted = False  # the counts above are known (status says "loading" until then)
        self.announced = False  # the model's load was reported (and a failure recorded)
        self._seen_changes: int | None = None
        self._refused: dict[int, float] = {}  # row id -> when the model refused it (monotonic)
        self._record_error = record_error

    def step_blocking(self) -> int:
        """One batch: how many records were embedded (0 when there is nothing to do)."""
        service = self._service
        model = self._embeddings.model_id
        if model is None or service.store.damage is not None:
            return 0
        store = service.store
        dims = self._dims()
        now = time.monotonic()
        refused = self._refused = {
            row: at
            for row, at in self._refused.items()
            if now - at < RECALL_BACKFILL_REFUSED_RETRY_S
        }

        def read(connection: sqlite3.Connection) -> list[tuple[int, str]] | None:
            if self._seen_changes == connection.total_changes and self.pending <= len(refused):
                return None  # nothing written since the last pass found nothing to do
            self.embedded, self.pending = progress(connection, model, dims)
            self.counted = True
            self._seen_changes = connection.total_changes
            if self.pending <= 0:
                return []
            return pending(connection, model, RECALL_BACKFILL_BATCH, dims, skip=refused)

        rows = store.query_blocking(read)
        if not rows:
            return 0
        tried = len(rows)
        vectors = self._embeddings.embed([content for _row, content in rows])
        if vectors is None:
            isolated = self._one_at_a_time(rows)
            if isolated is None:
                return 0  # the model is failing: the next pass tries again
            rows, vectors = isolated
            if not rows:
                return tried  # all refused: on to the next batch

        def write(connection: sqlite3.Connection) -> int:
            stored = store_vectors(connection, model, rows, vectors)
            if stored >= self.pending or len(rows) < RECALL_BACKFILL_BATCH:
                # the pass is done (a record deleted meanwhile stores nothing): the vectors
                # recall keeps in memory are read again now, here in the background, so that
                # the next recall does not (100 ms at 10k records, on the store's thread)
                self._reload_matrix(connection, model, int(vectors.shape[1]))
            return stored

        stored = store.query_blocking(write)
        self.embedded += stored
        self.pending = max(0, self.pending - stored)
        self._seen_changes = None  # our own write moved the counter
        return tried

    def _reload_matrix(self, connection: sqlite3.Connection, model: str, dims: int) -> None:
        try:
            self._matrix[0] = load_matrix(
                connection, model, None, dims, int8=self._embeddings.int8_products
            )
        except Exception as exc:  # recall reads them itself at its next search, as before
            self._matrix[0] = None
            log.warning("recall.vectors_unread", error=f"{type(exc).__name__}: {exc}")

    def preload_blocking(self) -> None:
        """Read the vectors recall keeps in memory, if a model is loaded and they are not: the
        first recall after a start then does not pay for it."""
        model = self._embeddings.model_id
        dims = self._dims()
        store = self._service.store
        if model is None or not dims or store.damage is not None or self._matrix[0] is not None:
            return
        store.query_blocking(lambda connection: self._reload_matrix(connection, model, dims))

    def _one_at_a_time(
        self, rows: list[tuple[int, str]]
    ) -> tuple[list[tuple[int, str]], npt.NDArray[np.float32]] | None:
        """After `rows` failed as a batch: None if the model fails a probe too (it is down, or
        broken); else each row alone: the rows embedded and their vectors, the others noted as
        refused."""
        embeddings = self._embeddings
        if embeddings.embed([PROBE_TEXT]) is None:
            return None
        kept: list[tuple[int, str]] = []
        vectors: list[npt.NDArray[np.float32]] = []
        refused: list[int] = []
        reason = ""
        for row in rows:
            vector = embeddings.embed([row[1]])
            if vector is None:
                refused.append(row[0])
                reason = embeddings.reason or reason
            else:
                kept.append(row)
                vectors.append(vector[0])
        now = time.monotonic()
        self._refused.update((row_id, now) for row_id in refused)
        if refused:
            message = (
                f"the embedding model refused {len(refused)} deliberate record(s), which are "
                f"ranked by their words until it takes them (tried again every "
                f"{RECALL_BACKFILL_REFUSED_RETRY_S:.0f} s): {reason}"
            )
            log.warning("recall.backfill_refused", rows=refused, reason=reason)
            if self._record_error is not None:
                self._record_error("embedding", message)
        return kept, (np.stack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32))

    def refresh_blocking(self) -> None:
        """Read the progress now (status is right before the first batch is done)."""
        service = self._service
        model = self._embeddings.model_id
        if model is None or service.store.damage is not None:
            return
        dims = self._dims()
        self.embedded, self.pending = service.store.query_blocking(
            lambda connection: progress(connection, model, dims)
        )

    def _dims(self) -> int:
        """The model's width, or 0 while unknown (an endpoint's, before its first answer)."""
        embedder = self._embeddings.embedder
        return 0 if embedder is None else embedder.dims

    async def run(self) -> None:
        """Embed pending records batch after batch, for as long as the daemon runs."""
        try:
            await trio.to_thread.run_sync(self.refresh_blocking)
        except Exception as exc:  # reported by the first step's failure as well
            log.warning("recall.backfill_failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self.counted = True  # counted, or nothing to count: status stops saying loading
        if not self.pending:  # (else the pass's end reads them)
            try:
                await trio.to_thread.run_sync(self.preload_blocking)
            except Exception as exc:  # recall reads them at its first search instead
                log.warning("recall.vectors_unread", error=f"{type(exc).__name__}: {exc}")
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
        state = embeddings.state
        if state != "off" and (not self.announced or (state == "ready" and not self.counted)):
            state = "loading"  # until the load is reported and the backfill has counted
        return EmbeddingStatus(
            state=state,  # type: ignore[arg-type]
            setting=embeddings.setting,
            model=embeddings.loaded_model_id,
            reason=embeddings.reason,
            embedded=self.embedded,
            pending=self.pending,
        )
