"""One SQLite connection served by worker threads, one statement batch at a time.

Every store that owns a database goes through this, so that no SQLite call ever runs on the
trio event loop and no two threads use one connection at once.
"""

from __future__ import annotations

import contextlib
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import trio

from orcad.limits import SQLITE_BUSY_TIMEOUT_MS
from orcad.storage_faults import is_corruption
from orcad.threads import run_sync_now

T = TypeVar("T")


class SQLiteWorker:
    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        replaced: Callable[[], bool] | None = None,
    ) -> None:
        """`replaced`, asked before each call: whether the file the connection has open is no
        longer the one at its path, so that the call is made on a new connection to that one."""
        self._connect = connect
        self._replaced = replaced
        self._connection: sqlite3.Connection | None = None
        self._thread_lock = threading.Lock()
        self._limiter = trio.CapacityLimiter(1)

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work(connection)` in a worker thread; calls are serialised."""
        return await run_sync_now(lambda: self.run_blocking(work), self._limiter)

    def statistics(self) -> trio.CapacityLimiterStatistics:
        """Who holds the connection and how many calls wait for it."""
        return self._limiter.statistics()

    def run_blocking(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """The same, for code already off the event loop (startup, tests, benchmarks)."""
        with self._thread_lock:
            if self._connection is not None and self._replaced is not None and self._replaced():
                self._connection.close()
                self._connection = None
            if self._connection is None:
                self._connection = self._connect()
            return work(self._connection)

    async def reopen(self) -> None:
        """Close the connection, off the event loop; the next call opens a new one."""
        await run_sync_now(self.close, self._limiter)

    def close(self) -> None:
        with self._thread_lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def irregular_sibling(path: Path) -> Path | None:
    """The database's -wal or -shm file when it is there but is not a regular file (a FIFO, a
    device, a directory). SQLite opens such a file and fails only once it reads, writes or
    syncs it, as a disk I/O error (or "unable to open"), which names neither the file nor the
    cause; a read-only open of a FIFO may even wait for a writer. Checked without opening it."""
    for suffix in ("-wal", "-shm"):
        sibling = path.with_name(path.name + suffix)
        try:
            mode = sibling.stat().st_mode
        except OSError:  # none there (or a link to nothing: SQLite makes the file anew)
            continue
        if not stat.S_ISREG(mode):
            return sibling
    return None


def connect_private(path: Path, *, wal: bool = True) -> sqlite3.Connection:
    """Open (creating) a database whose files are private to the user."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    connection = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    connection.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    if wal:
        connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute("PRAGMA foreign_keys = ON")
    for suffix in ("", "-wal", "-shm"):
        sibling = path.with_name(path.name + suffix)
        if sibling.exists():
            sibling.chmod(0o600)
    return connection


@contextlib.contextmanager
def without_waiting(connection: sqlite3.Connection) -> Iterator[None]:
    """Within it, a lock another connection holds fails at once instead of being waited for
    (a retry that must not hold the connection for the busy timeout)."""
    timeout_ms = int(connection.execute("PRAGMA busy_timeout").fetchone()[0])
    connection.execute("PRAGMA busy_timeout = 0")
    try:
        yield
    finally:
        connection.execute(f"PRAGMA busy_timeout = {timeout_ms}")


def truncate_wal(connection: sqlite3.Connection, *, wait: bool = True) -> bool:
    """Copy the WAL back into the database and empty it, so that no old page image (a deleted
    row's text) stays in it; False when another connection's read still needs the WAL. The
    busy timeout is waited for such a reader to end, unless not `wait` (a retry)."""
    with contextlib.nullcontext() if wait else without_waiting(connection):
        busy, _log, _copied = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return bool(busy == 0)


QUICK_CHECK_ROWS = 5  # problems quoted from PRAGMA quick_check; the first few say enough
INTEGRITY_PROBLEM_MAX_CHARS = 400


def integrity_problem(connection: sqlite3.Connection) -> str | None:
    """What `PRAGMA quick_check` finds wrong with the database, or None when it is sound.

    Only damage is a problem here: a check that cannot run (the database locked by another
    process, its -shm that a full disk cannot hold, a file it may not read) raises, since
    nothing is known of the file's state then."""
    try:
        rows = connection.execute(f"PRAGMA quick_check({QUICK_CHECK_ROWS})").fetchall()
    except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed" ...
        if not is_corruption(exc):
            raise
        return str(exc)
    found = [" ".join(str(row[0]).split()) for row in rows]
    return None if found == ["ok"] else "; ".join(found)[:INTEGRITY_PROBLEM_MAX_CHARS]
