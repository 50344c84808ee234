"""A write refused for a full disk is answered with the file and with what to do, whichever
store raised it (README: When files are damaged or the disk is full)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults_helpers import fill_up, small_filesystem
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_faults import recent, remote_error, start, turn, workdir

pytestmark = pytest.mark.crash

ADVICE = "free disk space (or raise the quota) and try again"


def test_every_write_a_full_disk_refuses_says_what_to_do(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    cwd = workdir(tmp_path)
    with small_filesystem(orca_env.home), small_filesystem(orca_env.config_dir):
        daemon = start(orca_env, daemon_factory, "[extraction]\nworkers = 0\n")
        session = daemon.call("session.open", {"cwd": cwd, "mode": "yolo"})
        ids = {"session_id": session.session_id, "epoch": session.epoch}
        fillers = [fill_up(orca_env.home), fill_up(orca_env.config_dir)]
        failing = {
            "turn.completed": turn(session, "t1"),
            "remember": {**ids, "text": "we deploy on Tuesdays " * 40, "scope": "project"},
            "memory.manage": {
                **ids,
                "action": "save",
                "content": "the release checklist lives in docs/release.md " * 20,
                "kind": "fact",
                "is_global": True,
            },
        }
        for method, params in failing.items():
            error = remote_error(daemon, method, params)
            assert (error.code, error.data.get("reason")) == (-32017, "disk_full"), error
            assert ADVICE in error.error.message, (method, error.error.message)
            assert error.error.message.count(ADVICE) == 1, error.error.message
        recorded = recent(daemon, "storage")
        for method in failing:
            assert any(m.startswith(f"{method}:") and ADVICE in m for m in recorded), recorded
        for filler in fillers:
            filler.unlink()
        assert daemon.call("turn.completed", turn(session, "t1")).job_id
        daemon.stop()
