"""Shared pieces of the benchmarks: an isolated daemon, timing statistics, RSS."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from protocol.client import Client, DaemonUnavailable  # noqa: E402


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def summarize(values: list[float]) -> tuple[float, float]:
    """(p50, p99) of a list of seconds."""
    return statistics.median(values), percentile(values, 0.99)


def micros(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} µs"


def millis(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def isolated_env(root: Path, config: str = "") -> dict[str, str]:
    for name in ("home", "config", "run"):
        (root / name).mkdir(mode=0o700, exist_ok=True)
    if config:
        (root / "home" / "config.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCA_", "LISTEN_", "NOTIFY_"))}
    env.update(
        ORCA_HOME=str(root / "home"),
        ORCA_CONFIG_DIR=str(root / "config"),
        ORCA_SOCKET=str(root / "run" / "orcad.sock"),
        XDG_RUNTIME_DIR=str(root / "run"),
        PYTHONPATH=str(REPO_ROOT),
    )
    return env


def wait_for_ping(socket_path: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"orcad exited with {proc.returncode}")
        try:
            with Client(socket_path, timeout=5) as client:
                client.call("daemon.ping")
                return
        except (DaemonUnavailable, ConnectionError):
            time.sleep(0.001)
    raise RuntimeError("orcad did not answer")


@contextmanager
def running_daemon(config: str = "") -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """A daemon in a throwaway home; yields (process, socket path, root)."""
    with tempfile.TemporaryDirectory(prefix="orcad-bench-") as tmp:
        root = Path(tmp)
        root.chmod(0o700)
        env = isolated_env(root, config)
        proc = subprocess.Popen(
            [sys.executable, "-m", "orcad"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_ping(env["ORCA_SOCKET"], proc)
            yield proc, env["ORCA_SOCKET"], root
        finally:
            proc.terminate()
            proc.wait(30)
