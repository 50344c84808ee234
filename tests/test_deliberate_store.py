"""The deliberate store against real SQLite files: migrations, FTS sync, hostile search text."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from orcad.deliberate import queries
from orcad.deliberate.queries import (
    StoredRecord,
    delete_record,
    insert_record,
    is_record_id,
    new_record_id,
    purge_deleted_text,
    record_total,
    search_records,
    term_document_counts,
    update_record,
)
from orcad.deliberate.schema import SCHEMA_VERSION, migrate, open_database, repair_steps
from orcad.errors import StorageError
from tests.test_query import HOSTILE_TEXT

pytestmark = pytest.mark.inprocess


def record(content: str, workspace: str | None = "w1", at: float = 1.0) -> StoredRecord:
    return StoredRecord(
        id=new_record_id(),
        kind="fact",
        content=content,
        workspace_id=workspace,
        workspace_root="/src/w1",
        created_at=at,
        updated_at=at,
    )


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = open_database(tmp_path / "memory.sqlite3")
    yield conn
    conn.close()


def test_schema_is_versioned_and_reopening_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    first = open_database(path)
    insert_record(first, record("kept across opens"))
    assert first.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    first.close()
    again = open_database(path)
    assert migrate(again) == SCHEMA_VERSION
    assert [r.content for r in search_records(again, "w1", "kept", 8)] == ["kept across opens"]
    assert again.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    open_database(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StorageError, match="newer"):
        open_database(path)


def test_fts_index_follows_inserts_updates_and_deletes(connection: sqlite3.Connection) -> None:
    stored = insert_record(connection, record("original wording"))
    assert term_document_counts(connection, ["original"]) == {"original": 1}
    assert update_record(connection, stored.id, "replacement wording", "decision", 2.0)
    assert search_records(connection, "w1", "original", 8) == []
    assert [r.id for r in search_records(connection, "w1", "replacement", 8)] == [stored.id]
    assert delete_record(connection, stored.id)
    assert search_records(connection, "w1", "replacement wording", 8) == []
    assert term_document_counts(connection, ["wording"]) == {"wording": 0}
    # Raises sqlite3.DatabaseError if the external-content index disagrees with the table.
    connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    assert record_total(connection) == 0


def test_record_total_and_stemmed_counts(connection: sqlite3.Connection) -> None:
    for i in range(5):
        insert_record(connection, record(f"service {i} deploys nightly"))
    insert_record(connection, record("deploying by hand"))
    assert record_total(connection) == 6
    counts = term_document_counts(connection, ["deploying", "nightly", "absent"])
    assert counts == {"deploying": 6, "nightly": 5, "absent": 0}


def test_ids_are_random_128_bit_hex() -> None:
    ids = {new_record_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(is_record_id(i) for i in ids)
    assert not is_record_id("mem_" + "A" * 32)
    assert not is_record_id("mem_" + "0" * 31)


def test_row_ids_do_not_appear_in_records(connection: sqlite3.Connection) -> None:
    stored = insert_record(connection, record("a visible record"))
    found = search_records(connection, "w1", "visible", 8)[0]
    assert found == stored
    assert "row_id" not in StoredRecord.__struct_fields__


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=HOSTILE_TEXT)
def test_hostile_search_text_never_breaks_the_store(
    connection: sqlite3.Connection, text: str
) -> None:
    if record_total(connection) == 0:
        insert_record(connection, record('json-rpc "quoted" AND config.toml NEAR(x) 🎉 café'))
        insert_record(connection, record("global note", workspace=None))
    results = search_records(connection, "w1", text, 20)
    assert len(results) <= 20


def test_large_indexes_query_only_the_selective_terms(connection: sqlite3.Connection) -> None:
    from orcad.deliberate.queries import planned_match
    from orcad.query import POSTINGS_BUDGET

    for i in range(POSTINGS_BUDGET + 5):
        insert_record(connection, record(f"common filler {i}", at=float(i)))
    rare = insert_record(connection, record("common zebracorn"))
    assert planned_match(connection, "common zebracorn") == '"zebracorn"'
    assert term_document_counts(connection, ["common"]) == {"common": POSTINGS_BUDGET + 1}
    assert [r.id for r in search_records(connection, "w1", "common zebracorn", 8)] == [rare.id]
    # Only common terms: the rarest is still queried.
    assert len(search_records(connection, "w1", "common filler", 8)) == 8


def test_a_word_with_marks_of_another_script_is_found_by_itself(
    connection: sqlite3.Connection,
) -> None:
    """A Devanagari virama or a Hebrew point separates words in the index (only the accents of
    Latin letters are dropped there): the query must read the same words, not join them."""
    hindi = insert_record(connection, record("हिन्दी भाषा में लिखो"))
    hebrew = insert_record(connection, record("הַפְּרוֹיֶקְט נִבְנֶה בְּעִבְרִית"))
    assert [r.id for r in search_records(connection, "w1", "हिन्दी", 8)] == [hindi.id]
    assert [r.id for r in search_records(connection, "w1", "בְּעִבְרִית", 8)] == [hebrew.id]
    assert [r.id for r in search_records(connection, "w1", "Café", 8)] == []
    cafe = insert_record(connection, record("the café opens at nine"))
    assert [r.id for r in search_records(connection, "w1", "CAFE", 8)] == [cafe.id]


# SQLite 3.40's FTS5 added two levels to the index below with each purge; 2001 read as corrupt
PURGES_PAST_THE_LEVEL_LIMIT = 1100


@pytest.mark.slow
def test_purging_after_every_change_keeps_the_full_text_index_readable(
    connection: sqlite3.Connection,
) -> None:
    # an index of several pages, as any real one soon is: purges of a one-page index merge in place
    notes = [
        insert_record(connection, record(f"note {n} about the build cache and its keys"))
        for n in range(300)
    ]
    for number in range(PURGES_PAST_THE_LEVEL_LIMIT):
        note = notes[number % len(notes)]
        rewritten = f"rewritten {number} about the build cache and its keys"
        assert update_record(connection, note.id, rewritten, None, 2.0 + number)
        assert purge_deleted_text(connection)
    assert len(search_records(connection, "w1", "rewritten", 500)) == len(notes)
    assert search_records(connection, "w1", "note", 500) == []
    connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")


def test_a_purge_that_rebuilds_the_index_leaves_no_deleted_text_and_finds_the_rest(
    tmp_path: Path, connection: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queries, "FTS_STRUCTURE_MAX_BYTES", 0)  # every purge rebuilds
    kept = [
        insert_record(connection, record(f"kept note {n} on the deploy key")) for n in range(40)
    ]
    gone = insert_record(connection, record("the staging password rotates every friday"))
    assert delete_record(connection, gone.id)
    assert purge_deleted_text(connection)
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert gone.content.encode() not in files
    assert search_records(connection, "w1", "staging", 8) == []
    assert {r.id for r in search_records(connection, "w1", "deploy", 50)} == {r.id for r in kept}
    connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")


def test_the_repair_steps_mend_a_full_text_index_that_cannot_be_opened(tmp_path: Path) -> None:
    if shutil.which("sqlite3") is None:
        pytest.skip("no sqlite3 command line here to follow the repair steps with")
    database = tmp_path / "memory.sqlite3"
    connection = open_database(database)
    for n in range(50):
        insert_record(connection, record(f"note {n} on the release train"))
    # the structure record as a thousand purges on SQLite 3.40 left it: 2002 empty levels
    structure = bytes(4) + bytes([0x8F, 0x52, 0, 0]) + bytes(2 * 2002)
    with connection:
        connection.execute("UPDATE memories_fts_data SET block = ? WHERE id = 10", (structure,))
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    damaged = open_database(database)
    with pytest.raises(sqlite3.DatabaseError):
        search_records(damaged, "w1", "release", 8)
    damaged.close()
    steps = re.search(r"^stop orcad; (.*); mv (\S+) (\S+) \(and its", repair_steps(database))
    assert steps is not None
    subprocess.run(steps.group(1), shell=True, check=True, capture_output=True)  # noqa: S602
    recovered = open_database(Path(f"{database}.recovered"))
    assert len(search_records(recovered, "w1", "release", 100)) == 50
    recovered.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    recovered.close()
