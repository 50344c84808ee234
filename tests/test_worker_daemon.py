"""Workers of a real daemon against real trouble: a provider that is down for a second, and a
project lock held by another process. (The timing rules themselves are tested with a
controllable clock in test_worker_resilience.py.)"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import filelock
import pytest

from orcad.clock import parse_time
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

T = TypeVar("T")

FLAKY_PROVIDER = """import sys, time
sys.stdin.read()
if time.time() < float(open(sys.argv[1]).read()):
    print("connection refused", file=sys.stderr)
    sys.exit(1)
print("NOTHING")
"""


def wait_for(check: Callable[[], T], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def start(orca: OrcaEnv, factory: list[DaemonProcess], config: str) -> DaemonProcess:
    orca.write_config(config)
    process = DaemonProcess(orca)
    factory.append(process)
    return process.start()


def workdir(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.mkdir()
    return os.path.realpath(path)


def turn(session: Any, turn_id: str) -> dict[str, Any]:
    return {
        "session_id": session.session_id,
        "epoch": session.epoch,
        "turn_id": turn_id,
        "outcome": "succeeded",
        "verifier": "none",
        "transcript_committed": True,
        "messages": [{"role": "user", "content": "we deploy with make release"}],
    }


def job_state(daemon: DaemonProcess, job_id: str) -> Any:
    return next(job for job in daemon.call("jobs.list").jobs if job.job_id == job_id)


@pytest.mark.slow
def test_a_provider_down_for_a_second_does_not_exhaust_the_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY_PROVIDER)
    back_at = tmp_path / "back_at"
    argv = json.dumps([sys.executable, str(script), str(back_at)])
    config = (  # the default back-off (retry_base_s = 2) and retries (3)
        f'[extraction]\nprovider = "command"\nworkers = 1\n[extraction.command]\nargv = {argv}\n'
    )
    daemon = start(orca_env, daemon_factory, config)
    session = daemon.call("session.open", {"cwd": workdir(tmp_path, "project")})
    back_at.write_text(str(time.time() + 1.0))  # the provider is down for one second
    job_id = daemon.call("turn.completed", turn(session, "t1")).job_id
    done = wait_for(lambda: (job := job_state(daemon, job_id)).state == "committed" and job, 30)
    assert done.attempts <= 2  # before: four attempts ~30 ms apart, all failed, exhausted
    claims = [e for e in daemon.log_events() if e.get("event") == "job.claimed"]
    gaps = [
        parse_time(b["timestamp"]) - parse_time(a["timestamp"])
        for a, b in itertools.pairwise(claims)
    ]
    assert all(gap >= 1.0 for gap in gaps), gaps  # each retry waited at least retry_base_s / 2


@pytest.mark.slow
def test_a_project_whose_lock_is_held_elsewhere_does_not_hold_up_other_projects(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 1\nreschedule_s = 4.0\n")
    locked = daemon.call("session.open", {"cwd": workdir(tmp_path, "locked")})
    free = daemon.call("session.open", {"cwd": workdir(tmp_path, "free")})
    lock_path = orca_env.memory_root / "projects" / locked.project.id / ".lock"
    other_process = filelock.FileLock(str(lock_path), thread_local=False)
    with other_process:
        held_job = daemon.call("turn.completed", turn(locked, "t1")).job_id  # the oldest
        free_job = daemon.call("turn.completed", turn(free, "t1")).job_id
        wait_for(lambda: job_state(daemon, free_job).state == "committed", 20)
        held = job_state(daemon, held_job)
        assert (held.state, held.attempts) == ("pending", 0)
        rescheduled = [e for e in daemon.log_events() if e.get("event") == "project.rescheduled"]
        assert [e["project_id"] for e in rescheduled] == [locked.project.id]
        assert not [e for e in daemon.log_events() if e.get("event") == "worker.rescheduled"]
    committed = wait_for(
        lambda: (job := job_state(daemon, held_job)).state == "committed" and job, 20
    )
    assert committed.attempts == 0  # held, not failed: no attempt was used
    claim = next(
        e
        for e in daemon.log_events()
        if e.get("event") == "job.claimed" and e.get("job_id") == held_job
    )
    waited = parse_time(claim["timestamp"]) - parse_time(rescheduled[0]["timestamp"])
    assert waited >= 4.0  # and no sooner than reschedule_s after the lock failure
    assert "job_store" in [e.kind for e in daemon.call("daemon.status").recent_errors]


def test_a_key_on_the_extractor_command_line_is_not_recorded_with_its_facts(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # llm, curl and friends take the key as an argument; the command line is the model name
    key = "sk-proj-" + "Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA9eK2"
    script = tmp_path / "extract.py"
    script.write_text(
        "import sys; sys.stdin.read()\n"
        'print(\'{"category": "project", "fact": "We deploy with make release."}\')\n'
    )
    argv = json.dumps([sys.executable, str(script), "--key", key])
    config = (
        f'[extraction]\nprovider = "command"\nworkers = 1\n[extraction.command]\nargv = {argv}\n'
    )
    daemon = start(orca_env, daemon_factory, config)
    session = daemon.call("session.open", {"cwd": workdir(tmp_path, "project")})
    job_id = daemon.call("turn.completed", turn(session, "t1")).job_id
    wait_for(lambda: job_state(daemon, job_id).state == "committed", 30)
    project = orca_env.memory_root / "projects" / session.project.id
    written = [path for path in project.rglob("*") if path.is_file()]
    assert {path.name for path in written} >= {"candidates.jsonl", "auto-memory.md"}
    assert [path.name for path in written if key.encode() in path.read_bytes()] == []
    ledger = (project / "candidates.jsonl").read_text()
    assert "--key [REDACTED:openai_api_key]" in ledger  # the rest of the command line stays
