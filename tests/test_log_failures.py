"""A log orcad cannot write loses lines, never the daemon: its stderr may be a file on a full
disk, or a pipe whose reader has gone (`orcad 2>&1 | head`). Before, the failed write raised
inside a request, the connection's handler raised it again while logging that failure, and
orcad exited, so every agent lost its memory until the disk had room again."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest

from orcad.log import StreamLogger
from orcad.main import startup_failure
from protocol.errors import RemoteError
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon


class FillingStream(io.StringIO):
    """A stream on a disk that fills up: writes after the first `room` characters fail with
    ENOSPC once half of them is in, until `free` is called."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, text: str) -> int:
        if self.tell() + len(text) > self.room:
            super().write(text[: len(text) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(text)

    def free(self) -> None:
        self.room = 1 << 20


@pytest.mark.pure
def test_a_line_that_cannot_be_written_is_dropped_and_the_next_starts_a_line_of_its_own() -> None:
    stream = FillingStream(room=16)
    logger = StreamLogger(stream)
    logger.info('{"event": "a"}')
    logger.error('{"event": "lost"}')  # half written, then the disk is full: no exception
    logger.warning('{"event": "also lost"}')
    stream.free()
    logger.info('{"event": "b"}')
    logger.info('{"event": "c"}')
    lines = stream.getvalue().split("\n")
    assert lines[0] == '{"event": "a"}'
    assert lines[-3:] == ['{"event": "b"}', '{"event": "c"}', ""]
    whole = [line for line in lines if line.endswith("}")]
    assert whole == ['{"event": "a"}', '{"event": "b"}', '{"event": "c"}']
    assert all(line.count("event") <= 1 for line in lines)  # a cut line is never glued on


@pytest.mark.pure
def test_a_closed_stream_drops_lines() -> None:
    stream = io.StringIO()
    logger = StreamLogger(stream)
    stream.close()
    logger.error("gone")  # ValueError inside, nothing raised


def _exercise(daemon: DaemonProcess, cwd: Path) -> None:
    """Requests that log on every path: a session, an explicit fact, a recall, a deliberate
    search, errors the daemon answers (an unknown method, bad parameters, a session it does
    not know)."""
    with daemon.client() as client:
        opened = client.call("session.open", {"cwd": str(cwd)})
        ids = {"session_id": opened.session_id, "epoch": opened.epoch}
        client.call("remember", {**ids, "text": "the build uses pnpm", "scope": "project"})
        client.call("recall", {**ids, "turn_id": "t1", "prompt": "which package manager?"})
        client.call("memory.search", {**ids, "query": "pnpm"})
        for method, params in [
            ("no.such.method", {}),
            ("recall", {**ids, "turn_id": 5}),
            ("recall", {"session_id": "nobody", "epoch": 1, "turn_id": "t", "prompt": "x"}),
        ]:
            with pytest.raises(RemoteError):  # answered with an error, and logged
                client.call(method, params)
        client.call("session.close", ids)
    with daemon.client() as client:
        assert client.call("daemon.ping").protocol == 1
    assert daemon.proc is not None
    assert daemon.proc.poll() is None


def _spawn(orca_env: OrcaEnv, stderr: int | IO[Any]) -> DaemonProcess:
    daemon = DaemonProcess(orca_env)
    daemon.proc = subprocess.Popen(
        [sys.executable, "-m", "orcad"],
        env=orca_env.env,
        cwd=orca_env.root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    daemon.stderr_path = orca_env.root / "no-stderr-file"  # what it wrote is not readable
    return daemon


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is a Linux device")
def test_orcad_serves_on_when_its_log_is_on_a_full_disk(orca_env: OrcaEnv, tmp_path: Path) -> None:
    with open("/dev/full", "wb") as full:  # every write fails with ENOSPC
        daemon = _spawn(orca_env, full)
    try:
        daemon.wait_ready()
        _exercise(daemon, tmp_path)
        assert daemon.stop() == 0
    finally:
        daemon.kill()


def test_orcad_serves_on_when_the_reader_of_its_log_has_gone(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    daemon = _spawn(orca_env, subprocess.PIPE)
    try:
        daemon.wait_ready()
        assert daemon.proc is not None
        assert daemon.proc.stderr is not None
        daemon.proc.stderr.close()  # as `head` exits: every later write gets EPIPE
        _exercise(daemon, tmp_path)
        assert daemon.stop() == 0
    finally:
        daemon.kill()


def _close_standard_descriptors() -> None:
    for descriptor in (0, 1, 2):
        os.close(descriptor)  # as `orcad <&- >&- 2>&-` starts it


def test_orcad_started_without_stdin_stdout_and_stderr_serves_and_stops_cleanly(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # Python left sys.stderr None: the start failed with an AttributeError, exit 1 and no word,
    # its socket file left behind; until then its lock file had taken descriptor 0
    daemon = DaemonProcess(orca_env)
    daemon.proc = subprocess.Popen(
        [sys.executable, "-m", "orcad"],
        env=orca_env.env,
        cwd=orca_env.root,
        preexec_fn=_close_standard_descriptors,  # noqa: PLW1509
    )
    try:
        daemon.wait_ready()
        pid = daemon.proc.pid
        # no file or socket of orcad's took a number another program writes to or reads from
        standard = [os.readlink(f"/proc/{pid}/fd/{descriptor}") for descriptor in (0, 1, 2)]
        assert standard == [os.devnull] * 3, standard
        _exercise(daemon, tmp_path)
        assert daemon.stop() == 0
        assert not orca_env.socket.exists()
        assert not (orca_env.memory_root / "orcad.pid").exists()
    finally:
        daemon.kill()


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (MemoryError(), "out of memory (MemoryError) while the features were loaded"),
        (RuntimeError(), "RuntimeError"),
        (OSError(28, "No space left on device"), "[Errno 28] No space left on device"),
    ],
)
def test_a_start_that_fails_says_why_even_when_the_error_has_no_words(
    error: Exception, said: str
) -> None:
    # a MemoryError while the features load printed "orcad: cannot start: " and nothing more
    assert startup_failure(error) == said
