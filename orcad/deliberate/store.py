"""The deliberate-memory database (`memory.sqlite3`): schema, migrations, records, search, grants.

This module is the only one that opens that file. The functions taking a connection are the
SQL; `DeliberateStore` runs them on its SQLite worker thread, never on the event loop, and turns
SQLite failures into StorageError. Row ids stay inside: records are addressed by `mem_` ids.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec

from orcad.errors import StorageError
from orcad.query import (
    FTS5_TOKENIZE,
    POSTINGS_BUDGET,
    derive_query_terms,
    match_expression,
    plan_terms,
)
from orcad.sqlite_worker import SQLiteWorker, connect_private, integrity_problem, truncate_wal
from orcad.storage_faults import fault_reason, is_corruption
from protocol.types import RecordKind

T = TypeVar("T")

RECORD_ID_PREFIX = "mem_"
RECORD_ID_HEX = 32
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


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


def new_record_id() -> str:
    return RECORD_ID_PREFIX + secrets.token_hex(RECORD_ID_HEX // 2)


def is_record_id(text: str) -> bool:
    hex_part = text[len(RECORD_ID_PREFIX) :]
    return (
        text.startswith(RECORD_ID_PREFIX)
        and len(hex_part) == RECORD_ID_HEX
        and all(ch in "0123456789abcdef" for ch in hex_part)
    )


# Each entry moves the schema from version i to i + 1 (PRAGMA user_version); never edit one.
MIGRATIONS: tuple[str, ...] = (
    f"""
    CREATE TABLE memories (
        row_id INTEGER PRIMARY KEY,
        public_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('preference', 'fact', 'workflow', 'decision')),
        content TEXT NOT NULL,
        workspace_id TEXT,
        workspace_root TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE UNIQUE INDEX memories_scope_content ON memories (ifnull(workspace_id, ''), content);
    CREATE INDEX memories_recent ON memories (updated_at);
    CREATE INDEX memories_workspace_recent ON memories (workspace_id, updated_at);
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        content, content = 'memories', content_rowid = 'row_id', tokenize = '{FTS5_TOKENIZE}'
    );
    CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, 'row');
    CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, content) VALUES (new.row_id, new.content);
    END;
    CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, content)
        VALUES ('delete', old.row_id, old.content);
    END;
    CREATE TRIGGER memories_fts_update AFTER UPDATE OF content ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, content)
        VALUES ('delete', old.row_id, old.content);
        INSERT INTO memories_fts (rowid, content) VALUES (new.row_id, new.content);
    END;
    CREATE TABLE record_count (only INTEGER PRIMARY KEY CHECK (only = 1), total INTEGER NOT NULL);
    INSERT INTO record_count (only, total) VALUES (1, 0);
    CREATE TRIGGER record_count_insert AFTER INSERT ON memories BEGIN
        UPDATE record_count SET total = total + 1;
    END;
    CREATE TRIGGER record_count_delete AFTER DELETE ON memories BEGIN
        UPDATE record_count SET total = total - 1;
    END;
    CREATE TABLE workspace_grants (
        workspace_id TEXT PRIMARY KEY,
        workspace_root TEXT NOT NULL,
        granted_at REAL NOT NULL
    );
    """,  # noqa: S608 - only the tokenizer constant is interpolated
)
SCHEMA_VERSION = len(MIGRATIONS)

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


def make_private_parents(path: Path) -> None:
    """Create the missing directories above `path`, each 0700 whatever the umask."""
    missing: list[Path] = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=PRIVATE_DIR_MODE)
            directory.chmod(PRIVATE_DIR_MODE)


def secure_database_files(path: Path) -> None:
    """The database and its -wal and -shm siblings, where they exist, become 0600."""
    for suffix in ("", "-wal", "-shm"):
        sibling = path.with_name(path.name + suffix)
        with contextlib.suppress(FileNotFoundError):
            if sibling.stat().st_mode & 0o777 != PRIVATE_FILE_MODE:
                os.chmod(sibling, PRIVATE_FILE_MODE)


def migrate(connection: sqlite3.Connection) -> int:
    """Bring the schema to SCHEMA_VERSION, one transaction per step; returns the old version."""
    version = int(connection.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise StorageError(
            f"memory database schema {version} is newer than this orcad understands "
            f"({SCHEMA_VERSION}); upgrade orcad"
        )
    for step in range(version, SCHEMA_VERSION):
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[step]):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {step + 1}")
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    return version


def _statements(script: str) -> list[str]:
    """Split a migration into statements (trigger bodies keep their inner semicolons)."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements


def open_database(path: Path) -> sqlite3.Connection:
    make_private_parents(path)
    connection = connect_private(path)
    connection.execute("PRAGMA secure_delete = ON")  # deleted text is zeroed, not left in pages
    migrate(connection)
    secure_database_files(path)
    return connection


# --- queries (each takes the connection; the store runs them off the event loop) --------------


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
    """The MATCH expression for `text`: its terms, planned by selectivity ('' if no terms)."""
    terms = derive_query_terms(text)
    if not terms:
        return ""
    total = record_total(connection)
    if total <= POSTINGS_BUDGET:  # every term is cheap: counting would cost more than it saves
        return match_expression(terms)
    counts = term_document_counts(connection, terms)
    return match_expression(plan_terms(terms, counts, total))


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


def insert_record(connection: sqlite3.Connection, record: StoredRecord) -> StoredRecord:
    try:
        with connection:
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
) -> StoredRecord | None:
    """Set the content and/or kind (None: left as stored, so that a change another session made
    to it meanwhile is not undone); the record as updated, None if it is gone."""
    columns = ["updated_at = :now"]
    columns += ["content = :content"] if content is not None else []
    columns += ["kind = :kind"] if kind is not None else []
    statement = (
        f"UPDATE memories SET {', '.join(columns)} WHERE public_id = :id RETURNING "  # noqa: S608 - constant column names
        "public_id, kind, content, workspace_id, workspace_root, created_at, updated_at"
    )
    try:
        with connection:
            row = connection.execute(
                statement,
                {"id": public_id, "content": content, "kind": kind, "now": now},
            ).fetchone()
    except sqlite3.IntegrityError as exc:
        raise DuplicateRecord(content) from exc
    return record_from_row(row) if row else None


def delete_record(connection: sqlite3.Connection, public_id: str) -> bool:
    with connection:
        cursor = connection.execute("DELETE FROM memories WHERE public_id = ?", (public_id,))
    return cursor.rowcount == 1


def forget_visible_record(
    connection: sqlite3.Connection, workspace_id: str, public_id: str
) -> StoredRecord | None:
    """Delete the record if this workspace can see it; the deleted record, else None."""
    with connection:
        row = connection.execute(
            "DELETE FROM memories WHERE public_id = :id "
            "AND (workspace_id = :workspace OR workspace_id IS NULL) RETURNING "
            "public_id, kind, content, workspace_id, workspace_root, created_at, updated_at",
            {"id": public_id, "workspace": workspace_id},
        ).fetchone()
    return record_from_row(row) if row else None


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


def purge_deleted_text(connection: sqlite3.Connection) -> bool:
    """Leave no copy of deleted text: FTS5 keeps a deleted row's terms in its old segments until
    they merge (optimize merges them all), and the WAL keeps old page images until a checkpoint
    copies it back and truncates it. secure_delete zeroes the pages freed on the way. False when
    another connection's read kept the WAL (see truncate_wal)."""
    with connection:
        connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
    return truncate_wal(connection)


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


# .dump of a damaged table ends in "ROLLBACK; -- due to errors", which would throw away every
# row it did read; it is turned into COMMIT. Then, in a second sqlite3 (the first has not
# loaded the full-text table the dump declares), the schema version is set and the full-text
# index and the record count are rebuilt from the rows that survived.
_DUMP_COMMIT = "sed 's/^ROLLBACK; -- due to errors$/COMMIT;/'"
_AFTER_RESTORE = (
    f"PRAGMA user_version = {SCHEMA_VERSION}; "  # noqa: S608 - the user runs it; a constant
    "INSERT INTO memories_fts (memories_fts) VALUES ('rebuild'); "
    "UPDATE record_count SET total = (SELECT count(*) FROM memories);"
)


def repair_steps(path: Path) -> str:
    """How a user repairs a damaged memory database (quoted by the refusal and by doctor)."""
    damaged = shlex.quote(str(path))
    recovered = shlex.quote(f"{path}.recovered")
    return (
        f"stop orcad; sqlite3 {damaged} .dump | {_DUMP_COMMIT} | sqlite3 {recovered}; "
        f'sqlite3 {recovered} "{_AFTER_RESTORE}"; mv {damaged} '
        f"{shlex.quote(f'{path}.damaged')} (and its -wal and -shm); mv {recovered} {damaged}; "
        "start orcad (rows on the damaged pages may be lost; a backup of the file, restored "
        "the same way, loses nothing newer than it)"
    )


def fence_if_damaged(connection: sqlite3.Connection) -> str | None:
    """quick_check the database; when it is damaged, make the connection read-only, so that no
    caller (the vector backfill, a schema step) can write into a damaged b-tree."""
    problem = integrity_problem(connection)
    if problem is not None:
        connection.execute("PRAGMA query_only = ON")
    return problem


class DeliberateStore:
    """Owns memory.sqlite3; every call runs on its SQLite worker thread.

    The database is checked (`PRAGMA quick_check`) at start and again whenever SQLite reports
    corruption; while it is damaged, changes are refused with -32017 (writing into a damaged
    b-tree can spread the damage) and reads go on, since they may still find what is intact.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._opened_file: tuple[int, int] | None = None  # (device, inode) of the file open
        self._db = SQLiteWorker(self._open, replaced=self._file_replaced)
        self._files_secured_after_write = False
        self.damage: str | None = None  # what quick_check found wrong, until a restart
        self.on_damage: Callable[[str], None] | None = None  # told once, with the message

    def _open(self) -> sqlite3.Connection:
        connection = open_database(self.path)
        status = os.stat(self.path)
        self._opened_file = (status.st_dev, status.st_ino)
        self._files_secured_after_write = False  # a new file gets its -wal and -shm anew
        return connection

    def _file_replaced(self) -> bool:
        """Whether the database was deleted, moved or replaced since it was opened. Deleting
        it removes the memory it held, moving it relocates that memory (spec: One local
        database): calls then go to the file now at the path (a new, empty one if none)."""
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return True
        return (status.st_dev, status.st_ino) != self._opened_file

    def open_blocking(self) -> None:
        """Open, migrate and check now (startup), so that a broken database is reported early.

        An intact database is then purged of deleted text a crash may have left behind."""
        self._db.run_blocking(lambda connection: None)
        self._note_damage(self._db.run_blocking(fence_if_damaged))
        if self.damage is None:
            with contextlib.suppress(sqlite3.Error):  # the next forget purges again
                self._db.run_blocking(purge_deleted_text)

    async def purge_deleted(self) -> bool:
        """Remove the remains of deleted records (see purge_deleted_text); False when the WAL,
        which may still hold some, could not be emptied yet (`truncate_wal` then)."""
        return await self._run(purge_deleted_text, writes=True)

    async def truncate_wal(self) -> bool:
        """Try again, without waiting, to empty a WAL another connection's read kept."""
        return await self._run(lambda connection: truncate_wal(connection, wait=False))

    def _note_damage(self, problem: str | None) -> None:
        if problem is None or self.damage is not None:
            return
        self.damage = problem
        if self.on_damage is not None:
            self.on_damage(self._damage_message())

    def _damage_message(self) -> str:
        return (
            f"memory database {self.path} failed its integrity check ({self.damage}); changes "
            f"are refused until it is repaired, searches may miss records; to repair: "
            f"{repair_steps(self.path)}"
        )

    def _storage_error(self, exc: BaseException) -> StorageError:
        if self.damage is not None and fault_reason(exc) == "read_only":  # fenced: say why
            return StorageError(self._damage_message(), reason="corrupt", path=str(self.path))
        reason = fault_reason(exc)
        extra = {} if reason is None else {"reason": reason}
        return StorageError(f"memory database {self.path}: {exc}", **extra)

    def close(self) -> None:
        self._db.close()

    async def _run(self, work: Callable[[sqlite3.Connection], T], *, writes: bool = False) -> T:
        if writes and self.damage is not None:
            raise StorageError(self._damage_message(), reason="corrupt", path=str(self.path))
        try:
            result = await self._db.run(work)
        except (sqlite3.Error, OSError) as exc:
            if is_corruption(exc):
                problem = await self._db.run(fence_if_damaged)
                self._note_damage(problem or str(exc))
            raise self._storage_error(exc) from exc
        if writes and not self._files_secured_after_write:
            # The -wal and -shm files can first appear with the first write.
            await self._db.run(lambda _connection: secure_database_files(self.path))
            self._files_secured_after_write = True
        return result

    async def search(self, workspace_id: str, text: str, limit: int) -> list[StoredRecord]:
        return await self._run(lambda c: search_records(c, workspace_id, text, limit))

    def search_blocking(self, workspace_id: str, text: str, limit: int) -> list[StoredRecord]:
        """`search` for a caller already in a worker thread (recall joins it to its own work)."""
        try:
            return self._db.run_blocking(lambda c: search_records(c, workspace_id, text, limit))
        except (sqlite3.Error, OSError) as exc:
            if is_corruption(exc):
                self._note_damage(self._db.run_blocking(fence_if_damaged) or str(exc))
            raise self._storage_error(exc) from exc

    def query_blocking(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work(connection)` from a worker thread (recall's vector search and backfill)."""
        try:
            return self._db.run_blocking(work)
        except (sqlite3.Error, OSError) as exc:
            if is_corruption(exc):
                self._note_damage(self._db.run_blocking(fence_if_damaged) or str(exc))
            raise self._storage_error(exc) from exc

    async def query(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(work)

    def updated_times_blocking(self, record_ids: Sequence[str]) -> dict[str, float]:
        """`updated_times` from a thread off the event loop (startup's check of the recall
        snapshots); sqlite3.Error when the database cannot be read."""
        return self._db.run_blocking(lambda c: updated_times(c, record_ids))

    async def recent(self, workspace_id: str, limit: int) -> list[StoredRecord]:
        return await self._run(lambda c: recent_records(c, workspace_id, limit))

    async def visible(self, workspace_id: str, public_id: str) -> StoredRecord | None:
        return await self._run(lambda c: visible_record(c, workspace_id, public_id))

    async def same_content(
        self, scope_workspace_id: str | None, content: str
    ) -> StoredRecord | None:
        return await self._run(lambda c: same_content_record(c, scope_workspace_id, content))

    async def insert(self, record: StoredRecord) -> StoredRecord:
        return await self._run(lambda c: insert_record(c, record), writes=True)

    async def update(
        self, public_id: str, content: str | None, kind: RecordKind | None, now: float
    ) -> StoredRecord | None:
        return await self._run(
            lambda c: update_record(c, public_id, content, kind, now), writes=True
        )

    async def delete(self, public_id: str) -> bool:
        return await self._run(lambda c: delete_record(c, public_id), writes=True)

    async def forget_visible(self, workspace_id: str, public_id: str) -> StoredRecord | None:
        return await self._run(
            lambda c: forget_visible_record(c, workspace_id, public_id), writes=True
        )

    async def list_grants(self) -> list[tuple[str, str, float]]:
        return await self._run(list_grants)

    async def revoke_grant(self, workspace_id: str) -> bool:
        return await self._run(lambda c: revoke_grant(c, workspace_id), writes=True)

    async def has_workspace_grant(self, workspace_id: str) -> bool:
        return await self._run(lambda c: has_workspace_grant(c, workspace_id))

    async def add_workspace_grant(self, workspace_id: str, workspace_root: str, now: float) -> None:
        await self._run(
            lambda c: add_workspace_grant(c, workspace_id, workspace_root, now), writes=True
        )
