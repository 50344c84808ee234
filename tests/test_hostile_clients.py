"""Clients as an adversary writes them, against a live daemon, with a bystander measuring.

Each case must end the offending connection only: the daemon keeps running, and a polite
client on its own connection keeps getting answers throughout.
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orcad import limits
from orcad.paths import resolve_paths
from protocol.client import Client
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

STATUS = b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\n'


class Bystander:
    """Pings on its own connection every few milliseconds; remembers latencies and failures."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self._daemon = daemon
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self._daemon.client(timeout=30) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                try:
                    client.call("daemon.ping")
                except Exception as exc:
                    self.failures.append(repr(exc))
                    return
                self.latencies.append(time.perf_counter() - started)
                time.sleep(0.005)

    def __enter__(self) -> Bystander:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def assert_served(self) -> None:
        assert not self.failures, self.failures
        assert len(self.latencies) >= 5, "the bystander was barely answered"
        worst = max(self.latencies)
        assert worst < 5.0, f"the bystander waited {worst:.2f} s for a ping"


def connect(daemon: DaemonProcess) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(daemon.orca.socket))
    return sock


def ask(daemon: DaemonProcess, line: bytes) -> dict:
    """Send one line on a fresh connection and read one answer."""
    with connect(daemon) as sock:
        sock.sendall(line + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            assert chunk, "the daemon closed the connection without answering"
            data += chunk
    return json.loads(data)


def assert_alive(daemon: DaemonProcess) -> None:
    assert daemon.proc is not None
    assert daemon.proc.poll() is None, f"orcad exited:\n{daemon.stderr()[-4000:]}"
    assert daemon.call("daemon.ping").pid == daemon.proc.pid


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def started(orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]) -> Iterator[DaemonProcess]:
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    yield daemon.start()


def start_with(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], config: str
) -> DaemonProcess:
    orca_env.write_config(config)
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    return daemon.start()


def test_a_thousand_early_closes_never_stop_the_daemon(
    started: DaemonProcess, tmp_path: Path
) -> None:
    rng = random.Random(1414)
    open_line = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "session.open", "params": {"cwd": str(tmp_path)}}
    ).encode()
    lines = [
        STATUS.strip(),
        b'{"jsonrpc":"2.0","id":2,"method":"daemon.ping"}',
        b'{"jsonrpc":"2.0","id":3,"method":"jobs.list"}',
        b'{"jsonrpc":"2.0","id":4,"method":"projects.list"}',
        b'[{"jsonrpc":"2.0","id":5,"method":"daemon.ping"},{"jsonrpc":"2.0","id":6}]',
        open_line,
        b"not json at all",
        b'{"jsonrpc":"2.0","id":8,"method":"daemon.st',  # cut mid-line
    ]
    with Bystander(started) as bystander:
        for _ in range(1000):
            sock = connect(started)
            payload = b"\n".join(rng.choice(lines) for _ in range(rng.randint(1, 30))) + b"\n"
            sock.sendall(payload)
            how = rng.randrange(4)
            if how == 1:  # reset instead of a clean close
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif how == 2:
                time.sleep(rng.random() * 0.003)
            elif how == 3:
                sock.shutdown(socket.SHUT_WR)
            sock.close()
        assert_alive(started)
    bystander.assert_served()


def test_clients_killed_just_after_sending_never_stop_the_daemon(started: DaemonProcess) -> None:
    script = (
        "import os, signal, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        f"s.sendall({STATUS!r} * 20)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    with Bystander(started) as bystander:
        for _ in range(50):
            killed = subprocess.run([sys.executable, "-c", script, str(started.orca.socket)])
            assert killed.returncode == -9
        assert_alive(started)
    bystander.assert_served()


def nested(depth: int, rng: random.Random) -> str:
    text = "1"
    for _ in range(depth):
        text = f"[{text}]" if rng.random() < 0.5 else f'{{"k":{text}}}'
    return text


@pytest.mark.parametrize(
    "template",
    [
        "{deep}",
        '{{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{deep}}}',
        '{{"jsonrpc":"2.0","id":{deep},"method":"daemon.ping"}}',
        '{{"jsonrpc":"2.0","id":1,"method":{deep}}}',
        '{{"jsonrpc":{deep},"id":1,"method":"daemon.ping"}}',
        '[{{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}},{deep}]',
        '{{"jsonrpc":"2.0","id":1,"method":"session.open","params":{{"cwd":{deep}}}}}',
    ],
)
def test_deep_nesting_anywhere_is_refused_and_the_connection_goes_on(
    started: DaemonProcess, template: str
) -> None:
    rng = random.Random(template)
    with connect(started) as sock, sock.makefile("rb") as answers:
        for depth in (limits.MAX_JSON_NESTING + 1, 991, 5000, 100_000):
            sock.sendall(template.format(deep=nested(depth, rng)).encode() + b"\n")
            error = json.loads(answers.readline())["error"]
            assert (error["code"], error["data"]["kind"]) == (-32600, "invalid_request")
            assert "levels deep" in error["message"]
        sock.sendall(b'{"jsonrpc":"2.0","id":9,"method":"daemon.ping"}\n')
        assert json.loads(answers.readline())["result"]["pid"] == started.proc.pid  # type: ignore[union-attr]
    assert_alive(started)


def test_random_nesting_in_every_field_gets_an_answer_never_a_crash(
    started: DaemonProcess,
) -> None:
    rng = random.Random(42)
    fields = ["jsonrpc", "id", "method", "params", "extra"]
    with connect(started) as sock, sock.makefile("rb") as answers:
        for index in range(300):
            message: dict[str, object] = {"jsonrpc": "2.0", "id": index, "method": "daemon.ping"}
            target = rng.choice(fields)
            depth = rng.choice([1, 5, 30, 63, 64, 65, 200, 1500])
            line = json.dumps(message)[:-1] + f', "{target}": {nested(depth, rng)}}}'
            sock.sendall(line.encode() + b"\n")
            answer = json.loads(answers.readline())
            assert "error" in answer or "result" in answer
            if "error" in answer:
                assert answer["error"]["code"] in (-32600, -32602, -32601), answer
    assert_alive(started)


@pytest.mark.parametrize(
    ("line", "code", "kind"),
    [
        (b'{"jsonrpc":"2.0","id":1e24,"method":"daemon.ping"}', -32600, "invalid_request"),
        (b"[1e400]", -32600, "invalid_request"),
        (b'{"jsonrpc":"2.0","id":-1e999,"method":"daemon.ping"}', -32600, "invalid_request"),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"memory.search","params":{"limit":1e400}}',
            -32600,
            "invalid_request",
        ),
    ],
)
def test_valid_json_numbers_out_of_range_are_refused_not_called_invalid_json(
    started: DaemonProcess, line: bytes, code: int, kind: str
) -> None:
    error = ask(started, line)["error"]
    assert (error["code"], error["data"]["kind"]) == (code, kind)
    assert_alive(started)


def directory_at_the_path_limit(parent: Path) -> str:
    """A real directory whose path is so long that its `.git` cannot be looked for (the
    kernel's 4095-byte bound), made one name at a time below `parent`."""
    path = str(parent)
    descriptor = os.open(path, os.O_DIRECTORY)
    try:
        while len(path) < 4091:
            name = "d" * min(200, 4093 - len(path))
            os.mkdir(name, dir_fd=descriptor)
            inner = os.open(name, os.O_DIRECTORY, dir_fd=descriptor)
            os.close(descriptor)
            descriptor, path = inner, f"{path}/{name}"
    finally:
        os.close(descriptor)
    return path


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        ("a path longer than the kernel takes", "File name too long"),
        ("a name longer than the kernel takes", "File name too long"),
        ("a directory too deep to look for .git in", "File name too long"),
        ("a path through a regular file", "is not an existing directory"),
        ("a path holding a NUL character", "holds a NUL character"),
        ("a link to a directory whose name is not UTF-8", "bytes that are not UTF-8"),
    ],
)
def test_a_cwd_that_cannot_be_looked_up_is_a_bad_parameter_not_an_internal_error(
    started: DaemonProcess, tmp_path: Path, case: str, problem: str
) -> None:
    (tmp_path / "file").write_text("")
    os.mkdir(os.fsencode(tmp_path) + b"/latin-1 caf\xe9")
    os.symlink(b"latin-1 caf\xe9", os.fsencode(tmp_path) + b"/link")
    cwd = {
        "a path longer than the kernel takes": "/" + "a" * 5000,
        "a name longer than the kernel takes": str(tmp_path / ("b" * 300)),
        "a directory too deep to look for .git in": directory_at_the_path_limit(tmp_path),
        "a path through a regular file": str(tmp_path / "file" / "inside"),
        "a path holding a NUL character": str(tmp_path) + "\0/inside",
        "a link to a directory whose name is not UTF-8": str(tmp_path / "link"),
    }[case]
    request = {"jsonrpc": "2.0", "id": 1, "method": "session.open", "params": {"cwd": cwd}}
    error = ask(started, json.dumps(request).encode())["error"]
    assert (error["code"], error["data"]) == (-32602, {"kind": "invalid_params", "field": "cwd"})
    assert problem in error["message"]
    assert len(error["message"]) < 400  # the cwd is quoted by its start
    assert_alive(started)


@pytest.mark.parametrize("method", ["session.open", "projects.inspect"])
def test_a_cwd_of_megabytes_is_refused_at_once_and_the_daemon_still_stops(
    started: DaemonProcess, method: str
) -> None:
    # Resolved a name at a time, a path of 2 MiB took minutes of a core (a few MiB, hours), in
    # a thread a SIGTERM waited for: the daemon then held its lock without serving.
    cwd = "/a" * 2**20
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"cwd": cwd}}
    started_at = time.monotonic()
    error = ask(started, json.dumps(request).encode())["error"]
    assert time.monotonic() - started_at < 5.0
    assert (error["code"], error["data"]) == (-32602, {"kind": "invalid_params", "field": "cwd"})
    assert f"File name too long ({len(cwd)} bytes" in error["message"]
    assert len(error["message"]) < 400
    assert_alive(started)
    assert started.stop(timeout=10.0) == 0


def test_a_cwd_is_looked_up_up_to_the_path_limit(started: DaemonProcess, tmp_path: Path) -> None:
    padding = limits.CWD_MAX_BYTES - len(str(tmp_path))
    at_limit = str(tmp_path) + "/." * (padding // 2) + ("/" if padding % 2 else "")
    assert len(at_limit.encode()) == limits.CWD_MAX_BYTES
    opened = started.call("session.open", {"cwd": at_limit})
    assert opened.workspace.root == str(tmp_path.resolve())
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session.open",
        "params": {"cwd": at_limit + "/"},
    }
    error = ask(started, json.dumps(request).encode())["error"]
    assert (error["code"], error["data"]["field"]) == (-32602, "cwd")
    assert f"({limits.CWD_MAX_BYTES + 1} bytes" in error["message"]


@pytest.mark.parametrize(
    "tail",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"cwd":"/"}}',  # no newline
        b'{"jsonrpc":"2.0","id":2,"method":"daemon.ping"}\n{"jsonrpc":"2.0","id":3,"meth',
    ],
)
def test_a_line_the_client_ends_its_side_inside_is_answered_not_run(
    started: DaemonProcess, tail: bytes
) -> None:
    with connect(started) as sock:
        sock.sendall(tail)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    answers = [json.loads(line) for line in data.splitlines()]
    refused = [answer for answer in answers if "error" in answer]
    assert [answer["id"] for answer in answers if "result" in answer] == (
        [2] if b"\n" in tail else []
    )
    assert len(refused) == 1 and refused[0]["id"] is None
    assert refused[0]["error"]["code"] == -32600
    assert "end each request with a newline" in refused[0]["error"]["message"]
    assert started.call("daemon.status").sessions == 0  # the session.open was not run
    assert_alive(started)


def test_blanks_after_the_last_line_are_no_line(started: DaemonProcess) -> None:
    with connect(started) as sock:
        sock.sendall(b'{"jsonrpc":"2.0","id":4,"method":"daemon.ping"}\n  \r')
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert [json.loads(line)["id"] for line in data.splitlines()] == [4]


def test_a_client_that_never_reads_is_bounded_then_disconnected(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    daemon = start_with(orca_env, daemon_factory, "[server]\nsend_timeout_s = 2.0\n")
    assert daemon.proc is not None
    before = rss_bytes(daemon.proc.pid)
    greedy = connect(daemon)
    greedy.setblocking(False)
    burst = STATUS * 2000
    sent = 0
    with Bystander(daemon) as bystander:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            try:
                sent += greedy.send(burst)
            except BlockingIOError:
                time.sleep(0.01)  # the daemon stopped reading: back-pressure
            except (BrokenPipeError, ConnectionResetError):
                break  # disconnected after send_timeout_s
        grown = rss_bytes(daemon.proc.pid) - before
    greedy.close()
    bystander.assert_served()
    assert grown < 200 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB"
    assert sent < 200 * len(STATUS) * 2000, "the daemon kept reading a client that never read"
    events = [event["event"] for event in daemon.log_events()]
    assert "connection.send_timeout" in events
    assert_alive(daemon)


@pytest.mark.slow
def test_trickling_connections_do_not_lock_out_new_clients(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    daemon = start_with(orca_env, daemon_factory, "[server]\nrequest_line_timeout_s = 3.0\n")
    trickling = []
    for _ in range(300):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(daemon.orca.socket))
        trickling.append(sock)
    served = 0
    with Bystander(daemon) as bystander:
        for second in range(5):
            for sock in trickling:
                try:
                    sock.send(b"{" if second == 0 else b" ")
                except OSError:
                    pass  # evicted or timed out: as intended
            with daemon.client(timeout=10) as newcomer:
                assert newcomer.call("daemon.ping").pid == daemon.proc.pid  # type: ignore[union-attr]
                served += 1
            time.sleep(1.0)
    for sock in trickling:
        sock.close()
    bystander.assert_served()
    assert served == 5
    events = [event["event"] for event in daemon.log_events()]
    assert "connection.line_timeout" in events
    assert "connection.evicted" in events
    assert_alive(daemon)


def test_a_second_daemon_on_the_same_memory_with_another_socket_is_refused(
    started: DaemonProcess, tmp_path: Path
) -> None:
    other = tmp_path / "other" / "orcad.sock"
    env = dict(started.orca.env, ORCA_SOCKET=str(other))
    second = subprocess.run(
        [sys.executable, "-m", "orcad"], env=env, capture_output=True, text=True, timeout=30
    )
    assert second.returncode != 0
    assert f"pid {started.proc.pid}" in second.stderr  # type: ignore[union-attr]
    assert str(started.orca.socket) in second.stderr
    assert not other.exists()
    assert_alive(started)


def test_one_lock_file_whether_the_socket_came_from_the_environment_or_not(
    tmp_path: Path,
) -> None:
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    direct = resolve_paths(env)
    via_orcactl = resolve_paths(dict(env, ORCA_SOCKET=str(direct.socket)))
    assert direct.lock_file == via_orcactl.lock_file == direct.runtime_dir / "orcad.lock"
    assert direct.instance_lock == via_orcactl.instance_lock
    odd = resolve_paths(dict(env, ORCA_SOCKET=str(tmp_path / "a.lock")))
    assert odd.lock_file != odd.socket


def test_the_client_library_still_works_after_the_storm(started: DaemonProcess) -> None:
    for _ in range(200):
        sock = connect(started)
        sock.sendall(STATUS * 50)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    with Client(str(started.orca.socket)) as client:
        status = client.call("daemon.status")
    assert status.pid == started.proc.pid  # type: ignore[union-attr]
    assert not [error for error in status.recent_errors if error.kind == "connection"]


# a megabyte of a character Python's repr writes as four (`\xa0`), which JSON escapes to five
LONG_ID = "\u00a0" * (1 << 20)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("recall", {"session_id": LONG_ID, "epoch": 1, "turn_id": "t", "prompt": "p"}),
        ("grants.list", {"session_id": LONG_ID}),
        ("memory.manage", {"action": "forget", "id": LONG_ID}),
        ("memory.approve", {"approval_id": LONG_ID, "decision": "deny"}),
        ("jobs.retry", {"job_id": LONG_ID}),
        ("jobs.renew", {"job_id": LONG_ID, "token": 1}),
        ("projects.inspect", {"project_id": LONG_ID}),
        ("ledger.forget", {"project_id": LONG_ID, "candidate_id": "c", "revision": 0}),
        ("grants.revoke", {"grant_id": LONG_ID}),
    ],
)
def test_an_id_no_client_was_given_is_not_echoed_back_whole(
    started: DaemonProcess, tmp_path: Path, method: str, params: dict
) -> None:
    """An error names the id it could not find by its start: quoted whole, a megabyte of one
    came back as several (its escapes escaped again), and as much again in its data."""
    with started.client() as client:
        opened = client.call("session.open", {"cwd": str(tmp_path)})
    if method.startswith("memory."):
        params = {"session_id": opened.session_id, "epoch": opened.epoch, **params}
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    line = json.dumps(request, ensure_ascii=False).encode()
    error = ask(started, line)["error"]
    assert error["data"]["kind"] in ("invalid_params", "not_found")
    assert len(json.dumps(error)) < 2000, json.dumps(error)[:300]
    assert_alive(started)
