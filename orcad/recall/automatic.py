"""The automatic part of recall: the project's ledger, searched through its FTS5 index.

The ledger is the truth and the index a derived cache keyed by the ledger's fingerprint
(spec: Storage). Before searching, the index is checked against the ledger; a missing, stale
or corrupt index is rebuilt from the ledger. When it cannot be rebuilt (or the index module
fails in any way), the candidates are ranked in process by lexical overlap plus recency, so
recall keeps answering without its cache.

The ledger is re-read only when its file changed (inode, size or mtime differ), and the index
state is re-checked only when the ledger or the index files changed, so a steady project costs
a few `stat` calls and one query per recall.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import structlog

from orcad.capture import projections
from orcad.capture.ledger import Ledger, ledger_path, read_ledger
from orcad.clock import parse_time
from orcad.errors import StorageError
from orcad.query import most_selective
from orcad.recall import rank
from orcad.recall.embedding import Array, Embeddings
from orcad.recall.select import AutomaticCandidate, rank_by_overlap, stem, stems

log = structlog.get_logger("orcad.recall.automatic")

FileSignature = tuple[int, int, int] | None  # (inode, size, mtime_ns), None when absent
ErrorRecorder = Callable[[str, str], None]


def file_signature(path: Path) -> FileSignature:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def to_candidates(ledger: Ledger) -> list[AutomaticCandidate]:
    return [
        AutomaticCandidate(
            id=record.id,
            category=record.category,
            fact=record.fact,
            session_id=record.session_id,
            turn_id=record.turn_id,
            recorded_at=parse_time(record.recorded_at),
        )
        for record in ledger.candidates
    ]


@dataclass
class ProjectCache:
    ledger_signature: FileSignature = None
    ledger: Ledger | None = None
    candidates: dict[str, AutomaticCandidate] = field(default_factory=dict)
    # derived from the ledger like index.sqlite3: each candidate's stems and its vector under
    # `vectors_model`, kept while the candidate is in the ledger
    stems: dict[str, frozenset[str]] = field(default_factory=dict)
    vectors: dict[str, Array] = field(default_factory=dict)
    vectors_model: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # one search per project at once


class ProjectMemorySearch:
    """Recall's search over each project's ledger and index (one instance per daemon)."""

    def __init__(
        self,
        project_dir: Callable[[str], Path],
        record_error: ErrorRecorder | None = None,
        *,
        use_index: bool = True,
        embeddings: Embeddings | None = None,
    ) -> None:
        self._project_dir = project_dir
        self._record_error = record_error
        self._use_index = use_index
        self._embeddings = embeddings
        self._projects: dict[str, ProjectCache] = {}

    def search_blocking(
        self,
        project_id: str,
        terms: list[str],
        limit: int,
        query_vector: Array | None = None,
    ) -> list[AutomaticCandidate]:
        """The candidates to inject, best first. `terms` may be longer than 12: the most
        selective among this project's candidates are used. With `query_vector` (the prompt's
        embedding) the ranking is hybrid and floored (orcad.recall.rank)."""
        directory = self._project_dir(project_id)
        cache = self._projects.setdefault(project_id, ProjectCache())
        with cache.lock:
            return self._search_locked(project_id, directory, cache, terms, limit, query_vector)

    def _search_locked(  # noqa: PLR0917 - one search's state, passed down once
        self,
        project_id: str,
        directory: Path,
        cache: ProjectCache,
        terms: list[str],
        limit: int,
        query_vector: Array | None = None,
    ) -> list[AutomaticCandidate]:
        try:
            ledger = self._current_ledger(directory, cache)
        except StorageError as exc:
            self._problem("recall.ledger_unreadable", exc.message, project_id)
            return []
        if not ledger.candidates or not terms:
            return []
        frequency = self._document_frequency(cache, terms)
        terms = most_selective(terms, frequency)
        lexical = self._lexical(project_id, directory, ledger, cache, terms, limit)
        if query_vector is None or self._embeddings is None:
            return lexical
        return self._hybrid(cache, terms, frequency, query_vector, limit)

    def _document_frequency(self, cache: ProjectCache, terms: list[str]) -> dict[str, int]:
        for candidate_id, candidate in cache.candidates.items():
            if candidate_id not in cache.stems:
                cache.stems[candidate_id] = frozenset(stems(candidate.fact))
        keys = {term: stem(term) for term in terms}
        return {
            term: sum(1 for found in cache.stems.values() if key in found)
            for term, key in keys.items()
        }

    def _hybrid(
        self,
        cache: ProjectCache,
        terms: list[str],
        frequency: dict[str, int],
        query_vector: Array,
        limit: int,
    ) -> list[AutomaticCandidate]:
        assert self._embeddings is not None
        vectors = self._vectors(cache)
        weights = rank.query_weights(terms, frequency, len(cache.candidates))
        total = sum(weights.values()) or 1.0
        ids = list(cache.candidates)
        cosines = np.full(len(ids), np.nan, dtype=np.float32)
        embedded = [n for n, i in enumerate(ids) if i in vectors]
        if embedded:
            cosines[embedded] = np.stack([vectors[ids[n]] for n in embedded]) @ query_vector
        covered = np.zeros(len(ids), dtype=np.float32)
        for n, i in enumerate(ids):
            found = cache.stems[i]
            covered[n] = sum(weight for term, weight in weights.items() if term in found) / total
        # only the most relevant few become ranking candidates (128 would cost more than search)
        weight = self._embeddings.lexical_weight
        relevance = np.where(np.isnan(cosines), covered, cosines + weight * covered)
        best = np.argsort(-relevance, kind="stable")[: rank.CONSIDERED_PER_SHOWN * limit]
        pool = [
            rank.Candidate(
                key=ids[n],
                text=cache.candidates[ids[n]].fact,
                recorded_at=cache.candidates[ids[n]].recorded_at,
                coverage=float(covered[n]),
                cosine=None if np.isnan(cosines[n]) else float(cosines[n]),
            )
            for n in best.tolist()
        ]
        chosen = rank.rank(
            pool,
            semantic=True,
            limit=limit,
            floor=self._embeddings.floor,
            gate=self._embeddings.gate,
            lexical_weight=self._embeddings.lexical_weight,
        )
        return [cache.candidates[c.key] for c in chosen]

    def _vectors(self, cache: ProjectCache) -> dict[str, Array]:
        """Each candidate's vector under the current model, embedding the new ones."""
        assert self._embeddings is not None
        model = self._embeddings.model_id
        if model != cache.vectors_model:
            cache.vectors, cache.vectors_model = {}, model
        missing = [c for c in cache.candidates.values() if c.id not in cache.vectors]
        if missing:
            matrix = self._embeddings.embed([c.fact for c in missing])
            if matrix is not None:
                for candidate, row in zip(missing, matrix, strict=True):
                    cache.vectors[candidate.id] = np.ascontiguousarray(row)
        return cache.vectors

    def _lexical(  # noqa: PLR0917 - one search's state, passed down once
        self,
        project_id: str,
        directory: Path,
        ledger: Ledger,
        cache: ProjectCache,
        terms: list[str],
        limit: int,
    ) -> list[AutomaticCandidate]:
        """The lexical ranking: the FTS5 index, or in process when it cannot be used."""
        if self._use_index:
            try:
                ids = self._search_index(directory, ledger, terms, limit)
                return [cache.candidates[i] for i in ids if i in cache.candidates]
            except Exception as exc:  # whatever broke the index, the ledger still answers
                self._problem("recall.index_unusable", f"{type(exc).__name__}: {exc}", project_id)
        return rank_by_overlap(list(cache.candidates.values()), terms, limit)

    def _current_ledger(self, directory: Path, cache: ProjectCache) -> Ledger:
        signature = file_signature(ledger_path(directory))
        if cache.ledger is None or signature is None or signature != cache.ledger_signature:
            ledger = read_ledger(directory)
            cache.ledger, cache.ledger_signature = ledger, signature
            cache.candidates = {c.id: c for c in to_candidates(ledger)}
            cache.stems = {i: s for i, s in cache.stems.items() if i in cache.candidates}
            cache.vectors = {i: v for i, v in cache.vectors.items() if i in cache.candidates}
        return cache.ledger

    @staticmethod
    def _search_index(directory: Path, ledger: Ledger, terms: list[str], limit: int) -> list[str]:
        """Ids from the FTS5 index, rebuilding it once when missing, stale or corrupt."""
        fingerprint = ledger.fingerprint
        try:
            found = projections.search_index(directory, terms, limit, fingerprint=fingerprint)
        except projections.IndexUnavailable as unavailable:
            projections.rebuild_index(directory, ledger)
            log.info("recall.index_rebuilt", project_dir=str(directory), was=unavailable.state)
            found = projections.search_index(directory, terms, limit, fingerprint=fingerprint)
        return [candidate_id for candidate_id, _rank in found]

    def _problem(self, kind: str, message: str, project_id: str) -> None:
        log.warning(kind, project_id=project_id, error=message)
        if self._record_error is not None:
            self._record_error(kind, message)
