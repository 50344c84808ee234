"""A database's -wal cut short (or its -shm written over) while orcad has it open.

SQLite keeps what it knows of the WAL in the -shm, shared by every connection of one process:
while one stays open, each of them goes on reading frames the cut took and fails with "disk
I/O error" (or finds the file "malformed"), on every call, until orcad restarts. A connection
opened once every one of them is closed finds the file sound, as of its last whole commit.
"""

from __future__ import annotations

import errno
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from orcad.deliberate.queries import StoredRecord, new_record_id
from orcad.deliberate.store import DeliberateStore
from orcad.storage_faults import database_fault_reason
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_faults import doctor, problems, recent, remote_error, start, workdir
from tests.test_state_db_lost import assert_fenced_after_a_restart

pytestmark = pytest.mark.crash

SESSION = "ses_" + "7" * 32


def record(content: str) -> StoredRecord:
    return StoredRecord(
        id=new_record_id(),
        kind="fact",
        content=content,
        workspace_id="w1",
        workspace_root="/src/w1",
        created_at=1.0,
        updated_at=1.0,
    )


def cut_wal(database: Path) -> None:
    """Cut the database's WAL to a third, mid-frame (a copy taken while it was written, a
    restore of one, a file system that lost its tail)."""
    wal = Path(f"{database}-wal")
    size = wal.stat().st_size
    assert size > 3 * 4096, size
    with wal.open("r+b") as cut:
        cut.truncate(size // 3 + 7)


def test_a_memory_database_whose_wal_was_cut_short_is_opened_again_not_failed_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.sqlite3"
    store = DeliberateStore(path)
    reopened: list[str] = []
    store.on_reopened = reopened.append
    store.open_blocking()

    async def save_records() -> None:
        for n in range(40):
            await store.insert(record(f"we deploy service {n} with make " * 8))

    trio.run(save_records)
    store.search_blocking("w1", "deploy service", 8)
    # another connection of the process (recall's search, a backfill) wrote last, so the
    # store's connection must read those pages again, from the WAL
    other = sqlite3.connect(path)
    with other:
        other.execute("UPDATE memories SET updated_at = updated_at + 1")
    cut_wal(path)
    other.close()
    # it failed "disk I/O error" here, and on every call after, until orcad restarted
    found = store.search_blocking("w1", "deploy service", 8)
    assert found
    saved = trio.run(store.insert, record("the release checklist lives in docs/release.md"))
    assert [r.id for r in store.search_blocking("w1", "release checklist", 8)] == [saved.id]
    assert store.damage is None  # sound to a new connection: changes are not refused
    assert len(reopened) == 1 and str(path) in reopened[0], reopened
    assert "disk I/O error" in reopened[0] or "malformed" in reopened[0], reopened
    store.close()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA quick_check").fetchall() == [("ok",)]


def test_a_state_database_whose_wal_was_cut_short_is_opened_again_and_keeps_epochs_fenced(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    for n in range(10):
        params = {**ids, "action": "save", "content": f"we deploy service {n} with make " * 4}
        daemon.call("memory.manage", {**params, "kind": "fact", "is_global": False})
    for n in range(40):  # recall snapshots, written by the state database's other connection
        daemon.call("recall", {**ids, "turn_id": f"t{n}", "prompt": f"how to deploy service {n}"})
    for _ in range(3):
        held = daemon.call("session.open", {"cwd": cwd, "session_id": SESSION}).epoch
    assert held == 3
    time.sleep(1.0)  # the snapshots are written behind, within half a second
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    cut_wal(state_db)
    # it answered "disk I/O error", until the snapshot writer found the file "malformed" too
    # and it was moved aside with every session in it
    opened = daemon.call("session.open", {"cwd": cwd})
    assert opened.epoch > time.time() - 120  # what the cut took may have held epochs
    answer = daemon.call("recall", {**ids, "turn_id": "t1", "prompt": "how to deploy service 1"})
    assert answer.snapshot_id
    [message] = recent(daemon, "database_reopened")
    assert str(state_db) in message and "epochs" in message, message
    assert recent(daemon, "state_db_recreated") == []
    assert list(orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*")) == []
    time.sleep(1.0)  # snapshots written to the file opened again
    assert recent(daemon, "storage") == []
    code, findings = doctor(orca_env)
    assert code == 1
    assert any("database_reopened" in f["detail"] for f in problems(findings, "daemon"))
    assert "Traceback" not in daemon.stderr()
    assert_fenced_after_a_restart(daemon, cwd, held)


def test_a_write_refused_by_an_immutable_file_does_not_reopen_and_searches_keep_answering(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # `chattr +i memory.sqlite3 memory.sqlite3-wal`: the open connection still reads, a new
    # one cannot even open the file; reopening after the refused write failed every search
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    save = {**ids, "action": "save", "kind": "fact", "is_global": False}
    daemon.call("memory.manage", {**save, "content": "the staging database is rebuilt nightly"})
    files = [str(orca_env.deliberate_db), f"{orca_env.deliberate_db}-wal"]
    if subprocess.run(["chattr", "+i", *files], capture_output=True, check=False).returncode:
        pytest.skip("this file system (or user) cannot make a file immutable")
    try:
        refused = remote_error(daemon, "memory.manage", {**save, "content": "deploys on Fridays"})
        assert refused.code == -32017, refused
        # not "disk I/O error; check it (dmesg)": SQLite keeps the EPERM to itself
        assert refused.data.get("reason") == "permission_denied", refused
        assert "chattr -i" in refused.error.message, refused.error.message
        found = daemon.call("memory.search", {**ids, "query": "staging database nightly"})
        assert [r.content for r in found.records] == ["the staging database is rebuilt nightly"]
    finally:
        subprocess.run(["chattr", "-i", *files], check=True)
    assert daemon.call("memory.manage", {**save, "content": "deploys on Fridays"}).outcome == (
        "applied"
    )
    assert recent(daemon, "database_reopened") == []


def test_asking_whether_a_database_is_immutable_keeps_the_locks_this_process_holds_on_it(
    tmp_path: Path,
) -> None:
    # closing any descriptor a process opened on a file drops every POSIX lock it holds there,
    # SQLite's included: another process could then write (or checkpoint) under orcad's lock
    path = tmp_path / "memory.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO t VALUES (1)")
    try:
        assert database_fault_reason(OSError(errno.EIO, "I/O error"), str(path)) == "io_error"
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys\n"
                "c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)\n"
                "c.execute('BEGIN IMMEDIATE')",
                str(path),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert other.returncode != 0, "another process took the write lock this one holds"
        assert "locked" in other.stderr
    finally:
        holder.execute("ROLLBACK")
        holder.close()
