"""The automatic part of recall: every search of a project's automatic memory, in one place.

Each project's ledger, index and what recall derives from them are kept in one `ProjectCache`
(orcad.recall.project_cache), shared with the backfill of the facts' vectors
(orcad.recall.fact_backfill).

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
   background (`FactVectorBackfill.facts_to_embed`, `FactVectorBackfill.keep_fact_vectors`).

The answer is the ledger's own records (`CandidateRecord`), best first; orcad.recall.select
turns the chosen ones into wire entries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from orcad.capture.ledger import CandidateRecord, Ledger
from orcad.capture.projections import IndexUnavailable, IndexVectors
from orcad.errors import StorageError
from orcad.limits import LEDGER_MAX_CANDIDATES, RECALL_AUTOMATIC_MAX_ENTRIES
from orcad.query import most_selective, stem, stems
from orcad.recall import rank
from orcad.recall.embedding import Embeddings, PromptQuery
from orcad.recall.fact_backfill import FactVectorBackfill
from orcad.recall.project_cache import (
    ErrorRecorder,
    ProjectCache,
    ProjectCaches,
    places_dtype,
    rebuild_index,
    search_index,
)

STEM_PLACES_CACHED = 4096  # per project: which records contain a stem, for the stems last asked


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
            # fsum: exactly rounded, so equal sets of terms score equal in any order of the set
            score = math.fsum(math.log(1.0 + total / frequency[term]) for term in shared)
            scored.append((-score, -recorded[record.id], record.id, record))
    scored.sort(key=lambda item: item[:3])
    return [item[3] for item in scored[:limit]]


class ProjectMemorySearch:
    """Recall's search over each project's automatic memory (one instance per daemon); its
    `backfill` embeds, on the same caches, the facts recall finds without a vector."""

    def __init__(
        self,
        project_dir: Callable[[str], Path],
        record_error: ErrorRecorder | None = None,
        *,
        use_index: bool = True,
        embeddings: Embeddings | None = None,
        list_projects: Callable[[], list[str]] | None = None,
    ) -> None:
        self._embeddings = embeddings
        self._caches = ProjectCaches(
            project_dir, record_error, use_index=use_index, embeddings=embeddings
        )
        self.backfill = FactVectorBackfill(self._caches, list_projects)

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
        directory = self._caches.project_dir(project_id)
        cache = self._caches.cache(project_id)
        try:
            with cache.lock:
                return self._search_locked(project_id, directory, cache, terms, limit, query)
        finally:
            self._caches.release_idle_indexes()

    def close(self) -> None:
        """Close every open index connection (daemon shutdown, tests)."""
        self._caches.close()

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
            ledger = self._caches.current_ledger(directory, cache)
        except StorageError as exc:
            self._caches.problem("recall.ledger_unreadable", exc.message, project_id)
            return []
        if not ledger.candidates or not terms:
            return []
        frequency = self._document_frequency(cache, terms)
        terms = most_selective(terms, frequency)
        if query is None or self._embeddings is None:
            return self._lexical(project_id, directory, ledger, cache, terms, limit)
        self._caches.index_for_vectors(project_id, directory, ledger, cache)
        return self._hybrid(project_id, cache, terms, frequency, query, limit)

    @staticmethod
    def _stem_places(cache: ProjectCache, key: str) -> npt.NDArray[np.integer[Any]]:
        """The places (in `records` order) of the records that contain the stem, kept as the
        bytes of a small array (`ProjectCache.stem_places`)."""
        dtype = places_dtype(len(cache.records))
        places = cache.stem_places.get(key)
        if places is None:
            if len(cache.stem_places) >= STEM_PLACES_CACHED:
                cache.stem_places.clear()
            found = [n for n, i in enumerate(cache.records) if key in cache.stems[i]]
            places = cache.stem_places[key] = np.array(found, dtype).tobytes()
        return np.frombuffer(places, dtype)

    def _document_frequency(self, cache: ProjectCache, terms: list[str]) -> dict[str, int]:
        return {term: len(self._stem_places(cache, stem(term))) for term in terms}

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
        if self._caches.use_index:
            try:
                ids = self._index_ids(directory, ledger, cache, terms, limit)
            except Exception as exc:  # whatever broke the index, the ledger still answers
                self._caches.problem(
                    "recall.index_unusable", f"{type(exc).__name__}: {exc}", project_id
                )
            else:
                if ids is not None:
                    return [cache.records[i] for i in ids if i in cache.records]
        return rank_by_overlap(list(cache.records.values()), cache.recorded, terms, limit)

    def _index_ids(
        self, directory: Path, ledger: Ledger, cache: ProjectCache, terms: list[str], limit: int
    ) -> list[str] | None:
        """Ids from the FTS5 index, rebuilding it once when missing, stale or corrupt; None
        when the ledger was replaced while it was rebuilt (ranked in process then)."""
        try:
            found = search_index(cache, directory, terms, limit, ledger.fingerprint)
        except IndexUnavailable as unavailable:
            if not rebuild_index(directory, ledger, cache, unavailable):
                return None
            found = search_index(cache, directory, terms, limit, ledger.fingerprint)
        return [candidate_id for candidate_id, _rank in found]

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
            places = self._stem_places(cache, key)  # (take and put: faster than `[places] +=`)
            covered.put(places, covered.take(places) + np.float32(term_weight / total))
        matrix, embedded, centre = self._stacked(project_id, cache, len(query.vector))
        raw = matrix.astype(np.float32) @ query.vector
        cosines = np.where(embedded, raw, np.nan)
        # only the most relevant few become ranking candidates (128 would cost more than search)
        weight = self._embeddings.lexical_weight
        relevance = np.where(embedded, cosines + weight * covered, covered)
        best = np.argsort(-relevance, kind="stable")[: rank.CONSIDERED_PER_SHOWN * limit]
        # and the later facts that correct those, however far from the prompt, to rank above
        # what they correct
        corrections = self._corrections(cache, best.tolist())
        best = np.concatenate([best, np.array(corrections, dtype=best.dtype)])
        # the few considered are ordered by their cosines measured from the ledger's centre
        # (the gate and the floor read the cosines themselves; docs/recall.md, "The automatic
        # part orders from the ledger's centre")
        centred = rank.centred_cosines(raw[best], query.vector, centre.rows(best))
        pool = [
            rank.Candidate(
                key=ids[n],
                text=cache.records[ids[n]].fact,
                recorded_at=cache.recorded[ids[n]],
                coverage=float(covered[n]),
                cosine=float(cosines[n]) if embedded[n] else None,
                order_cosine=float(centred[place]) if embedded[n] else None,
            )
            for place, n in enumerate(best.tolist())
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
            asked=frozenset(weights) | query.names,
            corrections=frozenset(ids[n] for n in corrections),
        )
        return [cache.records[c.key] for c in chosen]

    @staticmethod
    def _corrections(cache: ProjectCache, places: list[int]) -> list[int]:
        """For each fact at `places`, the place of the newest fact correcting it, when it is
        not among them (one a fact: facts cut from one template with a number changed each
        correct all the older ones)."""
        if cache.corrected_by is None:
            records = list(cache.records.values())
            recorded = [cache.recorded[r.id] for r in records]
            cache.corrected_by = [
                max(later, key=lambda j: (recorded[j], j)) if later else None
                for later in rank.corrections_among([r.fact for r in records], recorded)
            ]
        given = set(places)
        found = (cache.corrected_by[n] for n in places)
        return list(dict.fromkeys(j for j in found if j is not None and j not in given))

    def _stacked(
        self, project_id: str, cache: ProjectCache, dims: int
    ) -> tuple[npt.NDArray[np.float16], npt.NDArray[np.bool_], rank.StoreCentre]:
        """The records' vectors as one matrix in `records` order, `dims` wide (the prompt's),
        which rows are real (a record without a vector of that width, none could be made or
        an endpoint now answers in another width, ranks on its words) and their centre."""
        vectors = self._caches.vectors(cache)
        if cache.stacked is None or cache.stacked[0].shape[1] != dims:
            # float16, as the index stores them: half the bytes of float32 and the same values
            # (a vector the backfill made is rounded as its index row is, and read back after a
            # start); ranking reads them widened to float32, as before
            matrix = np.zeros((len(cache.records), dims), dtype=np.float16)
            embedded = np.zeros(len(cache.records), dtype=np.bool_)
            for n, record_id in enumerate(cache.records):
                vector = vectors.get(record_id)
                if vector is not None and len(vector) == dims:
                    matrix[n], embedded[n] = vector, True
                    vectors[record_id] = matrix[n]  # kept once: the matrix's row, not a copy
            centre = rank.StoreCentre.of(matrix.astype(np.float32), embedded)
            cache.stacked = (matrix, embedded, centre)
            self._caches.note(project_id, cache)  # (only then can the facts without one change)
        return cache.stacked
