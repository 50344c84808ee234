"""The automatic part of recall: every search of a project's automatic memory, in one place.

The ledger (`candidates.jsonl`) is the truth; the FTS5 index (`index.sqlite3`, written by
orcad.capture.projections) is a cache derived from it and stamped with its fingerprint. For each
project recall keeps one `ProjectCache`: the ledger's records and what recall derives from them
(each record's time, word stems and vector), and the open read-only connection to the index with
the fingerprint it was built from. Both files are keyed by the same `file_signature` (device,
inode, size, mtime), so a steady project costs two `stat` calls (and, without a model, one
bm25 query) per recall, and a replaced file is noticed on the next one.

One search, given the prompt's distinct terms (derived once per recall, orcad.query):
1. the ledger, re-read only when its signature changed;
2. the most selective 12 terms among this project's records;
3. the index, checked against the ledger fingerprint and rebuilt once when missing, stale or
   corrupt (so it is current whenever recall needs it);
4. without the prompt's vector, the lexical ranking: bm25 from the index; when the index cannot
   be used at all, `rank_by_overlap` ranks the ledger's records in process (shared rare terms,
   then recency), so recall keeps answering without its cache;
5. with the prompt's vector, the hybrid ranking instead (orcad.recall.rank: cosine plus
   coverage, floor and gate, corrections first) over every record, with no bm25 query. The
   records' vectors come from the index (written with the facts, `fact_embedder`), read once
   per index file; a record the index has no vector for (another model, an index from before,
   an index that cannot be used) ranks on its words until the backfill has embedded it in the
   background (`facts_to_embed`, `keep_fact_vectors`), which keeps it in the cache and writes
   the index again with the others (`_save_vectors`). The backfill also looks once, after a
   start, at every project on disk that recall has not cached (`_check_on_disk`), so that a
   project no recall has reached since an upgrade is embedded and counted too.

The answer is the ledger's own records (`CandidateRecord`), best first; orcad.recall.select
turns the chosen ones into wire entries.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import structlog

from orcad.capture import projections
from orcad.capture.ledger import CandidateRecord, Ledger, ledger_path, read_ledger
from orcad.capture.projections import IndexUnavailable, IndexVectors
from orcad.clock import parse_time
from orcad.deliberate.vectors import text_digest
from orcad.durable_files import FileSignature, file_signature
from orcad.errors import StorageError
from orcad.limits import LEDGER_MAX_CANDIDATES, RECALL_AUTOMATIC_MAX_ENTRIES
from orcad.query import match_expression, most_selective, stem, stems
from orcad.recall import rank
from orcad.recall.embedders import Array
from orcad.recall.embedding import Embeddings, PromptQuery
from orcad.secrets import secret_kinds

log = structlog.get_logger("orcad.recall.automatic")

ErrorRecorder = Callable[[str, str], None]
PROJECTS_CACHED = 64  # projects whose ledger and open index are kept, least recently used dropped
STEM_MASKS_CACHED = 4096  # per project: which records contain a stem, for the stems last asked

# bm25 is lower-is-better; equal ranks newest first
_INDEX_QUERY = (
    "SELECT candidate_id, bm25(candidates) AS rank FROM candidates "
    "WHERE candidates MATCH ? ORDER BY rank, recorded_at DESC LIMIT ?"
)


class FactBatch(NamedTuple):
    """Facts of one project for the backfill to embed with `model`."""

    project_id: str
    model: str
    records: list[CandidateRecord]


@dataclass
class ProjectCache:
    """What recall keeps of one project between recalls (see the module docstring)."""

    ledger_signature: FileSignature | None = None
    ledger: Ledger | None = None
    records: dict[str, CandidateRecord] = field(default_factory=dict)
    recorded: dict[str, float] = field(default_factory=dict)  # unix seconds, per record
    stems: dict[str, frozenset[str]] = field(default_factory=dict)
    # per stem, which records (in `records` order) contain it; cleared with the ledger
    stem_masks: dict[str, npt.NDArray[np.bool_]] = field(default_factory=dict)
    # per record recall found without a vector: whether it looks like a secret (never embedded)
    unembeddable: dict[str, bool] = field(default_factory=dict)
    vectors: dict[str, Array] = field(default_factory=dict)  # under `vectors_model`
    vectors_model: str | None = None
    # `vectors` stacked in `records` order (zero rows where there is none) and which rows are
    # real; None when `vectors` changed since
    stacked: tuple[Array, npt.NDArray[np.bool_]] | None = None
    index_signature: FileSignature | None = None
    index: sqlite3.Connection | None = None
    index_fingerprint: str = ""
    index_vectors_read: FileSignature | None = None  # the index file whose vectors were read
    lock: threading.Lock = field(default_factory=threading.Lock)  # one search per project at once

    def close_index(self) -> None:
        if self.index is not None:
            self.index.close()
        self.index, self.index_signature, self.index_fingerprint = None, None, ""


def search_index(
    cache: ProjectCache, project_dir: Path, terms: Sequence[str], limit: int, fingerprint: str
) -> list[tuple[str, float]]:
    """Candidate ids matching `terms` in the project's index with their bm25 rank (lower is
    better), best first, equal ranks newest first; through the cache's open connection, which
    is reopened when the file changed. IndexUnavailable when the index is missing, corrupt, or
    stale (built from another ledger than `fingerprint`'s).

    No term planning (orcad.query.plan_terms): the ledger holds at most 128 candidates, so
    every doclist is tiny and bm25 over all terms costs less than counting them first.
    """
    index = open_current_index(cache, project_dir, fingerprint)
    expression = match_expression(terms)
    if limit <= 0 or not expression:
        return []
    try:
        rows = index.execute(_INDEX_QUERY, (expression, limit)).fetchall()
    except sqlite3.Error as exc:
        cache.close_index()
        raise IndexUnavailable("corrupt", str(exc)) from exc
    return [(str(candidate_id), float(bm25)) for candidate_id, bm25 in rows]


def open_current_index(
    cache: ProjectCache, project_dir: Path, fingerprint: str
) -> sqlite3.Connection:
    """The cache's connection to the project's index, reopened when the file changed.
    IndexUnavailable when the index is missing, corrupt (it fails SQLite's quick check), or
    stale (built from another ledger than `fingerprint`'s)."""
    path = projections.index_path(project_dir)
    signature = file_signature(path)
    if signature is None:
        cache.close_index()
        raise IndexUnavailable("missing")
    if cache.index is None or signature != cache.index_signature:
        cache.close_index()
        cache.index, cache.index_fingerprint = projections.open_index(path)
        cache.index_signature = signature
    if cache.index_fingerprint != fingerprint:
        raise IndexUnavailable("stale")
    return cache.index


def stored_vectors(index: sqlite3.Connection, model: str | None, dims: int) -> dict[str, Array]:
    """The vectors an open index holds for its candidates, if they are of `model`. A vector
    that is not `dims` finite numbers (0: any length) is left out, and its fact embedded again:
    the index is a file anyone may damage."""
    try:
        row = index.execute("SELECT value FROM meta WHERE key = 'vector_model'").fetchone()
        if row is None or row[0] != model:
            return {}
        rows = index.execute("SELECT candidate_id, vector FROM vectors").fetchall()
    except sqlite3.Error:  # an index from before vectors, or a damaged one: embed instead
        return {}
    vectors: dict[str, Array] = {}
    for candidate_id, blob in rows:
        if not isinstance(blob, bytes) or not blob or len(blob) % 2:
            continue
        vector = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
        if (dims and len(vector) != dims) or not np.isfinite(vector).all():
            continue
        vectors[str(candidate_id)] = vector
    return vectors


def fact_embedder(embeddings: Embeddings) -> Callable[[Sequence[str], Path], IndexVectors | None]:
    """What capture calls (in a worker thread, before the project lock) to store the vectors of
    a job's facts in the project's index; None when there is no model or it failed (the facts
    then rank on their words until the backfill embeds them). Within recall's deadline: the
    job is still leased, and recall's barrier waits for it. The project's older facts that the
    index holds no vector for (after a model change a rebuild keeps only the new model's) are
    left to the backfill, once recall notes the project."""

    def embed(texts: Sequence[str], _project_dir: Path) -> IndexVectors | None:
        model = embeddings.model_id
        if model is None:
            return None
        wanted = list(dict.fromkeys(texts))
        matrix = embeddings.embed(wanted, purpose="publish")
        if matrix is None:
            return None
        rows = matrix.astype(np.float16)
        return IndexVectors(model, {text: rows[n].tobytes() for n, text in enumerate(wanted)})

    return embed


def rank_by_overlap(
    records: Sequence[CandidateRecord],
    recorded: Mapping[str, float],
    terms: Sequence[str],
    limit: int = RECALL_AUTOMATIC_MAX_ENTRIES,
    scan_limit: int = LEDGER_MAX_CANDIDATES,
) -> list[CandidateRecord]:
    """The fallback ranking: records sharing at least one query term, rarer shared terms
    first, then newer first (`recorded`: unix seconds by record id). Only the newest
    `scan_limit` records are scanned, so the work is bounded."""
    query = {stem(term) for term in terms if term}
    if not query or not records:
        return []
    pool = sorted(records, key=lambda r: recorded[r.id], reverse=True)[:scan_limit]
    documents = [(record, stems(record.fact) & query) for record in pool]
    frequency: dict[str, int] = {}
    for _record, shared in documents:
        for term in shared:
            frequency[term] = frequency.get(term, 0) + 1
    total = len(documents)
    scored = []
    for record, shared in documents:
        if shared:
            score = sum(math.log(1.0 + total / frequency[term]) for term in shared)
            scored.append((-score, -recorded[record.id], record.id, record))
    scored.sort(key=lambda item: item[:3])
    return [item[3] for item in scored[:limit]]


class ProjectMemorySearch:
    """Recall's search over each project's automatic memory (one instance per daemon)."""

    def __init__(
        self,
        project_dir: Callable[[str], Path],
        record_error: ErrorRecorder | None = None,
        *,
        use_index: bool = True,
        embeddings: Embeddings | None = None,
        list_projects: Callable[[], list[str]] | None = None,
    ) -> None:
        self._project_dir = project_dir
        self._record_error = record_error
        self._use_index = use_index
        self._embeddings = embeddings
        self._projects: OrderedDict[str, ProjectCache] = OrderedDict()
        # projects whose facts recall found without vectors, with how many: the backfill's
        self._wanting: OrderedDict[str, int] = OrderedDict()
        # every project on disk, so that the facts of one no recall has reached since an
        # upgrade are embedded (and counted) too: those not looked at yet (None: not listed
        # yet), and those found with facts without a vector, with how many, until the backfill
        # takes them up, in caches of its own (apart from recall's, which they must not push
        # out), dropped when it is done; one whose facts left were all refused waits, uncached,
        # until a refusal expires (with the refusals it saw)
        self._list_projects = list_projects
        self._unchecked: list[str] | None = None
        self._on_disk: dict[str, int] = {}
        self._backfill_caches: dict[str, ProjectCache] = {}
        self._refused_only: dict[str, frozenset[bytes]] = {}
        self._projects_lock = threading.Lock()

    def search_blocking(
        self,
        project_id: str,
        terms: list[str],
        limit: int,
        query: PromptQuery | None = None,
    ) -> list[CandidateRecord]:
        """The records to inject, best first. `terms` may be longer than 12: the most
        selective among this project's records are used. With `query` (the prompt's embedding
        and gates) the ranking is hybrid and floored (orcad.recall.rank)."""
        directory = self._project_dir(project_id)
        cache = self._cache(project_id)
        with cache.lock:
            return self._search_locked(project_id, directory, cache, terms, limit, query)

    def close(self) -> None:
        """Close every open index connection (daemon shutdown, tests)."""
        with self._projects_lock:
            caches = [*self._projects.values(), *self._backfill_caches.values()]
            self._projects, self._backfill_caches = OrderedDict(), {}
        for cache in caches:
            with cache.lock:
                cache.close_index()

    def _cache(self, project_id: str) -> ProjectCache:
        """Recall's cache of the project (the backfill's, if it has one), made if there is
        none; the least recently used is dropped past PROJECTS_CACHED."""
        with self._projects_lock:
            cache = self._projects.get(project_id)
            if cache is not None:
                self._projects.move_to_end(project_id)
                return cache
            cache = self._backfill_caches.pop(project_id, None) or ProjectCache()
            self._projects[project_id] = cache
            while len(self._projects) > PROJECTS_CACHED:
                # a search still using the dropped cache finishes with it; its connection
                # closes when that search lets go of it
                dropped, _cache = self._projects.popitem(last=False)
                self._wanting.pop(dropped, None)  # its next recall notes it again
            return cache

    def _cached(self, project_id: str) -> ProjectCache | None:
        """The project's cache, recall's or the backfill's (with `_projects_lock` held)."""
        return self._projects.get(project_id) or self._backfill_caches.get(project_id)

    def _search_locked(  # noqa: PLR0917 - one search's state, passed down once
        self,
        project_id: str,
        directory: Path,
        cache: ProjectCache,
        terms: list[str],
        limit: int,
        query: PromptQuery | None = None,
    ) -> list[CandidateRecord]:
        try:
            ledger = self._current_ledger(directory, cache)
        except StorageError as exc:
            self._problem("recall.ledger_unreadable", exc.message, project_id)
            return []
        if not ledger.candidates or not terms:
            return []
        frequency = self._document_frequency(cache, terms)
        terms = most_selective(terms, frequency)
        if query is None or self._embeddings is None:
            return self._lexical(project_id, directory, ledger, cache, terms, limit)
        self._index_for_vectors(project_id, directory, ledger, cache)
        return self._hybrid(project_id, cache, terms, frequency, query, limit)

    def _current_ledger(self, directory: Path, cache: ProjectCache) -> Ledger:
        signature = file_signature(ledger_path(directory))
        if cache.ledger is None or signature is None or signature != cache.ledger_signature:
            ledger = read_ledger(directory)
            records = {record.id: record for record in ledger.candidates}
            recorded = {record.id: parse_time(record.recorded_at) for record in records.values()}
            cache.ledger, cache.ledger_signature = ledger, signature
            cache.records, cache.recorded = records, recorded
            cache.stems = {i: frozenset(stems(r.fact)) for i, r in records.items()}
            cache.stem_masks = {}
            cache.unembeddable = {}
            cache.vectors = {i: v for i, v in cache.vectors.items() if i in records}
            cache.stacked = None
        return cache.ledger

    @staticmethod
    def _stem_mask(cache: ProjectCache, key: str) -> npt.NDArray[np.bool_]:
        mask = cache.stem_masks.get(key)
        if mask is None:
            if len(cache.stem_masks) >= STEM_MASKS_CACHED:
                cache.stem_masks.clear()
            found = (key in cache.stems[i] for i in cache.records)
            mask = cache.stem_masks[key] = np.fromiter(found, np.bool_, len(cache.records))
        return mask

    def _document_frequency(self, cache: ProjectCache, terms: list[str]) -> dict[str, int]:
        return {term: int(self._stem_mask(cache, stem(term)).sum()) for term in terms}

    def _lexical(  # noqa: PLR0917 - one search's state, passed down once
        self,
        project_id: str,
        directory: Path,
        ledger: Ledger,
        cache: ProjectCache,
        terms: list[str],
        limit: int,
    ) -> list[CandidateRecord]:
        """The lexical ranking: the FTS5 index, or in process when it cannot be used."""
        if self._use_index:
            try:
                ids = self._index_ids(directory, ledger, cache, terms, limit)
                return [cache.records[i] for i in ids if i in cache.records]
            except Exception as exc:  # whatever broke the index, the ledger still answers
                self._problem("recall.index_unusable", f"{type(exc).__name__}: {exc}", project_id)
        return rank_by_overlap(list(cache.records.values()), cache.recorded, terms, limit)

    def _index_for_vectors(
        self, project_id: str, directory: Path, ledger: Ledger, cache: ProjectCache
    ) -> None:
        """Open the index for its vectors (hybrid ranking needs no bm25), rebuilding it once
        when missing, stale or corrupt, so that it is current whenever recall falls back to
        it. Without it, the facts' vectors are the ones the backfill keeps in memory."""
        if not self._use_index:
            return
        try:
            try:
                open_current_index(cache, directory, ledger.fingerprint)
            except IndexUnavailable as unavailable:
                self._rebuild(directory, ledger, cache, unavailable)
                open_current_index(cache, directory, ledger.fingerprint)
        except Exception as exc:  # whatever broke the index, the ledger still answers
            self._problem("recall.index_unusable", f"{type(exc).__name__}: {exc}", project_id)

    def _index_ids(
        self, directory: Path, ledger: Ledger, cache: ProjectCache, terms: list[str], limit: int
    ) -> list[str]:
        """Ids from the FTS5 index, rebuilding it once when missing, stale or corrupt."""
        try:
            found = search_index(cache, directory, terms, limit, ledger.fingerprint)
        except IndexUnavailable as unavailable:
            self._rebuild(directory, ledger, cache, unavailable)
            found = search_index(cache, directory, terms, limit, ledger.fingerprint)
        return [candidate_id for candidate_id, _rank in found]

    @staticmethod
    def _rebuild(
        directory: Path, ledger: Ledger, cache: ProjectCache, unavailable: IndexUnavailable
    ) -> None:
        """Build the index again from the ledger (StorageError when it cannot)."""
        cache.close_index()
        projections.rebuild_index(directory, ledger)
        log.info("recall.index_rebuilt", project_dir=str(directory), was=unavailable.state)

    def _hybrid(  # noqa: PLR0917 - one search's state, passed down once
        self,
        project_id: str,
        cache: ProjectCache,
        terms: list[str],
        frequency: dict[str, int],
        query: PromptQuery,
        limit: int,
    ) -> list[CandidateRecord]:
        assert self._embeddings is not None
        ids = list(cache.records)
        weights = rank.query_weights(terms, frequency, len(ids))
        total = sum(weights.values()) or 1.0
        covered = np.zeros(len(ids), dtype=np.float32)
        for key, term_weight in weights.items():
            covered += np.float32(term_weight / total) * self._stem_mask(cache, key)
        matrix, embedded = self._stacked(project_id, cache, len(query.vector))
        cosines = np.where(embedded, matrix @ query.vector, np.nan)
        # only the most relevant few become ranking candidates (128 would cost more than search)
        weight = self._embeddings.lexical_weight
        relevance = np.where(embedded, cosines + weight * covered, covered)
        best = np.argsort(-relevance, kind="stable")[: rank.CONSIDERED_PER_SHOWN * limit]
        pool = [
            rank.Candidate(
                key=ids[n],
                text=cache.records[ids[n]].fact,
                recorded_at=cache.recorded[ids[n]],
                coverage=float(covered[n]),
                cosine=float(cosines[n]) if embedded[n] else None,
            )
            for n in best.tolist()
        ]
        chosen = rank.rank(
            pool,
            semantic=True,
            limit=limit,
            floor=self._embeddings.floor,
            gate=query.gates.gate,
            lexical_weight=self._embeddings.lexical_weight,
            lexical_gate=query.gates.lexical,
            distinctive=self._embeddings.distinctive(terms, frequency, query.names),
        )
        return [cache.records[c.key] for c in chosen]

    def _stacked(
        self, project_id: str, cache: ProjectCache, dims: int
    ) -> tuple[Array, npt.NDArray[np.bool_]]:
        """The records' vectors as one matrix in `records` order, `dims` wide (the prompt's),
        and which rows are real: a record without a vector of that width (none could be made,
        or an endpoint now answers in another width) ranks on its words."""
        vectors = self._vectors(cache)
        if cache.stacked is None or cache.stacked[0].shape[1] != dims:
            matrix = np.zeros((len(cache.records), dims), dtype=np.float32)
            embedded = np.zeros(len(cache.records), dtype=np.bool_)
            for n, record_id in enumerate(cache.records):
                vector = vectors.get(record_id)
                if vector is not None and len(vector) == dims:
                    matrix[n], embedded[n] = vector, True
            cache.stacked = (matrix, embedded)
            self._note(project_id, cache)  # (only then can the facts without one change)
        return cache.stacked

    def _vectors(self, cache: ProjectCache) -> dict[str, Array]:
        """Each record's vector under the current model, from the index (records it holds none
        for rank on their words until the backfill has embedded them: `_note`)."""
        assert self._embeddings is not None
        model = self._embeddings.model_id
        if model != cache.vectors_model:
            cache.vectors, cache.vectors_model = {}, model
            cache.index_vectors_read = None
            cache.stacked = None
        if cache.index is not None and cache.index_vectors_read != cache.index_signature:
            cache.index_vectors_read = cache.index_signature
            embedder = self._embeddings.embedder
            dims = 0 if embedder is None else embedder.dims
            for record_id, vector in stored_vectors(cache.index, model, dims).items():
                if record_id in cache.records and record_id not in cache.vectors:
                    cache.vectors[record_id] = vector
                    cache.stacked = None
        return cache.vectors

    def _note(self, project_id: str, cache: ProjectCache) -> None:
        """Note the project for the backfill (`facts_to_embed`) with how many of its facts
        have no vector, or drop it when none lacks one (a fact that looks like a secret never
        goes to a model, and is not counted)."""
        missing = len(self._missing(cache))
        with self._projects_lock:
            cached = self._cached(project_id) is cache
            if cached:  # counted here from now on
                self._on_disk.pop(project_id, None)
                self._refused_only.pop(project_id, None)
            if missing and cache.vectors_model is not None and cached:
                self._wanting[project_id] = missing
            else:  # (a cache dropped meanwhile is the next recall's to note again)
                self._wanting.pop(project_id, None)

    @staticmethod
    def _missing(cache: ProjectCache) -> list[CandidateRecord]:
        """The records that have no vector and may get one."""
        missing = [r for r in cache.records.values() if r.id not in cache.vectors]
        for record in missing:
            if record.id not in cache.unembeddable:
                cache.unembeddable[record.id] = bool(secret_kinds(record.fact))
        return [record for record in missing if not cache.unembeddable[record.id]]

    def facts_pending(self) -> int:
        """Facts that have no vector yet, of the projects recalled lately and of those the
        backfill found so on disk (its progress, for status; a refused fact counts)."""
        with self._projects_lock:
            return sum(self._wanting.values()) + sum(self._on_disk.values())

    def facts_to_embed(self, limit: int, skip: frozenset[bytes]) -> FactBatch | None:
        """For the backfill: up to `limit` facts without a vector (after an upgrade, a model
        change, an index that could not be kept) of a project recall noted, or else of one on
        disk (`_check_on_disk`), leaving out those whose text's digest is in `skip` (refused by
        the model lately); None when there are none. The projects take turns, so that one
        whose facts the model fails holds up no other."""
        model = None if self._embeddings is None else self._embeddings.model_id
        if model is None:
            return None
        with self._projects_lock:
            noted = list(self._wanting)
        for project_id in noted:
            with self._projects_lock:
                cache = self._cached(project_id)
                if cache is None:  # dropped from the cache meanwhile
                    self._wanting.pop(project_id, None)
                    continue
            taken = self._batch_of(project_id, cache, model, limit, skip)
            if isinstance(taken, FactBatch):
                return taken
            self._release(project_id, cache, taken)
        self._check_on_disk()  # (once: the backfill's count at its start, or now)
        with self._projects_lock:
            found = [p for p in self._on_disk if not self._refused_still(p, skip)]
        for project_id in found:
            with self._projects_lock:
                self._refused_only.pop(project_id, None)
                cache = self._cached(project_id)
                if cache is None:
                    cache = self._backfill_caches[project_id] = ProjectCache()
            taken = self._batch_of(project_id, cache, model, limit, skip)
            with self._projects_lock:  # now noted (or unreadable: recall reports that)
                self._on_disk.pop(project_id, None)
            if isinstance(taken, FactBatch):
                return taken
            self._release(project_id, cache, taken)
        return None

    def _refused_still(self, project_id: str, skip: frozenset[bytes]) -> bool:
        """Whether every fact of `project_id` left was refused, and none of the refusals seen
        then has expired since (with `_projects_lock` held)."""
        seen = self._refused_only.get(project_id)
        return seen is not None and skip >= seen

    def _batch_of(
        self, project_id: str, cache: ProjectCache, model: str, limit: int, skip: frozenset[bytes]
    ) -> FactBatch | frozenset[bytes] | None:
        """The project's next batch; else the digests of the facts it has left without a
        vector, all refused lately (empty: none left); None when its ledger cannot be read."""
        with cache.lock:
            if not self._refresh_locked(project_id, cache):
                return None
            missing = self._missing(cache)
            digests = [text_digest(r.fact) for r in missing]
            chosen = [r for r, d in zip(missing, digests, strict=True) if d not in skip][:limit]
        if not chosen:
            return frozenset(digests)
        with self._projects_lock:
            if project_id in self._wanting:
                self._wanting.move_to_end(project_id)
        return FactBatch(project_id, model, chosen)

    def count_on_disk(self) -> None:
        """Look at every project on disk now (`_check_on_disk`), so that status counts their
        facts from the start (the backfill does this before its first batch)."""
        if self._embeddings is not None and self._embeddings.model_id is not None:
            self._check_on_disk()

    def _check_on_disk(self) -> None:
        """Look once at every project on disk for facts without a vector of the current model,
        and count them: without this, a project no recall has reached since an upgrade would
        be embedded only after its first recall, and status would not count it. One that is
        not cached is read in a cache of its own that is dropped after (`_on_disk` keeps its
        count); one recall has cached is noted as recall notes it."""
        if self._list_projects is None:
            return
        with self._projects_lock:
            unchecked = self._unchecked
        if unchecked is None:
            try:
                listed = self._list_projects()
            except OSError as exc:  # (looked at once: a later recall notes a project itself)
                self._problem("recall.projects_unlisted", f"{type(exc).__name__}: {exc}", "")
                listed = []
            unchecked = list(reversed(listed))
            with self._projects_lock:
                self._unchecked = unchecked
        while True:
            with self._projects_lock:
                if not unchecked:
                    return
                project_id = unchecked.pop()
                cache = self._cached(project_id)
            if cache is not None:  # a lexical recall, or none with terms, did not note it
                with cache.lock:
                    self._refresh_locked(project_id, cache)
                continue
            missing = self._missing_on_disk(project_id)
            with self._projects_lock:
                if missing and self._cached(project_id) is None:
                    self._on_disk[project_id] = missing

    def _missing_on_disk(self, project_id: str) -> int:
        """How many facts of a project that is not cached have no vector and may get one, read
        in a cache of its own that is dropped after; 0 when its ledger cannot be read (its
        recall reports that)."""
        directory = self._project_dir(project_id)
        cache = ProjectCache()
        try:
            ledger = self._current_ledger(directory, cache)
            if not ledger.candidates:
                return 0
            if self._use_index:
                with contextlib.suppress(Exception):  # (then no vector: all are counted)
                    open_current_index(cache, directory, ledger.fingerprint)
            self._vectors(cache)
            return len(self._missing(cache))
        except StorageError:
            return 0
        finally:
            cache.close_index()

    def _release(
        self, project_id: str, cache: ProjectCache, refused: frozenset[bytes] | None
    ) -> None:
        """Drop the backfill's cache of a project once it has nothing left to send (it holds
        the project's facts and vectors): with `refused`, the digests of the facts it has left,
        all refused lately, which stay counted, uncached, until one of those refusals expires;
        with None (its ledger could not be read), uncounted: its recall reports the ledger and
        notes it again. (Vectors its index could not be written with go too: they are
        embedded again after a start, or when a recall notes the project.)"""
        with self._projects_lock:
            if self._backfill_caches.get(project_id) is not cache:
                return
            missing = self._wanting.pop(project_id, 0)
            if missing and refused:
                self._on_disk[project_id] = missing
                self._refused_only[project_id] = refused
            elif missing and refused is not None:  # (after a batch: more to send, its turn)
                self._wanting[project_id] = missing
                return
            del self._backfill_caches[project_id]
        with cache.lock:
            cache.close_index()

    def keep_fact_vectors(self, batch: FactBatch, matrix: Array) -> int:
        """Keep the vectors the backfill made for `batch` (one row per fact) and write the
        project's index again with every fact's vector; how many were kept (a fact no longer
        in the ledger, or changed, is not)."""
        with self._projects_lock:
            cache = self._cached(batch.project_id)
        if cache is None:
            return 0  # dropped from the cache: its next recall notes it again
        with cache.lock:
            # the ledger and the index as they are now: a publish may have landed meanwhile,
            # with its own facts' vectors, which the index written below must keep
            if not self._refresh_locked(batch.project_id, cache):
                return 0
            if cache.vectors_model != batch.model:
                return 0  # (another model since)
            kept = 0
            for record, row in zip(batch.records, matrix, strict=True):
                if cache.records.get(record.id) == record and record.id not in cache.vectors:
                    cache.vectors[record.id] = np.ascontiguousarray(row)
                    kept += 1
            if kept:
                cache.stacked = None
                if cache.ledger is not None:
                    self._save_vectors(batch.project_id, self._project_dir(batch.project_id), cache)
            self._note(batch.project_id, cache)  # (the count left)
        self._release(batch.project_id, cache, frozenset())
        return kept

    def _refresh_locked(self, project_id: str, cache: ProjectCache) -> bool:
        """The project's ledger, index and stored vectors as recall would read them now, or
        False when the ledger cannot be read (recall reports it)."""
        directory = self._project_dir(project_id)
        try:
            ledger = self._current_ledger(directory, cache)
        except StorageError:
            return False
        self._index_for_vectors(project_id, directory, ledger, cache)
        self._vectors(cache)
        self._note(project_id, cache)
        return True

    def _save_vectors(self, project_id: str, directory: Path, cache: ProjectCache) -> None:
        """Write the index again with the vectors of every fact, after the backfill embedded
        some: otherwise a project whose index holds none of the current model's (one not
        published to since an upgrade or a model change) would have them embedded again after
        every start. Without the project lock, as a rebuild: a publish that wins the rename
        leaves this index stale, and the next search rebuilds it carrying these vectors over."""
        # a publish that landed since the ledger was read: its facts, and their vectors in the
        # index it wrote, are read first, so that the index written here keeps them
        moved = file_signature(ledger_path(directory)) != cache.ledger_signature
        if moved and not self._refresh_locked(project_id, cache):
            return
        model, ledger = cache.vectors_model, cache.ledger
        if not self._use_index or cache.index is None or model is None or ledger is None:
            return  # no usable index to keep them in: they stay in memory (while cached)
        vectors = IndexVectors(
            model,
            {
                cache.records[record_id].fact: vector.astype(np.float16).tobytes()
                for record_id, vector in cache.vectors.items()
                if record_id in cache.records
            },
        )
        try:
            projections.write_index(directory, ledger, vectors)
        except StorageError as exc:
            self._problem("recall.index_unusable", exc.message, project_id)
            return
        cache.close_index()  # the next search opens the new file, and reads its vectors

    def _problem(self, kind: str, message: str, project_id: str) -> None:
        log.warning(kind, project_id=project_id, error=message)
        if self._record_error is not None:
            self._record_error(kind, message)
