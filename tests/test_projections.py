"""Projections of the ledger: auto-memory.md and the FTS5 index (spec: Capture and Recovery)."""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import sqlite3
import stat
import tracemalloc
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from structlog.testing import capture_logs

from orcad import limits
from orcad.capture import projections
from orcad.capture.ledger import (
    Ledger,
    LedgerCorrupt,
    Provenance,
    ledger_path,
    merge_job_candidates,
    read_ledger,
    write_ledger,
)
from orcad.capture.projections import (
    INDEX_FILE,
    MARKDOWN_FILE,
    IndexUnavailable,
    IndexVectors,
    ensure_index,
    index_state,
    publish_projections,
    read_index_vectors,
    rebuild_index,
    render_markdown,
)
from orcad.clock import format_time
from orcad.query import distinct_terms
from orcad.recall import project_cache
from orcad.recall.automatic import ProjectMemorySearch, fact_embedder
from orcad.recall.embedders import EmbeddingUnavailable
from orcad.recall.embedding import Embeddings, load_embedder
from orcad.recall.project_cache import PROJECTS_CACHED, ProjectCache, search_index
from protocol.types import ExtractedFact

pytestmark = pytest.mark.inprocess

PROVENANCE = Provenance(
    session_id="sess-7", turn_id="turn-3", provider="openai", model="llama3.2", prompt_version="v1"
)


@pytest.fixture
def cache() -> Iterator[ProjectCache]:
    """Recall's cache of one project, whose open index connection the searches reuse."""
    opened = ProjectCache()
    yield opened
    opened.close_index()


def with_facts(ledger: Ledger, *facts: str, now: float = 1_800_000_000.0, job: str = "") -> Ledger:
    merged, _ = merge_job_candidates(
        ledger,
        job or f"job_{ledger.revision}",
        [ExtractedFact(category="project", fact=text) for text in facts],
        PROVENANCE,
        now,
    )
    return merged


def numbered(count: int) -> Ledger:
    ledger = Ledger()
    for number in range(count):
        ledger = with_facts(ledger, f"Numbered fact {number}", now=1_800_000_000.0 + number)
    return ledger


def commit(project: Path, ledger: Ledger, vectors: IndexVectors | None = None) -> list[str]:
    """What the capture writer does under the project lock."""
    write_ledger(project, ledger)
    return publish_projections(project, ledger, vectors)


# --- auto-memory.md -------------------------------------------------------------------------


def entries(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("- **")]


def test_markdown_shows_all_of_64_newest_first() -> None:
    text = render_markdown(numbered(limits.MARKDOWN_MAX_CANDIDATES))
    shown = entries(text)
    assert len(shown) == 64
    assert shown[0] == "- **project**: Numbered fact 63"
    assert shown[-1] == "- **project**: Numbered fact 0"


def test_markdown_shows_only_the_newest_64_of_65() -> None:
    ledger = numbered(limits.MARKDOWN_MAX_CANDIDATES + 1)
    text = render_markdown(ledger)
    shown = entries(text)
    assert len(shown) == 64
    assert "Numbered fact 0\n" not in text
    assert shown[-1] == "- **project**: Numbered fact 1"
    assert "Newest 64 of 65 candidates" in text


def test_markdown_carries_provenance_comments() -> None:
    ledger = with_facts(Ledger(), "Deploys go through make release.")
    candidate = ledger.candidates[0]
    lines = render_markdown(ledger).splitlines()
    entry = lines.index("- **project**: Deploys go through make release.")
    assert lines[entry + 1] == (
        f"  <!-- {candidate.id} session=sess-7 turn=turn-3 job=job_0 "
        f"recorded={candidate.recorded_at} provider=openai model=llama3.2 prompt=v1 -->"
    )
    assert ledger.fingerprint in render_markdown(ledger)


def test_markdown_keeps_each_fact_on_one_line_and_comments_closed() -> None:
    ledger = with_facts(Ledger(), "Two\nlines <!-- hidden? --> and more")
    lines = render_markdown(ledger).splitlines()
    assert "- **project**: Two lines &lt;!-- hidden? --> and more" in lines
    hostile = Provenance("s --> x", "t", "p", "m", "v")
    merged, _ = merge_job_candidates(
        Ledger(), "job_x", [ExtractedFact(category="user", fact="f")], hostile, 1.0
    )
    comment = render_markdown(merged).splitlines()[-1]
    assert comment.count("-->") == 1 and comment.endswith("-->")


def test_markdown_holds_no_terminal_control_sequence() -> None:
    # a fact (model output) can carry escapes in JSON; `cat auto-memory.md` must not run them
    fact = "Deploys \x1b]52;c;ZWNobyBoaQ==\x07 via \x1b[2Jmake\x9b1m release\x00."
    markdown = render_markdown(with_facts(Ledger(), fact))
    assert not [char for char in markdown if char not in "\n" and not char.isprintable()]
    assert "- **project**: Deploys \\x1b]52;c;ZWNobyBoaQ==\\x07 via \\x1b[2Jmake" in markdown


def test_markdown_holds_no_bidirectional_override() -> None:
    # a ledger written before facts were escaped when parsed may still hold one
    markdown = render_markdown(with_facts(Ledger(), "Deploy with make \u202eesaeler\u202c now."))
    assert "\u202e" not in markdown and "\u202c" not in markdown
    assert "- **project**: Deploy with make \\u202eesaeler\\u202c now." in markdown


def test_publish_writes_both_files_privately(tmp_path: Path) -> None:
    ledger = with_facts(Ledger(), "Deploys go through make release.")
    assert commit(tmp_path, ledger) == []
    assert (tmp_path / MARKDOWN_FILE).read_text() == render_markdown(ledger)
    for name in (MARKDOWN_FILE, INDEX_FILE):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) & 0o077 == 0
    assert index_state(tmp_path, ledger) == "current"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["candidates.jsonl", MARKDOWN_FILE, INDEX_FILE]
    )


# --- index ----------------------------------------------------------------------------------


def test_index_schema_uses_the_shared_tokenizer_and_records_the_fingerprint(tmp_path: Path) -> None:
    ledger = with_facts(Ledger(), "One fact")
    commit(tmp_path, ledger)
    connection = sqlite3.connect(tmp_path / INDEX_FILE)
    try:
        (sql,) = connection.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'candidates'"
        ).fetchone()
        meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
        rows = connection.execute(
            "SELECT fact, candidate_id, category, recorded_at, session_id, turn_id FROM candidates"
        ).fetchall()
    finally:
        connection.close()
    assert "tokenize = 'porter unicode61 remove_diacritics 2'" in sql
    assert meta["fingerprint"] == ledger.fingerprint
    candidate = ledger.candidates[0]
    assert rows == [
        ("One fact", candidate.id, "project", candidate.recorded_at, "sess-7", "turn-3")
    ]


def test_search_stems_folds_diacritics_and_ranks(tmp_path: Path, cache: ProjectCache) -> None:
    ledger = with_facts(Ledger(), "This repository deploys with make release.", now=1.0)
    ledger = with_facts(ledger, "The café on the corner serves the team lunch.", now=2.0)
    ledger = with_facts(ledger, "Deploy notes live in the wiki; deploy deploy deploy.", now=3.0)
    commit(tmp_path, ledger)
    ids = {c.fact.split()[1]: c.id for c in ledger.candidates}
    found = search_index(cache, tmp_path, ["deploying"], 10, ledger.fingerprint)
    assert [candidate_id for candidate_id, _ in found] == [ids["notes"], ids["repository"]]
    assert found[0][1] < found[1][1]  # bm25: lower is better
    assert [i for i, _ in search_index(cache, tmp_path, ["cafe"], 10, ledger.fingerprint)] == [
        ids["café"]
    ]
    assert search_index(cache, tmp_path, ["absent"], 10, ledger.fingerprint) == []
    assert search_index(cache, tmp_path, [], 10, ledger.fingerprint) == []
    assert len(search_index(cache, tmp_path, ["deploying"], 1, ledger.fingerprint)) == 1


def test_the_index_connection_recall_keeps_holds_at_most_64_kib_of_pages(
    tmp_path: Path, cache: ProjectCache
) -> None:
    # one such connection stays open per project, up to PROJECTS_CACHED of them
    ledger = numbered(limits.LEDGER_MAX_CANDIDATES)
    commit(tmp_path, ledger)
    found = search_index(cache, tmp_path, ["numbered"], 5, ledger.fingerprint)
    assert len(found) == 5
    assert cache.index is not None
    assert cache.index.execute("PRAGMA cache_size").fetchone()[0] == -64  # KiB
    connection, fingerprint = projections.open_index(projections.index_path(tmp_path))
    assert fingerprint == ledger.fingerprint
    assert connection.execute("PRAGMA cache_size").fetchone()[0] == -64
    connection.close()


def test_equal_ranks_come_newest_first(tmp_path: Path, cache: ProjectCache) -> None:
    ledger = with_facts(Ledger(), "alpha beta", now=10.0)
    ledger = with_facts(ledger, "alpha gamma", now=30.0)
    ledger = with_facts(ledger, "alpha delta", now=40.0)
    # recorded before the one above it, as a ledger an older orcad merged after the wall clock
    # was set back may hold: the index orders by the time, not by the line
    last = msgspec.structs.replace(ledger.candidates[-1], recorded_at=format_time(20.0))
    ledger = Ledger(ledger.revision, (*ledger.candidates[:-1], last), ledger.merged_jobs)
    commit(tmp_path, ledger)
    found = search_index(cache, tmp_path, ["alpha"], 10, ledger.fingerprint)
    assert len({rank for _, rank in found}) == 1
    by_id = {c.id: c.fact for c in ledger.candidates}
    assert [by_id[i] for i, _ in found] == ["alpha gamma", "alpha delta", "alpha beta"]


def test_search_terms_are_literals_never_query_syntax(tmp_path: Path, cache: ProjectCache) -> None:
    ledger = with_facts(Ledger(), 'Quote " and NEAR(star*) OR AND are just words')
    commit(tmp_path, ledger)
    for term in ['"', "NEAR(", "star*", "OR", "AND", "-x", "col:fact", "\x00"]:
        search_index(cache, tmp_path, [term], 5, ledger.fingerprint)  # must not raise
    assert len(search_index(cache, tmp_path, ["near"], 5, ledger.fingerprint)) == 1


def test_cached_search_sees_a_replaced_index(tmp_path: Path, cache: ProjectCache) -> None:
    first = with_facts(Ledger(), "alpha first")
    commit(tmp_path, first)
    assert len(search_index(cache, tmp_path, ["alpha"], 10, first.fingerprint)) == 1
    second = with_facts(first, "alpha second")
    commit(tmp_path, second)
    assert len(search_index(cache, tmp_path, ["alpha"], 10, second.fingerprint)) == 2


def test_search_refuses_a_stale_missing_or_corrupt_index(
    tmp_path: Path, cache: ProjectCache
) -> None:
    ledger = with_facts(Ledger(), "alpha")
    commit(tmp_path, ledger)
    newer = with_facts(ledger, "alpha two")
    write_ledger(tmp_path, newer)  # committed, projections not yet published
    with pytest.raises(IndexUnavailable) as caught:
        search_index(cache, tmp_path, ["alpha"], 10, newer.fingerprint)
    assert caught.value.state == "stale"
    (tmp_path / INDEX_FILE).write_bytes(b"not a database at all" * 100)
    with pytest.raises(IndexUnavailable) as caught:
        search_index(cache, tmp_path, ["alpha"], 10, newer.fingerprint)
    assert caught.value.state == "corrupt"
    (tmp_path / INDEX_FILE).unlink()
    with pytest.raises(IndexUnavailable) as caught:
        search_index(cache, tmp_path, ["alpha"], 10, newer.fingerprint)
    assert caught.value.state == "missing"
    assert ensure_index(tmp_path, newer) == "missing"
    assert len(search_index(cache, tmp_path, ["alpha"], 10, newer.fingerprint)) == 2


def test_an_index_holding_text_that_is_not_utf8_is_corrupt_named_not_echoed(
    tmp_path: Path, cache: ProjectCache
) -> None:
    """What a torn page SQLite does not notice reads as: the search says corrupt (so the index
    is rebuilt) and names the column without quoting the bytes."""
    ledger = with_facts(Ledger(), "alpha")
    commit(tmp_path, ledger)
    with sqlite3.connect(tmp_path / INDEX_FILE) as connection:
        connection.execute("UPDATE candidates SET candidate_id = CAST(? AS TEXT)", (b"\xff" * 500,))
    connection.close()
    with pytest.raises(IndexUnavailable) as caught:
        search_index(cache, tmp_path, ["alpha"], 10, ledger.fingerprint)
    assert caught.value.state == "corrupt"
    assert "\ufffd" not in str(caught.value) and "holds text that is not UTF-8" in str(caught.value)


def damage_deleted(path: Path) -> None:
    path.unlink()


def damage_truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def damage_emptied(path: Path) -> None:
    path.write_bytes(b"")


def damage_garbage(path: Path) -> None:
    path.write_bytes(b"\x00garbage\xff" * 4096)


def damage_header_kept_body_zeroed(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\x00" * (len(data) - 100))


def damage_replaced_by_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (damage_deleted, "missing"),
        (damage_truncated, "corrupt"),
        (damage_emptied, "corrupt"),
        (damage_garbage, "corrupt"),
        (damage_header_kept_body_zeroed, "corrupt"),
        (damage_replaced_by_directory, "corrupt"),
    ],
)
def test_index_state_detects_damage(
    tmp_path: Path, damage: Callable[[Path], None], expected: str, cache: ProjectCache
) -> None:
    ledger = numbered(40)
    commit(tmp_path, ledger)
    assert index_state(tmp_path, ledger) == "current"
    damage(tmp_path / INDEX_FILE)
    assert index_state(tmp_path, ledger) == expected
    if expected == "corrupt":
        with pytest.raises(IndexUnavailable):
            search_index(cache, tmp_path, ["numbered"], 5, ledger.fingerprint)
    if damage is damage_replaced_by_directory:
        (tmp_path / INDEX_FILE).rmdir()
    rebuild_index(tmp_path, ledger)
    assert index_state(tmp_path, ledger) == "current"
    assert len(search_index(cache, tmp_path, ["numbered"], 50, ledger.fingerprint)) == 40


def test_index_state_stale_after_an_unpublished_change_and_current_after_rebuild(
    tmp_path: Path,
) -> None:
    ledger = with_facts(Ledger(), "One")
    commit(tmp_path, ledger)
    newer = with_facts(ledger, "Two")
    assert index_state(tmp_path, newer) == "stale"
    rebuild_index(tmp_path, newer)
    assert index_state(tmp_path, newer) == "current"
    assert index_state(tmp_path, ledger) == "stale"


def test_rebuild_removes_leftover_wal_and_shm(tmp_path: Path) -> None:
    ledger = with_facts(Ledger(), "One")
    commit(tmp_path, ledger)
    for suffix in ("-wal", "-shm", "-journal"):
        (tmp_path / (INDEX_FILE + suffix)).write_bytes(b"stale side file")
    rebuild_index(tmp_path, ledger)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["candidates.jsonl", MARKDOWN_FILE, INDEX_FILE]
    )
    assert index_state(tmp_path, ledger) == "current"


def test_empty_ledger_indexes_as_current(tmp_path: Path, cache: ProjectCache) -> None:
    assert index_state(tmp_path, Ledger()) == "missing"
    assert publish_projections(tmp_path, Ledger()) == []
    assert index_state(tmp_path, Ledger()) == "current"
    assert search_index(cache, tmp_path, ["anything"], 5, Ledger().fingerprint) == []


# --- derived files that are symbolic links ---------------------------------------------------


def test_derived_files_that_are_links_are_never_read_through_and_replaced(
    tmp_path: Path,
) -> None:
    # they are caches of the ledger: a link is read as damage and the file rebuilt in its place
    # (the rename replaces the link itself), whatever it pointed to untouched
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside = with_facts(Ledger(), "A fact from outside the memory root")
    commit(elsewhere, outside)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / MARKDOWN_FILE).symlink_to(victim)
    (project / INDEX_FILE).symlink_to(elsewhere / INDEX_FILE)
    # the index is damaged, not an index of the other ledger's facts
    assert index_state(project, outside) == "corrupt"
    ledger = with_facts(Ledger(), "A fact of this project")
    assert commit(project, ledger) == []
    for name in (MARKDOWN_FILE, INDEX_FILE):
        assert (project / name).is_file() and not (project / name).is_symlink()
    assert index_state(project, ledger) == "current"
    assert "A fact of this project" in (project / MARKDOWN_FILE).read_text()
    assert victim.read_text() == "precious\n"
    assert index_state(elsewhere, outside) == "current"


# --- failure never fails the commit; the next write repairs -----------------------------------


def test_index_failure_does_not_fail_the_commit_and_the_next_write_repairs(
    tmp_path: Path, cache: ProjectCache
) -> None:
    (tmp_path / INDEX_FILE).mkdir()
    ledger = with_facts(Ledger(), "First")
    with capture_logs() as logs:
        problems = commit(tmp_path, ledger)
    assert len(problems) == 1 and problems[0].startswith(INDEX_FILE)
    assert [entry["event"] for entry in logs] == ["projection.failed"]
    assert logs[0]["file"] == INDEX_FILE
    assert (tmp_path / MARKDOWN_FILE).read_text() == render_markdown(ledger)
    assert index_state(tmp_path, ledger) == "corrupt"
    assert [p.name for p in (tmp_path / INDEX_FILE).iterdir()] == []
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

    (tmp_path / INDEX_FILE).rmdir()  # whatever blocked the index is gone
    newer = with_facts(ledger, "Second")
    assert commit(tmp_path, newer) == []
    assert index_state(tmp_path, newer) == "current"
    assert len(search_index(cache, tmp_path, ["first", "second"], 5, newer.fingerprint)) == 2


def test_markdown_failure_does_not_stop_the_index(tmp_path: Path) -> None:
    (tmp_path / MARKDOWN_FILE).mkdir()
    ledger = with_facts(Ledger(), "First")
    problems = commit(tmp_path, ledger)
    assert len(problems) == 1 and problems[0].startswith(MARKDOWN_FILE)
    assert index_state(tmp_path, ledger) == "current"
    (tmp_path / MARKDOWN_FILE).rmdir()
    assert commit(tmp_path, ledger) == []
    assert (tmp_path / MARKDOWN_FILE).read_text() == render_markdown(ledger)


def test_publish_repairs_a_garbage_index_in_the_same_write(tmp_path: Path) -> None:
    ledger = with_facts(Ledger(), "First")
    commit(tmp_path, ledger)
    (tmp_path / INDEX_FILE).write_bytes(b"garbage" * 100)
    assert index_state(tmp_path, ledger) == "corrupt"
    assert publish_projections(tmp_path, ledger) == []
    assert index_state(tmp_path, ledger) == "current"


# --- the facts' vectors in the index --------------------------------------------------------


def test_the_index_keeps_its_facts_vectors_across_publishes_and_rebuilds(tmp_path: Path) -> None:
    alpha, beta = b"\x01\x00" * 4, b"\x02\x00" * 4
    first = with_facts(Ledger(), "alpha one")
    commit(tmp_path, first, IndexVectors("model-a", {"alpha one": alpha}))
    second = with_facts(first, "beta two")
    commit(tmp_path, second, IndexVectors("model-a", {"beta two": beta}))
    both = IndexVectors("model-a", {"alpha one": alpha, "beta two": beta})
    assert read_index_vectors(tmp_path / INDEX_FILE) == both
    third = with_facts(second, "gamma three")
    commit(tmp_path, third)  # published without a model: what the index had is kept
    assert read_index_vectors(tmp_path / INDEX_FILE) == both
    rebuild_index(tmp_path, third)
    assert read_index_vectors(tmp_path / INDEX_FILE) == both
    assert index_state(tmp_path, third) == "current"
    # a fact that leaves the ledger takes its vector along
    fewer = Ledger(third.revision + 1, third.candidates[1:], third.merged_jobs)
    commit(tmp_path, fewer)
    assert read_index_vectors(tmp_path / INDEX_FILE) == IndexVectors("model-a", {"beta two": beta})
    # another model's vectors replace the old model's
    delta = b"\x04\x00" * 4
    fourth = with_facts(fewer, "delta four")
    commit(tmp_path, fourth, IndexVectors("model-b", {"delta four": delta}))
    replaced = IndexVectors("model-b", {"delta four": delta})
    assert read_index_vectors(tmp_path / INDEX_FILE) == replaced


def test_an_index_from_before_vectors_is_current_and_holds_none(tmp_path: Path) -> None:
    ledger = with_facts(Ledger(), "alpha one")
    commit(tmp_path, ledger, IndexVectors("model-a", {"alpha one": b"\x01\x00"}))
    database = sqlite3.connect(tmp_path / INDEX_FILE)
    database.execute("DROP TABLE vectors")
    database.execute("DELETE FROM meta WHERE key = 'vector_model'")
    database.commit()
    database.close()
    assert index_state(tmp_path, ledger) == "current"
    assert read_index_vectors(tmp_path / INDEX_FILE) is None
    (tmp_path / INDEX_FILE).write_bytes(b"garbage" * 100)
    assert read_index_vectors(tmp_path / INDEX_FILE) is None


class CountingModel:
    """The built-in model, noting every text it is asked to embed."""

    def __init__(self) -> None:
        inner = load_embedder("builtin")
        assert inner is not None
        self.inner = inner
        self.model_id, self.dims = self.inner.model_id, self.inner.dims
        self.floor, self.gate = self.inner.floor, self.inner.gate
        self.lexical_weight = self.inner.lexical_weight
        # no reference prompts: only the texts recall embeds for the index are counted
        self.unrelated_weight = self.project_weight = 0.0
        self.lexical_gate = self.inner.lexical_gate
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts += texts
        return self.inner.embed(texts)


def test_recall_reads_fact_vectors_from_the_index_and_the_backfill_embeds_only_the_others(
    tmp_path: Path,
) -> None:
    model = CountingModel()
    assert model.dims == DIMS
    embeddings = Embeddings("builtin", model)
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    ledger = with_facts(Ledger(), *facts)
    commit(tmp_path, ledger, fact_embedder(embeddings)(facts[:1], tmp_path))  # the first one's
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    assert recall_first(search, embeddings, model) == facts[0]
    assert model.texts == [] and search.backfill.facts_pending() == 1  # recall embeds none itself
    assert backfill(search, embeddings) == 1
    assert model.texts == facts[1:]  # the first fact's vector came from the index
    recall_first(search, embeddings, model)
    assert model.texts == [] and search.backfill.facts_pending() == 0  # and both are kept
    search.close()


def test_after_a_model_change_a_publish_embeds_its_facts_and_the_backfill_the_older_ones(
    tmp_path: Path,
) -> None:
    """A rebuild carries over only vectors of the model it is given: the facts published
    before the change lose theirs, rank on their words, and get new ones from the backfill
    once recall has noted the project. The publish embeds only its own facts, within recall's
    deadline: the job is still leased, and recall's barrier waits for it."""
    model = CountingModel()
    embeddings = Embeddings("builtin", model)
    embed = fact_embedder(embeddings)
    older = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    ledger = with_facts(Ledger(), *older)
    commit(tmp_path, ledger, IndexVectors("an-older-model", {f: b"\x00\x3c" * 256 for f in older}))
    new = "Staging deploys run from the deploy-staging workflow."
    vectors = embed([new], tmp_path)  # before the lock, as capture calls it
    assert vectors is not None and vectors.model == model.model_id
    assert model.texts == [new] and set(vectors.by_text) == {new}
    ledger = with_facts(ledger, new)
    commit(tmp_path, ledger, vectors)
    stored = read_index_vectors(tmp_path / INDEX_FILE)
    assert stored is not None and stored.model == model.model_id
    assert set(stored.by_text) == {new}
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    assert recall_first(search, embeddings, model) == older[0]  # by its words meanwhile
    assert model.texts == [] and search.backfill.facts_pending() == 2
    assert backfill(search, embeddings) == 2 and sorted(model.texts) == sorted(older)
    stored = read_index_vectors(tmp_path / INDEX_FILE)
    assert stored is not None and set(stored.by_text) == {new, *older}
    search.close()


def test_facts_the_backfill_embeds_are_written_to_the_index_once(tmp_path: Path) -> None:
    """A project not published to since an upgrade (its index holds another model's vectors,
    or none) would otherwise have its facts embedded again after every start."""
    model = CountingModel()
    embeddings = Embeddings("builtin", model)
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    ledger = with_facts(Ledger(), *facts)
    commit(tmp_path, ledger, IndexVectors("an-older-model", {f: b"\x00\x3c" * 256 for f in facts}))
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    assert backfill(search, embeddings) == 0  # nothing recalled yet: nothing known to want a vector
    assert recall_first(search, embeddings, model) == facts[0]  # by their words meanwhile
    assert model.texts == [] and search.backfill.facts_pending() == 2
    assert backfill(search, embeddings) == 2
    assert sorted(model.texts) == sorted(facts)  # embedded once
    stored = read_index_vectors(tmp_path / INDEX_FILE)
    assert stored is not None and stored.model == model.model_id
    assert set(stored.by_text) == set(facts)
    assert index_state(tmp_path, ledger) == "current"
    assert recall_first(search, embeddings, model) == facts[0]
    assert model.texts == [] and backfill(search, embeddings) == 0
    search.close()
    restarted = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    assert recall_first(restarted, embeddings, model) == facts[0]
    assert restarted.backfill.facts_pending() == 0 and backfill(restarted, embeddings) == 0
    assert model.texts == []  # every vector came from the index
    restarted.close()


def test_facts_the_backfill_embeds_are_kept_in_memory_when_the_index_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = CountingModel()
    embeddings = Embeddings("builtin", model)
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    ledger = with_facts(Ledger(), *facts)
    commit(tmp_path, ledger)  # an index without vectors
    problems: list[tuple[str, str]] = []
    search = ProjectMemorySearch(
        lambda _project: tmp_path,
        embeddings=embeddings,
        record_error=lambda kind, message: problems.append((kind, message)),
    )

    def disk_full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(projections, "_build_index_file", disk_full)
    assert recall_first(search, embeddings, model) == facts[0]
    assert backfill(search, embeddings) == 2
    assert sorted(model.texts) == sorted(facts)
    assert [kind for kind, _message in problems] == ["recall.index_unusable"]
    assert index_state(tmp_path, ledger) == "current"  # the one it had
    assert recall_first(search, embeddings, model) == facts[0]
    assert model.texts == [] and backfill(search, embeddings) == 0  # kept in memory, not retried
    assert len(problems) == 1 and search.backfill.facts_pending() == 0
    search.close()


def test_a_publish_during_the_backfills_embedding_keeps_its_facts_vectors(
    tmp_path: Path,
) -> None:
    """The backfill embeds outside the project's cache lock; a publish that lands meanwhile
    writes the index with its new fact's vector, and the index the backfill writes after it
    must keep that vector (else the fact is embedded again) and be current."""
    model = CountingModel()
    embeddings = Embeddings("builtin", model)
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    ledger = with_facts(Ledger(), *facts)
    commit(tmp_path, ledger)  # an index without vectors
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    recall_first(search, embeddings, model)
    batch = search.backfill.facts_to_embed(64, frozenset())
    assert batch is not None and [r.fact for r in batch.records] == facts
    matrix = embeddings.embed(facts, purpose="backfill")
    assert matrix is not None
    new = "Staging deploys run from the deploy-staging workflow."
    ledger = with_facts(ledger, new, job="job_published_meanwhile")
    commit(tmp_path, ledger, fact_embedder(embeddings)([new], tmp_path))
    assert search.backfill.keep_fact_vectors(batch, matrix) == 2
    stored = read_index_vectors(tmp_path / INDEX_FILE)
    assert stored is not None and set(stored.by_text) == {*facts, new}
    assert index_state(tmp_path, ledger) == "current"
    assert recall_first(search, embeddings, model) == facts[0]
    assert model.texts == [] and search.backfill.facts_pending() == 0
    search.close()


def test_status_counts_no_fact_pending_once_the_backfill_writes_its_vectors_to_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index with the backfill's vectors is readable by another process the moment it is
    renamed into place; the count status shows must already say so (it was lowered after the
    write, and a status asked in between counted the facts as still pending)."""
    model = CountingModel()
    embeddings = Embeddings("builtin", model)
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    commit(tmp_path, with_facts(Ledger(), *facts))  # an index without vectors
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    recall_first(search, embeddings, model)
    pending_when_written: list[int] = []
    build = projections._build_index_file

    def noting_the_count(path: Path, ledger: Ledger, vectors: Any) -> None:
        pending_when_written.append(search.backfill.facts_pending())
        build(path, ledger, vectors)

    monkeypatch.setattr(projections, "_build_index_file", noting_the_count)
    assert search.backfill.facts_pending() == 2
    assert backfill(search, embeddings) == 2
    assert pending_when_written == [0]
    stored = read_index_vectors(tmp_path / INDEX_FILE)
    assert stored is not None and set(stored.by_text) == set(facts)
    search.close()


def test_a_project_dropped_from_the_cache_is_no_longer_counted_as_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(project_cache, "PROJECTS_CACHED", 1)
    model = CountingModel()
    embeddings = Embeddings("builtin", model)
    directories = {"p1": tmp_path / "p1", "p2": tmp_path / "p2"}
    for directory in directories.values():
        directory.mkdir()
    commit(directories["p1"], with_facts(Ledger(), "alpha", "beta"))
    commit(directories["p2"], with_facts(Ledger(), "gamma", "delta", "epsilon"))
    search = ProjectMemorySearch(directories.__getitem__, embeddings=embeddings)
    query = embeddings.query("which package manager?")
    search.search_blocking("p1", ["alpha"], 6, query)
    assert search.backfill.facts_pending() == 2
    search.search_blocking("p2", ["gamma"], 6, query)  # p1 leaves the cache
    assert search.backfill.facts_pending() == 3
    assert backfill(search, embeddings) == 3
    assert search.backfill.facts_pending() == 0
    search.close()


def backfill(search: ProjectMemorySearch, embeddings: Embeddings) -> int:
    """What the daemon's backfill does with the facts recall noted (orcad.recall.deliberate
    `Backfill.facts_step_blocking`, with no refusal), batch after batch until the model fails
    or nothing is left: how many facts it embedded."""
    embedded = 0
    while (batch := search.backfill.facts_to_embed(64, frozenset())) is not None:
        matrix = embeddings.embed([record.fact for record in batch.records], purpose="backfill")
        kept = 0 if matrix is None else search.backfill.keep_fact_vectors(batch, matrix)
        if not kept:
            break
        embedded += kept
    return embedded


def test_a_projects_fact_vectors_are_held_once_in_recalls_cache(tmp_path: Path) -> None:
    """Recall stacks a project's vectors into one matrix; the vectors it read from the index
    are then that matrix's rows, not a second copy (about 96 KiB per project of 128 facts)."""
    embeddings = Embeddings.load("builtin")
    ledger = numbered(limits.LEDGER_MAX_CANDIDATES)
    facts = [candidate.fact for candidate in ledger.candidates]
    commit(tmp_path, ledger, fact_embedder(embeddings)(facts, tmp_path))
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    query = embeddings.query("which numbered fact is seven?")
    assert query is not None
    assert search.search_blocking("p", ["numbered", "fact"], 6, query)
    cache = search._caches.cached("p")
    assert cache is not None and cache.stacked is not None
    matrix = cache.stacked[0]
    assert len(cache.vectors) == len(facts) == len(matrix)
    copies = [v for v in cache.vectors.values() if not np.shares_memory(v, matrix)]
    assert sum(vector.nbytes for vector in copies) == 0
    search.close()


def test_a_projects_fact_vectors_take_two_bytes_a_number_and_rank_as_read(tmp_path: Path) -> None:
    """The index stores each fact's vector as float16; recall keeps them so (96 KiB for 128
    facts of 384 numbers, not 192 KiB a project), and ranks on exactly the numbers it read."""
    embeddings = Embeddings.load("builtin")
    ledger = numbered(limits.LEDGER_MAX_CANDIDATES)
    facts = [candidate.fact for candidate in ledger.candidates]
    commit(tmp_path, ledger, fact_embedder(embeddings)(facts, tmp_path))
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    query = embeddings.query("which numbered fact is seven?")
    assert query is not None
    found = search.search_blocking("p", ["numbered", "fact", "seven"], 6, query)
    assert found
    cache = search._caches.cached("p")
    assert cache is not None and cache.stacked is not None
    matrix = cache.stacked[0]
    assert matrix.shape == (len(facts), DIMS)
    assert matrix.nbytes <= len(facts) * DIMS * 2
    stored = read_index_vectors(tmp_path / INDEX_FILE)
    assert stored is not None
    for candidate, row in zip(ledger.candidates, matrix, strict=True):
        assert row.tobytes() == stored.by_text[candidate.fact]  # the very numbers stored
    search.close()


def index_connections(directories: Iterable[Path]) -> int:
    """How many open file descriptors of this process are the projects' index files."""
    indexes = {str(directory / INDEX_FILE) for directory in directories}
    found = 0
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            found += os.readlink(fd) in indexes
    return found


def projects_with_vectors(tmp_path: Path, embeddings: Embeddings, count: int) -> dict[str, Path]:
    directories = {}
    for number in range(count):
        directory = directories[f"p{number}"] = tmp_path / f"p{number}"
        directory.mkdir()
        facts = [
            f"Service {number} installs its packages with pnpm, never npm.",
            f"Releases of service {number} are cut on Thursdays.",
            f"Service {number} logs to /var/log/service-{number}.log.",
        ]
        commit(directory, with_facts(Ledger(), *facts), fact_embedder(embeddings)(facts, directory))
    return directories


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts fds through /proc")
def test_projects_left_idle_keep_no_index_connection_and_recall_the_same(tmp_path: Path) -> None:
    """Each open index connection holds SQLite's schema and page cache: only the projects
    searched most lately keep theirs, and the others recall the same facts without one."""
    embeddings = Embeddings.load("builtin")
    directories = projects_with_vectors(tmp_path, embeddings, 3 * project_cache.INDEXES_OPEN)
    search = ProjectMemorySearch(directories.__getitem__, embeddings=embeddings)
    prompts = ["which package manager installs packages?", "when are releases cut?"]

    def recalled() -> dict[tuple[str, str], list[str]]:
        found = {}
        for project in directories:
            for prompt in prompts:
                query = embeddings.query(prompt)
                assert query is not None
                records = search.search_blocking(project, distinct_terms(prompt), 6, query)
                found[project, prompt] = [record.id for record in records]
        return found

    first = recalled()
    assert all(first.values())
    assert 0 < index_connections(directories.values()) <= project_cache.INDEXES_OPEN
    assert recalled() == first  # again, the idle ones without a connection
    assert index_connections(directories.values()) <= project_cache.INDEXES_OPEN
    restarted = ProjectMemorySearch(directories.__getitem__, embeddings=embeddings)
    search.close()
    search = restarted
    assert recalled() == first  # as a daemon that never closed one
    search.close()
    assert index_connections(directories.values()) == 0


def test_the_backfill_writes_its_vectors_to_the_index_of_a_project_left_idle(
    tmp_path: Path,
) -> None:
    """A project whose index connection was closed while idle still has an index the backfill
    writes its vectors to (else they would be embedded again after every start)."""
    model = CountingModel()
    embeddings = Embeddings("builtin", model)
    directories = projects_with_vectors(tmp_path, embeddings, project_cache.INDEXES_OPEN)
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    directories["p"] = tmp_path / "p"
    directories["p"].mkdir()
    commit(directories["p"], with_facts(Ledger(), *facts))  # an index without vectors
    search = ProjectMemorySearch(directories.__getitem__, embeddings=embeddings)
    assert recall_first(search, embeddings, model) == facts[0]  # by their words meanwhile
    query = embeddings.query("which package manager?")
    for project in directories:
        if project != "p":
            search.search_blocking(project, ["package", "manager"], 6, query)
    cache = search._caches.cached("p")
    assert cache is not None and cache.index is None  # left idle
    model.texts.clear()
    assert backfill(search, embeddings) == 2 and sorted(model.texts) == sorted(facts)
    stored = read_index_vectors(directories["p"] / INDEX_FILE)
    assert stored is not None and set(stored.by_text) == set(facts)
    search.close()


def recall_first(search: ProjectMemorySearch, embeddings: Embeddings, model: CountingModel) -> str:
    """The first fact recalled for the frontend's package manager; `model.texts` then holds
    what the search embedded (nothing: the backfill embeds what the index has no vector
    for)."""
    prompt = "which package manager does the frontend use?"
    query = embeddings.query(prompt)
    assert query is not None
    model.texts.clear()
    found = search.search_blocking("p", distinct_terms(prompt), 12, query)
    assert found
    return found[0].fact


DIMS = 384  # the built-in model's


@pytest.mark.parametrize(
    "damage",
    [b"", b"\x01", b"\x00\x3c" * 7, b"\x00\x7e" * DIMS, b"\x00\x7c" * DIMS],  # size, NaN, inf
    ids=["empty", "odd-bytes", "too-short", "nan", "inf"],
)
def test_a_damaged_stored_vector_is_embedded_again(tmp_path: Path, damage: bytes) -> None:
    model = CountingModel()
    embeddings = Embeddings("builtin", model)
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    ledger = with_facts(Ledger(), *facts)
    vectors = fact_embedder(embeddings)(facts, tmp_path)
    assert vectors is not None
    commit(tmp_path, ledger, IndexVectors(vectors.model, {**vectors.by_text, facts[1]: damage}))
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    assert recall_first(search, embeddings, model) == facts[0]
    assert backfill(search, embeddings) == 1
    assert model.texts == facts[1:]  # the damaged one only, the other came from the index
    search.close()


class BatchesFail(CountingModel):
    """Embeds one text at a time, but times out on a batch (an endpoint whose deadline fits
    a prompt and not 128 facts)."""

    def embed(self, texts: Sequence[str]) -> Any:
        if len(texts) > 1:
            raise EmbeddingUnavailable("endpoint: timed out")
        return super().embed(texts)


def test_facts_that_could_not_be_embedded_are_recalled_by_their_words(tmp_path: Path) -> None:
    model = BatchesFail()
    embeddings = Embeddings("endpoint", model)
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    commit(tmp_path, with_facts(Ledger(), *facts))  # an index without vectors
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    assert recall_first(search, embeddings, model) == facts[0]  # lexical for them
    assert (
        backfill(search, embeddings) == 0 and search.backfill.facts_pending() == 2
    )  # tried at the next pass
    assert recall_first(search, embeddings, model) == facts[0]
    search.close()


def test_a_ledger_with_a_time_orcad_did_not_write_is_corrupt_and_recall_answers_empty(
    tmp_path: Path,
) -> None:
    facts = ["The frontend uses pnpm, never npm.", "Releases are cut on Thursdays."]
    ledger = with_facts(Ledger(), *facts)
    commit(tmp_path, ledger)
    path = ledger_path(tmp_path)
    edited = path.read_text().replace(ledger.candidates[1].recorded_at, "last Tuesday", 1)
    path.write_text(edited)
    with pytest.raises(LedgerCorrupt, match="line 2 is not a candidate: Invalid isoformat"):
        read_ledger(tmp_path)
    problems: list[str] = []
    embeddings = Embeddings.load("builtin")
    for model in (None, embeddings):  # lexical, and with a model
        search = ProjectMemorySearch(
            lambda _project: tmp_path,
            embeddings=model,
            record_error=lambda kind, _message: problems.append(kind),
        )
        query = None if model is None else model.query("which package manager?")
        assert search.search_blocking("p", ["package", "manager"], 12, query) == []
        search.close()
    assert problems == ["recall.ledger_unreadable"] * 2


def test_at_most_64_projects_keep_an_index_open(tmp_path: Path) -> None:
    projects = {f"p{n}": tmp_path / f"p{n}" for n in range(PROJECTS_CACHED + 6)}
    for directory in projects.values():
        directory.mkdir()
        commit(directory, with_facts(Ledger(), "alpha deploys with make"))
    search = ProjectMemorySearch(projects.__getitem__)
    for project_id in projects:
        assert search.search_blocking(project_id, ["alpha"], 5)
    gc.collect()
    open_indexes = [
        fd
        for fd in Path("/proc/self/fd").iterdir()
        if str(tmp_path) in os.path.realpath(fd) and os.path.realpath(fd).endswith(INDEX_FILE)
    ]
    assert len(open_indexes) == PROJECTS_CACHED
    search.close()
    gc.collect()
    assert not [
        fd
        for fd in Path("/proc/self/fd").iterdir()
        if os.path.realpath(fd).endswith(INDEX_FILE) and str(tmp_path) in os.path.realpath(fd)
    ]


def test_which_facts_hold_each_of_4096_stems_asked_takes_well_under_a_mebibyte(
    tmp_path: Path,
) -> None:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [f"zq{a}{b}{c}" for a in letters for b in letters for c in letters][:4096]
    facts = [f"Fact {n} deploys with {words[n]} and make" for n in range(128)]
    ledger = Ledger()
    for start in range(0, 128, 8):
        ledger = with_facts(ledger, *facts[start : start + 8], now=1_800_000_000.0 + start)
    commit(tmp_path, ledger)
    search = ProjectMemorySearch(lambda _project: tmp_path)
    assert search.search_blocking("p", ["deploys"], 1)  # the ledger and index read
    gc.collect()
    tracemalloc.start()
    try:
        for start in range(0, len(words), 64):  # every stem asked once, 64 a prompt
            search.search_blocking("p", words[start : start + 64], 6)
        gc.collect()
        held = sum(
            traced.size
            for traced in tracemalloc.take_snapshot().statistics("filename")
            if traced.traceback[0].filename.endswith(("automatic.py", "project_cache.py"))
        )
    finally:
        tracemalloc.stop()
    assert held < 512 * 1024, held
    # and each word still finds the one fact that holds it
    found = search.search_blocking("p", [words[5], words[500]], 6)
    assert [record.fact for record in found] == [facts[5]]
    search.close()


def test_recall_keeps_a_project_facts_word_stems_once(tmp_path: Path) -> None:
    letters = "abcdefghijklmnopqrstuvwxyz"
    facts = [
        f"Fact {n}: the {letters[n % 26]}{letters[n // 26]}service deploys with make on staging"
        for n in range(128)
    ]
    ledger = Ledger()
    for start in range(0, 128, 8):
        ledger = with_facts(ledger, *facts[start : start + 8], now=1_800_000_000.0 + start)
    commit(tmp_path, ledger)
    embeddings = Embeddings.load("builtin")
    query = embeddings.query("how does the aaservice deploy")
    search = ProjectMemorySearch(lambda _project: tmp_path, embeddings=embeddings)
    gc.collect()
    tracemalloc.start()
    try:
        found = search.search_blocking("p", ["aaservice", "deploy"], 6, query)
        gc.collect()
        # what the project's cache made of the ledger apart from its records and their vectors
        # (the records' stems are the ones ranking keeps: rank.text_stems)
        held = sum(
            traced.size
            for traced in tracemalloc.take_snapshot().statistics("filename")
            if traced.traceback[0].filename.endswith("project_cache.py")
        )
    finally:
        tracemalloc.stop()
    assert found
    assert held < 64 * 1024, held
    search.close()
