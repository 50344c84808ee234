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
    timer.start()
    started = time.monotonic()
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
