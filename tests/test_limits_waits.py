"""The waits named in orcad/limits.py are the ones SQLite connections actually use."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from orcad import limits
from orcad.capture import projections
from orcad.sqlite_worker import connect_private

pytestmark = pytest.mark.inprocess


def test_a_store_connection_waits_the_named_busy_timeout(tmp_path: Path) -> None:
    connection = connect_private(tmp_path / "store.sqlite3")
    try:
        (value,) = connection.execute("PRAGMA busy_timeout").fetchone()
        assert value == limits.SQLITE_BUSY_TIMEOUT_MS
    finally:
        connection.close()


def test_an_index_reader_waits_the_named_busy_timeout_then_gives_up(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x)")
    writer.execute("BEGIN EXCLUSIVE")  # no reader gets in while this is held
    reader = projections._open_read_only(path)
    try:
        (value,) = reader.execute("PRAGMA busy_timeout").fetchone()
        assert value == limits.INDEX_BUSY_TIMEOUT_MS
        released = threading.Timer(limits.INDEX_BUSY_TIMEOUT_MS / 4000, writer.rollback)
        started = time.monotonic()
        released.start()
        assert reader.execute("SELECT count(*) FROM t").fetchone() == (0,)  # waited, then read
        assert time.monotonic() - started < limits.INDEX_BUSY_TIMEOUT_MS / 1000
    finally:
        reader.close()
        writer.close()
