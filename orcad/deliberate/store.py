"""The deliberate-memory database (`memory.sqlite3`) as the daemon uses it.

`DeliberateStore` is the only opener of that file (through orcad.deliberate.schema); it runs the
SQL of orcad.deliberate.queries on its SQLite worker thread, never on the event loop, and turns
SQLite failures into StorageError. Row ids stay inside: records are addressed by `mem_` ids.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import structlog
import trio

from orcad.deliberate.corrections import link_written
from orcad.deliberate.queries import (
    StoredRecord,
    add_workspace_grant,
    delete_record,
    forget_visible_record,
    has_workspace_grant,
    insert_record,
    list_grants,
    purge_deleted_text,
    recent_records,
    revoke_grant,
    same_content_record,
    search_records,
    update_record,
    updated_times,
    visible_record,
)
from orcad.deliberate.schema import (
    check_and_heal,
    open_database,
    repair_steps,
    secure_database_files,
)
from orcad.errors import StorageError
from orcad.sqlite_worker import SQLiteWorker, irregular_sibling, truncate_wal
from orcad.storage_faults import (
    advice,
    database_fault_reason,
    fault_reason,
    fault_text,
    is_corruption,
    may_be_a_stale_view,
)
from protocol.types import RecordKind

log = structlog.get_logger("orcad.deliberate")

T = TypeVar("T")


class DeliberateStore:
    """Owns memory.sqlite3; every call runs on its SQLite worker thread.

    The database is checked (`PRAGMA quick_check`) at start and again whenever SQLite reports
    corruption; while it is damaged, changes are refused with -32017 (writing into a damaged
    b-tree can spread the damage) and reads go on, since they may still find what is intact.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._opened_file: tuple[int, int] | None = None  # (device, inode) of the file open
        self._emptied = False  # the file open was found emptied in place: made again at open
        self._db = SQLiteWorker(self._open, replaced=self._file_replaced)
        self._files_secured_after_write = False
        self.damage: str | None = None  # what quick_check found wrong, until a restart
        self.on_damage: Callable[[str], None] | None = None  # told once, with the message
        # told when the full-text index could not be read and was made again from the rows
        self.on_index_rebuilt: Callable[[str], None] | None = None
        # told when the connection was opened again after an I/O error or damage, with why
        self.on_reopened: Callable[[str], None] | None = None
        # the error a call reopened the connection for, told once the call is settled: when
        # the full-text index was at fault, and made again, there is nothing to tell
        self._reopened_for: sqlite3.Error | None = None

    def _open(self) -> sqlite3.Connection:
        if self._emptied:
            # emptied in place (`: > memory.sqlite3`): closing the connection open on it
            # checkpointed its WAL into it, pages of the records that went, and a WAL left
            # beside it would be read into the new database: both are dropped
            self._emptied = False
            with contextlib.suppress(FileNotFoundError):
                os.truncate(self.path, 0)
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.path}{suffix}")
        connection = open_database(self.path)
        status = os.stat(self.path)
        self._opened_file = (status.st_dev, status.st_ino)
        self._files_secured_after_write = False  # a new file gets its -wal and -shm anew
        return connection

    def _file_replaced(self) -> bool:
        """Whether the database was deleted, moved or replaced since it was opened. Deleting
        it removes the memory it held, moving it relocates that memory (spec: One local
        database): calls then go to the file now at the path (a new, empty one if none).
        Emptying it in place (`: > file`) removes that memory too; the connection open on it
        would only find it "not a database" (in WAL mode a database once opened is never
        empty)."""
        try:
            status = os.stat(self.path)
        except OSError:
            return self._opened_file is not None
        identity = (status.st_dev, status.st_ino)
        self._emptied = identity == self._opened_file and status.st_size == 0
        return identity != self._opened_file or self._emptied

    def file_identity(self) -> tuple[int, int] | None:
        """(device, inode) of the database file at the path now, None if there is none or it
        cannot be reached (a link that loops, a directory on the way that cannot be read): one
        other than a caller saw before means the database was deleted, moved or replaced, and
        opening what is there now says what is wrong."""
        try:
            status = os.stat(self.path)
        except OSError:
            return None
        return (status.st_dev, status.st_ino)

    async def open_current_file(self) -> None:
        """Open the file now at the path (a new, empty one if there is none), if not yet."""
        await self._run(lambda _connection: None)

    def open_blocking(self) -> None:
        """Open, migrate and check now (startup), so that a broken database is reported early.

        An intact database is then purged of deleted text a crash may have left behind."""
        odd = self._irregular_sibling_error() or self._blocked_directory_error()
        if odd is not None:
            raise odd
        self._db.run_blocking(lambda connection: None)
        problem, rebuilt = self._db.run_blocking(lambda c: check_and_heal(c, thorough=False))
        self._note_rebuilt(rebuilt)
        self._note_damage(problem)
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

    def _healed_blocking(self, exc: BaseException) -> bool:
        """After SQLite reported damage: True when the pages were sound and the full-text index
        was made again (the call can be made once more); otherwise the damage is noted."""
        outcome: tuple[str | None, str] = (None, "")
        if self.damage is None:
            try:
                outcome = self._db.run_blocking(lambda c: check_and_heal(c, thorough=True))
            except (sqlite3.Error, OSError):  # the check itself could not run: the report stands
                pass
        return self._settle(exc, outcome)

    async def _healed(self, exc: BaseException) -> bool:
        """`_healed_blocking` from the event loop."""
        outcome: tuple[str | None, str] = (None, "")
        if self.damage is None:
            try:
                outcome = await self._db.run(lambda c: check_and_heal(c, thorough=True))
            except (sqlite3.Error, OSError):
                pass
        return self._settle(exc, outcome)

    def _settle(self, exc: BaseException, outcome: tuple[str | None, str]) -> bool:
        problem, rebuilt = outcome
        if rebuilt:
            self._note_rebuilt(rebuilt)
            return True
        self._note_damage(problem or fault_text(exc))
        return False

    def _note_rebuilt(self, problem: str) -> None:
        if not problem:
            return
        log.warning("memory_db.index_rebuilt", path=str(self.path), problem=problem)
        if self.on_index_rebuilt is not None:
            self.on_index_rebuilt(
                f"memory database {self.path}: its full-text index could not be read "
                f"({problem}) while its pages were sound; orcad made the index again from the "
                "records, and nothing was lost"
            )

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

    def _irregular_sibling_error(self) -> StorageError | None:
        """The -wal or -shm beside the database that is no regular file, named with what to
        do: SQLite only says "disk I/O error" about it, which sends the user to the disk."""
        sibling = irregular_sibling(self.path)
        if sibling is None:
            return None
        aside = shlex.quote(f"{sibling}.not-a-database")
        return StorageError(
            f"{sibling} is not a regular file (a FIFO, a device or a directory), so SQLite cannot "
            f"keep memory database {self.path}'s changes there: stop orcad, move it aside if it "
            f"is still there (mv {shlex.quote(str(sibling))} {aside}) and start orcad again",
            reason="corrupt",
            path=str(sibling),
        )

    def _blocked_directory_error(self) -> StorageError | None:
        """The file that stands where the database's directory (or one above it) should be,
        named with what to do: making the directory only says "File exists" about it."""
        directory = self.path.parent
        while not os.path.lexists(directory) and directory != directory.parent:
            directory = directory.parent
        if directory.is_dir() or not directory.exists():  # a link leading nowhere: said on open
            return None
        return StorageError(
            f"{directory} is not a directory, so memory database {self.path} cannot be kept "
            "there: move that file aside, or set ORCA_CONFIG_DIR to a directory",
            reason="corrupt",
            path=str(directory),
        )

    def _storage_error(self, exc: BaseException) -> StorageError:
        odd = self._irregular_sibling_error() or self._blocked_directory_error()
        if odd is not None:
            return odd
        if self.damage is not None and fault_reason(exc) in ("read_only", "corrupt"):
            # fenced, or a read that met the damage: say what is wrong and how to repair it
            return StorageError(self._damage_message(), reason="corrupt", path=str(self.path))
        reason = database_fault_reason(exc, str(self.path))
        if reason is not None and reason != fault_reason(exc):
            # a file size limit or an immutable file behind SQLite's I/O error: what to do,
            # which SQLite's error does not lead to
            return StorageError(
                f"memory database {self.path}: {exc}; {advice(reason)}", reason=reason
            )
        extra = {} if reason is None else {"reason": reason}
        return StorageError(f"memory database {self.path}: {fault_text(exc)}", **extra)

    def close(self) -> None:
        self._db.close()

    async def _run(self, work: Callable[[sqlite3.Connection], T], *, writes: bool = False) -> T:
        if writes and self.damage is not None:
            raise StorageError(self._damage_message(), reason="corrupt", path=str(self.path))
        try:
            try:
                result = await self._run_reopening(work, again=not writes)
            except (sqlite3.Error, OSError) as exc:
                # a change that met a damaged index was rolled back with its statement
                if not is_corruption(exc) or not await self._healed(exc):
                    raise
                self._reopened_for = None
                result = await self._db.run(work)
        except (sqlite3.Error, OSError) as exc:
            if is_corruption(exc):
                await self._healed(exc)
            # off the event loop: after an I/O error it asks a child process about the file
            raise await trio.to_thread.run_sync(self._storage_error, exc) from exc
        finally:
            self._tell_reopened()
        if writes and not self._files_secured_after_write:
            # The -wal and -shm files can first appear with the first write.
            await self._db.run(lambda _connection: secure_database_files(self.path))
            self._files_secured_after_write = True
        return result

    async def _run_reopening(self, work: Callable[[sqlite3.Connection], T], *, again: bool) -> T:
        """`work`; after an I/O error or damage, on a new connection (see may_be_a_stale_view)
        made once more when `again`. A write is not made again: its commit may have reached
        the file before the error, and the next call has the new connection anyway."""
        try:
            return await self._db.run(work)
        except sqlite3.Error as exc:
            if not self._may_be_stale(exc):
                raise
            await self._db.reopen()
            self._note_reopened(exc)
            if not again:
                raise
        return await self._db.run(work)

    def _run_reopening_blocking(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`_run_reopening` of a read, from a thread off the event loop."""
        try:
            return self._db.run_blocking(work)
        except sqlite3.Error as exc:
            if not self._may_be_stale(exc):
                raise
            self._db.close()
            self._note_reopened(exc)
        return self._db.run_blocking(work)

    def _may_be_stale(self, exc: sqlite3.Error) -> bool:
        # a -wal or -shm that is no regular file fails the same way, and is named instead:
        # closing the connection would remove a -wal FIFO, and with it what to name
        return may_be_a_stale_view(exc) and irregular_sibling(self.path) is None

    def _note_reopened(self, exc: sqlite3.Error) -> None:
        self._reopened_for = exc

    def _tell_reopened(self) -> None:
        exc, self._reopened_for = self._reopened_for, None
        if exc is None:
            return
        error = fault_text(exc)
        log.warning("memory_db.reopened", path=str(self.path), error=error)
        if self.on_reopened is not None:
            self.on_reopened(
                f"memory database {self.path}: {error} on the connection orcad had open; it was "
                "opened again. Once a new connection finds it sound, its -wal was cut short or "
                "its -shm written over while orcad ran (a copy or restore of those files): "
                "changes in the part cut off are lost. Leave the -wal and -shm alone while "
                "orcad runs"
            )

    async def search(self, workspace_id: str, text: str, limit: int) -> list[StoredRecord]:
        return await self._run(lambda c: search_records(c, workspace_id, text, limit))

    def search_blocking(self, workspace_id: str, text: str, limit: int) -> list[StoredRecord]:
        """`search` for a caller already in a worker thread (recall joins it to its own work)."""
        return self.query_blocking(lambda c: search_records(c, workspace_id, text, limit))

    def query_blocking(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work(connection)` from a worker thread (recall's vector search and backfill)."""
        try:
            try:
                return self._run_reopening_blocking(work)
            except (sqlite3.Error, OSError) as exc:
                if not is_corruption(exc) or not self._healed_blocking(exc):
                    raise
                self._reopened_for = None
                return self._db.run_blocking(work)
        except (sqlite3.Error, OSError) as exc:
            if is_corruption(exc):
                self._healed_blocking(exc)
            raise self._storage_error(exc) from exc
        finally:
            self._tell_reopened()

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
        def insert(connection: sqlite3.Connection) -> StoredRecord:
            inserted = insert_record(connection, record)
            link_written(connection, inserted.id)
            return inserted

        return await self._run(insert, writes=True)

    async def update(
        self,
        public_id: str,
        content: str | None,
        kind: RecordKind | None,
        now: float,
        *,
        expected: tuple[str, RecordKind] | None = None,
    ) -> StoredRecord | None:
        def update(connection: sqlite3.Connection) -> StoredRecord | None:
            updated = update_record(connection, public_id, content, kind, now, expected=expected)
            if updated is not None and content is not None:  # its pairs went with its old text
                link_written(connection, public_id)
            return updated

        return await self._run(update, writes=True)

    async def delete(self, public_id: str) -> bool:
        return await self._run(lambda c: delete_record(c, public_id), writes=True)

    async def forget_visible(
        self, workspace_id: str, public_id: str, *, expected: tuple[str, RecordKind] | None = None
    ) -> StoredRecord | None:
        return await self._run(
            lambda c: forget_visible_record(c, workspace_id, public_id, expected=expected),
            writes=True,
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
