"""A ledger orcad may not read (its mode changed by hand) is intact: what `orcactl inspect` and
`orcactl doctor` tell the user to do must not be to move it aside, which would start the
project's automatic memory again from nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.external_worker import wait_for
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_faults import orcactl, turn, workdir

pytestmark = pytest.mark.daemon

# root reads any file whatever its mode: without these it is refused as a user is
ROOTS_OVERRIDES = "-dac_override,-dac_read_search,-fowner"


class DaemonAsAUser(DaemonProcess):
    def spawn(self) -> subprocess.Popen[bytes]:
        prefix: list[str] = []
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("needs setpriv to run orcad as root without overriding permissions")
            prefix = [setpriv, "--bounding-set", ROOTS_OVERRIDES]
        with open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "orcad", *self.args],
                env=self.orca.env,
                cwd=self.orca.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        return self.proc


def test_a_ledger_orcad_may_not_read_is_not_to_be_moved_aside(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    daemon = DaemonAsAUser(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd})
    daemon.call("turn.completed", turn(session, "t1"))
    project_dir = orca_env.memory_root / "projects" / session.project.id
    ledger = project_dir / "candidates.jsonl"
    wait_for(lambda: daemon.call("projects.list").projects[0].candidates)
    ledger.chmod(0)
    try:
        inspected = orcactl(orca_env, "inspect", "--project", session.project.id, "--json")
        assert "Traceback" not in inspected.stderr, inspected.stderr
        damaged = json.loads(inspected.stdout)["damaged_file"]
        assert "Permission denied" in damaged["problem"], damaged
        assert f"mv {ledger}" not in damaged["fix"], damaged
        assert f"chmod u+rw {ledger}" in damaged["fix"], damaged
        doctor = orcactl(orca_env, "doctor", "--json", "--min-free-mb", "0")
        findings = json.loads(doctor.stdout)["findings"]
        [found] = [f for f in findings if f["check"] == "index" and f["status"] == "problem"]
        assert f"mv {ledger}" not in found["fix"], found
        assert f"chmod u+rw {ledger}" in found["fix"], found
    finally:
        ledger.chmod(0o600)
    # nothing was lost: once readable again it is read as it was, without a restart
    [project] = daemon.call("projects.list").projects
    assert project.candidates >= 1 and not project.corrupt
