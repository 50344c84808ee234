"""The service's sandbox: systemd rates the unit's exposure 4.0 or lower, the directories orcad
writes stay writable (and exist), and `service install` takes only an executable --orcad."""

from __future__ import annotations

import json
import os
import plistlib
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orcactl import service_files
from orcactl.commands import service_steps
from tests.harness import REPO_ROOT, OrcaEnv
from tests.test_service_units import ServiceCli, read_unit

pytestmark = pytest.mark.daemon

MAX_EXPOSURE = 4.0
_EXPOSURE = re.compile(r"Overall exposure level for \S+: (\d+\.\d+)")
# The lines that only the sandbox adds (the unit before it rated 9.6 UNSAFE).
SANDBOX_ONLY = re.compile(
    r"^(Private|Protect|Restrict|SystemCall|Capability|Ambient|Lock|MemoryDeny|Keyring|ReadWrite)"
)


def security_exposure(unit: Path, tmp_path: Path) -> float:
    """`systemd-analyze security --offline=true --user` on one unit file: its exposure."""
    if shutil.which("systemd-analyze") is None:
        if sys.platform == "darwin":
            pytest.skip("systemd units are checked on Linux")
        pytest.fail("systemd-analyze is missing: apt-get install -y systemd")
    usage = subprocess.run(
        ["systemd-analyze", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    if "--offline" not in usage.stdout:
        pytest.skip("this systemd-analyze has no --offline (systemd 252 or later has)")
    runtime = tmp_path / "analyze-runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    result = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--user", "--no-pager", unit.name],
        cwd=unit.parent,
        env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime), HOME=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    found = _EXPOSURE.search(result.stdout + result.stderr)
    assert found, result.stdout + result.stderr
    return float(found.group(1))


def test_the_checked_in_unit_is_rated_4_or_lower(tmp_path: Path) -> None:
    unit = tmp_path / "orcad.service"
    shutil.copy(REPO_ROOT / "systemd" / "orcad.service", unit)
    assert security_exposure(unit, tmp_path) <= MAX_EXPOSURE


def test_the_rating_can_fail_without_the_sandbox(tmp_path: Path) -> None:
    unit = tmp_path / "orcad.service"
    text = service_files.reference_service_unit()
    bare = "\n".join(line for line in text.splitlines() if not SANDBOX_ONLY.match(line))
    unit.write_text(bare + "\n")
    assert security_exposure(unit, tmp_path) > 9.0


def test_the_installed_unit_is_rated_4_or_lower_and_carries_orca_paths(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    result = cli.run("install")
    assert result.returncode == 0, result.stderr
    installed = cli.unit_dir / "orcad.service"
    service = read_unit(installed.read_text())["Service"]
    environment = installed.read_text()
    assert f"Environment=ORCA_HOME={orca_env.home}\n" in environment
    assert f"Environment=ORCA_CONFIG_DIR={orca_env.config_dir}\n" in environment
    assert service["ReadWritePaths"].split() == [
        f"-{orca_env.home}",
        f"-{orca_env.config_dir}",
        "-%t/orca",
    ]
    assert service["ProtectSystem"] == "strict" and service["PrivateUsers"] == "yes"
    assert security_exposure(installed, tmp_path) <= MAX_EXPOSURE


def test_without_orca_variables_the_unit_writes_orcads_default_directories(
    orca_env: OrcaEnv,
) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    del cli.env["ORCA_HOME"], cli.env["ORCA_CONFIG_DIR"]
    user_home = Path(cli.env["HOME"])
    assert Path(cli.env["XDG_CONFIG_HOME"]) == user_home / ".config"
    result = cli.run("install")
    assert result.returncode == 0, result.stderr
    text = (cli.unit_dir / "orcad.service").read_text()
    assert "ORCA_HOME" not in text and "ORCA_CONFIG_DIR" not in text
    assert read_unit(text)["Service"]["ReadWritePaths"] == "-%h/.orca -%E/orcacode -%t/orca"
    # The sandboxed service cannot create them under a read-only home: install does, 0700.
    for directory in (user_home / ".orca", user_home / ".config" / "orcacode"):
        assert directory.is_dir() and directory.stat().st_mode & 0o777 == 0o700
        assert f"created {directory} (mode 0700)" in result.stdout.splitlines()


def test_paths_with_spaces_and_percent_stay_literal() -> None:
    assert service_files.systemd_path("/home/a b/50%") == '"-/home/a b/50%%"'
    assert service_files.systemd_path("/srv/orca") == "-/srv/orca"


def test_the_launchd_agent_carries_orca_paths(orca_env: OrcaEnv) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=False)
    result = cli.run("install", "--manager", "launchd", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    agent = plistlib.loads(json.loads(result.stdout)["steps"][0]["content"].encode())
    assert agent["EnvironmentVariables"]["ORCA_HOME"] == str(orca_env.home)
    assert agent["EnvironmentVariables"]["ORCA_CONFIG_DIR"] == str(orca_env.config_dir)


@pytest.mark.parametrize("kind", ["missing", "directory", "not executable"])
def test_install_refuses_an_orcad_that_is_not_an_executable(
    orca_env: OrcaEnv, tmp_path: Path, kind: str
) -> None:
    target = tmp_path / "orcad"
    if kind == "directory":
        target.mkdir()
    elif kind == "not executable":
        target.write_text("#!/bin/sh\n")
        target.chmod(0o644)
    cli = ServiceCli(orca_env, fake_systemctl=True)
    result = cli.run("install", "--orcad", str(target))
    assert result.returncode == 2
    reasons = {"missing": "does not exist", "directory": "is not a file"}
    reason = reasons.get(kind, "is not executable")
    assert f"argument --orcad: {target} {reason}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not cli.unit_dir.exists()
    assert cli.systemctl_calls() == []


def test_no_sandbox_installs_the_unit_without_it_and_status_accepts_it(orca_env: OrcaEnv) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    nothing = json.loads(cli.run("status", "--json").stdout)
    assert set(nothing["files"].values()) == {"missing"}
    assert nothing["sandbox"] is None  # no unit installed: neither with nor without a sandbox
    result = cli.run("install", "--no-sandbox")
    assert result.returncode == 0, result.stderr
    service = read_unit((cli.unit_dir / "orcad.service").read_text())["Service"]
    assert service["NoNewPrivileges"] == "yes"
    assert not any(SANDBOX_ONLY.match(key) for key in service)
    status = cli.run("status", "--json")
    report = json.loads(status.stdout)
    assert status.returncode == 0 and set(report["files"].values()) == {"current"}
    assert report["sandbox"] is False
    assert "sandbox: off (installed with --no-sandbox)" in cli.run("status").stdout
    assert cli.run("install").returncode == 0  # installing with the sandbox again restores it
    assert "ProtectSystem" in read_unit((cli.unit_dir / "orcad.service").read_text())["Service"]
    assert json.loads(cli.run("status", "--json").stdout)["sandbox"] is True
    service_unit = cli.unit_dir / "orcad.service"
    service_unit.write_text(service_unit.read_text() + "# edited by hand\n")
    edited = json.loads(cli.run("status", "--json").stdout)
    assert edited["files"][str(service_unit)] == "differs"
    assert edited["sandbox"] is None  # whether its sandbox holds is not known


def test_a_service_manager_command_that_hangs_is_a_failed_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(service_steps, "COMMAND_TIMEOUT_S", 0.2)
    steps = service_steps.Steps(dry_run=False, json=False)
    started = time.monotonic()
    assert steps.run(["sleep", "30"]) is False
    assert time.monotonic() - started < 10
    assert steps.failed and steps.finish("systemd") == 1
    assert capsys.readouterr().out == "failed: sleep 30: no answer within 0.2 s\n"
    assert steps.run(["/nonexistent/systemctl"]) is False  # not installed: a step, no traceback
