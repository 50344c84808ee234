"""sd_notify: READY=1 once the socket serves, STATUS= health lines, STOPPING=1 on SIGTERM,
over a real datagram NOTIFY_SOCKET (a path, or an abstract `@` name)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from orcad.notify import Notifier, notify_address, status_line
from orcad.supervision import describe_health
from protocol.client import Client
from protocol.types import JobCounts, RecentError, StatusResult, WorkersStatus
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

RECEIVE_TIMEOUT_S = 20.0


def datagram_listener(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(RECEIVE_TIMEOUT_S)
    return sock


def receive_assignments(sock: socket.socket) -> dict[str, str]:
    message = sock.recv(4096).decode()
    return dict(line.split("=", 1) for line in message.split("\n"))


def receive_until(sock: socket.socket, key: str) -> dict[str, str]:
    while True:
        assignments = receive_assignments(sock)
        if key in assignments:
            return assignments


# --- the notifier on its own ----------------------------------------------------------------


def test_without_notify_socket_nothing_is_sent() -> None:
    environ: dict[str, str] = {}
    notifier = Notifier.from_environ(environ)
    assert not notifier.enabled
    assert notifier.ready("serving") is False


def test_notify_socket_is_taken_out_of_the_environment(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    environ = {"NOTIFY_SOCKET": path, "HOME": "/home/someone"}
    notifier = Notifier.from_environ(environ)
    assert notifier.address == path
    assert environ == {"HOME": "/home/someone"}  # workers we spawn cannot notify for us


def test_abstract_socket_name_receives_the_message() -> None:
    name = f"orcad-test-{os.getpid()}-{os.urandom(4).hex()}"
    with datagram_listener("\0" + name) as receiver:
        notifier = Notifier.from_environ({"NOTIFY_SOCKET": "@" + name})
        assert notifier.ready("serving on /run/x.sock")
        assert receiver.recv(4096) == b"READY=1\nSTATUS=serving on /run/x.sock"


def test_path_socket_receives_stopping(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    with datagram_listener(path) as receiver:
        assert Notifier(path).stopping("stopping\nnow")
        assert receive_assignments(receiver) == {"STOPPING": "1", "STATUS": "stopping now"}


def test_unreachable_notify_socket_is_reported_not_raised(tmp_path: Path) -> None:
    assert Notifier(str(tmp_path / "nobody-listens")).status("hello") is False


def test_addresses_and_status_lines() -> None:
    assert notify_address("@abc") == "\0abc"
    assert notify_address("/run/user/1/systemd/notify") == "/run/user/1/systemd/notify"
    assert notify_address("vsock:2:1234") is None
    assert status_line("two\nlines  here") == "STATUS=two lines here"


def test_health_summary_names_what_matters() -> None:
    status = StatusResult(
        version="0",
        pid=1,
        started_at="2026-11-30T07:00:00.000Z",
        uptime_s=1.0,
        socket="/s",
        memory_root="/m",
        deliberate_db="/d",
        workers=WorkersStatus(configured=2, busy=1),
        jobs=JobCounts(pending=3, leased=1, exhausted=2),
        sessions=1,
        projects=4,
        recent_errors=[RecentError(at="2026-11-30T07:00:00.000Z", kind="k", message="m")],
    )
    assert describe_health(status) == (
        "workers 1/2 busy; jobs 3 pending, 1 leased, 2 exhausted; 1 session; 4 projects; "
        "1 recent error"
    )


# --- a real daemon ----------------------------------------------------------------------------


def test_daemon_reports_ready_status_and_stopping(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    notify_path = orca_env.root / "notify.sock"
    with datagram_listener(str(notify_path)) as receiver:
        orca_env.extra_env["NOTIFY_SOCKET"] = str(notify_path)
        process = DaemonProcess(orca_env)
        daemon_factory.append(process)
        process.spawn()

        ready = receive_until(receiver, "READY")
        assert ready["READY"] == "1"
        assert ready["STATUS"] == f"serving on {orca_env.socket}"
        # READY=1 promises the socket answers now: no retry loop here.
        with Client(str(orca_env.socket), timeout=10) as client:
            assert client.call("daemon.ping").pid == process.proc.pid  # type: ignore[union-attr]

        health = receive_until(receiver, "STATUS")
        assert health["STATUS"].startswith("serving; workers 0/2 busy; jobs 0 pending")
        assert "0 sessions" in health["STATUS"]

        assert process.stop(signal.SIGTERM) == 0
        stopping = receive_until(receiver, "STOPPING")
        assert stopping["STOPPING"] == "1"


def test_daemon_reports_why_it_could_not_start(orca_env: OrcaEnv) -> None:
    notify_path = orca_env.root / "notify.sock"
    orca_env.write_config("[extraction]\nworkers = -1\n")
    with datagram_listener(str(notify_path)) as receiver:
        env = dict(orca_env.env, NOTIFY_SOCKET=str(notify_path))
        result = subprocess.run(
            [sys.executable, "-m", "orcad"], env=env, capture_output=True, timeout=60, check=False
        )
        assert result.returncode == 1
        failed = receive_assignments(receiver)
        assert failed["STATUS"].startswith("failed to start: ")
        assert "extraction.workers" in failed["STATUS"]
