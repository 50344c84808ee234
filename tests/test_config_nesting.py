"""A config file nested too deeply for Python's TOML reader (which recurses once per level), or
too large to be a config, is a config that does not parse: named at start, and at a session's
open logged with the last good value kept; never a traceback or an internal error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orcad.limits import CONFIG_FILE_MAX_BYTES
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

DEEP = "a = " + "[" * 1000 + "]" * 1000 + "\n"


def test_orcad_names_a_config_nested_too_deeply_at_start(orca_env: OrcaEnv) -> None:
    orca_env.write_config(DEEP)
    result = subprocess.run(
        [sys.executable, "-m", "orcad"],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    config = orca_env.home / "config.toml"
    assert f"orcad: {config}: not valid TOML: arrays or tables nested too deeply" in (result.stderr)


def test_a_trusted_projects_config_nested_too_deeply_leaves_sessions_opening(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / ".orca").mkdir(parents=True)
    (project / ".orca" / "config.toml").write_text("auto_memory = false\n")
    orca_env.write_config(f"trusted_projects = [{str(project)!r}]\n")
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    assert daemon.call("session.open", {"cwd": str(project)}).auto_memory is False
    (project / ".orca" / "config.toml").write_text(DEEP)
    opened = daemon.call("session.open", {"cwd": str(project)})
    assert opened.auto_memory is False  # the last good value read from that file
    events = [e for e in daemon.log_events() if e.get("event") == "config.project_unreadable"]
    assert events and "nested too deeply" in events[-1]["error"]


# valid TOML of one byte more than a config file may hold: a comment pads it
HUGE = "auto_memory = false\n#" + "x" * CONFIG_FILE_MAX_BYTES + "\n"


def test_orcad_refuses_a_config_too_large_at_start(orca_env: OrcaEnv) -> None:
    orca_env.write_config(HUGE)
    result = subprocess.run(
        [sys.executable, "-m", "orcad"],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    config = orca_env.home / "config.toml"
    assert f"orcad: {config}: larger than {CONFIG_FILE_MAX_BYTES} bytes" in result.stderr


def test_a_config_grown_too_large_keeps_the_last_good_value_at_open(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """Read again whole at each open: 100 MB of it made each take 1.4 s and 300 MB."""
    project = tmp_path / "project"
    project.mkdir()
    orca_env.write_config("auto_memory = true\n")
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    orca_env.write_config(HUGE)
    assert daemon.call("session.open", {"cwd": str(project)}).auto_memory is True
    events = [e for e in daemon.log_events() if e.get("event") == "config.unreadable_at_open"]
    assert events and "larger than" in events[-1]["error"]


def test_orcad_names_the_line_of_a_config_that_is_not_utf8(orca_env: OrcaEnv) -> None:
    """Python's own words named a byte offset ("position 41"), no line."""
    (orca_env.home / "config.toml").write_bytes(
        b'auto_memory = true\n[extraction.openai]\nmodel = "caf\xe9"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "orcad"],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    config = orca_env.home / "config.toml"
    assert f"orcad: {config}: not UTF-8 text, as TOML must be: line 3 holds the byte 0xe9" in (
        result.stderr
    )
