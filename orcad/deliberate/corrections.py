"""Which deliberate records correct which, kept beside them in memory.sqlite3, so that
recall brings a correction along with the record it corrects.

Recall ranks a newer near-duplicate just above the older one (orcad.recall.rank), but only when
both are among the records it fetched: the nearest vectors and the best lexical matches. In a
large store a correction may be a little farther from the prompt than what it corrects and miss
that cut; the older one is then shown alone ("how wide may a source file be" got the line
length of 100, not the later 120, under the static model at 1,128 records). So when a record
is written, the records it corrects and those that correct it (`orcad.recall.rank.corrects`)
are looked for among the records the same sessions see, and each pair is kept as two row
numbers (`memory_corrections`); recall adds the newest correction of each record it fetched
(`newer_partners`), when it has a model (without one it ranks by words, and lifts nothing).

Records written before this table existed, or by an orcad without it, are looked at by recall's
background pass (`link_unchecked`); `memory_corrections_checked` says which have been. Triggers
drop a record's pairs and its mark when it is deleted or its content changes (the writer that
changed it links it again), and when a new record takes a number that had some (rows lost to
damage leave theirs behind). Like the vectors, the tables are created if missing (no schema
version step: an older orcad ignores them, and its deletions still clear them through the
triggers). They hold row numbers only, never text.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence

import structlog

from orcad.deliberate.queries import term_document_counts
from orcad.query import derive_query_terms, match_expression, plan_terms
from orcad.recall.rank import corrects

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memory_corrections (older INTEGER NOT NULL, "
    "newer INTEGER NOT NULL, PRIMARY KEY (older, newer)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS memory_corrections_newer ON memory_corrections (newer)",
    "CREATE TABLE IF NOT EXISTS memory_corrections_checked (row_id INTEGER PRIMARY KEY)",
    "CREATE TRIGGER IF NOT EXISTS memory_corrections_on_delete AFTER DELETE ON memories BEGIN "
    "DELETE FROM memory_corrections WHERE older = old.row_id OR newer = old.row_id; "
    "DELETE FROM memory_corrections_checked WHERE row_id = old.row_id; END",
    "CREATE TRIGGER IF NOT EXISTS memory_corrections_on_update AFTER UPDATE OF content ON memories "
    "BEGIN DELETE FROM memory_corrections WHERE older = old.row_id OR newer = old.row_id; "
    "DELETE FROM memory_corrections_checked WHERE row_id = old.row_id; END",
    # a new record may take the number of one that went without its trigger (rows lost to
    # damage, then the README's dump and restore): it inherits none of that one's pairs
    "CREATE TRIGGER IF NOT EXISTS memory_corrections_on_insert AFTER INSERT ON memories BEGIN "
    "DELETE FROM memory_corrections WHERE older = new.row_id OR newer = new.row_id; "
    "DELETE FROM memory_corrections_checked WHERE row_id = new.row_id; END",
)
_NAMES = (
    "memory_corrections",
    "memory_corrections_newer",
    "memory_corrections_checked",
    "memory_corrections_on_delete",
    "memory_corrections_on_update",
    "memory_corrections_on_insert",
)
# records looked at per record linked: its best lexical matches among those the same sessions
# see (a near-duplicate shares most of its words, so it is among the first)
LOOKED_AT = 16
# corrections of one record read by recall, the last written (row numbers grow with writes)
PARTNERS_READ = 8
_VISIBLE_MATCHES = (
    "SELECT m.row_id, m.content, m.updated_at FROM memories_fts JOIN memories AS m "
    "ON m.row_id = memories_fts.rowid WHERE memories_fts MATCH ? AND m.row_id != ? "
    "AND (? IS NULL OR m.workspace_id IS NULL OR m.workspace_id = ?) "
    "ORDER BY bm25(memories_fts) LIMIT ?"
)
log = structlog.get_logger("orcad.deliberate.corrections")


def has_schema(connection: sqlite3.Connection) -> bool:
    marks = ",".join("?" * len(_NAMES))
    found = connection.execute(
        f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})",  # noqa: S608 - placeholders only
        _NAMES,
    ).fetchone()[0]
    return int(found) == len(_NAMES)


def ensure_schema(connection: sqlite3.Connection) -> None:
    """Create the tables and triggers that are missing (inside the caller's transaction)."""
    if not has_schema(connection):
        for statement in SCHEMA:
            connection.execute(statement)


@contextlib.contextmanager
def _transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (the store's connection commits each statement on its own)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def link(connection: sqlite3.Connection, row_id: int) -> int:
    """Look for the records that record `row_id` corrects or that correct it among the records
    the same sessions see (its workspace's and the global ones; every record for a global one),
    keep each pair, older first, and mark the record looked at; how many pairs it has (0 when
    the record is gone). Runs inside the caller's transaction, after `ensure_schema`."""
    row = connection.execute(
        "SELECT content, workspace_id, updated_at FROM memories WHERE row_id = ?", (row_id,)
    ).fetchone()
    if row is None:
        return 0
    content, workspace_id, updated_at = str(row[0]), row[1], float(row[2])
    terms = derive_query_terms(content)
    counts = term_document_counts(connection, terms) if terms else {}
    total = int(connection.execute("SELECT total FROM record_count").fetchone()[0])
    expression = match_expression(plan_terms(terms, counts, total))
    pairs: list[tuple[int, int]] = []
    if expression:
        for other, text, other_updated_at in connection.execute(
            _VISIBLE_MATCHES, (expression, row_id, workspace_id, workspace_id, LOOKED_AT)
        ):
            newer = (float(other_updated_at), int(other)) > (updated_at, row_id)
            if newer and corrects(str(text), content):
                pairs.append((row_id, int(other)))
            elif not newer and corrects(content, str(text)):
                pairs.append((int(other), row_id))
    connection.executemany(
        "INSERT OR IGNORE INTO memory_corrections (older, newer) VALUES (?, ?)", pairs
    )
    connection.execute(
        "INSERT OR IGNORE INTO memory_corrections_checked (row_id) VALUES (?)", (row_id,)
    )
    return len(pairs)


def link_written(connection: sqlite3.Connection, public_id: str) -> None:
    """Link a record just written. Its write is committed already, so a failure here is only
    logged: the record stays unmarked, and the background pass links it later."""
    try:
        with _transaction(connection):
            ensure_schema(connection)
            row = connection.execute(
                "SELECT row_id FROM memories WHERE public_id = ?", (public_id,)
            ).fetchone()
            if row is not None:
                link(connection, int(row[0]))
    except sqlite3.Error as exc:
        log.warning(
            "memory.corrections_unlinked", id=public_id, error=f"{type(exc).__name__}: {exc}"
        )


def link_unchecked(connection: sqlite3.Connection, limit: int) -> int:
    """Link up to `limit` records never looked at, newest first, in one transaction; how many
    were."""
    if not has_schema(connection):
        with _transaction(connection):
            ensure_schema(connection)
    rows = connection.execute(
        "SELECT m.row_id FROM memories AS m LEFT JOIN memory_corrections_checked AS c "
        "ON c.row_id = m.row_id WHERE c.row_id IS NULL ORDER BY m.row_id DESC LIMIT ?",
        (limit,),
    ).fetchall()
    if rows:
        with _transaction(connection):
            for (row_id,) in rows:
                link(connection, int(row_id))
    return len(rows)


def unchecked_count(connection: sqlite3.Connection) -> int:
    """How many records were never looked at (all of them before the tables exist)."""
    if not has_schema(connection):
        return int(connection.execute("SELECT total FROM record_count").fetchone()[0])
    return int(
        connection.execute(
            "SELECT count(*) FROM memories AS m LEFT JOIN memory_corrections_checked AS c "
            "ON c.row_id = m.row_id WHERE c.row_id IS NULL"
        ).fetchone()[0]
    )


def newer_partners(
    connection: sqlite3.Connection, row_ids: Sequence[int], workspace_id: str
) -> list[int]:
    """For each record of `row_ids`, the newest record correcting it that a session of
    `workspace_id` may see, when it is not among them (none when the table is missing: nothing
    was paired yet). One a record, however many correct it: records cut from one template with
    a number changed ("nightly build 1041 passed") each correct all the older ones. And it is
    looked for among the PARTNERS_READ corrections of it written last, so that such a record
    costs what any other does."""
    if not row_ids or not has_schema(connection):
        return []
    rows = connection.execute(
        _newer_partners_query(len(row_ids)), [workspace_id, PARTNERS_READ, *row_ids]
    ).fetchall()
    given = set(row_ids)
    found = (int(newer) for (newer,) in rows if newer is not None)
    return list(dict.fromkeys(newer for newer in found if newer not in given))


def _newer_partners_query(count: int) -> str:
    """The newest visible correction of each of `count` records (parameters: the workspace, how
    many corrections of a record to read, the records), one row each (NULL: none). The `+`
    keeps the workspace test off its index, as vectors._records does."""
    fetched = ",".join(f"(?{n})" for n in range(3, count + 3))
    return (
        f"WITH fetched(older) AS (VALUES {fetched}) "  # noqa: S608 - placeholders only
        "SELECT (SELECT n.row_id FROM (SELECT newer FROM memory_corrections "
        "WHERE older = f.older ORDER BY newer DESC LIMIT ?2) AS c "
        "JOIN memories AS n ON n.row_id = c.newer "
        "WHERE n.updated_at > (SELECT updated_at FROM memories WHERE row_id = f.older) "
        "AND (+n.workspace_id = ?1 OR +n.workspace_id IS NULL) "
        "ORDER BY n.updated_at DESC LIMIT 1) FROM fetched AS f"
    )
