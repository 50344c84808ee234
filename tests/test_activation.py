"""Socket activation: the daemon serves on a listening socket inherited as fd 3 (LISTEN_PID and
LISTEN_FDS), leaves it bound and in place, and ignores descriptors announced for another pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from orcad.activation import (
    ACTIVATION_VARIABLES,
    adopt_listening_socket,
    inherited_socket,
    launchd_socket,
)
from orcad.errors import StartupError
from protocol.client import Client
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

# Puts the passed descriptor at fd 3, announces it for this very process (or for the pid given),
# then becomes orcad: what systemd does between fork and exec.
ACTIVATION_WRAPPER = """
import os, sys
fd = int(sys.argv[1])
if fd != 3:
    os.dup2(fd, 3)
    os.close(fd)
os.environ["LISTEN_PID"] = str(os.getpid()) if sys.argv[2] == "self" else sys.argv[2]
os.environ["LISTEN_FDS"] = "1"
os.execv(sys.executable, [sys.executable, "-m", "orcad"])
"""


class ActivatedDaemon(DaemonProcess):
    """orcad started the way a service manager starts it, with a listening socket at fd 3."""

    def __init__(self, orca: OrcaEnv, listener: socket.socket, listen_pid: str) -> None:
        super().__init__(orca)
        self.listener = listener
        self.listen_pid = listen_pid

    def spawn(self) -> subprocess.Popen[bytes]:
        fd = self.listener.fileno()
        with open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", ACTIVATION_WRAPPER, str(fd), self.listen_pid],
                env=self.orca.env,
                cwd=self.orca.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                pass_fds=(fd,),
            )
        return self.proc


def listening_unix_socket(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(16)
    return sock


def send_ping_line(path: Path) -> socket.socket:
    """Connect and send one request without waiting for the answer."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(path))
    client.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{}}\n')
    return client


# --- the LISTEN_PID / LISTEN_FDS protocol ---------------------------------------------------


def test_no_variables_means_no_inherited_socket() -> None:
    environ = {"PATH": "/usr/bin"}
    assert inherited_socket(environ, os.getpid()) is None
    assert environ == {"PATH": "/usr/bin"}


def test_wrong_pid_is_ignored_and_the_variables_are_removed() -> None:
    environ = {
        "LISTEN_PID": str(os.getpid() + 1),
        "LISTEN_FDS": "1",
        "LISTEN_FDNAMES": "orcad.socket",
    }
    assert inherited_socket(environ, os.getpid()) is None
    assert not any(name in environ for name in ACTIVATION_VARIABLES)


def test_zero_descriptors_means_none_and_the_variables_are_removed() -> None:
    environ = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "0"}
    assert inherited_socket(environ, os.getpid()) is None
    assert environ == {}


@pytest.mark.parametrize(
    ("variables", "complaint"),
    [
        ({"LISTEN_PID": "12x", "LISTEN_FDS": "1"}, "LISTEN_PID"),
        ({"LISTEN_PID": "{pid}", "LISTEN_FDS": "many"}, "LISTEN_FDS"),
        ({"LISTEN_PID": "{pid}", "LISTEN_FDS": "2"}, "exactly one"),
    ],
)
def test_malformed_or_surplus_announcements_stop_startup(
    variables: dict[str, str], complaint: str
) -> None:
    environ = {name: value.format(pid=os.getpid()) for name, value in variables.items()}
    with pytest.raises(StartupError, match=complaint):
        inherited_socket(environ, os.getpid())
    assert environ == {}


def test_a_listening_unix_stream_socket_is_adopted(tmp_path: Path) -> None:
    original = listening_unix_socket(tmp_path / "s")
    fd = os.dup(original.fileno())
    os.set_inheritable(fd, True)
    adopted = adopt_listening_socket(fd)
    try:
        assert adopted.fileno() == fd
        assert adopted.family == socket.AF_UNIX
        assert not os.get_inheritable(fd)  # children we spawn do not keep the listener
    finally:
        adopted.close()
        original.close()


@pytest.mark.parametrize("kind", ["not_listening", "datagram", "inet", "pipe"])
def test_anything_else_is_refused_and_left_open(tmp_path: Path, kind: str) -> None:
    keep: list[socket.socket] = []
    if kind == "not_listening":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(tmp_path / "s"))
        keep.append(sock)
        fd = sock.fileno()
    elif kind == "datagram":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        keep.append(sock)
        fd = sock.fileno()
    elif kind == "inet":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        keep.append(sock)
        fd = sock.fileno()
    else:
        fd, write_end = os.pipe()
        os.close(write_end)
    try:
        with pytest.raises(StartupError, match=f"descriptor {fd}|socket on descriptor {fd}"):
            adopt_listening_socket(fd)
        os.fstat(fd)  # still open: a refused descriptor is not ours to close
    finally:
        for sock in keep:
            sock.close()
        if kind == "pipe":
            os.close(fd)


def test_launchd_path_is_never_taken_off_macos() -> None:
    if sys.platform == "darwin":
        pytest.skip("on macOS the launchd call is real; this checks the guard elsewhere")
    assert launchd_socket() is None


# --- a real daemon on an inherited socket ---------------------------------------------------


def test_daemon_serves_on_the_inherited_socket_and_leaves_it_in_place(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    listener = listening_unix_socket(orca_env.socket)
    inode = orca_env.socket.stat().st_ino
    process = ActivatedDaemon(orca_env, listener, "self")
    daemon_factory.append(process)
    process.start()
    assert process.proc is not None

    status = process.call("daemon.status")
    assert status.pid == process.proc.pid
    assert orca_env.socket.stat().st_ino == inode  # not unlinked and bound again
    events = [event["event"] for event in process.log_events()]
    assert "activation.socket_inherited" in events

    assert process.stop(signal.SIGTERM) == 0
    # After the daemon exits the socket file is still ours and still listening: a new
    # connection queues on it, exactly as systemd relies on to start the daemon again.
    assert orca_env.socket.stat().st_ino == inode
    waiting = send_ping_line(orca_env.socket)
    listener.settimeout(5)
    accepted, _ = listener.accept()
    assert accepted.recv(100).startswith(b'{"jsonrpc":"2.0","id":1')
    for sock in (accepted, waiting, listener):
        sock.close()


def test_daemon_ignores_a_socket_announced_for_another_pid(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    foreign_path = orca_env.root / "foreign.sock"
    listener = listening_unix_socket(foreign_path)
    process = ActivatedDaemon(orca_env, listener, str(os.getpid()))
    daemon_factory.append(process)
    process.start()
    assert process.proc is not None

    assert orca_env.socket.exists()  # it bound its own socket where ORCA_SOCKET says
    with Client(str(orca_env.socket), timeout=10) as client:
        assert client.call("daemon.ping").pid == process.proc.pid
    unanswered = send_ping_line(foreign_path)
    assert process.stop(signal.SIGTERM) == 0
    assert not orca_env.socket.exists()  # its own socket file, removed on the way out
    # The request sent to the foreign socket is still waiting in its backlog: nobody accepted it.
    listener.settimeout(5)
    accepted, _ = listener.accept()
    assert accepted.recv(100).startswith(b'{"jsonrpc":"2.0","id":1')
    events = [event["event"] for event in process.log_events()]
    assert "activation.socket_inherited" not in events
    for sock in (accepted, unanswered, listener):
        sock.close()
