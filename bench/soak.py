"""A long run of one daemon under agents' traffic and careless clients, to see what grows.

For --seconds, across --projects Git repositories: sessions opened with new and reused ids (some
joined, some never closed), recall before each turn (sometimes twice), turn.completed,
memory.search and memory.manage (save, update, forget), remember; and clients that close right
after sending, never read, send half a line or garbage; orcactl commands and Claude Code hooks.
Every --sample-every requests it prints the daemon's RSS, open fds, threads, the databases' and
WALs' sizes, the files under ORCA_HOME, the rows of the state tables and the log's size; at the
end, the first and last samples side by side, a ping's time, `orcactl doctor`'s exit status and
the log lines above info. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
from common import REPO_ROOT, wait_for_ping

from protocol.client import Client

ORCACTL = str(Path(sys.executable).parent / "orcactl")
WORDS = (
    "pnpm", "webpack", "postgres", "redis", "kafka", "docker", "kubernetes", "terraform", "pytest",
    "ruff", "mypy", "trio", "sqlite", "migrations", "ledger", "cache", "latency", "staging",
    "deploy", "rollback", "feature", "flag", "lint", "format", "release", "branch", "review",
    "monorepo", "gradle", "cargo", "tokio", "serde", "axum", "fastapi", "django", "celery",
)  # fmt: skip
COLUMNS = (
    "ops", "rss_kib", "fds", "threads", "state_db", "state_wal", "memory_db", "memory_wal",
    "indexes", "files", "jobs", "projects", "log", "sessions", "snapshots", "records",
)  # fmt: skip


class Soak:
    def __init__(self, root: Path, projects: int, seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.home = root / "home"
        self.config = root / "config"
        for directory in (self.home, self.config, root / "run", root / "user-home"):
            directory.mkdir(mode=0o700)
        self.socket = str(root / "run" / "orcad.sock")
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ORCA_", "XDG_", "LISTEN_"))
        }
        self.env.update(
            ORCA_HOME=str(self.home),
            ORCA_CONFIG_DIR=str(self.config),
            ORCA_SOCKET=self.socket,
            XDG_RUNTIME_DIR=str(root / "run"),
            XDG_CONFIG_HOME=str(root / "user-home" / ".config"),
            XDG_CACHE_HOME=str(root / "user-home" / ".cache"),
            HOME=str(root / "user-home"),
            PYTHONPATH=str(REPO_ROOT),
        )
        self.projects = []
        for number in range(projects):
            project = root / "projects" / f"p{number:02d}"
            project.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(project)], check=True)
            if number % 2 == 0:  # half with an origin, half identified by their path
                origin = f"git@example.com:team/p{number}.git"
                subprocess.run(["git", "-C", str(project), "remote", "add", "origin", origin])
            self.projects.append(str(project))
        self.session_ids: list[str] = []
        self.records: dict[str, list[str]] = {}
        self.held: list[tuple[float, socket.socket]] = []
        self.ops = 0
        self.failures: dict[str, int] = {}

    # --- the daemon and its figures ---------------------------------------------------------

    def start(self) -> subprocess.Popen[bytes]:
        # its stderr is $ORCA_HOME/orcad.log, as when orcactl starts it: the log rotates
        with open(self.home / "orcad.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "orcad"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        wait_for_ping(self.socket, proc)
        return proc

    def sample(self, pid: int) -> dict[str, int]:
        status = Path(f"/proc/{pid}/status").read_text()
        rss = next(int(line.split()[1]) for line in status.splitlines() if "VmRSS:" in line)
        memory = self.home / "memory"
        state = memory / "daemon-state.sqlite3"
        deliberate = self.config / "memory.sqlite3"
        files = jobs = 0
        for directory, _, names in os.walk(self.home):
            files += len(names)
            jobs += len(names) if directory.endswith("/jobs") else 0
        projects = memory / "projects"
        return {
            "ops": self.ops,
            "rss_kib": rss,
            "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": len(os.listdir(f"/proc/{pid}/task")),
            "state_db": _size(state),
            "state_wal": _size(state.with_name(state.name + "-wal")),
            "memory_db": _size(deliberate),
            "memory_wal": _size(deliberate.with_name(deliberate.name + "-wal")),
            "indexes": sum(_size(path) for path in projects.glob("*/index.sqlite3")),
            "files": files,
            "jobs": jobs,
            "projects": len(os.listdir(projects)) if projects.exists() else 0,
            "log": _size(self.home / "orcad.log"),
            "sessions": _rows(state, "sessions"),
            "snapshots": _rows(state, "recall_snapshots"),
            "records": _rows(deliberate, "memories"),
        }

    # --- an agent ---------------------------------------------------------------------------

    def call(self, client: Client, method: str, params: dict[str, Any]) -> Any:
        self.ops += 1
        try:
            return msgspec.to_builtins(client.call(method, params))
        except Exception as exc:
            key = f"{method}: {type(exc).__name__}"
            self.failures[key] = self.failures.get(key, 0) + 1
            return None

    def session(self) -> None:
        rng = self.rng
        cwd = rng.choice(self.projects)
        if self.session_ids and rng.random() < 0.3:
            session_id = rng.choice(self.session_ids)
        else:
            session_id = f"sess-{uuid.uuid4()}"
            self.session_ids = [*self.session_ids[-199:], session_id]
        with Client(self.socket, timeout=30) as client:
            opened = self.call(
                client,
                "session.open",
                {"cwd": cwd, "session_id": session_id, "mode": "yolo", "join": rng.random() < 0.3},
            )
            if not opened:
                return
            ids = {"session_id": opened["session_id"], "epoch": opened["epoch"]}
            for _ in range(rng.randint(1, 6)):
                self.turn(client, ids, opened["workspace"]["root"])
            if rng.random() < 0.7:  # the others are left to expire
                self.call(client, "session.close", ids)

    def turn(self, client: Client, ids: dict[str, Any], workspace: str) -> None:
        rng = self.rng
        turn_id = f"turn-{uuid.uuid4().hex[:12]}"
        prompt = _sentence(rng)
        for _ in range(2 if rng.random() < 0.3 else 1):
            self.call(client, "recall", {**ids, "turn_id": turn_id, "prompt": prompt})
        kept = self.records.setdefault(workspace, [])
        draw = rng.random()
        if draw < 0.15:
            self.call(client, "memory.search", {**ids, "query": rng.choice(WORDS)})
        elif draw < 0.25:
            text = "We " + _sentence(rng)
            saved = self.call(
                client,
                "memory.manage",
                {**ids, "action": "save", "content": text, "kind": "fact", "is_global": False},
            )
            if saved and saved.get("record"):
                kept.append(saved["record"]["id"])
        elif draw < 0.30 and kept:
            change = {
                "action": "update",
                "id": rng.choice(kept),
                "content": "Now " + _sentence(rng),
            }
            self.call(client, "memory.manage", {**ids, **change})
        elif draw < 0.36 and kept:
            forget = {"action": "forget", "id": kept.pop(rng.randrange(len(kept)))}
            self.call(client, "memory.manage", {**ids, **forget})
        elif draw < 0.40:
            scope = rng.choice(["user", "project"])
            self.call(
                client, "remember", {**ids, "text": "Prefer " + _sentence(rng), "scope": scope}
            )
        said = f"Remember: we always use {rng.choice(WORDS)} for {rng.choice(WORDS)}. {prompt}"
        messages = [
            {"role": "user", "content": said},
            {"role": "assistant", "content": "Done. " + _sentence(rng)},
        ]
        turn = {"outcome": "succeeded", "verifier": "passed", "transcript_committed": True}
        self.call(
            client, "turn.completed", {**ids, "turn_id": turn_id, **turn, "messages": messages}
        )

    # --- careless clients -------------------------------------------------------------------

    def connect(self) -> socket.socket:
        self.ops += 1
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(10)
        connection.connect(self.socket)
        return connection

    def close_after_sending(self) -> None:
        with Client(self.socket, timeout=30) as client:
            opened = self.call(client, "session.open", {"cwd": self.rng.choice(self.projects)})
        if opened:
            ids = {"session_id": opened["session_id"], "epoch": opened["epoch"]}
            params = {**ids, "turn_id": "t1", "prompt": _sentence(self.rng)}
            line = {"jsonrpc": "2.0", "id": 1, "method": "recall", "params": params}
            with self.connect() as connection:
                connection.sendall(json.dumps(line).encode() + b"\n")

    def never_reads(self) -> None:
        connection = self.connect()
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        for number in range(20):
            connection.sendall(b'{"jsonrpc":"2.0","id":%d,"method":"daemon.status"}\n' % number)
        self.held.append((time.monotonic(), connection))

    def half_line(self) -> None:
        with self.connect() as connection:
            connection.sendall(b'{"jsonrpc":"2.0","id":1,"meth')

    def garbage(self) -> None:
        lines = (
            b"garbage\n",
            b"{}\n",
            b"[1,2]\n",
            b"\xff\xfe\n",
            b'{"jsonrpc":"2.0","id":1,"method":"nope"}\n',
            b'{"jsonrpc":"2.0","id":1,"method":"recall","params":{}}\n',
        )
        with self.connect() as connection:
            connection.sendall(self.rng.choice(lines))
            try:
                connection.recv(65536)
            except OSError:
                pass

    def orcactl(self) -> None:
        self.ops += 1
        command = self.rng.choice(
            [["status"], ["jobs"], ["projects"], ["doctor"], ["ping"], ["memory", "search", "x"]]
        )
        subprocess.run(
            [ORCACTL, "--json", *command],
            env=self.env,
            cwd=self.rng.choice(self.projects),
            capture_output=True,
            timeout=60,
        )

    def hooks(self) -> None:
        """One Claude Code session through its hooks: start, a prompt, stop, and half the time
        its end."""
        session_id, cwd = str(uuid.uuid4()), self.rng.choice(self.projects)
        transcript = self.root / "transcripts" / f"{session_id}.jsonl"
        transcript.parent.mkdir(exist_ok=True)
        base = {"session_id": session_id, "transcript_path": str(transcript), "cwd": cwd}
        prompt, prompt_id = "Remember for the project: we use " + _sentence(self.rng), "p1"
        submitted = {"prompt_id": prompt_id, "permission_mode": "default", "prompt": prompt}
        self.hook("SessionStart", {**base, "source": "startup"})
        self.hook("UserPromptSubmit", {**base, **submitted})
        entries = [
            {"type": "user", "message": {"role": "user", "content": prompt}},
            {
                "type": "assistant",
                "message": {"role": "assistant", "content": [{"type": "text", "text": "OK."}]},
            },
        ]
        common = {"sessionId": session_id, "cwd": cwd, "isSidechain": False}
        transcript.write_text(
            "".join(json.dumps({**e, **common, "uuid": str(uuid.uuid4())}) + "\n" for e in entries)
        )
        stop = {"prompt_id": prompt_id, "stop_hook_active": False, "last_assistant_message": "OK."}
        self.hook("Stop", {**base, **stop})
        if self.rng.random() < 0.5:
            self.hook("SessionEnd", {**base, "reason": "exit"})
        transcript.unlink()

    def hook(self, event: str, payload: dict[str, Any]) -> None:
        self.ops += 1
        subprocess.run(
            [ORCACTL, "hook", "claude-code", event],
            input=json.dumps({**payload, "hook_event_name": event}).encode(),
            env=self.env,
            capture_output=True,
            timeout=60,
        )

    def step(self) -> None:
        draw = self.rng.random()
        careless = (
            (0.06, self.close_after_sending),
            (0.04, self.never_reads),
            (0.04, self.half_line),
            (0.04, self.garbage),
            (0.02, self.orcactl),
            (0.01, self.hooks),
        )
        for share, act in careless:
            if draw < share:
                act()
                break
            draw -= share
        else:
            self.session()
        now = time.monotonic()
        while self.held and now - self.held[0][0] > 20:  # readers that never read, let go
            self.held.pop(0)[1].close()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14)))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _rows(database: Path, table: str) -> int:
    if not database.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5) as connection:
            return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608
    except sqlite3.Error:
        return -1


def _row(values: dict[str, int] | None = None) -> str:
    if values is None:
        return " ".join(f"{name[:10]:>10}" for name in COLUMNS)
    return " ".join(f"{values[name]:>10}" for name in COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--sample-every", type=int, default=3000, help="requests between samples")
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orcad-soak-") as tmp:
        root = Path(tmp)
        root.chmod(0o700)
        soak = Soak(root, args.projects, args.seed)
        proc = soak.start()
        try:
            print(_row())
            first = soak.sample(proc.pid)
            print(_row(first), flush=True)
            started, due = time.monotonic(), args.sample_every
            while time.monotonic() - started < args.seconds:
                try:
                    soak.step()
                except OSError as exc:
                    key = f"client: {type(exc).__name__}"
                    soak.failures[key] = soak.failures.get(key, 0) + 1
                if soak.ops >= due:
                    due += args.sample_every
                    print(_row(soak.sample(proc.pid)), flush=True)
            for _, connection in soak.held:
                connection.close()
            time.sleep(2)  # what the last clients left is let go
            last = soak.sample(proc.pid)
            print("\nfirst and last samples")
            for name in COLUMNS:
                print(f"  {name:<10} {first[name]:>12} {last[name]:>12}")
            with Client(soak.socket) as client:
                began = time.perf_counter()
                client.call("daemon.ping")
                print(f"ping at the end: {(time.perf_counter() - began) * 1e3:.2f} ms")
            doctor = subprocess.run(
                [ORCACTL, "doctor"], env=soak.env, capture_output=True, text=True, timeout=120
            )
            print(f"orcactl doctor exit status: {doctor.returncode}")
            above_info = [
                line
                for name in ("orcad.log.1", "orcad.log")
                if (soak.home / name).exists()
                for line in (soak.home / name).read_text(errors="replace").splitlines()
                if '"level": "info"' not in line
            ]
            print(f"log lines above info (in the log kept): {len(above_info)}")
            for line in above_info[:10]:
                print("  " + line[:300])
            print(f"requests that failed: {json.dumps(soak.failures)}")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
