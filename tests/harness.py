"""A real orcad subprocess with every path redirected under a temporary directory."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.client import Client, DaemonUnavailable

REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 20.0


@dataclass
class OrcaEnv:
    """The environment of one isolated daemon: its home, config dir, socket and variables."""

    root: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root.chmod(0o700)
        for name in ("home", "config", "run", "xdg-runtime", "user-home"):
            (self.root / name).mkdir(mode=0o700, exist_ok=True)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def memory_root(self) -> Path:
        return self.home / "memory"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    @property
    def deliberate_db(self) -> Path:
        return self.config_dir / "memory.sqlite3"

    @property
    def socket(self) -> Path:
        if "ORCA_SOCKET" in self.extra_env:
            return Path(self.extra_env["ORCA_SOCKET"])
        return self.root / "run" / "orcad.sock"

    @property
    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("ORCA_", "XDG_", "LISTEN_", "NOTIFY_SOCKET"))
        }
        env.update(
            ORCA_HOME=str(self.home),
            ORCA_CONFIG_DIR=str(self.config_dir),
            ORCA_SOCKET=str(self.socket),
            XDG_RUNTIME_DIR=str(self.root / "xdg-runtime"),
            XDG_CONFIG_HOME=str(self.root / "user-home" / ".config"),
            HOME=str(self.root / "user-home"),
            PYTHONPATH=str(REPO_ROOT),
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update(self.extra_env)
        return env

    def write_config(self, text: str) -> None:
        (self.home / "config.toml").write_text(text, encoding="utf-8")


class DaemonProcess:
    def __init__(
        self,
        orca: OrcaEnv,
        args: list[str] | None = None,
        *,
        fd_limit: int | None = None,
        sighup: signal.Handlers | None = None,
    ) -> None:
        self.orca = orca
        self.args = args or []
        self.fd_limit = fd_limit  # RLIMIT_NOFILE for the daemon, to test running out of fds
        # SIGHUP's disposition in the daemon (SIG_IGN: as `nohup` starts it); None inherits the
        # test run's, which may itself be running under nohup
        self.sighup = sighup
        self.stderr_path = orca.root / f"orcad-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> subprocess.Popen[bytes]:
        with open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "orcad", *self.args],
                env=self.orca.env,
                cwd=self.orca.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                preexec_fn=self._prepare_child if self._needs_preparing else None,  # noqa: PLW1509
            )
        return self.proc

    @property
    def _needs_preparing(self) -> bool:
        return self.fd_limit is not None or self.sighup is not None

    def _prepare_child(self) -> None:
        if self.fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.fd_limit, self.fd_limit))
        if self.sighup is not None:
            signal.signal(signal.SIGHUP, self.sighup)

    def start(self) -> DaemonProcess:
        self.spawn()
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"orcad exited with {self.proc.returncode}:\n{self.stderr()}")
            try:
                with Client(str(self.orca.socket), timeout=5) as client:
                    client.call("daemon.ping")
                    return
            except (DaemonUnavailable, ConnectionError):
                time.sleep(0.02)
        raise RuntimeError(f"orcad did not become ready:\n{self.stderr()}")

    def client(self, timeout: float | None = 30.0) -> Client:
        return Client(str(self.orca.socket), timeout=timeout)

    def call(self, method: str, params: Any = None) -> Any:
        with self.client() as client:
            return client.call(method, params)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self) -> DaemonProcess:
        self.stop()
        return self.start()

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_events(self) -> list[dict[str, Any]]:
        events = []
        for line in self.stderr().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events


def process_gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie awaiting its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")
