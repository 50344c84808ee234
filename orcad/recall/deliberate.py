"""The deliberate part of recall: ranking the deliberate records for a prompt (hybrid with the
prompt's vector, lexical without), and the background backfill that embeds records written
before the model, or under another one.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
import structlog
import trio
import trio.lowlevel

from orcad.clock import format_time
from orcad.deliberate.corrections import link_unchecked, unchecked_count
from orcad.deliberate.queries import StoredRecord
from orcad.deliberate.service import DeliberateMemory
from orcad.deliberate.vectors import (
    HybridResult,
    VectorMatrix,
    hybrid_search,
    load_matrix,
    pending,
    progress,
    store_vectors,
    text_digest,
)
from orcad.errors import StorageError
from orcad.limits import (
    RECALL_BACKFILL_BATCH,
    RECALL_BACKFILL_FAILING_MAX_S,
    RECALL_BACKFILL_IDLE_S,
    RECALL_BACKFILL_REFUSED_RETRY_S,
    RECALL_LINK_BATCH,
    VECTOR_MATRIX_REFRESH_S,
)
from orcad.recall import rank
from orcad.recall.embedders import Array, EmbeddingRefused, EmbeddingTimedOut, EmbeddingUnavailable
from orcad.recall.embedding import Embeddings, PromptQuery
from orcad.recall.fact_backfill import FactBatch
from orcad.session_snapshot import Session
from orcad.storage_faults import PASSING_FAULTS
from protocol.types import DeliberateEntry, EmbeddingStatus

# nearest vectors fetched per record recall may show: a correction is worded like what it
# corrects but may be a little farther from the prompt, and must come along to rank above it;
# and records cut from one template, of which one is shown, can fill the nearest places
# (main labelled set's deliberate "other words", before a record the prompt names was kept beside
# the one shown: 1.5 found 0.703, 2 0.77, 3 and 4 0.757)
NEAREST_PER_SHOWN = 2
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
        refused: RefusedTexts | None = None,
    ) -> None:
        self._service = service
        self._embeddings = embeddings
        # the vectors in memory, shared with the Backfill (which reads them after its passes)
        self._matrix: list[VectorMatrix | None] = [None] if matrix is None else matrix
        self._refused = refused  # texts the model refused, shared with the Backfill

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

        def search(vector: Array | None) -> HybridResult:
            return service.store.query_blocking(
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

        try:
            found = search(vector)
        except StorageError as exc:
            if vector is None or exc.data.get("reason") in PASSING_FAULTS:
                raise  # a lock or a full disk would only be waited on twice
            # the vectors could not be read (a damaged page of memory_vectors, which the store
            # has reported): the records' words still find them, as without a model
            log.warning("recall.vectors_unreadable", error=exc.message)
            vector = None
            found = search(None)
        if vector is None or query is None or embeddings is None:  # lexical, as before: bm25
            return [to_entry(item.record) for item in found.found]
        cosines = {item.record.id: item.cosine for item in found.found}
        refused = self._refused
        unembedded = [  # (a correction brought along ranks on its words until it has one)
            item.record
            for item in found.found
            if item.cosine is None
            and not item.correction
            and (refused is None or not refused.holds(item.record.content))
        ]
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
            distinctive=embeddings.distinctive(found.terms, found.frequency, query.names),
            asked=frozenset(weights) | query.names,
            corrections=frozenset(item.record.id for item in found.found if item.correction),
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


class FactBackfill(Protocol):
    """The automatic part's share of the backfill
    (orcad.recall.fact_backfill.FactVectorBackfill): the facts that have no vector yet, of
    projects recalled lately and of every project on disk (`count_on_disk`, once before the
    first batch)."""

    def facts_to_embed(self, limit: int, skip: frozenset[bytes]) -> FactBatch | None: ...

    def keep_fact_vectors(self, batch: FactBatch, matrix: Array) -> int: ...

    def facts_pending(self) -> int: ...

    def count_on_disk(self) -> None: ...


class BatchSize:
    """How many texts the backfill sends the model at once: RECALL_BACKFILL_BATCH, halved after
    a batch that timed out (a slow server that cannot embed that many within the deadline) or
    that the model took only one text at a time, doubled back after each batch it embeds."""

    def __init__(self) -> None:
        self.size = RECALL_BACKFILL_BATCH

    def failed(self) -> None:
        self.size = max(1, self.size // 2)

    def succeeded(self) -> None:
        self.size = min(RECALL_BACKFILL_BATCH, self.size * 2)


class RefusedTexts:
    """Texts the embedding model refused (an endpoint's 400 for a text too long for it), with
    when: the backfill leaves the records holding them to their words, and recall does not send
    them again either, until RECALL_BACKFILL_REFUSED_RETRY_S has passed. Keyed by the text's
    digest (`text_digest`: a forgotten record leaves no copy here), so an edited record, or a
    new one in a deleted one's row, is tried at once. Shared by the backfill's thread and
    recall's, hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._digests: dict[bytes, float] = {}  # text digest -> when refused (monotonic)

    def add(self, texts: Sequence[str]) -> None:
        now = time.monotonic()
        with self._lock:
            self._digests.update((text_digest(text), now) for text in texts)

    def holds(self, text: str) -> bool:
        with self._lock:
            at = self._digests.get(text_digest(text)) if self._digests else None
        return at is not None and time.monotonic() - at < RECALL_BACKFILL_REFUSED_RETRY_S

    def current(self) -> frozenset[bytes]:
        """The digests of the texts still refused (those refused longer ago are dropped)."""
        now = time.monotonic()
        with self._lock:
            self._digests = {
                digest: at
                for digest, at in self._digests.items()
                if now - at < RECALL_BACKFILL_REFUSED_RETRY_S
            }
            return frozenset(self._digests)


class Failing:
    """The backfill's failures in a row: each error is logged when the pass before did not
    meet it too, and the pause after a pass that embedded nothing doubles from
    RECALL_BACKFILL_IDLE_S up to RECALL_BACKFILL_FAILING_MAX_S while passes fail (a full disk
    or a damaged table fails every pass: it is neither retried twice a second nor logged so)."""

    def __init__(self) -> None:
        self.passes = 0  # idle passes in a row that failed
        self.errors: frozenset[str] = frozenset()  # what the last pass failed with

    def report(self, errors: list[str]) -> None:
        for error in dict.fromkeys(errors):
            if error not in self.errors:
                log.warning("recall.backfill_failed", error=error)
        self.errors = frozenset(errors)
        if not errors:
            self.passes = 0

    def pause(self) -> float:
        if not self.errors:
            return RECALL_BACKFILL_IDLE_S
        self.passes += 1
        return float(min(RECALL_BACKFILL_IDLE_S * 2.0**self.passes, RECALL_BACKFILL_FAILING_MAX_S))


class Backfill:
    """Embeds deliberate records that have no vector of the current model (records written
    since the last pass, or all of them after an upgrade or a model change), in small batches
    in the background; recall ranks them lexically until then. Between its batches it embeds
    the automatic facts recall found without vectors (`facts`), as lexical until then.

    A batch that fails because the model is down (an endpoint that does not answer, answers 5xx
    or 429) is tried again at the next pass, half as large if it timed out (`BatchSize`). One
    that the model refuses (an endpoint's 400, 413 or 422) is embedded one text at a time,
    provided the model embeds a probe (else it refuses everything: a model name the server does
    not know, and it is left alone for a while); the records and facts it refuses are left to
    their words (`RefusedTexts`), stay counted as pending, and the refusal is recorded: one
    such text must not keep every other one without a vector.

    At the end of a pass, and when it finds nothing to do after a start, it reads the vectors
    recall keeps in memory, so that the next recall does not (100 ms at 10k records); at most
    once per twice the time that took (so that records saved one after another cannot keep the
    store's thread reading them more than a third of the time), and at least
    VECTOR_MATRIX_REFRESH_S apart; sooner, it drops them, and recall reads them at its next
    search."""

    def __init__(
        self,
        service: DeliberateMemory,
        embeddings: Embeddings,
        matrix: list[VectorMatrix | None] | None = None,
        *,
        record_error: Callable[[str, str], None] | None = None,
        refused: RefusedTexts | None = None,
        facts: FactBackfill | None = None,
    ) -> None:
        self._service = service
        self._facts = facts
        self._embeddings = embeddings
        # recall's vectors in memory, shared with DeliberateRecall
        self._matrix: list[VectorMatrix | None] = [None] if matrix is None else matrix
        self.refused = RefusedTexts() if refused is None else refused
        self.embedded = 0
        self.pending = 0
        self.corrections_pending = 0  # records not yet looked at for what they correct
        self.counted = False  # the counts above are known (status says "loading" until then)
        self.announced = False  # the model's load was reported (and a failure recorded)
        self._seen_changes: int | None = None
        self._seen_refused: frozenset[bytes] = frozenset()
        self._nothing_to_do = False  # the last read found no record it could embed
        self._stale = True  # recall's vectors in memory may lack some this backfill stored
        self._next_read_at = 0.0  # monotonic: when the vectors may be read again
        self._record_error = record_error
        self._record_batch = BatchSize()
        self._fact_batch = BatchSize()
        self._refusing_s = 0.0  # how long the model that refused everything is left alone
        self._refusing_until = 0.0  # monotonic
        # the store's change counter when every record had been looked at for its corrections
        self._links_seen_changes: int | None = None

    def step_blocking(self) -> int:
        """One batch: how many records were embedded or refused (0 when there is nothing to
        do, or the model failed)."""
        service = self._service
        model = self._embeddings.model_id
        if model is None or service.store.damage is not None:
            return 0
        store = service.store
        dims = self._dims()
        refused = self.refused.current()
        batch = self._record_batch.size

        def read(connection: sqlite3.Connection) -> list[tuple[int, str]] | None:
            unchanged = self._seen_changes == connection.total_changes
            if unchanged and self._nothing_to_do and refused >= self._seen_refused:
                return None  # nothing written, and no refusal expired, since the last read
            self.embedded, self.pending = progress(connection, model, dims)
            self.counted = True
            self._seen_changes = connection.total_changes
            self._seen_refused = refused
            rows = pending(connection, model, batch, dims, skip=refused)
            self._nothing_to_do = not rows
            return rows

        rows = store.query_blocking(read)
        if not rows:
            if self._stale:  # the pass found nothing more to embed: recall's vectors are due
                store.query_blocking(lambda connection: self._read_vectors(connection, model))
            return 0
        tried = len(rows)
        embedded = self._embed(
            [content for _row, content in rows], self._record_batch, "deliberate record(s)"
        )
        if embedded is None:
            return 0  # the model is down, or refuses everything: the next pass tries again
        kept, vectors = embedded
        rows = [rows[n] for n in kept]

        def write(connection: sqlite3.Connection) -> int:
            stored = store_vectors(connection, model, rows, vectors) if rows else 0
            self._stale = self._stale or stored > 0
            if tried < batch and self._stale:  # the last batch of the pass
                self._read_vectors(connection, model)
            return stored

        stored = store.query_blocking(write)
        self.embedded += stored
        self.pending = max(0, self.pending - stored)
        self._seen_changes = None  # our own write moved the counter
        return tried

    def links_step_blocking(self) -> int:
        """One batch of records never paired with those they correct (written before orcad
        kept such pairs, or whose pairing failed): how many were looked at (0 when there is
        nothing to do)."""
        store = self._service.store
        if store.damage is not None:
            return 0

        def link(connection: sqlite3.Connection) -> int:
            if self._links_seen_changes == connection.total_changes:
                return 0  # nothing written since the last pass found every record looked at
            done = link_unchecked(connection, RECALL_LINK_BATCH)
            self._links_seen_changes = None if done else connection.total_changes
            return done

        done = store.query_blocking(link)
        if not done:
            self.corrections_pending = 0
        elif done > self.corrections_pending:  # more than counted (the file was replaced)
            self.corrections_pending = store.query_blocking(unchecked_count)
        else:
            self.corrections_pending -= done
        return done

    def _read_vectors(self, connection: sqlite3.Connection, model: str) -> None:
        """Read recall's vectors in memory again, on the store's thread; if they were read here
        too recently, drop them instead, for recall to read them at its next search (as it did
        after every pass before)."""
        now = time.monotonic()
        dims = self._dims()
        if not dims:
            return  # (an endpoint's width is known once it has answered)
        self._matrix[0] = None  # (the old and the new are not held at once)
        self._stale = False
        if now < self._next_read_at:
            return
        try:
            self._matrix[0] = load_matrix(
                connection, model, None, dims, int8=self._embeddings.int8_products
            )
        except sqlite3.DatabaseError:
            raise  # the store's own handling: a damaged database is reported as such
        except Exception as exc:  # recall reads them itself at its next search, as before
            log.warning("recall.vectors_unread", error=f"{type(exc).__name__}: {exc}")
        finished = time.monotonic()
        self._next_read_at = finished + max(VECTOR_MATRIX_REFRESH_S, 2 * (finished - now))

    def facts_step_blocking(self) -> int:
        """One batch of the automatic facts recall found without a vector: how many were
        embedded or refused (0 when there is nothing to do, or the model failed)."""
        facts = self._facts
        if facts is None or self._embeddings.model_id is None:
            return 0
        batch = facts.facts_to_embed(self._fact_batch.size, self.refused.current())
        if batch is None:
            return 0
        embedded = self._embed(
            [r.fact for r in batch.records], self._fact_batch, "automatic fact(s)"
        )
        if embedded is None:
            return 0  # the model is down, or refuses everything: the next pass tries again
        kept, vectors = embedded
        facts.keep_fact_vectors(batch._replace(records=[batch.records[n] for n in kept]), vectors)
        return len(batch.records)

    def _embed(
        self, texts: list[str], size: BatchSize, what: str
    ) -> tuple[list[int], npt.NDArray[np.float32]] | None:
        """Embed a batch for the backfill: which of `texts` were embedded (their indices) and
        their vectors, or None when the model failed them or refuses everything.

        A batch that times out is sent half as large next time (`size`). A batch the model
        refuses is embedded one text at a time, if it embeds a probe, until one fails for
        another reason than a refusal (the rest wait for the next pass); the refused are set
        aside, and recorded as a problem with `what`; if it took each text alone, the batch was
        too large for it (a limit on a request), and halves too. A model that refuses even the
        probe (a model name the server does not know) is not asked again for a while, longer
        each time (`_rest_after_refusal`)."""
        embeddings = self._embeddings
        if time.monotonic() < self._refusing_until:
            return None
        try:
            vectors = embeddings.try_embed(texts, purpose="backfill")
        except EmbeddingRefused:
            pass
        except EmbeddingTimedOut:
            size.failed()
            return None
        except EmbeddingUnavailable:
            return None
        else:
            size.succeeded()
            self._refusing_s = 0.0
            return list(range(len(texts))), vectors
        try:
            embeddings.try_embed([PROBE_TEXT], purpose="backfill")
        except EmbeddingRefused:
            self._rest_after_refusal()
            return None
        except EmbeddingUnavailable:
            return None
        self._refusing_s = 0.0
        kept: list[int] = []
        rows: list[npt.NDArray[np.float32]] = []
        refused: list[str] = []
        reason = ""
        for number, text in enumerate(texts):
            try:
                vector = embeddings.try_embed([text], purpose="backfill")
            except EmbeddingRefused as exc:
                refused.append(text)
                reason = str(exc)
                continue
            except EmbeddingUnavailable:
                break  # down meanwhile: not the text's fault
            kept.append(number)
            rows.append(vector[0])
        if refused:
            self.refused.add(refused)
            message = (
                f"the embedding model refused {len(refused)} {what}, which are ranked by "
                f"their words until it takes them (tried again after "
                f"{RECALL_BACKFILL_REFUSED_RETRY_S:.0f} s): {reason}"
            )
            log.warning("recall.backfill_refused", what=what, texts=len(refused), reason=reason)
            if self._record_error is not None:
                self._record_error("embedding", message)
        if not kept and not refused:
            return None
        if kept and not refused and len(kept) == len(texts):
            size.failed()  # each alone, not all at once
        dims = len(rows[0]) if rows else 0
        return kept, (np.stack(rows) if rows else np.zeros((0, dims), dtype=np.float32))

    def _rest_after_refusal(self) -> None:
        """The model refuses everything: leave it alone, from a second (the server may be
        loading the model) up to RECALL_BACKFILL_REFUSED_RETRY_S, twice as long each time."""
        self._refusing_s = min(RECALL_BACKFILL_REFUSED_RETRY_S, max(1.0, 2 * self._refusing_s))
        self._refusing_until = time.monotonic() + self._refusing_s

    def refresh_blocking(self) -> None:
        """Read the progress now (status is right before the first batch is done)."""
        if self._facts is not None:
            self._facts.count_on_disk()
        service = self._service
        model = self._embeddings.model_id
        if model is None or service.store.damage is not None:
            return
        dims = self._dims()
        self.embedded, self.pending = service.store.query_blocking(
            lambda connection: progress(connection, model, dims)
        )
        self.corrections_pending = service.store.query_blocking(unchecked_count)

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
        steps = [self.step_blocking, self.facts_step_blocking, self.links_step_blocking]
        failing = Failing()
        while True:
            done = 0
            errors = []
            for step in steps:
                try:
                    done += await trio.to_thread.run_sync(step)
                except Exception as exc:  # a damaged database or a broken model: retry later
                    errors.append(f"{type(exc).__name__}: {exc}")
            failing.report(errors)
            if done:
                log.debug("recall.backfill_batch", embedded=done, pending=self.pending)
                await trio.lowlevel.checkpoint()
            else:
                await trio.sleep(failing.pause())

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
            facts_pending=0 if self._facts is None else self._facts.facts_pending(),
            corrections_pending=self.corrections_pending,
        )
