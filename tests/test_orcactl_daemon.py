"""orcactl status / ping and start-on-demand, as a user runs them."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orcad.clock import parse_time
from orcad.log import DAEMON_LOG_ROTATE_BYTES
from protocol.client import Client
from protocol.types import JobSummary
from tests.fake_openai import FakeOpenAI, status
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_recall_barrier import turn_completed
from tests.test_recall_daemon import Agent

pytestmark = pytest.mark.daemon


def orcactl(orca_env: OrcaEnv, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orcactl", *args],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextlib.contextmanager
def started_by_orcactl(orca_env: OrcaEnv) -> Iterator[int]:
    """A daemon `orcactl ping` started in the background (its pid), stopped afterwards."""
    result = orcactl(orca_env, "ping", "--json")
    assert result.returncode == 0, result.stderr
    pid: int = json.loads(result.stdout)["pid"]
    try:
        yield pid
    finally:
        subprocess.run(["kill", "-TERM", str(pid)], check=False)
        deadline = time.monotonic() + 15
        while orca_env.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def test_an_orca_home_with_an_unexpanded_tilde_is_in_the_home_directory(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """`export ORCA_HOME="~/.orca"` (quoted), a systemd unit or a .env file passes the `~` as
    it is: it was taken for a directory named `~` under the current one, so each directory
    orcad was started from had a memory of its own (`orcactl service` and `integrate` expanded
    it, and pointed agents at another memory again)."""
    orca_env.extra_env.update(ORCA_HOME="~/.orca-tilde", ORCA_CONFIG_DIR="~/.orca-tilde-db")
    user_home = Path(orca_env.env["HOME"])
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "orcactl", *args]
        return subprocess.run(
            command, env=orca_env.env, cwd=cwd, capture_output=True, text=True, timeout=60
        )

    remembered = run("remember", "We deploy with make release.", "--json", cwd=here)
    assert remembered.returncode == 0, remembered.stderr
    try:
        memory = user_home / ".orca-tilde" / "memory"
        assert "make release" in (memory / "user.md").read_text(encoding="utf-8")
        assert (user_home / ".orca-tilde-db" / "memory.sqlite3").exists()
        assert not (here / "~").exists()
        status = run("status", "--json", cwd=there)
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        assert report["memory_root"] == str(memory)
        assert report["memory_elsewhere"] is None
    finally:
        for home in (user_home, here / "~"):  # the orcad started, wherever its memory went
            with contextlib.suppress(OSError, ValueError, KeyError):
                pid_file = home / ".orca-tilde" / "memory" / "orcad.pid"
                os.kill(int(json.loads(pid_file.read_text())["pid"]), 15)


def test_status_when_not_running_exits_3_and_starts_nothing(orca_env: OrcaEnv) -> None:
    result = orcactl(orca_env, "status")
    assert result.returncode == 3
    assert "inactive" in result.stdout
    assert not orca_env.socket.exists()
    as_json = orcactl(orca_env, "status", "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout) == {
        "running": False,
        "reason": f"orcad is not running (no answer on {orca_env.socket})",
        "socket": str(orca_env.socket),
        "config_file": {
            "path": str(orca_env.home / "config.toml"),
            "exists": False,
            "parses": None,
            "error": None,
            "unknown_keys": None,
            "likely_meant": None,
            "changed_since_start": None,
        },
        "agent_hook_problems": [],  # there whether or not a hook recorded one
    }


def test_status_when_no_daemon_can_listen_on_the_socket_says_so_and_exits_3(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # a runtime dir so deep that its socket's path is longer than a Unix socket's may be: the
    # document had no `running` (exit 1, "AF_UNIX path too long")
    runtime = tmp_path / ("r" * 60) / ("u" * 60)
    runtime.mkdir(mode=0o700, parents=True)
    socket_path = runtime / "orca" / "orcad.sock"
    env = {key: value for key, value in orca_env.env.items() if key != "ORCA_SOCKET"}
    env["XDG_RUNTIME_DIR"] = str(runtime)
    run = [sys.executable, "-m", "orcactl", "status"]
    as_json = subprocess.run([*run, "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert as_json.returncode == 3, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["running"] is False
    assert report["socket"] == str(socket_path)
    length = len(os.fsencode(socket_path))
    assert f"its path is {length} bytes, and a Unix socket's path may have" in report["reason"]
    human = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert human.returncode == 3, human.stderr
    assert "inactive (not running)" in human.stdout
    assert f"Problem: no orcad can listen on {socket_path}: its path is {length}" in human.stdout
    assert not (runtime / "orca").exists()  # nothing was started


@pytest.mark.parametrize(
    "command", [("ping",), ("memory", "search", "pnpm"), ("jobs",), ("remember", "We use pnpm")]
)
def test_a_command_whose_socket_path_is_too_long_exits_3_naming_the_length(
    orca_env: OrcaEnv, tmp_path: Path, command: tuple[str, ...]
) -> None:
    # no orcad can listen there, so none can be started: that is "not running" (3), as status
    # says, not a failed command (1)
    socket_path = tmp_path / ("s" * 120) / "orcad.sock"
    env = {**orca_env.env, "ORCA_SOCKET": str(socket_path)}
    run = [sys.executable, "-m", "orcactl", *command]
    done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    length = len(os.fsencode(socket_path))
    assert done.stderr.startswith(
        f"orcactl: no orcad can listen on {socket_path}: its path is {length} bytes"
    )
    assert done.stderr.endswith("; set ORCA_SOCKET (or give --socket) to a shorter path\n")
    as_json = subprocess.run([*run, "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["error"]["data"]["kind"] == "not_running"
    assert not socket_path.parent.exists()  # nothing was started


def test_status_of_a_running_daemon(daemon: DaemonProcess) -> None:
    result = orcactl(daemon.orca, "status")
    assert result.returncode == 0, result.stderr
    assert "active (running)" in result.stdout
    assert f"Main PID: {daemon.proc.pid}" in result.stdout
    data = json.loads(orcactl(daemon.orca, "status", "--json").stdout)
    assert data["running"] is True  # the key a script checks, as when it is not running
    assert data["agent_hook_problems"] == []
    assert data["pid"] == daemon.proc.pid
    assert data["socket"] == str(daemon.orca.socket)
    states = {"pending", "leased", "committed", "exhausted", "cancelled"}
    assert set(data["jobs"]) == states | {"damaged", "waiting_retry", "next_try_at"}


def test_remember_says_the_size_of_the_file_not_of_the_fact(daemon: DaemonProcess) -> None:
    # "(28 bytes)" after a 21-byte fact read as the fact's size; it is the file's
    user_file = daemon.orca.memory_root / "user.md"
    for fact in ("I prefer tabs", "Deploys go through staging"):
        result = orcactl(daemon.orca, "remember", fact)
        assert result.returncode == 0, result.stderr
        size = user_file.stat().st_size
        assert result.stdout == (
            f"remembered as a user fact in {user_file} (the file now holds {size} bytes)\n"
        )


def test_ping_with_no_start_fails_with_3(orca_env: OrcaEnv) -> None:
    result = orcactl(orca_env, "--no-start", "ping")
    assert result.returncode == 3
    assert "not running" in result.stderr
    assert "Traceback" not in result.stderr


def test_ping_starts_the_daemon_on_demand(orca_env: OrcaEnv) -> None:
    with started_by_orcactl(orca_env) as pid:
        with Client(str(orca_env.socket)) as client:
            assert client.call("daemon.ping").pid == pid
        assert (orca_env.home / "orcad.log").exists()


def test_socket_option_overrides_the_environment(daemon: DaemonProcess, orca_env: OrcaEnv) -> None:
    env = dict(orca_env.env, ORCA_SOCKET="/nonexistent/elsewhere.sock")
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", "--socket", str(daemon.orca.socket), "ping"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert f"pid {daemon.proc.pid}" in result.stdout


def test_usage_error_exits_2(orca_env: OrcaEnv) -> None:
    result = orcactl(orca_env, "no-such-command")
    assert result.returncode == 2


def _orcactl_unread(orca_env: OrcaEnv, *argv: str) -> subprocess.CompletedProcess[str]:
    """orcactl with a stdout whose reader is gone before it writes (`| head -0`)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return subprocess.run(
            [sys.executable, "-m", "orcactl", *argv],
            env=orca_env.env,
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(writer)


def test_output_nobody_reads_ends_quietly_with_exit_1(orca_env: OrcaEnv) -> None:
    """`orcactl status | head -0`: the reader is gone before orcactl writes."""
    result = _orcactl_unread(orca_env, "status")
    assert result.returncode == 1
    assert result.stderr == ""


@pytest.mark.parametrize("argv", [["ping", "--json"], ["memory", "list", "--limit", "0", "--json"]])
def test_a_json_failure_nobody_reads_keeps_its_exit_status_and_message(
    orca_env: OrcaEnv, argv: list[str]
) -> None:
    """`orcactl ping --json | head -0` with orcad down: the failure's document finds no reader."""
    result = _orcactl_unread(orca_env, "--no-start", *argv)
    assert "Traceback" not in result.stderr
    if argv[0] == "ping":
        assert result.returncode == 3
        assert result.stderr == f"orcactl: orcad is not running (no answer on {orca_env.socket})\n"
    else:
        assert result.returncode == 2
        assert result.stderr.endswith("error: argument --limit: 0 is out of range (1 to 20)\n")


def test_a_daemon_that_cannot_start_is_reported_at_once_with_its_reason(orca_env: OrcaEnv) -> None:
    orca_env.write_config("[extraction]\nworkers = -1\n")
    started = time.monotonic()
    result = orcactl(orca_env, "ping")
    assert result.returncode == 3
    assert "orcad could not start" in result.stderr
    assert "extraction.workers" in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 10  # not the whole start timeout


def test_a_daemon_log_linked_to_dev_null_discards_the_log(orca_env: OrcaEnv) -> None:
    orca_env.home.mkdir(parents=True, exist_ok=True)
    (orca_env.home / "orcad.log").symlink_to(os.devnull)
    with started_by_orcactl(orca_env):
        assert os.readlink(orca_env.home / "orcad.log") == os.devnull


def test_a_fifo_at_the_daemon_log_is_refused_not_waited_on(orca_env: OrcaEnv) -> None:
    log = orca_env.home / "orcad.log"
    os.mkfifo(log)  # opening it to append would wait for a reader that never comes
    result = orcactl(orca_env, "ping", timeout=30)
    assert result.returncode == 3  # orcad is not running and was not started
    assert result.stderr == f"orcactl: cannot start orcad: its log {log} is not a regular file\n"
    assert not orca_env.socket.exists()


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda log: log.mkdir(), "Is a directory"),
        (lambda log: log.symlink_to(log.name), "Too many levels of symbolic links"),
    ],
    ids=["directory", "link-loop"],
)
def test_a_daemon_log_that_cannot_be_opened_says_orcad_could_not_start(
    orca_env: OrcaEnv, make: Callable[[Path], None], reason: str
) -> None:
    orca_env.home.mkdir(parents=True, exist_ok=True)
    log = orca_env.home / "orcad.log"
    make(log)
    result = orcactl(orca_env, "ping", timeout=30)
    assert result.returncode == 3
    assert result.stderr == (
        f"orcactl: cannot start orcad: its log {log} cannot be opened: {reason}\n"
    )
    assert not orca_env.socket.exists()


@pytest.mark.parametrize(
    ("home", "said"),
    [
        (lambda root: root / ("h" * 300), "(ORCA_HOME) cannot be used: File name too long"),
        (lambda root: root / "loop", "(ORCA_HOME) cannot be used: Too many levels of symbolic"),
        (lambda root: root / "nowhere" / "home", "cannot create"),
    ],
    ids=["name-too-long", "link-loop", "under-a-link-to-nowhere"],
)
def test_a_home_orcad_cannot_use_is_exit_3_not_running_with_its_reason(
    orca_env: OrcaEnv, home: Callable[[Path], Path], said: str
) -> None:
    (orca_env.root / "loop").symlink_to("loop")
    (orca_env.root / "nowhere").symlink_to("missing")
    orca_env.extra_env["ORCA_HOME"] = str(home(orca_env.root))
    result = orcactl(orca_env, "ping", "--json", timeout=30)
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith("orcactl: cannot start orcad: ")
    assert said in result.stderr and "Errno" not in result.stderr
    assert json.loads(result.stdout)["error"]["data"] == {"kind": "not_running"}
    assert not orca_env.socket.exists()


def test_a_daemon_log_past_its_bound_is_rotated_at_the_next_start(orca_env: OrcaEnv) -> None:
    log = orca_env.home / "orcad.log"
    orca_env.home.mkdir(parents=True, exist_ok=True)
    old = b'{"event": "an old line"}\n' * (DAEMON_LOG_ROTATE_BYTES // 25 + 1)
    log.write_bytes(old)
    (orca_env.home / "orcad.log.1").write_bytes(b"the log before that\n")
    with started_by_orcactl(orca_env):
        assert (orca_env.home / "orcad.log.1").read_bytes() == old
        assert log.stat().st_size < len(old)  # a new log, holding only this daemon's lines
        assert stat.S_IMODE(log.stat().st_mode) == 0o600


def _log_lines_until(orca_env: OrcaEnv, done: Callable[[], bool]) -> None:
    """Sessions opened and closed (each writes lines to orcad.log) until `done`, for 15 s."""
    deadline = time.monotonic() + 15
    with Client(str(orca_env.socket)) as client:
        while not done():
            assert time.monotonic() < deadline, "nothing happened"
            opened = client.call("session.open", {"cwd": str(orca_env.home)})
            client.call("session.close", {"session_id": opened.session_id, "epoch": opened.epoch})


def test_the_log_of_a_running_daemon_is_rotated_past_its_bound(orca_env: OrcaEnv) -> None:
    # a daemon that runs for months must not grow orcad.log without bound between two starts
    log = orca_env.home / "orcad.log"
    kept = orca_env.home / "orcad.log.1"
    with started_by_orcactl(orca_env) as pid:
        os.truncate(log, DAEMON_LOG_ROTATE_BYTES + 1)  # sparse: past the bound, cheaply
        _log_lines_until(orca_env, kept.exists)
        assert kept.stat().st_size > DAEMON_LOG_ROTATE_BYTES  # the old log, whole
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        before = log.stat().st_size
        _log_lines_until(orca_env, lambda: log.stat().st_size > before)  # written to the new one
        assert log.stat().st_size < 1024 * 1024
        assert kept.stat().st_size < DAEMON_LOG_ROTATE_BYTES + 1024 * 1024  # rotated once
        assert json.loads(orcactl(orca_env, "ping", "--json").stdout)["pid"] == pid  # same daemon


def test_a_rotated_log_keeps_no_descriptor_of_the_daemon_on_the_old_one(orca_env: OrcaEnv) -> None:
    # orcactl starts orcad with its stdout on orcad.log too: left on the log moved aside, the
    # next rotation would drop that file while orcad still held it open, its disk space kept
    # until a restart and whatever went to stdout written where nobody can read it
    log = orca_env.home / "orcad.log"
    kept = orca_env.home / "orcad.log.1"
    with started_by_orcactl(orca_env) as pid:
        os.truncate(log, DAEMON_LOG_ROTATE_BYTES + 1)
        _log_lines_until(orca_env, kept.exists)
        for fd in (1, 2):
            assert os.stat(f"/proc/{pid}/fd/{fd}").st_ino == log.stat().st_ino, fd


def test_the_log_launchd_writes_for_the_service_is_rotated_too(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # launchd appends orcad's output to ~/Library/Logs/orcad.log and never rotates it
    log = Path(orca_env.env["HOME"]) / "Library" / "Logs" / "orcad.log"
    log.parent.mkdir(parents=True)
    daemon = DaemonProcess(orca_env)
    daemon.stderr_path = log  # as the plist's StandardErrorPath
    daemon_factory.append(daemon)
    daemon.start()
    os.truncate(log, DAEMON_LOG_ROTATE_BYTES + 1)
    kept = log.with_name("orcad.log.1")
    _log_lines_until(orca_env, kept.exists)
    assert kept.stat().st_size > DAEMON_LOG_ROTATE_BYTES
    _log_lines_until(orca_env, lambda: log.exists() and log.stat().st_size > 0)
    assert log.stat().st_size < 1024 * 1024
    assert not (orca_env.home / "orcad.log.1").exists()


def test_a_running_daemon_leaves_a_log_it_was_not_started_with_alone(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # its stderr is a file of the user's choosing, not orcad.log: that file is theirs to manage
    orca_env.home.mkdir(parents=True, exist_ok=True)
    (orca_env.home / "orcad.log").write_bytes(b"x" * 10)  # the path exists, but it is not stderr
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    os.truncate(daemon.stderr_path, DAEMON_LOG_ROTATE_BYTES + 1)
    _log_lines_until(
        orca_env, lambda: daemon.stderr_path.stat().st_size > DAEMON_LOG_ROTATE_BYTES + 1
    )
    assert not (orca_env.home / "orcad.log.1").exists()
    assert (orca_env.home / "orcad.log").read_bytes() == b"x" * 10
    assert not (daemon.stderr_path.parent / (daemon.stderr_path.name + ".1")).exists()


# orcactl's start path up to orcad itself, once per line of stdin: where orcad would run, one
# line is written to the log it was given (spawning real daemons would make the race too rare)
_STARTER = """
import subprocess, sys
from orcactl import connect

class Orcad:
    def __init__(self, argv, *, stdout, **options):
        stdout.write(b"started\\n")
        stdout.flush()

subprocess.Popen = Orcad
for _ in sys.stdin:
    connect.start_daemon(sys.argv[1])
    print("done", flush=True)
"""


def test_starts_at_once_rotate_the_daemon_log_once_and_keep_the_old_one(
    orca_env: OrcaEnv,
) -> None:
    # each start moves a log past its bound to orcad.log.1: two at once must not both move it,
    # or the second moves the first's new log over the old one, which is then lost
    starters, rounds = 6, 150
    log = orca_env.home / "orcad.log"
    orca_env.home.mkdir(parents=True, exist_ok=True)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _STARTER, str(orca_env.socket)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=orca_env.env,
            text=True,
        )
        for _ in range(starters)
    ]
    try:
        for round_ in range(rounds):
            log.write_bytes(f"round {round_}\n".encode())
            os.truncate(log, DAEMON_LOG_ROTATE_BYTES + 1)  # sparse: past the bound, cheaply
            for process in processes:
                assert process.stdin is not None
                process.stdin.write("start\n")
                process.stdin.flush()
            for process in processes:
                assert process.stdout is not None
                assert process.stdout.readline() == "done\n"
            kept = orca_env.home / "orcad.log.1"
            assert kept.stat().st_size == DAEMON_LOG_ROTATE_BYTES + 1, f"round {round_}"
            with kept.open("rb") as old:
                assert old.read(20).startswith(f"round {round_}\n".encode())
            assert log.read_bytes() == b"started\n" * starters, f"round {round_}"
    finally:
        for process in processes:
            process.communicate(timeout=30)  # closes its stdin: the starter ends


def test_a_started_daemon_holds_no_working_directory_and_keeps_relative_paths(
    orca_env: OrcaEnv,
) -> None:
    # started from a directory the user may later remove or unmount: it must not keep it busy,
    # and paths given relative to it (ORCA_HOME=home) must still mean the same files
    work = orca_env.root
    env = {
        **orca_env.env,
        "ORCA_HOME": "home",
        "ORCA_CONFIG_DIR": "config",
        "ORCA_SOCKET": "run/orcad.sock",
    }
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", "ping", "--json"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    pid = json.loads(result.stdout)["pid"]
    try:
        assert os.readlink(f"/proc/{pid}/cwd") == "/"
        with Client(str(orca_env.socket)) as client:
            assert client.call("daemon.ping").pid == pid
        assert (orca_env.home / "orcad.log").exists()
        assert (orca_env.memory_root).is_dir()
    finally:
        subprocess.run(["kill", "-TERM", str(pid)], check=False)
        deadline = time.monotonic() + 15
        while orca_env.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def _assert_every_command_names(env: dict[str, str], said: str) -> None:
    """orcad, orcactl's starting commands, doctor and status all say what is wrong with home."""

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", *argv], env=env, capture_output=True, text=True, timeout=60
        )

    daemon = run("orcad")
    assert daemon.returncode == 1 and said in daemon.stderr, daemon.stderr
    assert "config.toml" not in daemon.stderr
    for argv in (["ping"], ["remember", "We use pnpm"]):
        started = run("orcactl", *argv)
        assert started.returncode == 3 and said in started.stderr, started.stderr
        assert "Errno" not in started.stderr
    doctor = run("orcactl", "doctor")
    assert f"[FAIL] home: {said}" in doctor.stdout, doctor.stdout
    assert "Not a directory" not in doctor.stdout
    status = run("orcactl", "status")
    assert said in status.stdout and "defaults apply" not in status.stdout, status.stdout


@pytest.mark.parametrize("in_place", ["link to a drive not mounted", "regular file"])
def test_what_is_in_place_of_the_memory_root_is_named(orca_env: OrcaEnv, in_place: str) -> None:
    # orcad said only "cannot start: [Errno 17] File exists: '.../memory'"
    orca_env.home.mkdir(exist_ok=True)
    root = orca_env.memory_root
    if in_place == "regular file":
        root.write_text("not a directory\n")
        said = f"{root} (the memory root) is a regular file, not a directory; move it away"
    else:
        root.symlink_to(orca_env.root / "unmounted" / "memory")
        said = (
            f"{root} (the memory root) is a symbolic link to {orca_env.root / 'unmounted'}"
            "/memory, which does not exist (a drive not mounted?)"
        )
    for argv in (["orcad"], ["orcactl", "ping"]):
        started = subprocess.run(
            [sys.executable, "-m", *argv],
            env=orca_env.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert started.returncode == (1 if argv == ["orcad"] else 3), started.stderr
        assert said in started.stderr and "Errno" not in started.stderr, started.stderr


def test_an_orca_home_that_is_a_file_is_named_as_such(orca_env: OrcaEnv) -> None:
    home = orca_env.root / "orca-home"
    home.write_text("not a directory\n")
    env = {**orca_env.env, "ORCA_HOME": str(home)}
    _assert_every_command_names(env, f"{home} (ORCA_HOME) is a regular file, not a directory")
    assert home.read_text() == "not a directory\n"


def test_an_orca_home_that_is_a_fifo_is_named_as_such(orca_env: OrcaEnv) -> None:
    # it was "is not a directory, not a directory"
    home = orca_env.root / "orca-home"
    os.mkfifo(home)
    env = {**orca_env.env, "ORCA_HOME": str(home)}
    _assert_every_command_names(env, f"{home} (ORCA_HOME) is a FIFO, not a directory")


def test_a_log_that_cannot_be_rotated_does_not_stop_the_start(orca_env: OrcaEnv) -> None:
    # rotating is housekeeping: when orcad.log.1 cannot be replaced (a directory there, say),
    # the daemon still starts, logging on where it did
    log = orca_env.home / "orcad.log"
    orca_env.home.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"x" * (DAEMON_LOG_ROTATE_BYTES + 1))
    (orca_env.home / "orcad.log.1").mkdir()
    with started_by_orcactl(orca_env):
        assert (orca_env.home / "orcad.log.1").is_dir()
        assert log.stat().st_size > DAEMON_LOG_ROTATE_BYTES


def test_a_symlinked_daemon_log_is_rotated_where_it_points(orca_env: OrcaEnv) -> None:
    # orcad.log kept elsewhere through a link: the file it names is what grows, so that file
    # is moved aside (beside itself) and the link then names a new log
    elsewhere = orca_env.root / "logs"
    elsewhere.mkdir()
    target = elsewhere / "orcad.log"
    old = b"x" * (DAEMON_LOG_ROTATE_BYTES + 1)
    target.write_bytes(old)
    orca_env.home.mkdir(parents=True, exist_ok=True)
    log = orca_env.home / "orcad.log"
    log.symlink_to(target)
    with started_by_orcactl(orca_env):
        assert (elsewhere / "orcad.log.1").read_bytes() == old
        assert log.is_symlink() and log.resolve() == target
        assert target.stat().st_size < len(old)
        assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_an_orca_home_that_is_a_dangling_symlink_is_named_as_such(orca_env: OrcaEnv) -> None:
    # ~/.orca linked to a drive that is not mounted (or a directory since removed)
    home = orca_env.root / "orca-home"
    target = orca_env.root / "unmounted" / "orca"
    home.symlink_to(target)
    env = {**orca_env.env, "ORCA_HOME": str(home)}
    said = f"{home} (ORCA_HOME) is a symbolic link to {target}, which does not exist"
    _assert_every_command_names(env, said)
    assert home.is_symlink() and not target.exists()  # nothing made where it points


def test_status_names_a_config_link_that_loops_which_keeps_orcad_from_starting(
    orca_env: OrcaEnv,
) -> None:
    # it said "missing: defaults apply" while orcad refused to start on that very file
    orca_env.home.mkdir(parents=True, exist_ok=True)
    config = orca_env.home / "config.toml"
    config.symlink_to(config.name)
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)["config_file"]
    assert (report["exists"], report["parses"]) == (True, False)
    assert "Too many levels of symbolic links" in report["error"]
    shown = orcactl(orca_env, "status").stdout
    assert f"Config: {config} (NOT valid: " in shown and "defaults apply" not in shown
    started = orcactl(orca_env, "ping")
    assert started.returncode == 3 and "Too many levels of symbolic links" in started.stderr


def test_orcactls_that_find_no_daemon_at_once_start_one_between_them(orca_env: OrcaEnv) -> None:
    # hooks of several sessions finding none (a machine that just booted) started one orcad
    # each: all but one exited, and on two cores each hook took about its whole budget
    orca_env.home.mkdir(parents=True, exist_ok=True)
    pings = [
        subprocess.Popen(
            [sys.executable, "-m", "orcactl", "ping", "--json"],
            env=orca_env.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    answers = [ping.communicate(timeout=60) for ping in pings]
    assert [ping.returncode for ping in pings] == [0] * 6, answers
    pids = {json.loads(stdout)["pid"] for stdout, _stderr in answers}
    try:
        assert len(pids) == 1
        log = (orca_env.home / "orcad.log").read_text()
        assert "already running" not in log and "another orcad" not in log, log[-2000:]
    finally:
        for pid in pids:
            subprocess.run(["kill", "-TERM", str(pid)], check=False)
        deadline = time.monotonic() + 15
        while orca_env.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


# a hosted endpoint whose key variable is not in orcad's environment: its provider cannot be
# built, so no built-in worker runs until orcad restarts
UNBUILDABLE_PROVIDER = (
    "[extraction]\nprovider = 'openai'\nworkers = 1\n[extraction.openai]\n"
    "base_url = 'https://api.example.com/v1'\napi_key_env = 'ORCA_TEST_UNSET_KEY'\n"
)


def test_status_says_extraction_is_not_running_when_its_provider_cannot_be_built(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # a hosted endpoint whose key variable is not in orcad's environment: no worker runs, and
    # status showed "0 busy / 1 configured" beside the provider as if all were well
    orca_env.write_config(UNBUILDABLE_PROVIDER)
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    shown = orcactl(orca_env, "status")
    assert shown.returncode == 0, shown.stderr
    workers = shown.stdout.split("    Workers: ", 1)[1].split("\n       Jobs:", 1)[0]
    assert workers.startswith("NONE RUNNING (1 configured): extraction is stopped"), workers
    assert "ORCA_TEST_UNSET_KEY" in workers and "restart orcad" in workers, workers
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)
    assert "ORCA_TEST_UNSET_KEY" in report["extraction_problem"]
    assert "restart orcad" in report["extraction_fix"]


def test_status_of_running_workers_names_no_extraction_problem(daemon: DaemonProcess) -> None:
    report = json.loads(orcactl(daemon.orca, "status", "--json").stdout)
    assert report["extraction_problem"] is None and report["extraction_fix"] is None
    shown = orcactl(daemon.orca, "status").stdout
    assert f"Workers: 0 busy / {report['workers']['configured']} configured\n" in shown


def test_a_job_waiting_out_a_retry_after_shows_when_it_is_next_tried(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # a 429 asking for two minutes: jobs, inspect and status showed a pending job and no time
    workdir = tmp_path / "repo"
    workdir.mkdir()
    with FakeOpenAI(default=status(429, "slow down", retry_after="120")) as server:
        orca_env.write_config(
            "[extraction]\nprovider = 'openai'\n"
            f"[extraction.openai]\nbase_url = '{server.base_url}'\n"
        )
        daemon = DaemonProcess(orca_env)
        daemon_factory.append(daemon)
        daemon.start()
        agent = Agent(daemon, workdir)
        asked = time.time()
        daemon.call("turn.completed", turn_completed(agent, "t1", "remember that we ship"))
        deadline = time.monotonic() + 30
        # the attempt is counted when the job is claimed, before the provider answers: wait
        # for the failure to be written, pending again with the time it waits for
        while (summary := daemon.call("jobs.list", {}).jobs[0]).not_before is None:
            assert time.monotonic() < deadline, f"no retry time was written: {summary}"
            time.sleep(0.05)
        answered = time.time()  # the 429 came between `asked` and now
        listed = json.loads(orcactl(orca_env, "jobs", "--json").stdout)["jobs"]
        [job] = listed
        assert job["state"] == "pending"
        not_before = parse_time(job["not_before"])
        assert asked + 119 < not_before < answered + 121, job  # Retry-After: 120
        # how long from now, rounded up to the second: at most the two minutes asked for
        left = rf"{re.escape(job['not_before'])} \(in (?:1min \d+s|2min 0s)\)"
        shown = orcactl(orca_env, "jobs").stdout
        assert re.search(f"next try {left}", shown), shown
        inspected = orcactl(orca_env, "inspect", "--project", agent.project_id).stdout
        assert re.search(f"next try {left}", inspected), inspected
        report = json.loads(orcactl(orca_env, "status", "--json").stdout)["jobs"]
        assert (report["waiting_retry"], report["next_try_at"]) == (1, job["not_before"])
        text = orcactl(orca_env, "status").stdout
        assert re.search(f"next try of a failed job {left}", text), text


def _job_failed_once_without_workers(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> tuple[DaemonProcess, Agent, JobSummary]:
    """A daemon without workers, and its one job, failed once by an outside worker: pending,
    waiting out a back-off of 1 to 2 s."""
    workdir = tmp_path / "repo"
    workdir.mkdir()
    orca_env.write_config("[extraction]\nworkers = 0\nretry_base_s = 2.0\n")
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    agent = Agent(daemon, workdir)
    daemon.call("turn.completed", turn_completed(agent, "t1", "remember that we ship"))
    claimed = daemon.call("jobs.claim", {"worker": "external"})
    daemon.call(
        "jobs.fail", {"job_id": claimed.job.job_id, "token": claimed.lease.token, "error": "x"}
    )
    [job] = daemon.call("jobs.list", {}).jobs
    assert job.state == "pending" and job.not_before is not None, job
    return daemon, agent, job


def _wait_out(job: JobSummary) -> None:
    """Until the wall clock is past `job`'s not_before."""
    assert job.not_before is not None
    deadline = time.monotonic() + 30
    while time.time() < parse_time(job.not_before) + 0.1:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_job_whose_retry_time_has_passed_is_pending_and_not_waiting(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # no worker takes the job once its back-off is over: status went on counting it as waiting
    # for a retry, with a next try in the past
    _, _, job = _job_failed_once_without_workers(orca_env, daemon_factory, tmp_path)
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)["jobs"]
    if time.time() < parse_time(job.not_before):  # asked within the back-off (1 to 2 s)
        assert (report["waiting_retry"], report["next_try_at"]) == (1, job.not_before), report
    _wait_out(job)
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)["jobs"]
    assert (report["pending"], report["waiting_retry"], report["next_try_at"]) == (1, 0, None)
    text = orcactl(orca_env, "status").stdout
    assert "Jobs: 1 pending, 0 leased" in text and "next try" not in text, text


def test_a_job_whose_retry_time_has_passed_is_listed_without_one(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # no worker takes the job once its back-off is over: jobs.list, `orcactl jobs --json` and
    # `orcactl inspect --json` went on giving its not_before, a time already passed
    daemon, agent, job = _job_failed_once_without_workers(orca_env, daemon_factory, tmp_path)
    if time.time() < parse_time(job.not_before):  # asked within the back-off (1 to 2 s)
        listed = json.loads(orcactl(orca_env, "jobs", "--json").stdout)["jobs"]
        assert [row["not_before"] for row in listed] in ([job.not_before], [None]), listed
    _wait_out(job)
    [job] = daemon.call("jobs.list", {}).jobs
    assert (job.state, job.not_before) == ("pending", None), job
    [row] = json.loads(orcactl(orca_env, "jobs", "--json").stdout)["jobs"]
    assert (row["state"], row["not_before"]) == ("pending", None), row
    inspected = orcactl(orca_env, "inspect", "--project", agent.project_id, "--json").stdout
    [row] = json.loads(inspected)["jobs"]
    assert (row["state"], row["not_before"]) == ("pending", None), row
    for command in (["jobs"], ["inspect", "--project", agent.project_id]):
        text = orcactl(orca_env, *command).stdout
        assert job.job_id in text and "next try" not in text, text


def test_revoking_a_grant_that_is_not_current_changes_nothing_and_exits_0(
    daemon: DaemonProcess,
) -> None:
    # as README has it: a script revokes without listing first, and twice is no failure
    shown = orcactl(daemon.orca, "grants", "revoke", "global")
    assert (shown.returncode, shown.stdout) == (
        0,
        "global is not a current grant; nothing changed\n",
    )
    as_json = orcactl(daemon.orca, "grants", "revoke", "global", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == {"revoked": False}
