"""Under journald (JOURNAL_STREAM names stderr), log lines carry a syslog priority prefix and
logfmt fields instead of JSON with a timestamp."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from orcad.journal import render_journal_line, stderr_is_journal
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon


def journal_stream_of(path: Path) -> str:
    info = path.stat()
    return f"{info.st_dev}:{info.st_ino}"


def test_journal_detected_only_when_the_stream_matches_stderr(tmp_path: Path) -> None:
    mine = tmp_path / "stderr"
    other = tmp_path / "other"
    mine.touch()
    other.touch()
    with open(mine, "w") as stream:
        assert stderr_is_journal({"JOURNAL_STREAM": journal_stream_of(mine)}, stream)
        assert not stderr_is_journal({"JOURNAL_STREAM": journal_stream_of(other)}, stream)
        assert not stderr_is_journal({"JOURNAL_STREAM": "garbage"}, stream)
        assert not stderr_is_journal({}, stream)


def test_line_has_priority_event_and_fields() -> None:
    line = render_journal_line(
        None, "warning", {"event": "config.unknown_key", "level": "warning", "key": "a b", "n": 2}
    )
    assert line == '<4>config.unknown_key key="a b" n=2'
    assert render_journal_line(None, "info", {"event": "daemon.stopped", "level": "info"}) == (
        "<6>daemon.stopped"
    )


def test_daemon_logs_for_the_journal_when_stderr_is_the_journal(orca_env: OrcaEnv) -> None:
    stderr_path = orca_env.root / "journal.log"
    stderr_path.touch()
    env = dict(orca_env.env, JOURNAL_STREAM=journal_stream_of(stderr_path))
    with open(stderr_path, "ab") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "orcad"], env=env, stdin=subprocess.DEVNULL, stderr=stderr
        )
    process = DaemonProcess(orca_env)
    process.proc = proc
    process.stderr_path = stderr_path
    try:
        process.wait_ready()
        assert process.stop(signal.SIGTERM) == 0
    finally:
        process.kill()
    lines = stderr_path.read_text().splitlines()
    ready = [line for line in lines if line.startswith("<6>daemon.ready ")]
    assert len(ready) == 1
    assert f"pid={proc.pid}" in ready[0]
    assert f"socket={orca_env.socket}" in ready[0]
    assert not any(line.startswith("{") for line in lines)
