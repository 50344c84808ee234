"""Embedding vectors of deliberate records, kept beside their rows in memory.sqlite3.

`memory_vectors` holds one vector per record (row_id of `memories`) with the id of the model
that made it. Triggers drop a record's vector when the record is deleted or its content
changes, so a vector never outlives the text it was made from; a record without a vector of the
current model is embedded by recall's background backfill (`pending` / `store_vectors`).
The table is created if missing on first use (no schema version step: nothing else depends on
it, and an older orcad simply ignores it).

Searches keep the vectors of the current model in memory as one matrix, reloaded after a
change to the database (the connection's change counter or SQLite's data_version moved), but
at most once every VECTOR_MATRIX_REFRESH_S: while the backfill writes a batch after batch, a
reload per recall would cost more than the search (about 30 ms at 10k records). A matrix read
through another connection (the file at the path was deleted or replaced, so its row numbers
are other records) is never reused. A matrix kept after a change gives a search its nearest
rows, whose cosines are then read from the database (`_stored_cosines`): a record edited since
has lost its vector, and SQLite gives a forgotten newest record's row number to the next one
saved, which must not rank by the vector the matrix still holds for that number. The records
themselves are always read from the database (a deleted one is not found, and a record without
a vector in the matrix still comes through its words).
Every function takes the connection and runs on the store's SQLite thread.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import structlog

from orcad.deliberate.corrections import newer_partners
from orcad.deliberate.queries import (
    StoredRecord,
    record_from_row,
    record_total,
    term_document_counts,
)
from orcad.deliberate.row_products import FloatRows, RowProducts, SpannedInt8Rows, quantize_rows
from orcad.limits import VECTOR_MATRIX_REFRESH_S
from orcad.query import match_expression, most_selective, plan_terms

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memory_vectors (row_id INTEGER PRIMARY KEY, "
    "model TEXT NOT NULL, vector BLOB NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS memory_vectors_on_delete AFTER DELETE ON memories BEGIN "
    "DELETE FROM memory_vectors WHERE row_id = old.row_id; END",
    "CREATE TRIGGER IF NOT EXISTS memory_vectors_on_update AFTER UPDATE OF content ON memories "
    "BEGIN DELETE FROM memory_vectors WHERE row_id = old.row_id; END",
)
_COLUMNS = (
    "m.public_id, m.kind, m.content, m.workspace_id, m.workspace_root, m.created_at, m.updated_at"
)
VECTOR_DTYPE = np.float16  # half the bytes; cosine ranks are unchanged at this precision
VECTOR_BYTES = np.dtype(VECTOR_DTYPE).itemsize  # per dimension
VECTOR_READ_ROWS = 1024  # vectors read from the database at a time
log = structlog.get_logger("orcad.deliberate.vectors")


VECTOR_COLUMNS = "row_id,model,vector"
# one statement, as it runs at every recall: the schema's objects, and the vectors' columns
_SCHEMA_STATE = (
    "SELECT (SELECT count(*) FROM sqlite_master WHERE name IN "
    "('memory_vectors', 'memory_vectors_on_delete', 'memory_vectors_on_update')), "
    "(SELECT group_concat(name, ',') FROM pragma_table_info('memory_vectors'))"
)


def ensure_schema(connection: sqlite3.Connection) -> None:
    """The vectors' table and the triggers that drop a record's vector with it. A table of
    other columns (edited by hand, or by another program) is made again, empty: it only holds
    what the background embedding writes again."""
    found, columns = connection.execute(_SCHEMA_STATE).fetchone()
    if found == len(SCHEMA) and columns == VECTOR_COLUMNS:
        return
    with connection:
        if columns not in (None, VECTOR_COLUMNS):
            log.warning("memory_vectors.remade", columns=columns)
            connection.execute("DROP TABLE memory_vectors")
        for statement in SCHEMA:
            connection.execute(statement)


def pending(
    connection: sqlite3.Connection,
    model: str,
    limit: int,
    dims: int = 0,
    skip: Collection[bytes] = (),
) -> list[tuple[int, str]]:
    """Up to `limit` records without a vector of `model` (one `dims` wide, when `dims` is
    known), newest first, leaving out those whose content's `text_digest` is in `skip`:
    (row_id, content)."""
    ensure_schema(connection)
    rows = connection.execute(
        "SELECT m.row_id, m.content FROM memories AS m LEFT JOIN memory_vectors AS v "
        "ON v.row_id = m.row_id AND v.model = ? AND (? = 0 OR length(v.vector) = ?) "
        "WHERE v.row_id IS NULL ORDER BY m.row_id DESC LIMIT ?",
        (model, dims, dims * VECTOR_BYTES, limit + len(skip)),
    ).fetchall()
    kept = [
        (int(row_id), str(content))
        for row_id, content in rows
        if not skip or text_digest(content) not in skip
    ]
    return kept[:limit]


def text_digest(text: str) -> bytes:
    """What is kept of a record's text to know it again (`pending`'s skip): its sha256, so no
    copy of a text outlives its record."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def progress(connection: sqlite3.Connection, model: str, dims: int = 0) -> tuple[int, int]:
    """(records with a vector of `model`, `dims` wide when known; records without one)."""
    ensure_schema(connection)
    embedded = connection.execute(
        "SELECT count(*) FROM memory_vectors WHERE model = ? AND (? = 0 OR length(vector) = ?)",
        (model, dims, dims * VECTOR_BYTES),
    ).fetchone()[0]
    return int(embedded), record_total(connection) - int(embedded)


def store_vectors(
    connection: sqlite3.Connection,
    model: str,
    rows: Sequence[tuple[int, str]],
    vectors: npt.NDArray[np.float32],
) -> int:
    """Store each row's vector unless its content changed since it was read; how many stored."""
    ensure_schema(connection)
    stored = 0
    with connection:
        for (row_id, content), vector in zip(rows, vectors, strict=True):
            cursor = connection.execute(
                "INSERT OR REPLACE INTO memory_vectors (row_id, model, vector) "
                "SELECT ?, ?, ? WHERE EXISTS "
                "(SELECT 1 FROM memories WHERE row_id = ? AND content = ?)",
                (row_id, model, vector.astype(VECTOR_DTYPE).tobytes(), row_id, content),
            )
            stored += cursor.rowcount
    return stored


@dataclass
class VectorMatrix:
    """The vectors of one model as a matrix, global records' rows first and then each
    workspace's together, so that a search multiplies only the rows it may see (two slices)."""

    model: str
    # the connection it was read through: the store opens another when the database file was
    # deleted or replaced, and that file's rows are other records
    connection: sqlite3.Connection
    version: tuple[int, int]
    loaded_at: float  # time.monotonic()
    row_ids: npt.NDArray[np.int64]  # of each row, in the matrix's order
    products: RowProducts  # the rows themselves, as float32 or int8 (orcad.deliberate.row_products)
    int8: bool  # int8 rows were asked for (`products` may still be float32: see load_matrix)
    spans: dict[str | None, tuple[int, int]]  # workspace (None: global) -> its rows [start, end)
    by_row_id: npt.NDArray[np.intp]  # the rows in order of their row ids (for lookups)
    sorted_row_ids: npt.NDArray[np.int64]  # row_ids[by_row_id]

    def visible(self, workspace_id: str) -> list[tuple[int, int]]:
        """The row spans a session of `workspace_id` may see: global records and its own."""
        spans = [self.spans.get(None), self.spans.get(workspace_id)]
        return [span for span in spans if span is not None]

    def index_of(self, row_ids: Sequence[int]) -> list[int | None]:
        """Each row id's row in the matrix, or None when it has no vector here."""
        ordered = self.sorted_row_ids
        at = np.searchsorted(ordered, row_ids).tolist()
        return [
            int(self.by_row_id[i]) if i < len(ordered) and int(ordered[i]) == row_id else None
            for row_id, i in zip(row_ids, at, strict=True)
        ]


def _version(connection: sqlite3.Connection) -> tuple[int, int]:
    data_version = connection.execute("PRAGMA data_version").fetchone()[0]
    return connection.total_changes, int(data_version)


def load_matrix(
    connection: sqlite3.Connection,
    model: str,
    cached: VectorMatrix | None,
    dims: int,
    *,
    int8: bool = False,
) -> VectorMatrix:
    """The vectors of `model` that are `dims` wide and finite, as int8 rows multiplied by
    onnxruntime when `int8` (a model that runs on it), else as float32 rows. Any other vector is
    left out, so its record ranks on its words: one of another width (an endpoint's server that
    answers with another model under the same name, or a damaged row) is embedded again by the
    backfill (`pending`); one holding NaN or inf could only be a damaged row, and stays out."""
    ensure_schema(connection)
    version = _version(connection)
    now = time.monotonic()
    fresh = (
        cached is not None
        and cached.connection is connection
        and (cached.version == version or now - cached.loaded_at < VECTOR_MATRIX_REFRESH_S)
    )
    if (
        cached is not None
        and cached.model == model
        and cached.products.dims == dims
        and cached.int8 == int8
        and fresh
    ):
        return cached
    cursor = connection.execute(
        "SELECT v.row_id, m.workspace_id, v.vector FROM memory_vectors AS v "
        "JOIN memories AS m ON m.row_id = v.row_id WHERE v.model = ? AND length(v.vector) = ? "
        "ORDER BY m.workspace_id IS NOT NULL, m.workspace_id, v.row_id",
        (model, dims * VECTOR_BYTES),
    )
    ids: list[int] = []
    workspaces: list[str | None] = []
    parts: list[npt.NDArray[np.float32]] = [np.zeros((0, dims), dtype=np.float32)]
    codes: list[npt.NDArray[np.int8]] = [np.zeros((0, dims), dtype=np.int8)]
    scales: list[npt.NDArray[np.float32]] = [np.zeros(0, dtype=np.float32)]
    # a slice of rows at a time: 10k rows read whole left 8 MiB of freed Python objects in the
    # C heap, which it keeps (and the float32 rows of an int8 matrix are never all held)
    while rows := cursor.fetchmany(VECTOR_READ_ROWS):
        packed = np.frombuffer(b"".join(r[2] for r in rows), dtype=VECTOR_DTYPE)
        part = packed.reshape(len(rows), dims).astype(np.float32)
        finite = np.flatnonzero(np.isfinite(part).all(axis=1))
        if int8:
            part_codes, part_scale = quantize_rows(part[finite])
            codes.append(part_codes)
            scales.append(part_scale)
        else:
            parts.append(part[finite])
        kept = [rows[index] for index in finite.tolist()]
        ids.extend(row[0] for row in kept)
        workspaces.extend(row[1] for row in kept)
        del rows, kept, part
    spans: dict[str | None, tuple[int, int]] = {}
    for index, workspace in enumerate(workspaces):
        start = spans.get(workspace, (index, index))[0]
        spans[workspace] = (start, index + 1)
    products: RowProducts
    if int8:
        all_codes, all_scales = np.concatenate(codes), np.concatenate(scales)
        try:
            products = SpannedInt8Rows(all_codes, all_scales, list(spans.values()))
        except Exception as exc:  # onnxruntime refused it: the same rows, multiplied by numpy
            log.warning("recall.int8_products_unavailable", error=f"{type(exc).__name__}: {exc}")
            products = FloatRows(all_codes.astype(np.float32) * all_scales[:, None])
        del all_codes, all_scales
    else:
        products = FloatRows(np.concatenate(parts))
    del parts, codes, scales
    row_ids = np.array(ids, dtype=np.int64)
    by_row_id = np.argsort(row_ids, kind="stable").astype(np.intp)
    return VectorMatrix(
        model=model,
        connection=connection,
        version=version,
        loaded_at=now,
        row_ids=row_ids,
        products=products,
        int8=int8,
        spans=spans,
        by_row_id=by_row_id,
        sorted_row_ids=row_ids[by_row_id],
    )


@dataclass(frozen=True)
class Found:
    """A visible record found for a prompt, with what ranking needs to know of it."""

    record: StoredRecord
    cosine: float | None  # None: no vector of the current model yet
    # found only as a later record correcting one found (orcad.deliberate.corrections), to be
    # ranked beside it however far from the prompt
    correction: bool = False


@dataclass(frozen=True)
class HybridResult:
    found: list[Found]
    terms: list[str]  # the query terms used (the most selective of the prompt's)
    frequency: dict[str, int]  # records containing each term (counted up to a cap)
    total: int  # records in the store


def _records_query(count: int) -> str:
    """Records by row id, visible to a workspace. The `+` keeps SQLite from answering the
    workspace test with its index: it chose that index (every record of the workspace, 1.5 ms
    at 10k) over the row ids (0.03 ms)."""
    marks = ",".join("?" * count)
    return (
        f"SELECT m.row_id, {_COLUMNS} FROM memories AS m WHERE m.row_id IN ({marks}) "  # noqa: S608 - placeholders only
        "AND (+m.workspace_id = ? OR +m.workspace_id IS NULL)"
    )


def _records(
    connection: sqlite3.Connection, workspace_id: str, row_ids: Sequence[int]
) -> dict[int, StoredRecord]:
    """The records of `row_ids` that a session of `workspace_id` may see. The vectors in memory
    may be up to VECTOR_MATRIX_REFRESH_S old, and SQLite gives a deleted newest row's number to
    the next record, which may be another workspace's: visibility is checked here, on the
    records themselves."""
    if not row_ids:
        return {}
    rows = connection.execute(_records_query(len(row_ids)), [*row_ids, workspace_id]).fetchall()
    return {int(row[0]): record_from_row(row[1:]) for row in rows}


def _stored_cosines(
    connection: sqlite3.Connection,
    model: str,
    query_vector: npt.NDArray[np.float32],
    row_ids: Sequence[int],
) -> dict[int, float]:
    """The cosines of the rows of `row_ids` that hold a vector of `model` now, read from the
    database. For a matrix kept in memory after the database changed (VECTOR_MATRIX_REFRESH_S):
    a record edited since lost its vector, and a row number freed by a forget may have been
    given to a record saved since; neither may rank by the vector the matrix still holds."""
    if not row_ids:
        return {}
    marks = ",".join("?" * len(row_ids))
    rows = connection.execute(
        f"SELECT row_id, vector FROM memory_vectors WHERE model = ? AND length(vector) = ? "  # noqa: S608 - placeholders only
        f"AND row_id IN ({marks})",
        [model, len(query_vector) * VECTOR_BYTES, *row_ids],
    ).fetchall()
    cosines: dict[int, float] = {}
    for row_id, blob in rows:
        vector = np.frombuffer(blob, dtype=VECTOR_DTYPE).astype(np.float32)
        if np.isfinite(vector).all():
            cosines[int(row_id)] = float(vector @ query_vector)
    return cosines


def hybrid_search(  # noqa: PLR0917 - one search's inputs
    connection: sqlite3.Connection,
    workspace_id: str,
    terms: Sequence[str],
    query_vector: npt.NDArray[np.float32] | None,
    model: str | None,
    limit: int,
    cache: list[VectorMatrix | None],
    nearest: int | None = None,
    *,
    int8: bool = False,
) -> HybridResult:
    """The union of at most `limit` best lexical matches and `nearest` (default `limit`)
    nearest vectors among visible records, with the term counts ranking needs. `cache[0]`
    holds the matrix between calls (`int8`: as for `load_matrix`)."""
    nearest = limit if nearest is None else nearest
    total = record_total(connection)
    counts = term_document_counts(connection, list(terms)) if terms else {}
    chosen = most_selective(terms, counts)
    row_ids: list[int] = []
    if chosen:
        planned = plan_terms(chosen, counts, total)
        expression = match_expression(planned)
        if expression:
            row_ids = [
                int(row_id)
                for (row_id,) in connection.execute(
                    "SELECT m.row_id FROM memories_fts JOIN memories AS m "
                    "ON m.row_id = memories_fts.rowid WHERE memories_fts MATCH ? "
                    "AND (m.workspace_id = ? OR m.workspace_id IS NULL) "
                    "ORDER BY bm25(memories_fts), m.updated_at DESC LIMIT ?",
                    (expression, workspace_id, limit),
                )
            ]
    cosines: dict[int, float] = {}
    partners: list[int] = []
    if query_vector is not None and model is not None:
        matrix = load_matrix(connection, model, cache[0], len(query_vector), int8=int8)
        cache[0] = matrix
        spans = matrix.visible(workspace_id)
        if spans:
            every = matrix.products.scores(query_vector, spans)  # read only inside `spans`
            rows = np.concatenate([np.arange(a, b) for a, b in spans])
            scores = every[rows]
            best = np.argpartition(-scores, min(nearest, len(scores) - 1))[:nearest]
            cosines = dict(
                zip(matrix.row_ids[rows[best]].tolist(), scores[best].tolist(), strict=True)
            )
            stale = matrix.version != _version(connection)
            if stale:  # of these rows, only those still holding a vector, and with its cosine
                cosines = _stored_cosines(connection, model, query_vector, list(cosines))
            lexical = [r for r in row_ids if r not in cosines]
            row_ids += [r for r in cosines if r not in row_ids]
            # and the later records correcting any of these: a correction comes along with
            # what it corrects, to rank above it (orcad.deliberate.corrections)
            partners = newer_partners(connection, row_ids, workspace_id)
            row_ids += partners
            # the lexical matches' and the partners' own cosines, where they have a vector in
            # a visible span (a row number reused within the refresh may sit in another
            # workspace's)
            looked_up = lexical + partners
            if stale:
                cosines |= _stored_cosines(connection, model, query_vector, looked_up)
            else:
                for row_id, index in zip(looked_up, matrix.index_of(looked_up), strict=True):
                    if index is not None and any(a <= index < b for a, b in spans):
                        cosines[row_id] = float(every[index])
    records = _records(connection, workspace_id, row_ids)
    found = [
        Found(records[row_id], cosines.get(row_id), row_id in partners)
        for row_id in row_ids
        if row_id in records
    ]
    return HybridResult(found, list(chosen), counts, total)
