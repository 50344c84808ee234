"""A real daemon subprocess on a real socket: transport rules, limits, lifecycle."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from orcad import limits, runtime
from orcad.errors import StartupError
from orcad.limits import STOPPING_HOLDER_WAIT_S
from orcad.paths import SOCKET_PATH_MAX_BYTES, resolve_paths
from orcad.rpc import Router
from orcad.runtime import InstanceLock, read_instance
from protocol.client import Client, RequestRefused
from protocol.errors import RemoteError
from protocol.trio_client import open_client
from protocol.types import Empty, PingResult, SessionCloseParams
from tests.harness import DaemonProcess, OrcaEnv
from tests.inprocess import serving

pytestmark = pytest.mark.daemon


def raw_connection(daemon: DaemonProcess) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(str(daemon.orca.socket))
    return sock


def read_line(sock: socket.socket) -> dict:
    """The next answer line, and nothing of the next one: two answers may come in one read."""
    data = b""
    while True:
        chunk = sock.recv(65536, socket.MSG_PEEK)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        end = chunk.find(b"\n")
        data += sock.recv(len(chunk) if end < 0 else end + 1)
        if end >= 0:
            return json.loads(data)


def assert_closed(sock: socket.socket) -> None:
    try:
        assert sock.recv(1) == b""
    except ConnectionResetError:
        pass


def start(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], config: str = ""
) -> DaemonProcess:
    if config:
        orca_env.write_config(config)
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    return process.start()


def refused_start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """orcad run once in `env`, where it must refuse to start: it exits 1 (the reason is on
    stderr, which the caller checks)."""
    result = subprocess.run(
        [sys.executable, "-m", "orcad"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result.stderr
    return result


def test_an_unknown_field_holding_backticks_is_named_whole_at_its_path(
    daemon: DaemonProcess,
) -> None:
    sock = raw_connection(daemon)
    message = {"role": "user", "content": "hi", "x`y - at `$.turn_id": 1}
    params = {"session_id": "s", "epoch": 1, "turn_id": "t", "messages": [message]}
    request = {"jsonrpc": "2.0", "id": 1, "method": "turn.completed", "params": params}
    sock.sendall(json.dumps(request).encode() + b"\n")
    error = read_line(sock)["error"]
    assert (error["code"], error["data"]["field"]) == (-32602, "messages[0].x`y - at `$.turn_id")
    sock.close()


def test_protocol_errors_on_one_connection_leave_it_usable(daemon: DaemonProcess) -> None:
    sock = raw_connection(daemon)
    sock.sendall(b"this is not json\n")
    assert read_line(sock)["error"]["code"] == -32700
    sock.sendall(b'{"jsonrpc":"2.0","id":1}\n')
    assert read_line(sock)["error"]["data"]["kind"] == "invalid_request"
    sock.sendall(b'{"jsonrpc":"2.0","id":2,"method":"no.such"}\n')
    assert read_line(sock)["error"]["code"] == -32601
    sock.sendall(
        b'{"jsonrpc":"2.0","id":3,"method":"session.open","params":{"cwd":"/","colour":1}}\n'
    )
    error = read_line(sock)["error"]
    assert (error["code"], error["data"]["field"]) == (-32602, "colour")
    sock.sendall(b"\x00\xff\xfe garbage \x80\n")
    assert read_line(sock)["error"]["code"] == -32700
    # a well-formed request whose params hold invalid UTF-8, beside one in flight
    sock.sendall(
        b'{"jsonrpc":"2.0","id":5,"method":"daemon.ping"}\n'
        b'{"jsonrpc":"2.0","id":6,"method":"session.open","params":{"cwd":"/\xff"}}\n'
    )
    answers = {}
    for _ in range(2):
        answer = read_line(sock)
        answers[answer["id"]] = answer
    assert answers[5]["result"]["protocol"] == 1
    assert answers[None]["error"]["code"] == -32700
    sock.sendall(b'{"jsonrpc":"2.0","id":4,"method":"daemon.ping"}\n')
    assert read_line(sock)["result"]["protocol"] == 1
    sock.close()


def test_batch_and_notification(daemon: DaemonProcess) -> None:
    sock = raw_connection(daemon)
    sock.sendall(b'{"jsonrpc":"2.0","method":"daemon.ping"}\n')
    sock.sendall(
        b'[{"jsonrpc":"2.0","id":1,"method":"daemon.ping"},{"jsonrpc":"2.0","method":"daemon.ping"},'
        b'{"jsonrpc":"2.0","id":2,"method":"x"}]\n'
    )
    batch = read_line(sock)  # the notification before it produced nothing
    assert [item["id"] for item in batch] == [1, 2]
    sock.sendall(b"[]\n")
    assert read_line(sock)["error"]["code"] == -32600
    sock.close()


def test_oversized_line_closes_only_that_connection(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    daemon = start(orca_env, daemon_factory, "[server]\nmax_message_bytes = 4096\n")
    bystander = daemon.client()
    sock = raw_connection(daemon)
    sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{"pad":"' + b"x" * 5000)
    error = read_line(sock)["error"]
    assert (error["code"], error["data"]["kind"]) == (-32600, "message_too_large")
    assert_closed(sock)
    sock.close()
    assert bystander.call("daemon.ping").protocol == 1
    bystander.close()


async def test_the_clients_raise_the_error_the_daemon_gave_for_a_line_it_could_not_read(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    # Such an error has a null id: the clients once skipped it as an answer to another
    # request, then said the connection closed (too large) or waited for ever (too deep).
    daemon = start(orca_env, daemon_factory, "[server]\nmax_message_bytes = 4096\n")
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with daemon.client(timeout=None) as client:
        with pytest.raises(RequestRefused) as too_deep:
            client.call("daemon.ping", {"pad": deep})
        assert (too_deep.value.code, too_deep.value.kind) == (-32600, "invalid_request")
        assert client.call("daemon.ping").protocol == 1  # that connection goes on
        with pytest.raises(RequestRefused) as too_large:
            client.call("daemon.ping", {"pad": "x" * 5000})
    assert (too_large.value.code, too_large.value.kind) == (-32600, "message_too_large")
    assert isinstance(too_large.value, ConnectionError)
    async with open_client(str(orca_env.socket)) as trio_client:
        with pytest.raises(RequestRefused) as refused:
            await trio_client.call("daemon.ping", {"pad": "x" * 5000})
    assert refused.value.kind == "message_too_large"
    with trio.fail_after(10):  # the daemon answers at once and keeps the connection open
        async with open_client(str(orca_env.socket)) as trio_client:
            with pytest.raises(RequestRefused) as refused:
                await trio_client.call("daemon.ping", {"pad": deep})
            with pytest.raises(RequestRefused):  # nothing tells later answers from lost ones
                await trio_client.call("daemon.ping")
    assert (refused.value.code, refused.value.kind) == (-32600, "invalid_request")


async def test_the_clients_send_array_params_for_orcad_to_refuse(daemon: DaemonProcess) -> None:
    # the clients sent an empty array as {}: `call("daemon.ping", [])` was answered, though
    # params are an object and orcad refuses an array for every method
    refused = []
    for params in ([], [1]):
        for method in ("daemon.ping", "daemon.status"):
            with daemon.client() as client, pytest.raises(RemoteError) as sync_call:
                client.call(method, params)
            async with open_client(str(daemon.orca.socket)) as trio_client:
                with pytest.raises(RemoteError) as trio_call:
                    await trio_client.call(method, params)
            refused += [(error.value.code, error.value.data) for error in (sync_call, trio_call)]
    assert refused == [(-32602, {"kind": "invalid_params", "field": "params"})] * 8
    assert daemon.call("daemon.ping").protocol == 1  # no params: sent as {}
    async with open_client(str(daemon.orca.socket)) as trio_client:
        assert (await trio_client.call("daemon.ping")).protocol == 1


def test_half_a_message_then_disconnect_harms_nobody(daemon: DaemonProcess) -> None:
    for _ in range(5):
        sock = raw_connection(daemon)
        sock.sendall(b'{"jsonrpc":"2.0","id":1,"meth')
        sock.close()
    assert daemon.call("daemon.ping").protocol == 1


async def test_two_hundred_concurrent_connections(daemon: DaemonProcess) -> None:
    answers: list[int] = []

    async def one(index: int) -> None:
        async with open_client(str(daemon.orca.socket)) as client:
            results = []
            async with trio.open_nursery() as nursery:
                for _ in range(3):

                    async def ping() -> None:
                        results.append((await client.call("daemon.ping")).pid)

                    nursery.start_soon(ping)
            answers.extend(results)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for index in range(200):
                nursery.start_soon(one, index)
    assert answers == [daemon.proc.pid] * 600


def test_connection_limit_evicts_the_connection_longest_without_a_request(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    daemon = start(orca_env, daemon_factory, "[server]\nmax_connections = 2\n")
    # start() pinged on a connection of its own: its slot is free once the daemon sees the close
    oldest = pinged_client(daemon)
    time.sleep(0.05)
    newer = pinged_client(daemon)
    extra = daemon.client()
    assert extra.call("daemon.ping").pid == daemon.proc.pid  # served, not refused
    with pytest.raises((ConnectionError, RemoteError)):
        oldest.call("daemon.ping")  # made room
    assert newer.call("daemon.ping").pid == daemon.proc.pid
    for client in (oldest, newer, extra):
        client.close()
    assert any(e["event"] == "connection.evicted" for e in daemon.log_events())


def _greedy(daemon: DaemonProcess) -> socket.socket:
    """A connection that sends requests and never reads: until the daemon stops reading too."""
    status = b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\n' * 100
    sock = raw_connection(daemon)
    sock.setblocking(False)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            sock.send(status)
        except BlockingIOError:
            return sock
    pytest.fail("the daemon kept reading a connection that never reads its answers")


def test_connection_limit_answers_busy_while_every_connection_is_busy_answering(
    orca_env: OrcaEnv, daemon_factory: list, tmp_path: Path
) -> None:
    config = "[extraction]\nworkers = 0\n[server]\nmax_connections = 2\n"
    daemon = start(orca_env, daemon_factory, config)
    with daemon.client() as client:  # a turn queued, and an external worker about: recalls wait
        session = client.call("session.open", {"cwd": str(tmp_path)})
        ids = {"session_id": session.session_id, "epoch": session.epoch}
        turn = {"outcome": "succeeded", "verifier": "none", "transcript_committed": True}
        messages = [{"role": "user", "content": "we ship on fridays"}]
        client.call("turn.completed", {**ids, **turn, "turn_id": "t1", "messages": messages})
        client.call("jobs.claim", {"worker": "w", "project_id": "0" * 64})
    waiting = []
    for number in (2, 3):
        sock = raw_connection(daemon)
        params = {**ids, "turn_id": f"t{number}", "prompt": "when do we ship"}
        request = {"jsonrpc": "2.0", "id": number, "method": "recall", "params": params}
        sock.sendall(json.dumps(request).encode() + b"\n")
        waiting.append(sock)
    deadline = time.monotonic() + 5
    while sum(e["event"] == "recall.barrier_wait" for e in daemon.log_events()) < 2:
        assert time.monotonic() < deadline, "the recalls never reached the barrier"
        time.sleep(0.01)
    extra = raw_connection(daemon)  # both connections owe an answer they are working on
    # the daemon answers busy as it accepts and closes; on a Unix socket a request sent after
    # that close fails with EPIPE, and the answer is still there to read
    with contextlib.suppress(BrokenPipeError):
        extra.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}\n')
    reply = read_line(extra)
    assert (reply["error"]["code"], reply["error"]["data"]["kind"]) == (-32001, "busy")
    assert "max_connections" in reply["error"]["message"]
    assert_closed(extra)
    extra.close()
    # the client library says busy too
    with pytest.raises(RequestRefused) as refused, daemon.client() as client:
        client.call("daemon.ping")
    assert (refused.value.code, refused.value.kind) == (-32001, "busy")
    for sock in waiting:  # the recalls are answered once the barrier's bound is over
        assert read_line(sock)["result"]["barrier"] == "timed_out"
        sock.close()
    pinged_client(daemon).close()  # the slots are reusable once the daemon sees the closes


def test_a_client_that_never_reads_its_answers_gives_up_its_slot_to_a_newcomer(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    # one process held every slot with requests it never read the answers of, and every
    # newcomer was told busy until the send timeout (30 s), again as soon as it reconnected
    daemon = start(orca_env, daemon_factory, "[server]\nmax_connections = 2\n")
    greedy = [_greedy(daemon) for _ in range(2)]
    time.sleep(limits.EVICT_UNREAD_AFTER_S)  # their answers wait, unread, past the bound
    # served within 10 s, where the send timeout would free a slot after 30 s (retried: on a
    # loaded machine the daemon may still be writing their answers a moment after they stop
    # reading, and the bound runs from when its writes first wait)
    pinged_client(daemon).close()
    # in place of one of them: it gets what was written to it, then the end
    ended: set[socket.socket] = set()
    deadline = time.monotonic() + 10
    while not ended and time.monotonic() < deadline:
        readable, _, _ = select.select(greedy, [], [], 0.2)
        for sock in readable:
            try:
                data = sock.recv(1 << 16)
            except ConnectionResetError:
                data = b""
            if not data:
                ended.add(sock)
    assert len(ended) == 1
    # (start()'s own ping connection may have made room for the first greedy one)
    reasons = [e["reason"] for e in daemon.log_events() if e["event"] == "connection.evicted"]
    assert reasons[-1] == "answers_unread" and reasons.count("answers_unread") == 1
    for sock in greedy:
        sock.close()
    pinged_client(daemon).close()


def pinged_client(daemon: DaemonProcess) -> Client:
    """A connection that has been answered, retried while every slot is still taken."""
    deadline = time.monotonic() + 10
    while True:
        client = daemon.client()
        try:
            client.call("daemon.ping")
            return client
        except (RemoteError, ConnectionError):
            client.close()
            assert time.monotonic() < deadline, "no connection slot came free"
            time.sleep(0.05)


def test_idle_connection_is_closed(orca_env: OrcaEnv, daemon_factory: list) -> None:
    daemon = start(orca_env, daemon_factory, "[server]\nidle_timeout_s = 0.3\n")
    sock = raw_connection(daemon)
    sock.settimeout(10)
    assert_closed(sock)
    sock.close()
    assert any(e["event"] == "connection.idle_closed" for e in daemon.log_events())


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_tiny_idle_timeout_does_not_make_the_idle_daemon_spin(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    daemon = start(orca_env, daemon_factory, "[server]\nidle_timeout_s = 0.000001\n")
    sock = raw_connection(daemon)
    assert_closed(sock)  # the timeout still holds
    sock.close()
    assert daemon.proc is not None
    used = []  # CPU seconds per half second: loading recall's model costs some at first
    for _ in range(20):
        before = cpu_seconds(daemon.proc.pid)
        time.sleep(0.5)
        used.append(cpu_seconds(daemon.proc.pid) - before)
        if used[-1] < 0.1:
            break
    assert used[-1] < 0.1, used  # a sweep every 250 ns took a whole core


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another uid")
def test_peer_with_another_uid_is_refused(orca_env: OrcaEnv, daemon_factory: list) -> None:
    # A directory the stranger can traverse, and a socket it may open: only SO_PEERCRED is left.
    shared = Path(tempfile.mkdtemp(prefix="orcad-peer-"))
    try:
        shared.chmod(0o755)
        orca_env.extra_env["ORCA_SOCKET"] = str(shared / "orcad.sock")
        daemon = start(orca_env, daemon_factory)
        (shared / "orcad.sock").chmod(0o666)
        probe = (
            "import os, socket, sys\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
            "print('connected', flush=True)\n"
            "try:\n"
            '    s.sendall(b\'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}\\n\')\n'
            "    print('closed' if s.recv(1000) == b'' else 'answered')\n"
            "except (BrokenPipeError, ConnectionResetError):\n"
            "    print('closed')\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe, str(shared / "orcad.sock")],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.stdout.split() == ["connected", "closed"], out
        assert daemon.call("daemon.ping").protocol == 1
        assert any(e.get("reason") == "peer_uid" for e in daemon.log_events())
        daemon.stop()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_runtime_dir_and_socket_are_private(orca_env: OrcaEnv, daemon_factory: list) -> None:
    # No ORCA_SOCKET: the daemon makes its own runtime dir under XDG_RUNTIME_DIR.
    del_socket = {k: v for k, v in orca_env.env.items() if k != "ORCA_SOCKET"}
    runtime = Path(del_socket["XDG_RUNTIME_DIR"]) / "orca"
    process = subprocess.Popen(
        [sys.executable, "-m", "orcad"],
        env=del_socket,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        sock_path = runtime / "orcad.sock"
        deadline = time.monotonic() + 15
        while not sock_path.exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert stat.S_IMODE(sock_path.stat().st_mode) == 0o600
        with Client(str(sock_path)) as client:
            assert client.call("daemon.ping").pid == process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
    assert not sock_path.exists()


def test_symlinked_runtime_dir_is_refused(orca_env: OrcaEnv, tmp_path: Path) -> None:
    env = {k: v for k, v in orca_env.env.items() if k != "ORCA_SOCKET"}
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (Path(env["XDG_RUNTIME_DIR"]) / "orca").symlink_to(target)
    result = refused_start(env)
    assert "symbolic link" in result.stderr
    assert list(target.iterdir()) == []


def test_runtime_dir_owned_by_another_user_is_refused(orca_env: OrcaEnv) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to create a directory owned by another uid")
    env = {k: v for k, v in orca_env.env.items() if k != "ORCA_SOCKET"}
    runtime = Path(env["XDG_RUNTIME_DIR"]) / "orca"
    runtime.mkdir(mode=0o700)
    os.chown(runtime, 65534, 65534)
    result = refused_start(env)
    assert "owned by uid 65534" in result.stderr


def test_a_config_file_that_is_not_a_regular_file_is_refused(orca_env: OrcaEnv) -> None:
    os.mkfifo(orca_env.home / "config.toml")  # reading it would wait for a writer
    command = [sys.executable, "-m", "orcad"]
    result = subprocess.run(command, env=orca_env.env, capture_output=True, text=True, timeout=20)
    assert result.returncode == 1, result.stderr
    assert f"{orca_env.home / 'config.toml'}: not a regular file" in result.stderr


@pytest.mark.parametrize("which", ["user", "project"])
def test_a_session_opens_when_a_config_file_became_a_fifo(
    orca_env: OrcaEnv, daemon_factory: list, tmp_path: Path, which: str
) -> None:
    project = tmp_path / "project"
    (project / ".orca").mkdir(parents=True)
    user_file = orca_env.home / "config.toml"
    daemon = start(orca_env, daemon_factory, f"trusted_projects = [{str(project)!r}]\n")
    fifo = user_file if which == "user" else project / ".orca" / "config.toml"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)  # read at every session open
    with daemon.client(timeout=15) as client:
        opened = client.call("session.open", {"cwd": str(project)})
    assert opened.auto_memory is True  # the last good value
    assert any(e["event"].startswith("config.") for e in daemon.log_events())


def test_second_instance_is_refused_naming_the_first(daemon: DaemonProcess) -> None:
    result = refused_start(daemon.orca.env)
    assert f"pid {daemon.proc.pid}" in result.stderr
    assert str(daemon.orca.socket) in result.stderr
    assert daemon.call("daemon.ping").pid == daemon.proc.pid


# another process holding the instance lock as a daemon does: `serve` also listens on its socket
HOLD_THE_LOCK = """
import socket, sys, time
from orcad.paths import resolve_paths
from orcad.runtime import InstanceLock
paths = resolve_paths()
lock = InstanceLock(paths)
lock.acquire()
if sys.argv[2] == "serve":
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(paths.socket))
    listening.listen(1)
print("held", flush=True)
time.sleep(float(sys.argv[1]))
lock.release()
"""


def hold_the_lock(orca_env: OrcaEnv, seconds: float, mode: str) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, str(seconds), mode],
        env=orca_env.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_start_right_after_a_stop_waits_for_the_stopping_daemon(orca_env: OrcaEnv) -> None:
    # a stopping daemon removes its socket first and holds the lock until its stores are closed;
    # `orcactl` (or a restart) starting one then must not fail with "already running"
    holder = hold_the_lock(orca_env, 1.5, "stopped")
    paths = resolve_paths(orca_env.env)
    began = time.monotonic()
    lock = InstanceLock(paths)
    try:
        lock.acquire()
        waited = time.monotonic() - began
        assert 0.8 < waited < STOPPING_HOLDER_WAIT_S, waited
        assert holder.wait(timeout=10) == 0
        instance = read_instance(paths.instance_file)
        assert instance is not None and instance.pid == os.getpid()
    finally:
        lock.release()
        holder.kill()
        holder.communicate()  # reaps it and closes its pipe


def test_a_start_waits_no_longer_than_its_limit_for_a_daemon_that_never_lets_go(
    orca_env: OrcaEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "STOPPING_HOLDER_WAIT_S", 0.6)
    holder = hold_the_lock(orca_env, 30, "stopped")  # no socket, and it keeps the lock
    began = time.monotonic()
    try:
        with pytest.raises(StartupError, match=f"already running .*pid {holder.pid}"):
            InstanceLock(resolve_paths(orca_env.env)).acquire()
        assert 0.5 < time.monotonic() - began < 3.0
    finally:
        holder.kill()
        holder.communicate()


def test_a_start_beside_a_daemon_that_serves_is_refused_at_once(orca_env: OrcaEnv) -> None:
    holder = hold_the_lock(orca_env, 30, "serve")
    began = time.monotonic()
    try:
        with pytest.raises(StartupError, match=f"already running .*pid {holder.pid}"):
            InstanceLock(resolve_paths(orca_env.env)).acquire()
        assert time.monotonic() - began < 2.0  # no wait for a daemon that is running
    finally:
        holder.kill()
        holder.communicate()  # reaps it and closes its pipe


def test_stale_socket_after_sigkill_is_replaced(daemon: DaemonProcess) -> None:
    daemon.kill()
    assert daemon.orca.socket.exists()
    daemon.start()
    assert daemon.call("daemon.ping").pid == daemon.proc.pid


def test_live_socket_of_another_server_is_never_unlinked(orca_env: OrcaEnv) -> None:
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(orca_env.socket))
    other.listen(1)
    try:
        result = refused_start(orca_env.env)
        assert "live socket" in result.stderr
        assert orca_env.socket.exists()
    finally:
        other.close()


def test_sigterm_exits_zero_and_removes_the_socket(daemon: DaemonProcess) -> None:
    assert daemon.stop(signal.SIGTERM) == 0
    assert not daemon.orca.socket.exists()
    events = [e["event"] for e in daemon.log_events()]
    assert events.index("daemon.stopping") < events.index("daemon.stopped")


def test_sigint_exits_zero(daemon: DaemonProcess) -> None:
    assert daemon.stop(signal.SIGINT) == 0
    assert not daemon.orca.socket.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_asked_for_while_orcad_starts_exits_zero_and_removes_the_socket(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], signum: int
) -> None:
    # the signal lands once the socket is bound and before the daemon listens for it: its
    # default action left the socket behind (and Ctrl-C printed a traceback)
    for _attempt in range(3):
        daemon = DaemonProcess(orca_env, sighup=signal.SIG_DFL)  # not nohup's ignored hangup
        daemon_factory.append(daemon)
        process = daemon.spawn()
        deadline = time.monotonic() + 20
        while not orca_env.socket.exists():
            assert process.poll() is None and time.monotonic() < deadline, daemon.stderr()
        process.send_signal(signum)
        assert process.wait(timeout=30) == 0, daemon.stderr()
        assert not orca_env.socket.exists()
        assert "Traceback" not in daemon.stderr()


def test_bad_config_is_a_startup_error_naming_the_key(orca_env: OrcaEnv) -> None:
    orca_env.write_config("[extraction]\nworkers = -1\n")
    result = refused_start(orca_env.env)
    assert "extraction.workers" in result.stderr
    assert not orca_env.socket.exists()


def test_unknown_config_keys_are_reported(orca_env: OrcaEnv, daemon_factory: list) -> None:
    daemon = start(orca_env, daemon_factory, "colour = 'blue'\n[server]\nspeed = 3\n")
    status = daemon.call("daemon.status")
    assert status.unknown_config_keys == ["colour", "server.speed"]
    warned = [e["key"] for e in daemon.log_events() if e["event"] == "config.unknown_key"]
    assert warned == ["colour", "server.speed"]


def test_a_misspelt_config_key_is_logged_with_the_key_it_likely_means(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    daemon = start(orca_env, daemon_factory, "auto_memroy = false\ncolour = 'blue'\n")
    warned = {
        e["key"]: e["likely_meant"]
        for e in daemon.log_events()
        if e["event"] == "config.unknown_key"
    }
    assert warned == {"auto_memroy": "auto_memory", "colour": None}


def test_logs_are_json_lines_without_request_content(daemon: DaemonProcess) -> None:
    with pytest.raises(RemoteError):
        daemon.call("session.open", {"cwd": "/definitely-not-here-SECRET-MARKER"})
    daemon.stop()
    text = daemon.stderr()
    assert "SECRET-MARKER" not in text
    for line in text.splitlines():
        assert isinstance(json.loads(line)["event"], str)


def test_a_feature_that_cannot_start_exits_1_with_a_message_and_no_socket(
    orca_env: OrcaEnv,
) -> None:
    orca_env.memory_root.mkdir(mode=0o700)
    (orca_env.memory_root / "projects").write_text("not a directory")
    result = refused_start(orca_env.env)
    assert "orcad: cannot start:" in result.stderr
    assert "Exception Group Traceback" not in result.stderr  # no crash dump for the user
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert "daemon.startup_failed" in [e["event"] for e in events]
    assert not orca_env.socket.exists()


def test_a_socket_path_too_long_to_bind_is_named_with_its_length(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # bind fails with "AF_UNIX path too long" and no errno: orcad said "cannot bind ...: None";
    # and it made its runtime directory and lock before it found the path too long
    runtime = tmp_path / ("r" * 60) / ("u" * 60)
    socket_path = runtime / "orcad.sock"
    result = refused_start({**orca_env.env, "ORCA_SOCKET": str(socket_path)})
    length = len(os.fsencode(socket_path))
    said = [line for line in result.stderr.splitlines() if line.startswith("orcad: ")]
    assert said == [
        f"orcad: no orcad can listen on {socket_path}: its path is {length} bytes, and a Unix "
        f"socket's path may have at most {SOCKET_PATH_MAX_BYTES}; set ORCA_SOCKET (or give "
        "--socket) to a shorter path"
    ]
    assert "None" not in result.stderr
    assert not (tmp_path / ("r" * 60)).exists()  # no runtime directory, socket or lock
    assert not (orca_env.memory_root / "orcad.lock").exists()


def test_a_memory_root_it_cannot_create_is_a_clear_startup_error(orca_env: OrcaEnv) -> None:
    orca_env.memory_root.write_text("")  # a file where the memory directory should be
    result = refused_start(orca_env.env)
    assert "orcad: cannot start:" in result.stderr
    assert "Traceback" not in result.stderr
    assert not orca_env.socket.exists()


def test_a_client_that_never_reads_is_disconnected_and_others_are_served(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    daemon = start(orca_env, daemon_factory, "[server]\nsend_timeout_s = 0.5\n")
    hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.connect(str(daemon.orca.socket))
    hog.setblocking(False)
    ping = b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}\n' * 256
    try:
        while True:  # until the daemon, stuck writing answers nobody reads, stops reading too
            hog.send(ping)
    except BlockingIOError:
        pass
    assert daemon.call("daemon.ping").protocol == 1  # the others are not held up
    deadline = time.monotonic() + 15
    while "connection.send_timeout" not in [e["event"] for e in daemon.log_events()]:
        assert time.monotonic() < deadline, "the daemon kept waiting on a client that never reads"
        time.sleep(0.05)
    hog.settimeout(15)
    while True:  # the answers it did write, then the end: the daemon gave up on this client
        try:
            if not hog.recv(1 << 20):
                break
        except ConnectionResetError:
            break
    hog.close()
    assert daemon.call("daemon.status").pid == daemon.proc.pid


def test_a_client_that_never_reads_is_read_no_further_than_a_line_of_bytes_owed(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    # a limit of 64 answers owed let a client that never reads park 64 requests of 8 MiB each,
    # with their answers (an `id` of that size is echoed): over 1 GiB of RSS per connection
    daemon = start(orca_env, daemon_factory, "[server]\nmax_message_bytes = 1048576\n")
    line = b'{"jsonrpc":"2.0","method":"jobs.list","id":"' + b"a" * (2**20 - 100) + b'"}\n'
    hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.connect(str(daemon.orca.socket))
    hog.settimeout(2.0)
    sent = 0
    try:
        while sent < 64:
            hog.sendall(line)
            sent += 1
    except TimeoutError:
        pass  # the daemon stopped reading
    # two requests owed, one line waiting in its buffer, and what the sockets' buffers hold
    assert sent <= 6, f"the daemon read {sent} requests of 1 MiB from a client that never reads"
    assert daemon.call("daemon.ping").protocol == 1  # the others are not held up
    hog.close()
    assert daemon.call("daemon.status").pid == daemon.proc.pid


def test_three_requests_of_the_largest_size_may_be_sent_before_an_answer_is_read(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    # a client that writes its requests and then reads the answers: with one line's worth of
    # bytes owed, the daemon stopped reading after the second, while the first's answer waited
    # for a client still writing the third (two owed, and one more read while they are)
    daemon = start(orca_env, daemon_factory, "[server]\nmax_message_bytes = 1048576\n")
    lines = [
        b'{"jsonrpc":"2.0","method":"jobs.list","id":"' + bytes([97 + n]) * (2**20 - 100) + b'"}\n'
        for n in range(3)
    ]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(daemon.orca.socket))
        client.settimeout(10.0)
        for line in lines:
            client.sendall(line)
        received = b""
        while received.count(b"\n") < 3:
            chunk = client.recv(1 << 20)
            assert chunk, "the daemon closed the connection"
            received += chunk
    answers = [json.loads(line) for line in received.splitlines()]
    assert sorted(answer["id"][0] for answer in answers) == ["a", "b", "c"]


async def test_draining_finishes_requests_in_flight_and_starts_no_new_ones(tmp_path: Path) -> None:
    entered, release = trio.Event(), trio.Event()
    started: list[str] = []

    async def slow_close(params: SessionCloseParams) -> Empty:
        started.append(params.session_id)
        entered.set()
        await release.wait()
        return Empty()

    router = Router()
    router.add("daemon.ping", lambda params: PingResult(protocol=1, version="t", pid=1))
    router.add("session.close", slow_close)

    def close_line(request_id: int, session_id: str) -> bytes:
        params = {"session_id": session_id, "epoch": 1}
        request = {"jsonrpc": "2.0", "id": request_id, "method": "session.close", "params": params}
        return json.dumps(request).encode() + b"\n"

    async with serving(router, tmp_path) as served:
        client = served.client
        await client.send_all(close_line(1, "in-flight"))
        await entered.wait()
        drained = served.start_draining()
        await trio.testing.wait_all_tasks_blocked()
        await client.send_all(b'{"jsonrpc":"2.0","id":2,"method":"daemon.ping"}\n')
        await client.send_all(close_line(3, "after-stop"))
        await trio.testing.wait_all_tasks_blocked()
        release.set()
        received = b""
        with trio.move_on_after(10):
            try:
                while chunk := await client.receive_some():
                    received += chunk
            except trio.BrokenResourceError:
                pass  # reset: the daemon closed with the unread requests in its buffer
        await drained.wait()
    assert [json.loads(line)["id"] for line in received.splitlines()] == [1]
    assert started == ["in-flight"]


def test_running_out_of_file_descriptors_keeps_the_daemon_alive(
    orca_env: OrcaEnv, daemon_factory: list
) -> None:
    daemon = DaemonProcess(orca_env, fd_limit=48)
    daemon_factory.append(daemon)
    daemon.start()
    daemon.call("daemon.status")  # features installed: only accept() is left to need a descriptor
    hogs = [raw_connection(daemon) for _ in range(60)]  # more than it has descriptors for
    deadline = time.monotonic() + 15
    while "connection.accept_failed" not in [e["event"] for e in daemon.log_events()]:
        assert daemon.proc.poll() is None, "accept() failing with EMFILE killed the daemon"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for hog in hogs:
        hog.close()
    assert daemon.call("daemon.ping").pid == daemon.proc.pid
    assert daemon.stop() == 0


async def test_a_drain_that_cuts_an_answer_short_sends_nothing_after_it(tmp_path: Path) -> None:
    entered, release = trio.Event(), trio.Event()

    async def slow_close(params: SessionCloseParams) -> Empty:
        entered.set()
        await release.wait()
        return Empty()

    def large_status(params: object) -> dict[str, str]:
        return {"pad": "x" * 100_000}

    router = Router()
    router.add("daemon.status", large_status)  # type: ignore[arg-type]
    router.add("session.close", slow_close)
    async with serving(router, tmp_path) as served:
        client = served.client
        params = {"session_id": "s", "epoch": 1}
        close = {"jsonrpc": "2.0", "id": "slow", "method": "session.close", "params": params}
        await client.send_all(json.dumps(close).encode() + b"\n")
        await entered.wait()
        # Answers the client does not read, until the reader is stuck writing one of them...
        for request_id in range(20):
            await client.send_all(
                b'{"jsonrpc":"2.0","id":%d,"method":"daemon.status"}\n' % request_id
            )
        await trio.testing.wait_all_tasks_blocked()
        drained = served.start_draining()  # ...which the drain cuts short
        await trio.testing.wait_all_tasks_blocked()
        release.set()
        received = b""
        with trio.move_on_after(10):
            try:
                while chunk := await client.receive_some():
                    received += chunk
            except trio.BrokenResourceError:
                pass
        await drained.wait()
    *complete, cut = received.split(b"\n")
    assert cut.startswith(b'{"jsonrpc":"2.0","id":')
    for line in complete:  # no answer written after the cut one, where it would end that line
        json.loads(line)


def test_half_a_surrogate_pair_is_bad_params_answered_with_the_request_id(
    daemon: DaemonProcess,
) -> None:
    """JSON allows "\\ud83d" alone (a JavaScript string cut inside an emoji encodes so); it is
    no text, and its request is answered with its id, so its client knows which one failed."""
    sock = raw_connection(daemon)
    sock.sendall(
        b'{"jsonrpc":"2.0","id":7,"method":"session.open","params":{"cwd":"/tmp/x\\ud83d"}}\n'
    )
    answer = read_line(sock)
    assert answer["id"] == 7
    assert (answer["error"]["code"], answer["error"]["data"]["field"]) == (-32602, "cwd")
    sock.sendall(
        b'{"jsonrpc":"2.0","id":8,"method":"turn.completed","params":{"messages":'
        b'[{"role":"user","content":"ok"},{"role":"user","content":"\\udc00 cut"}]}}\n'
    )
    answer = read_line(sock)
    assert (answer["id"], answer["error"]["data"]["field"]) == (8, "messages[1].content")
    # a key that holds one is named in escapes
    sock.sendall(b'{"jsonrpc":"2.0","id":11,"method":"session.open","params":{"x\\ud800y":1}}\n')
    answer = read_line(sock)
    assert (answer["id"], answer["error"]["data"]["field"]) == (11, "x\\ud800y")
    # an id that is itself half a pair cannot be echoed; a whole pair is text, and decodes
    sock.sendall(b'{"jsonrpc":"2.0","id":"a\\ud800","method":"daemon.ping"}\n')
    assert read_line(sock)["id"] is None
    sock.sendall(b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"daemon.ping"}\n')
    answer = read_line(sock)
    assert answer["id"] == "\U0001f600" and answer["result"]["protocol"] == 1
    # a notification holding one is not answered; other malformed JSON stays a parse error
    sock.sendall(b'{"jsonrpc":"2.0","method":"daemon.ping","params":{"x":"\\ud800"}}\n')
    sock.sendall(b'{"jsonrpc":"2.0","id":9,"x":"\\ud800",}\n')
    assert read_line(sock)["error"]["code"] == -32700
    sock.sendall(b'{"jsonrpc":"2.0","id":10,"method":"daemon.ping"}\n')
    assert read_line(sock)["id"] == 10  # the connection is still served
    # a pasted megabytes long, full of them, is answered the same, and nobody waits on it
    huge = b"x\\ud800 " * 700_000
    sock.sendall(
        b'{"jsonrpc":"2.0","id":12,"method":"recall","params":{"prompt":"' + huge + b'"}}\n'
    )
    with daemon.client() as other:
        assert other.call("daemon.ping").pid == daemon.proc.pid
    answer = read_line(sock)
    assert (answer["id"], answer["error"]["data"]["field"]) == (12, "prompt")
    sock.close()


@pytest.mark.parametrize(
    ("request_line", "code"),
    [
        # not a JSON-RPC 2.0 request: -32600 as without the surrogate, to its id
        (b'{"jsonrpc":"1.0","id":3,"method":"daemon.ping","params":{"x":"\\ud800"}}', -32600),
        (b'{"id":3,"method":"daemon.ping","params":{"x":"\\ud800"}}', -32600),
        (b'{"jsonrpc":"2.0","id":3,"params":{"x":"\\ud800"}}', -32600),
        (b'{"jsonrpc":"2.0","id":3,"method":"daemon.ping","extra":"\\ud800"}', -32600),
        (b'{"jsonrpc":"2.0\\ud800","id":3,"method":"daemon.ping"}', -32600),
        # an unknown method is -32601 before its params are looked at
        (b'{"jsonrpc":"2.0","id":3,"method":"no.such","params":{"x":"\\ud800"}}', -32601),
        (b'{"jsonrpc":"2.0","id":3,"method":"daemon.ping\\ud800"}', -32601),
    ],
)
def test_half_a_surrogate_pair_does_not_hide_what_else_is_wrong_with_a_request(
    daemon: DaemonProcess, request_line: bytes, code: int
) -> None:
    """A line holding a lone surrogate is judged as any other line first: one that is no
    request, or names no method, gets the answer it would get without the surrogate."""
    with raw_connection(daemon) as sock:
        sock.sendall(request_line + b"\n")
        answer = read_line(sock)
        assert (answer["id"], answer["error"]["code"]) == (3, code)
        # a line that is no request is answered even without an id (it is no notification)
        sock.sendall(b'{"jsonrpc":"1.0","method":"daemon.ping","params":{"x":"\\ud800"}}\n')
        answer = read_line(sock)
        assert (answer["id"], answer["error"]["code"]) == (None, -32600)
        # a JSON string is no request object, in a batch or not
        sock.sendall(b'"\\ud800"\n')
        answer = read_line(sock)
        assert (answer["id"], answer["error"]["code"]) == (None, -32600)


@pytest.mark.parametrize(
    ("template", "code"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"%s"}', -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","%s":1}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{"%s":1}}', -32602),
        (b'{"jsonrpc":"2.0","id":1,"method":"jobs.list","params":{"state":"%s"}}', -32602),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"turn.completed","params":{"messages":[{"%s":1}]}}',
            -32602,
        ),
    ],
)
def test_an_error_naming_a_long_name_the_client_sent_stays_short(
    daemon: DaemonProcess, template: bytes, code: int
) -> None:
    """A method, member, field or enum value a client sent is quoted by its start: escaped in
    full, a megabyte of DEL characters made an answer five times the request's size, which
    the bound on bytes owed to a client that does not read does not count."""
    name = b"\x7f" * (1024 * 1024)
    with raw_connection(daemon) as sock:
        sock.sendall(template % name + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 20)
            assert chunk, data[:200]
            data += chunk
        answer = json.loads(data)
        assert answer["error"]["code"] == code
        assert len(data) < 4096
        if code != -32602:  # a name quoted whole in the message says how long it was
            assert f"({len(name)} characters)" in answer["error"]["message"]
