"""Which deliberate records correct which (orcad/deliberate/corrections.py): kept when a record
is written, or later by the background pass for records written before, dropped with their
records, and brought into recall beside what they correct however far from the prompt."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from orcad.deliberate import corrections
from orcad.deliberate.corrections import (
    has_schema,
    link_unchecked,
    link_written,
    newer_partners,
)
from orcad.deliberate.queries import delete_record, insert_record, update_record
from orcad.deliberate.schema import open_database
from orcad.deliberate.store import DeliberateStore
from orcad.deliberate.vectors import VectorMatrix, hybrid_search, pending, store_vectors
from orcad.recall.rank import Candidate, corrects, rank
from tests.deliberate_helpers import numbered_record

pytestmark = pytest.mark.inprocess

OLD = "The code is formatted by ruff format with a line length of 100."
NEW = "The code is formatted by ruff format with a line length of 120 since the style change."
SIBLINGS = [
    "Sensor-hub stores uploaded files on an NFS share.",
    "Timesheet-app stores uploaded files on an NFS share.",
]


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    db = open_database(tmp_path / "memory.sqlite3")
    yield db
    db.close()


def save(db: sqlite3.Connection, n: int, content: str, workspace: str | None = "ws1") -> int:
    """Insert as an orcad without the pairs would (no link); the record's row number."""
    insert_record(db, numbered_record(n, content, workspace))
    return int(db.execute("SELECT max(row_id) FROM memories").fetchone()[0])


def pairs(db: sqlite3.Connection) -> set[tuple[str, str]]:
    return set(
        db.execute(
            "SELECT o.content, n.content FROM memory_corrections AS c "
            "JOIN memories AS o ON o.row_id = c.older JOIN memories AS n ON n.row_id = c.newer"
        ).fetchall()
    )


def test_a_correction_differs_by_numbers_and_added_words_not_by_its_subject() -> None:
    assert corrects(NEW, OLD)
    assert not corrects(OLD, NEW)  # the old one lacks "style change": it corrects nothing
    assert corrects(
        "Postgres 16 is the production database.", "Postgres 14 is the production database."
    )
    assert not corrects(SIBLINGS[1], SIBLINGS[0])  # records cut from one template
    assert not corrects("Deploys run on Fridays.", OLD)


def test_a_record_written_is_paired_with_what_it_corrects_and_no_sibling(
    connection: sqlite3.Connection,
) -> None:
    for n, text in enumerate([OLD, *SIBLINGS, "Logs are kept for 14 days."], start=1):
        save(connection, n, text)
        link_written(connection, f"mem_{n:032x}")
    assert pairs(connection) == set()
    save(connection, 9, NEW)
    link_written(connection, f"mem_{9:032x}")
    assert pairs(connection) == {(OLD, NEW)}
    checked = connection.execute("SELECT count(*) FROM memory_corrections_checked").fetchone()
    assert checked == (5,)


def test_pairs_go_with_a_record_deleted_or_changed_and_a_change_is_linked_again(
    connection: sqlite3.Connection,
) -> None:
    save(connection, 1, OLD)
    save(connection, 2, NEW)
    assert link_unchecked(connection, 10) == 2
    assert pairs(connection) == {(OLD, NEW)}
    update_record(connection, f"mem_{2:032x}", "Deploys run on Fridays.", None, 3.0)
    assert pairs(connection) == set()
    unmarked = connection.execute(
        "SELECT count(*) FROM memory_corrections_checked WHERE row_id = 2"
    ).fetchone()
    assert unmarked == (0,)  # the background pass looks at it again
    update_record(connection, f"mem_{2:032x}", NEW, None, 4.0)
    link_written(connection, f"mem_{2:032x}")
    assert pairs(connection) == {(OLD, NEW)}
    assert delete_record(connection, f"mem_{1:032x}")
    assert connection.execute("SELECT count(*) FROM memory_corrections").fetchone() == (0,)


def test_only_records_the_same_sessions_see_are_paired(connection: sqlite3.Connection) -> None:
    save(connection, 1, OLD, workspace="ws2")  # another workspace's
    save(connection, 2, "Postgres 14 is the production database.", workspace=None)  # global
    save(connection, 3, NEW, workspace="ws1")
    save(connection, 4, "Postgres 16 is the production database.", workspace="ws1")
    link_unchecked(connection, 10)
    assert pairs(connection) == {
        ("Postgres 14 is the production database.", "Postgres 16 is the production database.")
    }


def test_records_written_before_are_linked_in_batches_newest_first(
    connection: sqlite3.Connection,
) -> None:
    save(connection, 1, OLD)
    for n, name in enumerate(["billing", "search", "ledger", "mailer", "tiles"], start=2):
        save(connection, n, f"The {name} service listens behind the gateway.")
    save(connection, 7, NEW)
    assert not has_schema(connection)  # as an older orcad left it
    assert newer_partners(connection, [1], "ws1") == []  # no table yet: nothing brought along
    assert link_unchecked(connection, 3) == 3  # rows 7, 6 and 5
    assert pairs(connection) == {(OLD, NEW)}  # found from the newer side
    assert link_unchecked(connection, 3) == 3
    assert link_unchecked(connection, 3) == 1
    assert link_unchecked(connection, 3) == 0
    assert newer_partners(connection, [1, 3], "ws1") == [7]
    assert newer_partners(connection, [7], "ws1") == []  # only the newer comes along
    assert newer_partners(connection, [1, 7], "ws1") == []  # nor one already there


async def test_the_store_pairs_what_it_writes_and_a_failed_pairing_loses_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DeliberateStore(tmp_path / "memory.sqlite3")
    await store.open_current_file()
    try:
        await store.insert(numbered_record(1, OLD))
        await store.insert(numbered_record(2, "Deploys run on Fridays."))
        await store.update(f"mem_{2:032x}", NEW, None, 5.0)  # now a correction of the first
        assert await store.query(pairs) == {(OLD, NEW)}

        def fails(_connection: sqlite3.Connection, _row_id: int) -> int:
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(corrections, "link", fails)
        saved = await store.insert(numbered_record(3, "Postgres 14 is the production database."))
        assert await store.visible("ws1", saved.id) == saved
        unchecked = await store.query(
            lambda c: c.execute(
                "SELECT count(*) FROM memories WHERE row_id NOT IN "
                "(SELECT row_id FROM memory_corrections_checked)"
            ).fetchone()
        )
        assert unchecked == (1,)  # left to the background pass
        assert await store.query(pairs) == {(OLD, NEW)}  # its transaction was rolled back
    finally:
        store.close()


def test_a_search_brings_a_correction_farther_than_the_nearest_cut(
    connection: sqlite3.Connection,
) -> None:
    old_row = save(connection, 1, OLD)
    for n in range(2, 42):  # forty records nearer the prompt than the correction
        save(connection, n, f"Component {n} keeps its sources in folder src{n}.")
    new_row = save(connection, 50, NEW)
    link_unchecked(connection, 100)
    rows = pending(connection, "m1", 100)
    angle = {old_row: 0.0, new_row: 0.9}  # radians from the prompt
    vectors = np.stack(
        [
            np.array([np.cos(a), np.sin(a), 0.0], dtype=np.float32)
            for a in (angle.get(row_id, 0.5) for row_id, _content in rows)
        ]
    )
    store_vectors(connection, "m1", rows, vectors)
    prompt = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    cache: list[VectorMatrix | None] = [None]
    found = hybrid_search(connection, "ws1", [], prompt, "m1", 8, cache, nearest=16)
    by_content = {f.record.content: f for f in found.found}
    assert by_content[OLD].correction is False
    assert by_content[NEW].correction is True
    assert by_content[NEW].cosine == pytest.approx(np.cos(0.9), abs=1e-3)
    assert len(found.found) == 17  # the sixteen nearest and the correction
    # ranked, it takes the place of what it corrects though thirty-odd records score above it
    pool = [
        Candidate(f.record.id, f.record.content, f.record.updated_at, 0.0, f.cosine)
        for f in found.found
    ]
    flagged = frozenset(f.record.id for f in found.found if f.correction)
    shown = rank(
        pool, semantic=True, limit=4, floor=0.5, lexical_weight=0.3, gate=None, corrections=flagged
    )
    assert shown[0].text == NEW and OLD not in [c.text for c in shown]
    unflagged = rank(pool, semantic=True, limit=4, floor=0.5, lexical_weight=0.3, gate=None)
    assert unflagged[0].text == OLD  # without the pair it would have been shown alone


def test_a_search_brings_one_correction_a_record_the_newest_the_session_sees(
    connection: sqlite3.Connection,
) -> None:
    """Records cut from one template with a number changed each correct all the older ones:
    a record brings along only the newest, and only one its session may see."""
    builds = [
        save(connection, n, f"Nightly build {1000 + n} passed on the main branch.", None)
        for n in range(1, 31)
    ]  # global: every workspace sees them
    hidden = save(connection, 40, "Nightly build 1040 passed on the main branch.", "ws2")
    link_unchecked(connection, 100)
    assert connection.execute("SELECT count(*) FROM memory_corrections").fetchone()[0] > 30
    assert newer_partners(connection, builds[:3], "ws1") == [builds[-1]]
    assert newer_partners(connection, builds[:3], "ws2") == [hidden]
    assert newer_partners(connection, [builds[0], builds[-1]], "ws1") == []


def test_a_new_record_inherits_no_pairs_of_a_row_number_lost_before(
    connection: sqlite3.Connection,
) -> None:
    """A dump and restore that lost rows to damage keeps their pairs and marks: the record
    that next takes such a number starts with none."""
    save(connection, 1, OLD)
    lost = save(connection, 2, NEW)
    link_unchecked(connection, 10)
    connection.execute("DROP TRIGGER memory_corrections_on_delete")  # as a restore loses it
    delete_record(connection, f"mem_{2:032x}")
    save(connection, 3, "Deploys run on Fridays.")  # takes the number again
    assert connection.execute("SELECT max(row_id) FROM memories").fetchone() == (lost,)
    assert pairs(connection) == set()
    marked = connection.execute(
        "SELECT count(*) FROM memory_corrections_checked WHERE row_id = ?", (lost,)
    ).fetchone()
    assert marked == (0,)


def test_a_correction_brought_along_does_not_open_the_gate() -> None:
    """A candidate without a vector that shares a term with the prompt opens the gate (it is
    ranked by its words); one brought along only as a correction of another does not."""
    old = Candidate("old", OLD, 1.0, 0.0, 0.3)
    new = Candidate("new", NEW, 2.0, 0.5, None)  # no vector yet: its words alone

    def shown(corrections: frozenset[str]) -> list[str]:
        chosen = rank(
            [old, new],
            semantic=True,
            limit=4,
            floor=0.2,
            lexical_weight=0.3,
            gate=0.8,
            corrections=corrections,
        )
        return [c.key for c in chosen]

    assert shown(frozenset()) == ["new"]
    assert shown(frozenset({"new"})) == []
