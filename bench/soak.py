"""A long run of one daemon under agents' traffic and careless clients, to see what grows.

For --seconds, across --projects Git repositories: sessions opened with new and reused ids (some
joined, some never closed), recall before each turn (sometimes twice), turn.completed,
memory.search and memory.manage (save, update, forget), remember; and clients that close right
after sending, never read, send half a line or garbage; orcactl commands and Claude Code hooks;
--mcp `orcactl mcp` servers driven by the MCP SDK's client (tool calls, `subscriptions/listen`
opened and cancelled, a client killed wherever it is every 20 s or so, the others restarting
their server now and then). Every --kill-every seconds orcad is SIGKILLed and started again, as
a service manager would (an orcactl that finds no daemon may start it first). Every
--sample-every requests it prints the daemon's RSS, open fds, threads, the databases' and WALs'
sizes, the files under ORCA_HOME, the rows of the state tables, the log's size, the `orcactl mcp`
processes alive, the restarts and a ping's time; at the end, the first and last samples side by
side, what became of every job a turn.completed answer acknowledged (listed every 20 s, so a
committed job deleted later as one past the newest 128 kept is told from one lost; one a forget
deleted with its fact, perhaps before any listing, is named in forgotten-jobs.json), the jobs not
final after up to 3 minutes, the exhausted ones, a ping's time, `orcactl doctor`'s exit status
and the log lines above info by event. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
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
    "mcp_procs", "restarts", "ping_us",
)  # fmt: skip
FINAL_STATES = ("committed", "exhausted", "cancelled")


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
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.lock = threading.Lock()
        # every job a turn.completed answer acknowledged, and the last state a listing showed it in
        self.acknowledged: set[str] = set()
        self.seen: dict[str, str] = {}
        self.mcp_clients: list[subprocess.Popen[bytes]] = []

    # --- the daemon and its figures ---------------------------------------------------------

    def start(self) -> None:
        """Starts orcad, unless an orcactl (a hook, say) started one meanwhile, as it does when
        it finds none."""
        # its stderr is $ORCA_HOME/orcad.log, as when orcactl starts it: the log rotates
        with open(self.home / "orcad.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "orcad"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            wait_for_ping(self.socket, proc)
        except RuntimeError:
            if proc.wait(30) != 1:
                raise
            self.failures["orcad started by orcactl"] = (
                self.failures.get("orcad started by orcactl", 0) + 1
            )
        self.proc = proc

    def pid(self) -> int:
        """The pid of the orcad serving now (this run's, or one an orcactl started)."""
        deadline = time.monotonic() + 30
        while True:
            try:
                pid = int(json.loads((self.home / "memory" / "orcad.pid").read_text())["pid"])
                if _alive(pid):
                    return pid
            except (OSError, ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("no orcad.pid names a live orcad")
            time.sleep(0.05)

    def kill_and_restart(self) -> None:
        """SIGKILL orcad wherever it is, and start it again, as systemd would."""
        with self.lock:
            pid = self.pid()
            os.kill(pid, signal.SIGKILL)
            if self.proc is not None and self.proc.pid == pid:
                self.proc.wait(30)
            while _alive(pid):
                time.sleep(0.01)
            self.restarts += 1
            self.start()

    def stop(self) -> None:
        with self.lock:
            pid = self.pid()
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            if self.proc is not None and self.proc.pid == pid:
                self.proc.wait(30)
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)

    def killer(self, every: float, stop: threading.Event) -> None:
        while not stop.wait(every * self.rng.uniform(0.8, 1.2)):
            self.kill_and_restart()
            print(f"# orcad killed and started again ({self.restarts})", flush=True)

    # --- acknowledged jobs ------------------------------------------------------------------

    def audit(self) -> dict[str, str]:
        """The state of every job orcad lists now (all projects)."""
        with Client(self.socket, timeout=60) as client:
            listed = msgspec.to_builtins(client.call("jobs.list", {}))
        states = {job["job_id"]: job["state"] for job in listed["jobs"]}
        for job_id, state in states.items():
            if job_id in self.acknowledged:
                self.seen[job_id] = state
        return states

    def forgotten_jobs(self) -> set[str]:
        """The jobs a forget deleted with their fact, as each project's forgotten-jobs.json
        names them."""
        named: set[str] = set()
        for path in (self.home / "memory" / "projects").glob("*/forgotten-jobs.json"):
            named.update(json.loads(path.read_text())["job_ids"])
        return named

    def settle(self, seconds: float) -> dict[str, str]:
        """Lists jobs until none is pending or leased (or `seconds` pass); the last listing."""
        deadline = time.monotonic() + seconds
        while True:
            states = self.audit()
            if not any(s in ("pending", "leased") for s in states.values()):
                return states
            if time.monotonic() > deadline:
                return states
            time.sleep(1)

    # --- MCP servers driven by the SDK's client ---------------------------------------------

    def mcp_client(self) -> subprocess.Popen[bytes]:
        log = open(self.root / "mcp-clients.log", "ab")  # noqa: SIM115 (the child keeps it)
        with log:
            return subprocess.Popen(
                [sys.executable, __file__, "--mcp-client", self.rng.choice(self.projects)],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def mcp_churn(self) -> None:
        """Keeps the MCP clients running, and now and then kills one wherever it is."""
        self.mcp_clients = [c for c in self.mcp_clients if c.poll() is None]
        if self.mcp_clients and self.rng.random() < 0.3:
            victim = self.mcp_clients.pop(self.rng.randrange(len(self.mcp_clients)))
            victim.kill()
            victim.wait(10)
            self.failures["mcp client killed"] = self.failures.get("mcp client killed", 0) + 1

    def mcp_servers(self) -> list[int]:
        """Pids of `orcactl mcp` processes serving this run's projects."""
        pids = []
        marker = str(self.root / "projects").encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"\0mcp\0" in cmdline and marker in cmdline and b"--mcp-client" not in cmdline:
                    pids.append(int(entry))
        return pids

    def sample(self) -> dict[str, int]:
        with self.lock:
            return self._sample(self.pid())

    def _sample(self, pid: int) -> dict[str, int]:
        began = time.perf_counter()
        with Client(self.socket, timeout=30) as client:
            client.call("daemon.ping")
        ping_us = int((time.perf_counter() - began) * 1e6)
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
            "mcp_procs": len(self.mcp_servers()),
            "restarts": self.restarts,
            "ping_us": ping_us,
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
        done = self.call(
            client, "turn.completed", {**ids, "turn_id": turn_id, **turn, "messages": messages}
        )
        if done and done.get("job_id"):
            self.acknowledged.add(done["job_id"])

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


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, killed and not yet reaped, counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


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


async def _mcp_client(cwd: str) -> None:
    """One MCP client for good: `orcactl mcp` started, tool calls and a subscription opened and
    cancelled, the server closed after a while and started again."""
    from mcp import Client as McpClient
    from mcp.client.stdio import StdioServerParameters

    rng = random.Random()
    params = StdioServerParameters(
        command=ORCACTL, args=["mcp", "--cwd", cwd, "--mode", "yolo"], env=dict(os.environ)
    )
    while True:
        try:
            async with McpClient(params, read_timeout_seconds=60) as client:
                saved: list[str] = []
                for _ in range(rng.randint(5, 40)):
                    draw = rng.random()
                    if draw < 0.3:
                        await client.call_tool("memory_search", {"query": rng.choice(WORDS)})
                    elif draw < 0.55:
                        await client.call_tool("recall", {"prompt": _sentence(rng)})
                    elif draw < 0.7:
                        args = {"action": "save", "content": "We " + _sentence(rng)}
                        args.update(kind="fact", is_global=False)
                        result = await client.call_tool("memory_manage", args)
                        text = "".join(getattr(b, "text", "") for b in result.content)
                        found = [w for w in text.replace('"', " ").split() if w.startswith("mem_")]
                        saved.extend(found[:1])
                    elif draw < 0.78 and saved:
                        forget = {"action": "forget", "id": saved.pop()}
                        await client.call_tool("memory_manage", forget)
                    elif draw < 0.82:
                        fact = {"text": "Prefer " + _sentence(rng), "scope": "project"}
                        await client.call_tool("remember", fact)
                    else:
                        async with client.listen(tools_list_changed=True):
                            await asyncio.sleep(rng.uniform(0, 2))
        except Exception as exc:  # an orcad killed meanwhile, say: start again
            print(f"mcp client: {type(exc).__name__}: {exc}"[:300], file=sys.stderr, flush=True)
            await asyncio.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1800.0)
    parser.add_argument("--sample-every", type=int, default=3000, help="requests between samples")
    parser.add_argument("--projects", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mcp", type=int, default=3, help="MCP clients running at once")
    parser.add_argument(
        "--kill-every",
        type=float,
        default=300.0,
        help="seconds between SIGKILLs of orcad (0: none)",
    )
    parser.add_argument("--root", type=Path, help="keep the run's files here (an empty directory)")
    parser.add_argument("--mcp-client", metavar="CWD", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mcp_client:
        asyncio.run(_mcp_client(args.mcp_client))
        return
    with tempfile.TemporaryDirectory(prefix="orcad-soak-") as tmp:
        root = args.root or Path(tmp)
        root.mkdir(exist_ok=True)
        root.chmod(0o700)
        run(Soak(root, args.projects, args.seed), args)


def run(soak: Soak, args: argparse.Namespace) -> None:
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped: the daemon too
    soak.start()
    stop = threading.Event()
    killer = threading.Thread(target=soak.killer, args=(args.kill_every, stop), daemon=True)
    try:
        print(_row())
        first = soak.sample()
        print(_row(first), flush=True)
        if args.kill_every > 0:
            killer.start()
        started, due, audited, churned = time.monotonic(), args.sample_every, 0.0, 0.0
        while time.monotonic() - started < args.seconds:
            now = time.monotonic()
            try:
                if now - churned > 20:
                    churned = now
                    soak.mcp_churn()
                    while len(soak.mcp_clients) < args.mcp:
                        soak.mcp_clients.append(soak.mcp_client())
                soak.step()
                if now - audited > 20:
                    audited = now
                    soak.audit()
            except Exception as exc:  # an orcad being killed and started again, say
                key = f"client: {type(exc).__name__}"
                soak.failures[key] = soak.failures.get(key, 0) + 1
            if soak.ops >= due:
                due += args.sample_every
                try:
                    print(_row(soak.sample()), flush=True)
                except Exception as exc:
                    print(f"# no sample: {type(exc).__name__}: {exc}", flush=True)
        stop.set()
        if killer.is_alive():
            killer.join()
        for client in soak.mcp_clients:
            client.kill()
            client.wait(10)
        for _, connection in soak.held:
            connection.close()
        report(soak, first)
    finally:
        stop.set()
        for client in soak.mcp_clients:
            if client.poll() is None:
                client.kill()
        soak.stop()


def report(soak: Soak, first: dict[str, int]) -> None:
    states = soak.settle(180)
    deadline = time.monotonic() + 15  # the servers of killed clients see their stdin close
    while soak.mcp_servers() and time.monotonic() < deadline:
        time.sleep(0.2)
    last = soak.sample()
    print("\nfirst and last samples")
    for name in COLUMNS:
        print(f"  {name:<10} {first[name]:>12} {last[name]:>12}")
    forgotten = soak.forgotten_jobs()
    outcomes: dict[str, int] = {}
    for job_id in soak.acknowledged:
        if job_id in states:
            outcome = states[job_id]
        elif job_id in forgotten:  # a forget of its fact may come before any listing saw it
            outcome = "deleted by a forget (forgotten-jobs.json)"
        elif soak.seen.get(job_id) == "committed":
            outcome = "committed, since deleted (newest 128 kept)"
        else:
            outcome = f"MISSING (last listed {soak.seen.get(job_id, 'never')})"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(f"\njobs acknowledged: {len(soak.acknowledged)}, orcad killed {soak.restarts} times")
    for outcome, count in sorted(outcomes.items()):
        print(f"  {outcome}: {count}")
    stuck = {s: n for s, n in _count(states.values()).items() if s not in FINAL_STATES}
    print(f"jobs listed at the end: {_count(states.values())}; not final: {stuck}")
    with Client(soak.socket) as client:
        exhausted = msgspec.to_builtins(client.call("jobs.list", {"state": "exhausted"}))["jobs"]
    for job in exhausted[:10]:
        print(f"  exhausted {job['job_id']}: {job['last_error']}")
    with Client(soak.socket) as client:
        began = time.perf_counter()
        client.call("daemon.ping")
        print(f"ping at the end: {(time.perf_counter() - began) * 1e3:.2f} ms")
    print(f"orcactl mcp servers left running: {soak.mcp_servers()}")
    doctor = subprocess.run(
        [ORCACTL, "doctor"], env=soak.env, capture_output=True, text=True, timeout=120
    )
    print(f"orcactl doctor exit status: {doctor.returncode}")
    if doctor.returncode:
        print(doctor.stdout[-3000:], doctor.stderr[-1000:])
    above_info: dict[str, int] = {}
    for name in ("orcad.log.1", "orcad.log"):
        if (soak.home / name).exists():
            for line in (soak.home / name).read_text(errors="replace").splitlines():
                if '"level": "info"' not in line:
                    try:
                        event = json.loads(line).get("event", line[:120])
                    except ValueError:
                        event = line[:120]
                    above_info[str(event)] = above_info.get(str(event), 0) + 1
    print(f"log lines above info (in the log kept), by event: {json.dumps(above_info)}")
    print(f"requests that failed: {json.dumps(soak.failures)}")


def _count(values: Any) -> dict[str, int]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    return counted


if __name__ == "__main__":
    main()
