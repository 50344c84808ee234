"""The automatic-memory ledger and its projections driven by random sequences of merges,
forgets, index rebuilds, lost projections, reopenings and recall searches over a real project
directory, checked after every step against a plain model of the facts it should hold
(hypothesis' rule-based state machines).
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from orcad import limits
from orcad.capture.inspection import FactText
from orcad.capture.ledger import (
    Ledger,
    Provenance,
    forget,
    forgotten_digest,
    ledger_path,
    merge_job_candidates,
    normalize_fact,
    read_ledger,
    write_ledger,
)
from orcad.capture.projections import (
    INDEX_FILE,
    MARKDOWN_FILE,
    IndexVectors,
    index_path,
    open_index,
    publish_projections,
    rebuild_index,
    refresh_projections,
)
from orcad.clock import format_time, parse_time, stamp_after
from orcad.control_characters import escapes_as_words
from orcad.errors import Conflict
from orcad.query import distinct_terms
from orcad.recall.automatic import ProjectMemorySearch, fact_embedder
from orcad.recall.embedding import Embeddings, load_embedder
from orcad.secrets import contains_secret
from protocol.types import Category, ExtractedFact

pytestmark = pytest.mark.inprocess

PROJECT = "p" * 64
BUILTIN = load_embedder("builtin")
CATEGORIES: tuple[Category, ...] = ("user", "feedback", "project", "reference")
WORDS = (
    "deploy",
    "deploys",
    "deploying",
    "staging",
    "server",
    "line",
    "length",
    "café",
    "\uff23\uff21\uff26\uff25",  # full-width CAFE: the same key as "cafe"
    "naïve",
    "日本語",
    "🚀",
    "10²",
    "102",
    "AND",
    "100",
    "120",
)
plain_facts = st.builds(
    lambda words, end: " ".join(words) + end,
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=7),
    st.sampled_from(["", ".", "!", " …"]),
)
odd_facts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30
).filter(str.strip)
facts = st.lists(
    st.builds(ExtractedFact, st.sampled_from(CATEGORIES), st.one_of(plain_facts, odd_facts)),
    max_size=8,
)


def shown_plainly(text: str) -> bool:
    """Whether `text` is written into every file as it is (no escaping, no white space
    collapsed), so that finding none of its bytes there means it is gone."""
    return (
        len(text.encode()) >= 12
        and text == " ".join(text.split())
        and text.isprintable()
        and not any(ch in text for ch in '"\\<')
    )


class LedgerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="ledger-model-"))
        self.project_dir = self.dir / "projects" / PROJECT
        self.project_dir.mkdir(parents=True)
        self.ledger = read_ledger(self.project_dir)
        # the model: candidates oldest first as (id, category, fact), the jobs merged with
        # their counts, and the revision
        self.facts: list[tuple[str, Category, str]] = []
        self.jobs: dict[str, tuple[int, int, int]] = {}
        self.revision = 0
        self.serial = 0
        self.now = 1_800_000_000.0
        self.gone: set[str] = set()  # facts forgotten, whose text no file may hold
        self.embeddings = Embeddings("builtin", BUILTIN)
        self.embed = fact_embedder(self.embeddings)
        self.search = ProjectMemorySearch(lambda _project: self.project_dir)
        # recall with the model, whose backfill embeds the facts the index has no vector for
        self.hybrid = ProjectMemorySearch(
            lambda _project: self.project_dir, embeddings=self.embeddings
        )
        self.batch: object = None  # taken by the backfill, not yet embedded

    def teardown(self) -> None:
        self.search.close()
        self.hybrid.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _new_id(self) -> str:
        self.serial += 1
        return f"cand_{self.serial:032x}"

    def _commit(self, ledger: Ledger, vectors: IndexVectors | None = None) -> None:
        """Write the ledger and publish it, as capture does (a publish embeds its new facts)."""
        write_ledger(self.project_dir, ledger)
        assert publish_projections(self.project_dir, ledger, vectors) == []
        self.ledger = ledger

    def _vector(self, fact: str) -> bytes:
        vectors = self.embed([fact], self.project_dir)
        assert vectors is not None
        return vectors.by_text[fact]

    @rule(seconds=st.sampled_from([0.0, 0.0004, 1.0, -30.0]))
    def clock_moves(self, seconds: float) -> None:
        self.now += seconds

    @rule(job=st.integers(0, 12), extracted=facts, told=st.booleans())
    def merge(self, job: int, extracted: list[ExtractedFact], told: bool) -> None:
        """A job's publish; `told`: it waited while the facts gone so far were forgotten."""
        job_id = f"job_{job:032x}"
        merged, result = merge_job_candidates(
            self.ledger,
            job_id,
            extracted,
            Provenance("sess", "turn", "provider", "model", "v1"),
            self.now,
            forgotten={forgotten_digest(text) for text in self.gone} if told else (),
            new_id=self._new_id,
        )
        if job_id in self.jobs:
            assert result.replayed
            assert (result.added, result.duplicates, result.rejected) == self.jobs[job_id]
            assert merged == self.ledger
            return
        keys = {normalize_fact(fact) for _i, _c, fact in self.facts}
        if told:
            keys |= {normalize_fact(text) for text in self.gone}
        added = duplicates = rejected = 0
        for fact in extracted:
            if contains_secret(fact.fact):
                rejected += 1
            elif normalize_fact(fact.fact) in keys:
                duplicates += 1
            else:
                keys.add(normalize_fact(fact.fact))
                added += 1
        assert (result.added, result.duplicates, result.rejected) == (added, duplicates, rejected)
        new = list(merged.candidates[len(merged.candidates) - added :]) if added else []
        latest = max((parse_time(c.recorded_at) for c in self.ledger.candidates), default=None)
        for candidate in new:
            assert candidate.recorded_at == format_time(stamp_after(latest, self.now))
        self.facts = [
            *self.facts,
            *((c.id, c.category, c.fact) for c in new),
        ][-limits.LEDGER_MAX_CANDIDATES :]
        self.jobs[job_id] = (added, duplicates, rejected)
        self.revision += 1
        self._commit(merged, self.embed([c.fact for c in new], self.project_dir) if new else None)

    @rule(data=st.data(), stale=st.booleans())
    def forget_fact(self, data: st.DataObject, stale: bool) -> None:
        ids = [i for i, _c, _f in self.facts] + ["cand_" + "0" * 32]
        candidate_id = data.draw(st.sampled_from(ids))
        exists = any(i == candidate_id for i, _c, _f in self.facts)
        revision = self.revision - 1 if stale else self.revision
        if exists and stale:
            with pytest.raises(Conflict):
                forget(self.ledger, candidate_id, revision)
            return
        forgotten, result = forget(self.ledger, candidate_id, revision)
        assert result.removed == exists
        if not exists:
            assert forgotten == self.ledger
            return
        text = next(f for i, _c, f in self.facts if i == candidate_id)
        self.facts = [entry for entry in self.facts if entry[0] != candidate_id]
        self.revision += 1
        self.gone.add(text)
        self._commit(forgotten)

    @rule()
    def rebuild(self) -> None:
        assert rebuild_index(self.project_dir, read_ledger(self.project_dir))

    @rule(name=st.sampled_from([INDEX_FILE, MARKDOWN_FILE]))
    def projection_lost(self, name: str) -> None:
        """A stop between the ledger's write and its projections' (or a user deleting one)."""
        (self.project_dir / name).unlink(missing_ok=True)
        assert refresh_projections(self.project_dir, read_ledger(self.project_dir)) == []

    @rule()
    def reopen(self) -> None:
        self.search.close()
        self.search = ProjectMemorySearch(lambda _project: self.project_dir)
        self.hybrid.close()
        self.hybrid = ProjectMemorySearch(
            lambda _project: self.project_dir, embeddings=self.embeddings
        )
        self.batch = None
        self.ledger = read_ledger(self.project_dir)

    @rule(
        terms=st.lists(st.sampled_from([*WORDS, "cafe", "deployment", "absent"]), max_size=5),
        limit=st.integers(1, 10),
    )
    def recall(self, terms: list[str], limit: int) -> None:
        found = self.search.search_blocking(PROJECT, terms, limit)
        live = {i: (c, f) for i, c, f in self.facts}
        assert len(found) <= limit
        for candidate in found:
            assert live.get(candidate.id) == (candidate.category, candidate.fact)

    @rule(prompt=st.lists(st.sampled_from([*WORDS, "cafe", "deployment"]), max_size=6))
    def hybrid_recall(self, prompt: list[str]) -> None:
        text = " ".join(prompt)
        query = self.embeddings.query(text)
        assert query is not None
        found = self.hybrid.search_blocking(PROJECT, distinct_terms(text), 12, query)
        live = {i: (c, f) for i, c, f in self.facts}
        for candidate in found:
            assert live.get(candidate.id) == (candidate.category, candidate.fact)

    @rule()
    def backfill_takes(self) -> None:
        self.batch = self.hybrid.backfill.facts_to_embed(4, frozenset())

    @rule()
    def backfill_keeps(self) -> None:
        batch, self.batch = self.batch, None
        if batch is None:
            return
        facts = [record.fact for record in batch.records]  # type: ignore[attr-defined]
        matrix = self.embeddings.embed(facts, purpose="backfill")
        assert matrix is not None
        kept = self.hybrid.backfill.keep_fact_vectors(batch, matrix)  # type: ignore[arg-type]
        live = {(i, f) for i, _c, f in self.facts}
        assert kept <= sum((r.id, r.fact) in live for r in batch.records)  # type: ignore[attr-defined]

    # invariants, after every step

    @invariant()
    def the_ledger_on_disk_is_the_model(self) -> None:
        on_disk = read_ledger(self.project_dir)
        assert on_disk == self.ledger
        assert on_disk.revision == self.revision
        assert [(c.id, c.category, c.fact) for c in on_disk.candidates] == self.facts
        assert {j.job_id: (j.added, j.duplicates, j.rejected) for j in on_disk.merged_jobs} == {
            job_id: counts for job_id, counts in self.jobs.items()
        }
        keys = [normalize_fact(f) for _i, _c, f in self.facts]
        assert len(keys) == len(set(keys)), "the ledger holds two exact duplicates"

    @invariant()
    def the_projections_are_derived_from_it(self) -> None:
        if self.revision == 0:
            return
        markdown = (self.project_dir / MARKDOWN_FILE).read_text()
        shown = self.facts[-limits.MARKDOWN_MAX_CANDIDATES :]
        assert markdown.count("\n- **") == len(shown)
        for candidate_id, _category, _fact in self.facts:
            assert (candidate_id in markdown) == any(i == candidate_id for i, _c, _f in shown)
        connection, fingerprint = open_index(index_path(self.project_dir))
        try:
            assert fingerprint == self.ledger.fingerprint
            rows = connection.execute(
                "SELECT candidate_id, category, fact FROM candidates ORDER BY rowid"
            ).fetchall()
            assert rows == [(i, c, escapes_as_words(f)) for i, c, f in self.facts]
            vectors = dict(connection.execute("SELECT candidate_id, vector FROM vectors"))
            facts = {i: f for i, _c, f in self.facts}
            for candidate_id, vector in vectors.items():
                assert candidate_id in facts, "the index keeps a vector of a fact that is gone"
                assert vector == self._vector(facts[candidate_id])
            model = connection.execute("SELECT value FROM meta WHERE key = 'vector_model'")
            assert model.fetchall() in ([], [(BUILTIN.model_id,)])
        finally:
            connection.close()

    @invariant()
    def nothing_forgotten_remains_in_the_files(self) -> None:
        live = [f.casefold() for _i, _c, f in self.facts]
        files = b"".join(p.read_bytes() for p in self.project_dir.rglob("*") if p.is_file())
        for text in self.gone:
            if not shown_plainly(text) or any(text.casefold() in other for other in live):
                continue
            assert text.encode() not in files, f"a forgotten fact remains on disk: {text!r}"
            assert msgspec.json.encode(text)[1:-1] not in files

    @invariant()
    def the_files_are_whole(self) -> None:
        if self.revision == 0:
            assert not ledger_path(self.project_dir).exists()
            return
        connection = sqlite3.connect(index_path(self.project_dir))
        try:
            assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            connection.close()


LedgerModel.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_ledger_against_model = LedgerModel.TestCase


# --- a forgotten fact cut out of a waiting job's source ----------------------------------------

FOLDING_WORDS = ("Straße", "STRASSE", "strasse", "heißt", "HEISST", "Main", "main", "İstanbul")


@given(
    fact=st.lists(st.sampled_from(FOLDING_WORDS), min_size=1, max_size=3).map(" ".join),
    writings=st.lists(
        st.sampled_from([str, str.upper, str.lower, str.casefold, str.title]), max_size=3
    ),
    filler=st.lists(st.sampled_from(["user:", "ok", "\n", "main street", "[forgotten]"])),
    end=st.sampled_from(["", ".", "!"]),
)
@settings(max_examples=300, deadline=None)
def test_no_writing_of_a_forgotten_fact_is_left_in_a_source(
    fact: str, writings: list[Callable[[str], str]], filler: list[str], end: str
) -> None:
    """However the source writes the fact (its case, fully case-folded, once or more), none of
    it remains once the fact is cut out of it."""
    source = " ".join([*filler, *(write(fact) + end for write in writings), *filler])
    text = FactText(fact + end)
    assert not text.found_in(text.cut_from(source))
