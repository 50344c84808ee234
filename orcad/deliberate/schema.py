"""Opening the deliberate-memory database (`memory.sqlite3`): its schema and migrations, the
private modes of its files, and what to tell the user when it is damaged.

The daemon opens that file only through orcad.deliberate.store, which calls `open_database`.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sqlite3
from pathlib import Path

from orcad.errors import StorageError
from orcad.query import (
    FTS5_TOKENIZE,
)
from orcad.sqlite_worker import connect_private, integrity_problem
from orcad.storage_faults import is_corruption

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


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


def make_private_parents(path: Path) -> None:
    """Create the missing directories above `path`, each 0700 whatever the umask."""
    missing: list[Path] = []
    parent = path.parent
    while not parent.exists():
        if parent.is_symlink():  # one that leads nowhere: mkdir would only say "File exists"
            raise NotADirectoryError(
                f"{parent} is a symbolic link to {os.readlink(parent)}, which does not exist "
                "(a drive not mounted?) or leads back to the link; create that directory or "
                "remove the link"
            )
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


# .dump of a damaged table ends in "ROLLBACK; -- due to errors", which would throw away every
# row it did read; it is turned into COMMIT. Then, in a second sqlite3 (the first has not
# loaded the full-text table the dump declares), the schema version is set and the full-text
# index and the record count are rebuilt from the rows that survived. The index's own rows are
# replaced by an empty structure first: FTS5 cannot even open a table whose structure record is
# damaged (SQLite 3.40's reads one of over 2000 levels as such), not even to rebuild it.
_DUMP_COMMIT = "sed 's/^ROLLBACK; -- due to errors$/COMMIT;/'"
_EMPTY_FTS_STRUCTURE = "X'00000000000000'"  # cookie 0, then no levels, no segments, no writes
_AFTER_RESTORE = (
    f"PRAGMA user_version = {SCHEMA_VERSION}; "  # noqa: S608 - the user runs it; constants
    "DELETE FROM memories_fts_data; "
    f"INSERT INTO memories_fts_data (id, block) VALUES (10, {_EMPTY_FTS_STRUCTURE}); "
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


def fts_index_problem(connection: sqlite3.Connection, *, thorough: bool) -> str | None:
    """What is wrong with the full-text index, or None when it reads. A search reads its
    structure record (SQLite 3.40's FTS5 finds one of over 2000 levels corrupt); `thorough`
    also checks every segment against the rows, which reads the whole index."""
    try:
        connection.execute(
            "SELECT rowid FROM memories_fts WHERE memories_fts MATCH '\"orcad\"' LIMIT 1"
        ).fetchall()
        if thorough:
            connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as exc:
        if not is_corruption(exc):
            raise
        return str(exc)
    return None


_EMPTY_STRUCTURE_INSERT = (
    f"INSERT INTO memories_fts_data (id, block) VALUES (10, {_EMPTY_FTS_STRUCTURE})"  # noqa: S608 - a constant
)


def rebuild_fts_index(connection: sqlite3.Connection) -> None:
    """Make the full-text index again from the rows of `memories`, in one transaction, and check
    it; raises (and changes nothing) when that fails. It starts from an empty structure record:
    FTS5 cannot rebuild an index whose structure it cannot read."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute("DELETE FROM memories_fts_data")
        connection.execute(_EMPTY_STRUCTURE_INSERT)
        connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")
        problem = fts_index_problem(connection, thorough=True)
        if problem is not None:
            raise sqlite3.DatabaseError(f"the rebuilt full-text index is damaged too: {problem}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def check_and_heal(connection: sqlite3.Connection, *, thorough: bool) -> tuple[str | None, str]:
    """`fence_if_damaged`, then, when the pages are sound, the full-text index checked and, if
    it cannot be read, made again from the rows (it holds nothing else). Returns (the damage
    that stands, or None; what was wrong with the index that was rebuilt, or "")."""
    problem = fence_if_damaged(connection)
    if problem is not None:
        return problem, ""  # never rebuilt over damaged pages: the rows may be what is lost
    index_problem = fts_index_problem(connection, thorough=thorough)
    if index_problem is None:
        return None, ""
    try:
        rebuild_fts_index(connection)
    except sqlite3.Error as exc:
        connection.execute("PRAGMA query_only = ON")
        return f"full-text index: {index_problem}; rebuilding it failed: {exc}", ""
    return None, index_problem
