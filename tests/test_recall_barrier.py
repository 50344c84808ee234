"""The recall barrier against real capture: clear, timed_out, none; and the end-to-end path."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from orcad.limits import RECALL_BARRIER_S
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_recall_daemon import Agent, add_facts, project_dir, texts

DEPLOY_FACT = "This repository deploys with `make release`."


def turn_completed(agent: Agent, turn_id: str, user_text: str) -> dict[str, Any]:
    return {
        **agent.ids,
        "turn_id": turn_id,
        "outcome": "succeeded",
        "verifier": "passed",
        "transcript_committed": True,
        "messages": [
            {"role": "user", "content": user_text},
            {"role": "assistant", "content": "Noted."},
        ],
    }


def batch(socket_path: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Send the calls as one JSON-RPC batch: the daemon handles them in order, back to back."""
    requests = [
        {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        for number, (method, params) in enumerate(calls)
    ]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(30)
        connection.connect(str(socket_path))
        connection.sendall(json.dumps(requests).encode() + b"\n")
        received = b""
        while not received.endswith(b"\n"):
            chunk = connection.recv(65536)
            assert chunk, "the daemon closed the connection"
            received += chunk
    answers = json.loads(received)
    return sorted(answers, key=lambda answer: answer["id"])


def start(orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], config: str) -> DaemonProcess:
    orca_env.write_config(config)
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    return daemon.start()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


def test_remembered_fact_is_recalled_after_the_barrier_clears(
    daemon: DaemonProcess, orca_env: OrcaEnv, workdir: Path
) -> None:
    """End to end with the heuristic provider and the built-in workers."""
    agent = Agent(daemon, workdir, mode="normal")
    completed, recalled = batch(
        orca_env.socket,
        [
            ("turn.completed", turn_completed(
                agent, "turn-1", "remember that this repository deploys with `make release`"
            )),
            ("recall", {**agent.ids, "turn_id": "turn-2", "prompt": "How are we deploying?"}),
        ],
    )
    assert completed["result"]["eligible"] is True, completed
    result = recalled["result"]
    assert result["barrier"] == "clear"
    assert [entry["text"] for entry in result["automatic"]] == [DEPLOY_FACT]
    entry = result["automatic"][0]
    assert (entry["category"], entry["session_id"], entry["turn_id"]) == (
        "project", agent.session_id, "turn-1"
    )
    assert DEPLOY_FACT in result["context"]


def test_barrier_clears_when_an_external_worker_publishes_in_time(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    agent = Agent(daemon, workdir)
    job_id = daemon.call("turn.completed", turn_completed(agent, "t1", "we use trunk-based")).job_id
    answer: dict[str, Any] = {}

    def ask() -> None:
        started = time.monotonic()
        answer["result"] = agent.recall("which release branch model do we use", turn_id="t2")
        answer["elapsed"] = time.monotonic() - started

    asker = threading.Thread(target=ask)
    asker.start()
    deadline = time.monotonic() + RECALL_BARRIER_S
    while not any(e.get("event") == "recall.barrier_wait" for e in daemon.log_events()):
        assert time.monotonic() < deadline, "recall never reached the barrier"
        time.sleep(0.01)
    claimed = daemon.call("jobs.claim", {"worker": "test-worker"})
    assert claimed.job.job_id == job_id
    fact = json.dumps(
        {"category": "project", "fact": "The team uses trunk-based release branches."}
    )
    daemon.call(
        "jobs.publish",
        {"job_id": job_id, "token": claimed.lease.token, "output": fact, "provider": "test",
         "model": "none"},
    )
    asker.join(timeout=30)
    result = answer["result"]
    assert result.barrier == "clear"
    assert texts(result) == ["The team uses trunk-based release branches."]
    assert answer["elapsed"] < RECALL_BARRIER_S


@pytest.mark.slow
def test_barrier_times_out_and_answers_from_the_last_committed_ledger(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    agent = Agent(daemon, workdir)
    add_facts(project_dir(orca_env, agent.project_id), ["Deploys are announced in #releases."])
    completed = daemon.call(
        "turn.completed",
        turn_completed(agent, "t1", "remember that this repository deploys with `make release`"),
    )
    assert completed.eligible
    started = time.monotonic()
    result = agent.recall("how do deploys work", turn_id="t2")
    elapsed = time.monotonic() - started
    assert result.barrier == "timed_out"
    assert RECALL_BARRIER_S - 0.2 <= elapsed < RECALL_BARRIER_S + 3
    assert texts(result) == ["Deploys are announced in #releases."]
    jobs = daemon.call("jobs.list", {}).jobs
    assert [job.state for job in jobs] == ["pending"]  # the work is still there, not dropped


def test_barrier_is_none_when_nothing_is_queued(daemon: DaemonProcess, workdir: Path) -> None:
    agent = Agent(daemon, workdir)
    started = time.monotonic()
    assert agent.recall("anything at all").barrier == "none"
    assert time.monotonic() - started < RECALL_BARRIER_S


def test_other_sessions_jobs_do_not_hold_a_recall(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    busy = Agent(daemon, workdir)
    daemon.call("turn.completed", turn_completed(busy, "t1", "remember that we ship on Mondays"))
    other = Agent(daemon, workdir)
    assert other.recall("when do we ship").barrier == "none"
