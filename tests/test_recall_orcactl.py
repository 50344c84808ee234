"""`orcactl recall` and `orcactl remember` against a real daemon."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO_ROOT, DaemonProcess, OrcaEnv
from tests.test_recall_daemon import add_facts, project_dir

pytestmark = pytest.mark.daemon


def orcactl(orca_env: OrcaEnv, *args: str) -> subprocess.CompletedProcess[str]:
    done = _with_stdin(orca_env, list(args), b"")
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def _with_stdin(
    orca_env: OrcaEnv, args: list[str], stdin: bytes
) -> subprocess.CompletedProcess[bytes]:
    """orcactl (never starting orcad) with `stdin` as its standard input."""
    return subprocess.run(
        [sys.executable, "-m", "orcactl", "--no-start", *args],
        env=orca_env.env,
        cwd=REPO_ROOT,
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_remember_then_recall_from_the_command_line(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    done = orcactl(orca_env, "remember", "I prefer short commit messages")
    assert done.returncode == 0, done.stderr
    assert "user fact" in done.stdout
    assert (orca_env.memory_root / "user.md").read_text() == "- I prefer short commit messages\n"

    done = orcactl(
        orca_env, "remember", "--project", "--cwd", str(repo), "--json", "CI runs nightly"
    )
    assert done.returncode == 0, done.stderr
    path = Path(json.loads(done.stdout)["path"])
    assert path.name == "memory.md" and path.read_text() == "- CI runs nightly\n"

    project_id = daemon.call("session.open", {"cwd": str(repo)}).project.id
    add_facts(project_dir(orca_env, project_id), ["This repository deploys with `make release`."])
    done = orcactl(orca_env, "recall", "--cwd", str(repo), "how are we deploying?")
    assert done.returncode == 0, done.stderr
    assert "This repository deploys with `make release`." in done.stdout
    assert "not instructions" in done.stdout

    done = orcactl(orca_env, "recall", "--cwd", str(repo), "--json", "deploying")
    result = json.loads(done.stdout)
    assert [entry["text"] for entry in result["automatic"]] == [
        "This repository deploys with `make release`."
    ]
    assert result["bytes"] == len(result["context"].encode())

    done = orcactl(orca_env, "recall", "--cwd", str(repo), "unrelated astronomy question")
    assert done.stdout.strip() == "(nothing recalled for this prompt)"


def test_remember_refusal_is_a_clear_error(daemon: DaemonProcess, orca_env: OrcaEnv) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    done = orcactl(orca_env, "remember", f"token {token}")
    assert done.returncode == 1
    assert "secret" in done.stderr and "invalid_params" in done.stderr
    assert token not in done.stderr


def test_remember_dash_reads_the_fact_from_stdin(daemon: DaemonProcess, orca_env: OrcaEnv) -> None:
    def remember(stdin: bytes) -> subprocess.CompletedProcess[bytes]:
        return _with_stdin(orca_env, ["remember", "-"], stdin)

    done = remember(b"We deploy staging through ArgoCD\n")
    assert done.returncode == 0, done.stderr
    assert (orca_env.memory_root / "user.md").read_text() == "- We deploy staging through ArgoCD\n"
    for stdin, said in ((b" \n", b"empty"), (b"caf\xe9", b"UTF-8"), (b"y" * 2001, b"at most 2000")):
        refused = remember(stdin)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
        assert b"Traceback" not in refused.stderr
    assert (orca_env.memory_root / "user.md").read_text() == "- We deploy staging through ArgoCD\n"


def test_recall_dash_reads_the_prompt_from_stdin(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    project_id = daemon.call("session.open", {"cwd": str(repo)}).project.id
    add_facts(project_dir(orca_env, project_id), ["This repository deploys with `make release`."])

    def recall(stdin: bytes) -> subprocess.CompletedProcess[bytes]:
        return _with_stdin(orca_env, ["recall", "--cwd", str(repo), "-"], stdin)

    # a pasted log, its question on the last line, as `orcactl recall - < log.txt` sends it
    done = recall(b"Traceback (most recent call last):\n  ...\nhow are we deploying?\n")
    assert done.returncode == 0, done.stderr
    assert b"This repository deploys with `make release`." in done.stdout
    refused = recall(b"caf\xe9")
    assert refused.returncode == 2 and b"UTF-8" in refused.stderr, refused.stderr
    assert b"Traceback" not in refused.stderr


@pytest.mark.parametrize("command", [["remember", "-"], ["provider", "test", "-"], ["recall", "-"]])
def test_a_dash_stops_reading_an_endless_stdin(orca_env: OrcaEnv, command: list[str]) -> None:
    # `yes | orcactl remember -`, or `< /dev/zero`: what is read is bounded, not held whole until
    # the end that never comes (the address space is capped so a regression fails, not swaps)
    endless = subprocess.Popen(["yes", "a fact"], stdout=subprocess.PIPE)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "orcactl", "--no-start", *command],
            env=orca_env.env,
            cwd=REPO_ROOT,
            stdin=endless.stdout,
            capture_output=True,
            timeout=60,
            check=False,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)),
        )
    finally:
        endless.kill()
        endless.wait()
        assert endless.stdout is not None
        endless.stdout.close()
    assert done.returncode == 2, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"the text on stdin" in done.stderr and b"characters" in done.stderr
    assert not (orca_env.memory_root / "user.md").exists()
