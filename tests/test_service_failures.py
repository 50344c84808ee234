"""`orcactl service` stopped partway: what it reports of the steps it had already carried out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import OrcaEnv
from tests.test_service_units import ServiceCli

pytestmark = pytest.mark.daemon


def test_install_json_stopped_midway_lists_the_units_it_had_written(orca_env: OrcaEnv) -> None:
    # orcad.socket is written, then orcad.service cannot be: the failure document named
    # neither, so a script could not know a unit was left to clean up
    cli = ServiceCli(orca_env, fake_systemctl=True)
    (cli.unit_dir / "orcad.service.tmp").mkdir(parents=True)
    result = cli.run("install", "--json")
    assert result.returncode == 1
    error = json.loads(result.stdout)["error"]
    assert error["message"].startswith(f"cannot write {cli.unit_dir / 'orcad.service'}: ")
    written = {"action": "wrote", "path": str(cli.unit_dir / "orcad.socket")}
    assert error["data"] == {"kind": "failed", "dry_run": False, "steps": [written]}
    assert (cli.unit_dir / "orcad.socket").is_file()
    assert cli.systemctl_calls() == []


def test_install_json_stopped_at_a_directory_lists_both_units_written(orca_env: OrcaEnv) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    home_file = orca_env.root / "home-file"
    home_file.write_text("not a directory\n")
    cli.env["ORCA_HOME"] = str(home_file / "orca")
    result = cli.run("install", "--json")
    assert result.returncode == 1
    error = json.loads(result.stdout)["error"]
    assert error["message"] == (
        f"cannot create {home_file / 'orca'}: Not a directory; no later step was carried out"
    )
    units = [cli.unit_dir / "orcad.socket", cli.unit_dir / "orcad.service"]
    assert error["data"]["steps"] == [{"action": "wrote", "path": str(unit)} for unit in units]
    assert cli.systemctl_calls() == []


def test_a_relative_xdg_config_home_is_ignored_as_systemd_ignores_it(orca_env: OrcaEnv) -> None:
    # systemd looks in ~/.config/systemd/user then: install wrote under ./relative instead,
    # where the manager never looks, and status and uninstall looked there too
    cli = ServiceCli(orca_env, fake_systemctl=True)
    cli.env["XDG_CONFIG_HOME"] = "relative"
    where = Path(cli.env["HOME"]) / ".config" / "systemd" / "user"
    installed = subprocess.run(
        [sys.executable, "-m", "orcactl", "service", "install", "--json"],
        env=cli.env,
        cwd=orca_env.root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    assert sorted(path.name for path in where.iterdir()) == ["orcad.service", "orcad.socket"]
    assert not (orca_env.root / "relative").exists()
    status = json.loads(cli.run("status", "--json").stdout)
    assert status["files"] == {
        str(where / "orcad.socket"): "current",
        str(where / "orcad.service"): "current",
    }
    assert cli.run("uninstall").returncode == 0
    assert not where.exists()  # the units gone, and the directory install made for them
