"""Crash safety: SIGKILL at random moments during floods of turns and publishes, and named
failpoints, each followed by a restart that must find a consistent state."""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from orcad import limits
from orcad.capture.ledger import read_ledger
from orcad.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from protocol.errors import RemoteError
from tests.external_worker import backfill_done, fact_output, turn_params, wait_for
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_providers_command import process_gone, wait_gone

pytestmark = pytest.mark.crash

ROUNDS = 5
TURNS_PER_ROUND = 20  # 100 facts in all: below the ledger's 128, so none is rotated out


def project_path(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir(exist_ok=True)
    return Path(os.path.realpath(path))


def all_committed(daemon: DaemonProcess, job_ids: set[str]) -> bool:
    states = {job.job_id: job.state for job in daemon.call("jobs.list", {}).jobs}
    return all(states.get(job_id) == "committed" for job_id in job_ids)


@pytest.mark.slow
def test_sigkill_during_floods_loses_nothing(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()  # two built-in heuristic workers publish while turns keep arriving
    cwd = str(project_path(tmp_path))
    rng = random.Random(20261130)
    acknowledged: set[str] = set()
    cut_short: set[str] = set()  # turns sent when the daemon died: durable or not, never answered
    committed_seen: set[str] = set()
    project_dir: Path | None = None
    for round_number in range(ROUNDS):
        session = daemon.call("session.open", {"cwd": cwd})
        project_dir = orca_env.memory_root / "projects" / session.project.id
        assert daemon.proc is not None
        killer = threading.Timer(rng.uniform(0.02, 0.25), daemon.proc.kill)
        killer.start()
        try:
            with daemon.client(timeout=10) as client:
                for index in range(TURNS_PER_ROUND):
                    fact = f"We use tool-{round_number}-{index} for builds."
                    turn_id = f"r{round_number}t{index}"
                    cut_short.add(turn_id)
                    result = client.call("turn.completed", turn_params(session, turn_id, fact))
                    cut_short.discard(turn_id)
                    if result.job_id is None:
                        # rounds killed before the workers catch up can fill the 64-job
                        # backlog: the turn is refused and says so; nothing was promised
                        assert (result.eligible, result.reason) == (False, "backlog_full")
                        continue
                    acknowledged.add(result.job_id)
                    if index % 4 == 3:
                        listed = client.call("jobs.list", {"state": "committed"}).jobs
                        committed_seen.update(job.job_id for job in listed)
        except (OSError, RemoteError):
            pass  # the daemon died under us
        killer.join()
        daemon.proc.wait(timeout=10)
        read_ledger(project_dir)  # whole and parseable right after the kill (or absent)
        daemon.start()
        jobs = {job.job_id: job for job in daemon.call("jobs.list", {}).jobs}
        assert acknowledged <= set(jobs), "an acknowledged job was lost"
        assert all(jobs[job_id].state == "committed" for job_id in committed_seen)
    assert project_dir is not None
    assert len(acknowledged) >= ROUNDS  # every round got some turns in before its kill
    # A turn cut short may have become a job before the kill; it is then extracted like any.
    jobs = {job.job_id: job for job in daemon.call("jobs.list", {}).jobs}
    unanswered = {job_id for job_id, job in jobs.items() if job.turn_id in cut_short}
    assert set(jobs) == acknowledged | unanswered, "a job nobody asked for"
    assert len(unanswered) <= ROUNDS  # at most one turn in flight per kill
    wait_for(lambda: all_committed(daemon, set(jobs)), timeout=60)
    ledger = read_ledger(project_dir)
    per_job = collections.Counter(candidate.job_id for candidate in ledger.candidates)
    assert set(per_job) == set(jobs)  # each job's fact is there ...
    assert set(per_job.values()) == {1}  # ... exactly once, despite publishes cut short
    inspected = daemon.call("projects.inspect", {"cwd": cwd})
    assert inspected.ledger.revision == ledger.revision


FAILPOINTS = [
    "jobs.after_job_write",  # durable job, no acknowledgement
    "ledger.after_temp_write",  # temp ledger written, not renamed
    "ledger.after_rename",  # ledger replaced, job not yet committed
    "publish.after_ledger_commit",  # ledger committed, job not yet marked committed
    "publish.after_job_commit",  # job committed, projections not yet written
]


@pytest.mark.parametrize("failpoint", FAILPOINTS)
def test_each_failpoint_ends_in_a_correct_state_after_restart(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, failpoint: str
) -> None:
    cwd = str(project_path(tmp_path))
    orca_env.extra_env[FAILPOINT_ENV] = failpoint
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": cwd})
    params = turn_params(session, "t1", "We use pnpm for packages.")
    try:
        first = daemon.call("turn.completed", params).job_id
    except OSError:
        first = None  # stopped before answering
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=20) == FAILPOINT_EXIT_STATUS
    project_dir = orca_env.memory_root / "projects" / session.project.id
    read_ledger(project_dir)  # never half-written

    del orca_env.extra_env[FAILPOINT_ENV]
    daemon.start()
    again = daemon.call("turn.completed", params)
    assert again.duplicate  # the job was durable before any acknowledgement could be sent
    assert first in (None, again.job_id)
    wait_for(lambda: all_committed(daemon, {again.job_id}))
    # a later write repairs whatever projection the crash left behind
    second = daemon.call("turn.completed", turn_params(session, "t2", "We use ruff for linting."))
    wait_for(lambda: all_committed(daemon, {second.job_id}))
    inspected = daemon.call("projects.inspect", {"cwd": cwd})
    facts = [candidate.fact for candidate in inspected.ledger.candidates]
    assert facts == ["The project uses pnpm for packages.", "The project uses ruff for linting."]
    assert inspected.index.state == "current"
    # temp files left by the crash are cleared. The live daemon may still be writing one (a
    # projection or the facts' vectors: an index being written has its temp file, named with
    # the writer's pid), which must be gone once that write ends.
    wait_for(lambda: backfill_done(daemon))
    assert daemon.proc is not None
    writing = f".{daemon.proc.pid}-"
    assert not [temp for temp in project_dir.glob(".*.tmp") if writing not in temp.name]
    wait_for(lambda: not list(project_dir.glob(".*.tmp")))
    markdown = (project_dir / "auto-memory.md").read_text()
    assert "pnpm" in markdown and "ruff" in markdown


# A provider command that hangs, with a helper that ignores SIGTERM; the helper says who they
# are once it does.
HUNG_HELPER = """import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(f"{os.getppid()} {os.getpid()}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""
HUNG_PROVIDER = f"""import subprocess, sys, time
sys.stdin.read()
subprocess.Popen([sys.executable, "-c", {HUNG_HELPER!r}, sys.argv[1]])
time.sleep(600)
"""


def test_a_provider_command_does_not_outlive_a_killed_daemon(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # before: the command (and its helper) ran on, reparented, for as long as they liked
    script = tmp_path / "hung_provider.py"
    script.write_text(HUNG_PROVIDER)
    pids_file = tmp_path / "pids"
    argv = json.dumps([sys.executable, str(script), str(pids_file)])
    orca_env.write_config(
        '[extraction]\nprovider = "command"\nworkers = 1\ntimeout_s = 600\nlease_s = 600\n'
        f"[extraction.command]\nargv = {argv}\n"
    )
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": str(project_path(tmp_path))})
    daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm for packages."))
    wait_for(pids_file.exists)
    pids = [int(pid) for pid in pids_file.read_text().split()]
    try:
        assert not any(process_gone(pid) for pid in pids)
        daemon.kill()
        # SIGTERM at once, SIGKILL a second later for what ignored it
        assert wait_gone(pids, timeout=5.0) == []
    finally:
        for pid in pids:
            if not process_gone(pid):
                os.kill(pid, signal.SIGKILL)


# A provider command that kills the orcad running it, as a job whose extraction takes the
# daemon down would (out of memory, a crash in native code): it walks up its parents to the
# process started as `python -m orcad` and sends it SIGKILL.
DAEMON_KILLER = """import os, signal, sys
sys.stdin.read()
pid = os.getppid()
while pid > 1:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\\0")
    if argv[1:3] == [b"-m", b"orcad"]:
        os.kill(pid, signal.SIGKILL)
        break
    with open(f"/proc/{pid}/stat") as f:
        pid = int(f.read().rsplit(")", 1)[1].split()[1])
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find orcad")
def test_a_job_that_kills_orcad_at_every_start_ends_exhausted(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # before: its lease went back to pending at every start, so orcad died at every start
    script = tmp_path / "daemon_killer.py"
    script.write_text(DAEMON_KILLER)
    argv = json.dumps([sys.executable, str(script)])
    orca_env.write_config(
        f'[extraction]\nprovider = "command"\nworkers = 1\n[extraction.command]\nargv = {argv}\n'
    )
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": str(project_path(tmp_path))})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=60) == -signal.SIGKILL
    # each start hands the dead daemon's lease back and runs the job again, which kills it
    for _ in range(limits.RECOVERIES_MAX - 1):
        assert daemon.spawn().wait(timeout=60) == -signal.SIGKILL
    daemon.start()  # the next one ends the job at start and stays up
    (job,) = daemon.call("jobs.list", {}).jobs
    assert (job.job_id, job.state, job.attempts) == (job_id, "exhausted", 1)
    times = limits.RECOVERIES_MAX
    assert job.last_error == f"orcad stopped {times} times while running this job"
    assert daemon.call("daemon.ping") is not None
    # a person's retry runs it once more, as for any exhausted job
    daemon.call("jobs.retry", {"job_id": job_id})
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=60) == -signal.SIGKILL


# A provider command for two jobs: the one whose turn names pnpm kills the orcad running it
# (DAEMON_KILLER), once the other job, a slow innocent one, is running beside it in the same orcad
# (or after a bound, when it runs alone); the innocent one says so in a file named by that
# orcad's pid, then answers after a second.
KILLER_BESIDE_INNOCENT = """import json, os, pathlib, signal, sys, time
text = sys.stdin.read()
marks = pathlib.Path(sys.argv[1])
pid = os.getppid()
while pid > 1:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().split(b"\\0")
    if argv[1:3] == [b"-m", b"orcad"]:
        break
    with open(f"/proc/{pid}/stat") as f:
        pid = int(f.read().rsplit(")", 1)[1].split()[1])
if "pnpm" in text:
    deadline = time.monotonic() + 2.0
    while not (marks / f"innocent.{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
else:
    (marks / f"innocent.{pid}").touch()
    time.sleep(1.0)
    print(json.dumps({"category": "project", "fact": "We deploy with helm charts."}))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to find orcad")
def test_a_job_leased_beside_one_that_kills_orcad_commits_and_only_the_killer_ends(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # before: the innocent job, leased by the other worker each time the killer ran, had its
    # recoveries counted with the killer's and ended exhausted with it after 8 deaths
    script = tmp_path / "killer_beside_innocent.py"
    script.write_text(KILLER_BESIDE_INNOCENT)
    marks = tmp_path / "marks"
    marks.mkdir()
    argv = json.dumps([sys.executable, str(script), str(marks)])
    orca_env.write_config(
        f'[extraction]\nprovider = "command"\nworkers = 2\n[extraction.command]\nargv = {argv}\n'
    )
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": str(project_path(tmp_path))})
    # the killer is the older: once both have a recovery counted, it is next in order each time
    killer = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    innocent = daemon.call(
        "turn.completed", turn_params(session, "t2", "We deploy with helm charts.")
    ).job_id
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=60) == -signal.SIGKILL
    first_pid = daemon.proc.pid
    assert (marks / f"innocent.{first_pid}").exists()  # the first orcad ran both at once
    deaths = 1
    while deaths < limits.RECOVERIES_MAX:
        assert daemon.spawn().wait(timeout=60) == -signal.SIGKILL
        deaths += 1
    daemon.start()  # the killer ends at start; the innocent job runs, alone, and commits
    assert daemon.proc is not None
    last_pid = daemon.proc.pid

    def ended() -> dict[str, Any] | None:
        jobs = {job.job_id: job for job in daemon.call("jobs.list", {}).jobs}
        done = jobs[innocent].state in {"committed", "exhausted", "cancelled"}
        return jobs if done else None

    jobs = wait_for(ended, timeout=30)
    assert (jobs[innocent].state, jobs[innocent].attempts) == ("committed", 0)
    assert (jobs[killer].state, jobs[killer].attempts) == ("exhausted", 1)
    assert jobs[killer].last_error == f"orcad stopped {deaths} times while running this job"
    # after the first death it never ran beside the killer again: only in the orcad that lived
    assert {mark.name for mark in marks.iterdir()} == {
        f"innocent.{first_pid}",
        f"innocent.{last_pid}",
    }
    assert daemon.call("daemon.ping") is not None


@pytest.mark.parametrize("action", ["forget", "update"])
def test_a_record_change_cut_short_by_a_crash_leaves_no_old_text_in_recall_snapshots(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, action: str
) -> None:
    """The change commits before the snapshots holding the old text are dropped: a crash in
    between must not leave that text to be recalled, or on disk, after the restart."""
    secret_word = "quartz-lemur-17"
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    opened = daemon.call("session.open", {"cwd": str(project_path(tmp_path)), "mode": "yolo"})
    session = {"session_id": opened.session_id, "epoch": opened.epoch}
    saved = daemon.call(
        "memory.manage",
        {
            **session,
            "action": "save",
            "kind": "fact",
            "is_global": False,
            "content": f"The vault is {secret_word}",
        },
    )
    turn = {**session, "turn_id": "t1", "prompt": "which vault is it?"}
    assert secret_word in daemon.call("recall", turn).context
    daemon.stop()  # a clean stop writes the snapshot

    change = {"id": saved.record.id}
    if action == "update":
        change["content"] = "The vault is basalt-heron-9"
    stopped_at = "memory.after_change_commit"
    crash_during(daemon, stopped_at, "memory.manage", {**session, "action": action, **change})
    assert_recalled_nowhere(daemon, turn, secret_word)


def test_a_fact_forget_cut_short_by_a_crash_leaves_it_in_no_recall_snapshot(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """ledger.forget writes the ledger before it drops the recall snapshots holding the fact:
    a crash in between must not leave the fact to be recalled by that turn after the restart,
    or on disk."""
    orca_env.write_config("[extraction]\nworkers = 0\n")  # this test publishes itself
    secret_word = "quartz-lemur-17"
    fact = f"The staging cluster is named {secret_word}."
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    project = project_path(tmp_path)
    session = daemon.call("session.open", {"cwd": str(project)})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", f"note that {fact}")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "test"})
    published = {"output": fact_output(fact), "provider": "external", "model": "test"}
    daemon.call("jobs.publish", {"job_id": job_id, "token": claimed.lease.token, **published})
    turn = {
        "session_id": session.session_id,
        "epoch": session.epoch,
        "turn_id": "t2",
        "prompt": "what is the staging cluster named?",
    }
    assert secret_word in daemon.call("recall", turn).context
    daemon.stop()  # a clean stop writes the snapshot

    daemon.start()
    inspected = daemon.call("projects.inspect", {"cwd": str(project)})
    daemon.stop()
    forgotten = {
        "project_id": inspected.project.id,
        "candidate_id": inspected.ledger.candidates[0].id,
        "revision": inspected.ledger.revision,
    }
    crash_during(daemon, "ledger.after_forget_commit", "ledger.forget", forgotten)
    assert_recalled_nowhere(daemon, turn, secret_word)


def test_a_fact_forget_stopped_after_its_ledger_write_leaves_no_copy_in_the_derived_files(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """A stop between the ledger's write and auto-memory.md's left the forgotten fact in that
    file: the ledger no longer held it, so forgetting it again removed nothing and rewrote
    nothing, and only the project's next publish replaced the file. A start, and the forget
    run again, bring the derived files back to the ledger."""
    orca_env.write_config("[extraction]\nworkers = 0\n")  # this test publishes itself
    secret_word = "quartz-lemur-17"
    fact = f"The staging cluster is named {secret_word}."
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    project = project_path(tmp_path)
    session = daemon.call("session.open", {"cwd": str(project)})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", f"note that {fact}")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "test"})
    published = {"output": fact_output(fact), "provider": "external", "model": "test"}
    daemon.call("jobs.publish", {"job_id": job_id, "token": claimed.lease.token, **published})
    inspected = daemon.call("projects.inspect", {"cwd": str(project)})
    daemon.stop()
    directory = orca_env.memory_root / "projects" / inspected.project.id
    assert secret_word.encode() in (directory / "auto-memory.md").read_bytes()
    forgotten = {
        "project_id": inspected.project.id,
        "candidate_id": inspected.ledger.candidates[0].id,
        "revision": inspected.ledger.revision,
    }
    crash_during(daemon, "ledger.after_forget_ledger_write", "ledger.forget", forgotten)
    assert not read_ledger(directory).candidates  # the ledger was written, nothing after it

    def holding() -> list[str]:
        return sorted(
            path.name
            for path in directory.rglob("*")
            if path.is_file() and secret_word.encode() in path.read_bytes()
        )

    assert holding() == ["auto-memory.md", "index.sqlite3"]
    left = (directory / "auto-memory.md").read_bytes()
    daemon.start()
    wait_for(lambda: holding() == [], timeout=10)  # the start rewrote them
    # the file as that stop left it, should the start not have reached the project (its lock
    # held by another process): the forget run again finishes
    (directory / "auto-memory.md").write_bytes(left)
    again = daemon.call("ledger.forget", {**forgotten, "revision": forgotten["revision"] + 1})
    assert not again.removed
    assert holding() == []


def crash_during(
    daemon: DaemonProcess, stopped_at: str, method: str, params: dict[str, Any]
) -> None:
    """Start the stopped `daemon` with the failpoint `stopped_at` armed, and call `method`: the
    daemon must stop there, before it answers. It is left stopped, the failpoint disarmed."""
    daemon.orca.extra_env[FAILPOINT_ENV] = stopped_at
    daemon.start()
    with pytest.raises(OSError):  # stopped before answering
        daemon.call(method, params)
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=20) == FAILPOINT_EXIT_STATUS
    del daemon.orca.extra_env[FAILPOINT_ENV]


def assert_recalled_nowhere(daemon: DaemonProcess, turn: dict[str, Any], word: str) -> None:
    """After a restart, `turn` recalls no text holding `word`, and no state file holds it."""
    daemon.start()
    assert word not in daemon.call("recall", turn).context
    state_files = daemon.orca.memory_root.glob("daemon-state.sqlite3*")
    assert not [path for path in state_files if word.encode() in path.read_bytes()]
