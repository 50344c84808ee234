"""Faults that used to happen without anyone being told, each made to happen to a real daemon:
a full disk, damaged databases, a damaged ledger, a truncated job file. Each must show in
daemon.status, in `orcactl status` and in `orcactl doctor` (which never crashes), with a fix."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import filelock
import pytest

from orcactl.commands.doctor_faults import Finding, guarded, judge_daemon_errors
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.capture.ledger import Ledger, Provenance, merge_job_candidates, write_ledger
from orcad.clock import SystemClock
from orcad.config import Config
from orcad.deliberate import queries, schema, store, vectors
from orcad.errors import NotFound, StorageError
from orcad.sessions import SessionStore
from orcad.state_db import move_aside
from protocol.errors import RemoteError
from protocol.types import ExtractedFact, RecentError, SessionOpenParams
from tests.external_worker import wait_for
from tests.faults_helpers import fill_up, small_filesystem, use_up_inodes
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.crash

PAGE = 4096


def orcactl(orca: OrcaEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orcactl", *args],
        env=orca.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def doctor(orca: OrcaEnv) -> tuple[int, list[dict[str, Any]]]:
    """Run doctor; it must always print its JSON report (never a traceback)."""
    result = orcactl(orca, "doctor", "--json", "--min-free-mb", "0")
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] == (result.returncode == 0)
    return result.returncode, report["findings"]


def problems(findings: list[dict[str, Any]], check: str) -> list[dict[str, Any]]:
    return [f for f in findings if f["check"] == check and f["status"] == "problem"]


def remote_error(daemon: DaemonProcess, method: str, params: dict[str, Any]) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        daemon.call(method, params)
    return caught.value


def start(orca: OrcaEnv, factory: list[DaemonProcess], config: str = "") -> DaemonProcess:
    orca.write_config(config)
    process = DaemonProcess(orca)
    factory.append(process)
    return process.start()


def workdir(tmp_path: Path, name: str = "work") -> str:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return os.path.realpath(path)


def recent(daemon: DaemonProcess, kind: str) -> list[str]:
    return [e.message for e in daemon.call("daemon.status").recent_errors if e.kind == kind]


def all_files(orca: OrcaEnv) -> list[Path]:
    return sorted(
        p for root in (orca.home, orca.config_dir) for p in root.rglob("*") if p.is_file()
    )


def write_over_in_place(path: Path, data: bytes) -> None:
    """`path` cut to the length of `data`, then `data` written over it: `write_bytes` empties
    the file first, and a background connection that opens it in that instant finds an empty
    file, a sound new database to SQLite, instead of the damage the test means. (Written over
    at its full length, the connection orcad has open would not notice: it reads from its
    cache while the file's size holds.)"""
    os.truncate(path, len(data))
    with path.open("r+b") as file:
        file.write(data)


def damage_a_page(path: Path, page: int) -> None:
    """Overwrite most of one database page with 0xff bytes (a torn or rotted sector)."""
    data = bytearray(path.read_bytes())
    start_at = page * PAGE + 100
    data[start_at : start_at + 3900] = b"\xff" * 3900
    path.write_bytes(bytes(data))


def leaf_pages(path: Path, table: str) -> list[int]:
    """The 0-based numbers of the b-tree leaf pages that hold `table`'s rows (SQLite's dbstat)."""
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("PRAGMA page_size").fetchone()[0] == PAGE
        rows = connection.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
            (table,),
        ).fetchall()
    except sqlite3.OperationalError as exc:  # SQLite built without dbstat
        pytest.skip(f"this SQLite cannot say which pages hold a table: {exc}")
    finally:
        connection.close()
    return [pageno - 1 for (pageno,) in rows]


def damage_a_record_page(path: Path) -> None:
    """Damage a leaf page of the records table in the middle of the file: rows are certainly
    lost, whatever else (indexes, vectors, FTS) the schema keeps in the file."""
    pages = leaf_pages(path, "memories")
    assert len(pages) > 3, pages
    damage_a_page(path, pages[len(pages) // 2])


def turn(session: Any, turn_id: str, text: str = "remember that we deploy with make") -> dict:
    return {
        "session_id": session.session_id,
        "epoch": session.epoch,
        "turn_id": turn_id,
        "outcome": "succeeded",
        "verifier": "none",
        "transcript_committed": True,
        "messages": [{"role": "user", "content": text}],
    }


# --- disk full ---------------------------------------------------------------------------------


def test_a_full_disk_is_a_storage_error_on_every_path_and_is_recorded(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    with small_filesystem(orca_env.home), small_filesystem(orca_env.config_dir):
        daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
        session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
        ids = {"session_id": session.session_id, "epoch": session.epoch}
        daemon.call("remember", {**ids, "text": "we deploy on Tuesdays", "scope": "project"})
        held = daemon.call("turn.completed", turn(session, "t0")).job_id
        lease = daemon.call("jobs.claim", {"worker": "w", "lease_s": 600}).lease
        before = {p: p.read_bytes() for p in all_files(orca_env)}
        fillers = [fill_up(orca_env.home), fill_up(orca_env.config_dir)]
        facts = "\n".join(
            json.dumps({"category": "project", "fact": f"deploys use make target {n} " * 8})
            for n in range(8)
        )
        publish = {"job_id": held, "token": lease.token, "output": facts, "provider": "t"}
        failing = {
            "session.open": {"cwd": cwd},
            "turn.completed": turn(session, "t1"),
            "memory.manage": {
                **ids,
                "action": "save",
                "content": "the release checklist lives in docs/release.md " * 20,
                "kind": "fact",
                "is_global": True,
            },
            "remember": {**ids, "text": "we deploy on Tuesdays " * 40, "scope": "user"},
            "jobs.publish": {**publish, "model": "m"},
        }
        for method, params in failing.items():
            error = remote_error(daemon, method, params)
            assert (error.code, error.data["kind"]) == (-32017, "storage"), (method, error)
            assert "free" in str(error) or "space" in str(error) or "full" in str(error)
        # recall has nothing to write on its request path: it answers, or says storage
        try:
            daemon.call("recall", {**ids, "turn_id": "t2", "prompt": "how do we deploy"})
        except RemoteError as exc:
            assert exc.code == -32017
        recorded = recent(daemon, "storage")
        for method in failing:
            assert any(message.startswith(f"{method}:") for message in recorded), recorded
        status = orcactl(orca_env, "status")
        assert "storage" in status.stdout and "session.open" in status.stdout
        code, findings = doctor(orca_env)
        assert code == 1
        assert any("session.open" in f["detail"] for f in problems(findings, "daemon"))
        full = [f for f in problems(findings, "daemon") if "storage:" in f["detail"]]
        assert full and all("free disk space" in f["fix"] for f in full), full
        assert daemon.proc is not None and daemon.proc.poll() is None  # still serving
        for filler in fillers:
            filler.unlink()
        # nothing half-written: no temp file left, every file as it was or whole and new
        after = all_files(orca_env)
        assert [p for p in after if p.name.endswith(".tmp") or ".tmp" in p.name] == []
        for path, data in before.items():
            if path.suffix in (".md", ".jsonl", ".json") and path.name != "filler.bin":
                assert path.read_bytes() == data, path
        again = daemon.call("session.open", {"cwd": cwd})  # space is back: it works again
        assert again.epoch == 1
        published = daemon.call("jobs.publish", {**publish, "model": "m"})  # and the held job
        assert published.state == "committed"
        daemon.stop()


def doctor_with(orca: OrcaEnv, min_free_mb: int) -> tuple[int, list[dict[str, Any]], str]:
    """doctor's exit status, its findings (--json) and its text, with `--min-free-mb`."""
    done = orcactl(orca, "doctor", "--json", "--min-free-mb", str(min_free_mb))
    assert "Traceback" not in done.stderr, done.stderr
    text = orcactl(orca, "doctor", "--min-free-mb", str(min_free_mb))
    assert text.returncode == done.returncode
    return done.returncode, json.loads(done.stdout)["findings"], text.stdout


@pytest.mark.parametrize("projects", ["in the memory root", "linked to another disk"])
def test_a_full_disk_orcad_recorded_stops_failing_doctor_once_the_disk_check_finds_room(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, projects: str
) -> None:
    # the daemon's recent errors keep a full disk until orcad restarts: once space was freed as
    # doctor said, doctor beside it went on failing with the recorded fault, although its disk
    # check found room. A full disk the disk check does not look at (projects/ linked to
    # another one) is still reported.
    cwd = workdir(tmp_path)
    linked = projects == "linked to another disk"
    other_disk = tmp_path / "other-disk"
    with contextlib.ExitStack() as mounted:
        for directory in (orca_env.home, orca_env.config_dir, *([other_disk] if linked else [])):
            mounted.enter_context(small_filesystem(directory))
        if linked:
            orca_env.memory_root.mkdir(mode=0o700)
            (other_disk / "projects").mkdir(mode=0o700)
            (orca_env.memory_root / "projects").symlink_to(other_disk / "projects")
        daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
        session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
        ids = {"session_id": session.session_id, "epoch": session.epoch}
        fillers = [fill_up(orca_env.home), fill_up(orca_env.config_dir)]
        if linked:
            fillers.append(fill_up(other_disk))
        failing = {
            "session.open": {"cwd": cwd},  # daemon-state.sqlite3, in the memory root
            "remember": {**ids, "text": "we deploy on Tuesdays " * 40, "scope": "user"},
            "memory.manage": {  # memory.sqlite3, on a file system of its own
                **ids,
                "action": "save",
                "content": "the release checklist lives in docs/release.md " * 20,
                "kind": "fact",
                "is_global": True,
            },
            "turn.completed": turn(session, "t1"),  # a job file, under projects/
        }
        for method, params in failing.items():
            error = remote_error(daemon, method, params)
            assert (error.code, error.data["reason"]) == (-32017, "disk_full"), (method, error)

        def failed(findings: list[dict[str, Any]]) -> list[str]:
            return sorted(
                f["detail"].split(" storage: ")[1].split(":")[0]
                for f in problems(findings, "daemon")
            )

        # full: each is reported, --min-free-mb 0 or not
        for minimum in (0, 1):
            code, findings, _ = doctor_with(orca_env, minimum)
            assert code == 1 and failed(findings) == sorted(failing), findings

        # room again where the disk check looks
        fillers[0].unlink()
        fillers[1].unlink()
        # more asked for than there is: the disk check fails, and the recorded faults stand
        code, findings, _ = doctor_with(orca_env, 100)
        assert code == 1 and failed(findings) == sorted(failing), findings
        assert len(problems(findings, "disk")) == 2, findings
        code, findings, text = doctor_with(orca_env, 1)
        assert problems(findings, "disk") == [], findings
        fail_lines = [line for line in text.splitlines() if line.startswith("[FAIL]")]
        if linked:
            # named by the link: which disk it is on, only the file system says; the disk
            # check does not look there, so its room now says nothing of it
            assert code == 1 and failed(findings) == ["turn.completed"], findings
            assert len(fail_lines) == 1 and "turn.completed" in fail_lines[0], text
            fillers[2].unlink()
            code, findings, _ = doctor_with(orca_env, 1)
            assert code == 1 and failed(findings) == ["turn.completed"], findings
        else:
            assert code == 0, [f for f in findings if f["status"] != "ok"]
            assert fail_lines == [] and text.splitlines()[-1] == "No problems found.", text
            [said] = [f for f in findings if f["check"] == "daemon" and "recorded" in f["detail"]]
            assert (
                "(4 recorded of a full disk, on which the disk check finds room now)"
                in (said["detail"])
            ), said
        # the daemon's record is history, still listed by daemon.status (orcactl status)
        assert len(recent(daemon, "storage")) == 4
        assert daemon.call("session.open", {"cwd": cwd}).epoch == 1  # and it serves again
        daemon.stop()


# --- the daemon state database -----------------------------------------------------------------


def test_a_file_system_out_of_inodes_orcad_recorded_still_fails_doctor(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # "No space left on device" is also what a file system with bytes free but no inode left
    # answers: the free space the disk check measures says nothing of it, so the fault orcad
    # recorded is not left to that check while no file can be made there
    cwd = workdir(tmp_path)
    with small_filesystem(orca_env.home, "64m", inodes=400):
        daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
        session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
        use_up_inodes(orca_env.home)
        error = remote_error(daemon, "turn.completed", turn(session, "t1"))
        assert (error.code, error.data["reason"]) == (-32017, "disk_full"), error
        assert shutil.disk_usage(orca_env.home).free > 32 * 1024 * 1024
        code, findings, text = doctor_with(orca_env, 1)
        said = [f["detail"] for f in problems(findings, "daemon")]
        assert code == 1 and any("No space left on device" in d for d in said), findings
        # and the disk check says why, whether orcad runs or not
        [disk] = problems(findings, "disk")
        assert "no inode left" in disk["detail"] and "df -i" in disk["fix"], disk
        assert "[FAIL]" in text, text
        daemon.stop()
        code, findings, _ = doctor_with(orca_env, 1)
        [disk] = problems(findings, "disk")
        assert code == 1 and "no inode left" in disk["detail"], findings


def test_a_damaged_state_database_is_moved_aside_and_recreated_at_start(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    for number in range(300):  # several pages of sessions
        daemon.call("session.open", {"cwd": cwd, "session_id": f"ses_{number:032x}"})
    daemon.stop()
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    pages = state_db.stat().st_size // PAGE
    damage_a_page(state_db, pages // 2)
    damaged_bytes = state_db.read_bytes()

    daemon = start(orca_env, daemon_factory)
    opened = daemon.call("session.open", {"cwd": cwd, "session_id": "ses_" + "0" * 32})
    # the epochs went with the damaged file (that is said); new ones start above any it held,
    # so a process still holding epoch 1 of this session is fenced, not matched
    assert opened.epoch > time.time() - 120
    stale = remote_error(daemon, "session.close", {"session_id": "ses_" + "0" * 32, "epoch": 1})
    assert stale.code == -32010
    copies = sorted(orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*"))
    assert [c for c in copies if not c.name.endswith(("-wal", "-shm"))], copies
    assert copies[0].read_bytes() == damaged_bytes  # kept as found, for diagnosis
    messages = recent(daemon, "state_db_recreated")
    assert len(messages) == 1
    assert str(state_db) in messages[0] and str(copies[0]) in messages[0]
    assert "epochs" in messages[0] and "recall snapshots" in messages[0]
    [logged] = [e for e in daemon.log_events() if e.get("event") == "state_db.recreated"]
    assert logged["moved_to"] == str(copies[0]) and "epochs" in logged["lost"]
    assert "state_db_recreated" in orcactl(orca_env, "status").stdout
    code, findings = doctor(orca_env)
    assert code == 1
    found = problems(findings, "databases")
    assert any(str(copies[0]) in f["detail"] and "lost" in f["detail"] for f in found)
    assert all(f["fix"] for f in found)


def test_a_state_database_damaged_while_running_is_recreated_on_the_next_open(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    daemon.call("session.open", {"cwd": cwd})
    daemon.restart()  # sound at start; no connection to the file is open yet
    daemon.call("daemon.status")  # answered once started: the check at start is behind us
    assert recent(daemon, "state_db_recreated") == []
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    for suffix in ("-wal", "-shm"):
        Path(f"{state_db}{suffix}").unlink(missing_ok=True)
    write_over_in_place(state_db, b"this is not a database\n" * 400)
    opened = daemon.call("session.open", {"cwd": cwd})
    assert opened.epoch > time.time() - 120
    assert len(recent(daemon, "state_db_recreated")) == 1
    assert list(orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*"))


def test_a_state_database_damaged_while_running_is_recreated_on_any_session_call(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    first = daemon.call("session.open", {"cwd": cwd, "session_id": "ses_" + "1" * 32})
    daemon.restart()  # sound at start; nothing cached: the next call reads the file
    daemon.call("daemon.status")  # answered once started: the check at start is behind us
    assert recent(daemon, "state_db_recreated") == []
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    for suffix in ("-wal", "-shm"):
        Path(f"{state_db}{suffix}").unlink(missing_ok=True)
    write_over_in_place(state_db, b"this is not a database\n" * 400)
    # a call that only reads a session finds the damage: the file is replaced, the session is
    # gone with it (that is said), and the caller is told to open it again, not "storage"
    lost = remote_error(daemon, "session.close", {"session_id": first.session_id, "epoch": 1})
    assert lost.code == -32014, lost
    assert len(recent(daemon, "state_db_recreated")) == 1
    assert daemon.call("session.open", {"cwd": cwd}).epoch > time.time() - 120
    assert len(recent(daemon, "state_db_recreated")) == 1


def test_a_state_database_another_process_holds_locked_is_a_storage_error(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    holder = sqlite3.connect(orca_env.memory_root / "daemon-state.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a sqlite3 shell, a backup
    try:
        locked = remote_error(daemon, "session.open", {"cwd": cwd})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (locked.code, locked.data.get("reason")) == (-32017, "locked"), locked
    assert "Traceback" not in daemon.stderr()
    assert daemon.call("session.open", {"cwd": cwd}).epoch > 0  # once it is let go


def hold_exclusively(path: Path) -> sqlite3.Connection:
    """A connection keeping every other one out of the database, readers too (a sqlite3 shell
    in exclusive locking mode, a tool copying the file)."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return holder


def test_a_state_database_locked_at_start_is_kept_with_its_sessions(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    first = daemon.call("session.open", {"cwd": cwd, "session_id": "ses_" + "2" * 32})
    daemon.stop()
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    holder = hold_exclusively(state_db)
    try:
        _code, findings = doctor(orca_env)  # no daemon running: doctor checks the file itself
        [found] = [f for f in problems(findings, "databases") if str(state_db) in f["detail"]]
        assert "cannot be checked now" in found["detail"], found
        assert "locked" in found["fix"] and "moves the file aside" not in found["fix"], found
        daemon = start(orca_env, daemon_factory)
        assert any(str(state_db) in message for message in recent(daemon, "storage"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # a lock is no damage: the file and the epochs it holds are kept
    assert list(orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*")) == []
    assert recent(daemon, "state_db_recreated") == []
    again = daemon.call("session.open", {"cwd": cwd, "session_id": first.session_id})
    assert again.epoch == first.epoch + 1
    _code, findings = doctor(orca_env)
    assert problems(findings, "databases") == [], findings


def test_a_directory_in_place_of_the_state_database_is_moved_aside_at_start(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # no lock and no full disk: nothing that passes keeps it from being SQLite's file, and it
    # holds only bookkeeping; kept, it made every session.open an internal error
    cwd = workdir(tmp_path)
    orca_env.memory_root.mkdir(parents=True, mode=0o700)
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    state_db.mkdir()
    daemon = start(orca_env, daemon_factory)
    assert daemon.call("session.open", {"cwd": cwd}).epoch > 0
    assert len(recent(daemon, "state_db_recreated")) == 1
    assert [p.is_dir() for p in orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*")] == [
        True
    ]


def test_a_fifo_in_place_of_the_state_database_is_moved_aside_not_called_a_disk_error(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # SQLite opens a FIFO and fails only when it syncs, as an I/O error: taken for a failing
    # disk, the FIFO was kept and every session.open answered -32017 "check it (dmesg)"
    cwd = workdir(tmp_path)
    orca_env.memory_root.mkdir(parents=True, mode=0o700)
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    os.mkfifo(state_db, 0o600)
    _code, findings = doctor(orca_env)
    [found] = [f for f in problems(findings, "databases") if str(state_db) in f["detail"]]
    assert "not a regular file" in found["detail"] and "dmesg" not in found["fix"], found
    daemon = start(orca_env, daemon_factory)
    assert daemon.call("session.open", {"cwd": cwd}).epoch > 0
    [message] = recent(daemon, "state_db_recreated")
    assert "not a regular file" in message, message
    [moved] = orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*")
    assert stat.S_ISFIFO(moved.lstat().st_mode)
    assert stat.S_ISREG(state_db.lstat().st_mode)


@pytest.mark.parametrize(("suffix", "kind"), [("-wal", "fifo"), ("-shm", "fifo"), ("-wal", "dir")])
def test_a_memory_database_wal_or_shm_that_is_no_file_is_named_not_called_a_disk_error(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, suffix: str, kind: str
) -> None:
    # SQLite opens a FIFO there and fails only once it writes or syncs: every save answered
    # "disk I/O error; check it (dmesg)", and doctor called the database sound or unchecked
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    save = {**ids, "action": "save", "kind": "fact", "is_global": False}
    daemon.call("memory.manage", {**save, "content": "the staging database is rebuilt nightly"})
    daemon.stop()
    odd = Path(f"{orca_env.deliberate_db}{suffix}")
    with contextlib.suppress(FileNotFoundError):
        odd.unlink()
    if kind == "fifo":
        os.mkfifo(odd, 0o600)
    else:
        odd.mkdir(mode=0o700)
    _code, findings = doctor(orca_env)
    [found] = problems(findings, "databases")
    assert found["detail"].startswith(f"{odd} is not a regular file"), found
    assert f"mv {odd} " in found["fix"] and "dmesg" not in found["fix"], found
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    save = {**ids, "action": "save", "kind": "fact", "is_global": False}
    error = remote_error(daemon, "memory.manage", {**save, "content": "deploys go out on Fridays"})
    assert error.code == -32017 and error.data["path"] == str(odd), error
    assert error.error.message.startswith(f"{odd} is not a regular file"), error.error.message
    assert "dmesg" not in error.error.message and "mv " in error.error.message
    assert any(f"{odd} is not a regular file" in message for message in recent(daemon, "storage"))
    daemon.stop()
    if os.path.lexists(odd):  # as the answer says (SQLite removes a -wal as it closes)
        odd.rename(f"{odd}.not-a-database")
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    save = {**ids, "action": "save", "kind": "fact", "is_global": False}
    assert daemon.call(
        "memory.manage", {**save, "content": "deploys go out on Fridays"}
    ).outcome == ("applied")
    found_records = daemon.call("memory.search", {**ids, "query": "staging database nightly"})
    assert [r.content for r in found_records.records] == ["the staging database is rebuilt nightly"]


def test_a_file_where_the_deliberate_memory_directory_should_be_is_named_with_what_to_do(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # memory.* answered "[Errno 17] File exists: '<dir>'" without a reason: a mkdir's words
    # about a file the user never thought of as a directory
    cwd = workdir(tmp_path)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("notes\n", encoding="utf-8")
    orca_env.extra_env["ORCA_CONFIG_DIR"] = str(blocker)
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    save = {**ids, "action": "save", "kind": "fact", "is_global": False}
    for method, params in [
        ("memory.manage", {**save, "content": "deploys go out on Fridays"}),
        ("memory.search", {**ids, "query": "deploys"}),
    ]:
        error = remote_error(daemon, method, params)
        assert error.code == -32017 and error.data["reason"] == "corrupt", error
        assert error.data["path"] == str(blocker), error
        message = error.error.message
        assert message.startswith(f"{blocker} is not a directory"), message
        assert "ORCA_CONFIG_DIR" in message and "File exists" not in message, message
    assert blocker.read_text(encoding="utf-8") == "notes\n"
    blocker.unlink()
    blocker.mkdir(mode=0o700)
    assert daemon.call(
        "memory.manage", {**save, "content": "deploys go out on Fridays"}
    ).outcome == ("applied")


def test_a_fifo_in_place_of_the_state_databases_shm_is_moved_aside_not_called_a_disk_error(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # session.open answered "disk I/O error; check it (dmesg)" for good, and doctor said the
    # state database could not be checked now, for the same reason
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    daemon.call("session.open", {"cwd": cwd})
    daemon.stop()
    shm = orca_env.memory_root / "daemon-state.sqlite3-shm"
    with contextlib.suppress(FileNotFoundError):
        shm.unlink()
    os.mkfifo(shm, 0o600)
    _code, findings = doctor(orca_env)
    [found] = [f for f in problems(findings, "databases") if "daemon-state" in f["detail"]]
    assert "daemon-state.sqlite3-shm is not a regular file" in found["detail"], found
    assert "dmesg" not in found["fix"], found
    daemon.start()
    assert daemon.call("session.open", {"cwd": cwd}).epoch > 0
    [message] = recent(daemon, "state_db_recreated")
    assert "daemon-state.sqlite3-shm is not a regular file" in message, message
    assert not recent(daemon, "storage")
    [moved] = orca_env.memory_root.glob("daemon-state.sqlite3.damaged-*-shm")
    assert stat.S_ISFIFO(moved.lstat().st_mode)


def test_a_project_lock_file_that_cannot_be_locked_is_named_not_its_directory(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # "cannot lock <project directory>: Is a directory" sent the user to a directory that is
    # one, rather than to the lock file inside it
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    written = daemon.call("remember", {**ids, "text": "we deploy on Tuesdays", "scope": "project"})
    lock = Path(written.path).parent / ".lock"
    lock.unlink()
    lock.mkdir()
    fact = {**ids, "text": "we release on Fridays", "scope": "project"}
    error = remote_error(daemon, "remember", fact)
    assert error.code == -32017, error
    assert error.data["path"] == str(lock), error.data
    assert error.error.message.startswith(f"cannot lock {lock}: "), error.error.message
    assert not Path(written.path).read_text().count("Fridays")
    lock.rmdir()
    assert daemon.call("remember", fact).bytes > 0


def test_a_file_in_place_of_the_projects_directory_is_a_storage_error_naming_it(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # listing it raised NotADirectoryError, answered as an internal error (-32603)
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    daemon.call("session.open", {"cwd": cwd})
    projects_dir = orca_env.memory_root / "projects"
    projects_dir.rename(tmp_path / "projects.saved")
    projects_dir.write_text("not a directory")
    error = remote_error(daemon, "projects.list", {})
    assert (error.code, error.data["path"]) == (-32017, str(projects_dir)), error
    assert f"{projects_dir} is not a directory" in error.error.message, error.error.message
    assert daemon.call("daemon.ping").pid > 0
    projects_dir.unlink()
    (tmp_path / "projects.saved").rename(projects_dir)
    assert len(daemon.call("projects.list").projects) == 1


def test_a_memory_database_on_a_full_disk_is_not_called_damaged(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """A WAL database whose -shm a full disk cannot hold cannot even be read; that is the
    disk's fault, and doctor says so rather than give the repair of a damaged file."""
    with small_filesystem(orca_env.config_dir):
        build_memory_database(orca_env.deliberate_db, records=50)
        filler = fill_up(orca_env.config_dir)
        result = orcactl(orca_env, "doctor", "--json", "--min-free-mb", "1")
        assert "Traceback" not in result.stderr, result.stderr
        findings = json.loads(result.stdout)["findings"]
        [found] = [
            f for f in problems(findings, "databases") if str(orca_env.deliberate_db) in f["detail"]
        ]
        assert "cannot be checked now" in found["detail"], found
        assert "free disk space" in found["fix"] and ".dump" not in found["fix"], found
        disks = problems(findings, "disk")
        assert any(str(orca_env.config_dir) in f["detail"] for f in disks), findings
        filler.unlink()
        result = orcactl(orca_env, "doctor", "--json", "--min-free-mb", "0")
        findings = json.loads(result.stdout)["findings"]
        assert not [f for f in problems(findings, "databases")], findings


def test_an_approval_a_full_disk_refused_is_applied_when_asked_again(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    with small_filesystem(orca_env.config_dir):
        daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
        session = daemon.call("session.open", {"cwd": cwd, "mode": "normal"})
        ids = {"session_id": session.session_id, "epoch": session.epoch}
        content = "the staging database is rebuilt every night at two"
        proposed = daemon.call(
            "memory.manage",
            {**ids, "action": "save", "content": content, "kind": "fact", "is_global": False},
        )
        assert proposed.outcome == "pending_approval"
        approve = {**ids, "approval_id": proposed.approval_id, "decision": "allow_once"}
        filler = fill_up(orca_env.config_dir)
        full = remote_error(daemon, "memory.approve", approve)
        assert (full.code, full.data.get("reason")) == (-32017, "disk_full"), full
        filler.unlink()
        # the user's answer was not used up by a write that never happened
        applied = daemon.call("memory.approve", approve)
        assert applied.outcome == "applied", applied
        found = daemon.call("memory.search", {**ids, "query": "staging database rebuilt"})
        assert [r.content for r in found.records] == [content]
        used = remote_error(daemon, "memory.approve", approve)
        assert used.code == -32014  # and it is single use once applied
        daemon.stop()


async def test_a_session_held_in_memory_closes_after_its_database_was_replaced(
    tmp_path: Path,
) -> None:
    path = tmp_path / "daemon-state.sqlite3"
    sessions = SessionStore(path, SystemClock())
    session = await sessions.open(
        SessionOpenParams(cwd=workdir(tmp_path)),
        AutoMemorySwitch(tmp_path / "config.toml", Config()),
    )
    sessions.close()  # what replacing a damaged state database does, in this order
    move_aside(path)
    await sessions.close_session(session.session_id, session.epoch)
    with pytest.raises(NotFound):
        await sessions.require(session.session_id, session.epoch)
    sessions.close()


def test_a_state_database_damaged_under_recall_is_replaced_and_recall_answers(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory)
    session = daemon.call("session.open", {"cwd": cwd})
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    for suffix in ("-wal", "-shm"):
        Path(f"{state_db}{suffix}").unlink(missing_ok=True)
    write_over_in_place(state_db, b"this is not a database\n" * 400)  # before recall first reads it
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    answer = daemon.call("recall", {**ids, "turn_id": "t1", "prompt": "how do we deploy"})
    assert answer.snapshot_id
    assert len(recent(daemon, "state_db_recreated")) == 1
    assert daemon.call("session.open", {"cwd": cwd}).epoch > time.time() - 120


# --- the deliberate-memory database -------------------------------------------------------------


def build_memory_database(path: Path, records: int = 3000) -> None:
    old_umask = os.umask(0o077)
    try:
        connection = schema.open_database(path)
    finally:
        os.umask(old_umask)
    now = time.time()
    with connection:
        for number in range(records):
            queries.insert_record(
                connection,
                queries.StoredRecord(
                    id=queries.new_record_id(),
                    kind="fact",
                    content=f"deploy fact {number} about widgets {'x' * (number % 50)}",
                    workspace_id=None,
                    workspace_root="/w",
                    created_at=now,
                    updated_at=now,
                ),
            )
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def test_a_damaged_memory_database_refuses_changes_until_repaired(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    database = orca_env.deliberate_db
    build_memory_database(database)
    damage_a_record_page(database)
    as_damaged = database.read_bytes()

    daemon = start(orca_env, daemon_factory)
    messages = recent(daemon, "memory_db_corrupt")
    assert len(messages) == 1 and str(database) in messages[0] and ".dump" in messages[0]
    assert recent(daemon, "memory_index_rebuilt") == []  # never made again over lost rows
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    before = database.read_bytes()
    error = remote_error(
        daemon,
        "memory.manage",
        {**ids, "action": "save", "content": "a new fact", "kind": "fact", "is_global": True},
    )
    assert (error.code, error.data["kind"], error.data["reason"]) == (-32017, "storage", "corrupt")
    assert database.read_bytes() == before  # nothing written into the damaged file
    try:  # reads go on (they may miss what the damaged page held), or say storage
        daemon.call("memory.search", {**ids, "query": "widgets"})
    except RemoteError as exc:
        assert exc.code == -32017
    assert "memory_db_corrupt" in orcactl(orca_env, "status").stdout
    code, findings = doctor(orca_env)
    assert code == 1
    found = problems(findings, "databases")
    assert len(found) == 1 and str(database) in found[0]["detail"]
    assert ".dump" in found[0]["fix"]

    time.sleep(1.5)  # background work (the vector backfill) gets its turns at the file
    daemon.stop()
    assert database.read_bytes() == as_damaged  # not even on close: nothing went into it
    if shutil.which("sqlite3") is None:
        pytest.skip("no sqlite3 command line here to follow the repair steps with")
    # the repair steps doctor gives, followed literally
    recovered = Path(f"{database}.recovered")
    command = re.search(r"^stop orcad; (.*); mv (\S+) (\S+) \(and its", found[0]["fix"])
    assert command is not None, found[0]["fix"]
    assert (command.group(2), command.group(3)) == (str(database), f"{database}.damaged")
    assert f"| sqlite3 {recovered};" in command.group(1)
    subprocess.run(command.group(1), shell=True, check=True, capture_output=True)  # noqa: S602
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{database}{suffix}").exists():
            os.replace(f"{database}{suffix}", f"{database}.damaged{suffix}")
    os.replace(recovered, database)
    database.chmod(0o600)
    connection = sqlite3.connect(database)
    kept = connection.execute("SELECT count(*) FROM memories").fetchone()[0]
    assert 3000 - 200 <= kept < 3000  # only what the damaged page held is lost
    assert connection.execute("SELECT total FROM record_count").fetchone()[0] == kept
    assert connection.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    connection.close()
    daemon.start()
    assert recent(daemon, "memory_db_corrupt") == []
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    saved = daemon.call(
        "memory.manage",
        {
            "session_id": session.session_id,
            "epoch": session.epoch,
            "action": "save",
            "content": "a new fact",
            "kind": "fact",
            "is_global": True,
        },
    )
    assert saved.outcome == "applied"
    found_again = daemon.call(
        "memory.search",
        {"session_id": session.session_id, "epoch": session.epoch, "query": "widgets"},
    )
    assert found_again.records  # the recovered records are searchable
    code, findings = doctor(orca_env)
    assert problems(findings, "databases") == []


def break_the_full_text_structure(path: Path) -> None:
    """The index's structure record as a thousand purges on SQLite 3.40 left it: 2002 empty
    levels, which FTS5 reads as corrupt, while every page of the file is sound."""
    structure = bytes(4) + bytes([0x8F, 0x52, 0, 0]) + bytes(2 * 2002)
    connection = sqlite3.connect(path)
    try:
        with connection:
            connection.execute("UPDATE memories_fts_data SET block = ? WHERE id = 10", (structure,))
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


def found_by_word(daemon: DaemonProcess, ids: dict[str, Any], records: int) -> set[str]:
    """The contents memory.search finds for each record's own word (`widgets{n}`)."""
    found = set()
    for number in range(records):
        answer = daemon.call("memory.search", {**ids, "query": f"widgets{number}"})
        found.update(r.content for r in answer.records)
    return found


def build_small_memory_database(path: Path, records: int) -> None:
    old_umask = os.umask(0o077)
    try:
        connection = schema.open_database(path)
    finally:
        os.umask(old_umask)
    for number in range(records):
        queries.insert_record(
            connection,
            queries.StoredRecord(
                id=queries.new_record_id(),
                kind="fact",
                content=f"deploy note widgets{number}",
                workspace_id=None,
                workspace_root="/w",
                created_at=1.0,
                updated_at=1.0,
            ),
        )
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()


def assert_serves_after_the_index_was_made_again(
    orca: OrcaEnv, daemon: DaemonProcess, ids: dict[str, Any], records: int
) -> None:
    contents = {f"deploy note widgets{n}" for n in range(records)}
    assert found_by_word(daemon, ids, records) == contents
    saved = daemon.call(
        "memory.manage",
        {
            **ids,
            "action": "save",
            "content": "a fresh fact widgetsnew",
            "kind": "fact",
            "is_global": True,
        },
    )
    assert saved.outcome == "applied"
    answer = daemon.call("memory.search", {**ids, "query": "widgetsnew"})
    assert [r.content for r in answer.records] == ["a fresh fact widgetsnew"]
    assert recent(daemon, "memory_db_corrupt") == []
    rebuilt = recent(daemon, "memory_index_rebuilt")
    assert len(rebuilt) == 1 and str(orca.deliberate_db) in rebuilt[0]
    _code, findings = doctor(orca)
    assert problems(findings, "databases") == []
    assert [f for f in problems(findings, "daemon") if "memory" in f["detail"]] == []
    notes = [f for f in findings if "memory_index_rebuilt" in f["detail"]]
    assert len(notes) == 1 and notes[0]["status"] == "ok"


def test_a_full_text_index_found_unreadable_at_start_is_made_again_from_the_records(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    build_small_memory_database(orca_env.deliberate_db, 40)
    break_the_full_text_structure(orca_env.deliberate_db)
    _code, findings = doctor(orca_env)  # before orcad starts: nothing for the user to do
    assert problems(findings, "databases") == []
    notes = [f for f in findings if "full-text index cannot be read" in f["detail"]]
    assert len(notes) == 1 and notes[0]["check"] == "databases"
    daemon = start(orca_env, daemon_factory)
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    assert_serves_after_the_index_was_made_again(orca_env, daemon, ids, 40)


def test_a_full_text_index_that_goes_unreadable_while_orcad_runs_is_made_again(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    build_small_memory_database(orca_env.deliberate_db, 40)
    daemon = start(orca_env, daemon_factory)
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    assert found_by_word(daemon, ids, 1) == {"deploy note widgets0"}
    break_the_full_text_structure(orca_env.deliberate_db)  # under the connection orcad has open
    assert_serves_after_the_index_was_made_again(orca_env, daemon, ids, 40)


def test_recall_finds_records_by_their_words_when_their_vectors_are_damaged(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """A damaged page among the vectors leaves the records themselves readable: recall's
    deliberate part finds them by their words, as memory.search does, instead of nothing."""
    cwd = workdir(tmp_path)
    database = orca_env.deliberate_db
    build_memory_database(database)
    daemon = start(orca_env, daemon_factory, '[recall]\nembedding = "static"\n')

    def embedded() -> bool:
        embedding = daemon.call("daemon.status").embedding
        return embedding.state == "ready" and (embedding.embedded, embedding.pending) == (3000, 0)

    wait_for(embedded, timeout=60)
    daemon.stop()
    assert not Path(f"{database}-wal").exists()
    pages = leaf_pages(database, "memory_vectors")
    damage_a_page(database, pages[len(pages) // 2])

    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    prompt = "what does deploy fact 1234 say about the widgets?"
    searched = daemon.call("memory.search", {**ids, "query": "deploy fact 1234 widgets"})
    assert any(r.content.startswith("deploy fact 1234 ") for r in searched.records)
    recalled = daemon.call("recall", {**ids, "turn_id": "t1", "prompt": prompt})
    assert any(e.content.startswith("deploy fact 1234 ") for e in recalled.deliberate), recalled
    assert recent(daemon, "memory_db_corrupt")  # and the damage is reported, as for any page


# --- project files --------------------------------------------------------------------------


def test_a_damaged_ledger_is_listed_as_corrupt_and_doctor_says_how_to_fix_it(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    ledger = orca_env.memory_root / "projects" / session.project.id / "candidates.jsonl"
    ledger.write_text('{"this is": "not a ledger"\n')
    listed = daemon.call("projects.list").projects
    assert [(p.id, p.corrupt) for p in listed] == [(session.project.id, True)]
    assert listed[0].problem is not None and "candidates.jsonl" in listed[0].problem
    assert recent(daemon, "ledger_corrupt")
    for running in (True, False):
        code, findings = doctor(orca_env)
        assert code == 1
        found = problems(findings, "index")
        assert len(found) == 1 and session.project.id in found[0]["detail"]
        assert "candidates.jsonl" in found[0]["fix"]
        if running:
            daemon.stop()


def test_orcactl_projects_names_the_damaged_file(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # a damaged ledger is not a damaged project.json: the listing says which file to look at
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    directory = orca_env.memory_root / "projects" / session.project.id
    (directory / "candidates.jsonl").write_text('{"this is": "not a ledger"\n')
    shown = orcactl(orca_env, "projects")
    assert shown.returncode == 0, shown.stderr
    assert "project.json" not in shown.stdout
    assert f"{directory}/candidates.jsonl" in shown.stdout and "damaged" in shown.stdout


def test_a_ledger_that_is_a_symbolic_link_is_damaged_never_read_or_replaced(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fact = ExtractedFact(category="project", fact="The release train leaves from platform nine.")
    provenance = Provenance("ses_x", "t0", "external", "m", "v1")
    outside, _ = merge_job_candidates(Ledger(), "job_" + "e" * 32, [fact], provenance, time.time())
    write_ledger(elsewhere, outside)
    before = (elsewhere / "candidates.jsonl").read_bytes()
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    ledger = orca_env.memory_root / "projects" / session.project.id / "candidates.jsonl"
    ledger.symlink_to(elsewhere / "candidates.jsonl")
    job_id = daemon.call("turn.completed", turn(session, "t1")).job_id
    assert daemon.call("jobs.claim", {"worker": "outside"}).job is None  # held, as for damage
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    recalled = daemon.call("recall", {**ids, "turn_id": "t2", "prompt": "release train platform"})
    assert not [entry for entry in recalled.automatic if "platform nine" in entry.text]
    listed = daemon.call("projects.list").projects
    assert [(p.id, p.corrupt, p.candidates) for p in listed] == [(session.project.id, True, 0)]
    assert listed[0].problem is not None and "symbolic link" in listed[0].problem
    assert any("symbolic link" in message for message in recent(daemon, "ledger_corrupt"))
    states = {job.job_id: job.state for job in daemon.call("jobs.list", {}).jobs}
    assert states[job_id] == "pending"
    for running in (True, False):
        code, findings = doctor(orca_env)
        assert code == 1
        [found] = problems(findings, "index")
        assert "symbolic link" in found["detail"] and "candidates.jsonl" in found["fix"]
        if running:
            daemon.stop()
    assert ledger.is_symlink() and (elsewhere / "candidates.jsonl").read_bytes() == before


def test_a_derived_file_that_is_a_symbolic_link_is_rebuilt_in_its_place(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # auto-memory.md is derived from the ledger: the link is replaced by the file, and what it
    # pointed to is neither read nor written
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    markdown = orca_env.memory_root / "projects" / session.project.id / "auto-memory.md"
    markdown.symlink_to(victim)
    job_id = daemon.call("turn.completed", turn(session, "t1")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "outside"})
    output = '{"category": "project", "fact": "We deploy with make."}'
    publish = {"job_id": job_id, "token": claimed.lease.token, "output": output}
    assert daemon.call("jobs.publish", {**publish, "provider": "p", "model": "m"}).added == 1
    assert not markdown.is_symlink() and "We deploy with make." in markdown.read_text()
    assert victim.read_text() == "precious\n"
    [listed] = daemon.call("projects.list").projects
    assert not listed.corrupt and listed.candidates == 1


def test_a_damaged_project_file_is_reported_by_doctor_with_its_own_fix(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    directory = orca_env.memory_root / "projects" / session.project.id
    (directory / "project.json").write_bytes(b"\xff{ not a project record\n")
    assert [p.corrupt for p in daemon.call("projects.list").projects] == [True]
    for running in (True, False):
        code, findings = doctor(orca_env)
        assert code == 1, (running, findings)
        [found] = problems(findings, "index")
        assert session.project.id in found["detail"] and "project.json" in found["detail"]
        assert f"{directory}/project.json" in found["fix"]
        assert "candidates.jsonl" not in found["fix"]  # the ledger is sound: leave it alone
        if running:
            daemon.stop()


def test_doctor_names_an_inspect_command_that_works_once_the_ledger_is_moved_aside(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # the fix's steps, run as written: move the damaged ledger aside, then the inspect it names
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    cwd = workdir(tmp_path)
    session = daemon.call("session.open", {"cwd": cwd})
    directory = orca_env.memory_root / "projects" / session.project.id
    (directory / "candidates.jsonl").write_text('{"this is": "not a ledger"\n')
    code, findings = doctor(orca_env)
    assert code == 1
    [found] = problems(findings, "index")
    move = re.search(r"mv (\S+) (\S+)\)", found["fix"])
    named = re.search(r"orcactl (inspect [^;]*?) shows", found["fix"])
    assert move is not None and named is not None, found["fix"]
    Path(move.group(1)).rename(move.group(2))
    shown = orcactl(orca_env, *named.group(1).split())
    assert shown.returncode == 0, (named.group(1), shown.stdout, shown.stderr)
    assert session.project.id in shown.stdout


def test_doctor_gives_a_lock_held_elsewhere_the_fix_for_a_lock(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # nothing is wrong with the directory, its permissions or its file system: another process
    # held the project's lock past its bound, and the call works once it lets go
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    directory = orca_env.memory_root / "projects" / session.project.id
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    with filelock.FileLock(directory / ".lock", thread_local=False), pytest.raises(RemoteError):
        daemon.call("remember", {**ids, "text": "we deploy on Tuesdays", "scope": "project"})
    [found] = problems(doctor(orca_env)[1], "daemon")
    assert "held by another process" in found["detail"], found
    assert "another process" in found["fix"] and "permissions" not in found["fix"], found


@pytest.mark.parametrize("fault", ["lock link", "file for jobs/"])
def test_doctor_gives_a_storage_fault_the_fix_for_its_cause_not_disk_space(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, fault: str
) -> None:
    # a project's .lock that is a symbolic link, or a regular file where jobs/ should be: the
    # daemon reports a storage fault, and doctor's fix is for that, and works as written
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    cwd = workdir(tmp_path)
    session = daemon.call("session.open", {"cwd": cwd})
    directory = orca_env.memory_root / "projects" / session.project.id
    if fault == "lock link":
        (tmp_path / "elsewhere").write_text("")
        (directory / ".lock").unlink()
        (directory / ".lock").symlink_to(tmp_path / "elsewhere")
        ids = {"session_id": session.session_id, "epoch": session.epoch}
        method, params = "remember", {**ids, "text": "we deploy on Tuesdays", "scope": "project"}
    else:
        (directory / "jobs").rmdir()
        (directory / "jobs").write_text("")
        method, params = "turn.completed", turn(session, "t1")
    assert remote_error(daemon, method, params).code == -32017
    code, findings = doctor(orca_env)
    assert code == 1
    # judged by the memory check as it is now, not by the fault the daemon recorded
    assert problems(findings, "daemon") == [], findings
    odd = directory / (".lock" if fault == "lock link" else "jobs")
    [found] = [f for f in problems(findings, "memory") if f["detail"].startswith(f"{odd} is ")]
    assert "disk" not in found["fix"] and "space" not in found["fix"], found["fix"]
    if fault == "lock link":
        assert found["fix"].startswith(f"rm {odd} "), found["fix"]
        (directory / ".lock").unlink()
    else:
        assert f"mv {directory / 'jobs'} " in found["fix"] and "next session" in found["fix"]
        (directory / "jobs").rename(directory / "jobs.aside")
        params = turn(daemon.call("session.open", {"cwd": cwd}), "t2")
    daemon.call(method, params)  # as the fix says: orcad makes the file or directory again
    assert (directory / ".lock").is_file() and (directory / "jobs").is_dir()


def test_a_project_file_that_is_a_fifo_is_damaged_and_never_waited_on(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # project.json is read at every session open and listing: a FIFO there must not hang them
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    cwd = workdir(tmp_path)
    session = daemon.call("session.open", {"cwd": cwd})
    project_file = orca_env.memory_root / "projects" / session.project.id / "project.json"
    project_file.unlink()
    os.mkfifo(project_file, 0o600)
    with daemon.client(timeout=10) as client:
        assert client.call("session.open", {"cwd": cwd}).project.id == session.project.id
        client.call("session.open", {"cwd": workdir(tmp_path, "other")})
        listed = {p.id: p for p in client.call("projects.list").projects}
        damaged = listed[session.project.id]
        assert damaged.corrupt and damaged.problem is not None
        assert "not a regular file" in damaged.problem
        inspected = client.call("projects.inspect", {"cwd": cwd})
        assert inspected.project.corrupt
    assert stat.S_ISFIFO(project_file.lstat().st_mode)  # left as found


def one_job_then_stopped(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> tuple[DaemonProcess, Any, str, Path]:
    """A stopped daemon whose store holds one pending job: the daemon, the session that made
    it, the job's id and its file, to be damaged before the next start."""
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    job_id = daemon.call("turn.completed", turn(session, "t1")).job_id
    daemon.stop()
    job_file = orca_env.memory_root / "projects" / session.project.id / "jobs" / f"{job_id}.json"
    return daemon, session, job_id, job_file


def test_a_truncated_job_file_stays_visible_with_its_id_and_is_kept(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon, session, job_id, job_file = one_job_then_stopped(orca_env, daemon_factory, tmp_path)
    truncated = job_file.read_bytes()[:57]
    job_file.write_bytes(truncated)

    daemon.start()
    listed = daemon.call("jobs.list")
    assert listed.jobs == []
    assert [(d.job_id, d.project_id, d.path) for d in listed.damaged] == [
        (job_id, session.project.id, str(job_file))
    ]
    assert daemon.call("daemon.status").jobs.damaged == 1
    assert any(job_id in message for message in recent(daemon, "job_file_damaged"))
    assert job_file.read_bytes() == truncated  # kept as found
    shown = orcactl(orca_env, "jobs")
    assert job_id in shown.stdout and "DAMAGED" in shown.stdout
    assert "1 DAMAGED" in orcactl(orca_env, "status").stdout
    for running in (True, False):
        code, findings = doctor(orca_env)
        assert code == 1
        found = problems(findings, "jobs")
        assert len(found) == 1 and job_id in found[0]["detail"] and found[0]["fix"]
        if running:
            daemon.stop()
    assert job_file.read_bytes() == truncated


def test_a_job_file_that_is_a_fifo_is_damaged_and_never_waited_on(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # reading a FIFO waits for a writer that never comes: every call of the job store with it
    daemon, _session, job_id, job_file = one_job_then_stopped(orca_env, daemon_factory, tmp_path)
    job_file.unlink()
    os.mkfifo(job_file, 0o600)

    daemon.start()
    with daemon.client(timeout=10) as client:
        other = client.call("session.open", {"cwd": workdir(tmp_path, "other")})
        assert client.call("turn.completed", turn(other, "t1")).eligible
        listed = client.call("jobs.list")
        assert [(d.job_id, d.path) for d in listed.damaged] == [(job_id, str(job_file))]
        assert "not a regular file" in listed.damaged[0].problem
        assert client.call("daemon.status").jobs.damaged == 1
    assert stat.S_ISFIFO(job_file.lstat().st_mode)  # left as found


def test_a_damaged_job_file_restored_as_another_jobs_is_named_by_its_path(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # a fault that names no file stops failing doctor once not met for a while; this one stays
    # until the file is dealt with, so its path must be in it (doctor then judges it as it is)
    daemon, _session, job_id, job_file = one_job_then_stopped(orca_env, daemon_factory, tmp_path)
    sound = json.loads(job_file.read_bytes())
    job_file.write_bytes(job_file.read_bytes()[:57])
    daemon.start()
    assert [d.job_id for d in daemon.call("jobs.list").damaged] == [job_id]
    job_file.write_text(json.dumps({**sound, "job_id": "job_" + "0" * 32}))

    errors = daemon.call("daemon.status").recent_errors
    named = [e.message for e in errors if "names another job or project" in e.message]
    assert named and all(str(job_file) in message for message in named), named
    assert job_file.read_text() == json.dumps({**sound, "job_id": "job_" + "0" * 32})


def test_a_job_file_whose_time_is_no_time_is_damaged_and_orcad_starts(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # the file parses as JSON of the right shape: only the scheduler reads its times
    daemon, _session, job_id, job_file = one_job_then_stopped(orca_env, daemon_factory, tmp_path)
    edited = json.loads(job_file.read_bytes())
    edited["created_at"] = "yesterday"
    job_file.write_text(json.dumps(edited))

    daemon.start()
    listed = daemon.call("jobs.list")
    assert [d.job_id for d in listed.damaged] == [job_id]
    assert "created_at" in listed.damaged[0].problem
    other = daemon.call("session.open", {"cwd": workdir(tmp_path, "other")})
    assert daemon.call("turn.completed", turn(other, "t1")).eligible
    assert json.loads(job_file.read_bytes()) == edited  # left as found


def test_a_job_file_a_newer_orcad_wrote_is_named_so_and_never_to_be_given_up(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # an orcad run again after a newer one (a downgrade) meets that version's job files: the
    # fix for a damaged one, moving it out of jobs/, would give the job up for both
    daemon, _session, job_id, job_file = one_job_then_stopped(orca_env, daemon_factory, tmp_path)
    newer = json.loads(job_file.read_bytes())
    newer["format"] = "orcad.job/2"
    newer["priority"] = 1  # a later format may add fields this one does not know
    job_file.write_text(json.dumps(newer))

    daemon.start()
    listed = daemon.call("jobs.list")
    assert [d.job_id for d in listed.damaged] == [job_id]
    assert "written by a newer orcad" in listed.damaged[0].problem
    assert "orcad.job/2" in listed.damaged[0].problem
    shown = orcactl(orca_env, "jobs")
    assert job_id in shown.stdout and "written by a newer orcad" in shown.stdout
    assert "DAMAGED" not in shown.stdout
    for running in (True, False):
        code, findings = doctor(orca_env)
        assert code == 1
        found = problems(findings, "jobs")
        assert len(found) == 1 and "written by a newer orcad" in found[0]["detail"]
        assert "is damaged" not in found[0]["detail"] and "move it out" not in found[0]["fix"]
        assert "upgrade" in found[0]["fix"]
        if running:
            daemon.stop()
    assert json.loads(job_file.read_bytes()) == newer  # left as found


def test_a_damaged_job_file_whose_words_claim_a_newer_orcad_is_still_damaged(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # the problem quotes the unknown format it read: those words in it are no newer orcad's
    daemon, _session, job_id, job_file = one_job_then_stopped(orca_env, daemon_factory, tmp_path)
    edited = json.loads(job_file.read_bytes())
    edited["format"] = "was written by a newer orcad"
    job_file.write_text(json.dumps(edited))

    daemon.start()
    shown = orcactl(orca_env, "jobs")
    assert job_id in shown.stdout and "DAMAGED" in shown.stdout and "NEWER" not in shown.stdout
    for running in (True, False):
        code, findings = doctor(orca_env)
        assert code == 1
        found = problems(findings, "jobs")
        assert len(found) == 1 and "move it out of jobs/" in found[0]["fix"]
        assert "do not move" not in found[0]["fix"]
        if running:
            daemon.stop()
    assert json.loads(job_file.read_bytes()) == edited  # left as found


@pytest.mark.slow
def test_doctor_survives_any_damaged_file_and_fails_for_those_that_hold_memory(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory)
    session = daemon.call("session.open", {"cwd": workdir(tmp_path), "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    daemon.call("remember", {**ids, "text": "we deploy on Tuesdays", "scope": "project"})
    daemon.call("remember", {**ids, "text": "I like tabs", "scope": "user"})
    daemon.call("turn.completed", turn(session, "t1"))
    daemon.call("turn.completed", turn(session, "t2", "remember that the linter is ruff"))
    deadline = time.monotonic() + 30
    while any(j.state != "committed" for j in daemon.call("jobs.list").jobs):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    saved = daemon.call(
        "memory.manage",
        {**ids, "action": "save", "content": "a fact", "kind": "fact", "is_global": True},
    )
    assert saved.outcome == "applied"
    daemon.call("recall", {**ids, "turn_id": "t3", "prompt": "how do we deploy"})
    daemon.stop()
    roots = [orca_env.home, orca_env.config_dir]
    pristine = tmp_path / "pristine"
    for root in roots:
        shutil.copytree(root, pristine / root.name, symlinks=True)
    files = sorted(p for root in roots for p in root.rglob("*") if p.is_file())
    must_fail = {
        "config.toml",
        "daemon-state.sqlite3",
        "memory.sqlite3",
        "candidates.jsonl",
        "project.json",
        "index.sqlite3",
    }
    assert must_fail <= {f.name for f in files}, files
    assert any(f.parent.name == "jobs" for f in files)
    for path in files:
        for root in roots:
            shutil.rmtree(root)
            shutil.copytree(pristine / root.name, root, symlinks=True)
        path.write_bytes(b"\xff\xfe\x00 not what was here {[\n" * 64)
        code, findings = doctor(orca_env)  # never a traceback, always the report
        if path.name in must_fail or path.parent.name == "jobs":
            assert code == 1, (path, findings)
            assert all(f["fix"] for f in findings if f["status"] == "problem"), findings


# --- jobs.retry -----------------------------------------------------------------------------


def test_an_exhausted_job_can_be_retried_once_more(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\nretry_base_s = 0.0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    job_id = daemon.call("turn.completed", turn(session, "t1")).job_id
    refused = orcactl(orca_env, "jobs", "retry", job_id)  # pending: nothing to retry
    assert refused.returncode == 1 and "only an exhausted job" in refused.stderr
    for _ in range(4):
        claimed = daemon.call("jobs.claim", {"worker": "w"})
        daemon.call("jobs.fail", {"job_id": job_id, "token": claimed.lease.token, "error": "down"})
    assert daemon.call("jobs.list", {"state": "exhausted"}).jobs[0].job_id == job_id

    retried = orcactl(orca_env, "jobs", "retry", job_id)
    assert retried.returncode == 0 and job_id in retried.stdout, retried.stderr
    [job] = daemon.call("jobs.list").jobs
    assert (job.state, job.attempts, job.last_error) == ("pending", 0, "down")
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    assert claimed.job.job_id == job_id and claimed.job.attempt == 1
    error = remote_error(daemon, "jobs.retry", {"job_id": job_id})
    assert (error.code, error.data["kind"]) == (-32013, "conflict")
    unknown = remote_error(daemon, "jobs.retry", {"job_id": "job_" + "0" * 32})
    assert unknown.code == -32014
    assert orcactl(orca_env, "jobs", "retry", "nope").returncode == 2  # no job's shape


def test_jobs_retry_in_every_other_state_is_refused_for_its_state_and_changes_nothing(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": workdir(tmp_path)})
    jobs = [daemon.call("turn.completed", turn(session, f"t{n}")).job_id for n in range(3)]
    committed, leased, pending = jobs
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    assert claimed.job.job_id == committed
    daemon.call(
        "jobs.publish",
        {
            "job_id": committed,
            "token": claimed.lease.token,
            "output": "NOTHING",
            "provider": "test",
            "model": "m",
        },
    )
    assert daemon.call("jobs.claim", {"worker": "w"}).job.job_id == leased
    # the backlog is full: a job that is not exhausted is still refused for its state
    for number in range(3, 65):  # 64 active with the leased and the pending one
        daemon.call("turn.completed", turn(session, f"t{number}"))
    before = {j.job_id: (j.state, j.attempts) for j in daemon.call("jobs.list").jobs}
    for job_id, state in ((committed, "committed"), (leased, "leased"), (pending, "pending")):
        error = remote_error(daemon, "jobs.retry", {"job_id": job_id})
        assert (error.code, error.data["kind"], error.data["state"]) == (-32013, "conflict", state)
        assert "only an exhausted job" in str(error)
    after = {j.job_id: (j.state, j.attempts) for j in daemon.call("jobs.list").jobs}
    assert after == before


def test_sqlite3_quick_check_finds_the_damaged_page_the_tests_make(tmp_path: Path) -> None:
    database = tmp_path / "memory.sqlite3"
    build_memory_database(database, records=500)
    connection = sqlite3.connect(database)
    assert connection.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    connection.close()
    damage_a_record_page(database)
    connection = sqlite3.connect(database)
    assert connection.execute("PRAGMA quick_check").fetchone()[0] != "ok"
    connection.close()


def test_no_caller_can_write_into_a_damaged_memory_database(tmp_path: Path) -> None:
    """Not only the store's own changes: recall's vector backfill and its schema step go
    through query_blocking, and must not write into the damaged b-tree either."""
    database = tmp_path / "memory.sqlite3"
    build_memory_database(database, records=500)
    damage_a_record_page(database)
    as_damaged = database.read_bytes()
    deliberate = store.DeliberateStore(database)
    deliberate.open_blocking()
    assert deliberate.damage is not None
    try:
        with pytest.raises(StorageError) as refused:
            deliberate.query_blocking(vectors.ensure_schema)
        assert refused.value.data["reason"] == "corrupt"
        assert "failed its integrity check" in refused.value.message
        # Reads go on where the file is whole: record 3 sits on the first leaf page, far from
        # the damaged one in the middle.
        [found] = deliberate.search_blocking("w", "3", 5)
        assert found.content.startswith("deploy fact 3 about widgets")
        # A read that reaches the damaged page may or may not notice it (SQLite checks what it
        # parses, not every byte); when it does, it is a clear storage error, not a crash.
        try:
            deliberate.search_blocking("w", "widgets", 500)
        except StorageError as exc:
            assert exc.data["reason"] == "corrupt", exc.data
    finally:
        deliberate.close()
    assert database.read_bytes() == as_damaged
    assert not Path(f"{database}-wal").exists() or Path(f"{database}-wal").stat().st_size == 0


def test_a_full_text_index_that_cannot_be_made_again_leaves_the_database_fenced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = tmp_path / "memory.sqlite3"
    build_small_memory_database(database, 20)
    break_the_full_text_structure(database)

    def fails(_connection: sqlite3.Connection) -> None:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(schema, "rebuild_fts_index", fails)
    as_broken = database.read_bytes()
    deliberate = store.DeliberateStore(database)
    rebuilt: list[str] = []
    deliberate.on_index_rebuilt = rebuilt.append
    deliberate.open_blocking()
    try:
        assert deliberate.damage is not None and "rebuilding it failed" in deliberate.damage
        with pytest.raises(StorageError) as refused:
            deliberate.query_blocking(vectors.ensure_schema)
        assert refused.value.data["reason"] == "corrupt"
        assert ".dump" in refused.value.message
    finally:
        deliberate.close()
    assert rebuilt == []
    assert database.read_bytes() == as_broken


def test_a_doctor_check_that_fails_is_a_finding_not_a_crash() -> None:
    def broken() -> list[Finding]:
        raise PermissionError(13, "Permission denied", "/somewhere/memory")

    [finding] = guarded("memory", broken)
    assert (finding.check, finding.status) == ("memory", "problem")
    assert "PermissionError" in finding.detail and "/somewhere/memory" in finding.detail
    assert finding.fix
    fine = [Finding("memory", "ok", "private")]
    assert guarded("memory", lambda: fine) == fine


def test_doctor_shows_every_crash_and_failed_recall_the_daemon_recorded() -> None:
    at = "2026-12-01T00:00:00.000Z"
    recorded = [
        RecentError(at=at, kind=kind, message=f"{kind} happened")
        for kind in ("background_crashed", "background_stopped", "connection", "storage", "recall")
    ]
    # a minute after they were recorded (those naming no file count while recent)
    found = judge_daemon_errors(recorded, now=datetime.fromisoformat(at).timestamp() + 60)
    assert [(f.status, f.detail.split(" ")[1]) for f in found] == [
        ("problem", f"{e.kind}:") for e in recorded
    ]
    assert all(f.fix for f in found)


def test_doctor_leaves_the_database_files_private(orca_env: OrcaEnv) -> None:
    build_memory_database(orca_env.deliberate_db, records=10)
    old_umask = os.umask(0o022)  # a user's usual umask: doctor must not widen anything
    try:
        for _ in range(2):
            code, findings = doctor(orca_env)
            assert code == 0, [f for f in findings if f["status"] == "problem"]
    finally:
        os.umask(old_umask)
    for sibling in orca_env.config_dir.iterdir():
        assert sibling.stat().st_mode & 0o077 == 0, sibling


def test_orcad_that_cannot_write_its_pid_file_says_which_and_leaves_no_part_of_it(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    with small_filesystem(orca_env.home):
        (orca_env.home / "memory").mkdir(mode=0o700)
        filler = fill_up(orca_env.home)
        daemon = DaemonProcess(orca_env)
        daemon_factory.append(daemon)
        daemon.spawn()
        assert daemon.proc is not None
        assert daemon.proc.wait(timeout=30) == 1
        pid_file = orca_env.home / "memory" / "orcad.pid"
        assert str(pid_file) in daemon.stderr() and "No space left" in daemon.stderr()
        assert "Traceback" not in daemon.stderr()
        assert not pid_file.with_name("orcad.pid.tmp").exists()
        filler.unlink()
        daemon_factory.append(DaemonProcess(orca_env).start())  # room again: it starts
