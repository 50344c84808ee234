"""A running daemon's lock file (`memory/orcad.lock`) deleted by hand, as a stale lock might
be: a second daemon must still not start on the same memory."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import filelock
import pytest

from tests.external_worker import wait_for
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon


def test_a_second_daemon_is_refused_after_the_first_ones_lock_file_was_deleted(
    orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    first_pid = daemon.call("daemon.ping").pid
    lock = orca_env.memory_root / "orcad.lock"
    pid_file = orca_env.memory_root / "orcad.pid"
    lock.unlink()
    for socket_path in (orca_env.socket, orca_env.root / "run" / "other.sock"):
        env = {**orca_env.env, "ORCA_SOCKET": str(socket_path)}
        second = subprocess.run(
            [sys.executable, "-m", "orcad"],
            env=env,
            cwd=orca_env.root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert second.returncode != 0, second.stderr
        assert "already running on the memory" in second.stderr, second.stderr
        assert f"pid {first_pid}" in second.stderr
        # refused for the lock file it found gone; or, once the first daemon had made it again
        # (within a second: orcad.main.keep_instance_lock), for the lock held, as any second
        # start is (which of the two depends on how long this start took to get there)
        if str(lock) not in second.stderr:
            assert lock.exists() and "stop it first" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        assert not (orca_env.root / "run" / "other.sock").exists()
        # the first one is still named as the daemon of this memory, and still serves it
        assert json.loads(pid_file.read_bytes())["pid"] == first_pid
        assert daemon.call("daemon.ping").pid == first_pid


def test_a_pid_file_naming_a_live_process_that_is_no_orcad_does_not_stop_a_start(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # orcad.pid left by a daemon killed with SIGKILL, its pid since taken by another program,
    # its socket one that accepts but that no orcad answers on (systemd's, which a start under
    # socket activation inherits): that is no daemon serving this memory
    other = subprocess.Popen(["sleep", "60"])
    accepting = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    accepting.bind(str(tmp_path / "held.sock"))
    accepting.listen(16)
    orca_env.memory_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    pid_file = orca_env.memory_root / "orcad.pid"
    pid_file.write_text(json.dumps({"pid": other.pid, "socket": str(tmp_path / "held.sock")}))
    daemon = DaemonProcess(orca_env)
    try:
        daemon.start()
        assert daemon.call("daemon.ping").pid == json.loads(pid_file.read_bytes())["pid"]
        assert json.loads(pid_file.read_bytes())["pid"] != other.pid
    finally:
        daemon.stop()
        accepting.close()
        other.kill()
        other.wait()


def test_a_second_daemon_is_refused_after_the_whole_memory_root_was_deleted(
    orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # `rm -rf $ORCA_HOME/memory` takes orcad.lock and orcad.pid with it: the running daemon
    # makes them again, so a daemon started on another socket still finds the memory taken
    first_pid = daemon.call("daemon.ping").pid
    pid_file = orca_env.memory_root / "orcad.pid"
    shutil.rmtree(orca_env.memory_root)
    wait_for(pid_file.exists, timeout=10.0)
    assert json.loads(pid_file.read_bytes())["pid"] == first_pid
    other_socket = orca_env.root / "run" / "other.sock"
    second = subprocess.run(
        [sys.executable, "-m", "orcad"],
        env={**orca_env.env, "ORCA_SOCKET": str(other_socket)},
        cwd=orca_env.root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert second.returncode != 0, second.stderr
    assert "\norcad: another orcad is already running on the memory in " in second.stderr
    assert f"pid {first_pid}" in second.stderr
    assert not other_socket.exists()
    assert daemon.call("daemon.ping").pid == first_pid
    # once it stops, the lock it made again is let go: the next daemon starts
    daemon.stop()
    assert not pid_file.exists()
    daemon.start()
    assert json.loads(pid_file.read_bytes())["pid"] == daemon.call("daemon.ping").pid


def test_a_lock_file_deleted_again_and_again_leaves_no_descriptors_behind(
    orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # each lock file made again is locked on a descriptor of its own: once that file is
    # deleted too, its descriptor locks nothing anyone can open and must not be kept
    pid = daemon.call("daemon.ping").pid
    lock = orca_env.memory_root / "orcad.lock"

    def deleted_lock_files() -> int:
        found = 0
        for descriptor in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                found += os.readlink(descriptor) == f"{lock} (deleted)"
        return found

    for _ in range(4):
        inode = lock.stat().st_ino
        lock.unlink()
        wait_for(lambda: lock.exists() and lock.stat().st_ino != inode, timeout=10.0)  # noqa: B023
    # the lock taken at start stays open until the daemon stops; none of the ones made again
    assert deleted_lock_files() == 1
    assert daemon.call("daemon.ping").pid == pid
    daemon.stop()
    daemon.start()
    assert json.loads((orca_env.memory_root / "orcad.pid").read_bytes())["pid"] != pid


def test_a_pid_file_that_is_a_fifo_does_not_hold_a_start(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # a start reads orcad.pid to learn who holds the memory: a FIFO there must not be waited
    # on (no writer ever comes, and SIGTERM would not end the wait either)
    orca_env.memory_root.mkdir(mode=0o700)
    pid_file = orca_env.memory_root / "orcad.pid"
    os.mkfifo(pid_file, 0o600)
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.spawn()
    daemon.wait_ready(timeout=15)
    pid = daemon.call("daemon.ping").pid
    assert json.loads(pid_file.read_bytes())["pid"] == pid
    assert daemon.stop() == 0
    assert not pid_file.exists()


@pytest.mark.parametrize("name", ["orcad.pid", "orcad.pid.tmp"])
def test_a_directory_in_place_of_the_pid_file_is_named_with_what_to_do(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], name: str
) -> None:
    # the start stopped with a bare "[Errno 21] Is a directory: '.../orcad.pid'"
    odd = orca_env.memory_root / name
    odd.mkdir(mode=0o700, parents=True)
    (odd / "kept").write_text("not orcad's\n")
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.spawn()
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=30) == 1
    said = daemon.stderr()
    assert f"refusing to use {odd}: it is a directory" in said, said
    assert f"mv {odd} {odd}.not-a-file" in said and "Errno" not in said, said
    assert "Traceback" not in said
    assert (odd / "kept").read_text() == "not orcad's\n"  # left as found
    odd.rename(odd.with_name(f"{name}.not-a-file"))  # as it says
    started = DaemonProcess(orca_env)
    daemon_factory.append(started)
    started.start()
    pid = started.call("daemon.ping").pid
    assert json.loads((orca_env.memory_root / "orcad.pid").read_bytes())["pid"] == pid


@pytest.mark.parametrize("odd", ["fifo", "symlink"])
def test_what_stands_at_the_pid_files_temporary_is_not_written_through(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, odd: str
) -> None:
    # orcad.pid is written through orcad.pid.tmp: opening a FIFO there to write waited for a
    # reader that never came, so the start hung; a symbolic link there was followed, and the
    # file it named overwritten with the pid (and orcad.pid became that link)
    orca_env.memory_root.mkdir(mode=0o700)
    pid_file = orca_env.memory_root / "orcad.pid"
    temporary = pid_file.with_name("orcad.pid.tmp")
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not orcad's\n")
    if odd == "fifo":
        os.mkfifo(temporary, 0o600)
    else:
        temporary.symlink_to(elsewhere)
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.spawn()
    daemon.wait_ready(timeout=15)
    pid = daemon.call("daemon.ping").pid
    assert not pid_file.is_symlink()
    assert json.loads(pid_file.read_bytes())["pid"] == pid
    assert elsewhere.read_text() == "not orcad's\n"
    assert not temporary.exists() and not temporary.is_symlink()
    assert daemon.stop() == 0


def test_a_start_that_waited_for_a_holder_names_it_once_it_is_named(tmp_path: Path) -> None:
    # Two starts at once: the first has taken the lock but not yet written orcad.pid when the
    # second looks, and is serving by the time the second gives up. The second's error said
    # "another process" although orcad.pid named the first by then.
    orca = OrcaEnv(tmp_path, extra_env={"ORCA_SOCKET": str(tmp_path / "run2" / "orcad.sock")})
    orca.memory_root.mkdir(parents=True)
    serving = tmp_path / "first.sock"
    with (
        filelock.FileLock(str(orca.memory_root / "orcad.lock")),  # the first start's lock
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener,
    ):
        listener.bind(str(serving))
        listener.listen()
        second = DaemonProcess(orca)
        second.spawn()
        try:
            # its runtime directory made, it looks for the lock's holder just after
            wait_for((tmp_path / "run2").is_dir)
            time.sleep(0.5)
            named = orca.memory_root / "orcad.pid.new"
            named.write_text(json.dumps({"pid": os.getpid(), "socket": str(serving)}))
            named.rename(orca.memory_root / "orcad.pid")
            assert second.proc.wait(timeout=30) == 1
        finally:
            if second.proc.poll() is None:
                second.proc.kill()
                second.proc.wait()
    assert f"(pid {os.getpid()}, serving {serving})" in second.stderr()
