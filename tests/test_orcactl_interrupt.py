"""Ctrl-C while orcactl is still starting or waiting for orcad: exit 130, nothing on stderr,
or with --json the failure document on stdout that every other failure prints."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO_ROOT, OrcaEnv

pytestmark = pytest.mark.daemon

# Stands in for msgspec, which orcactl imports after the hook check: it says it has been
# reached, then waits, so that SIGINT arrives while orcactl is importing.
HELD_IMPORT = """\
import json
import os
os.write(int(os.environ["IMPORT_REACHED_FD"]), b"x")
os.read(int(os.environ["IMPORT_HELD_FD"]), 1)
"""


def _interrupted_while_importing(
    orca_env: OrcaEnv, tmp_path: Path, argv: list[str]
) -> tuple[int, bytes, bytes]:
    """orcactl ARGV sent SIGINT while it imports: its exit status, stdout and stderr."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "msgspec.py").write_text(HELD_IMPORT)
    reached_read, reached_write = os.pipe()
    held_read, held_write = os.pipe()
    env = dict(orca_env.env, PYTHONPATH=f"{shadow}{os.pathsep}{REPO_ROOT}")
    env.update(IMPORT_REACHED_FD=str(reached_write), IMPORT_HELD_FD=str(held_read))
    with subprocess.Popen(
        [sys.executable, "-m", "orcactl", *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(reached_write, held_read),
    ) as command:
        os.close(reached_write)
        os.close(held_read)
        try:
            assert os.read(reached_read, 1) == b"x"  # it is inside the import
            command.send_signal(signal.SIGINT)
            stdout, stderr = command.communicate(timeout=30)
        finally:
            os.close(reached_read)
            os.close(held_write)
    return command.returncode, stdout, stderr


# (with --json, a failure document is printed: the test after this one)
@pytest.mark.parametrize("argv", [["status"], ["recall", "x"], ["doctor"]], ids=" ".join)
def test_ctrl_c_while_a_command_is_importing_exits_130_without_a_traceback(
    orca_env: OrcaEnv, tmp_path: Path, argv: list[str]
) -> None:
    assert _interrupted_while_importing(orca_env, tmp_path, argv) == (130, b"", b"")
    assert not orca_env.socket.exists()


def _json_interrupted(stdout: bytes, stderr: bytes) -> None:
    """stdout holds one failure document saying Ctrl-C, and stderr says the same."""
    document = json.loads(stdout)  # one document, and nothing else
    message = "interrupted (Ctrl-C)"
    assert document == {
        "ok": False,
        "error": {"code": None, "message": message, "data": {"kind": "interrupted"}},
    }
    assert stderr == f"orcactl: {message}\n".encode()


@pytest.mark.parametrize("json_option", ["--json", "--js"])
def test_ctrl_c_while_importing_with_json_prints_a_failure_document(
    orca_env: OrcaEnv, tmp_path: Path, json_option: str
) -> None:
    argv = ["recall", "x", json_option]
    status, stdout, stderr = _interrupted_while_importing(orca_env, tmp_path, argv)
    assert status == 130
    _json_interrupted(stdout, stderr)
    assert not orca_env.socket.exists()


@pytest.mark.parametrize("json_asked", [True, False], ids=["json", "human"])
def test_ctrl_c_while_waiting_for_orcad_prints_a_failure_document_with_json(
    orca_env: OrcaEnv, tmp_path: Path, json_asked: bool
) -> None:
    # a daemon that takes the request and never answers: orcactl waits on it
    mute = tmp_path / "mute.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(mute))
    listener.listen(1)
    listener.settimeout(30)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    argv = ["--socket", str(mute), "--no-start", "recall", "deploying", "--cwd", str(workspace)]
    with (
        listener,
        subprocess.Popen(
            [sys.executable, "-m", "orcactl", *argv, *(["--json"] if json_asked else [])],
            env=orca_env.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as command,
    ):
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(30)
            received = b""
            while b"\n" not in received:  # a whole request: it now waits for the answer
                chunk = connection.recv(65536)
                assert chunk, "orcactl closed the connection without a request"
                received += chunk
            command.send_signal(signal.SIGINT)
            stdout, stderr = command.communicate(timeout=30)
    assert command.returncode == 130
    assert b"Traceback" not in stderr
    if json_asked:
        _json_interrupted(stdout, stderr)
    else:
        assert (stdout, stderr) == (b"", b"")
