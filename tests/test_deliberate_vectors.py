"""Vectors beside deliberate records (orcad/deliberate/vectors.py) on a real memory.sqlite3."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from orcad.deliberate import vectors as vectors_module
from orcad.deliberate.queries import delete_record, insert_record, update_record
from orcad.deliberate.row_products import FloatRows, SpannedInt8Rows
from orcad.deliberate.schema import open_database
from orcad.deliberate.vectors import (
    VectorMatrix,
    _records,
    _records_query,
    hybrid_search,
    load_matrix,
    pending,
    progress,
    store_vectors,
)
from orcad.limits import VECTOR_MATRIX_REFRESH_S
from tests.deliberate_helpers import numbered_record

pytestmark = pytest.mark.inprocess


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    db = open_database(tmp_path / "memory.sqlite3")
    yield db
    db.close()


def save(db: sqlite3.Connection, n: int, content: str, workspace: str | None = "ws1") -> None:
    insert_record(db, numbered_record(n, content, workspace))


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def not_due(matrix: VectorMatrix | None) -> VectorMatrix:
    """`matrix` as if just loaded, its refresh never due: what the tests of the refresh window
    read must not depend on how long a loaded machine takes between two calls."""
    assert matrix is not None
    return dataclasses.replace(matrix, loaded_at=math.inf)


def embed_two(connection: sqlite3.Connection) -> None:
    """Two records of ws1 (rows 1 and 2), each with a vector of model m1."""
    save(connection, 1, "alpha deploys")
    save(connection, 2, "beta caches")
    rows = pending(connection, "m1", 10)
    store_vectors(connection, "m1", rows, np.stack([unit(1, 0), unit(0, 1)]))


def test_pending_store_and_progress(connection: sqlite3.Connection) -> None:
    save(connection, 1, "alpha deploys")
    save(connection, 2, "beta caches")
    rows = pending(connection, "m1", 10)
    assert [content for _row, content in rows] == ["beta caches", "alpha deploys"]  # newest first
    assert progress(connection, "m1") == (0, 2)
    vectors = np.stack([unit(1, 0), unit(0, 1)])
    assert store_vectors(connection, "m1", rows, vectors) == 2
    assert progress(connection, "m1") == (2, 0) and pending(connection, "m1", 10) == []
    assert progress(connection, "m2") == (0, 2)  # another model's vectors do not count


def test_a_vectors_table_of_other_columns_is_made_again(connection: sqlite3.Connection) -> None:
    embed_two(connection)
    with connection:  # edited by hand: the vectors as text, under other names
        connection.execute("DROP TABLE memory_vectors")
        connection.execute("CREATE TABLE memory_vectors (row_id INTEGER PRIMARY KEY, v TEXT)")
        connection.execute("INSERT INTO memory_vectors VALUES (1, 'not a vector')")
    assert progress(connection, "m1") == (0, 2)  # it failed with "no such column: model"
    rows = pending(connection, "m1", 10)
    store_vectors(connection, "m1", rows, np.stack([unit(0, 1), unit(1, 0)]))
    assert progress(connection, "m1") == (2, 0)
    delete_record(connection, numbered_record(1, "").id)
    assert progress(connection, "m1") == (1, 0)  # the triggers are there again


def test_a_vector_goes_with_its_record_and_with_its_old_content(
    connection: sqlite3.Connection,
) -> None:
    embed_two(connection)
    update_record(connection, f"mem_{1:032x}", "alpha deploys twice", "fact", 9.0)
    assert [c for _r, c in pending(connection, "m1", 10)] == ["alpha deploys twice"]
    delete_record(connection, f"mem_{2:032x}")
    assert connection.execute("SELECT count(*) FROM memory_vectors").fetchone()[0] == 0
    # a vector made from text that changed meanwhile is not stored
    assert store_vectors(connection, "m1", [(1, "alpha deploys")], np.stack([unit(1, 0)])) == 0


def test_vectors_of_another_width_or_not_finite_are_left_out_and_embedded_again(
    connection: sqlite3.Connection,
) -> None:
    # one model id, vectors of two widths (an endpoint's server changed model), a damaged blob
    # and a vector holding NaN: the search goes on with the good ones and the others rank on
    # their words
    for row, text in enumerate(["alpha deploys", "beta caches", "gamma queues", "delta logs"], 1):
        save(connection, row, text)
    good = unit(1, 0, 0).astype(np.float16).tobytes()
    wider = unit(1, 0, 0, 0).astype(np.float16).tobytes()
    broken = np.array([np.nan, 1, 0], dtype=np.float16).tobytes()
    with connection:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS memory_vectors "
            "(row_id INTEGER PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL)"
        )
        for row, blob in [(1, good), (2, wider), (3, broken), (4, good[:5])]:
            connection.execute(
                "INSERT INTO memory_vectors (row_id, model, vector) VALUES (?, 'm1', ?)",
                (row, blob),
            )
    found = hybrid_search(connection, "ws1", ["caches"], unit(1, 0, 0), "m1", 5, [None])
    cosines = {f.record.content: f.cosine for f in found.found}
    assert cosines == {"beta caches": None, "alpha deploys": pytest.approx(1.0, abs=1e-3)}
    # those of another width are embedded again (a NaN in a vector of the right width can only
    # be damage: it stays out of the search)
    assert progress(connection, "m1", 3) == (2, 2)
    assert sorted(c for _r, c in pending(connection, "m1", 10, 3)) == ["beta caches", "delta logs"]
    assert progress(connection, "m1") == (4, 0)  # width unknown yet: every vector counts


@pytest.mark.parametrize("int8", [False, True], ids=["float32", "int8"])
def test_hybrid_search_joins_lexical_and_nearest_visible_records(
    connection: sqlite3.Connection, int8: bool
) -> None:
    save(connection, 1, "alpha deploys with make")
    save(connection, 2, "the cache holds tenants")
    save(connection, 3, "another workspace's secret plan", workspace="ws2")
    save(connection, 4, "global rule about releases", workspace=None)
    rows = pending(connection, "m1", 10)
    by_content = {
        "alpha deploys with make": unit(1, 0, 0),
        "the cache holds tenants": unit(0, 1, 0),
        "another workspace's secret plan": unit(0, 0, 1),
        "global rule about releases": unit(0, 0.2, 1),
    }
    store_vectors(connection, "m1", rows, np.stack([by_content[c] for _r, c in rows]))
    cache: list[VectorMatrix | None] = [None]
    found = hybrid_search(connection, "ws1", ["deploys"], unit(0, 0, 1), "m1", 2, cache, int8=int8)
    contents = [f.record.content for f in found.found]
    assert contents[0] == "alpha deploys with make"  # the lexical match
    assert "global rule about releases" in contents  # nearest visible vector
    assert "another workspace's secret plan" not in contents  # never another workspace's
    cosines = {f.record.content: f.cosine for f in found.found}
    assert cosines["alpha deploys with make"] == pytest.approx(0.0, abs=1e-3)
    assert found.total == 4 and found.terms == ["deploys"]
    matrix = cache[0]
    assert matrix is not None and isinstance(matrix.products, SpannedInt8Rows) == int8
    assert load_matrix(connection, "m1", matrix, 3, int8=int8) is matrix  # unchanged: reused
    assert load_matrix(connection, "m1", matrix, 3, int8=not int8) is not matrix  # other form
    save(connection, 5, "a new record")
    # a change is picked up, but at most once every VECTOR_MATRIX_REFRESH_S
    within = not_due(matrix)  # however long the save took
    assert load_matrix(connection, "m1", within, 3, int8=int8) is within
    aged = dataclasses.replace(matrix, loaded_at=matrix.loaded_at - VECTOR_MATRIX_REFRESH_S)
    reloaded = load_matrix(connection, "m1", aged, 3, int8=int8)
    assert reloaded is not aged and reloaded.version != matrix.version
    assert load_matrix(connection, "m1", reloaded, 3, int8=int8) is reloaded
    lexical = hybrid_search(connection, "ws1", ["cache"], None, None, 5, [None])
    assert [(f.record.content, f.cosine) for f in lexical.found] == [
        ("the cache holds tenants", None)
    ]


def test_vectors_of_a_database_file_replaced_are_not_used_within_the_refresh(
    tmp_path: Path,
) -> None:
    # memory.sqlite3 deleted and made again while orcad runs: the store opens the new file, in
    # which row 1 is another record; the vectors read from the old one are not its vectors
    old = open_database(tmp_path / "memory.sqlite3")
    save(old, 1, "alpha deploys")
    store_vectors(old, "m1", pending(old, "m1", 10), np.stack([unit(1, 0)]))
    cache: list[VectorMatrix | None] = [None]
    first = hybrid_search(old, "ws1", [], unit(1, 0), "m1", 5, cache)
    assert [(f.record.content, round(f.cosine or 0, 3)) for f in first.found] == [
        ("alpha deploys", 1.0)
    ]
    old.close()
    (tmp_path / "memory.sqlite3").unlink()
    new = open_database(tmp_path / "memory.sqlite3")
    try:
        save(new, 1, "beta caches")
        store_vectors(new, "m1", pending(new, "m1", 10), np.stack([unit(0, 1)]))
        matrix = cache[0]
        assert matrix is not None
        cache[0] = not_due(matrix)  # (the case: within the refresh, however long that took)
        found = hybrid_search(new, "ws1", [], unit(1, 0), "m1", 5, cache)
        assert [(f.record.content, round(f.cosine or 0, 3)) for f in found.found] == [
            ("beta caches", 0.0)
        ]
    finally:
        new.close()


@pytest.mark.parametrize("int8", [False, True], ids=["float32", "int8"])
def test_nearest_vectors_come_from_global_and_own_records_however_rows_interleave(
    connection: sqlite3.Connection, int8: bool
) -> None:
    # rows of three workspaces and global records written in turn; each workspace's search
    # multiplies only its own and the global rows, and finds its lexical matches' cosines
    workspaces = ["ws1", "ws2", None, "ws3"]
    for n in range(1, 41):
        save(connection, n, f"note {n} about topic{n}", workspace=workspaces[n % 4])
    rows = pending(connection, "m1", 100)
    angle = {row: 0.02 * row for row, _content in rows}
    vectors = np.stack([unit(np.cos(angle[row]), np.sin(angle[row]), 0) for row, _c in rows])
    store_vectors(connection, "m1", rows, vectors)
    cache: list[VectorMatrix | None] = [None]
    for workspace in ("ws1", "ws2", "ws3", "ws-none"):
        visible = {n for n in range(1, 41) if workspaces[n % 4] in (workspace, None)}
        # the prompt points at row 40's angle: the nearest rows the workspace may see come back
        found = hybrid_search(
            connection,
            workspace,
            ["topic7"],
            unit(np.cos(0.8), np.sin(0.8), 0),
            "m1",
            3,
            cache,
            nearest=4,
            int8=int8,
        )
        ids = [int(f.record.id.removeprefix("mem_"), 16) for f in found.found]
        assert set(ids) <= visible | {7}
        nearest = sorted(visible, key=lambda n: abs(0.02 * n - 0.8))[:4]
        assert set(nearest) <= set(ids)
        cosines = {i: f.cosine for i, f in zip(ids, found.found, strict=True)}
        if 7 in visible:  # the lexical match, with its own cosine
            # (int8 rows: within their precision, orcad.deliberate.row_products)
            assert cosines[7] == pytest.approx(
                float(np.cos(0.8 - 0.14)), abs=5e-3 if int8 else 1e-3
            )
        else:
            assert 7 not in cosines


def test_a_row_number_reused_by_another_workspace_within_the_refresh_is_not_shown(
    connection: sqlite3.Connection,
) -> None:
    # the vectors in memory are kept up to VECTOR_MATRIX_REFRESH_S; meanwhile ws1 forgets its
    # newest record and ws2 saves one, which SQLite gives the same row number
    embed_two(connection)
    cache: list[VectorMatrix | None] = [None]
    hybrid_search(connection, "ws1", [], unit(0, 1), "m1", 5, cache)  # loads the matrix
    cache[0] = not_due(cache[0])  # and keeps it, however long what follows takes
    delete_record(connection, f"mem_{2:032x}")
    save(connection, 99, "another workspace's plan", workspace="ws2")
    reused = connection.execute("SELECT row_id FROM memories WHERE content LIKE 'another%'")
    assert reused.fetchone()[0] == 2  # (the case this test is about)
    found = hybrid_search(connection, "ws1", ["plan"], unit(0, 1), "m1", 5, cache)
    assert [f.record.content for f in found.found] == ["alpha deploys"]


@pytest.mark.parametrize("int8", [False, True], ids=["float32", "int8"])
def test_a_lexical_match_on_a_row_number_another_workspace_held_gets_no_cosine_of_it(
    connection: sqlite3.Connection, int8: bool
) -> None:
    # within the refresh, ws2 forgets its newest record and ws1 saves one that SQLite gives the
    # same row number: in the matrix still in memory that row is ws2's vector, not ws1's text
    save(connection, 1, "alpha deploys")
    save(connection, 2, "another workspace's plan", workspace="ws2")
    store_vectors(
        connection, "m1", pending(connection, "m1", 10), np.stack([unit(1, 0), unit(0, 1)])
    )
    cache: list[VectorMatrix | None] = [None]
    hybrid_search(connection, "ws1", [], unit(0, 1), "m1", 5, cache, int8=int8)  # loads it
    cache[0] = not_due(cache[0])  # and keeps it, however long what follows takes
    delete_record(connection, f"mem_{2:032x}")
    save(connection, 3, "gamma plan")
    reused = connection.execute("SELECT row_id FROM memories WHERE content = 'gamma plan'")
    assert reused.fetchone()[0] == 2  # (the case this test is about)
    found = hybrid_search(connection, "ws1", ["plan"], unit(1, 0), "m1", 5, cache, int8=int8)
    cosines = {f.record.content: f.cosine for f in found.found}
    assert cosines["gamma plan"] is None  # ranked on its words until it has its own vector
    assert cosines["alpha deploys"] == pytest.approx(0.0, abs=1e-2)


def test_the_records_of_a_search_are_read_by_row_id_whatever_the_workspace_holds(
    connection: sqlite3.Connection,
) -> None:
    """SQLite answered the visibility test with the workspace's index, reading every record
    of the workspace (1.5 ms a recall at 10k records) instead of the few row ids asked for."""
    with connection:
        for n in range(3000):
            save(connection, n, f"record number {n} about component {n % 97}")
    plan = connection.execute(
        "EXPLAIN QUERY PLAN " + _records_query(24), [*range(1, 25), "ws1"]
    ).fetchall()
    steps = " / ".join(str(row[-1]) for row in plan)
    assert "INTEGER PRIMARY KEY" in steps and "memories_workspace" not in steps, steps
    found = _records(connection, "ws1", [5, 17, 2999])
    assert sorted(record.content for record in found.values()) == [
        "record number 16 about component 16",
        "record number 2998 about component 88",
        "record number 4 about component 4",
    ]
    assert _records(connection, "ws2", [5, 17]) == {}  # still only what the workspace may see


def test_vectors_read_a_slice_at_a_time_load_as_when_read_whole(
    connection: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspaces = ["ws1", "ws2", None, "ws3"]
    for n in range(1, 41):
        save(connection, n, f"note {n} about topic{n}", workspace=workspaces[n % 4])
    rows = pending(connection, "m1", 100)
    vectors = np.stack([unit(1, 0.01 * row, 0) for row, _content in rows])
    vectors[5, 1] = np.nan  # damaged: left out wherever its slice falls
    store_vectors(connection, "m1", rows, vectors)
    query = unit(1, 0.2, 0.1)
    for int8 in (False, True):
        whole = load_matrix(connection, "m1", None, 3, int8=int8)
        with monkeypatch.context() as patched:
            patched.setattr(vectors_module, "VECTOR_READ_ROWS", 3)
            sliced = load_matrix(connection, "m1", None, 3, int8=int8)
        assert len(whole.row_ids) == 39 and rows[5][0] not in whole.row_ids.tolist()
        assert whole.spans == sliced.spans and len(whole.spans) == 4
        for field in ("row_ids", "by_row_id", "sorted_row_ids"):
            assert np.array_equal(getattr(whole, field), getattr(sliced, field)), field
        every = list(whole.spans.values())  # the four workspaces' spans: every row
        scores = whole.products.scores(query, every)
        assert np.array_equal(scores, sliced.products.scores(query, every))
        expected = np.stack([unit(1, 0.01 * row, 0) for row in whole.row_ids.tolist()]) @ query
        assert np.allclose(scores, expected, atol=5e-3 if int8 else 1e-3)


def test_rows_onnxruntime_refuses_to_multiply_as_int8_are_multiplied_by_numpy(
    connection: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    embed_two(connection)

    def refused(*_args: object) -> None:
        raise RuntimeError("no kernel for this")

    monkeypatch.setattr(vectors_module, "SpannedInt8Rows", refused)
    cache: list[VectorMatrix | None] = [None]
    found = hybrid_search(connection, "ws1", [], unit(0, 1), "m1", 5, cache, int8=True)
    cosines = {f.record.content: f.cosine for f in found.found}
    assert cosines == {
        "alpha deploys": pytest.approx(1.0, abs=1e-2),  # (rows are embedded newest first)
        "beta caches": pytest.approx(0.0, abs=1e-2),
    }
    matrix = cache[0]
    assert matrix is not None and isinstance(matrix.products, FloatRows)
    assert load_matrix(connection, "m1", matrix, 2, int8=True) is matrix  # kept, not retried


@pytest.mark.parametrize("int8", [False, True], ids=["float32", "int8"])
def test_a_row_number_reused_in_the_same_workspace_does_not_take_the_forgotten_vector(
    connection: sqlite3.Connection, int8: bool
) -> None:
    # within the refresh, ws1 forgets its newest record and saves another, which SQLite gives
    # the same row number: the matrix in memory still holds the forgotten one's vector there
    embed_two(connection)
    cache: list[VectorMatrix | None] = [None]
    hybrid_search(connection, "ws1", [], unit(0, 1), "m1", 5, cache, int8=int8)  # loads it
    cache[0] = not_due(cache[0])  # and keeps it, however long what follows takes
    delete_record(connection, f"mem_{2:032x}")
    save(connection, 3, "gamma plan")
    reused = connection.execute("SELECT row_id FROM memories WHERE content = 'gamma plan'")
    assert reused.fetchone()[0] == 2  # (the case this test is about)
    found = hybrid_search(connection, "ws1", [], unit(0, 1), "m1", 5, cache, int8=int8)
    cosines = {f.record.content: f.cosine for f in found.found}
    assert "gamma plan" not in cosines  # not a nearest record by beta's vector
    assert cosines["alpha deploys"] == pytest.approx(1.0, abs=5e-3)  # (embed_two: its vector)
    found = hybrid_search(connection, "ws1", ["plan"], unit(0, 1), "m1", 5, cache, int8=int8)
    cosines = {f.record.content: f.cosine for f in found.found}
    assert cosines["gamma plan"] is None  # found by its word, no vector yet


def test_an_edited_record_does_not_rank_by_its_old_text_within_the_refresh(
    connection: sqlite3.Connection,
) -> None:
    embed_two(connection)
    cache: list[VectorMatrix | None] = [None]
    hybrid_search(connection, "ws1", [], unit(1, 0), "m1", 5, cache)  # loads the matrix
    cache[0] = not_due(cache[0])
    update_record(connection, f"mem_{1:032x}", "alpha now builds with bazel", "fact", 9.0)
    found = hybrid_search(connection, "ws1", ["bazel"], unit(1, 0), "m1", 5, cache)
    cosines = {f.record.content: f.cosine for f in found.found}
    assert cosines == {"alpha now builds with bazel": None, "beta caches": pytest.approx(1.0)}
