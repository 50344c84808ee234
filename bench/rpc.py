"""daemon.ping round trip and throughput against a minimal trio echo server, start-up time
against the import floor, and idle RSS. Run: python bench/rpc.py [--seconds S]"""

from __future__ import annotations

import argparse
import compileall
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio
from common import (
    REPO_ROOT,
    isolated_env,
    micros,
    millis,
    rss_mib,
    running_daemon,
    summarize,
    wait_for_ping,
)

PING = b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}\n'
ROUNDS = 5  # alternating rounds of round trips, echo then orcad


def pin_for_comparison(*server_pids: int) -> str:
    """Client on the first CPU, every server on the second (where the OS lets us choose)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2:
        return "not pinned"
    os.sched_setaffinity(0, {cpus[0]})
    for pid in server_pids:
        os.sched_setaffinity(pid, {cpus[1]})
    return f"client on CPU {cpus[0]}, servers on CPU {cpus[1]}"


def round_trips(path: str, count: int) -> list[float]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    samples = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            sock.sendall(PING)
            data = b""
            while not data.endswith(b"\n"):
                data += sock.recv(65536)
            samples.append(time.perf_counter() - started)
    finally:
        sock.close()
    return samples[count // 10 :]  # drop warm-up


async def _throughput(path: str, connections: int, seconds: float) -> float:
    done = 0
    deadline = trio.current_time() + seconds

    async def worker() -> None:
        nonlocal done
        stream = await trio.open_unix_socket(path)
        async with stream:
            buffer = b""
            while trio.current_time() < deadline:
                await stream.send_all(PING)
                while b"\n" not in buffer:
                    buffer += await stream.receive_some(65536)
                buffer = buffer.split(b"\n", 1)[1]
                done += 1

    async with trio.open_nursery() as nursery:
        for _ in range(connections):
            nursery.start_soon(worker)
    return done / seconds


def throughput(path: str, connections: int, seconds: float) -> float:
    return trio.run(_throughput, path, connections, seconds)


def compile_bytecode() -> None:
    """Write orcad's bytecode, as `pip install` does: the floor's modules (trio, msgspec) come
    compiled, and orcad's would otherwise be compiled at every start where Python writes no
    bytecode (PYTHONDONTWRITEBYTECODE=1, a tree it may not write in), which timed the compiler:
    start to first ping 2.81x the floor, where the same start from compiled files was 1.66x."""
    for package in ("orcad", "protocol"):
        compileall.compile_dir(REPO_ROOT / package, quiet=1)


def start_to_ready() -> float:
    """Seconds from spawning orcad in a fresh home to its first answered ping."""
    with tempfile.TemporaryDirectory(prefix="orcad-bench-") as tmp:
        root = Path(tmp)
        root.chmod(0o700)
        env = isolated_env(root)
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "orcad"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_ping(env["ORCA_SOCKET"], proc)
        elapsed = time.perf_counter() - started
        proc.terminate()
        proc.wait(30)
    return elapsed


def import_floor() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import trio, msgspec, sqlite3"], check=True)
    return time.perf_counter() - started


def starts_and_floors(runs: int) -> tuple[list[float], list[float]]:
    """Start-up times and import floors, alternately (the machine's load moves both alike)."""
    starts: list[float] = []
    floors: list[float] = []
    for _ in range(runs):
        starts.append(start_to_ready())
        floors.append(import_floor())
    return starts, floors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="duration of each throughput run"
    )
    parser.add_argument("--pings", type=int, default=5000)
    parser.add_argument("--starts", type=int, default=10)
    args = parser.parse_args()
    compile_bytecode()

    all_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    with tempfile.TemporaryDirectory(prefix="orcad-echo-") as tmp:
        echo_path = str(Path(tmp) / "echo.sock")
        echo = subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "bench" / "echo_server.py"), echo_path]
        )
        try:
            while not Path(echo_path).exists():
                time.sleep(0.01)
            with running_daemon() as (daemon, path, _root):
                time.sleep(0.5)
                idle_rss = rss_mib(daemon.pid)
                placement = pin_for_comparison(echo.pid, daemon.pid)
                # Same footing for both: the same CPUs (a round trip within one core and one
                # across cores differ by ~1.7x, which would swamp the comparison), both warmed
                # up, then alternating rounds.
                round_trips(echo_path, 200)
                round_trips(path, 200)
                echo_samples: list[float] = []
                ping_samples: list[float] = []
                for _ in range(ROUNDS):
                    echo_samples += round_trips(echo_path, args.pings // ROUNDS)
                    ping_samples += round_trips(path, args.pings // ROUNDS)
                echo_rt = summarize(echo_samples)
                ping_rt = summarize(ping_samples)
                rates = {}
                for n in (1, 8, 64):
                    echo_rate = throughput(echo_path, n, args.seconds)
                    rates[n] = (echo_rate, throughput(path, n, args.seconds))
        finally:
            echo.terminate()
            echo.wait(10)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, all_cpus)  # start-up is measured unpinned
    starts, imports = starts_and_floors(args.starts)

    print(f"daemon.ping round trip, one connection (p50 / p99; {placement})")
    print(f"  echo floor : {micros(echo_rt[0])} / {micros(echo_rt[1])}")
    print(f"  orcad      : {micros(ping_rt[0])} / {micros(ping_rt[1])}")
    print(f"  ratio p50  : {ping_rt[0] / echo_rt[0]:.2f}x  (target <= 1.5x)")
    print("requests/s (echo floor -> orcad, orcad share)")
    for n, (echo_rate, orcad_rate) in rates.items():
        share = orcad_rate / echo_rate
        target = "  (target >= 60%)" if n == 64 else ""
        print(f"  {n:3d} connections: {echo_rate:9.0f} -> {orcad_rate:9.0f}  ({share:.0%}){target}")
    start_p50, import_p50 = statistics.median(starts), statistics.median(imports)
    print("start to first answered ping (median)")
    print(f"  import floor (python -c 'import trio, msgspec, sqlite3'): {millis(import_p50)}")
    print(f"  orcad                                                  : {millis(start_p50)}")
    print(f"  ratio: {start_p50 / import_p50:.2f}x  (target <= 1.5x)")
    print(f"idle daemon RSS: {idle_rss:.1f} MiB  (target < 40 MiB)")


if __name__ == "__main__":
    main()
