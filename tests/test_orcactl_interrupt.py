"""Ctrl-C while orcactl is still starting: exit 130, nothing on stderr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO_ROOT, OrcaEnv

pytestmark = pytest.mark.daemon

# Stands in for msgspec, which orcactl imports after the hook check: it says it has been
# reached, then waits, so that SIGINT arrives while orcactl is importing.
HELD_IMPORT = """\
import os
os.write(int(os.environ["IMPORT_REACHED_FD"]), b"x")
os.read(int(os.environ["IMPORT_HELD_FD"]), 1)
"""


@pytest.mark.parametrize("argv", [["status"], ["recall", "x", "--json"], ["doctor"]], ids=" ".join)
def test_ctrl_c_while_a_command_is_importing_exits_130_without_a_traceback(
    orca_env: OrcaEnv, tmp_path: Path, argv: list[str]
) -> None:
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
    assert (command.returncode, stdout, stderr) == (130, b"", b"")
    assert not orca_env.socket.exists()
