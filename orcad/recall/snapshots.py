"""Recall snapshots: the first recall of a turn fixes what that turn sees.

A provider continuation asks again for the same turn and must get the same entries even if
memory changed meanwhile (spec: Recall). A snapshot belongs to the opening of the session that
took it: it is keyed by session id, epoch, workspace and turn, so a session id opened again (a
new epoch, in another workspace or the same one) never gets a snapshot taken for an earlier
opening, which may hold another workspace's or project's memory.

Snapshots live in a bounded LRU in memory and are written behind, in batches, to the
`recall_snapshots` table of the daemon state database, so a continuation after a daemon restart
still sees its snapshot. The write is off the request path: a snapshot taken in the half second
before a SIGKILL may be lost (that turn then gets a fresh recall); a clean shutdown flushes
everything. The table keeps only the newest snapshots.

Concurrent first recalls of one turn are coalesced: the second waits for the first's result.
"""

from __future__ import annotations

import collections
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import structlog
import trio

from orcad.control_characters import escape_control_characters
from orcad.limits import (
    RECALL_SNAPSHOTS_IN_MEMORY,
    RECALL_SNAPSHOTS_PERSISTED,
    SNAPSHOT_WRITE_DELAY_S,
)
from orcad.recall.snapshot_table import (
    FactHeld,
    SnapshotKey,
    _create_schema,
    _encoder,
    _holds,
    _load_keys,
    _load_result,
    _mark_owed,
    _purge,
    _purge_all,
    _store,
    drop_outdated_records,
    facts_not_held,
    owed_marker,
)
from orcad.sqlite_worker import SQLiteWorker, connect_private, without_waiting
from orcad.storage_faults import may_be_a_stale_view
from protocol.types import RecallResult

log = structlog.get_logger("orcad.recall.snapshots")


# The writer gathers snapshots for this long before one transaction writes them all, so that
# persisting costs one commit per interval rather than one per recall.

# A recall that read memory forgotten meanwhile is taken again this many times at most.
RETAKES_AFTER_PURGE = 2

# how a result's deliberate entry starts, encoded (an automatic entry's id is `cand_`; a text
# holding these characters is encoded with its quotes escaped)
DELIBERATE_ENTRY_NEEDLE = b'{"id":"mem_'


class SnapshotStore:
    """Owns the `recall_snapshots` table; everything else goes through `get_or_take`."""

    def __init__(
        self,
        database_path: Path | None,
        memory_capacity: int = RECALL_SNAPSHOTS_IN_MEMORY,
        persisted_capacity: int = RECALL_SNAPSHOTS_PERSISTED,
        write_delay_s: float = SNAPSHOT_WRITE_DELAY_S,
    ) -> None:
        self._write_delay_s = write_delay_s
        self._memory: collections.OrderedDict[SnapshotKey, RecallResult] = collections.OrderedDict()
        self._memory_capacity = memory_capacity
        self._persisted_capacity = persisted_capacity
        # Keys known to be in the table: only these cost a database read on a memory miss.
        self._persisted_keys: collections.OrderedDict[SnapshotKey, None] = collections.OrderedDict()
        self._keys_loaded = database_path is None
        self._in_flight: dict[SnapshotKey, trio.Event] = {}
        # Purges counted, and the needles of those made while a recall was being taken or a
        # snapshot read from the table: either may hold what they forget, and must not keep it
        # (`get_or_take`, `_lookup`).
        self._purges = 0
        self._purged_while_taking: list[tuple[int, list[bytes]]] = []
        self._reading = 0  # lookups waiting on the table
        # Needles of purges the database refused (its lock held by another process, say): tried
        # again before the table is next read or written; until then nothing holding one is read.
        self._owed: list[bytes] = []
        # A purge's checkpoint another connection's read kept from emptying the WAL, which may
        # still hold the purged rows' old pages: tried again, without waiting, by the writer.
        self._checkpoint_owed = False
        # A file beside the database while a purge is owed: the needles live in memory only,
        # so a daemon that stops owing one empties the table when it next opens it.
        self._marker = None if database_path is None else owed_marker(database_path)
        self._unwritten: list[tuple[SnapshotKey, RecallResult]] = []
        self._wake_writer = trio.Event()
        self._all_written = trio.Event()
        self._all_written.set()
        self._db: SQLiteWorker | None = None
        if database_path is not None:
            marker = owed_marker(database_path)
            self._db = SQLiteWorker(lambda: self._connect(database_path, marker))
        self.on_write_failed: Callable[[str], None] | None = None  # daemon.status hears of it
        self.on_corrupt: Callable[[str], Awaitable[None]] | None = None  # replaces the database

    def _connect(self, path: Path, marker: Path) -> sqlite3.Connection:
        connection = connect_private(path)
        # A snapshot is a cache: losing the last commits on power loss is acceptable.
        connection.execute("PRAGMA synchronous = NORMAL")
        try:
            _create_schema(connection)
            # a purge was still owed when the daemon stopped
            if marker.exists() and not _purge_all(connection, marker):
                self._checkpoint_owed = True  # a reader kept the WAL: the writer retries
        except sqlite3.Error:
            connection.close()
            raise
        return connection

    def statistics(self) -> dict[str, int]:
        return {
            "in_memory": len(self._memory),
            "persisted_keys": len(self._persisted_keys),
            "unwritten": len(self._unwritten),
        }

    async def get_or_take(
        self, key: SnapshotKey, take: Callable[[], Awaitable[RecallResult]]
    ) -> RecallResult:
        """The snapshot of `key`, taking it with `take()` when this is the turn's first recall."""
        while True:
            existing = await self._lookup(key)
            if existing is not None:
                return existing
            running = self._in_flight.get(key)
            if running is None:
                break
            await running.wait()  # then look again: the first caller may have failed
        done = self._in_flight[key] = trio.Event()
        try:
            for _attempt in range(RETAKES_AFTER_PURGE + 1):
                purges_before = self._purges
                result = await take()
                missed = self._purged_since(purges_before)
                if not missed or not _holds(_encoder.encode(result), missed):
                    break
                # memory forgotten while this recall read it: recall again, without it
            else:
                return result  # forgets keep racing it: answered once, never kept
            self._remember(key, result)
            self._unwritten.append((key, result))
            if self._all_written.is_set():
                self._all_written = trio.Event()
            self._wake_writer.set()
            return result
        finally:
            del self._in_flight[key]
            self._forget_purges_seen()
            done.set()

    def _purged_since(self, purges_before: int) -> list[bytes]:
        """The needles of the purges made since `purges_before` was counted."""
        return [
            needle
            for count, needles in self._purged_while_taking
            if count > purges_before
            for needle in needles
        ]

    def _forget_purges_seen(self) -> None:
        if not self._in_flight and not self._reading:
            self._purged_while_taking.clear()

    async def _lookup(self, key: SnapshotKey) -> RecallResult | None:
        found = self._memory.get(key)
        if found is not None:
            self._memory.move_to_end(key)
            return found
        if self._db is None:
            return None
        # a purge made while the row is read may not have deleted it yet (it waits for the
        # same connection): what it forgets must not come back into memory with the row
        purges_before = self._purges
        self._reading += 1
        try:
            stored = await self._read_stored(key)
            missed = self._purged_since(purges_before)
        finally:
            self._reading -= 1
            self._forget_purges_seen()
        if stored is None:
            return None
        if missed and _holds(_encoder.encode(stored), missed):
            return None  # forgotten while it was read: a fresh recall
        if self._owed and _holds(_encoder.encode(stored), self._owed):
            return None  # forgotten, though its purge is still owed: a fresh recall
        self._remember(key, stored)
        return stored

    async def _read_stored(self, key: SnapshotKey) -> RecallResult | None:
        """`key`'s snapshot in the table, if it is there."""
        assert self._db is not None
        try:
            if self._owed:  # without waiting: a recall does not wait on another's lock
                await self._purge_on_disk([], wait=False)
            if not self._keys_loaded:
                keys = await self._db.run(_load_keys)
                if not self._keys_loaded:
                    for loaded in keys:
                        self._persisted_keys[loaded] = None
                    self._keys_loaded = True
            if key not in self._persisted_keys:
                return None
            stored = await self._db.run(lambda connection: _load_result(connection, key))
        except sqlite3.DatabaseError as exc:
            if not may_be_a_stale_view(exc) or self.on_corrupt is None:
                raise
            await self.on_corrupt(str(exc))  # a lost snapshot: this turn gets a fresh recall
            return None
        return stored

    def _remember(self, key: SnapshotKey, result: RecallResult) -> None:
        self._memory[key] = result
        self._memory.move_to_end(key)
        while len(self._memory) > self._memory_capacity:
            self._memory.popitem(last=False)

    async def run_writer(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Background task: write unwritten snapshots in batches until cancelled."""
        task_status.started()
        while True:
            await self._wake_writer.wait()
            await trio.sleep(self._write_delay_s)
            self._wake_writer = trio.Event()
            await self.flush()

    async def wait_all_written(self) -> None:
        """Return once every snapshot taken so far has been written (or given up on)."""
        while not self._all_written.is_set():
            await self._all_written.wait()

    async def flush(self) -> None:
        """Write every unwritten snapshot now (also called at shutdown)."""
        try:
            await self._write_unwritten()
        finally:
            if not self._unwritten:
                self._all_written.set()

    async def _write_unwritten(self) -> None:
        if self._db is not None and (self._owed or self._checkpoint_owed):
            with trio.CancelScope(shield=True):
                await self._purge_on_disk([], wait=False)
        if self._db is None or not self._unwritten:
            self._unwritten.clear()
            return
        batch, self._unwritten = self._unwritten, []
        rows = [(*key, _encoder.encode(result)) for key, result in batch]
        capacity = self._persisted_capacity
        try:
            with trio.CancelScope(shield=True):  # a started batch finishes, even at shutdown
                await self._db.run(lambda connection: _store(connection, rows, capacity))
        except sqlite3.Error as exc:
            log.warning("recall.snapshot_write_failed", error=str(exc), snapshots=len(rows))
            if may_be_a_stale_view(exc) and self.on_corrupt is not None:
                with trio.CancelScope(shield=True):
                    await self.on_corrupt(str(exc))
            elif self.on_write_failed is not None:
                self.on_write_failed(f"recall snapshots not saved: {exc}")
            return
        for key, _result in batch:
            self._persisted_keys[key] = None
            self._persisted_keys.move_to_end(key)
        while len(self._persisted_keys) > capacity:
            self._persisted_keys.popitem(last=False)

    async def purge(self, texts: Sequence[str], ids: Sequence[str] = ()) -> int:
        """Drop every snapshot holding one of `texts` (forgotten memory), or an entry with one
        of `ids` (a deliberate record's, which a snapshot may hold cut to fit: see
        orcad.recall.select.cut_to_fit), in memory and on disk; how many were dropped. The turns
        they fixed get a fresh recall if they ask again. A text is looked for as recall
        answers it too, its control characters escaped."""
        forms = {form for text in texts if text for form in (text, escape_control_characters(text))}
        needles = [_encoder.encode(text)[1:-1] for text in sorted(forms)]
        needles += [_encoder.encode(record_id) for record_id in ids if record_id]  # quoted
        return await self._drop_holding(needles)

    async def purge_deliberate_records(self) -> int:
        """Drop every snapshot holding a deliberate record: the database they were read from
        was deleted, moved or replaced, which takes its records with it (README: Deliberate
        memory), so no turn may be answered them again. How many were dropped."""
        return await self._drop_holding([DELIBERATE_ENTRY_NEEDLE])

    async def drop_facts_not_held(self, fact_held: FactHeld) -> int:
        """Drop every snapshot, in memory and on disk, holding an automatic fact that its
        project no longer holds (`fact_held`, blocking: see orcad.capture.ledger.HeldFacts): a
        project's directory moved aside or deleted while orcad runs took its facts with it
        (README: Deleting a project's memory safely), and no turn may be answered them again.
        The snapshots are looked at before the ledgers are read, so a fact published meanwhile
        is no fact gone. How many were dropped."""
        unwritten = [
            (key, result)
            for key, result in [*self._memory.items(), *self._unwritten]
            if result.automatic
        ]
        gone: set[str] | None = None
        if self._db is not None:
            try:
                if self._owed:
                    await self._purge_on_disk([], wait=False)
                gone = await self._db.run(
                    lambda connection: facts_not_held(connection, fact_held, unwritten)
                )
            except sqlite3.Error as exc:
                log.warning("recall.snapshot_check_failed", error=str(exc))
                if may_be_a_stale_view(exc) and self.on_corrupt is not None:
                    with trio.CancelScope(shield=True):
                        await self.on_corrupt(str(exc))
        if gone is None:  # no database to say whose sessions they are: a snapshot is a cache
            gone = {entry.id for _key, result in unwritten for entry in result.automatic}
        # quoted, as purge looks for an id
        return await self._drop_holding([_encoder.encode(fact_id) for fact_id in sorted(gone)])

    async def _drop_holding(self, needles: list[bytes]) -> int:
        """Drop every snapshot whose encoded result holds one of `needles` (see purge)."""
        if not needles:
            return 0
        self._purges += 1
        if self._in_flight or self._reading:
            self._purged_while_taking.append((self._purges, needles))

        def holds(result: RecallResult) -> bool:
            return _holds(_encoder.encode(result), needles)

        dropped = [key for key, result in self._memory.items() if holds(result)]
        for key in dropped:
            del self._memory[key]
        self._unwritten = [(key, result) for key, result in self._unwritten if not holds(result)]
        if self._db is not None:
            deleted = await self._purge_on_disk(needles)
            dropped.extend(key for key in deleted if key not in dropped)
        if dropped:
            log.info("recall.snapshots_purged", snapshots=len(dropped))
        return len(dropped)

    async def _purge_on_disk(self, needles: list[bytes], *, wait: bool = True) -> list[SnapshotKey]:
        """Delete the table's rows holding a needle, or one still owed; the keys deleted. The
        forget that asked is made by then, so a database that refuses (another process holds
        its lock past the busy timeout, or it fails) does not fail it: the purge is owed, and
        tried again, without waiting (not `wait`), before the table is next used and by the
        writer (see `_owed`)."""
        assert self._db is not None
        wanted = list(dict.fromkeys([*self._owed, *needles]))
        owed = self._checkpoint_owed
        marker = self._marker

        def purge(connection: sqlite3.Connection) -> tuple[list[SnapshotKey], bool]:
            try:
                with contextlib.nullcontext() if wait else without_waiting(connection):
                    purged = _purge(connection, wanted, checkpoint_owed=owed)
            except sqlite3.Error:
                _mark_owed(marker)  # before the forget is answered: a stop does not lose it
                raise
            if marker is not None and wanted:
                marker.unlink(missing_ok=True)
            return purged

        try:
            deleted, truncated = await self._db.run(purge)
        except sqlite3.Error as exc:
            if needles:  # a new purge: its retries are not logged again
                log.warning("recall.snapshot_purge_failed", error=str(exc))
            self._owed = wanted
            self._wake_writer.set()
            if may_be_a_stale_view(exc) and self.on_corrupt is not None:
                with trio.CancelScope(shield=True):
                    await self.on_corrupt(str(exc))
            return []
        self._owed = []
        if not truncated:
            if not self._checkpoint_owed:
                log.warning("recall.snapshot_checkpoint_busy")
            self._wake_writer.set()
        self._checkpoint_owed = not truncated
        for key in deleted:
            self._persisted_keys.pop(key, None)
        return deleted

    def owe_purge_blocking(self) -> None:
        """Mark a purge owed before a change that will ask for one is written (a fact's forget
        writing the ledger): if the daemon dies before that purge, its next start drops every
        snapshot, since which text was forgotten is not known then. The purge removes the mark
        once it is done."""
        _mark_owed(self._marker)

    def drop_outdated_records_blocking(
        self,
        updated_times: Callable[[list[str]], dict[str, float]],
        fact_held: FactHeld | None = None,
    ) -> int:
        """At startup, before recall is served: drop every snapshot on disk that holds a
        deliberate record gone or changed since it was taken (`updated_times`: the records'
        last changes, the missing ones gone), or an automatic fact its project no longer
        holds (`fact_held`: see orcad.capture.ledger.HeldFacts; one that aged out of a full
        ledger is still held, so a restart keeps those snapshots). A forget or update drops
        such snapshots only after it commits, so a crash in between left the old text there,
        to be recalled again by its turn; a project's directory moved aside while orcad was
        stopped (README: Deleting a project's memory safely) took its facts with it. How many
        were dropped."""
        if self._db is None:
            return 0
        try:
            dropped, truncated = self._db.run_blocking(
                lambda connection: drop_outdated_records(connection, updated_times, fact_held)
            )
        except (sqlite3.Error, OSError) as exc:  # the writer's or a recall's first use says
            log.warning("recall.snapshot_check_failed", error=str(exc))
            return 0
        finally:
            self._db.close()  # opened again by its first use, as it would be without the check
        if not truncated:  # a reader kept the WAL: the writer retries
            self._checkpoint_owed = True
        if dropped:
            log.info("recall.outdated_snapshots_dropped", snapshots=dropped)
        return dropped

    def forget_database(self) -> None:
        """Drop the connection (blocking): the state database is being replaced by a new one."""
        if self._db is not None:
            self._db.close()
        self._persisted_keys.clear()
        self._owed = []  # the table they were owed by is gone
        self._checkpoint_owed = False
        self._keys_loaded = self._db is None

    async def aclose(self) -> None:
        await self.flush()
        if self._db is not None:
            self._db.close()
