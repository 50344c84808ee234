"""The candidate ledger: merge, deduplication, limits, forget, file format and atomic replace."""

from __future__ import annotations

import hashlib
import itertools
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orcad import limits
from orcad.capture.jobstore import CorruptJobFile, read_job
from orcad.capture.ledger import (
    LEDGER_FILE,
    Ledger,
    LedgerCorrupt,
    MergeResult,
    Provenance,
    decode_ledger,
    encode_ledger,
    forget,
    forgotten_digest,
    ledger_info,
    merge_job_candidates,
    normalize_fact,
    read_ledger,
    write_ledger,
)
from orcad.errors import Conflict, StorageError
from protocol.types import ExtractedFact
from tests.harness import REPO_ROOT

pytestmark = pytest.mark.inprocess

NOW = 1_800_000_000.0
PROVENANCE = Provenance(
    session_id="sess-1", turn_id="turn-1", provider="heuristic", model="rules", prompt_version="v1"
)
SECRET_FACT = "The staging deploy key is AKIAZ3MZ4QX7JNPR2T6W."


def fact(text: str, category: str = "project") -> ExtractedFact:
    return ExtractedFact(category=category, fact=text)  # type: ignore[arg-type]


def merge(ledger: Ledger, job_id: str, *texts: str) -> tuple[Ledger, MergeResult]:
    return merge_job_candidates(ledger, job_id, [fact(t) for t in texts], PROVENANCE, NOW)


def filled(count: int) -> Ledger:
    """A ledger with `count` distinct candidates, one job per fact."""
    ledger = Ledger()
    for number in range(count):
        ledger, _ = merge(ledger, f"job_{number:032x}", f"Distinct fact number {number}")
    return ledger


# --- normalization --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("Deploys use make release.", "deploys use make release"),
        ("Deploys  use\tmake\nrelease!!", "  DEPLOYS USE MAKE RELEASE "),
        ("\uff46\uff55\uff4c\uff4c width ok", "full width ok"),  # NFKC folds fullwidth forms
        ("Straße is spelled so", "STRASSE IS SPELLED SO"),  # case folding, not lower()
        ("Ends with an ellipsis…", "ends with an ellipsis..."),
        ("Question?", "question"),
        ("\ufb01les are \ufb00ine", "files are ffine"),  # ligatures
        ("\uff32\uff55\uff4e \uff2d\uff21\uff2b\uff25", "run make"),  # full-width, any case
        ("Tabs\u00a0and\u2007figure\u202fspaces\u3000too", "tabs and figure spaces too"),
        ("\u2474 is the first step", "(1) is the first step"),  # parenthesized digit
        ("Weighs 5\u338f", "weighs 5kg"),  # a unit in one square
        ("Area is 10 m\u00b2", "AREA IS 10 M\u00b2"),  # a superscript kept, compared as such
    ],
)
def test_exact_duplicates_normalize_to_one_key(left: str, right: str) -> None:
    assert normalize_fact(left) == normalize_fact(right)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("Port 10\u00b2 is open", "Port 102 is open"),  # a power is not a digit
        ("Set x\u00b2 to zero", "Set x2 to zero"),
        ("Water is H\u2082O", "Water is H2O"),  # subscript
        ("Step \u2460 installs it", "Step 1 installs it"),  # circled digit
        ("Step \u24b6 installs it", "Step a installs it"),  # circled letter, after case folding
        ("Takes 1\u00bd hours", "Takes 11\u20442 hours"),  # a fraction is not its digits
        ("Acme\u2122 ships it", "AcmeTM ships it"),
    ],
)
def test_characters_whose_plain_form_means_something_else_keep_distinct_keys(
    left: str, right: str
) -> None:
    assert normalize_fact(left) != normalize_fact(right)


def test_a_fact_differing_only_in_a_superscript_is_added_not_dropped() -> None:
    ledger, _ = merge(Ledger(), "job_a", "Area is 10 m\u00b2.")
    ledger, result = merge(ledger, "job_b", "Area is 10 m2.", "area is 10 M\u00b2")
    assert (result.added, result.duplicates) == (1, 1)
    assert [c.fact for c in ledger.candidates] == ["Area is 10 m\u00b2.", "Area is 10 m2."]


def test_a_key_written_under_the_earlier_folding_does_not_drop_a_different_fact(
    tmp_path: Path,
) -> None:
    ledger, _ = merge(Ledger(), "job_a", "Port 10\u00b2 is open")
    stale = msgspec.structs.replace(ledger.candidates[0], key="port 102 is open")  # plain NFKC
    write_ledger(tmp_path, Ledger(ledger.revision, (stale,), ledger.merged_jobs))
    ledger, result = merge(read_ledger(tmp_path), "job_b", "Port 102 is open")
    assert (result.added, result.duplicates) == (1, 0)
    assert [c.fact for c in ledger.candidates] == ["Port 10\u00b2 is open", "Port 102 is open"]


def test_near_duplicates_keep_distinct_keys() -> None:
    assert normalize_fact("Deploys use make release") != normalize_fact(
        "Deploys use make release-prod"
    )
    assert normalize_fact("Use tabs.") != normalize_fact("Use no tabs.")


@given(st.text(max_size=200))
def test_normalize_fact_is_idempotent(text: str) -> None:
    key = normalize_fact(text)
    assert normalize_fact(key) == key
    assert key == key.strip()
    assert "  " not in key


# --- merge ----------------------------------------------------------------------------------


def test_merge_adds_candidates_with_provenance() -> None:
    ledger, result = merge_job_candidates(
        Ledger(),
        "job_a",
        [fact("Deploys go through make release.", "project"), fact("Likes tabs", "user")],
        PROVENANCE,
        NOW,
    )
    assert result == MergeResult(added=2, duplicates=0, rejected=0)
    assert ledger.revision == 1
    first, second = ledger.candidates
    assert first.id.startswith("cand_") and len(first.id) == 37 and first.id != second.id
    assert int(first.id[5:], 16) >= 0
    assert (first.category, first.fact, first.key) == (
        "project",
        "Deploys go through make release.",
        "deploys go through make release",
    )
    assert (first.session_id, first.turn_id, first.job_id) == ("sess-1", "turn-1", "job_a")
    assert (first.provider, first.model, first.prompt_version) == ("heuristic", "rules", "v1")
    assert first.recorded_at == "2027-01-15T08:00:00.000Z"


def test_secret_facts_are_rejected_and_counted() -> None:
    ledger, result = merge(Ledger(), "job_a", "Kept fact", SECRET_FACT, "password = hunter2xyzQ!9")
    assert (result.added, result.duplicates, result.rejected) == (1, 0, 2)
    assert [c.fact for c in ledger.candidates] == ["Kept fact"]
    assert all("AKIA" not in line for line in encode_ledger(ledger).decode().splitlines())


def test_exact_duplicates_are_counted_and_near_duplicates_kept() -> None:
    ledger, _ = merge(Ledger(), "job_a", "Deploys go through make release.")
    ledger, result = merge(
        ledger,
        "job_b",
        "deploys GO through   make release",  # exact after normalization
        "Deploys go through make release-prod.",  # a correction: kept
        "Deploys go through make release-prod",  # same job, exact duplicate of the previous
    )
    assert (result.added, result.duplicates, result.rejected) == (1, 2, 0)
    assert [(c.fact, c.job_id) for c in ledger.candidates] == [
        ("Deploys go through make release.", "job_a"),
        ("Deploys go through make release-prod.", "job_b"),
    ]


def test_merging_the_same_job_again_adds_nothing_and_returns_first_counts() -> None:
    ledger, first = merge(Ledger(), "job_a", "One", "Two", SECRET_FACT)
    ledger, _ = merge(ledger, "job_b", "Three")
    again, replay = merge(ledger, "job_a", "One", "Two", "Something new this time")
    assert again is ledger  # unchanged, no revision bump: nothing to write
    assert (replay.added, replay.duplicates, replay.rejected) == (2, 0, 1)
    assert replay.replayed and not first.replayed


def test_a_job_that_added_nothing_is_still_idempotent() -> None:
    ledger, _ = merge(Ledger(), "job_a", "One")
    ledger, result = merge(ledger, "job_b", "one.")
    assert (result.added, result.duplicates) == (0, 1)
    again, replay = merge(ledger, "job_b", "A different output after a crash")
    assert again is ledger and replay.replayed and replay.added == 0


def test_ledger_keeps_128_candidates_and_drops_the_oldest() -> None:
    at_limit = filled(limits.LEDGER_MAX_CANDIDATES)
    assert len(at_limit.candidates) == 128
    over, result = merge(at_limit, "job_new", "The newest fact")
    assert result.added == 1
    assert len(over.candidates) == 128
    assert over.candidates[0].fact == "Distinct fact number 1"
    assert over.candidates[-1].fact == "The newest fact"
    # a fact that fell out of the ledger is no longer a duplicate
    _, result = merge(over, "job_again", "Distinct fact number 0")
    assert result.added == 1


def test_merged_job_log_is_bounded() -> None:
    ledger = filled(limits.COMMITTED_JOBS_KEPT + 5)
    assert len(ledger.merged_jobs) == limits.COMMITTED_JOBS_KEPT
    assert ledger.merged_jobs[0].job_id == f"job_{5:032x}"


# --- forget ---------------------------------------------------------------------------------


def test_forget_removes_a_candidate_and_bumps_the_revision() -> None:
    ledger, _ = merge(Ledger(), "job_a", "One", "Two")
    target = ledger.candidates[0].id
    after, result = forget(ledger, target, expected_revision=ledger.revision)
    assert (result.removed, result.revision) == (True, ledger.revision + 1)
    assert [c.fact for c in after.candidates] == ["Two"]
    assert after.revision == 2


def test_forget_is_idempotent_whatever_the_revision() -> None:
    ledger, _ = merge(Ledger(), "job_a", "One")
    target = ledger.candidates[0].id
    after, _ = forget(ledger, target, ledger.revision)
    for revision in (ledger.revision, after.revision, 99):
        again, result = forget(after, target, revision)
        assert again is after
        assert (result.removed, result.revision) == (False, after.revision)


def test_forget_with_a_stale_revision_conflicts_while_the_candidate_exists() -> None:
    ledger, _ = merge(Ledger(), "job_a", "One")
    ledger, _ = merge(ledger, "job_b", "Two")
    with pytest.raises(Conflict) as caught:
        forget(ledger, ledger.candidates[0].id, expected_revision=1)
    assert caught.value.data["revision"] == 2
    assert caught.value.kind == "conflict"


def test_a_fact_forgotten_while_its_job_waited_counts_as_a_duplicate() -> None:
    forgotten = [forgotten_digest("The cluster is named quartz.")]
    assert "quartz" not in forgotten[0]  # only a digest of the text is kept
    facts = [fact("THE CLUSTER  is named quartz!"), fact("Builds run on blue runners.")]
    ledger, result = merge_job_candidates(
        Ledger(), "job_a", facts, PROVENANCE, NOW, forgotten=forgotten
    )
    assert [c.fact for c in ledger.candidates] == ["Builds run on blue runners."]
    assert (result.added, result.duplicates) == (1, 1)
    # another job was not told: the same fact is a new decision there
    ledger, result = merge_job_candidates(ledger, "job_b", facts[:1], PROVENANCE, NOW)
    assert result.added == 1


def test_ledger_info_is_the_inspect_view() -> None:
    ledger, _ = merge(Ledger(), "job_a", "One")
    info = ledger_info(ledger)
    assert (info.revision, info.fingerprint) == (1, ledger.fingerprint)
    (candidate,) = info.candidates
    record = ledger.candidates[0]
    assert (candidate.id, candidate.fact, candidate.job_id, candidate.model) == (
        record.id,
        "One",
        "job_a",
        "rules",
    )


# --- encoding and fingerprint ---------------------------------------------------------------


def test_file_is_a_header_then_one_line_per_candidate() -> None:
    ledger, _ = merge(Ledger(), "job_a", "One", "Two")
    lines = encode_ledger(ledger).decode().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith('{"format":"orcad.candidates/1","revision":1,"candidates":2,')
    assert '"fact":"One"' in lines[1] and '"fact":"Two"' in lines[2]


def test_fingerprint_is_the_sha256_of_the_candidate_lines() -> None:
    ledger, _ = merge(Ledger(), "job_a", "One", "Two")
    body = encode_ledger(ledger).split(b"\n", 1)[1]
    assert ledger.fingerprint == hashlib.sha256(body).hexdigest()
    assert Ledger().fingerprint == hashlib.sha256(b"").hexdigest()
    bumped = Ledger(ledger.revision + 5, ledger.candidates, ())
    assert bumped.fingerprint == ledger.fingerprint  # content only, not the revision


def test_round_trip_through_bytes() -> None:
    ledger, _ = merge(Ledger(), "job_a", 'Unicode é ✓ \u2028 and "quotes"\nnewline')
    decoded = decode_ledger(encode_ledger(ledger))
    assert decoded == ledger
    assert decoded.fingerprint == ledger.fingerprint


facts_strategy = st.lists(
    st.tuples(
        st.sampled_from(["user", "feedback", "project", "reference"]),
        st.text(min_size=1, max_size=40),
    ),
    max_size=8,
)


@settings(max_examples=40)
@given(st.lists(st.tuples(st.integers(0, 30), facts_strategy), max_size=25))
def test_merge_sequences_keep_the_invariants(jobs: list[tuple[int, list[tuple[str, str]]]]) -> None:
    ledger = Ledger()
    ids = (f"cand_{n:032x}" for n in itertools.count())
    for job_number, facts in jobs:
        before = ledger
        ledger, result = merge_job_candidates(
            ledger,
            f"job_{job_number}",
            [fact(text, category) for category, text in facts],
            PROVENANCE,
            NOW,
            new_id=lambda: next(ids),
        )
        if result.replayed:
            assert ledger is before
        else:
            assert ledger.revision == before.revision + 1
            assert result.added + result.duplicates + result.rejected == len(facts)
        keys = [c.key for c in ledger.candidates]
        assert len(keys) == len(set(keys))
        assert len(ledger.candidates) <= limits.LEDGER_MAX_CANDIDATES
        assert decode_ledger(encode_ledger(ledger)) == ledger


# --- files ----------------------------------------------------------------------------------


def test_missing_file_reads_as_an_empty_ledger(tmp_path: Path) -> None:
    assert read_ledger(tmp_path) == Ledger()


def test_write_then_read(tmp_path: Path) -> None:
    ledger, _ = merge(Ledger(), "job_a", "One", "Two")
    write_ledger(tmp_path, ledger)
    assert read_ledger(tmp_path) == ledger
    assert stat.S_IMODE((tmp_path / LEDGER_FILE).stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [LEDGER_FILE]


def corruptions(good: bytes) -> dict[str, bytes]:
    lines = good.split(b"\n")
    return {
        "empty file": b"",
        "cut mid-line": good[: len(good) - 20],
        "cut at a line boundary": b"\n".join(lines[:-2]) + b"\n",
        "garbage": b"\x00\xff garbage \x13\n",
        "no header": b"\n".join(lines[1:]),
        "edited fact": good.replace(b'"fact":"One"', b'"fact":"Uno"'),
        "extra candidate line": good + lines[1] + b"\n",
        "bad candidate id": good.replace(b'"id":"cand_', b'"id":"cxnd_', 1),
        "unknown field": good.replace(b'"model":', b'"color":"red","model":', 1),
    }


@pytest.mark.parametrize("kind", list(corruptions(b"x\ny\n")))
def test_damaged_ledger_is_reported_never_read_as_empty(tmp_path: Path, kind: str) -> None:
    ledger, _ = merge(Ledger(), "job_a", "One", "Two", "Three")
    write_ledger(tmp_path, ledger)
    damaged = corruptions((tmp_path / LEDGER_FILE).read_bytes())[kind]
    (tmp_path / LEDGER_FILE).write_bytes(damaged)
    with pytest.raises(LedgerCorrupt) as caught:
        read_ledger(tmp_path)
    assert isinstance(caught.value, StorageError)
    assert caught.value.kind == "storage"
    assert caught.value.data["path"] == str(tmp_path / LEDGER_FILE)


def test_unreadable_ledger_path_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / LEDGER_FILE).mkdir()
    with pytest.raises(StorageError):
        read_ledger(tmp_path)
    with pytest.raises(StorageError):
        write_ledger(tmp_path, Ledger(1))


def test_a_ledger_that_is_a_symbolic_link_is_damaged_never_read_or_replaced(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside, _ = merge(Ledger(), "job_a", "A fact from outside the memory root")
    write_ledger(elsewhere, outside)
    project = tmp_path / "project"
    project.mkdir()
    (project / LEDGER_FILE).symlink_to(elsewhere / LEDGER_FILE)
    with pytest.raises(LedgerCorrupt) as caught:
        read_ledger(project)
    assert "symbolic link" in caught.value.message
    newer, _ = merge(Ledger(), "job_b", "A new fact")
    with pytest.raises(LedgerCorrupt):
        write_ledger(project, newer)
    assert (project / LEDGER_FILE).is_symlink()
    assert read_ledger(elsewhere) == outside


def test_a_ledger_that_is_not_a_regular_file_is_damaged(tmp_path: Path) -> None:
    (tmp_path / LEDGER_FILE).mkdir()
    with pytest.raises(LedgerCorrupt) as caught:
        read_ledger(tmp_path)
    assert "not a regular file" in caught.value.message


def test_ledger_module_does_not_pull_in_trio_or_sqlite() -> None:
    code = (
        "import sys, orcad.capture.ledger; "
        "print(sorted(m for m in ('trio', 'sqlite3') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert result.stdout.strip() == "[]"


# JSON nested deeper than the decoder follows: a damaged file of only brackets
_DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize(
    "first_line", [_DEEP, b'{"format":' + _DEEP + b"}", b'{"x":' + _DEEP + b',"format":"a"}']
)
def test_a_ledger_or_job_file_nested_too_deep_is_damaged_not_a_crash(
    tmp_path: Path, first_line: bytes
) -> None:
    # the look for a newer version's format read the line as any JSON, which raised
    # RecursionError past msgspec's depth: no damaged file, and a traceback where the fix goes
    (tmp_path / "candidates.jsonl").write_bytes(first_line + b"\n")
    with pytest.raises(LedgerCorrupt, match="is damaged"):
        read_ledger(tmp_path)
    job_id = "job_" + "0" * 32
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / f"{job_id}.json").write_bytes(first_line + b"\n")
    with pytest.raises(CorruptJobFile, match="is damaged"):
        read_job(tmp_path, job_id)
