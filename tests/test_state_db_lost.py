"""The daemon state database deleted, or another file put in its place, while orcad runs: the
epochs handed out before must stay fenced, across the next start too."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from tests.harness import DaemonProcess, OrcaEnv
from tests.test_faults import recent, remote_error, start, workdir

pytestmark = pytest.mark.crash

SESSION = "ses_" + "4" * 32


def hold_epoch_three(daemon: DaemonProcess, cwd: str) -> int:
    """Open SESSION three times, as an agent resuming it would; the epoch its holder has."""
    for _ in range(3):
        held = daemon.call("session.open", {"cwd": cwd, "session_id": SESSION})
    assert held.epoch == 3
    return int(held.epoch)


def assert_fenced_after_a_restart(daemon: DaemonProcess, cwd: str, held: int) -> None:
    daemon.restart()
    reopened = daemon.call("session.open", {"cwd": cwd, "session_id": SESSION})
    assert reopened.epoch > held, reopened
    stale = remote_error(daemon, "session.close", {"session_id": SESSION, "epoch": held})
    assert stale.code == -32010, stale


def test_a_state_database_deleted_while_running_keeps_old_epochs_fenced(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    held = hold_epoch_three(daemon, cwd)
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    state_db.unlink()  # `rm daemon-state.sqlite3`; its -wal and -shm stay behind
    other = daemon.call("session.open", {"cwd": cwd})
    assert other.epoch > time.time() - 120  # above any the lost file could hold
    assert state_db.exists()
    with sqlite3.connect(state_db) as connection:
        rows = connection.execute("SELECT session_id FROM sessions").fetchall()
    assert rows == [(other.session_id,)]  # kept in the file at the path, not in the deleted one
    [message] = recent(daemon, "state_db_recreated")
    assert str(state_db) in message and "deleted" in message and "epochs" in message
    assert "is intact" in message and "deleted too" not in message  # the ledgers are there
    assert "Traceback" not in daemon.stderr()
    assert_fenced_after_a_restart(daemon, cwd, held)


@pytest.mark.parametrize("deleted", ["memory_root", "projects"])
def test_a_state_database_deleted_with_the_memory_around_it_is_not_said_to_leave_it_intact(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, deleted: str
) -> None:
    # `rm -rf memory/` (or `rm -rf memory/projects memory/daemon-state.sqlite3`) while orcad
    # runs: the recent error said the ledgers and job files were intact, which they are not
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    daemon.call("session.open", {"cwd": cwd})  # a project: projects/ is there at the next start
    daemon.restart()
    daemon.call("session.open", {"cwd": cwd})
    projects = orca_env.memory_root / "projects"
    assert projects.is_dir()
    gone = orca_env.memory_root if deleted == "memory_root" else projects
    shutil.rmtree(gone)
    (orca_env.memory_root / "daemon-state.sqlite3").unlink(missing_ok=True)
    daemon.call("session.open", {"cwd": cwd})
    [message] = recent(daemon, "state_db_recreated")
    assert "is intact" not in message, message
    assert f"{gone} was deleted too" in message, message
    assert "ledgers" in message and "job files" in message
    assert ("user.md" in message) == (deleted == "memory_root")
    assert f"memory.sqlite3 ({orca_env.config_dir / 'memory.sqlite3'})" in message
    assert "Traceback" not in daemon.stderr()


def test_a_state_database_replaced_by_an_older_copy_while_running_keeps_old_epochs_fenced(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    daemon.call("session.open", {"cwd": cwd, "session_id": SESSION})
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    backup = tmp_path / "backup.sqlite3"
    with sqlite3.connect(state_db) as source, sqlite3.connect(backup) as target:
        source.backup(target)  # a backup taken at epoch 1
    for _ in range(2):
        held = daemon.call("session.open", {"cwd": cwd, "session_id": SESSION}).epoch
    assert held == 3
    shutil.copy(backup, tmp_path / "restored.sqlite3")
    (tmp_path / "restored.sqlite3").replace(state_db)  # restored over the running daemon
    daemon.call("session.open", {"cwd": cwd})
    [message] = recent(daemon, "state_db_recreated")
    assert "another file" in message
    # a sound database is used as it is, its epochs raised; only a damaged one is moved aside
    assert list(orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*")) == []
    assert_fenced_after_a_restart(daemon, cwd, held)


def test_a_state_database_deleted_and_then_made_by_a_recall_is_not_taken_for_damage(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # `rm -rf memory/`: the next recall stores its snapshot in a new file before any session
    # call looks at the sessions' one
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    session = daemon.call("session.open", {"cwd": cwd})
    held = hold_epoch_three(daemon, cwd)
    shutil.rmtree(orca_env.memory_root)
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    daemon.call("recall", {**ids, "turn_id": "t1", "prompt": "how do we deploy"})
    assert daemon.call("session.open", {"cwd": cwd}).epoch > time.time() - 120
    [message] = recent(daemon, "state_db_recreated")
    assert "another file" in message  # what the recall made, used as it is
    assert list(orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*")) == []
    assert "Traceback" not in daemon.stderr()
    daemon.stop()
    (orca_env.memory_root / "orcad.lock").unlink(missing_ok=True)
    daemon = start(orca_env, daemon_factory)
    reopened = daemon.call("session.open", {"cwd": cwd, "session_id": SESSION})
    assert reopened.epoch > held


@pytest.mark.parametrize("checkpointed", [True, False], ids=["wal_empty", "wal_holding_pages"])
def test_a_state_database_emptied_in_place_while_running_is_made_again_at_once(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, checkpointed: bool
) -> None:
    # `: > daemon-state.sqlite3`: the same file, so nothing looks replaced, but the connection
    # open on it finds it damaged from then on, while a new connection finds an empty database.
    # With its last changes still in the WAL, every recall waited 5 s and failed "database is
    # locked" until a restart, which then handed out epoch 1.
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    held = hold_epoch_three(daemon, cwd)
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    if checkpointed:
        with sqlite3.connect(state_db) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        assert (orca_env.memory_root / "daemon-state.sqlite3-wal").stat().st_size > 0
    with state_db.open("r+b") as emptied:
        emptied.truncate(0)
    for turn in range(2):
        started = time.monotonic()
        opened = daemon.call("session.open", {"cwd": cwd})
        assert opened.epoch > time.time() - 120
        ids = {"session_id": opened.session_id, "epoch": opened.epoch}
        daemon.call("recall", {**ids, "turn_id": f"t{turn}", "prompt": "how do we deploy?"})
        assert time.monotonic() - started < 3
    [message] = recent(daemon, "state_db_recreated")
    assert str(state_db) in message and "emptied" in message
    assert "Traceback" not in daemon.stderr()
    assert_fenced_after_a_restart(daemon, cwd, held)


def test_an_older_copy_of_the_state_database_restored_in_place_hands_out_no_old_epoch(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # `cp -a backup/. memory/` over a running daemon: the files keep their inodes, and the
    # database, its WAL and its index are the older ones from then on
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    daemon.call("session.open", {"cwd": cwd, "session_id": SESSION})
    names = ("daemon-state.sqlite3", "daemon-state.sqlite3-wal", "daemon-state.sqlite3-shm")
    copies = {name: (orca_env.memory_root / name).read_bytes() for name in names}
    for _ in range(2):
        held = daemon.call("session.open", {"cwd": cwd, "session_id": SESSION}).epoch
    assert held == 3
    for name, data in copies.items():
        with (orca_env.memory_root / name).open("r+b") as restored:
            restored.write(data)
            restored.truncate()
    reopened = daemon.call("session.open", {"cwd": cwd, "session_id": SESSION})
    assert reopened.epoch > held
    stale = remote_error(daemon, "session.close", {"session_id": SESSION, "epoch": held})
    assert stale.code == -32010, stale


def test_sessions_opened_while_a_deleted_state_database_is_made_again_get_epochs_it_keeps(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # calls that came while the lost file was being replaced went to a new, empty file before
    # its epochs were raised: they were handed epoch 1, while the file kept one above the time
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    wrong: list[tuple[str, int, int | None]] = []
    for _ in range(40):
        daemon.call("session.open", {"cwd": cwd})
        lost_at = time.time()
        state_db.unlink()
        given: list[tuple[str, int]] = []

        def open_one(given: list[tuple[str, int]] = given) -> None:
            with daemon.client() as client:
                opened = client.call("session.open", {"cwd": cwd})
                given.append((opened.session_id, opened.epoch))

        openers = [threading.Thread(target=open_one) for _ in range(16)]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
        assert len(given) == len(openers)
        with sqlite3.connect(state_db) as connection:
            kept = dict(connection.execute("SELECT session_id, epoch FROM sessions").fetchall())
        wrong += [(sid, epoch, kept.get(sid)) for sid, epoch in given if kept.get(sid) != epoch]
        wrong += [(sid, epoch, None) for sid, epoch in given if epoch < lost_at - 120]
    assert wrong == [], wrong[:4]
    assert "Traceback" not in daemon.stderr()
    daemon.stop()


@pytest.mark.parametrize("checkpointed", [True, False], ids=["wal_empty", "wal_holding_pages"])
def test_a_deliberate_database_emptied_in_place_is_a_new_empty_one(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, checkpointed: bool
) -> None:
    # `: > memory.sqlite3` removes its records, as deleting it does; searches answered -32017
    # "file is not a database" until a restart, while doctor found the file sound
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    opened = daemon.call("session.open", {"cwd": cwd, "auto_approve": True})
    ids = {"session_id": opened.session_id, "epoch": opened.epoch}
    save = {"action": "save", "kind": "fact", "is_global": False}
    daemon.call("memory.manage", {**ids, **save, "content": "Deploys go through staging"})
    if checkpointed:
        with sqlite3.connect(orca_env.deliberate_db) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with orca_env.deliberate_db.open("r+b") as emptied:
        emptied.truncate(0)
    assert daemon.call("memory.search", {**ids, "query": "staging"}).records == []
    daemon.call("memory.manage", {**ids, **save, "content": "Releases are cut on Tuesdays"})
    [found] = daemon.call("memory.search", {**ids, "query": "releases"}).records
    assert found.content == "Releases are cut on Tuesdays"
    assert daemon.call("memory.search", {**ids, "query": "staging"}).records == []
    assert "Traceback" not in daemon.stderr()
