"""One cache per project for recall's search of automatic memory and for the backfill of its
facts' vectors, and how both read a project into it.

The ledger (`candidates.jsonl`) is the truth; the FTS5 index (`index.sqlite3`, written by
orcad.capture.projections) is a cache derived from it and stamped with its fingerprint. For each
project recall keeps one `ProjectCache`: the ledger's records and what recall derives from them
(each record's time, word stems and vector), and the open read-only connection to the index with
the fingerprint it was built from. Both files are keyed by the same `file_signature` (device,
inode, size, mtime), so a steady project costs two `stat` calls (and, without a model, one
bm25 query) per recall, and a replaced file is noticed on the next one.

`ProjectCaches` holds every such cache, recall's (orcad.recall.automatic) and the backfill's
(orcad.recall.fact_backfill), with the backfill's counts, under one lock; a project's own cache
lock is always taken before that lock, never while holding it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from orcad.capture import projections
from orcad.capture.ledger import CandidateRecord, Ledger, ledger_path, read_ledger
from orcad.capture.projections import IndexUnavailable
from orcad.clock import parse_time
from orcad.durable_files import FileSignature, file_signature
from orcad.query import match_expression
from orcad.recall.embedders import Array
from orcad.recall.embedding import Embeddings
from orcad.recall.rank import StoreCentre, text_stems
from orcad.secrets import secret_kinds
from orcad.storage_faults import fault_text

log = structlog.get_logger("orcad.recall.automatic")

ErrorRecorder = Callable[[str, str], None]
# a fact's vector: float32 as read or embedded, float16 once a row of the stacked matrix
FactVector = npt.NDArray[np.float32] | npt.NDArray[np.float16]
PROJECTS_CACHED = 64  # projects whose ledger and open index are kept, least recently used dropped
# projects, of those searched most lately, whose index connection stays open (about 0.2 MiB
# each); the others' is closed once their search is over (`ProjectCaches.release_idle_indexes`)
INDEXES_OPEN = 4

# bm25 is lower-is-better; equal ranks newest first
_INDEX_QUERY = (
    "SELECT candidate_id, bm25(candidates) AS rank FROM candidates "
    "WHERE candidates MATCH ? ORDER BY rank, recorded_at DESC LIMIT ?"
)


def places_dtype(records: int) -> type[np.integer[Any]]:
    """The narrowest unsigned integer holding a place among `records` records (one byte for a
    ledger of at most 128)."""
    return np.uint8 if records <= 256 else np.uint32


@dataclass
class ProjectCache:
    """What recall keeps of one project between recalls (see the module docstring)."""

    ledger_signature: FileSignature | None = None
    ledger: Ledger | None = None
    records: dict[str, CandidateRecord] = field(default_factory=dict)
    recorded: dict[str, float] = field(default_factory=dict)  # unix seconds, per record
    stems: dict[str, frozenset[str]] = field(default_factory=dict)
    # per stem, the places (in `records` order) of the records that contain it, as the bytes of
    # an array of `places_dtype` (a bytes object costs 33 bytes and one a place, where a mask
    # of 128 booleans cost 240, and 1.3 MiB a project for the 4096 stems kept); cleared with
    # the ledger
    stem_places: dict[str, bytes] = field(default_factory=dict)
    # per record recall found without a vector: whether it looks like a secret (never embedded)
    unembeddable: dict[str, bool] = field(default_factory=dict)
    # under `vectors_model`; once stacked, each is a row of `stacked`'s matrix, not a copy
    vectors: dict[str, FactVector] = field(default_factory=dict)
    vectors_model: str | None = None
    # `vectors` stacked in `records` order (zero rows where there is none) as float16, the
    # index's own precision (half the bytes of float32: 96 KiB for 128 facts), which rows are
    # real, and the centre of those; None when `vectors` changed since
    stacked: tuple[npt.NDArray[np.float16], npt.NDArray[np.bool_], StoreCentre] | None = None
    # per record (in `records` order), the place of the newest record that corrects it, if any
    # (orcad.recall.rank.corrections_among); None until a recall needs them
    corrected_by: list[int | None] | None = None
    index_signature: FileSignature | None = None
    index: sqlite3.Connection | None = None
    index_fingerprint: str = ""
    index_vectors_read: FileSignature | None = None  # the index file whose vectors were read
    lock: threading.Lock = field(default_factory=threading.Lock)  # one search per project at once

    def close_index(self) -> None:
        if self.index is not None:
            self.index.close()
        self.index, self.index_signature, self.index_fingerprint = None, None, ""

    def release_index(self) -> None:
        """Close the connection, keeping what it found of its file (signature, fingerprint):
        while the file stays the same, a hybrid search needs no connection to it
        (`ProjectCaches.index_for_vectors`); a lexical one opens it again."""
        if self.index is not None:
            self.index.close()
            self.index = None

    def index_known_current(self, path: Path, fingerprint: str, model: str | None) -> bool:
        """Whether the index file is still the one last opened, built from the ledger of
        `fingerprint`, and its vectors of `model` already read: nothing a connection would
        give."""
        return (
            self.index_signature is not None
            and self.index_fingerprint == fingerprint
            and self.index_vectors_read == self.index_signature
            and self.vectors_model == model
            and file_signature(path) == self.index_signature
        )


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
        raise IndexUnavailable("corrupt", fault_text(exc)) from exc
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


def rebuild_index(
    directory: Path, ledger: Ledger, cache: ProjectCache, unavailable: IndexUnavailable
) -> bool:
    """Build the index again from the ledger (StorageError when it cannot); False when the
    ledger was replaced meanwhile, which leaves no index for it (projections.rebuild_index)."""
    cache.close_index()
    placed = projections.rebuild_index(directory, ledger, unlocked=True)
    log.info("recall.index_rebuilt", project_dir=str(directory), was=unavailable.state)
    return placed


class ProjectCaches:
    """Every project's cache, recall's and the backfill's, and the backfill's counts, under
    `lock` (one instance per daemon, shared by the search and the backfill); and how both
    read a project into its cache, as recall would read it now."""

    def __init__(
        self,
        project_dir: Callable[[str], Path],
        record_error: ErrorRecorder | None = None,
        *,
        use_index: bool = True,
        embeddings: Embeddings | None = None,
    ) -> None:
        self.project_dir = project_dir
        self.use_index = use_index
        self.embeddings = embeddings
        self._record_error = record_error
        self.projects: OrderedDict[str, ProjectCache] = OrderedDict()
        # projects whose facts recall found without vectors, with how many: the backfill's
        self.wanting: OrderedDict[str, int] = OrderedDict()
        # projects on disk found with facts without a vector, with how many, until the backfill
        # takes them up, in caches of its own (apart from recall's, which they must not push
        # out), dropped when it is done; one whose facts left were all refused waits, uncached,
        # until a refusal expires (with the refusals it saw)
        self.on_disk: dict[str, int] = {}
        self.backfill_caches: dict[str, ProjectCache] = {}
        self.refused_only: dict[str, frozenset[bytes]] = {}
        self.lock = threading.Lock()

    def close(self) -> None:
        """Close every open index connection (daemon shutdown, tests)."""
        with self.lock:
            caches = [*self.projects.values(), *self.backfill_caches.values()]
            self.projects, self.backfill_caches = OrderedDict(), {}
        for cache in caches:
            with cache.lock:
                cache.close_index()

    def cache(self, project_id: str) -> ProjectCache:
        """Recall's cache of the project (the backfill's, if it has one), made if there is
        none; the least recently used is dropped past PROJECTS_CACHED."""
        with self.lock:
            cache = self.projects.get(project_id)
            if cache is not None:
                self.projects.move_to_end(project_id)
                return cache
            cache = self.backfill_caches.pop(project_id, None) or ProjectCache()
            self.projects[project_id] = cache
            while len(self.projects) > PROJECTS_CACHED:
                # a search still using the dropped cache finishes with it; its connection
                # closes when that search lets go of it
                dropped, _cache = self.projects.popitem(last=False)
                self.wanting.pop(dropped, None)  # its next recall notes it again
            return cache

    def release_idle_indexes(self) -> None:
        """Close the index connections of the projects recall cached but has not searched
        among the latest INDEXES_OPEN, once their vectors are read (a hybrid search needs the
        connection no more; a lexical one, without a model, keeps it): each costs SQLite's
        schema and page cache. One in use (its lock held) is left for the next time."""
        with self.lock:
            caches = list(self.projects.values())
        for cache in caches[: max(0, len(caches) - INDEXES_OPEN)]:
            if cache.index is None or not cache.lock.acquire(blocking=False):
                continue  # (none, or in use: left for the next time)
            try:
                signature = cache.index_signature
                if signature is not None and cache.index_vectors_read == signature:
                    cache.release_index()
            finally:
                cache.lock.release()

    def cached(self, project_id: str) -> ProjectCache | None:
        """The project's cache, recall's or the backfill's (with `lock` held)."""
        return self.projects.get(project_id) or self.backfill_caches.get(project_id)

    def current_ledger(self, directory: Path, cache: ProjectCache) -> Ledger:
        signature = file_signature(ledger_path(directory))
        if cache.ledger is None or signature is None or signature != cache.ledger_signature:
            ledger = read_ledger(directory)
            records = {record.id: record for record in ledger.candidates}
            recorded = {record.id: parse_time(record.recorded_at) for record in records.values()}
            cache.ledger, cache.ledger_signature = ledger, signature
            cache.records, cache.recorded = records, recorded
            # the very sets ranking keeps (rank.text_stems), not a copy of each
            cache.stems = {i: text_stems(r.fact) for i, r in records.items()}
            cache.stem_places = {}
            cache.corrected_by = None
            cache.unembeddable = {}
            cache.vectors = {i: v for i, v in cache.vectors.items() if i in records}
            cache.stacked = None
        return cache.ledger

    def index_for_vectors(
        self, project_id: str, directory: Path, ledger: Ledger, cache: ProjectCache
    ) -> None:
        """Open the index for its vectors (hybrid ranking needs no bm25), rebuilding it once
        when missing, stale or corrupt, so that it is current whenever recall falls back to
        it. Without it, the facts' vectors are the ones the backfill keeps in memory."""
        if not self.use_index:
            return
        model = None if self.embeddings is None else self.embeddings.model_id
        path = projections.index_path(directory)
        if cache.index is None and cache.index_known_current(path, ledger.fingerprint, model):
            return  # (released while idle: the same file, its vectors read)
        try:
            try:
                open_current_index(cache, directory, ledger.fingerprint)
            except IndexUnavailable as unavailable:
                if not rebuild_index(directory, ledger, cache, unavailable):
                    return  # the ledger moved on meanwhile: the next search builds it
                open_current_index(cache, directory, ledger.fingerprint)
        except Exception as exc:  # whatever broke the index, the ledger still answers
            self.problem("recall.index_unusable", f"{type(exc).__name__}: {exc}", project_id)

    def vectors(self, cache: ProjectCache) -> dict[str, FactVector]:
        """Each record's vector under the current model, from the index (records it holds none
        for rank on their words until the backfill has embedded them: `note`)."""
        assert self.embeddings is not None
        model = self.embeddings.model_id
        if model != cache.vectors_model:
            cache.vectors, cache.vectors_model = {}, model
            cache.index_vectors_read = None
            cache.stacked = None
        if cache.index is not None and cache.index_vectors_read != cache.index_signature:
            cache.index_vectors_read = cache.index_signature
            embedder = self.embeddings.embedder
            dims = 0 if embedder is None else embedder.dims
            for record_id, vector in stored_vectors(cache.index, model, dims).items():
                if record_id in cache.records and record_id not in cache.vectors:
                    cache.vectors[record_id] = vector
                    cache.stacked = None
        return cache.vectors

    def note(self, project_id: str, cache: ProjectCache) -> None:
        """Note the project for the backfill (`facts_to_embed`) with how many of its facts
        have no vector, or drop it when none lacks one (a fact that looks like a secret never
        goes to a model, and is not counted)."""
        missing = len(self.missing(cache))
        with self.lock:
            cached = self.cached(project_id) is cache
            if cached:  # counted here from now on
                self.on_disk.pop(project_id, None)
                self.refused_only.pop(project_id, None)
            if missing and cache.vectors_model is not None and cached:
                self.wanting[project_id] = missing
            else:  # (a cache dropped meanwhile is the next recall's to note again)
                self.wanting.pop(project_id, None)

    @staticmethod
    def missing(cache: ProjectCache) -> list[CandidateRecord]:
        """The records that have no vector and may get one."""
        missing = [r for r in cache.records.values() if r.id not in cache.vectors]
        for record in missing:
            if record.id not in cache.unembeddable:
                cache.unembeddable[record.id] = bool(secret_kinds(record.fact))
        return [record for record in missing if not cache.unembeddable[record.id]]

    def problem(self, kind: str, message: str, project_id: str) -> None:
        log.warning(kind, project_id=project_id, error=message)
        if self._record_error is not None:
            self._record_error(kind, message)
