"""Jobs through a real daemon whose openai provider talks to a scripted loopback server.

Each server behaviour must end in the right job state with the right attempt count; a stall
longer than the lease (but shorter than timeout_s) must not lose the job; SIGTERM during a call
releases the lease without using an attempt; no secret of the redaction corpus reaches the wire.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_openai import (
    Behaviour,
    FakeOpenAI,
    disconnect_mid_stream,
    junk,
    ok,
    stall_before_headers,
    status,
    streamed,
)
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

KEY_VARIABLE = "ORCA_JOBS_TEST_KEY"
KEY = "sk-jobs-test-0f3a9c2e7b5d41e8a6c3"
ANSWER = '{"category": "project", "fact": "This repository deploys with `make release`."}'
CORPUS = Path(__file__).parent / "corpus" / "secrets.jsonl"
SETTLE_S = 60.0


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as running:
        yield running


def configure(
    orca_env: OrcaEnv,
    server: FakeOpenAI,
    *,
    workers: int = 1,
    lease_s: float = 30.0,
    timeout_s: float = 4.0,
    idle_s: float = 1.0,
    max_retries: int = 1,
) -> None:
    orca_env.extra_env[KEY_VARIABLE] = KEY
    orca_env.write_config(
        "[extraction]\n"
        'provider = "openai"\n'
        f"workers = {workers}\n"
        f"lease_s = {lease_s}\n"
        f"timeout_s = {timeout_s}\n"
        f"max_retries = {max_retries}\n"
        "[extraction.openai]\n"
        f'base_url = "{server.base_url}"\n'
        'model = "jobs-test"\n'
        f'api_key_env = "{KEY_VARIABLE}"\n'
        "connect_timeout_s = 2.0\n"
        f"idle_timeout_s = {idle_s}\n"
    )


def capture_turn(daemon: DaemonProcess, project: Path, text: str, turn_id: str = "t1") -> str:
    project.mkdir(parents=True, exist_ok=True)
    session = daemon.call("session.open", {"cwd": str(project)})
    result = daemon.call(
        "turn.completed",
        {
            "session_id": session.session_id,
            "epoch": session.epoch,
            "turn_id": turn_id,
            "outcome": "succeeded",
            "verifier": "passed",
            "transcript_committed": True,
            "messages": [
                {"role": "user", "content": text},
                {"role": "assistant", "content": "Noted."},
            ],
        },
    )
    assert result.eligible, result.reason
    assert result.job_id is not None
    job_id: str = result.job_id
    return job_id


def job_file(orca_env: OrcaEnv, job_id: str) -> dict[str, Any]:
    [path] = orca_env.memory_root.glob(f"projects/*/jobs/{job_id}.json")
    record: dict[str, Any] = json.loads(path.read_bytes())
    return record


def wait_settled(orca_env: OrcaEnv, job_id: str) -> dict[str, Any]:
    """The job record once it is committed or exhausted (the worker runs on its own clock)."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        try:
            record = job_file(orca_env, job_id)
        except (ValueError, OSError):
            record = {"state": "unreadable"}
        if record["state"] in ("committed", "exhausted"):
            return record
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not settle: {job_file(orca_env, job_id)}")


FAIL_THEN_OK: dict[str, Behaviour] = {
    "http_500": status(500, "model crashed"),
    "silent_stall": streamed(ANSWER, stall_after_first_s=30.0),
    "junk_body": junk(),
    "junk_model_text": streamed("Sure! Here are some facts."),
    "mid_stream_disconnect": disconnect_mid_stream(ANSWER),
    "slower_than_timeout": streamed(ANSWER, chunk_chars=1, gap_s=0.3),
    "no_headers": stall_before_headers(30.0),
}


def started(orca_env: OrcaEnv, factory: list[DaemonProcess]) -> DaemonProcess:
    daemon = DaemonProcess(orca_env)
    factory.append(daemon)
    return daemon.start()


SUCCESS: dict[str, Behaviour] = {
    "streamed_in_small_chunks": streamed(ANSWER, chunk_chars=2),
    "not_streamed": ok(ANSWER),
}


@pytest.mark.parametrize("behaviour", SUCCESS.values(), ids=SUCCESS.keys())
def test_answer_commits_on_the_first_attempt(
    orca_env: OrcaEnv,
    daemon_factory: list[DaemonProcess],
    server: FakeOpenAI,
    tmp_path: Path,
    behaviour: Behaviour,
) -> None:
    configure(orca_env, server)
    server.script(behaviour)
    daemon = started(orca_env, daemon_factory)
    job_id = capture_turn(daemon, tmp_path / "project", "remember that we deploy with make release")
    record = wait_settled(orca_env, job_id)
    assert (record["state"], record["attempts"]) == ("committed", 0)
    assert record["provenance"] == {
        "provider": "openai",
        "model": "jobs-test",
        "prompt_version": "extract-v1",
    }
    [request] = server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("behaviour", FAIL_THEN_OK.values(), ids=FAIL_THEN_OK.keys())
def test_failed_attempt_then_success(
    orca_env: OrcaEnv,
    daemon_factory: list[DaemonProcess],
    server: FakeOpenAI,
    tmp_path: Path,
    behaviour: Behaviour,
) -> None:
    configure(orca_env, server)
    server.script(behaviour, streamed(ANSWER))
    daemon = started(orca_env, daemon_factory)
    job_id = capture_turn(daemon, tmp_path / "project", "remember that we deploy with make release")
    record = wait_settled(orca_env, job_id)
    assert (record["state"], record["attempts"]) == ("committed", 1)
    assert len(server.requests) == 2
    assert len(record["errors"]) == 1


def test_every_attempt_failing_exhausts_the_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], server: FakeOpenAI, tmp_path: Path
) -> None:
    configure(orca_env, server, max_retries=2)
    server.default = status(500, "still broken")
    daemon = started(orca_env, daemon_factory)
    job_id = capture_turn(daemon, tmp_path / "project", "remember that we deploy with make release")
    record = wait_settled(orca_env, job_id)
    assert (record["state"], record["attempts"]) == ("exhausted", 3)
    assert len(server.requests) == 3
    assert "HTTP 500" in record["errors"][-1]["message"]
    assert "still broken" in record["errors"][-1]["message"]


def test_429_retry_after_delays_the_next_attempt(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], server: FakeOpenAI, tmp_path: Path
) -> None:
    configure(orca_env, server)
    server.script(status(429, "slow down", retry_after="2"), streamed(ANSWER))
    daemon = started(orca_env, daemon_factory)
    job_id = capture_turn(daemon, tmp_path / "project", "remember that we deploy with make release")
    record = wait_settled(orca_env, job_id)
    assert (record["state"], record["attempts"]) == ("committed", 1)
    first, second = server.requests
    assert second.received_at - first.received_at >= 1.9


def test_stall_longer_than_the_lease_keeps_the_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], server: FakeOpenAI, tmp_path: Path
) -> None:
    # Silent for 3 lease lengths but within idle and timeout_s: renewal must keep the lease.
    # (A lease of 2 s, renewed every ~0.67 s: a loaded machine that stops the daemon for a
    # second between two renewals does not let it run out, as it did at 1 s.)
    configure(orca_env, server, workers=2, lease_s=2.0, timeout_s=20.0, idle_s=10.0)
    server.script(streamed(ANSWER, stall_after_first_s=6.0), streamed(ANSWER))
    daemon = started(orca_env, daemon_factory)
    job_id = capture_turn(daemon, tmp_path / "project", "remember that we deploy with make release")
    record = wait_settled(orca_env, job_id)
    assert (record["state"], record["attempts"]) == ("committed", 0)
    assert len(server.requests) == 1  # no second worker took the job over
    assert record["errors"] == []


def test_sigterm_during_a_call_releases_without_using_an_attempt(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], server: FakeOpenAI, tmp_path: Path
) -> None:
    configure(orca_env, server, timeout_s=60.0, idle_s=60.0)
    server.script(streamed(ANSWER, stall_after_first_s=60.0))
    daemon = started(orca_env, daemon_factory)
    job_id = capture_turn(daemon, tmp_path / "project", "remember that we deploy with make release")
    server.wait_for_requests(1)
    assert daemon.stop(signal.SIGTERM) == 0
    record = job_file(orca_env, job_id)
    assert (record["state"], record["attempts"], record["lease"]) == ("pending", 0, None)
    server.script(streamed(ANSWER))
    daemon.start()
    record = wait_settled(orca_env, job_id)
    assert (record["state"], record["attempts"]) == ("committed", 0)


def test_no_corpus_secret_reaches_the_request_body(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], server: FakeOpenAI, tmp_path: Path
) -> None:
    records = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    configure(orca_env, server)
    server.default = streamed("NOTHING")
    daemon = started(orca_env, daemon_factory)
    chunks = [records[i : i + 40] for i in range(0, len(records), 40)]
    job_ids = [
        capture_turn(
            daemon, tmp_path / "project", "\n".join(r["text"] for r in chunk), turn_id=f"t{n}"
        )
        for n, chunk in enumerate(chunks)
    ]
    for job_id in job_ids:
        assert wait_settled(orca_env, job_id)["state"] == "committed"
    bodies = "\n".join(request.body.decode("utf-8") for request in server.requests)
    assert len(server.requests) == len(chunks)
    assert [r["secret"] for r in records if r["secret"] in bodies] == []
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)
