"""The offline extractor in a real daemon: with the built-in model, its fact classifier keeps a
plainly stated fact no rule keeps, and says so in the fact's provenance; with recall's model
off, the rules alone run."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orcad.capture.ledger import read_ledger
from tests.external_worker import turn_params
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

PLAIN_FACT = "the billing service owns the invoices table; nobody else writes to it"
SETTLE_S = 60.0


def capture(daemon: DaemonProcess, project: Path, text: str) -> str:
    project.mkdir(parents=True, exist_ok=True)
    session = daemon.call("session.open", {"cwd": str(project)})
    result = daemon.call(
        "turn.completed", turn_params(session, "t1", f"fix the flaky webhook test. btw {text}")
    )
    assert result.eligible, result.reason
    job_id: str = result.job_id
    return job_id


def settled(orca_env: OrcaEnv, job_id: str) -> tuple[Path, dict[str, Any]]:
    """The job's file and record once it is committed or exhausted."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        for path in orca_env.memory_root.glob(f"projects/*/jobs/{job_id}.json"):
            try:
                record: dict[str, Any] = json.loads(path.read_bytes())
            except ValueError:
                continue  # being replaced
            if record["state"] in ("committed", "exhausted"):
                return path, record
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not settle in {SETTLE_S} s")


def run_daemon(orca_env: OrcaEnv, factory: list[DaemonProcess], config: str) -> DaemonProcess:
    orca_env.write_config(config)
    daemon = DaemonProcess(orca_env)
    factory.append(daemon)
    return daemon.start()


def test_the_classifier_keeps_a_plain_fact_and_names_itself_in_its_provenance(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = run_daemon(orca_env, daemon_factory, "")
    job_id = capture(daemon, tmp_path / "shop", PLAIN_FACT)
    path, record = settled(orca_env, job_id)
    assert record["state"] == "committed"
    assert record["provenance"]["provider"] == "heuristic"
    assert record["provenance"]["model"].startswith("fact-classifier-")
    [candidate] = read_ledger(path.parent.parent).candidates
    assert (candidate.category, candidate.fact) == (
        "project",
        "The billing service owns the invoices table; nobody else writes to it.",
    )
    assert candidate.model == record["provenance"]["model"]


def test_without_recalls_model_the_rules_alone_run(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = run_daemon(orca_env, daemon_factory, '[recall]\nembedding = "none"\n')
    job_id = capture(daemon, tmp_path / "shop", PLAIN_FACT)
    path, record = settled(orca_env, job_id)
    assert record["state"] == "committed"
    assert record["provenance"] == {
        "provider": "heuristic",
        "model": "",
        "prompt_version": "heuristic-v8",
    }
    assert read_ledger(path.parent.parent).candidates == ()


def status_once_loaded(daemon: DaemonProcess) -> Any:
    """daemon.status once recall's model has loaded (or failed to)."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        status = daemon.call("daemon.status")
        if status.embedding is None or status.embedding.state != "loading":
            return status
        time.sleep(0.05)
    raise AssertionError("the model did not load")


@pytest.mark.parametrize(
    ("config", "model", "shown"),
    [
        ("", "fact-classifier-", "heuristic (rules and fact-classifier-"),
        ('[recall]\nembedding = "none"\n', "", "heuristic (rules only"),
        ("[extraction]\nworkers = 0\n", None, "Provider: heuristic\n"),
    ],
    ids=["built-in model", "no model", "no worker"],
)
def test_status_says_whether_the_classifier_extracts(
    orca_env: OrcaEnv,
    daemon_factory: list[DaemonProcess],
    config: str,
    model: str | None,
    shown: str,
) -> None:
    daemon = run_daemon(orca_env, daemon_factory, config)
    status = status_once_loaded(daemon)
    if model is None:
        assert status.provider_model is None
    else:
        assert status.provider_model is not None
        assert status.provider_model.startswith(model)
        assert bool(status.provider_model) == bool(model)
    printed = subprocess.run(
        [sys.executable, "-m", "orcactl", "status", "--no-start"],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown in printed.stdout


def test_status_never_shows_a_key_on_the_commands_line(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # the command line is the command provider's model; provenance keeps it redacted, and so
    # must daemon.status, which any client may read, and orcactl status, which prints it
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    config = (
        '[extraction]\nprovider = "command"\n'
        f'[extraction.command]\nargv = ["{sys.executable}", "-c", "pass", "--token", "{key}"]\n'
    )
    daemon = run_daemon(orca_env, daemon_factory, config)
    status = status_once_loaded(daemon)
    assert status.provider_model is not None
    assert status.provider_model.startswith(sys.executable)
    assert key not in status.provider_model
    printed = subprocess.run(
        [sys.executable, "-m", "orcactl", "status", "--no-start", "--json"],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert key[:12] not in printed.stdout
    assert "Provider:" not in printed.stdout  # the JSON report, whole
    printed = subprocess.run(
        [sys.executable, "-m", "orcactl", "status", "--no-start"],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert f"Provider: command ({sys.executable} -c pass --token [REDACTED" in printed.stdout
    assert key[:12] not in printed.stdout
