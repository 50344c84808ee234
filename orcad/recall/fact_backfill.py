"""The automatic facts' share of the background backfill (orcad.recall.deliberate.Backfill):
which facts recall found without a vector of the current model, and keeping the vectors made
for them.

A record the index has no vector for (another model, an index from before, an index that cannot
be used) ranks on its words until the backfill has embedded it (`facts_to_embed`,
`keep_fact_vectors`), which keeps it in the project's cache (orcad.recall.project_cache) and
writes the index again with the others (`_save_vectors`). The backfill also looks once, after a
start, at every project on disk that recall has not cached (`_check_on_disk`), so that a project
no recall has reached since an upgrade is embedded and counted too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from orcad.capture import projections
from orcad.capture.ledger import CandidateRecord, ledger_path
from orcad.capture.projections import IndexVectors
from orcad.deliberate.vectors import text_digest
from orcad.durable_files import file_signature
from orcad.errors import StorageError
from orcad.recall.embedders import Array
from orcad.recall.project_cache import ProjectCache, ProjectCaches, open_current_index


class FactBatch(NamedTuple):
    """Facts of one project for the backfill to embed with `model`."""

    project_id: str
    model: str
    records: list[CandidateRecord]


class FactVectorBackfill:
    """Which facts of the projects' caches (`ProjectCaches`, shared with recall's search) want
    a vector, and keeping those the backfill made (one instance per daemon)."""

    def __init__(
        self, caches: ProjectCaches, list_projects: Callable[[], list[str]] | None = None
    ) -> None:
        self._caches = caches
        # every project on disk, so that the facts of one no recall has reached since an
        # upgrade are embedded (and counted) too: those not looked at yet (None: not listed
        # yet), under the caches' lock
        self._list_projects = list_projects
        self._unchecked: list[str] | None = None

    def facts_pending(self) -> int:
        """Facts that have no vector yet, of the projects recalled lately and of those the
        backfill found so on disk (its progress, for status; a refused fact counts)."""
        with self._caches.lock:
            return sum(self._caches.wanting.values()) + sum(self._caches.on_disk.values())

    def facts_to_embed(self, limit: int, skip: frozenset[bytes]) -> FactBatch | None:
        """For the backfill: up to `limit` facts without a vector (after an upgrade, a model
        change, an index that could not be kept) of a project recall noted, or else of one on
        disk (`_check_on_disk`), leaving out those whose text's digest is in `skip` (refused by
        the model lately); None when there are none. The projects take turns, so that one
        whose facts the model fails holds up no other."""
        model = None if self._caches.embeddings is None else self._caches.embeddings.model_id
        if model is None:
            return None
        with self._caches.lock:
            noted = list(self._caches.wanting)
        for project_id in noted:
            with self._caches.lock:
                cache = self._caches.cached(project_id)
                if cache is None:  # dropped from the cache meanwhile
                    self._caches.wanting.pop(project_id, None)
                    continue
            taken = self._batch_of(project_id, cache, model, limit, skip)
            if isinstance(taken, FactBatch):
                return taken
            self._release(project_id, cache, taken)
        self._check_on_disk()  # (once: the backfill's count at its start, or now)
        with self._caches.lock:
            found = [p for p in self._caches.on_disk if not self._refused_still(p, skip)]
        for project_id in found:
            with self._caches.lock:
                self._caches.refused_only.pop(project_id, None)
                cache = self._caches.cached(project_id)
                if cache is None:
                    cache = self._caches.backfill_caches[project_id] = ProjectCache()
            taken = self._batch_of(project_id, cache, model, limit, skip)
            with self._caches.lock:  # now noted (or unreadable: recall reports that)
                self._caches.on_disk.pop(project_id, None)
            if isinstance(taken, FactBatch):
                return taken
            self._release(project_id, cache, taken)
        return None

    def _refused_still(self, project_id: str, skip: frozenset[bytes]) -> bool:
        """Whether every fact of `project_id` left was refused, and none of the refusals seen
        then has expired since (with the caches' `lock` held)."""
        seen = self._caches.refused_only.get(project_id)
        return seen is not None and skip >= seen

    def _batch_of(
        self, project_id: str, cache: ProjectCache, model: str, limit: int, skip: frozenset[bytes]
    ) -> FactBatch | frozenset[bytes] | None:
        """The project's next batch; else the digests of the facts it has left without a
        vector, all refused lately (empty: none left); None when its ledger cannot be read."""
        with cache.lock:
            if not self._refresh_locked(project_id, cache):
                return None
            missing = self._caches.missing(cache)
            digests = [text_digest(r.fact) for r in missing]
            chosen = [r for r, d in zip(missing, digests, strict=True) if d not in skip][:limit]
        if not chosen:
            return frozenset(digests)
        with self._caches.lock:
            if project_id in self._caches.wanting:
                self._caches.wanting.move_to_end(project_id)
        return FactBatch(project_id, model, chosen)

    def count_on_disk(self) -> None:
        """Look at every project on disk now (`_check_on_disk`), so that status counts their
        facts from the start (the backfill does this before its first batch)."""
        if self._caches.embeddings is not None and self._caches.embeddings.model_id is not None:
            self._check_on_disk()

    def _check_on_disk(self) -> None:
        """Look once at every project on disk for facts without a vector of the current model,
        and count them: without this, a project no recall has reached since an upgrade would
        be embedded only after its first recall, and status would not count it. One that is
        not cached is read in a cache of its own that is dropped after (`_on_disk` keeps its
        count); one recall has cached is noted as recall notes it."""
        if self._list_projects is None:
            return
        with self._caches.lock:
            unchecked = self._unchecked
        if unchecked is None:
            try:
                listed = self._list_projects()
            except OSError as exc:  # (looked at once: a later recall notes a project itself)
                self._caches.problem("recall.projects_unlisted", f"{type(exc).__name__}: {exc}", "")
                listed = []
            unchecked = list(reversed(listed))
            with self._caches.lock:
                self._unchecked = unchecked
        while True:
            with self._caches.lock:
                if not unchecked:
                    return
                project_id = unchecked.pop()
                cache = self._caches.cached(project_id)
            if cache is not None:  # a lexical recall, or none with terms, did not note it
                with cache.lock:
                    self._refresh_locked(project_id, cache)
                continue
            missing = self._missing_on_disk(project_id)
            with self._caches.lock:
                if missing and self._caches.cached(project_id) is None:
                    self._caches.on_disk[project_id] = missing

    def _missing_on_disk(self, project_id: str) -> int:
        """How many facts of a project that is not cached have no vector and may get one, read
        in a cache of its own that is dropped after; 0 when its ledger cannot be read (its
        recall reports that)."""
        directory = self._caches.project_dir(project_id)
        cache = ProjectCache()
        try:
            ledger = self._caches.current_ledger(directory, cache)
            if not ledger.candidates:
                return 0
            if self._caches.use_index:
                with contextlib.suppress(Exception):  # (then no vector: all are counted)
                    open_current_index(cache, directory, ledger.fingerprint)
            self._caches.vectors(cache)
            return len(self._caches.missing(cache))
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
        with self._caches.lock:
            if self._caches.backfill_caches.get(project_id) is not cache:
                return
            missing = self._caches.wanting.pop(project_id, 0)
            if missing and refused:
                self._caches.on_disk[project_id] = missing
                self._caches.refused_only[project_id] = refused
            elif missing and refused is not None:  # (after a batch: more to send, its turn)
                self._caches.wanting[project_id] = missing
                return
            del self._caches.backfill_caches[project_id]
        with cache.lock:
            cache.close_index()

    def keep_fact_vectors(self, batch: FactBatch, matrix: Array) -> int:
        """Keep the vectors the backfill made for `batch` (one row per fact) and write the
        project's index again with every fact's vector; how many were kept (a fact no longer
        in the ledger, or changed, is not)."""
        with self._caches.lock:
            cache = self._caches.cached(batch.project_id)
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
            # the count left, before the index is written: status must not count as pending
            # facts whose vectors another process can already read there
            self._caches.note(batch.project_id, cache)
            if kept and cache.ledger is not None:
                self._save_vectors(
                    batch.project_id, self._caches.project_dir(batch.project_id), cache
                )
        self._release(batch.project_id, cache, frozenset())
        return kept

    def _refresh_locked(self, project_id: str, cache: ProjectCache) -> bool:
        """The project's ledger, index and stored vectors as recall would read them now, or
        False when the ledger cannot be read (recall reports it)."""
        directory = self._caches.project_dir(project_id)
        try:
            ledger = self._caches.current_ledger(directory, cache)
        except StorageError:
            return False
        self._caches.index_for_vectors(project_id, directory, ledger, cache)
        self._caches.vectors(cache)
        self._caches.note(project_id, cache)
        return True

    def _save_vectors(self, project_id: str, directory: Path, cache: ProjectCache) -> None:
        """Write the index again with the vectors of every fact, after the backfill embedded
        some: otherwise a project whose index holds none of the current model's (one not
        published to since an upgrade or a model change) would have them embedded again after
        every start. Without the project lock, as a rebuild: a publish that wins the rename
        leaves this index stale, and the next search rebuilds it carrying these vectors over;
        a ledger written before this rename (a forget's, say) has this index removed, since it
        may hold a fact forgotten since, and the facts are embedded again."""
        # a publish that landed since the ledger was read: its facts, and their vectors in the
        # index it wrote, are read first, so that the index written here keeps them
        moved = file_signature(ledger_path(directory)) != cache.ledger_signature
        if moved and not self._refresh_locked(project_id, cache):
            return
        model, ledger = cache.vectors_model, cache.ledger
        # (a connection released while idle leaves the signature of the index it found usable)
        usable = cache.index_signature is not None
        if not self._caches.use_index or not usable or model is None or ledger is None:
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
            projections.write_index(directory, ledger, vectors, unlocked=True)
        except StorageError as exc:
            self._caches.problem("recall.index_unusable", exc.message, project_id)
            return
        cache.close_index()  # the next search opens the new file, and reads its vectors
