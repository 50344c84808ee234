"""What ledger.forget does to job files, in process on real files: committed jobs holding the
fact are purged, jobs still waiting are told its digest and have its text cut out, whatever
the case, whitespace, closing punctuation or script, and never a longer word's."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import pytest

from orcad import limits
from orcad.capture.inspection import purge_evidence, shield_waiting_jobs
from orcad.capture.jobstore import (
    FORGOTTEN_JOBS_FILE,
    job_file_exists,
    note_forgotten_jobs,
    read_forgotten_jobs,
    read_job,
    write_job,
)
from orcad.capture.ledger import CandidateRecord, forgotten_digest
from orcad.capture.records import encode_job, new_job
from orcad.capture.source import build_source
from orcad.clock import format_time
from orcad.errors import StorageError

pytestmark = pytest.mark.inprocess

NOW = 1_800_000_000.0


def job(directory: Path, number: int, source: str, state: str = "pending") -> str:
    (directory / "jobs").mkdir(exist_ok=True)
    job_id = f"job_{number:032x}"
    record = new_job(
        job_id=job_id,
        project_id="p",
        session_id="ses_1",
        turn_id=f"t{number}",
        source=source,
        source_digest=hashlib.sha256(source.encode()).hexdigest(),
        source_bytes=len(source.encode()),
        source_truncated=False,
        now=NOW,
    )
    write_job(directory, msgspec.structs.replace(record, state=state))
    return job_id


def candidate(fact: str, job_id: str = "job_" + "f" * 32) -> CandidateRecord:
    return CandidateRecord(
        id="cand_" + "a" * 32,
        category="project",
        fact=fact,
        key=fact.lower(),
        session_id="ses_1",
        turn_id="t0",
        job_id=job_id,
        recorded_at=format_time(NOW),
        provider="heuristic",
        model="-",
        prompt_version="v1",
    )


def source_of(directory: Path, job_id: str) -> str:
    found = read_job(directory, job_id)
    assert found is not None
    return found.source


@pytest.mark.parametrize(
    ("fact", "source", "cut"),
    [
        (
            "The staging cluster is named quartz-lemur-17.",
            "user: Reminder:  the staging\ncluster is named QUARTZ-LEMUR-17! Thanks",
            "user: Reminder:  [forgotten]! Thanks",
        ),
        (
            "项目使用 uv 管理依赖。",
            "user: 项目使用 uv 管理依赖\uff0c好吗",
            "user: [forgotten]\uff0c好吗",
        ),
        ("Prefer tabs…", "prefer tabs, not spaces", "[forgotten], not spaces"),
        ("Use tabs.", "we use tabsize 4; use tabs", "we use tabsize 4; [forgotten]"),
        # only full case folding finds it: no offset can be trusted, so the source goes whole
        ("Die Straße heißt Main.", "DIE STRASSE HEISST MAIN\n    CamelCase", "[forgotten]"),
        # one occurrence as written and one that only full case folding finds: both go
        ("Die Straße heißt Main.", "die Straße heißt Main; DIE STRASSE HEISST MAIN", "[forgotten]"),
    ],
    ids=[
        "case-and-whitespace",
        "cjk-punctuation",
        "ellipsis",
        "word-boundary",
        "full-folding",
        "as-written-and-full-folding",
    ],
)
def test_a_waiting_job_loses_the_fact_and_keeps_the_rest(
    tmp_path: Path, fact: str, source: str, cut: str
) -> None:
    waiting = job(tmp_path, 1, source)
    shielded = shield_waiting_jobs(tmp_path, candidate(fact), [waiting], scrub=True)
    assert [found.job_id for found in shielded] == [waiting]
    assert source_of(tmp_path, waiting) == cut
    stored = read_job(tmp_path, waiting)
    assert stored is not None and stored.forgotten_digests() == [forgotten_digest(fact)]


def test_keep_evidence_then_a_plain_forget_still_cuts_the_text(tmp_path: Path) -> None:
    fact = "Builds run on the blue runners."
    waiting = job(tmp_path, 1, f"note: {fact}")
    assert shield_waiting_jobs(tmp_path, candidate(fact), [waiting], scrub=False)
    assert source_of(tmp_path, waiting) == f"note: {fact}"  # kept, but told
    # the fact taught again and forgotten without --keep-evidence: told once, now cut
    again = shield_waiting_jobs(tmp_path, candidate(fact), [waiting], scrub=True)
    assert [found.job_id for found in again] == [waiting]
    assert source_of(tmp_path, waiting) == "note: [forgotten]."
    assert again[0].forgotten_digests() == [forgotten_digest(fact)]
    # and repeated (a forget retried after a crash): nothing left to change
    assert shield_waiting_jobs(tmp_path, candidate(fact), [waiting], scrub=True) == []


def test_a_cut_keeps_the_source_within_its_bound_and_the_newest_message_whole(
    tmp_path: Path,
) -> None:
    """The mark is longer than a short fact: a source at its bound, cut, is bounded again as
    capture bounds one, the oldest text giving way."""
    task = "user: Set up the project. " + "Keep the build green. " * 50
    older = [("assistant", f"Step {n}: use uv, then use uv again.") for n in range(2000)]
    newest = "All 212 tests pass now."
    built = build_source([("user", task[len("user: ") :]), *older, ("assistant", newest)])
    assert built is not None and built.truncated
    assert limits.SOURCE_MAX_BYTES - 64 < built.size <= limits.SOURCE_MAX_BYTES
    waiting = job(tmp_path, 1, built.text)
    shield_waiting_jobs(tmp_path, candidate("Use uv."), [waiting], scrub=True)
    cut = source_of(tmp_path, waiting)
    assert len(cut.encode()) <= limits.SOURCE_MAX_BYTES
    assert "[forgotten]" in cut and "use uv" not in cut.lower()
    assert cut.startswith("user: Set up the project. Keep the build green.")
    assert cut.endswith(f"\n\nassistant: {newest}")
    # a source not made of labelled blocks keeps its end
    plain = job(tmp_path, 2, "use uv " * (limits.SOURCE_MAX_BYTES // 7) + "the end")
    shield_waiting_jobs(tmp_path, candidate("Use uv."), [plain], scrub=True)
    cut = source_of(tmp_path, plain)
    assert len(cut.encode()) <= limits.SOURCE_MAX_BYTES
    assert cut.startswith("[...] [forgotten]") and cut.endswith("[forgotten] the end")


def test_only_jobs_that_may_still_publish_are_told(tmp_path: Path) -> None:
    fact = "Builds run on the blue runners."
    jobs = {
        state: job(tmp_path, number, f"{fact} ({state})", state)
        for number, state in enumerate(("pending", "leased", "exhausted", "committed"), 1)
    }
    shielded = shield_waiting_jobs(tmp_path, candidate(fact), list(jobs.values()), scrub=True)
    assert {found.job_id for found in shielded} == {
        jobs["pending"],
        jobs["leased"],
        jobs["exhausted"],
    }
    assert source_of(tmp_path, jobs["committed"]) == f"{fact} (committed)"
    untouched = read_job(tmp_path, jobs["committed"])
    assert untouched is not None and untouched.forgotten_digests() == []


def test_a_job_file_without_forgotten_digests_is_written_as_before(tmp_path: Path) -> None:
    """An older orcad (which forbids unknown fields) can still read a job no forget told."""
    pending = read_job(tmp_path, job(tmp_path, 1, "hello"))
    assert pending is not None and b"forgotten" not in encode_job(pending)


def test_committed_jobs_are_purged_by_the_same_match(tmp_path: Path) -> None:
    fact = "The staging cluster is named quartz-lemur-17."
    producer = job(tmp_path, 1, "anything", "committed")
    holder = job(
        tmp_path, 2, "the staging\ncluster is named quartz-lemur-17! and more", "committed"
    )
    longer = job(tmp_path, 3, "the staging cluster is named quartz-lemur-170", "committed")
    purged = purge_evidence(tmp_path, candidate(fact, producer), [producer, holder, longer])
    assert purged == [producer, holder]
    assert not job_file_exists(tmp_path, holder) and job_file_exists(tmp_path, longer)


def test_a_purge_notes_the_jobs_it_deletes_and_the_one_that_made_the_fact(tmp_path: Path) -> None:
    fact = "Builds run on the blue runners."
    holding = job(tmp_path, 1, f"note: {fact}", "committed")
    other = job(tmp_path, 2, "nothing of it", "committed")
    producer = "job_" + "e" * 32  # retention deleted its file already
    purged = purge_evidence(tmp_path, candidate(fact, producer), [holding, other])
    assert purged == [holding]
    assert not job_file_exists(tmp_path, holding) and job_file_exists(tmp_path, other)
    assert read_forgotten_jobs(tmp_path) == {producer, holding}
    written = (tmp_path / FORGOTTEN_JOBS_FILE).read_text()
    assert "blue" not in written  # ids only, never the text
    # a second forget adds to them
    another = job(tmp_path, 3, "Deploys are on Fridays.", "committed")
    purge_evidence(tmp_path, candidate("Deploys are on Fridays.", another), [another])
    assert read_forgotten_jobs(tmp_path) == {producer, holding, another}


def test_forgotten_jobs_keep_the_newest_and_a_damaged_list_is_refused_and_left_as_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "FORGOTTEN_JOBS_KEPT", 3)
    ids = [f"job_{n:032x}" for n in range(5)]
    assert read_forgotten_jobs(tmp_path) == frozenset()  # none yet
    note_forgotten_jobs(tmp_path, ids[:2])
    note_forgotten_jobs(tmp_path, ids[2:])
    assert read_forgotten_jobs(tmp_path) == set(ids[2:])
    note_forgotten_jobs(tmp_path, [ids[2]])  # noted again: now the newest
    note_forgotten_jobs(tmp_path, [ids[0]])
    assert read_forgotten_jobs(tmp_path) == {ids[0], ids[2], ids[4]}
    path = tmp_path / FORGOTTEN_JOBS_FILE
    for damage in (b"{not json", b'{"version": 1, "job_ids": "x"}', b"[]"):
        path.write_bytes(damage)
        # which turns it named is unknown: neither counted as none nor written over
        for attempt in (
            lambda: read_forgotten_jobs(tmp_path),
            lambda: note_forgotten_jobs(tmp_path, [ids[1]]),
        ):
            with pytest.raises(StorageError) as caught:
                attempt()
            assert str(path) in caught.value.message and "move it aside" in caught.value.message
            assert caught.value.data["reason"] == "corrupt"
        assert path.read_bytes() == damage
    path.unlink()
    path.mkdir()  # not a file: damaged too, and never waited on
    with pytest.raises(StorageError, match="not a regular file"):
        read_forgotten_jobs(tmp_path)
    with pytest.raises(StorageError, match="not a regular file"):
        note_forgotten_jobs(tmp_path, [ids[1]])
    assert path.is_dir()
