"""The recall barrier against real capture: clear, timed_out, none; and the end-to-end path."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import filelock
import pytest

from orcad.capture.projects import LOCK_FILE
from orcad.clock import parse_time
from orcad.limits import RECALL_BARRIER_S
from tests.external_worker import job_file
from tests.fake_openai import FakeOpenAI, status
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_recall_daemon import Agent, add_facts, project_dir, texts

pytestmark = pytest.mark.daemon

DEPLOY_FACT = "This repository deploys with `make release`."
# what a turn waits at most, as the spec gives it (Capture and Recovery: a five-second bounded
# barrier), not as limits.py names it: a change there is a change users wait for
SPEC_BARRIER_S = 5.0


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


def attend(daemon: DaemonProcess) -> None:
    """Ask for a job as an external worker does between jobs, for a project with none: with
    no built-in workers, the barrier waits for a queued job only while one asks."""
    assert daemon.call("jobs.claim", {"worker": "test-worker", "project_id": "0" * 64}).job is None


def wait_until_recall_waits_at_the_barrier(daemon: DaemonProcess) -> None:
    """The recall has fixed the jobs it waits for once this event is in the log."""
    deadline = time.monotonic() + RECALL_BARRIER_S
    while not any(e.get("event") == "recall.barrier_wait" for e in daemon.log_events()):
        assert time.monotonic() < deadline, "recall never reached the barrier"
        time.sleep(0.01)


def test_remembered_fact_is_recalled_after_the_barrier_clears(
    daemon: DaemonProcess, orca_env: OrcaEnv, workdir: Path
) -> None:
    """End to end with the heuristic provider and the built-in workers.

    The test holds the project's cross-process lock (as another orcad or orcactl would) from
    before the turn is reported until the recall waits at the barrier: admission needs no lock,
    but a worker cannot claim the job without it, so the job is certainly still queued when the
    recall arrives, whatever the scheduling.
    """
    agent = Agent(daemon, workdir, mode="normal")
    lock = filelock.FileLock(project_dir(orca_env, agent.project_id) / LOCK_FILE)
    answer: dict[str, Any] = {}

    def ask() -> None:
        answer["result"] = agent.recall("How are we deploying?", turn_id="turn-2")

    asker = threading.Thread(target=ask)
    with lock:
        completed = daemon.call(
            "turn.completed",
            turn_completed(
                agent, "turn-1", "remember that this repository deploys with `make release`"
            ),
        )
        assert completed.eligible is True, completed
        asker.start()
        wait_until_recall_waits_at_the_barrier(daemon)
        assert daemon.call("jobs.list", {}).jobs[0].state in ("pending", "leased")
    asker.join(timeout=30)
    result = answer["result"]
    assert result.barrier == "clear"
    assert texts(result) == [DEPLOY_FACT]
    entry = result.automatic[0]
    assert (entry.category, entry.session_id, entry.turn_id) == (
        "project",
        agent.session_id,
        "turn-1",
    )
    assert DEPLOY_FACT in result.context


def test_barrier_clears_when_an_external_worker_publishes_in_time(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    agent = Agent(daemon, workdir)
    attend(daemon)
    job_id = daemon.call("turn.completed", turn_completed(agent, "t1", "we use trunk-based")).job_id
    answer: dict[str, Any] = {}

    def ask() -> None:
        started = time.monotonic()
        answer["result"] = agent.recall("which release branch model do we use", turn_id="t2")
        answer["elapsed"] = time.monotonic() - started

    asker = threading.Thread(target=ask)
    asker.start()
    wait_until_recall_waits_at_the_barrier(daemon)
    claimed = daemon.call("jobs.claim", {"worker": "test-worker"})
    assert claimed.job.job_id == job_id
    fact = json.dumps(
        {"category": "project", "fact": "The team uses trunk-based release branches."}
    )
    daemon.call(
        "jobs.publish",
        {
            "job_id": job_id,
            "token": claimed.lease.token,
            "output": fact,
            "provider": "test",
            "model": "none",
        },
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
    attend(daemon)  # an external worker is about, but too busy to take the job in time
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
    assert SPEC_BARRIER_S - 0.2 <= elapsed < SPEC_BARRIER_S + 3
    # the wait itself, as the daemon timed it: without the client's and the search's share of
    # `elapsed`, a barrier a second longer than the spec's shows
    waited = [
        parse_time(event["timestamp"])
        for event in daemon.log_events()
        if event.get("event") in ("recall.barrier_wait", "recall.barrier_done")
    ]
    assert len(waited) == 2
    assert SPEC_BARRIER_S - 0.05 <= waited[1] - waited[0] < SPEC_BARRIER_S + 0.9
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


def test_jobs_of_another_project_the_session_id_was_opened_in_do_not_hold_a_recall(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path, tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    attend(daemon)
    first = Agent(daemon, workdir, session_id="ses_moved")
    completed = daemon.call(
        "turn.completed", turn_completed(first, "t1", "remember that we ship on Mondays")
    )
    assert completed.eligible
    daemon.call("session.close", first.ids)
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    moved = Agent(daemon, elsewhere, session_id="ses_moved")  # its queued job cannot change
    assert moved.project_id != first.project_id  # what this project recalls
    started = time.monotonic()
    assert moved.recall("when do we ship").barrier == "none"
    assert time.monotonic() - started < RECALL_BARRIER_S / 2
    back = Agent(daemon, workdir, session_id="ses_moved")  # the job's project: it is waited for
    assert back.recall("when do we ship").barrier == "timed_out"
    assert [job.state for job in daemon.call("jobs.list", {}).jobs] == ["pending"]


def test_a_job_held_for_a_damaged_ledger_does_not_hold_every_recall(
    daemon: DaemonProcess, orca_env: OrcaEnv, workdir: Path
) -> None:
    agent = Agent(daemon, workdir, mode="normal")
    directory = project_dir(orca_env, agent.project_id)
    add_facts(directory, [DEPLOY_FACT])
    (directory / "candidates.jsonl").write_text("not a ledger\n")
    completed = daemon.call(
        "turn.completed", turn_completed(agent, "turn-1", "remember that we deploy on Tuesdays")
    )
    assert completed.eligible is True
    deadline = time.monotonic() + 10
    while not any(
        e.kind == "ledger_corrupt" for e in daemon.call("daemon.status", {}).recent_errors
    ):
        assert time.monotonic() < deadline, "the damaged ledger was never noticed"
        time.sleep(0.05)
    assert daemon.call("jobs.list", {}).jobs[0].state == "pending"  # held, not running
    for turn in ("turn-2", "turn-3"):
        started = time.monotonic()
        result = agent.recall("how do we deploy", turn_id=turn)
        assert time.monotonic() - started < RECALL_BARRIER_S / 2
        assert result.barrier == "none"


def _recalls_do_not_wait_for_a_queued_job(daemon: DaemonProcess, agent: Agent) -> None:
    """A turn's job stays queued, and recalls after it do not wait the bound for it."""
    completed = daemon.call("turn.completed", turn_completed(agent, "t1", "remember we ship"))
    assert completed.eligible
    for turn in ("t2", "t3"):
        started = time.monotonic()
        assert agent.recall("when do we ship", turn_id=turn).barrier == "none"
        assert time.monotonic() - started < RECALL_BARRIER_S / 2
    assert [job.state for job in daemon.call("jobs.list", {}).jobs] == ["pending"]  # kept


def test_a_job_queued_after_auto_memory_was_switched_off_does_not_hold_every_recall(
    daemon: DaemonProcess, orca_env: OrcaEnv, workdir: Path
) -> None:
    # the session opened with auto memory on keeps capturing (its snapshot), but the workers
    # follow the current switch and leave the job queued: waiting for it cost every turn 5 s
    agent = Agent(daemon, workdir)
    assert agent.opened.auto_memory is True
    orca_env.write_config("auto_memory = false\n")
    _recalls_do_not_wait_for_a_queued_job(daemon, agent)


def test_a_job_no_worker_asks_for_does_not_hold_every_recall(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    # no built-in workers and no external worker about: waiting for one cost every turn 5 s
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\nlease_s = 2\n")
    agent = Agent(daemon, workdir)
    _recalls_do_not_wait_for_a_queued_job(daemon, agent)
    attend(daemon)  # one asks: the next turn waits for it (it may take the job)
    started = time.monotonic()
    assert agent.recall("when do we ship", turn_id="t4").barrier == "timed_out"
    assert time.monotonic() - started >= RECALL_BARRIER_S - 0.2
    time.sleep(2.2)  # and once it has not asked for lease_s, no longer
    started = time.monotonic()
    assert agent.recall("when do we ship", turn_id="t5").barrier == "none"
    assert time.monotonic() - started < RECALL_BARRIER_S / 2


def test_a_job_no_provider_can_take_does_not_hold_every_recall(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    # a provider that cannot be built (its key variable is not in orcad's environment): no
    # built-in worker runs, and waiting for one added the whole bound to every turn
    daemon = start(
        orca_env,
        daemon_factory,
        "[extraction]\nprovider = 'openai'\n[extraction.openai]\n"
        "base_url = 'https://api.example.com/v1'\napi_key_env = 'ORCA_TEST_UNSET_KEY'\n",
    )
    assert any(e.kind == "provider_config" for e in daemon.call("daemon.status").recent_errors)
    agent = Agent(daemon, workdir)
    _recalls_do_not_wait_for_a_queued_job(daemon, agent)


def test_a_job_waiting_out_a_retry_after_does_not_hold_every_recall(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    # a 503 asking for two minutes: the job may not be claimed before the barrier ends
    with FakeOpenAI(default=status(503, "overloaded", retry_after="120")) as server:
        daemon = start(
            orca_env,
            daemon_factory,
            "[extraction]\nprovider = 'openai'\n"
            f"[extraction.openai]\nbase_url = '{server.base_url}'\n",
        )
        agent = Agent(daemon, workdir)
        daemon.call("turn.completed", turn_completed(agent, "t1", "remember that we ship"))
        deadline = time.monotonic() + 10
        while daemon.call("jobs.list", {}).jobs[0].attempts == 0:
            assert time.monotonic() < deadline, "the provider was never asked"
            time.sleep(0.05)
        for turn in ("t2", "t3"):
            started = time.monotonic()
            assert agent.recall("when do we ship", turn_id=turn).barrier == "none"
            assert time.monotonic() - started < RECALL_BARRIER_S / 2
        [job] = daemon.call("jobs.list", {}).jobs
        assert (job.state, job.attempts) == ("pending", 1)  # still waiting, not dropped


def test_a_job_whose_wait_was_edited_past_any_orcad_sets_holds_the_recall_as_a_claimable_one(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    # not_before in year 9999 counts as passed (a worker may claim the job at once), so the
    # barrier waits for it as for any claimable job and the recall holds what it publishes
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
    agent = Agent(daemon, workdir)
    job_id = daemon.call("turn.completed", turn_completed(agent, "t1", "we use trunk-based")).job_id
    daemon.stop()
    path = job_file(orca_env.memory_root, agent.project_id, job_id)
    stored = json.loads(path.read_text())
    stored["not_before"] = "9999-12-31T23:59:59.000Z"
    path.write_text(json.dumps(stored))
    daemon.start()
    attend(daemon)
    answer: dict[str, Any] = {}

    def ask() -> None:
        answer["result"] = agent.recall("which release branch model do we use", turn_id="t2")

    asker = threading.Thread(target=ask)
    asker.start()
    wait_until_recall_waits_at_the_barrier(daemon)
    claimed = daemon.call("jobs.claim", {"worker": "test-worker"})
    assert claimed.job.job_id == job_id
    fact = json.dumps({"category": "project", "fact": "The team uses trunk-based branches."})
    daemon.call(
        "jobs.publish",
        {
            "job_id": job_id,
            "token": claimed.lease.token,
            "output": fact,
            "provider": "test",
            "model": "none",
        },
    )
    asker.join(timeout=30)
    assert answer["result"].barrier == "clear"
    assert texts(answer["result"]) == ["The team uses trunk-based branches."]
