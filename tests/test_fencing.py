"""Fencing with real processes: a worker frozen past its lease cannot write after a takeover."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orcad.clock import parse_time
from protocol.errors import RemoteError
from tests.external_worker import fact_output, read_job_file, turn_params
from tests.harness import REPO_ROOT, DaemonProcess, OrcaEnv

pytestmark = pytest.mark.crash

LEASE_S = 1.0


def start_worker(orca_env: OrcaEnv, name: str, fact: str, *, wait: bool) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "tests.external_worker",
        "--socket",
        str(orca_env.socket),
        "--worker",
        name,
        "--fact",
        fact,
        "--lease-s",
        str(LEASE_S),
    ]
    if wait:
        argv.append("--wait")
    return subprocess.Popen(
        argv,
        cwd=REPO_ROOT,
        env=orca_env.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def next_event(worker: subprocess.Popen[str]) -> dict[str, Any]:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    assert line, f"worker exited with {worker.wait()}"
    event: dict[str, Any] = json.loads(line)
    return event


def test_a_frozen_worker_cannot_publish_after_another_took_over(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    orca_env.write_config("[extraction]\nworkers = 0\n")  # only the external workers below
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    project = tmp_path / "project"
    project.mkdir()
    session = daemon.call("session.open", {"cwd": str(project)})
    admitted = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    job_id = admitted.job_id

    first = start_worker(orca_env, "first", "First worker's fact.", wait=True)
    second: subprocess.Popen[str] | None = None
    try:
        claim = next_event(first)
        assert claim["event"] == "claimed" and claim["job_id"] == job_id
        os.kill(first.pid, signal.SIGSTOP)  # frozen mid-attempt, lease still held
        expires = parse_time(claim["expires_at"])

        second = start_worker(orca_env, "second", "Second worker's fact.", wait=False)
        taken = next_event(second)
        assert taken["event"] == "claimed" and taken["job_id"] == job_id
        assert time.time() >= expires - 0.01  # it could only claim once the lease expired
        assert taken["token"] > claim["token"]
        assert next_event(second) == {"event": "published", "added": 1, "duplicates": 0}

        os.kill(first.pid, signal.SIGCONT)
        assert first.stdin is not None
        first.stdin.write("go\n")
        first.stdin.flush()
        assert next_event(first) == {"event": "refused", "code": -32011, "kind": "lease_lost"}
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                os.kill(process.pid, signal.SIGCONT)
                process.kill()
            if process is not None:
                process.wait(timeout=10)
                for stream in (process.stdin, process.stdout):
                    if stream is not None:
                        stream.close()

    inspected = daemon.call("projects.inspect", {"project_id": session.project.id})
    assert [c.fact for c in inspected.ledger.candidates] == ["Second worker's fact."]
    assert [c.model for c in inspected.ledger.candidates] == ["second"]
    job = read_job_file(orca_env.memory_root, session.project.id, job_id)
    assert job["state"] == "committed"
    assert job["attempts"] == 1  # the frozen worker's expired attempt
    assert job["errors"][0]["worker"] == "first"
    assert job["fence"] == taken["token"]


def daemon_with_a_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> tuple[DaemonProcess, str]:
    """A daemon without workers of its own, and a pending job for an outside worker."""
    orca_env.write_config("[extraction]\nworkers = 0\n")
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    project = tmp_path / "project"
    project.mkdir()
    session = daemon.call("session.open", {"cwd": str(project)})
    return daemon, daemon.call("turn.completed", turn_params(session, "t1")).job_id


def test_fencing_tokens_keep_increasing_across_a_restart(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon, job_id = daemon_with_a_job(orca_env, daemon_factory, tmp_path)
    before = daemon.call("jobs.claim", {"worker": "w", "lease_s": 30})
    daemon.call("jobs.release", {"job_id": job_id, "token": before.lease.token})
    held = daemon.call("jobs.claim", {"worker": "w", "lease_s": 30})
    daemon.restart()
    # the lease survives the restart: its holder can still renew; nobody else can claim it
    daemon.call("jobs.renew", {"job_id": job_id, "token": held.lease.token})
    assert daemon.call("jobs.claim", {"worker": "other"}).job is None
    daemon.call("jobs.release", {"job_id": job_id, "token": held.lease.token})
    after = daemon.call("jobs.claim", {"worker": "w"})
    assert [before.lease.token, held.lease.token, after.lease.token] == [1, 2, 3]


def test_a_worker_provider_or_model_name_over_256_characters_is_refused_and_changes_nothing(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # the worker's name is kept with the lease and its errors, the provider's and the model's
    # with every fact the job adds: each is bounded
    daemon, job_id = daemon_with_a_job(orca_env, daemon_factory, tmp_path)
    with pytest.raises(RemoteError) as caught:
        daemon.call("jobs.claim", {"worker": "w" * 257})
    assert caught.value.code == -32602 and "worker" in str(caught.value)
    [job] = daemon.call("jobs.list", {}).jobs
    assert job.state == "pending"
    held = daemon.call("jobs.claim", {"worker": "w" * 256, "lease_s": 30})
    output = fact_output("Deploys use make ship.")
    publish = {"job_id": job_id, "token": held.lease.token, "output": output}
    for names in ({"provider": "p" * 257, "model": "m"}, {"provider": "p", "model": "m" * 257}):
        with pytest.raises(RemoteError) as caught:
            daemon.call("jobs.publish", {**publish, **names})
        assert caught.value.code == -32602
    [job] = daemon.call("jobs.list", {}).jobs
    assert job.state == "leased"  # nothing was published
    done = daemon.call("jobs.publish", {**publish, "provider": "p" * 256, "model": "m" * 256})
    assert (done.state, done.added) == ("committed", 1)
