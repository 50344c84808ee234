"""turn.completed and the jobs.* lease engine against a real daemon: each rule at its boundary."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import filelock
import pytest

from orcad import limits
from orcad.app import RECENT_ERRORS_KEPT
from orcad.clock import parse_time
from protocol.errors import RemoteError
from tests.external_worker import fact_output, job_file, read_job_file, turn_params, wait_for
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon


def start(orca_env: OrcaEnv, factory: list[DaemonProcess], config: str = "") -> DaemonProcess:
    orca_env.write_config(config)
    process = DaemonProcess(orca_env)
    factory.append(process)
    return process.start()


def project_dir(tmp_path: Path, name: str = "project") -> Path:
    path = tmp_path / name
    path.mkdir(exist_ok=True)
    return Path(os.path.realpath(path))


def remote_error(daemon: DaemonProcess, method: str, params: dict[str, Any]) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        daemon.call(method, params)
    return caught.value


NO_WORKERS = "[extraction]\nworkers = 0\nretry_base_s = 0.0\n"  # these count attempts, not waits


# --- eligibility over the wire ------------------------------------------------------------------


def test_ineligible_turns_create_no_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    cwd = str(project_dir(tmp_path))
    session = daemon.call("session.open", {"cwd": cwd})
    cases = [
        ({"root": False}, "not_root"),
        ({"subagent": True}, "subagent"),
        ({"outcome": "failed"}, "failed"),
        ({"outcome": "cancelled"}, "cancelled"),
        ({"verifier": "failed"}, "verifier_failed"),
        ({"transcript_committed": False}, "transcript_not_committed"),
        (
            {
                "messages": [
                    {"role": "system", "content": "be helpful"},
                    {"role": "tool", "content": "$ make\nok"},
                    {"role": "user", "content": "   "},
                ]
            },
            "no_content",
        ),
    ]
    for changes, reason in cases:
        result = daemon.call("turn.completed", turn_params(session, "t", "We use pnpm.", **changes))
        assert (result.eligible, result.reason, result.job_id) == (False, reason, None)
    for options, reason in [
        ({"bare": True}, "bare"),
        ({"history": "disabled"}, "history_disabled"),
    ]:
        other = daemon.call("session.open", {"cwd": cwd, **options})
        result = daemon.call("turn.completed", turn_params(other, "t", "We use pnpm."))
        assert (result.eligible, result.reason) == (False, reason)
    assert daemon.call("jobs.list", {}).jobs == []
    ok = daemon.call("turn.completed", turn_params(session, "t", "We use pnpm.", verifier="none"))
    assert ok.eligible and ok.reason is None and ok.job_id.startswith("job_")


def test_auto_memory_off_captures_nothing_and_writes_no_file(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "auto_memory = false\n")
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    assert session.auto_memory is False
    result = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    assert (result.eligible, result.reason) == (False, "auto_memory_disabled")
    assert not (orca_env.memory_root / "projects").exists()


@pytest.mark.parametrize("broken", ["auto_memory = false\nembedding = \n", "auto_memory = f"])
def test_a_config_broken_after_auto_memory_was_switched_off_keeps_it_off(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, broken: str
) -> None:
    # a typo, or an editor halfway through writing the file: its last good value holds, not
    # the value orcad started with, which turned capture back on for a user who turned it off
    daemon = start(orca_env, daemon_factory)
    orca_env.write_config("auto_memory = false\n")
    assert daemon.call("session.open", {"cwd": str(project_dir(tmp_path))}).auto_memory is False
    orca_env.write_config(broken)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    assert session.auto_memory is False
    result = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    assert (result.eligible, result.reason) == (False, "auto_memory_disabled")
    assert "config.unreadable_at_open" in [e.get("event") for e in daemon.log_events()]


def test_same_session_turn_and_source_is_one_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    first = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    again = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.job_id == first.job_id
    other_text = daemon.call("turn.completed", turn_params(session, "t1", "We use yarn."))
    other_turn = daemon.call("turn.completed", turn_params(session, "t2", "We use pnpm."))
    assert len({first.job_id, other_text.job_id, other_turn.job_id}) == 3
    # system and tool messages are not part of the source, so they do not make a new job
    with_tool = turn_params(session, "t1", "We use pnpm.")
    with_tool["messages"].insert(0, {"role": "tool", "content": "noise"})
    assert daemon.call("turn.completed", with_tool).job_id == first.job_id
    daemon.restart()
    after = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    assert (after.job_id, after.duplicate) == (first.job_id, True)


def test_a_turn_reported_again_from_another_project_is_the_same_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # the session id opened again (a resumed agent) in another project reports a turn it
    # already reported: same session, turn and text are one job, wherever the report comes from
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    first_session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path, "first"))})
    first = daemon.call("turn.completed", turn_params(first_session, "t1", "We use pnpm."))
    reopened = daemon.call(
        "session.open",
        {"cwd": str(project_dir(tmp_path, "second")), "session_id": first_session.session_id},
    )
    assert reopened.project.id != first_session.project.id
    again = daemon.call("turn.completed", turn_params(reopened, "t1", "We use pnpm."))
    assert (again.job_id, again.duplicate) == (first.job_id, True)
    files = list((orca_env.memory_root / "projects").glob(f"*/jobs/{first.job_id}.json"))
    assert files == [job_file(orca_env.memory_root, first_session.project.id, first.job_id)]
    listed = daemon.call("jobs.list", {"project_id": first_session.project.id}).jobs
    assert [(job.job_id, job.state) for job in listed] == [(first.job_id, "pending")]
    claimed = daemon.call("jobs.claim", {"worker": "w", "project_id": first_session.project.id})
    assert claimed.job is not None and claimed.job.job_id == first.job_id


@pytest.mark.parametrize("removed", ["jobs", "project"])
def test_a_turn_is_stored_after_its_projects_directory_was_removed(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, removed: str
) -> None:
    # jobs/ (or the whole project directory) removed while orcad runs: a session already open
    # still stores its next turn, without waiting for a new session to make the directory
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    cwd = str(project_dir(tmp_path))
    session = daemon.call("session.open", {"cwd": cwd})
    daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    directory = orca_env.memory_root / "projects" / session.project.id
    shutil.rmtree(directory / "jobs" if removed == "jobs" else directory)
    stored = daemon.call("turn.completed", turn_params(session, "t2", "We deploy with make."))
    assert stored.eligible and stored.job_id is not None
    assert read_job_file(orca_env.memory_root, session.project.id, stored.job_id)["turn_id"] == "t2"
    assert stat.S_IMODE((directory / "jobs").stat().st_mode) == 0o700
    listed = daemon.call("jobs.list", {"project_id": session.project.id}).jobs
    assert stored.job_id in [job.job_id for job in listed]
    # project.json, which names the directory's project, is there again with its identity
    (project,) = [p for p in daemon.call("projects.list").projects if p.id == session.project.id]
    assert (project.identity, project.last_seen_cwd) == (session.project.identity, cwd)


def test_a_turn_writes_project_json_when_a_remember_made_the_directory_again(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # the project directory removed while orcad runs, then made again by a project remember,
    # which names it again; its project.json removed once more (memory.md and jobs/ stay):
    # the next stored turn still names the project
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    cwd = str(project_dir(tmp_path))
    session = daemon.call("session.open", {"cwd": cwd})
    directory = orca_env.memory_root / "projects" / session.project.id
    shutil.rmtree(directory)
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    daemon.call("remember", {**ids, "text": "We deploy on Fridays.", "scope": "project"})
    assert json.loads((directory / "project.json").read_text())["last_seen_cwd"] == cwd
    (directory / "project.json").unlink()
    assert (directory / "memory.md").is_file()
    daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    (project,) = [p for p in daemon.call("projects.list").projects if p.id == session.project.id]
    assert (project.identity, project.last_seen_cwd) == (session.project.identity, cwd)


def test_an_acknowledged_job_is_visible_to_the_very_next_request(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # The acknowledgement is written by the worker thread that made the job file durable,
    # before the event loop has run again: whatever a client asks next must already see it.
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    # an external worker asks for a job (of another project): the barrier waits for one
    assert daemon.call("jobs.claim", {"worker": "w", "project_id": "0" * 64}).job is None
    with daemon.client() as reporter, daemon.client() as observer:
        for turn in range(40):
            params = turn_params(session, f"t{turn}", f"We use tool {turn}.")
            done = reporter.call("turn.completed", params)
            asked = reporter if turn % 2 else observer  # the same connection, and another one
            listed = asked.call("jobs.list", {"state": "pending"}).jobs
            assert done.job_id in [job.job_id for job in listed]
            assert asked.call("daemon.status").jobs.pending == turn + 1
        done = reporter.call("turn.completed", turn_params(session, "last", "We use pnpm."))
        # recall waits (5 s, the worker takes none) for the session's queued jobs, this one too
        recall = {"session_id": session.session_id, "epoch": session.epoch}
        barrier = reporter.call("recall", {**recall, "turn_id": "next", "prompt": "pnpm"}).barrier
        assert barrier == "timed_out"


def test_the_source_bound_is_32_kib_of_utf8(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    exact = "é" * ((limits.SOURCE_MAX_BYTES - len("user: ")) // 2)  # 2 bytes each
    assert len(("user: " + exact).encode()) == limits.SOURCE_MAX_BYTES
    params = turn_params(session, "exact")
    params["messages"] = [{"role": "user", "content": exact}]
    whole = daemon.call("turn.completed", params)
    params = turn_params(session, "over")
    params["messages"] = [{"role": "user", "content": exact + "x"}]
    over = daemon.call("turn.completed", params)
    claims = {}
    for _ in range(2):
        claimed = daemon.call("jobs.claim", {"worker": "reader"})
        claims[claimed.job.job_id] = claimed.job.source
    assert claims[whole.job_id] == "user: " + exact
    cut = claims[over.job_id]
    assert len(cut.encode()) <= limits.SOURCE_MAX_BYTES
    assert cut.startswith("user: éé") and " [...] é" in cut and cut.endswith("éx")
    project_id = session.project.id
    assert (
        read_job_file(orca_env.memory_root, project_id, whole.job_id)["source_truncated"] is False
    )
    assert read_job_file(orca_env.memory_root, project_id, over.job_id)["source_truncated"] is True


def test_secrets_never_reach_the_job_file(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    secret = "ghp_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
    result = daemon.call("turn.completed", turn_params(session, "t1", f"my token is {secret}"))
    text = job_file(orca_env.memory_root, session.project.id, result.job_id).read_text()
    assert secret not in text
    assert "[REDACTED:" in json.loads(text)["source"]


# --- limits -------------------------------------------------------------------------------------


def test_at_most_64_active_jobs_and_exhausted_ones_do_not_count(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\nmax_retries = 0\n")
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    with daemon.client() as client:
        results = [
            client.call("turn.completed", turn_params(session, f"t{i}", f"fact {i}"))
            for i in range(limits.ACTIVE_JOBS_PER_PROJECT)
        ]
        assert all(result.eligible for result in results)
        refused = client.call("turn.completed", turn_params(session, "t64", "fact 64"))
        assert (refused.eligible, refused.reason, refused.job_id) == (False, "backlog_full", None)
        # a report already admitted is still recognised
        again = client.call("turn.completed", turn_params(session, "t0", "fact 0"))
        assert (again.job_id, again.duplicate) == (results[0].job_id, True)
        # a leased job is still active
        claimed = client.call("jobs.claim", {"worker": "w"})
        full = client.call("turn.completed", turn_params(session, "t64", "fact 64"))
        assert full.reason == "backlog_full"
        failed = client.call(
            "jobs.fail", {"job_id": claimed.job.job_id, "token": claimed.lease.token, "error": "x"}
        )
        assert failed.state == "exhausted"
        admitted = client.call("turn.completed", turn_params(session, "t64", "fact 64"))
        assert admitted.eligible and admitted.reason is None
        assert client.call("turn.completed", turn_params(session, "t65", "x")).reason == (
            "backlog_full"
        )
    # another project has its own allowance
    other = daemon.call("session.open", {"cwd": str(project_dir(tmp_path, "other"))})
    assert daemon.call("turn.completed", turn_params(other, "t0", "fact")).eligible


def test_the_newest_128_committed_jobs_are_kept(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory)  # built-in heuristic workers
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    total = limits.COMMITTED_JOBS_KEPT + 2
    job_ids: list[str] = []
    with daemon.client() as client:
        for i in range(total):
            result = client.call("turn.completed", turn_params(session, f"t{i}", f"Hi {i}."))
            job_ids.append(result.job_id)
            # one at a time, so that commit order is admission order
            wait_for(
                lambda: (
                    client.call("daemon.status").jobs.pending == 0
                    and client.call("daemon.status").jobs.leased == 0
                ),
                timeout=20,
                interval=0.005,
            )
    jobs_dir = orca_env.memory_root / "projects" / session.project.id / "jobs"
    files = sorted(path.stem for path in jobs_dir.glob("job_*.json"))
    assert len(files) == limits.COMMITTED_JOBS_KEPT
    assert set(files) == set(job_ids[2:])
    listed = daemon.call("jobs.list", {"state": "committed"}).jobs
    assert {job.job_id for job in listed} == set(job_ids[2:])


# --- the lease engine through jobs.* -------------------------------------------------------------


def test_failures_are_retried_three_times_then_the_job_is_exhausted(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)  # default max_retries = 3
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    for _ in range(3):  # cancellations use no attempt
        claimed = daemon.call("jobs.claim", {"worker": "w"})
        assert claimed.job.attempt == 1
        released = daemon.call("jobs.release", {"job_id": job_id, "token": claimed.lease.token})
        assert released.state == "pending"
    outcomes = []
    for _ in range(limits.DEFAULT_MAX_RETRIES + 1):
        claimed = daemon.call("jobs.claim", {"worker": "w"})
        failed = daemon.call(
            "jobs.fail", {"job_id": job_id, "token": claimed.lease.token, "error": "no luck"}
        )
        outcomes.append((claimed.job.attempt, failed.state, failed.attempts))
    assert outcomes == [
        (1, "pending", 1),
        (2, "pending", 2),
        (3, "pending", 3),
        (4, "exhausted", 4),
    ]
    assert daemon.call("jobs.claim", {"worker": "w"}).job is None
    listed = daemon.call("jobs.list", {"state": "exhausted"}).jobs
    assert [(job.job_id, job.last_error) for job in listed] == [(job_id, "no luck")]


def test_a_secret_in_an_external_workers_provenance_is_not_recorded(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    key = "sk-proj-" + "Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA9eK2"
    daemon.call(
        "jobs.publish",
        {
            "job_id": job_id,
            "token": claimed.lease.token,
            "output": fact_output("This repository uses pnpm."),
            "provider": "llm",
            "model": f"llm -m gpt-4o-mini --key {key}",
        },
    )
    project = orca_env.memory_root / "projects" / session.project.id
    written = [path for path in project.rglob("*") if path.is_file()]
    assert [path.name for path in written if key.encode() in path.read_bytes()] == []
    assert "llm -m gpt-4o-mini --key [REDACTED:" in (project / "candidates.jsonl").read_text()


def test_malformed_output_is_a_failed_attempt_that_releases_the_lease(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    publish = {
        "job_id": job_id,
        "token": claimed.lease.token,
        "output": "",  # empty is never a zero-candidate success
        "provider": "x",
        "model": "y",
    }
    error = remote_error(daemon, "jobs.publish", publish)
    assert (error.code, error.kind) == (-32012, "extraction_rejected")
    job = read_job_file(orca_env.memory_root, session.project.id, job_id)
    assert (job["state"], job["attempts"], job["lease"]) == ("pending", 1, None)
    # the token is no longer current, so even good output is refused now
    error = remote_error(daemon, "jobs.publish", {**publish, "output": "NOTHING"})
    assert (error.code, error.kind) == (-32011, "lease_lost")
    again = daemon.call("jobs.claim", {"worker": "w"})
    done = daemon.call(
        "jobs.publish", {**publish, "token": again.lease.token, "output": fact_output("A fact.")}
    )
    assert (done.state, done.added) == ("committed", 1)


LONE_SURROGATE_FACT = '{"category": "project", "fact": "x\\ud800y"}'  # valid JSON, not UTF-8


def test_a_fact_holding_a_lone_surrogate_is_rejected_output(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    publish = {
        "job_id": job_id,
        "token": claimed.lease.token,
        "output": LONE_SURROGATE_FACT,
        "provider": "x",
        "model": "y",
    }
    error = remote_error(daemon, "jobs.publish", publish)  # before: -32603, lease kept
    assert (error.code, error.kind) == (-32012, "extraction_rejected")
    job = read_job_file(orca_env.memory_root, session.project.id, job_id)
    assert (job["state"], job["attempts"], job["lease"]) == ("pending", 1, None)
    assert "not valid UTF-8" in job["errors"][0]["message"]


@pytest.mark.parametrize("fact", ["\u200b", "\x00", "\u200d\ufeff\u2066", "\U000e0041"])
def test_a_fact_of_invisible_characters_alone_is_rejected_output(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, fact: str
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    publish = {
        "job_id": job_id,
        "token": claimed.lease.token,
        "output": fact_output("This repository uses pnpm.", fact),
        "provider": "x",
        "model": "y",
    }
    error = remote_error(daemon, "jobs.publish", publish)  # before: committed, 2 added
    assert (error.code, error.kind) == (-32012, "extraction_rejected")
    assert "line 2: fact holds only control or invisible characters" in error.error.message
    job = read_job_file(orca_env.memory_root, session.project.id, job_id)
    assert (job["state"], job["attempts"], job["lease"]) == ("pending", 1, None)
    inspected = daemon.call("projects.inspect", {"project_id": session.project.id})
    assert inspected.ledger.candidates == []


def test_a_provider_answering_a_lone_surrogate_exhausts_the_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    code = f"import sys; sys.stdin.read(); print({LONE_SURROGATE_FACT!r})"
    config = (
        '[extraction]\nprovider = "command"\nworkers = 1\nmax_retries = 1\nretry_base_s = 0.0\n'
        f"[extraction.command]\nargv = {json.dumps([sys.executable, '-c', code])}\n"
    )
    daemon = start(orca_env, daemon_factory, config)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    job = wait_for(  # before: the worker crashed on each attempt, which was never counted
        lambda: (
            (j := read_job_file(orca_env.memory_root, session.project.id, job_id))["state"]
            == "exhausted"
            and j
        )
    )
    assert job["attempts"] == 2
    assert all("not valid UTF-8" in error["message"] for error in job["errors"])


def test_a_stale_token_changes_nothing(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "w", "lease_s": 60})
    path = job_file(orca_env.memory_root, session.project.id, job_id)
    before = path.read_bytes()
    stale = claimed.lease.token + 1
    calls = [
        ("jobs.renew", {"job_id": job_id, "token": stale}),
        ("jobs.fail", {"job_id": job_id, "token": stale, "error": "x"}),
        ("jobs.release", {"job_id": job_id, "token": stale}),
        (
            "jobs.publish",
            {"job_id": job_id, "token": stale, "output": "NOTHING", "provider": "p", "model": ""},
        ),
    ]
    for method, params in calls:
        error = remote_error(daemon, method, params)
        assert (error.code, error.kind) == (-32011, "lease_lost"), method
    assert path.read_bytes() == before
    unknown = remote_error(daemon, "jobs.renew", {"job_id": "job_" + "0" * 32, "token": 1})
    assert unknown.kind == "not_found"
    reserved = remote_error(daemon, "jobs.claim", {"worker": "orcad:x:w0"})
    assert reserved.kind == "invalid_params"


def test_after_a_restart_a_job_is_retried_from_its_stored_source(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    daemon.stop()
    path = job_file(orca_env.memory_root, session.project.id, job_id)
    stored = json.loads(path.read_text())
    assert stored["source"] == "user: We use pnpm.\n\nassistant: Understood."
    # prove the source comes from the file, not from anything re-derived
    stored["source"] = "user: Stored text, exactly."
    path.write_text(json.dumps(stored))
    daemon.start()
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    assert (claimed.job.job_id, claimed.job.source) == (job_id, "user: Stored text, exactly.")


@pytest.mark.parametrize("field", ["lease", "not_before"])
def test_a_wait_edited_past_any_orcad_sets_does_not_hold_the_job_for_good(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, field: str
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    if field == "lease":  # a worker that then died holds it
        daemon.call("jobs.claim", {"worker": "gone", "lease_s": 60})
    daemon.stop()
    path = job_file(orca_env.memory_root, session.project.id, job_id)
    stored = json.loads(path.read_text())
    if field == "lease":
        stored["lease"]["expires_at"] = "9999-12-31T23:59:59.000Z"
    else:
        stored["not_before"] = "9999-12-31T23:59:59.000Z"
    path.write_text(json.dumps(stored))
    daemon.start()
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    assert claimed.job is not None and claimed.job.job_id == job_id
    # taking over a lease that did not end counts its attempt, as for any expired lease
    assert claimed.job.attempt == (2 if field == "lease" else 1)


# --- built-in workers ---------------------------------------------------------------------------

SLOW_PROVIDER = """import sys, time
sys.stdin.read()
time.sleep(float(sys.argv[1]))
print(sys.argv[2] if len(sys.argv) > 2 else "NOTHING", flush=True)
"""


def slow_provider_config(tmp_path: Path, seconds: float, **extraction: Any) -> str:
    script = tmp_path / "slow_provider.py"
    script.write_text(SLOW_PROVIDER)
    lines = ["[extraction]", 'provider = "command"', "workers = 1"]
    lines += [f"{key} = {value}" for key, value in extraction.items()]
    lines += [
        "[extraction.command]",
        f"argv = {json.dumps([sys.executable, str(script), str(seconds)])}",
    ]
    return "\n".join(lines) + "\n"


def test_the_lease_is_renewed_while_the_provider_is_silent(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # a lease of 2 s renewed every ~0.67 s: a loaded machine that stops the daemon for a second
    # between two renewals does not let it run out (it did at 1 s), and 5 s of silence still
    # outlast it more than twice over
    daemon = start(orca_env, daemon_factory, slow_provider_config(tmp_path, 5.0, lease_s=2.0))
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    project_id = session.project.id
    first = wait_for(lambda: read_job_file(orca_env.memory_root, project_id, job_id)["lease"])
    expiries = {first["expires_at"]}
    while read_job_file(orca_env.memory_root, project_id, job_id)["state"] == "leased":
        lease = read_job_file(orca_env.memory_root, project_id, job_id)["lease"]
        if lease:
            expiries.add(lease["expires_at"])
        assert daemon.call("jobs.claim", {"worker": "thief"}).job is None  # never expired
    job = read_job_file(orca_env.memory_root, project_id, job_id)
    assert (job["state"], job["attempts"], job["fence"]) == ("committed", 0, 1)
    assert len(expiries) >= 5  # ~5 s of silence, renewed every ~0.67 s


def test_sigterm_releases_held_leases_without_using_an_attempt(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, slow_provider_config(tmp_path, 60.0))
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    wait_for(lambda: daemon.call("daemon.status").workers.busy == 1)
    assert daemon.stop() == 0
    job = read_job_file(orca_env.memory_root, session.project.id, job_id)
    assert (job["state"], job["attempts"], job["lease"], job["fence"]) == ("pending", 0, None, 1)


def test_a_provider_past_timeout_s_is_a_failed_attempt(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    config = slow_provider_config(tmp_path, 30.0, timeout_s=0.5, max_retries=0)
    daemon = start(orca_env, daemon_factory, config)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    job = wait_for(
        lambda: (
            (j := read_job_file(orca_env.memory_root, session.project.id, job_id))["state"]
            == "exhausted"
            and j
        )
    )
    assert job["attempts"] == 1
    assert "timeout_s" in job["errors"][0]["message"]


def test_workers_follow_the_projects_current_switch(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    quiet = project_dir(tmp_path, "quiet")
    loud = project_dir(tmp_path, "loud")
    (quiet / ".orca").mkdir()
    switch = quiet / ".orca" / "config.toml"
    switch.write_text("auto_memory = true\n")
    daemon = start(orca_env, daemon_factory, f"trusted_projects = [{json.dumps(str(quiet))}]\n")
    quiet_session = daemon.call("session.open", {"cwd": str(quiet)})
    assert quiet_session.auto_memory
    switch.write_text("auto_memory = false\n")  # the open session keeps its snapshot
    held = daemon.call("turn.completed", turn_params(quiet_session, "t1", "We use pnpm."))
    assert held.eligible
    loud_session = daemon.call("session.open", {"cwd": str(loud)})
    done = daemon.call("turn.completed", turn_params(loud_session, "t1", "We use yarn."))
    wait_for(
        lambda: (
            [
                j.state
                for j in daemon.call("jobs.list", {"project_id": loud_session.project.id}).jobs
            ]
            == ["committed"]
        )
    )
    # the older job of the switched-off project was passed over and left as it was
    quiet_jobs = daemon.call("jobs.list", {"project_id": quiet_session.project.id}).jobs
    assert [(j.job_id, j.state, j.attempts) for j in quiet_jobs] == [(held.job_id, "pending", 0)]
    assert done.job_id != held.job_id
    # switched on again, the job is picked up when a session opens for the project
    switch.write_text("auto_memory = true\n")
    daemon.call("session.open", {"cwd": str(quiet)})
    wait_for(
        lambda: (
            daemon.call("jobs.list", {"project_id": quiet_session.project.id}).jobs[0].state
            == "committed"
        )
    )


@pytest.mark.parametrize("listed_as", ["link", "dot_dot"])
def test_a_trusted_project_listed_by_another_path_to_it_is_honoured(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, listed_as: str
) -> None:
    # ~/src a link to a data disk, /tmp a link to /private/tmp: the user lists the path they
    # type, the daemon derives the canonical one; the switch is a privacy choice, not a hint
    quiet = project_dir(tmp_path, "quiet")
    (quiet / ".orca").mkdir()
    (quiet / ".orca" / "config.toml").write_text("auto_memory = false\n")
    link = tmp_path / "link"
    link.symlink_to(quiet, target_is_directory=True)
    listed = str(link) if listed_as == "link" else f"{quiet}/../{quiet.name}"
    daemon = start(orca_env, daemon_factory, f"trusted_projects = [{json.dumps(listed)}]\n")
    session = daemon.call("session.open", {"cwd": str(link)})
    assert session.project.root == str(quiet)
    assert session.auto_memory is False
    answer = daemon.call("turn.completed", turn_params(session, "t1", "We deploy with pnpm."))
    assert (answer.eligible, answer.reason) == (False, "auto_memory_disabled")
    assert daemon.call("jobs.list", {}).jobs == []


# --- project.json, privacy, status, orcactl ------------------------------------------------------


def test_project_json_records_identity_and_last_cwd(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    root = project_dir(tmp_path)
    sub = root / "src"
    sub.mkdir()
    session = daemon.call("session.open", {"cwd": str(sub)})
    record = json.loads(
        (orca_env.memory_root / "projects" / session.project.id / "project.json").read_text()
    )
    assert record["project_id"] == session.project.id
    assert record["project_identity"] == session.project.identity
    assert record["last_seen_cwd"] == str(sub)
    listed = daemon.call("projects.list", {}).projects
    assert [(p.id, p.last_seen_cwd, p.corrupt) for p in listed] == [
        (session.project.id, str(sub), False)
    ]


def test_a_deleted_markdown_view_is_back_once_a_session_opens_in_its_project(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # `rm auto-memory.md`: it stayed away until a restart, a new fact or a forget, while the
    # index deleted beside it came back at the next recall
    cwd = str(project_dir(tmp_path))
    session = daemon.call("session.open", {"cwd": cwd})
    daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    wait_for(lambda: daemon.call("jobs.list", {}).jobs[0].state == "committed")
    view = daemon.orca.memory_root / "projects" / session.project.id / "auto-memory.md"
    shown = view.read_bytes()
    assert b"pnpm" in shown
    view.unlink()
    daemon.call("session.open", {"cwd": cwd})
    assert view.read_bytes() == shown
    assert "Traceback" not in daemon.stderr()


def test_a_corrupt_project_json_is_preserved_and_reported(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    cwd = str(project_dir(tmp_path))
    session = daemon.call("session.open", {"cwd": cwd})
    path = orca_env.memory_root / "projects" / session.project.id / "project.json"
    path.write_bytes(b'{"project_id": "truncated')
    again = daemon.call("session.open", {"cwd": cwd})
    assert path.read_bytes() == b'{"project_id": "truncated'
    # capture goes on: job files do not depend on project.json
    assert daemon.call("turn.completed", turn_params(again, "t1")).eligible
    assert path.read_bytes() == b'{"project_id": "truncated'
    errors = daemon.call("daemon.status").recent_errors
    assert [e.kind for e in errors].count("project_metadata_corrupt") == 1
    inspected = daemon.call("projects.inspect", {"cwd": cwd})
    assert inspected.project.corrupt and "project.json" in inspected.project.problem
    assert daemon.call("projects.list", {}).projects[0].corrupt


def test_a_problem_that_comes_back_after_others_pushed_it_out_is_listed_again(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # recent errors keep the newest RECENT_ERRORS_KEPT: a damaged project.json first met long
    # ago, then crowded out by other problems, is still damaged when a session opens there again
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    cwds = [str(project_dir(tmp_path, f"project-{n}")) for n in range(RECENT_ERRORS_KEPT + 1)]
    files = []
    for cwd in cwds:
        session = daemon.call("session.open", {"cwd": cwd})
        files.append(orca_env.memory_root / "projects" / session.project.id / "project.json")
        files[-1].write_bytes(b'{"project_id": "truncated')

    def damaged_listed() -> list[str]:
        errors = daemon.call("daemon.status").recent_errors
        return [e.message for e in errors if e.kind == "project_metadata_corrupt"]

    for cwd in cwds:  # the first one's problem, then as many others as are kept
        daemon.call("session.open", {"cwd": cwd})
    assert len(damaged_listed()) == RECENT_ERRORS_KEPT
    assert not any(str(files[0]) in message for message in damaged_listed())
    daemon.call("session.open", {"cwd": cwds[0]})  # met again: the newest problem
    listed = damaged_listed()
    assert len(listed) == RECENT_ERRORS_KEPT
    assert str(files[0]) in listed[-1]


def test_project_json_is_reread_after_the_lock_is_taken(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    cwd = project_dir(tmp_path)
    first = daemon.call("session.open", {"cwd": str(cwd)})
    directory = orca_env.memory_root / "projects" / first.project.id
    lock = filelock.FileLock(directory / ".lock", thread_local=False)
    lock.acquire()
    opened: list[Any] = []
    opener = threading.Thread(
        target=lambda: opened.append(daemon.call("session.open", {"cwd": str(cwd)}))
    )
    try:
        opener.start()
        # the second open is logged, then its hook waits for the project lock held here
        wait_for(
            lambda: [e.get("event") for e in daemon.log_events()].count("session.opened") == 2,
            timeout=10,
        )
        (directory / "project.json").write_bytes(b"damaged while waiting")
    finally:
        lock.release()
    opener.join(timeout=20)
    assert opened, "session.open did not finish"
    assert (directory / "project.json").read_bytes() == b"damaged while waiting"
    assert "project_metadata_corrupt" in [
        e.kind for e in daemon.call("daemon.status").recent_errors
    ]


class DefaultHomeEnv(OrcaEnv):
    """An environment without ORCA_HOME: orcad keeps its memory under the user's home."""

    @property
    def env(self) -> dict[str, str]:
        env = super().env
        del env["ORCA_HOME"]
        return env


def test_without_orca_home_memory_lives_in_the_users_home(
    daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    (tmp_path / "env").mkdir()
    orca_env = DefaultHomeEnv(tmp_path / "env")
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    memory_root = Path(orca_env.env["HOME"]) / ".orca" / "memory"
    assert daemon.call("daemon.status", {}).memory_root == str(memory_root)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    turn = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    assert job_file(memory_root, session.project.id, turn.job_id).is_file()
    assert not any(orca_env.home.iterdir())  # the directory ORCA_HOME would have named


def test_memory_files_are_private(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    wait_for(lambda: daemon.call("jobs.list", {}).jobs[0].state == "committed")
    assert job_id
    seen = 0
    for directory, _dirs, files in os.walk(orca_env.memory_root / "projects"):
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700, directory
        for name in files:
            assert stat.S_IMODE(os.stat(Path(directory) / name).st_mode) == 0o600, name
            seen += 1
    assert seen >= 5  # project.json, candidates.jsonl, auto-memory.md, index, job file


def test_status_counts_jobs_projects_and_workers(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    for name in ("a", "b"):
        session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path, name))})
        daemon.call("turn.completed", turn_params(session, "t1"))
        daemon.call("turn.completed", turn_params(session, "t2"))
    daemon.call("jobs.claim", {"worker": "w"})
    status = daemon.call("daemon.status")
    assert (status.jobs.pending, status.jobs.leased, status.jobs.committed) == (3, 1, 0)
    assert status.projects == 2
    assert (status.workers.configured, status.workers.busy) == (0, 0)
    daemon.restart()
    status = daemon.call("daemon.status")
    assert (status.jobs.pending, status.jobs.leased, status.projects) == (3, 1, 2)


GATED_PROVIDER = """import os, sys, time
sys.stdin.read()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
print("NOTHING", flush=True)
"""


def _a_worker_at_its_provider(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, extraction: str
) -> tuple[DaemonProcess, Any, str, Path, filelock.FileLock]:
    """A daemon whose one worker holds a turn's job and waits in a command provider until
    `gate` is made; the project's lock, for the test to hold while the worker publishes."""
    script = tmp_path / "gated_provider.py"
    script.write_text(GATED_PROVIDER)
    gate = tmp_path / "gate"
    argv = json.dumps([sys.executable, str(script), str(gate)])
    config = (
        f'[extraction]\nprovider = "command"\nworkers = 1\n{extraction}'
        f"[extraction.command]\nargv = {argv}\n"
    )
    daemon = start(orca_env, daemon_factory, config)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    wait_for(lambda: daemon.call("daemon.status").workers.busy == 1)
    lock = filelock.FileLock(
        orca_env.memory_root / "projects" / session.project.id / ".lock", thread_local=False
    )
    return daemon, session, job_id, gate, lock


def test_a_lease_too_short_to_use_stops_orcad_at_start(orca_env: OrcaEnv) -> None:
    """lease_s = 1e-6 was taken: the lease ran out before the worker could use it, and each
    turn's job was exhausted after its retries, its facts never extracted."""
    orca_env.write_config("[extraction]\nlease_s = 1e-6\n")
    daemon = DaemonProcess(orca_env)
    process = daemon.spawn()
    try:
        assert process.wait(timeout=30) == 1
    finally:
        daemon.kill()
    assert "key `extraction.lease_s`" in daemon.stderr()
    assert "Traceback" not in daemon.stderr()


@pytest.mark.slow
def test_a_lock_failure_reschedules_the_worker_after_reschedule_s(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon, session, job_id, gate, lock = _a_worker_at_its_provider(
        orca_env, daemon_factory, tmp_path, "lease_s = 1.5\nreschedule_s = 2.0\n"
    )
    with lock:
        gate.touch()  # the provider answers; publishing now needs the lock held here
        rescheduled = wait_for(
            lambda: [e for e in daemon.log_events() if e.get("event") == "project.rescheduled"],
            timeout=30,
        )
    assert rescheduled[0]["delay_s"] == 2.0
    job = wait_for(
        lambda: (
            (j := read_job_file(orca_env.memory_root, session.project.id, job_id))["state"]
            == "committed"
            and j
        ),
        timeout=30,
    )
    # nobody opened a session or reported a turn: the worker came back on its own, and not
    # before reschedule_s had passed
    claims = [e for e in daemon.log_events() if e.get("event") == "job.claimed"]
    assert len(claims) == 2
    assert parse_time(claims[1]["timestamp"]) - parse_time(rescheduled[0]["timestamp"]) >= 2.0
    assert job["attempts"] == 1  # the first lease ran out while the lock was unavailable
    assert "job_store" in [e.kind for e in daemon.call("daemon.status").recent_errors]


def test_a_publish_kept_from_the_lock_past_its_bound_is_tried_again_with_the_same_answer(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # the lease outlasts one lock wait (5 s) by far
    daemon, session, job_id, gate, lock = _a_worker_at_its_provider(
        orca_env, daemon_factory, tmp_path, "lease_s = 30.0\n"
    )
    with lock:
        gate.touch()  # the provider answers; publishing now needs the lock held here
        wait_for(
            lambda: "job_store" in [e.kind for e in daemon.call("daemon.status").recent_errors],
            timeout=30,
        )
    job = wait_for(
        lambda: (
            (j := read_job_file(orca_env.memory_root, session.project.id, job_id))["state"]
            == "committed"
            and j
        ),
        timeout=20,  # well within the lease: a takeover after it would be too late
    )
    claims = [e for e in daemon.log_events() if e.get("event") == "job.claimed"]
    assert len(claims) == 1  # the provider was asked once: its answer was kept
    assert job["attempts"] == 0  # a lock held elsewhere is not the attempt's failure


def test_a_project_lock_held_elsewhere_is_a_locked_storage_error_and_changes_nothing(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "w"})
    publish = {
        "job_id": job_id,
        "token": claimed.lease.token,
        "output": fact_output("Releases are cut from main."),
        "provider": "p",
        "model": "m",
    }
    directory = orca_env.memory_root / "projects" / session.project.id
    before = (directory / "jobs" / f"{job_id}.json").read_bytes()
    with filelock.FileLock(directory / ".lock", thread_local=False):
        error = remote_error(daemon, "jobs.publish", publish)
    # what a client retries on, as for a database another process keeps locked
    assert (error.code, error.kind, error.data["reason"]) == (-32017, "storage", "locked")
    assert error.data["path"] == str(directory)
    assert (directory / "jobs" / f"{job_id}.json").read_bytes() == before
    assert daemon.call("jobs.publish", publish).added == 1  # once the lock is let go


def test_a_damaged_ledger_holds_its_projects_jobs_until_it_is_moved_aside(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # A publish could not merge into a damaged ledger: no job of that project is handed out
    # (no provider is called for nothing), other projects go on, and the file being moved
    # aside is noticed after reschedule_s without any other event.
    daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 1\nreschedule_s = 0.5\n")
    damaged_cwd = str(project_dir(tmp_path, "damaged"))
    damaged = daemon.call("session.open", {"cwd": damaged_cwd})
    healthy = daemon.call("session.open", {"cwd": str(project_dir(tmp_path, "healthy"))})
    ledger = orca_env.memory_root / "projects" / damaged.project.id / "candidates.jsonl"
    ledger.write_text("this is not a ledger\n")
    held = daemon.call("turn.completed", turn_params(damaged, "t1", "We use pnpm.")).job_id
    other = daemon.call("turn.completed", turn_params(healthy, "t1", "We use ruff.")).job_id
    wait_for(lambda: all_in_state(daemon, {other}, "committed"))
    with daemon.client() as external:
        assert external.call("jobs.claim", {"worker": "outside"}).job is None
    job = read_job_file(orca_env.memory_root, damaged.project.id, held)
    assert (job["state"], job["attempts"], job["lease"]) == ("pending", 0, None)
    claims = [e for e in daemon.log_events() if e.get("event") == "job.claimed"]
    assert held not in [claim.get("job_id") for claim in claims]
    errors = [e for e in daemon.call("daemon.status").recent_errors if e.kind == "ledger_corrupt"]
    assert len(errors) == 1 and "candidates.jsonl" in errors[0].message
    assert ledger.read_text() == "this is not a ledger\n"  # left as found
    ledger.rename(ledger.with_name("candidates.jsonl.damaged"))
    wait_for(lambda: all_in_state(daemon, {held}, "committed"), timeout=10)
    inspected = daemon.call("projects.inspect", {"cwd": damaged_cwd})
    facts = [candidate.fact for candidate in inspected.ledger.candidates]
    assert facts == ["The project uses pnpm."]


def all_in_state(daemon: DaemonProcess, job_ids: set[str], state: str) -> bool:
    states = {job.job_id: job.state for job in daemon.call("jobs.list", {}).jobs}
    return all(states.get(job_id) == state for job_id in job_ids)


def orcactl(orca_env: OrcaEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orcactl", "--no-start", *args],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_orcactl_projects_inspect_jobs_and_forget(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = start(orca_env, daemon_factory)
    cwd = project_dir(tmp_path)
    session = daemon.call("session.open", {"cwd": str(cwd)})
    job_id = daemon.call(
        "turn.completed", turn_params(session, "t1", "We use pnpm.", "We use ruff.")
    ).job_id
    wait_for(lambda: daemon.call("jobs.list", {}).jobs[0].state == "committed")

    listed = json.loads(orcactl(orca_env, "projects", "--json").stdout)
    assert [(p["id"], p["candidates"]) for p in listed["projects"]] == [(session.project.id, 2)]
    shown = orcactl(orca_env, "inspect", str(cwd))
    assert shown.returncode == 0
    assert "The project uses pnpm." in shown.stdout and job_id in shown.stdout
    jobs = json.loads(orcactl(orca_env, "jobs", "--state", "committed", "--json").stdout)
    assert [job["job_id"] for job in jobs["jobs"]] == [job_id]
    assert json.loads(orcactl(orca_env, "jobs", "--state", "pending", "--json").stdout) == {
        "jobs": [],
        "damaged": [],
    }

    inspected = daemon.call("projects.inspect", {"cwd": str(cwd)})
    target = inspected.ledger.candidates[0]
    forgot = orcactl(orca_env, "forget", target.id, "--cwd", str(cwd), "--json")
    assert json.loads(forgot.stdout) == {
        "revision": inspected.ledger.revision + 1,
        "removed": True,
        "purged_jobs": [job_id],  # the job whose source produced the fact is gone with it
        "waiting_jobs": [],  # no job is left to publish it again
    }
    assert daemon.call("jobs.list", {}).jobs == []
    again = orcactl(orca_env, "forget", target.id, "--cwd", str(cwd))
    assert again.returncode == 0 and "already forgotten" in again.stdout
    remaining = daemon.call("projects.inspect", {"cwd": str(cwd)}).ledger.candidates
    assert [c.id for c in remaining] == [inspected.ledger.candidates[1].id]
    # a stale revision while the candidate still exists is a conflict
    error = remote_error(
        daemon,
        "ledger.forget",
        {
            "project_id": session.project.id,
            "candidate_id": remaining[0].id,
            "revision": inspected.ledger.revision,
        },
    )
    assert (error.code, error.kind) == (-32013, "conflict")


def test_a_turn_reported_again_after_its_fact_was_forgotten_makes_no_job(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """A repeated Stop hook reports a turn again: once a forget has deleted its job with the
    fact, the turn is a duplicate, so the fact is not extracted anew (also after a restart)."""
    daemon = start(orca_env, daemon_factory)
    cwd = project_dir(tmp_path)
    session = daemon.call("session.open", {"cwd": str(cwd)})
    params = turn_params(session, "t1", "We use pnpm.", "We use ruff.")
    job_id = daemon.call("turn.completed", params).job_id
    wait_for(lambda: daemon.call("jobs.list", {}).jobs[0].state == "committed")
    inspected = daemon.call("projects.inspect", {"cwd": str(cwd)})
    pnpm = next(c for c in inspected.ledger.candidates if "pnpm" in c.fact)
    forgot = daemon.call(
        "ledger.forget",
        {
            "project_id": session.project.id,
            "candidate_id": pnpm.id,
            "revision": inspected.ledger.revision,
        },
    )
    assert forgot.purged_jobs == [job_id]
    for _ in range(2):
        again = daemon.call("turn.completed", params)
        assert (again.job_id, again.duplicate) == (job_id, True)
        assert daemon.call("jobs.list", {}).jobs == []
        assert not job_file(orca_env.memory_root, session.project.id, job_id).exists()
        ledger = daemon.call("projects.inspect", {"cwd": str(cwd)}).ledger
        assert [c.fact for c in ledger.candidates] == ["The project uses ruff."]
        daemon.restart()
    noted = orca_env.memory_root / "projects" / session.project.id / "forgotten-jobs.json"
    assert job_id in noted.read_text() and "pnpm" not in noted.read_text()
    # the same words in another turn are new evidence, and are learnt again
    daemon.call("turn.completed", turn_params(session, "t2", "We use pnpm."))
    wait_for(
        lambda: (
            "The project uses pnpm."
            in [
                c.fact for c in daemon.call("projects.inspect", {"cwd": str(cwd)}).ledger.candidates
            ]
        )
    )


def test_a_damaged_forgotten_jobs_list_refuses_new_turns_and_forgets_and_is_kept(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """A forgotten-jobs.json that does not parse no longer says which turns taught forgotten
    facts: a turn reported again must not be extracted anew, and a forget must not write the
    list whole without the ids it held. Both are refused, naming the file, until it is dealt
    with; the damaged file is never written over."""
    daemon = start(orca_env, daemon_factory)
    cwd = project_dir(tmp_path)
    session = daemon.call("session.open", {"cwd": str(cwd)})
    params = turn_params(session, "t1", "We use pnpm.", "We use ruff.")
    job_id = daemon.call("turn.completed", params).job_id
    wait_for(lambda: daemon.call("jobs.list", {}).jobs[0].state == "committed")
    inspected = daemon.call("projects.inspect", {"cwd": str(cwd)})
    pnpm = next(c for c in inspected.ledger.candidates if "pnpm" in c.fact)
    forget = {"project_id": session.project.id, "candidate_id": pnpm.id}
    daemon.call("ledger.forget", {**forget, "revision": inspected.ledger.revision})
    noted = orca_env.memory_root / "projects" / session.project.id / "forgotten-jobs.json"
    sound = noted.read_bytes()
    assert job_id.encode() in sound
    noted.write_bytes(sound[: len(sound) // 2])  # torn: the ids it held are unknown now

    for turn in (params, turn_params(session, "t2", "Deploys go out on Fridays.")):
        error = remote_error(daemon, "turn.completed", turn)
        assert (error.code, error.kind, error.data["reason"]) == (-32017, "storage", "corrupt")
        assert str(noted) in str(error) and "move it aside" in str(error)
    assert daemon.call("jobs.list", {}).jobs == []  # no job made, nothing extracted
    ruff = next(
        c
        for c in daemon.call("projects.inspect", {"cwd": str(cwd)}).ledger.candidates
        if "ruff" in c.fact
    )
    revision = daemon.call("projects.inspect", {"cwd": str(cwd)}).ledger.revision
    error = remote_error(
        daemon,
        "ledger.forget",
        {"project_id": session.project.id, "candidate_id": ruff.id, "revision": revision},
    )
    assert (error.code, error.data["reason"]) == (-32017, "corrupt")
    assert str(noted) in str(error)
    ledger = daemon.call("projects.inspect", {"cwd": str(cwd)}).ledger
    assert ledger.revision == revision and ruff.id in [c.id for c in ledger.candidates]
    assert noted.read_bytes() == sound[: len(sound) // 2]  # left as found
    errors = daemon.call("daemon.status").recent_errors
    assert any(e.kind == "storage" and str(noted) in e.message for e in errors)

    noted.write_bytes(sound)  # restored from a backup: the turn is the duplicate it is again
    again = daemon.call("turn.completed", params)
    assert (again.job_id, again.duplicate) == (job_id, True)
    assert daemon.call("jobs.list", {}).jobs == []


@pytest.mark.parametrize("where", ["jobs", "project"])
def test_a_file_in_place_of_a_projects_directory_is_named_with_what_to_do(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, where: str
) -> None:
    # a turn was answered "cannot create .../jobs: File exists", which says neither what is
    # wrong nor what to do
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    cwd = project_dir(tmp_path)
    session = daemon.call("session.open", {"cwd": str(cwd)})
    directory = orca_env.memory_root / "projects" / session.project.id
    odd = directory / "jobs" if where == "jobs" else directory
    shutil.rmtree(odd)
    odd.write_text("not a directory\n")
    error = remote_error(daemon, "turn.completed", turn_params(session, "t1", "We use pnpm."))
    assert (error.code, error.data["path"]) == (-32017, str(odd)), error
    message = error.error.message
    assert message.startswith(f"{odd} is not a directory"), message
    assert f"mv {odd} {odd}.not-a-directory" in message and "File exists" not in message
    assert odd.read_text() == "not a directory\n"  # left as found
    odd.rename(f"{odd}.not-a-directory")  # as the answer says
    done = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    assert done.job_id is not None and not done.duplicate
    assert [job.job_id for job in daemon.call("jobs.list", {}).jobs] == [done.job_id]


def test_orcactl_forget_of_another_projects_candidate_says_where_it_is(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # "already forgotten" for an id another project holds would leave the fact in memory
    daemon = start(orca_env, daemon_factory)
    here, there = project_dir(tmp_path, "here"), project_dir(tmp_path, "there")
    daemon.call("session.open", {"cwd": str(here)})
    session = daemon.call("session.open", {"cwd": str(there)})
    daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm."))
    wait_for(lambda: daemon.call("jobs.list", {}).jobs[0].state == "committed")
    [target] = daemon.call("projects.inspect", {"cwd": str(there)}).ledger.candidates
    broken = daemon.call("session.open", {"cwd": str(project_dir(tmp_path, "broken"))})
    ledger = orca_env.memory_root / "projects" / broken.project.id / "candidates.jsonl"
    ledger.write_text("not a ledger\n")  # looked past, not a reason to fail

    for output in ((), ("--json",)):
        refused = orcactl(orca_env, "forget", target.id, "--cwd", str(here), *output)
        assert refused.returncode == 1
        assert "already forgotten" not in refused.stdout + refused.stderr
        assert f"--project {session.project.id}" in refused.stderr
    held = daemon.call("projects.inspect", {"cwd": str(there)}).ledger.candidates
    assert [c.id for c in held] == [target.id]

    forgot = orcactl(orca_env, "forget", target.id, "--project", session.project.id)
    assert forgot.returncode == 0 and "forgot" in forgot.stdout
    again = orcactl(orca_env, "forget", target.id, "--cwd", str(here))
    assert again.returncode == 0 and "already forgotten" in again.stdout


def test_a_job_files_temp_left_by_a_crash_is_removed_at_the_next_start(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # a SIGKILL between a job write and its rename leaves `.<file>.<pid>-<random>.tmp`, which
    # holds the job's source: the start's scan of the jobs removes it
    daemon = start(orca_env, daemon_factory, NO_WORKERS)
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    assert daemon.proc is not None
    dead = daemon.proc.pid
    daemon.kill()
    jobs = orca_env.memory_root / "projects" / session.project.id / "jobs"
    leftover = jobs / f".{job_id}.json.{dead}-{'a' * 16}.tmp"
    leftover.write_bytes((jobs / f"{job_id}.json").read_bytes())
    daemon.start()
    assert [job.job_id for job in daemon.call("jobs.list", {}).jobs] == [job_id]
    assert not leftover.exists()


@pytest.mark.parametrize("method", ["jobs.list", "jobs.claim"])
@pytest.mark.parametrize("project_id", ["nope", "A" * 64, "0" * 63, "../" + "0" * 61])
def test_a_project_id_that_names_no_project_is_refused_not_answered_with_no_jobs(
    daemon: DaemonProcess, method: str, project_id: str
) -> None:
    params: dict[str, Any] = {"project_id": project_id}
    if method == "jobs.claim":
        params["worker"] = "ext-worker"
    with pytest.raises(RemoteError) as caught:
        daemon.call(method, params)
    assert (caught.value.code, caught.value.error.data["field"]) == (-32602, "project_id")
    assert "64 lowercase hex digits" in caught.value.error.message


@pytest.mark.parametrize("project_id", ["nope", "A" * 64, "0" * 63, "../" + "0" * 61])
def test_ledger_forget_refuses_a_malformed_project_id_as_inspect_does(
    daemon: DaemonProcess, project_id: str
) -> None:
    """The same project_id is refused alike by every method that takes one: bad params naming
    it, not an unknown project (which a well-formed id of no project is)."""
    forget = {"project_id": project_id, "candidate_id": "cand_" + "0" * 32, "revision": 0}
    for method, params in (
        ("projects.inspect", {"project_id": project_id}),
        ("ledger.forget", forget),
    ):
        with pytest.raises(RemoteError) as caught:
            daemon.call(method, params)
        assert (caught.value.code, caught.value.error.data.get("field")) == (-32602, "project_id")
    with pytest.raises(RemoteError) as caught:
        daemon.call("ledger.forget", {**forget, "project_id": "ab" * 32})
    assert caught.value.code == -32014


def test_a_call_on_a_job_no_longer_leased_says_what_to_do_for_its_state(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """Only a pending job can be claimed: a worker whose publish was answered but lost, and
    which publishes again, is told the job is committed, not to claim it again."""
    daemon = start(orca_env, daemon_factory, NO_WORKERS + "max_retries = 0\n")
    session = daemon.call("session.open", {"cwd": str(project_dir(tmp_path))})
    job_ids = [
        daemon.call("turn.completed", turn_params(session, f"t{n}", f"We use tool {n}.")).job_id
        for n in (1, 2)
    ]
    advice = {}
    for job_id, finish in zip(job_ids, ("jobs.publish", "jobs.fail"), strict=True):
        claimed = daemon.call("jobs.claim", {"worker": "ext"})
        assert claimed.job.job_id == job_id
        token = claimed.lease.token
        done = {"job_id": job_id, "token": token}
        if finish == "jobs.publish":
            done.update(output="NOTHING", provider="p", model="m")
        else:
            done.update(error="provider down")
        daemon.call(finish, done)
        error = remote_error(daemon, "jobs.renew", {"job_id": job_id, "token": token})
        assert error.code == -32011
        advice[error.error.data["state"]] = error.error.message
    assert set(advice) == {"committed", "exhausted"}
    for message in advice.values():
        assert "claim it again" not in message, message
        assert "drop this attempt" in message, message
    assert "jobs.retry" in advice["exhausted"]
    pending = daemon.call("turn.completed", turn_params(session, "t3", "We use tool 3."))
    claimed = daemon.call("jobs.claim", {"worker": "ext"})
    token = claimed.lease.token
    daemon.call("jobs.release", {"job_id": pending.job_id, "token": token})
    error = remote_error(daemon, "jobs.renew", {"job_id": pending.job_id, "token": token})
    assert error.error.data["state"] == "pending" and "claim it again" in error.error.message
