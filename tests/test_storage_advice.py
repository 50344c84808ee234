"""A write refused for a full disk is answered with the file and with what to do, whichever
store raised it (README: When files are damaged or the disk is full)."""

from __future__ import annotations

import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import filelock
import pytest

from orcad.capture.projects import LOCK_FILE
from protocol.errors import RemoteError
from tests.faults_helpers import fill_up, small_filesystem
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_faults import recent, remote_error, start, turn, workdir
from tests.test_unreadable_ledger import DaemonAsAUser

pytestmark = pytest.mark.crash

ADVICE = "free disk space (or raise the quota) and try again"


def test_every_write_a_full_disk_refuses_says_what_to_do(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    with small_filesystem(orca_env.home), small_filesystem(orca_env.config_dir):
        daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
        session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
        ids = {"session_id": session.session_id, "epoch": session.epoch}
        fillers = [fill_up(orca_env.home), fill_up(orca_env.config_dir)]
        failing = {
            "turn.completed": turn(session, "t1"),
            "remember": {**ids, "text": "we deploy on Tuesdays " * 40, "scope": "project"},
            "memory.manage": {
                **ids,
                "action": "save",
                "content": "the release checklist lives in docs/release.md " * 20,
                "kind": "fact",
                "is_global": True,
            },
        }
        for method, params in failing.items():
            error = remote_error(daemon, method, params)
            assert (error.code, error.data.get("reason")) == (-32017, "disk_full"), error
            assert ADVICE in error.error.message, (method, error.error.message)
            assert error.error.message.count(ADVICE) == 1, error.error.message
        recorded = recent(daemon, "storage")
        for method in failing:
            assert any(m.startswith(f"{method}:") and ADVICE in m for m in recorded), recorded
        for filler in fillers:
            filler.unlink()
        assert daemon.call("turn.completed", turn(session, "t1")).job_id
        daemon.stop()


def test_a_lock_another_process_holds_on_memory_files_is_not_called_a_database(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # a project's lock or a memory file's lock held past its timeout is a file lock: the advice
    # for a database another process keeps locked (a sqlite3 shell, a backup) would send the
    # user looking for the wrong thing
    cwd = workdir(tmp_path)
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    project_file = daemon.call(
        "remember", {**ids, "text": "we deploy on Tuesdays", "scope": "project"}
    )
    user_file = daemon.call("remember", {**ids, "text": "I like short answers", "scope": "user"})
    locks = {
        "project": Path(project_file.path).parent / LOCK_FILE,
        "user": Path(user_file.path + ".lock"),
    }
    for scope, lock_file in locks.items():
        with filelock.FileLock(str(lock_file), timeout=0):
            error = remote_error(
                daemon, "remember", {**ids, "text": "we release on Fridays", "scope": scope}
            )
        assert (error.code, error.data.get("reason")) == (-32017, "locked"), error
        message = error.error.message
        assert "database" not in message and "sqlite3" not in message, (scope, message)
    daemon.stop()


class SizeLimitedDaemon(DaemonProcess):
    """orcad under a file size limit (`ulimit -f`), as a shell or a service may start it."""

    max_file_bytes = 256 * 1024

    @property
    def _needs_preparing(self) -> bool:
        return True

    def _prepare_child(self) -> None:
        super()._prepare_child()
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.max_file_bytes, self.max_file_bytes))


def first_refusal(
    daemon: DaemonProcess,
    method: str,
    params_of: Callable[[int], dict[str, Any]],
    attempts: int,
) -> RemoteError:
    """The error of the first of `attempts` calls (with params_of(number)) that is refused;
    the test fails if none is."""
    for number in range(attempts):
        try:
            daemon.call(method, params_of(number))
        except RemoteError as exc:
            return exc
    raise AssertionError(f"all {attempts} calls of {method} were answered: none met the limit")


def test_a_write_past_the_file_size_limit_says_so_and_what_to_do(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    orca_env.write_config("[extraction]\nworkers = 0\n")
    daemon = SizeLimitedDaemon(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    fact = "the deploy checklist says to tag the release and run make publish " * 25
    error = first_refusal(
        daemon,
        "remember",
        lambda number: {**ids, "text": f"{number}: {fact}", "scope": "project"},
        attempts=2 * SizeLimitedDaemon.max_file_bytes // len(fact),
    )
    assert (error.code, error.data.get("reason")) == (-32017, "file_too_large"), error
    assert error.data["path"].endswith("memory.md"), error.data
    assert "ulimit -f" in error.error.message, error.error.message
    assert any("ulimit -f" in m for m in recent(daemon, "storage"))
    daemon.stop()


def test_the_memory_database_past_the_file_size_limit_says_so_and_what_to_do(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # SQLite reports a write the limit refuses as a disk I/O error (or a full disk): the
    # advice to check dmesg, or to free space, would send the user the wrong way
    cwd = workdir(tmp_path)
    orca_env.write_config("[extraction]\nworkers = 0\n")
    daemon = SizeLimitedDaemon(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    fact = "the release checklist lives in docs/release.md and lists every step " * 8
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    error = first_refusal(
        daemon,
        "memory.manage",
        lambda number: {
            **ids,
            "action": "save",
            "content": f"{number}: {fact}",
            "kind": "fact",
            "is_global": True,
        },
        attempts=2 * SizeLimitedDaemon.max_file_bytes // len(fact),
    )
    assert (error.code, error.data.get("reason")) == (-32017, "file_too_large"), error
    assert "ulimit -f" in error.error.message, error.error.message
    assert "dmesg" not in error.error.message, error.error.message
    assert any("ulimit -f" in m for m in recent(daemon, "storage"))
    daemon.stop()


def test_a_file_orcad_may_not_write_names_the_permission_to_fix(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    orca_env.write_config("[extraction]\nworkers = 0\n")
    daemon = DaemonAsAUser(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    written = daemon.call("remember", {**ids, "text": "we deploy on Tuesdays", "scope": "project"})
    project_dir = Path(written.path).parent
    project_dir.chmod(0o500)
    try:
        error = remote_error(
            daemon, "remember", {**ids, "text": "we release on Fridays", "scope": "project"}
        )
    finally:
        project_dir.chmod(0o700)
    assert (error.code, error.data.get("reason")) == (-32017, "permission_denied"), error
    assert error.data["path"] == written.path, error.data
    assert "chmod u+rw" in error.error.message, error.error.message
    assert daemon.call("remember", {**ids, "text": "we release on Fridays", "scope": "project"})
    daemon.stop()


def test_a_database_whose_mode_forbids_writing_is_not_only_called_a_read_only_mount(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # SQLite opens a file it may not write read-only and reports SQLITE_READONLY, as for a
    # read-only file system: the advice must name the file's mode too
    cwd = workdir(tmp_path)
    orca_env.write_config("[extraction]\nworkers = 0\n")
    daemon = DaemonAsAUser(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    save = {
        "session_id": session.session_id,
        "epoch": session.epoch,
        "action": "save",
        "content": "the release checklist lives in docs/release.md",
        "kind": "fact",
        "is_global": True,
    }
    daemon.call("memory.manage", save)
    daemon.stop()
    orca_env.deliberate_db.chmod(0o400)
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    error = remote_error(
        daemon, "memory.manage", {**save, **ids, "content": "we deploy on Tuesdays from main"}
    )
    assert (error.code, error.data.get("reason")) == (-32017, "read_only"), error
    assert "chmod u+w" in error.error.message, error.error.message
    daemon.stop()
