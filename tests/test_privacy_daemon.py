"""Secrets and forgetting, from outside: a real orcad subprocess, a fake provider, then every
byte under the daemon's roots (memory, config, runtime, its log) searched for what must be gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orcad.limits import MEMORY_CONTENT_MAX_CHARS
from protocol.client import Client
from protocol.errors import RemoteError
from tests.external_worker import fact_output, turn_params, wait_for
from tests.fake_openai import FakeOpenAI, ok
from tests.harness import DaemonProcess, OrcaEnv, process_gone

pytestmark = pytest.mark.daemon

KEY_VARIABLE = "ORCA_PRIVACY_TEST_KEY"
KEY = "sk-privacy-test-7c1e0a9b3d5f42"

# value that must never be stored -> a text that holds it; each a different kind of secret
SECRETS: dict[str, str] = {
    "hunter2hunter2": "password=hunter2hunter2",
    "s3cr3tP4ss": "DB_PASSWORD=s3cr3tP4ss",
    "postgres123": "PGPASSWORD=postgres123",
    "mySuperSecret2024": "client_secret: 'mySuperSecret2024'",
    "Winter2024": "the root password on the staging box is Winter2024!",
    "BlueMango$42": "the wifi key is BlueMango$42",
    "Gr4fana!Adm": "grafana: admin / Gr4fana!Adm",
    "N3xus#Login": "nexus login admin pw N3xus#Login",
    "Jenk1ns!2024": "pass for jenkins: Jenk1ns!2024",
    "Sup3rS3cret!": "machine ci.example.com login ci password Sup3rS3cret!",
    "Zx9!kq2Lm#Tw": "docker login -u ci -p 'Zx9!kq2Lm#Tw' ghcr.io",
    "hvs.CAESIJq0Wk7Xb2Lm9Rt4Vz8Nc1Pd6Fg3Hj5Kl0Mn2Qs4Tu6Wx8Yz": (
        "export VAULT_TOKEN=hvs.CAESIJq0Wk7Xb2Lm9Rt4Vz8Nc1Pd6Fg3Hj5Kl0Mn2Qs4Tu6Wx8Yz"
    ),
    "AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE": (
        "key: AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE"
    ),
    "lin_api_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f": (
        "LINEAR_API_KEY=lin_api_Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f"
    ),
    "glsa_Zq8Lm2Np4Rt6Vx9Bc1Df3Gh5Jk7Mn0Pq_1a2b3c4d": (
        "grafana token glsa_Zq8Lm2Np4Rt6Vx9Bc1Df3Gh5Jk7Mn0Pq_1a2b3c4d for the dashboards"
    ),
    "Hunt3rPw99": "DATABASE_URL=postgres://app:Hunt3rPw99@db.internal:5432/app",
    "ghp_Zq8Lm2Np4Rt6Vx9Bc1Df3Gh5Jk7Mn0Pq2St4": "ghp_Zq8Lm2Np4Rt6Vx9Bc1Df3Gh5Jk7Mn0Pq2St4 in CI",
    "MIIEowIBAAKCAQEAy8Dbv8prpJ0kKhlGeJYozo2t60EG8L0561g13R29LvMR5hy": (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        "MIIEowIBAAKCAQEAy8Dbv8prpJ0kKhlGeJYozo2t60EG8L0561g13R29LvMR5hy\n"
        "-----END RSA PRIVATE KEY-----"
    ),
}


@pytest.fixture
def provider() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as running:
        yield running


def configure(orca_env: OrcaEnv, provider: FakeOpenAI) -> None:
    orca_env.extra_env[KEY_VARIABLE] = KEY
    orca_env.write_config(
        "[extraction]\n"
        'provider = "openai"\n'
        "workers = 1\n"
        "max_retries = 1\n"
        "[extraction.openai]\n"
        f'base_url = "{provider.base_url}"\n'
        'model = "privacy-test"\n'
        f'api_key_env = "{KEY_VARIABLE}"\n'
    )


def started(orca_env: OrcaEnv, factory: list[DaemonProcess]) -> DaemonProcess:
    daemon = DaemonProcess(orca_env)
    factory.append(daemon)
    return daemon.start()


def every_file(*roots: Path) -> list[Path]:
    return [path for root in roots for path in root.rglob("*") if path.is_file()]


def holders(needle: str, *roots: Path) -> list[str]:
    """The files whose bytes contain `needle` (SQLite files, their WAL, logs: everything). A
    file the daemon removes between the listing and the read (a rotated journal, a temporary
    file replaced) holds nothing."""
    encoded = needle.encode("utf-8")
    found = []
    for path in every_file(*roots):
        try:
            if encoded in path.read_bytes():
                found.append(str(path))
        except FileNotFoundError:
            continue
    return found


def remote_error(call: Any) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        call()
    return caught.value


def open_session(daemon: DaemonProcess, cwd: Path, **options: Any) -> dict[str, Any]:
    opened = daemon.call("session.open", {"cwd": str(cwd), **options})
    return {"session_id": opened.session_id, "epoch": opened.epoch}


def save(daemon: DaemonProcess, session: dict[str, Any], content: str) -> Any:
    """A workspace fact saved through memory.manage (the session applies it: yolo)."""
    params = {**session, "action": "save", "content": content, "kind": "fact", "is_global": False}
    return daemon.call("memory.manage", params).record


def save_fillers(daemon: DaemonProcess, session: dict[str, Any]) -> None:
    """30 filler records: several index segments, so the terms a test saves next and looks
    for later are not alone in theirs."""
    for index in range(30):
        save(daemon, session, f"filler fact {index} about builds")


def committed(daemon: DaemonProcess, job_id: str) -> bool:
    return any(
        j.job_id == job_id and j.state == "committed" for j in daemon.call("jobs.list", {}).jobs
    )


@pytest.mark.slow
def test_no_secret_reaches_any_file_the_provider_or_an_error(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    sessions = {
        "normal": open_session(daemon, project),
        "auto_approve": open_session(daemon, project, auto_approve=True, interactive=False),
        "auto": open_session(daemon, project, mode="auto"),
        "yolo": open_session(daemon, project, mode="yolo"),
    }
    benign = daemon.call(
        "memory.manage",
        {
            **sessions["yolo"],
            "action": "save",
            "content": "release notes live in CHANGELOG.md",
            "kind": "fact",
            "is_global": False,
        },
    ).record
    capture = daemon.call("session.open", {"cwd": str(project)})
    for index, (value, text) in enumerate(SECRETS.items()):
        for scope in ("user", "project"):
            error = remote_error(
                lambda scope=scope, text=text: daemon.call(
                    "remember", {**sessions["normal"], "text": f"note: {text}", "scope": scope}
                )
            )
            assert error.error.code == -32602 and "secret (" in error.error.message
            assert value not in error.error.message
        for name, session in sessions.items():
            for is_global in (False, True):
                result = daemon.call(
                    "memory.manage",
                    {
                        **session,
                        "action": "save",
                        "content": text,
                        "kind": "fact",
                        "is_global": is_global,
                    },
                )
                assert result.outcome == "denied", (name, text, result.summary)
                assert "secret (" in (result.reason or ""), result.reason
                assert value not in result.summary and value not in (result.reason or "")
            updated = daemon.call(
                "memory.manage",
                {**session, "action": "update", "id": benign.id, "content": text},
            )
            assert updated.outcome == "denied", (name, updated.summary)
        # the provider is told to extract the secret back: the ledger must refuse it
        provider.script(ok(fact_output(f"The team noted {text}", f"Fact number {index} is kept.")))
        job_id = daemon.call(
            "turn.completed", turn_params(capture, f"t{index}", f"please remember {text}")
        ).job_id
        wait_for(lambda job_id=job_id: committed(daemon, job_id), timeout=60)
        daemon.call("recall", {**sessions["normal"], "turn_id": f"r{index}", "prompt": text})

    candidates = daemon.call("projects.inspect", {"cwd": str(project)}).ledger.candidates
    assert len(candidates) == len(SECRETS)  # each job kept its plain fact, refused the other
    for request in provider.requests:
        for value in SECRETS:
            assert value not in request.body.decode("utf-8", "replace"), value
    refused = [e for e in daemon.log_events() if e.get("event") == "ledger.secrets_refused"]
    assert len(refused) == len(SECRETS)  # the log names the kinds refused, never a value
    daemon.stop()
    roots = (
        orca_env.home,
        orca_env.config_dir,
        orca_env.root / "run",
        orca_env.root / "xdg-runtime",
    )
    logs = [path for path in orca_env.root.glob("orcad-*.log")]
    assert logs and every_file(*roots)
    for value in SECRETS:
        found = holders(value, *roots, project) + [
            str(log) for log in logs if value.encode() in log.read_bytes()
        ]
        assert found == [], (value, found)


@pytest.mark.slow
def test_forgetting_leaves_no_copy_under_the_memory_roots(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    automatic = "The staging cluster is named quartz-lemur-17."
    kept = "Builds run on the blue runners."
    deliberate = "Always tag releases as orchid-falcon-42."
    provider.script(ok(fact_output(automatic, kept)))
    capture = daemon.call("session.open", {"cwd": str(project)})
    job_id = daemon.call(
        "turn.completed",
        turn_params(capture, "t1", f"note that {automatic} Also {kept}"),
    ).job_id
    wait_for(lambda: committed(daemon, job_id), timeout=60)
    yolo = open_session(daemon, project, mode="yolo")
    record = save(daemon, yolo, deliberate)
    for turn in ("r1", "r2"):  # snapshots holding both texts, in memory and on disk
        recalled = daemon.call(
            "recall", {**yolo, "turn_id": turn, "prompt": "staging cluster releases tag"}
        )
        assert any("quartz-lemur-17" in entry.text for entry in recalled.automatic)
    time.sleep(1.0)  # the snapshot writer persists within half a second
    roots = (orca_env.home, orca_env.config_dir)
    assert holders("quartz-lemur-17", *roots) and holders("orchid-falcon-42", *roots)

    inspected = daemon.call("projects.inspect", {"cwd": str(project)})
    target = next(c for c in inspected.ledger.candidates if "quartz" in c.fact)
    result = daemon.call(
        "ledger.forget",
        {
            "project_id": inspected.project.id,
            "candidate_id": target.id,
            "revision": inspected.ledger.revision,
        },
    )
    assert result.removed and result.purged_jobs == [job_id]
    again = daemon.call(
        "ledger.forget",
        {"project_id": inspected.project.id, "candidate_id": target.id, "revision": 0},
    )
    assert (again.removed, again.purged_jobs) == (False, [])
    forgot = daemon.call("memory.manage", {**yolo, "action": "forget", "id": record.id})
    assert forgot.outcome == "applied"
    assert holders("quartz-lemur-17", *roots) == []
    # the database's remains (index segments, free pages, WAL) are purged off the request path
    wait_for(lambda: holders("orchid-falcon-42", *roots) == [], timeout=10)
    daemon.stop()  # a clean shutdown writes nothing back
    assert holders("quartz-lemur-17", *roots) == []
    assert holders("orchid-falcon-42", *roots) == []
    log = daemon.stderr()
    assert "quartz-lemur-17" not in log and "orchid-falcon-42" not in log
    assert holders("blue runners", *roots)  # the other fact stays


@pytest.mark.slow
def test_forgetting_removes_the_temp_files_a_crash_left_holding_the_fact(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    orca_env.write_config("[extraction]\nworkers = 0\n")  # this test publishes itself
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    fact = "The staging cluster is named quartz-lemur-17."
    session = daemon.call("session.open", {"cwd": str(project)})
    turn = turn_params(session, "t1", f"note that {fact} Builds run on the blue runners.")
    job_id = daemon.call("turn.completed", turn).job_id
    claimed = daemon.call("jobs.claim", {"worker": "test"})
    output = fact_output(fact, "Builds run on the blue runners.")
    params = {"output": output, "provider": "external", "model": "test"}
    daemon.call("jobs.publish", {"job_id": job_id, "token": claimed.lease.token, **params})
    directory = orca_env.memory_root / "projects" / session.project.id
    assert daemon.proc is not None
    dead = daemon.proc.pid
    daemon.kill()
    # what writes cut short by a SIGKILL leave: temps named by the dead daemon, and by a
    # version that did not name them
    copies = {
        "candidates.jsonl": directory / "candidates.jsonl",
        "auto-memory.md": directory / "auto-memory.md",
        "index.sqlite3": directory / "index.sqlite3",
        f"jobs/{job_id}.json": directory / "jobs" / f"{job_id}.json",
    }
    for name, original in copies.items():
        for token in (f"{dead}-{'a' * 16}", "b" * 16):
            folder, _, file = name.rpartition("/")
            leftover = directory / folder / f".{file}.{token}.tmp"
            leftover.write_bytes(original.read_bytes())
    daemon.start()
    roots = (orca_env.home, orca_env.config_dir)
    assert len(holders("quartz-lemur-17", *roots)) > len(copies)

    inspected = daemon.call("projects.inspect", {"cwd": str(project)})
    target = next(c for c in inspected.ledger.candidates if "quartz" in c.fact)
    forgotten = {"project_id": inspected.project.id, "candidate_id": target.id}
    result = daemon.call("ledger.forget", {**forgotten, "revision": inspected.ledger.revision})
    assert result.removed
    assert holders("quartz-lemur-17", *roots) == []
    assert holders("blue runners", *roots)  # the other fact stays


@pytest.mark.slow
def test_keep_evidence_keeps_the_jobs(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    provider.script(ok(fact_output("The linter is ruff with line length 100.")))
    capture = daemon.call("session.open", {"cwd": str(project)})
    job_id = daemon.call("turn.completed", turn_params(capture, "t1", "we lint with ruff")).job_id
    wait_for(lambda: committed(daemon, job_id), timeout=60)
    inspected = daemon.call("projects.inspect", {"cwd": str(project)})
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "orcactl",
            "--no-start",
            "forget",
            inspected.ledger.candidates[0].id,
            "--cwd",
            str(project),
            "--keep-evidence",
            "--json",
        ],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert '"purged_jobs":[]' in result.stdout.replace(" ", "")
    assert [j.job_id for j in daemon.call("jobs.list", {}).jobs] == [job_id]


def modes(*roots: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for root in roots:
        for path in [root, *root.rglob("*")]:
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                found[str(path)] = stat.S_IMODE(mode)
    return found


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.slow
def test_every_file_is_private_under_umask_000(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    configure(orca_env, provider)
    project = tmp_path / "project"
    project.mkdir()
    with umask(0o000):
        # orcactl starts the daemon itself (writing $ORCA_HOME/orcad.log), then uses every store
        started_by_orcactl = subprocess.run(
            [sys.executable, "-m", "orcactl", "recall", "--cwd", str(project), "what do we use"],
            env=orca_env.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    with Client(str(orca_env.socket)) as client:
        pid = client.call("daemon.ping", {}).pid
    try:
        assert started_by_orcactl.returncode == 0, started_by_orcactl.stderr
        with Client(str(orca_env.socket)) as client:
            opened = client.call("session.open", {"cwd": str(project), "mode": "yolo"})
            session = {"session_id": opened.session_id, "epoch": opened.epoch}
            client.call("remember", {**session, "text": "we use uv", "scope": "user"})
            client.call("remember", {**session, "text": "tests need docker", "scope": "project"})
            client.call(
                "memory.manage",
                {
                    **session,
                    "action": "save",
                    "content": "prefer small PRs",
                    "kind": "preference",
                    "is_global": True,
                },
            )
            provider.script(ok(fact_output("The project uses uv.")))
            job_id = client.call("turn.completed", turn_params(opened, "t1", "we use uv")).job_id
            wait_for(lambda: committed_via(client, job_id), timeout=60)
            client.call("recall", {**session, "turn_id": "r1", "prompt": "uv"})
        time.sleep(1.0)  # snapshots written
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not orca_env.socket.exists(), timeout=20)
        # the socket goes first: the daemon may still be closing its databases, whose -wal
        # files vanish as they close
        wait_for(lambda: process_gone(pid), timeout=20)
    log = orca_env.home / "orcad.log"
    assert log.exists()
    written_by_the_test = {orca_env.home / "config.toml"}
    found = modes(orca_env.home, orca_env.config_dir, orca_env.root / "xdg-runtime")
    loose = {
        path: oct(mode)
        for path, mode in found.items()
        if mode not in (0o600, 0o700) and Path(path) not in written_by_the_test
    }
    assert found[str(log)] == 0o600
    assert loose == {}


def committed_via(client: Client, job_id: str) -> bool:
    return any(
        j.job_id == job_id and j.state == "committed" for j in client.call("jobs.list", {}).jobs
    )


def orcactl(orca_env: OrcaEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orcactl", "--no-start", *args],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_orcactl_grants_list_and_revoke(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    session = open_session(daemon, project)

    def save_and_grant(session: dict[str, Any], content: str, decision: str) -> None:
        pending = daemon.call(
            "memory.manage",
            {**session, "action": "save", "content": content, "kind": "fact", "is_global": False},
        )
        daemon.call(
            "memory.approve",
            {**session, "approval_id": pending.approval_id, "decision": decision},
        )

    save_and_grant(session, "use uv", "allow_workspace")
    listed = orcactl(orca_env, "grants", "list")
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    grant_id = line.split()[0]
    assert grant_id.startswith("workspace:") and str(project.resolve()) in line
    assert orcactl(orca_env, "grants", "list", "--workspace", str(tmp_path)).stdout.startswith(
        "no grants"
    )
    other = tmp_path / "other"  # (the workspace grant above covers the project's changes)
    other.mkdir()
    second = open_session(daemon, other)
    save_and_grant(second, "use ruff", "allow_session")
    [line] = [
        line
        for line in orcactl(orca_env, "grants", "list").stdout.splitlines()
        if not line.startswith(grant_id)
    ]
    assert f"  session {second['session_id']}  " in line and "session session" not in line
    revoked = orcactl(orca_env, "grants", "revoke", grant_id)
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    again = orcactl(orca_env, "grants", "revoke", grant_id, "--json")
    assert '"revoked":false' in again.stdout.replace(" ", "")
    assert (
        daemon.call(
            "memory.manage",
            {
                **session,
                "action": "save",
                "content": "use ruff",
                "kind": "fact",
                "is_global": False,
            },
        ).outcome
        == "pending_approval"
    )
    bad = orcactl(orca_env, "grants", "revoke", "everything")
    assert bad.returncode == 2 and "grant id" in bad.stderr  # bad usage, before any request


@pytest.mark.slow
def test_a_forget_cut_short_by_a_crash_is_purged_at_the_next_start(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    yolo = open_session(daemon, project, mode="yolo")
    secret_words = "Deploy keys rotate with the heron-basalt-88 runbook."
    save_fillers(daemon, yolo)
    record = save(daemon, yolo, secret_words)
    daemon.call("memory.manage", {**yolo, "action": "forget", "id": record.id})
    daemon.kill()  # before the purge runs
    daemon.start()
    roots = (orca_env.home, orca_env.config_dir)
    wait_for(lambda: holders("heron-basalt-88", *roots) == [], timeout=10)  # opening purges
    assert holders("heron", *roots) == [] and holders("basalt", *roots) == []
    assert holders("filler fact 7", *roots)


@pytest.mark.slow
def test_a_forgotten_fact_does_not_come_back_from_jobs_still_waiting(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    orca_env.write_config("[extraction]\nworkers = 0\n")  # jobs wait for this test's claims
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    fact = "The staging cluster is named quartz-lemur-17."
    other = "Builds run on the blue runners."
    session = daemon.call("session.open", {"cwd": str(project)})

    def turn(turn_id: str, text: str) -> str:
        return str(daemon.call("turn.completed", turn_params(session, turn_id, text)).job_id)

    def claim() -> Any:
        claimed = daemon.call("jobs.claim", {"worker": "test"})
        assert claimed.job is not None
        return claimed

    def publish(claimed: Any, *facts: str) -> Any:
        return daemon.call(
            "jobs.publish",
            {
                "job_id": claimed.job.job_id,
                "token": claimed.lease.token,
                "output": fact_output(*facts),
                "provider": "external",
                "model": "test",
            },
        )

    def ledger_facts() -> list[str]:
        inspected = daemon.call("projects.inspect", {"cwd": str(project)})
        return [candidate.fact for candidate in inspected.ledger.candidates]

    first = turn("t1", f"note that {fact.upper()}")  # the case differs from the fact's
    assert publish(claim(), fact).added == 1
    # said again, twice more, before the forget: one job is taken by a worker, one still queued
    leased = turn("t2", f"Reminder:  the staging\ncluster is named quartz-lemur-17! And {other}")
    queued = turn("t3", f"again: {fact} Thanks.")
    in_flight = claim()
    assert in_flight.job.job_id == leased

    inspected = daemon.call("projects.inspect", {"cwd": str(project)})
    result = daemon.call(
        "ledger.forget",
        {
            "project_id": inspected.project.id,
            "candidate_id": inspected.ledger.candidates[0].id,
            "revision": inspected.ledger.revision,
        },
    )
    assert result.removed and result.purged_jobs == [first]
    assert sorted(result.waiting_jobs) == sorted([leased, queued])
    roots = (orca_env.home, orca_env.config_dir)
    assert holders("quartz-lemur-17", *roots) == []  # cut out of the waiting jobs' sources
    assert holders("blue runners", *roots)  # the rest of their text stays for extraction

    # the worker that held a job before the forget publishes what it extracted then
    published = publish(in_flight, fact, other)
    assert (published.added, published.duplicates) == (1, 1)
    # and the job still queued, whatever its extractor makes of it
    assert publish(claim(), fact).duplicates == 1
    assert ledger_facts() == [other]
    # a turn after the forget may teach the fact again: that is a new decision
    turn("t4", f"for the record, {fact}")
    assert publish(claim(), fact).added == 1
    assert sorted(ledger_facts()) == sorted([fact, other])


@pytest.mark.slow
def test_an_updated_record_leaves_no_copy_of_its_old_text(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    yolo = open_session(daemon, project, mode="yolo")
    save_fillers(daemon, yolo)
    record = save(daemon, yolo, "Always tag releases as orchid-falcon-42.")
    roots = (orca_env.home, orca_env.config_dir)
    for turn in ("r1", "r2"):  # recall snapshots holding the old text, in memory and on disk
        recalled = daemon.call("recall", {**yolo, "turn_id": turn, "prompt": "release tags"})
        assert any("orchid-falcon-42" in entry.content for entry in recalled.deliberate)
    time.sleep(1.0)  # the snapshot writer persists within half a second
    assert holders("orchid-falcon-42", *roots)
    daemon.call(
        "memory.manage",
        {**yolo, "action": "update", "id": record.id, "content": "Tag releases with the date."},
    )
    wait_for(lambda: holders("orchid-falcon-42", *roots) == [], timeout=10)
    assert holders("Tag releases with the date", *roots)


@pytest.mark.slow
@pytest.mark.parametrize("action", ["forget", "update"])
def test_a_record_recalled_cut_to_fit_leaves_no_snapshot_behind(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, action: str
) -> None:
    # a record too long for the block is recalled cut: its snapshots hold only its beginning,
    # so the whole text is no needle for them; the record's id is
    daemon = started(orca_env, daemon_factory)
    project = tmp_path / "project"
    project.mkdir()
    yolo = open_session(daemon, project, mode="yolo")
    steps = " ".join(f"Step {n}: rotate the garnet-lynx-77 keys." for n in range(150))
    record = save(daemon, yolo, ("Garnet-lynx-77 runbook. " + steps)[:MEMORY_CONTENT_MAX_CHARS])
    roots = (orca_env.home, orca_env.config_dir)
    for turn in ("r1", "r2"):  # snapshots holding its beginning, in memory and on disk
        recalled = daemon.call("recall", {**yolo, "turn_id": turn, "prompt": "garnet-lynx-77"})
        [shown] = recalled.deliberate
        assert shown.id == record.id and shown.content != record.content  # cut
    snapshots = orca_env.home / "memory" / "daemon-state.sqlite3"
    wait_for(  # the snapshot writer persists within half a second of an idle machine
        lambda: any(p.startswith(str(snapshots)) for p in holders("rotate the garnet", *roots)),
        timeout=10,
    )
    if action == "forget":
        params = {**yolo, "action": "forget", "id": record.id}
    else:
        params = {**yolo, "action": "update", "id": record.id, "content": "Keys rotate monthly."}
    assert daemon.call("memory.manage", params).outcome == "applied"
    wait_for(lambda: holders("rotate the garnet", *roots) == [], timeout=10)
    # the turn asks again: a fresh recall, without the old text
    again = daemon.call("recall", {**yolo, "turn_id": "r1", "prompt": "garnet-lynx-77"})
    assert "rotate the garnet" not in again.context


def test_orcactl_grants_list_for_a_directory_inside_the_workspace(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # --workspace names the workspace as --cwd does: from any directory inside the repository
    daemon = started(orca_env, daemon_factory)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    session = open_session(daemon, repo / "src")
    pending = daemon.call(
        "memory.manage",
        {**session, "action": "save", "content": "use uv", "kind": "fact", "is_global": False},
    )
    daemon.call(
        "memory.approve",
        {**session, "approval_id": pending.approval_id, "decision": "allow_workspace"},
    )
    for where in (repo, repo / "src"):
        listed = orcactl(orca_env, "grants", "list", "--workspace", str(where))
        assert listed.returncode == 0, listed.stderr
        [line] = listed.stdout.splitlines()
        assert line.startswith("workspace:") and str(repo.resolve()) in line


class TwoProjects:
    """Two projects, each with one fact recalled by a turn of a session still open: the
    snapshots of those turns hold the facts, in memory and in daemon-state.sqlite3."""

    gone_fact = "Invoices are rendered with the walnut-prism-31 template."
    kept_fact = "Reports are rendered with the cedar-orbit-64 template."

    def __init__(self, daemon: DaemonProcess, provider: FakeOpenAI, tmp_path: Path) -> None:
        self.daemon = daemon
        self.gone, self.kept = tmp_path / "gone", tmp_path / "kept"
        provider.script(ok(fact_output(self.gone_fact)), ok(fact_output(self.kept_fact)))
        self.sessions = {}
        for project, fact, turn in (
            (self.gone, self.gone_fact, "t1"),
            (self.kept, self.kept_fact, "t2"),
        ):
            project.mkdir()
            opened = daemon.call("session.open", {"cwd": str(project)})
            job_id = daemon.call(
                "turn.completed", turn_params(opened, turn, f"note: {fact}")
            ).job_id
            wait_for(lambda job_id=job_id: committed(daemon, job_id), timeout=60)
            self.sessions[project] = opened.session_id
        self.prompts = {self.gone: "invoices rendered template", self.kept: "reports template"}
        self.before = {project: self.recall(project) for project in self.prompts}
        assert "walnut-prism-31" in self.before[self.gone].context
        assert "cedar-orbit-64" in self.before[self.kept].context
        state = daemon.orca.memory_root / "daemon-state.sqlite3"
        wait_for(
            lambda: any(str(state) in path for path in holders("walnut-prism-31", state.parent))
        )
        self.gone_id = daemon.call("projects.inspect", {"cwd": str(self.gone)}).project.id

    def recall(self, project: Path) -> Any:
        """The same turn of the project's session, asked again."""
        joined = self.daemon.call(
            "session.open",
            {"cwd": str(project), "session_id": self.sessions[project], "join": True},
        )
        ids = {"session_id": joined.session_id, "epoch": joined.epoch}
        return self.daemon.call("recall", {**ids, "turn_id": "r1", "prompt": self.prompts[project]})

    def assert_gone_fact_dropped(self, orca_env: OrcaEnv) -> None:
        assert "walnut-prism-31" not in self.recall(self.gone).context
        assert holders("walnut-prism-31", orca_env.home, orca_env.config_dir) == []
        again = self.recall(self.kept)  # another project's snapshot is kept
        assert again.snapshot_id == self.before[self.kept].snapshot_id
        assert "cedar-orbit-64" in again.context


@pytest.mark.slow
def test_a_project_directory_moved_aside_leaves_no_fact_in_recall_snapshots(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    # README, "Deleting a project's memory safely": move projects/<id>/ aside, restart orcad.
    # The recall snapshots in daemon-state.sqlite3 kept the project's facts after that, and a
    # turn of a session still open was answered them again.
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    projects = TwoProjects(daemon, provider, tmp_path)
    daemon.stop()
    (orca_env.memory_root / "projects" / projects.gone_id).rename(tmp_path / "trash")
    daemon.start()

    projects.assert_gone_fact_dropped(orca_env)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["projects", "jobs"])
def test_a_project_directory_moved_aside_while_orcad_runs_leaves_no_fact_in_recall_snapshots(
    orca_env: OrcaEnv,
    daemon_factory: list[DaemonProcess],
    provider: FakeOpenAI,
    tmp_path: Path,
    command: str,
) -> None:
    # The same without the restart: orcad notices the directory gone at the next listing
    # (job_files_gone), but kept the snapshots holding its facts, in memory and on disk, so the
    # same turn asked again was answered a fact of a project whose memory was deleted.
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    projects = TwoProjects(daemon, provider, tmp_path)
    (orca_env.memory_root / "projects" / projects.gone_id).rename(tmp_path / "trash")
    listed = orcactl(orca_env, command)
    assert listed.returncode == 0, listed.stderr

    projects.assert_gone_fact_dropped(orca_env)
    status = orcactl(orca_env, "status", "--json")
    assert "job_files_gone" in status.stdout, status.stdout


@pytest.mark.slow
@pytest.mark.parametrize("restart", [False, True])
def test_a_ledger_deleted_alone_while_orcad_runs_leaves_no_fact_in_recall_snapshots(
    orca_env: OrcaEnv,
    daemon_factory: list[DaemonProcess],
    provider: FakeOpenAI,
    tmp_path: Path,
    restart: bool,
) -> None:
    # Only candidates.jsonl deleted, its directory kept: orcad never noticed, so the same turn
    # asked again was answered the facts the ledger held until a restart. With `restart`, the
    # ledger was there when orcad started and is deleted before any listing, its snapshot read
    # back into memory by the turn asked again after the start.
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    projects = TwoProjects(daemon, provider, tmp_path)
    if restart:
        daemon.stop()
        daemon.start()
        again = projects.recall(projects.gone)
        assert again.snapshot_id == projects.before[projects.gone].snapshot_id
    directory = orca_env.memory_root / "projects" / projects.gone_id
    (directory / "candidates.jsonl").unlink()
    listed = orcactl(orca_env, "jobs" if restart else "projects")
    assert listed.returncode == 0, listed.stderr

    assert "walnut-prism-31" not in projects.recall(projects.gone).context
    state = orca_env.memory_root / "daemon-state.sqlite3"
    found = holders("walnut-prism-31", orca_env.memory_root)
    assert [path for path in found if path.startswith(str(state))] == [], found
    again = projects.recall(projects.kept)  # another project's snapshot is kept
    assert again.snapshot_id == projects.before[projects.kept].snapshot_id
    assert "cedar-orbit-64" in again.context
    assert directory.is_dir() and (directory / "jobs").is_dir()  # nothing else removed


@pytest.mark.slow
@pytest.mark.parametrize("noticed_by", ["restart", "projects"])
def test_a_project_directory_renamed_beside_the_others_leaves_no_fact_in_recall_snapshots(
    orca_env: OrcaEnv,
    daemon_factory: list[DaemonProcess],
    provider: FakeOpenAI,
    tmp_path: Path,
    noticed_by: str,
) -> None:
    # Moved aside by a rename within projects/ (projects/<id>.trash), the directory is no
    # project any more, but its ledger was still counted as holding the facts: the snapshots
    # holding them were kept and the same turn asked again was answered them.
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    projects = TwoProjects(daemon, provider, tmp_path)
    directory = orca_env.memory_root / "projects" / projects.gone_id
    if noticed_by == "restart":
        daemon.stop()
        directory.rename(directory.with_name(f"{projects.gone_id}.trash"))
        daemon.start()
    else:
        directory.rename(directory.with_name(f"{projects.gone_id}.trash"))
        listed = orcactl(orca_env, noticed_by)
        assert listed.returncode == 0, listed.stderr

    assert "walnut-prism-31" not in projects.recall(projects.gone).context
    state = orca_env.memory_root / "daemon-state.sqlite3"
    assert not [path for path in holders("walnut-prism-31", state.parent) if str(state) in path]
    again = projects.recall(projects.kept)  # another project's snapshot is kept
    assert again.snapshot_id == projects.before[projects.kept].snapshot_id


@pytest.mark.slow
def test_a_project_directory_moved_aside_then_made_again_leaves_no_fact_in_recall_snapshots(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    # A turn of the project's open session ending after the move makes its directory again
    # (empty but for that turn's job) before a listing looks: the listing then finds only the
    # old jobs' files gone, not the directory, and the snapshots holding the moved project's
    # facts were kept, so the same turn asked again was answered them.
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    projects = TwoProjects(daemon, provider, tmp_path)
    directory = orca_env.memory_root / "projects" / projects.gone_id
    directory.rename(tmp_path / "trash")
    provider.script(ok(fact_output("Builds run with the maple-quartz-12 runner.")))
    joined = daemon.call(
        "session.open",
        {"cwd": str(projects.gone), "session_id": projects.sessions[projects.gone], "join": True},
    )
    job_id = daemon.call("turn.completed", turn_params(joined, "t3", "note: maple")).job_id
    wait_for(lambda: committed(daemon, job_id), timeout=60)
    assert directory.is_dir()
    listed = orcactl(orca_env, "projects")
    assert listed.returncode == 0, listed.stderr

    assert "walnut-prism-31" not in projects.recall(projects.gone).context
    assert holders("walnut-prism-31", orca_env.home, orca_env.config_dir) == []
    again = projects.recall(projects.kept)  # another project's snapshot is kept
    assert again.snapshot_id == projects.before[projects.kept].snapshot_id


@pytest.mark.slow
def test_a_ledger_deleted_alone_after_its_directory_was_moved_back_leaves_no_fact_in_snapshots(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    # README: a moved project directory can be moved back where it was. Found gone meanwhile,
    # its ledger was no longer among those orcad had seen, so deleting only candidates.jsonl
    # after the move back was never noticed: the same turn asked again was answered its facts.
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    projects = TwoProjects(daemon, provider, tmp_path)
    directory = orca_env.memory_root / "projects" / projects.gone_id
    directory.rename(tmp_path / "trash")
    listed = orcactl(orca_env, "projects")
    assert listed.returncode == 0, listed.stderr
    (tmp_path / "trash").rename(directory)
    joined = daemon.call(
        "session.open",
        {"cwd": str(projects.gone), "session_id": projects.sessions[projects.gone], "join": True},
    )
    ids = {"session_id": joined.session_id, "epoch": joined.epoch, "turn_id": "r2"}
    prompt = projects.prompts[projects.gone]
    assert "walnut-prism-31" in daemon.call("recall", {**ids, "prompt": prompt}).context
    (directory / "candidates.jsonl").unlink()
    listed = orcactl(orca_env, "projects")
    assert listed.returncode == 0, listed.stderr

    assert "walnut-prism-31" not in daemon.call("recall", {**ids, "prompt": prompt}).context
    state = orca_env.memory_root / "daemon-state.sqlite3"
    found = holders("walnut-prism-31", orca_env.memory_root)
    assert [path for path in found if path.startswith(str(state))] == [], found


def fill_ledger(daemon: DaemonProcess, provider: FakeOpenAI, project: Path) -> None:
    """Give the project's ledger 128 facts newer than those it had (16 turns of 8 facts): the
    earlier ones age out of it, as a ledger keeps its newest 128."""
    words = ["amber", "birch", "coral", "delta", "ember", "fjord", "garnet", "harbor"]
    provider.script(
        *(
            ok(
                fact_output(
                    *(
                        f"The {word} queue number {job} drains at {job}{n} jobs."
                        for n, word in enumerate(words)
                    )
                )
            )
            for job in range(16)
        )
    )
    opened = daemon.call("session.open", {"cwd": str(project)})
    for job in range(16):
        job_id = daemon.call(
            "turn.completed", turn_params(opened, f"fill{job}", f"note: queues {job}")
        ).job_id
        wait_for(lambda job_id=job_id: committed(daemon, job_id), timeout=60)


@pytest.mark.slow
def test_snapshots_of_facts_that_aged_out_of_a_full_ledger_survive_a_restart(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    # A ledger keeps its newest 128 facts. A fact pushed out to make room was taken for one
    # deleted: every restart dropped the snapshots holding such facts (over a thousand in a
    # soak of 20 projects), though snapshots are to survive a restart, and so did each listing
    # that found another project's directory gone.
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    projects = TwoProjects(daemon, provider, tmp_path)
    fill_ledger(daemon, provider, projects.kept)
    kept = daemon.call("projects.inspect", {"cwd": str(projects.kept)}).ledger.candidates
    assert len(kept) == 128 and not [c for c in kept if "cedar-orbit-64" in c.fact], kept

    daemon.stop()
    daemon.start()
    again = projects.recall(projects.kept)
    assert again.snapshot_id == projects.before[projects.kept].snapshot_id
    assert "cedar-orbit-64" in again.context

    directory = orca_env.memory_root / "projects" / projects.gone_id
    directory.rename(tmp_path / "trash")
    listed = orcactl(orca_env, "projects")
    assert listed.returncode == 0, listed.stderr
    assert "walnut-prism-31" not in projects.recall(projects.gone).context
    again = projects.recall(projects.kept)
    assert again.snapshot_id == projects.before[projects.kept].snapshot_id


@pytest.mark.slow
def test_a_snapshot_of_an_earlier_opening_in_a_deleted_project_leaves_no_copy_at_a_restart(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], provider: FakeOpenAI, tmp_path: Path
) -> None:
    # A client may open its session id again elsewhere: the snapshot taken in the first
    # project was judged in the project of the new opening, where a full ledger of newer facts
    # took the deleted project's fact for one aged out, and its text stayed in the state
    # database in a snapshot no turn can be answered any more.
    configure(orca_env, provider)
    daemon = started(orca_env, daemon_factory)
    projects = TwoProjects(daemon, provider, tmp_path)
    reopened = daemon.call(
        "session.open", {"cwd": str(projects.kept), "session_id": projects.sessions[projects.gone]}
    )
    assert reopened.project.id != projects.gone_id
    fill_ledger(daemon, provider, projects.kept)
    daemon.stop()
    directory = orca_env.memory_root / "projects" / projects.gone_id
    directory.rename(tmp_path / "trash")
    daemon.start()
    daemon.call("projects.list", {})  # answered once the start's checks are done
    state = orca_env.memory_root / "daemon-state.sqlite3"
    assert not [path for path in holders("walnut-prism-31", state.parent) if str(state) in path]
