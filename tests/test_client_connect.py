"""The sync client waits for room when the daemon's listen backlog is full, within its timeout."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from protocol.client import Client

pytestmark = pytest.mark.inprocess


def full_backlog(path: Path) -> tuple[socket.socket, list[socket.socket]]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(0)
    waiting = []
    while True:  # connect without accepting until the kernel refuses at once
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(str(path))
        except BlockingIOError:
            sock.close()
            return server, waiting
        waiting.append(sock)


def test_a_full_backlog_is_waited_for_until_the_server_accepts(tmp_path: Path) -> None:
    server, waiting = full_backlog(tmp_path / "s.sock")
    accepted = []
    timer = threading.Timer(0.2, lambda: accepted.append(server.accept()[0]))
    started = time.monotonic()  # before the timer: a pause between the two cannot shorten it
    timer.start()
    with Client(str(tmp_path / "s.sock"), timeout=5):
        pass
    assert 0.15 < time.monotonic() - started < 5
    timer.join()
    for sock in [server, *waiting, *accepted]:
        sock.close()


def test_a_backlog_that_stays_full_fails_after_the_timeout(tmp_path: Path) -> None:
    server, waiting = full_backlog(tmp_path / "s.sock")
    started = time.monotonic()
    with pytest.raises(BlockingIOError):
        Client(str(tmp_path / "s.sock"), timeout=0.3)
    assert 0.25 < time.monotonic() - started < 3
    for sock in [server, *waiting]:
        sock.close()


def _server_that_answers_with(path: Path, chunks: list[bytes], pause: float) -> threading.Thread:
    """A foreign server: takes one connection and one request, then sends `chunks` over and
    over, `pause` apart, until the client goes away."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        connection, _ = server.accept()
        with connection, server:
            connection.recv(65536)
            try:
                while True:
                    for chunk in chunks:
                        connection.sendall(chunk)
                        time.sleep(pause)
            except OSError:  # the client gave up
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("chunks", "pause"),
    [
        ([b'{"jsonrpc":"2.0","id":999,"result":{}}\n'], 0.01),  # answers to other requests
        ([b'{"jsonrpc":"2.0",'], 0.05),  # an answer that never ends, a little at a time
    ],
    ids=["other ids", "trickle"],
)
def test_the_timeout_bounds_the_whole_wait_for_an_answer(
    tmp_path: Path, chunks: list[bytes], pause: float
) -> None:
    # each read restarted the timeout: a server sending anything but the answer held it forever
    path = tmp_path / "s.sock"
    thread = _server_that_answers_with(path, chunks, pause)
    started = time.monotonic()
    with Client(str(path), timeout=0.5) as client, pytest.raises(TimeoutError):
        client.call("daemon.ping")
    assert time.monotonic() - started < 3.0
    thread.join(timeout=5)
