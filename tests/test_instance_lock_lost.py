"""A running daemon's lock file (`memory/orcad.lock`) deleted by hand, as a stale lock might
be: a second daemon must still not start on the same memory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon


def test_a_second_daemon_is_refused_after_the_first_ones_lock_file_was_deleted(
    orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    first_pid = daemon.call("daemon.ping").pid
    lock = orca_env.memory_root / "orcad.lock"
    pid_file = orca_env.memory_root / "orcad.pid"
    lock.unlink()
    for socket in (orca_env.socket, orca_env.root / "run" / "other.sock"):
        env = {**orca_env.env, "ORCA_SOCKET": str(socket)}
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
        assert f"pid {first_pid}" in second.stderr and str(lock) in second.stderr
        assert "Traceback" not in second.stderr
        assert not (orca_env.root / "run" / "other.sock").exists()
        # the first one is still named as the daemon of this memory, and still serves it
        assert json.loads(pid_file.read_bytes())["pid"] == first_pid
        assert daemon.call("daemon.ping").pid == first_pid
