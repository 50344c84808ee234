"""A memory root an older orcad wrote, taken over by this one: what it left is brought up to
date without waiting for the user to visit each project."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orcad.capture import ledger, projections, projects
from protocol.types import ExtractedFact
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

OLD_FORMAT = "1"  # the index format of the versions before control characters were words


def doctor_findings(orca: OrcaEnv) -> tuple[int, list[dict[str, Any]]]:
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", "doctor", "--json"],
        env=orca.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return result.returncode, json.loads(result.stdout)["findings"]


def index_problems(findings: list[dict[str, Any]]) -> list[str]:
    return [f["detail"] for f in findings if f["check"] == "index" and f["status"] == "problem"]


def project_with_facts(orca: OrcaEnv, project_id: str, facts: list[str]) -> tuple[Path, Any]:
    directory = orca.memory_root / "projects" / project_id
    old_umask = os.umask(0o077)
    try:
        projects.ensure_directories(directory)
    finally:
        os.umask(old_umask)
    provenance = ledger.Provenance("ses_old", "t1", "heuristic", "", "heuristic-v2")
    extracted = [ExtractedFact(category="project", fact=fact) for fact in facts]
    written, _ = ledger.merge_job_candidates(
        ledger.Ledger(), "job_" + "0" * 32, extracted, provenance, time.time()
    )
    ledger.write_ledger(directory, written)
    return directory, written


def test_indexes_an_older_version_left_are_rebuilt_after_a_start_without_a_recall(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # one project's index is of the older format, another project has none: neither is
    # visited after the upgrade, and doctor, which says a restart rebuilds them, must not go
    # on reporting them
    older, older_ledger = project_with_facts(
        orca_env, "b" * 64, ["The staging cluster is named kestrel.", "Deploys use make ship."]
    )
    projections.write_index(older, older_ledger)
    with sqlite3.connect(projections.index_path(older)) as connection:
        connection.execute("UPDATE meta SET value = ? WHERE key = 'format'", (OLD_FORMAT,))
    connection.close()
    missing, missing_ledger = project_with_facts(orca_env, "c" * 64, ["We use postgres 16."])
    assert projections.index_state(older, older_ledger) == "stale"
    assert projections.index_state(missing, missing_ledger) == "missing"
    code, findings = doctor_findings(orca_env)
    assert code == 1 and len(index_problems(findings)) == 2, findings

    orca_env.write_config('[extraction]\nworkers = 0\n[recall]\nembedding = "none"\n')
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    deadline = time.monotonic() + 15
    states: tuple[str, str] = ("", "")
    while time.monotonic() < deadline:
        states = (
            projections.index_state(older, older_ledger),
            projections.index_state(missing, missing_ledger),
        )
        if states == ("current", "current"):
            break
        time.sleep(0.1)
    assert states == ("current", "current"), daemon.stderr()
    code, findings = doctor_findings(orca_env)
    assert index_problems(findings) == [], findings
    assert code == 0, findings
    assert ledger.read_ledger(older) == older_ledger  # the ledger itself is not touched


@pytest.mark.parametrize(
    ("origin", "identity_then"),
    [
        # the identity earlier versions gave such a clone's project (project.json keeps it)
        ("gcrypt::git@github.com:acme/secret-repo.git", "gcrypt/:git@github.com:acme/secret-repo"),
        ("hg::hg@hg.example.org:acme/app", "hg/:hg@hg.example.org:acme/app"),
    ],
)
def test_a_clone_through_a_remote_helper_finds_the_memory_it_had(
    orca_env: OrcaEnv,
    daemon_factory: list[DaemonProcess],
    tmp_path: Path,
    origin: str,
    identity_then: str,
) -> None:
    # a helper's scp-like address with a user, as git-remote-gcrypt documents it: the
    # project's directory of before must still be the one its sessions use
    project_id = hashlib.sha256(identity_then.encode()).hexdigest()
    directory, _ = project_with_facts(orca_env, project_id, ["Releases are cut with zorkship."])
    (directory / "memory.md").write_text("- The deploy target is kestrel.\n", encoding="utf-8")
    clone = tmp_path / "clone"
    clone.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=clone, check=True)
    subprocess.run(["git", "remote", "add", "origin", origin], cwd=clone, check=True)

    orca_env.write_config('[extraction]\nworkers = 0\n[recall]\nembedding = "none"\n')
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": str(clone)})
    assert (session.project.id, session.project.identity) == (project_id, identity_then)
    assert "kestrel" in session.startup.project
    recalled = daemon.call(
        "recall",
        {
            "session_id": session.session_id,
            "epoch": session.epoch,
            "turn_id": "t1",
            "prompt": "how are releases cut with zorkship",
        },
    )
    assert [entry.text for entry in recalled.automatic] == ["Releases are cut with zorkship."]
    assert sorted(p.name for p in (orca_env.memory_root / "projects").iterdir()) == [project_id]
