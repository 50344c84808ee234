"""The SQL of the deliberate-memory database: records (`mem_` ids; row ids stay inside), their
search, and workspace grants. Each function takes a connection and runs on the store's SQLite
worker thread (orcad.deliberate.store), never on the event loop.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence

import msgspec

from orcad.clock import stamp_after
from orcad.limits import QUERY_MAX_TERMS
from orcad.query import (
    POSTINGS_BUDGET,
    distinct_terms,
    match_expression,
    most_selective,
    plan_terms,
)
from orcad.sqlite_worker import truncate_wal
from protocol.types import RecordKind

RECORD_ID_PREFIX = "mem_"
RECORD_ID_HEX = 32


class StoredRecord(msgspec.Struct, frozen=True, kw_only=True):
    id: str  # the public mem_ id
    kind: RecordKind
    content: str
    workspace_id: str | None  # None for a global record
    workspace_root: str  # where it was saved from, kept for global records too
    created_at: float
    updated_at: float

    @property
    def is_global(self) -> bool:
        return self.workspace_id is None


class DuplicateRecord(Exception):
    """The same content already exists in that scope (the unique index said so)."""


class RecordChanged(Exception):
    """The record no longer holds the text and kind a change was approved on; `record` is what
    it holds now."""

    def __init__(self, record: StoredRecord) -> None:
        super().__init__(record.id)
        self.record = record


def new_record_id() -> str:
    return RECORD_ID_PREFIX + secrets.token_hex(RECORD_ID_HEX // 2)


def is_record_id(text: str) -> bool:
    hex_part = text[len(RECORD_ID_PREFIX) :]
    return (
        text.startswith(RECORD_ID_PREFIX)
        and len(hex_part) == RECORD_ID_HEX
        and all(ch in "0123456789abcdef" for ch in hex_part)
    )


_SELECT_RECORDS = (
    "SELECT public_id, kind, content, workspace_id, workspace_root, created_at, updated_at "
    "FROM memories "
)
_VISIBLE = "(workspace_id = :workspace OR workspace_id IS NULL)"
_SEARCH = (
    "SELECT m.public_id, m.kind, m.content, m.workspace_id, m.workspace_root, m.created_at, "
    "m.updated_at FROM memories_fts JOIN memories AS m ON m.row_id = memories_fts.rowid "
    "WHERE memories_fts MATCH :match AND (m.workspace_id = :workspace OR m.workspace_id IS NULL) "
    "ORDER BY bm25(memories_fts), m.updated_at DESC, m.row_id DESC LIMIT :limit"
)
_RECENT = (
    _SELECT_RECORDS + "WHERE " + _VISIBLE + " ORDER BY updated_at DESC, row_id DESC LIMIT :limit"
)
_VISIBLE_BY_ID = _SELECT_RECORDS + "WHERE public_id = :id AND " + _VISIBLE
_BY_ID = _SELECT_RECORDS + "WHERE public_id = :id"
_SAME_CONTENT = _SELECT_RECORDS + "WHERE ifnull(workspace_id, '') = ? AND content = ?"
_INSERT = (
    "INSERT INTO memories (public_id, kind, content, workspace_id, workspace_root, created_at, "
    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def record_from_row(row: Sequence[object]) -> StoredRecord:
    """A record from the columns of `_SELECT_RECORDS`, in that order, checked."""
    public_id, kind, content, workspace_id, root, created, updated = row
    return msgspec.convert(
        {
            "id": public_id,
            "kind": kind,
            "content": content,
            "workspace_id": workspace_id,
            "workspace_root": root,
            "created_at": created,
            "updated_at": updated,
        },
        StoredRecord,
    )


def term_document_counts(
    connection: sqlite3.Connection, terms: list[str], cap: int = POSTINGS_BUDGET + 1
) -> dict[str, int]:
    """How many records contain each term (FTS5 stems it), counted up to `cap`.

    Reading a whole doclist costs as much as the naive query; the planner only needs to know
    whether a term fits the postings budget, so counting stops at `cap`.
    """
    counts: dict[str, int] = {}
    for term in terms:
        row = connection.execute(
            "SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? "
            "LIMIT ?)",
            (match_expression([term]) or '""', cap),
        ).fetchone()
        counts[term] = int(row[0])
    return counts


def record_total(connection: sqlite3.Connection) -> int:
    return int(connection.execute("SELECT total FROM record_count").fetchone()[0])


def planned_match(connection: sqlite3.Connection, text: str) -> str:
    """The MATCH expression for `text`: at most QUERY_MAX_TERMS of its terms, the most
    selective by how many records each matches (as recall chooses them), planned ('' if no
    terms). Chosen by length alone, a short term that matches ("ci") would give way to longer
    ones that match nothing."""
    terms = distinct_terms(text)
    if not terms:
        return ""
    total = record_total(connection)
    if len(terms) <= QUERY_MAX_TERMS and total <= POSTINGS_BUDGET:
        return match_expression(terms)  # all are used, all are cheap: nothing to count
    counts = term_document_counts(connection, terms)
    return match_expression(plan_terms(most_selective(terms, counts), counts, total))


def search_records(
    connection: sqlite3.Connection, workspace_id: str, text: str, limit: int
) -> list[StoredRecord]:
    """Visible records matching `text`, best bm25 first, more recently updated first on ties."""
    expression = planned_match(connection, text)
    if not expression:
        return []
    return search_by_match(connection, workspace_id, expression, limit)


def search_by_match(
    connection: sqlite3.Connection, workspace_id: str, expression: str, limit: int
) -> list[StoredRecord]:
    """Visible records for an FTS5 MATCH `expression` (benchmarks compare plans through this)."""
    rows = connection.execute(
        _SEARCH, {"match": expression, "workspace": workspace_id, "limit": limit}
    )
    return [record_from_row(row) for row in rows]


def recent_records(
    connection: sqlite3.Connection, workspace_id: str, limit: int
) -> list[StoredRecord]:
    rows = connection.execute(
        _RECENT,
        {"workspace": workspace_id, "limit": limit},
    )
    return [record_from_row(row) for row in rows]


def visible_record(
    connection: sqlite3.Connection, workspace_id: str, public_id: str
) -> StoredRecord | None:
    row = connection.execute(
        _VISIBLE_BY_ID,
        {"id": public_id, "workspace": workspace_id},
    ).fetchone()
    return record_from_row(row) if row else None


def same_content_record(
    connection: sqlite3.Connection, scope_workspace_id: str | None, content: str
) -> StoredRecord | None:
    """The record holding exactly `content` in that scope (None = global), if any."""
    row = connection.execute(
        _SAME_CONTENT,
        (scope_workspace_id or "", content),
    ).fetchone()
    return record_from_row(row) if row else None


def _not_before_latest(connection: sqlite3.Connection, now: float) -> float:
    """`now`, or just after the newest `updated_at` stored if `now` is not past it: a record
    written after the wall clock was set back is still the newer one (recall takes the newer of
    two alike records for the correction of the other). Read by the index on `updated_at`."""
    latest = connection.execute("SELECT max(updated_at) FROM memories").fetchone()[0]
    return stamp_after(None if latest is None else float(latest), now)


def insert_record(connection: sqlite3.Connection, record: StoredRecord) -> StoredRecord:
    try:
        with connection:
            stamp = _not_before_latest(connection, record.updated_at)
            if stamp != record.updated_at:
                record = msgspec.structs.replace(record, created_at=stamp, updated_at=stamp)
            connection.execute(
                _INSERT,
                (
                    record.id,
                    record.kind,
                    record.content,
                    record.workspace_id,
                    record.workspace_root,
                    record.created_at,
                    record.updated_at,
                ),
            )
    except sqlite3.IntegrityError as exc:
        raise DuplicateRecord(record.content) from exc
    return record


def update_record(
    connection: sqlite3.Connection,
    public_id: str,
    content: str | None,
    kind: RecordKind | None,
    now: float,
    *,
    expected: tuple[str, RecordKind] | None = None,
) -> StoredRecord | None:
    """Set the content and/or kind (None: left as stored, so that a change another session made
    to it meanwhile is not undone); the record as updated, None if it is gone. With `expected`
    (the text and kind a user approved the change on) only a record still holding them is
    written, in the same statement: RecordChanged otherwise."""
    columns = ["updated_at = :now"]
    columns += ["content = :content"] if content is not None else []
    columns += ["kind = :kind"] if kind is not None else []
    condition, shown = _as_shown(expected)
    statement = (
        f"UPDATE memories SET {', '.join(columns)} WHERE public_id = :id{condition} "  # noqa: S608 - constant column names
        "RETURNING public_id, kind, content, workspace_id, workspace_root, created_at, updated_at"
    )
    try:
        with connection:
            now = _not_before_latest(connection, now)
            row = connection.execute(
                statement,
                {"id": public_id, "content": content, "kind": kind, "now": now, **shown},
            ).fetchone()
    except sqlite3.IntegrityError as exc:
        raise DuplicateRecord(content) from exc
    if row is None and expected is not None:
        _raise_if_changed(connection, _BY_ID, {"id": public_id})
    return record_from_row(row) if row else None


def delete_record(connection: sqlite3.Connection, public_id: str) -> bool:
    with connection:
        cursor = connection.execute("DELETE FROM memories WHERE public_id = ?", (public_id,))
    return cursor.rowcount == 1


def forget_visible_record(
    connection: sqlite3.Connection,
    workspace_id: str,
    public_id: str,
    *,
    expected: tuple[str, RecordKind] | None = None,
) -> StoredRecord | None:
    """Delete the record if this workspace can see it; the deleted record, else None. With
    `expected` (as for update_record) only a record still holding it is deleted: RecordChanged
    otherwise."""
    condition, shown = _as_shown(expected)
    values = {"id": public_id, "workspace": workspace_id}
    with connection:
        row = connection.execute(
            f"DELETE FROM memories WHERE public_id = :id AND {_VISIBLE}{condition} RETURNING "  # noqa: S608 - constant conditions
            "public_id, kind, content, workspace_id, workspace_root, created_at, updated_at",
            {**values, **shown},
        ).fetchone()
    if row is None and expected is not None:
        _raise_if_changed(connection, _VISIBLE_BY_ID, values)
    return record_from_row(row) if row else None


def _as_shown(expected: tuple[str, RecordKind] | None) -> tuple[str, dict[str, str]]:
    """The condition, and its values, that lets a change approved on the record as the user was
    shown it touch only that record as shown (none for a change nobody was asked about)."""
    if expected is None:
        return "", {}
    content, kind = expected
    condition = " AND content = :shown_content AND kind = :shown_kind"
    return condition, {"shown_content": content, "shown_kind": kind}


def _raise_if_changed(connection: sqlite3.Connection, query: str, values: dict[str, str]) -> None:
    """RecordChanged when the record a conditional change left alone is still there: another
    change rewrote it (else it was forgotten, and the caller says so)."""
    row = connection.execute(query, values).fetchone()
    if row is not None:
        raise RecordChanged(record_from_row(row))


UPDATED_TIMES_BATCH = 500  # record ids looked up per statement (SQLite bounds its variables)


def updated_times(connection: sqlite3.Connection, record_ids: Sequence[str]) -> dict[str, float]:
    """When each of `record_ids` was last changed; a record that is gone is left out."""
    times: dict[str, float] = {}
    for start in range(0, len(record_ids), UPDATED_TIMES_BATCH):
        batch = record_ids[start : start + UPDATED_TIMES_BATCH]
        marks = ",".join("?" * len(batch))
        rows = connection.execute(
            f"SELECT public_id, updated_at FROM memories WHERE public_id IN ({marks})",  # noqa: S608 - placeholders only
            batch,
        )
        times.update((str(public_id), float(updated)) for public_id, updated in rows)
    return times


# The FTS5 of older SQLite (3.40, Debian 12's) adds an empty level or two to the index with each
# 'optimize' of an index of several pages, and reads one of more than 2000 levels as corrupt:
# about a thousand purges, and every search failed. Each level costs the index's structure record
# (row 10 of memories_fts_data) two bytes, and an optimized index is one segment, a few tens of
# bytes: past this, the index is rebuilt from the records, which starts it again at a level or
# two. (SQLite 3.51 stops at 64 levels, some 140 bytes: it is never rebuilt there.)
FTS_STRUCTURE_MAX_BYTES = 512


def purge_deleted_text(connection: sqlite3.Connection) -> bool:
    """Leave no copy of deleted text: FTS5 keeps a deleted row's terms in its old segments until
    they merge (optimize merges them all), and the WAL keeps old page images until a checkpoint
    copies it back and truncates it. secure_delete zeroes the pages freed on the way. False when
    another connection's read kept the WAL (see truncate_wal)."""
    with connection:
        connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
        if fts_structure_bytes(connection) > FTS_STRUCTURE_MAX_BYTES:
            connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")
    return truncate_wal(connection)


def fts_structure_bytes(connection: sqlite3.Connection) -> int:
    """The size of the full-text index's structure record, which grows with its levels."""
    row = connection.execute("SELECT length(block) FROM memories_fts_data WHERE id = 10").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


# The global grant is the grant row with no workspace (workspace ids are sha256 hex).
GLOBAL_GRANT_KEY = ""


def list_grants(connection: sqlite3.Connection) -> list[tuple[str, str, float]]:
    """Persisted grants as (workspace_id or GLOBAL_GRANT_KEY, workspace_root, granted_at)."""
    rows = connection.execute(
        "SELECT workspace_id, workspace_root, granted_at FROM workspace_grants "
        "ORDER BY granted_at, workspace_id"
    ).fetchall()
    return [(str(a), str(b), float(c)) for a, b, c in rows]


def revoke_grant(connection: sqlite3.Connection, workspace_id: str) -> bool:
    with connection:
        cursor = connection.execute(
            "DELETE FROM workspace_grants WHERE workspace_id = ?", (workspace_id,)
        )
    return cursor.rowcount == 1


def has_workspace_grant(connection: sqlite3.Connection, workspace_id: str) -> bool:
    row = connection.execute(
        "SELECT 1 FROM workspace_grants WHERE workspace_id = ?", (workspace_id,)
    ).fetchone()
    return row is not None


def add_workspace_grant(
    connection: sqlite3.Connection, workspace_id: str, workspace_root: str, now: float
) -> None:
    with connection:
        connection.execute(
            "INSERT INTO workspace_grants (workspace_id, workspace_root, granted_at) "
            "VALUES (?, ?, ?) ON CONFLICT(workspace_id) DO NOTHING",
            (workspace_id, workspace_root, now),
        )
