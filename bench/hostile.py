"""What hostile clients cost everyone else: daemon RSS and a bystander's ping latency, alone and
while (a) a client floods requests and never reads its answers, (a') three do with requests of
8 MiB, and (a'') 200 do, (b) 300 connections trickle one byte a second, (c) clients close before
reading, as many times as they can.

Run: python bench/hostile.py [--seconds S]
RSS is the most the daemon took during each case, sampled every 0.1 s.
Targets (issue: never down): RSS with a greedy client under +200 MiB (with 200 of them,
reported: once they hold server.max_buffered_bytes together, those that have taken none of an
answer for half a second are closed; what they send within that is read); bystanders keep their
latency (p50 ratio against the quiet baseline, measured in the same run, near 1x); new clients
served while 300 connections trickle.
"""

from __future__ import annotations

import argparse
import functools
import socket
import struct
import threading
import time
from collections.abc import Callable

from common import millis, rss_mib, running_daemon, summarize

from protocol.client import Client

STATUS = b'{"jsonrpc":"2.0","id":1,"method":"daemon.status"}\n'


def bystander(path: str, seconds: float) -> list[float]:
    latencies = []
    with Client(path, timeout=30) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            client.call("daemon.ping")
            latencies.append(time.perf_counter() - started)
            time.sleep(0.002)
    return latencies


def greedy(path: str, stop: threading.Event) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    sock.setblocking(False)
    burst = STATUS * 2000
    while not stop.is_set():
        try:
            sock.send(burst)
        except BlockingIOError:
            time.sleep(0.005)
        except OSError:  # disconnected after send_timeout_s: come back, as a bad client would
            sock.close()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(path)
            sock.setblocking(False)
    sock.close()


# A request as large as a line may be (8 MiB), its size in an `id` the answer echoes: each one
# owed costs the daemon the request and its answer
LARGE = b'{"jsonrpc":"2.0","method":"jobs.list","id":"' + b"a" * (8 * 2**20 - 100) + b'"}\n'


def greedy_large(path: str, stop: threading.Event, count: int = 3) -> None:
    """`count` connections send 8 MiB requests and never read the answers."""
    socks: list[socket.socket] = []

    def flood() -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        sock.settimeout(1.0)
        socks.append(sock)
        while not stop.is_set():
            try:
                sock.sendall(LARGE)
            except TimeoutError:
                continue  # the daemon stopped reading: keep pushing, as a bad client would
            except OSError:
                return  # disconnected after send_timeout_s

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    stop.wait()
    for sock in socks:
        sock.close()


def trickle(path: str, stop: threading.Event) -> None:
    socks = []
    for _ in range(300):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        socks.append(sock)
    while not stop.is_set():
        for index, sock in enumerate(socks):
            try:
                sock.send(b" ")
            except OSError:  # closed by the daemon: reconnect and keep trickling
                sock.close()
                socks[index] = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                socks[index].connect(path)
        stop.wait(1.0)
    for sock in socks:
        sock.close()


def early_closer(path: str, stop: threading.Event) -> None:
    linger = struct.pack("ii", 1, 0)
    while not stop.is_set():
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            sock.sendall(STATUS * 10)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        except OSError:
            pass
        sock.close()


def newcomers_served(path: str, count: int = 20) -> int:
    served = 0
    for _ in range(count):
        try:
            with Client(path, timeout=5) as client:
                client.call("daemon.ping")
                served += 1
        except Exception:  # noqa: S112 - a refused newcomer is what we count
            continue
    return served


def run_case(
    name: str, path: str, pid: int, seconds: float, attacker: Callable[[str, threading.Event], None]
) -> tuple[list[float], float, int]:
    stop = threading.Event()
    thread = threading.Thread(target=attacker, args=(path, stop), daemon=True)
    peak = [rss_mib(pid)]
    sampled = threading.Event()

    def sample() -> None:  # the most RSS the attack took, not what is left at the end
        while not sampled.wait(0.1):
            peak[0] = max(peak[0], rss_mib(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    thread.start()
    time.sleep(1.0)  # let the attack reach its steady state
    latencies = bystander(path, seconds)
    served = newcomers_served(path)
    stop.set()
    thread.join(timeout=30)
    sampled.set()
    sampler.join()
    return latencies, peak[0], served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    config = "[server]\nsend_timeout_s = 5.0\nrequest_line_timeout_s = 5.0\n"
    with running_daemon(config) as (proc, path, _root):
        quiet = bystander(path, args.seconds)
        base_rss = rss_mib(proc.pid)
        base_p50, base_p99 = summarize(quiet)
        print(
            f"{'case':<18} {'ping p50':>11} {'ping p99':>11} {'p50 ratio':>9} "
            f"{'RSS MiB':>8} {'+RSS':>7} {'newcomers':>9}"
        )
        print(
            f"{'quiet':<18} {millis(base_p50)} {millis(base_p99)} {1.0:9.2f} "
            f"{base_rss:8.1f} {0.0:7.1f} {'-':>9}"
        )
        for name, attacker in (
            ("greedy", greedy),
            ("greedy 8 MiB", greedy_large),
            ("greedy 8 MiB x200", functools.partial(greedy_large, count=200)),
            ("trickle x300", trickle),
            ("early close", early_closer),
        ):
            latencies, rss, served = run_case(name, path, proc.pid, args.seconds, attacker)
            p50, p99 = summarize(latencies)
            print(
                f"{name:<18} {millis(p50)} {millis(p99)} {p50 / base_p50:9.2f} "
                f"{rss:8.1f} {rss - base_rss:7.1f} {served:>6}/20"
            )
        assert proc.poll() is None, "orcad exited"
        print("orcad still running: yes")


if __name__ == "__main__":
    main()
