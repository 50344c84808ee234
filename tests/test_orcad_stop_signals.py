"""A stop signal at any moment of orcad's start-up, and a hangup: a clean stop, exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import IO

import pytest

from tests.external_worker import turn_params
from tests.harness import REPO_ROOT, DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

STOP_SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
# Named by a traceback of anything the daemon imports; orcad.entry holds the stop signals
# before it imports it, so a traceback without it is of Python's own start.
DAEMON_MODULE = str(REPO_ROOT / "orcad" / "main.py")

# Stands in for a module orcad imports: it says it has been reached, then waits, so that the
# signal arrives while orcad is importing.
HELD_IMPORT = """\
import os
os.write(int(os.environ["IMPORT_REACHED_FD"]), b"x")
os.read(int(os.environ["IMPORT_HELD_FD"]), 1)
"""


def _default_hangup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as a terminal's shell starts it, not nohup


def _spawn_orcad(
    env: dict[str, str], pass_fds: tuple[int, ...] = (), stderr: IO[bytes] | int = subprocess.PIPE
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "orcad"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL if stderr != subprocess.PIPE else subprocess.PIPE,
        stderr=stderr,
        pass_fds=pass_fds,
        preexec_fn=_default_hangup,  # noqa: PLW1509
    )


@pytest.mark.parametrize("held", ["structlog", "msgspec"])
@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda signum: signum.name)
def test_a_stop_while_orcad_imports_exits_zero_at_once_and_quietly(
    orca_env: OrcaEnv, tmp_path: Path, held: str, signum: signal.Signals
) -> None:
    # Ctrl-C printed a KeyboardInterrupt traceback (exit 1); SIGTERM and a hangup killed orcad
    # with their signal
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / f"{held}.py").write_text(HELD_IMPORT)
    reached_read, reached_write = os.pipe()
    held_read, held_write = os.pipe()
    env = dict(orca_env.env, PYTHONPATH=f"{shadow}{os.pathsep}{REPO_ROOT}")
    env.update(IMPORT_REACHED_FD=str(reached_write), IMPORT_HELD_FD=str(held_read))
    with _spawn_orcad(env, pass_fds=(reached_write, held_read)) as orcad:
        os.close(reached_write)
        os.close(held_read)
        try:
            assert os.read(reached_read, 1) == b"x"  # it is inside the import
            orcad.send_signal(signum)
            stdout, stderr = orcad.communicate(timeout=30)
        finally:
            os.close(reached_read)
            os.close(held_write)
    assert (orcad.returncode, stdout, stderr) == (0, b"", b"")
    assert not orca_env.socket.exists()
    assert not orca_env.memory_root.exists()  # it stopped before it made anything


def _ended_before_orcad_ran(returncode: int, stderr: str, signum: signal.Signals) -> bool:
    """Whether the signal landed while Python itself was starting, before orcad.entry held
    the stop signals: killed by it, or (Ctrl-C) Python's own message about its start."""
    if returncode == -signum and stderr == "":
        return True
    interrupted = signum == signal.SIGINT and returncode in (1, -signal.SIGINT)
    return interrupted and "KeyboardInterrupt" in stderr and DAEMON_MODULE not in stderr


def _wait_stopped(orcad: subprocess.Popen[bytes], stderr_path: Path) -> int | None:
    """orcad's exit status once it stops, or None when Python's own start swallowed the
    Ctrl-C: a KeyboardInterrupt raised in an import's weakref callback is printed as ignored,
    and orcad then starts as if none had come."""
    deadline = time.monotonic() + 60
    while (returncode := orcad.poll()) is None:
        stderr = stderr_path.read_text(errors="replace")
        if "Exception ignored" in stderr and "KeyboardInterrupt" in stderr:
            return None
        assert time.monotonic() < deadline, f"orcad did not stop:\n{stderr}"
        time.sleep(0.05)
    return returncode


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=lambda signum: signum.name)
def test_a_stop_at_any_moment_of_start_up_exits_zero_without_a_traceback(
    orca_env: OrcaEnv, tmp_path: Path, signum: signal.Signals
) -> None:
    # the delays only spread the signal over start-up: every outcome is judged as it is, and
    # by 1.5 s Python has long started, so orcad's own handling must have answered that one
    judged_by_orcad: list[int] = []
    for delay_ms in (0, 5, 10, 20, 40, 80, 160, 320, 640, 1500):
        stderr_path = tmp_path / f"orcad-{delay_ms}.log"
        with stderr_path.open("wb") as stderr_file:
            orcad = _spawn_orcad(orca_env.env, stderr=stderr_file)
        try:
            time.sleep(delay_ms / 1000)
            orcad.send_signal(signum)
            returncode = _wait_stopped(orcad, stderr_path)
        finally:
            orcad.kill()
            orcad.wait()
        stderr = stderr_path.read_text(errors="replace")
        said = f"{signum.name} after {delay_ms} ms: {returncode}\n{stderr}"
        if returncode is None:
            assert signum == signal.SIGINT and DAEMON_MODULE not in stderr, said
            orca_env.socket.unlink(missing_ok=True)  # the kill left it
            continue
        if not _ended_before_orcad_ran(returncode, stderr, signum):
            assert returncode == 0, said
            assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, said
            judged_by_orcad.append(delay_ms)
        assert not orca_env.socket.exists(), said
    assert 1500 in judged_by_orcad, judged_by_orcad


def test_a_hangup_stops_orcad_as_sigterm_does(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # a hangup (its terminal closed) ended orcad where it stood, its socket left behind
    orca_env.write_config("[extraction]\nworkers = 0\n")  # the job stays pending
    daemon = DaemonProcess(orca_env, sighup=signal.SIG_DFL)
    daemon_factory.append(daemon)
    daemon.start()
    session = daemon.call("session.open", {"cwd": str(orca_env.root)})
    job = daemon.call("turn.completed", turn_params(session, "t1", "we deploy with make")).job_id
    assert daemon.stop(signal.SIGHUP) == 0
    assert not orca_env.socket.exists()
    stopping = [e for e in daemon.log_events() if e["event"] == "daemon.stopping"]
    assert [e["signal"] for e in stopping] == ["SIGHUP"]
    assert "daemon.stopped" in [e["event"] for e in daemon.log_events()]
    daemon.start()
    jobs = daemon.call("jobs.list").jobs
    assert [(j.job_id, j.state) for j in jobs] == [(job, "pending")]


def test_orcad_started_with_hangups_ignored_outlives_one(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # `nohup orcad` asks it to outlive its terminal
    daemon = DaemonProcess(orca_env, sighup=signal.SIG_IGN)
    daemon_factory.append(daemon)
    pid = daemon.start().call("daemon.ping").pid
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGHUP)
    assert daemon.call("daemon.ping").pid == pid
    assert daemon.stop(signal.SIGTERM) == 0
    stopping = [e["signal"] for e in daemon.log_events() if e["event"] == "daemon.stopping"]
    assert stopping == ["SIGTERM"]


def test_the_orcad_executable_is_the_entry_that_imports_only_the_standard_library() -> None:
    # what runs before it holds the stop signals must be quick: the daemon's imports were not
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["scripts"]["orcad"] == "orcad.entry:main"
    assert (REPO_ROOT / "orcad" / "__main__.py").read_text().startswith("from orcad.entry import")
    # every module importing it adds, beyond what Python's start loaded, is the standard library's
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import orcad.entry\n"
        "print(sorted(m for m in set(sys.modules) - before\n"
        "    if m.partition('.')[0] not in sys.stdlib_module_names\n"
        "    and m not in ('orcad', 'orcad.entry')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[]"


# The daemon returns 1 (its socket path is too long to bind); a stop signal then lands as it
# exits, after run has returned.
STOP_AS_ORCAD_EXITS = """\
import signal, sys
import orcad.entry, orcad.main
run = orcad.main.run
def run_then_stop():
    status = run()
    signal.raise_signal(signal.SIGTERM)
    return status
orcad.main.run = run_then_stop
orcad.entry.main()
"""


def test_a_stop_signal_as_orcad_exits_keeps_its_exit_status(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # the handler orcad.entry holds during start-up was put back when run returned, so the
    # signal ended orcad with os._exit(0): a failed start reported as a success
    env = {**orca_env.env, "ORCA_SOCKET": str(tmp_path / ("s" * 120))}
    ended = subprocess.run(
        [sys.executable, "-c", STOP_AS_ORCAD_EXITS],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ended.returncode == 1, ended.stderr
    assert "its path is" in ended.stderr and "Traceback" not in ended.stderr


def test_a_console_script_installed_before_the_entry_module_still_runs_orcad(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # an editable install's `orcad` script says `from orcad.main import main` until pip
    # writes it again; it was an ImportError
    script = "import sys\nfrom orcad.main import main\nsys.argv[0] = 'orcad'\nsys.exit(main())\n"
    env = {**orca_env.env, "ORCA_SOCKET": str(tmp_path / ("s" * 120))}
    ended = subprocess.run(
        [sys.executable, "-c", script, "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (ended.returncode, ended.stderr) == (0, "")
    assert ended.stdout.startswith("usage: orcad")
