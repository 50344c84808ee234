"""Check orca end to end with the real Claude Code and Codex binaries, offline.

What it proves: the agents' hooks reach orcad, a fact said in one session is extracted into the
project's automatic memory, the next session's model request carries it back as recalled
memory, every model request offers orca's MCP tools, every session is closed when the agent
exits, and `orcactl doctor` finds the agent connected with no hook problems.

For each agent given (or found on PATH) the check builds a scratch home of its own (HOME, the
XDG directories, the runtime directory, ORCA_HOME, ORCA_CONFIG_DIR and the agent's own
configuration all live under it; the user's ~/.claude, ~/.codex and ~/.orca are never read or
written), serves a fake model on 127.0.0.1 from a thread of this script (the Anthropic Messages
API for Claude Code, the OpenAI Responses API for Codex; every answer is "OK, noted."), makes a
Git workspace, runs `orcactl integrate` there and then the agent twice, non-interactively: once
stating a project fact, once asking for a change that the fact bears on. Each check prints as
`PASS` or `FAIL`; the exit status is 0 when every check of every agent that ran passed, 1 when
one failed, 2 on bad usage (including when no agent was given or found).

Nothing is downloaded while it runs. Install the agents beforehand into a directory of your
choice, then point the check at them:

    npm install --prefix DIR @anthropic-ai/claude-code @openai/codex
    .venv/bin/python scripts/check_real_agents.py --claude DIR/node_modules/.bin/claude \\
        --codex DIR/node_modules/.bin/codex [--orcactl PATH] [--keep SCRATCH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

REPLY = "OK, noted."
FIRST_PROMPT = (
    "Remember this for the project: we use pnpm, never npm, for the web app. "
    "Also the staging database is db-staging-2."
)
SECOND_PROMPT = "add lodash to the web app"
EXPECTED_FACT = "The project uses pnpm, never npm, for the web app."
MCP_TOOLS = frozenset({"memory_search", "memory_manage", "remember", "recall"})
ORIGIN = "https://github.com/acme/webapp.git"
FAKE_KEY = "sk-fake-loopback-only"
AGENT_TIMEOUT_S = 180.0
JOB_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
EXIT_OK, EXIT_FAILED = 0, 1  # and 2, bad usage, from argparse


@dataclass(frozen=True)
class Check:
    agent: str
    name: str
    passed: bool
    detail: str


class SetupFailed(Exception):
    """A step before the agent's sessions failed; the agent's checks cannot run."""


@dataclass(frozen=True)
class ModelRequest:
    path: str
    body: Any


class ModelServer(ThreadingHTTPServer):
    """A fake model on loopback that keeps every request it was sent, in order."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self._lock = threading.Lock()
        self._requests: list[ModelRequest] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def record(self, request: ModelRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def requests(self) -> list[ModelRequest]:
        with self._lock:
            return list(self._requests)


class ModelHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the requests are kept, not logged."""

    def read_request(self) -> Any:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        cast(ModelServer, self.server).record(ModelRequest(self.path, body))
        return body

    def send_json(self, status: int, document: Any) -> None:
        data = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_not_found(self) -> None:
        self.send_json(404, {"error": {"type": "not_found_error", "message": self.path}})

    def start_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def send_event(self, name: str, data: dict[str, Any]) -> None:
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


class AnthropicHandler(ModelHandler):
    """The Messages API: a streamed (SSE) or plain JSON text answer; anything else is not found."""

    def do_POST(self) -> None:
        body = self.read_request()
        if self.path.split("?")[0].endswith("/v1/messages") and isinstance(body, dict):
            self.answer(body)
        else:
            self.send_not_found()

    def answer(self, body: dict[str, Any]) -> None:
        usage = {"input_tokens": 100, "output_tokens": 5}
        message = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            text = {"type": "text", "text": REPLY}
            self.send_json(200, {**message, "content": [text], "stop_reason": "end_turn"})
            return
        self.start_events()
        start = {**message, "content": [], "stop_reason": None}
        self.send_event("message_start", {"type": "message_start", "message": start})
        block = {"type": "text", "text": ""}
        self.send_event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        delta = {"type": "text_delta", "text": REPLY}
        self.send_event(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        self.send_event("content_block_stop", {"type": "content_block_stop", "index": 0})
        stop = {"stop_reason": "end_turn", "stop_sequence": None}
        self.send_event(
            "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 5}}
        )
        self.send_event("message_stop", {"type": "message_stop"})


class OpenAIResponsesHandler(ModelHandler):
    """The Responses API, streamed (SSE); anything else is not found."""

    def do_POST(self) -> None:
        self.read_request()
        if self.path.split("?")[0].endswith("/responses"):
            self.answer()
        else:
            self.send_not_found()

    def answer(self) -> None:
        number = len(cast(ModelServer, self.server).requests())
        response_id, item_id = f"resp_{number}", f"msg_{number}"
        text = {"type": "output_text", "text": REPLY, "annotations": []}
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed"}
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        usage = {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 105,
        }
        done = {**item, "content": [text]}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": {"id": response_id, "status": "in_progress"}}),
            (
                "response.output_item.added",
                {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}},
            ),
            ("response.content_part.added", {**where, "part": {**text, "text": ""}}),
            ("response.output_text.delta", {**where, "delta": REPLY}),
            ("response.output_text.done", {**where, "text": REPLY}),
            ("response.output_item.done", {"output_index": 0, "item": done}),
            (
                "response.completed",
                {
                    "response": {
                        "id": response_id,
                        "status": "completed",
                        "output": [done],
                        "usage": usage,
                    }
                },
            ),
        ]
        self.start_events()
        for name, data in events:
            self.send_event(name, {"type": name, **data})


@dataclass(frozen=True)
class Scratch:
    """One agent's isolated home: everything the agent, orcactl and orcad write lives here."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def runtime(self) -> Path:
        return self.root / "run"

    @property
    def orca_home(self) -> Path:
        return self.root / "orca"

    @property
    def orca_config(self) -> Path:
        return self.root / "orca-config"

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    @property
    def workspace(self) -> Path:
        return self.root / "webapp"

    def create(self) -> None:
        for directory in (self.home, self.codex_home, self.workspace):
            directory.mkdir(parents=True)
        for private in (self.runtime, self.orca_home, self.orca_config):
            private.mkdir(mode=0o700)
            private.chmod(0o700)  # whatever the umask

    def environment(self, searched_first: list[Path]) -> dict[str, str]:
        """A minimal environment: no ORCA_SOCKET, no credentials, nothing of the user's."""
        env = {name: os.environ[name] for name in ("LANG", "TERM") if name in os.environ}
        searched = [*map(str, searched_first), os.environ.get("PATH", os.defpath)]
        return {
            **env,
            "PATH": os.pathsep.join(searched),
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "ORCA_HOME": str(self.orca_home),
            "ORCA_CONFIG_DIR": str(self.orca_config),
            "CODEX_HOME": str(self.codex_home),
            "NO_COLOR": "1",
        }


def configure_claude(scratch: Scratch, model_url: str) -> dict[str, str]:
    """Claude Code reads its endpoint and key from the environment."""
    return {
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": FAKE_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def configure_codex(scratch: Scratch, model_url: str) -> dict[str, str]:
    """Codex reads its provider from config.toml, which `orcactl integrate` then extends."""
    (scratch.codex_home / "config.toml").write_text(
        f"""model = "gpt-5"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{model_url}/v1"
wire_api = "responses"
env_key = "FAKE_MODEL_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false

[projects."{scratch.workspace.resolve()}"]
trust_level = "trusted"
""",
        encoding="utf-8",
    )
    return {"FAKE_MODEL_KEY": FAKE_KEY}


@dataclass(frozen=True)
class Agent:
    name: str  # orca's name for it, as `orcactl integrate` takes it
    option: str
    program: str
    handler: type[ModelHandler]
    configure: Callable[[Scratch, str], dict[str, str]]
    arguments: tuple[str, ...]  # before the prompt


AGENTS = (
    Agent("claude-code", "--claude", "claude", AnthropicHandler, configure_claude, ("-p",)),
    Agent("codex", "--codex", "codex", OpenAIResponsesHandler, configure_codex, ("exec",)),
)


@dataclass(frozen=True)
class Run:
    """One non-interactive agent session and what it sent the model."""

    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    requests: list[ModelRequest]
    sessions: list[str]  # the agent sessions orcad opened meanwhile

    @property
    def answered(self) -> bool:
        return self.returncode == 0 and REPLY in self.stdout

    def summary(self) -> str:
        if self.returncode is None:
            return f"timed out after {AGENT_TIMEOUT_S:.0f} s"
        answer = self.stdout.strip().splitlines()[-1:] or ["nothing"]
        return f"exit {self.returncode}, answered {answer[0]!r}"


@contextmanager
def serving(handler: type[ModelHandler]) -> Iterator[ModelServer]:
    server = ModelServer(handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def orcad_stopped_after(scratch: Scratch) -> Iterator[None]:
    """Stop the orcad a hook started in this scratch home, however the block ends."""
    try:
        yield
    finally:
        stop_orcad(scratch)


def stop_orcad(scratch: Scratch) -> None:
    pid_file = (scratch.orca_home / "memory" / "orcad.pid").resolve()
    if not pid_file.is_relative_to(scratch.root.resolve()) or not pid_file.is_file():
        return
    try:
        pid = int(json.loads(pid_file.read_text(encoding="utf-8"))["pid"])
        os.kill(pid, signal.SIGTERM)
    except (ValueError, KeyError, TypeError, OSError):
        return  # no daemon left to stop, or not one of ours
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def run_command(
    argv: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )


@dataclass(frozen=True)
class Trial:
    """One agent's check under way: what it runs, where, and the model it talks to."""

    agent: Agent
    binary: Path
    orcactl: Path
    scratch: Scratch
    env: dict[str, str]
    server: ModelServer

    def orcactl_json(self, *arguments: str) -> Any:
        done = run_command([str(self.orcactl), *arguments, "--json"], self.env, self.cwd)
        try:
            return json.loads(done.stdout)
        except ValueError:
            return {"unreadable": done.stdout[-300:], "stderr": done.stderr[-300:]}

    @property
    def cwd(self) -> Path:
        return self.scratch.workspace

    def sessions(self, event: str) -> list[str]:
        """The agent's sessions orcad logged `event` (session.opened, session.closed) for, in
        $ORCA_HOME/orcad.log: the log of the daemon the first hook started."""
        log = self.scratch.orca_home / "orcad.log"
        if not log.is_file():
            return []
        found = []
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict) or entry.get("event") != event:
                continue
            session = str(entry.get("session_id"))
            if session.startswith(f"{self.agent.name}:"):
                found.append(session)
        return found


def set_up_workspace(trial: Trial) -> None:
    """A Git repository with one commit and a GitHub origin, as orca identifies projects by."""
    (trial.cwd / "package.json").write_text('{"name": "webapp"}\n', encoding="utf-8")
    steps = [
        ["git", "init", "-q"],
        ["git", "config", "user.email", "check@example.com"],
        ["git", "config", "user.name", "check"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "init"],
        ["git", "remote", "add", "origin", ORIGIN],
        [str(trial.orcactl), "integrate", trial.agent.name],
    ]
    for argv in steps:
        done = run_command(argv, trial.env, trial.cwd)
        if done.returncode != 0:
            raise SetupFailed(f"{' '.join(argv)}: {done.stderr.strip()}")


def run_agent(trial: Trial, prompt: str) -> Run:
    before_requests = len(trial.server.requests())
    before_sessions = set(trial.sessions("session.opened"))
    try:
        done = subprocess.run(
            [str(trial.binary), *trial.agent.arguments, prompt],
            env=trial.env,
            cwd=trial.cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=AGENT_TIMEOUT_S,
        )
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, stdout, stderr = None, as_text(exc.stdout), as_text(exc.stderr)
    return Run(
        returncode,
        stdout,
        stderr,
        trial.server.requests()[before_requests:],
        [session for session in trial.sessions("session.opened") if session not in before_sessions],
    )


def as_text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode("utf-8", "replace")
    return output or ""


def wait_job_committed(trial: Trial, session: str) -> dict[str, Any] | None:
    """The session's first committed extraction job, once there is one (None at the timeout)."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        for job in trial.orcactl_json("jobs").get("jobs") or []:
            if job.get("session_id") == session and job.get("state") == "committed":
                return cast(dict[str, Any], job)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.5)


def wait_sessions_closed(trial: Trial, sessions: list[str]) -> tuple[int | None, list[str]]:
    """How many sessions orcad holds open, and which of `sessions` it never logged closed; polled
    until both are none or the timeout passes."""
    deadline = time.monotonic() + CLOSE_TIMEOUT_S
    while True:
        open_count = trial.orcactl_json("status").get("sessions")
        unclosed = sorted(set(sessions) - set(trial.sessions("session.closed")))
        if (open_count == 0 and not unclosed) or time.monotonic() > deadline:
            return open_count, unclosed
        time.sleep(0.5)


def ledger_facts(scratch: Scratch) -> list[str]:
    """Every fact in the projects' automatic-memory ledgers (README, Files on disk)."""
    facts = []
    for ledger in sorted((scratch.orca_home / "memory" / "projects").glob("*/candidates.jsonl")):
        for line in ledger.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if "fact" in entry:
                facts.append(str(entry["fact"]))
    return facts


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def recalled_blocks(requests: list[ModelRequest]) -> list[str]:
    """The <recalled-memory> blocks in the requests' text, each whole."""
    blocks = []
    for request in requests:
        for text in strings_in(request.body):
            start = text.find("<recalled-memory>")
            if start >= 0:
                end = text.find("</recalled-memory>", start)
                blocks.append(text[start : end if end >= 0 else len(text)])
    return blocks


def check_agent(agent: Agent, binary: Path, orcactl: Path, scratch: Scratch) -> list[Check]:
    scratch.create()
    with ExitStack() as stack:
        server = stack.enter_context(serving(agent.handler))
        stack.enter_context(orcad_stopped_after(scratch))
        env = scratch.environment([orcactl.parent, binary.parent])
        env |= agent.configure(scratch, server.url)
        trial = Trial(agent, binary, orcactl, scratch, env, server)
        try:
            set_up_workspace(trial)
        except SetupFailed as exc:
            return [Check(agent.name, "setup", False, str(exc))]
        progress(f"{agent.name}: session 1")
        first = run_agent(trial, FIRST_PROMPT)
        job = wait_job_committed(trial, first.sessions[0]) if first.sessions else None
        progress(f"{agent.name}: session 2")
        second = run_agent(trial, SECOND_PROMPT)
        sessions = first.sessions + second.sessions
        open_count, unclosed = wait_sessions_closed(trial, sessions)
        checks = [
            check_ran(agent, first, second),
            check_hooks(agent, first, second),
            check_job(agent, first, job),
            check_ledger(agent, scratch),
            check_recall(agent, second),
            check_mcp_tools(agent, first, second),
            check_closed(agent, sessions, open_count, unclosed),
            check_doctor(agent, trial.orcactl_json("doctor"), trial.orcactl_json("status")),
        ]
        if agent.name == "codex":
            checks.append(check_no_deprecation(agent, first, second))
        return checks


def offered_tools(body: Any) -> set[str]:
    """orca's MCP tools a model request offers: Codex lists them as the functions of an
    `mcp__orca` namespace, Claude Code as `mcp__orca__NAME` tools or, when it defers MCP tools
    behind its tool search, as names in the request's text."""
    found: set[str] = set()
    tools = body.get("tools") if isinstance(body, dict) else None
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("name") == "mcp__orca" and isinstance(tool.get("tools"), list):
            found |= {str(inner.get("name")) for inner in tool["tools"] if isinstance(inner, dict)}
    for text in strings_in(body):
        found |= set(re.findall(r"\bmcp__orca__(\w+)", text))
    return found & MCP_TOOLS


def check_mcp_tools(agent: Agent, first: Run, second: Run) -> Check:
    """Every model request of both sessions offers orca's four tools: the MCP server answered
    the agent before its first request went out."""
    offered = [offered_tools(request.body) for run in (first, second) for request in run.requests]
    short = [sorted(MCP_TOOLS - tools) for tools in offered if tools != MCP_TOOLS]
    detail = (
        f"{len(offered) - len(short)} of {len(offered)} request(s) offer all of "
        f"{', '.join(sorted(MCP_TOOLS))}"
    )
    if short:
        detail += f"; the first short one lacks {', '.join(short[0])}"
    return Check(agent.name, "MCP tools offered", bool(offered) and not short, detail)


def check_ran(agent: Agent, first: Run, second: Run) -> Check:
    details = []
    for number, run in enumerate((first, second), start=1):
        details.append(f"session {number}: {run.summary()}")
        if not run.answered:
            details.append(f"its stderr ends {run.stderr.strip()[-300:]!r}")
    return Check(agent.name, "sessions ran", first.answered and second.answered, "; ".join(details))


def check_hooks(agent: Agent, first: Run, second: Run) -> Check:
    counts = [len(first.sessions), len(second.sessions)]
    detail = (
        f"orcad opened {', '.join(first.sessions + second.sessions)}"
        if counts == [1, 1]
        else f"orcad opened {counts[0]} and {counts[1]} {agent.name} sessions, not one each"
    )
    return Check(agent.name, "hooks ran", counts == [1, 1], detail)


def check_job(agent: Agent, first: Run, job: dict[str, Any] | None) -> Check:
    if job is not None:
        detail = f"{job.get('job_id')} of {job.get('session_id')} committed"
    elif first.sessions:
        detail = f"no committed job for {first.sessions[0]} within {JOB_TIMEOUT_S:.0f} s"
    else:
        detail = "session 1 reached no orcad session, so no job"
    return Check(agent.name, "session 1 job committed", job is not None, detail)


def check_ledger(agent: Agent, scratch: Scratch) -> Check:
    facts = ledger_facts(scratch)
    detail = f"{len(facts)} fact(s): {facts}"
    return Check(agent.name, "ledger holds the fact", EXPECTED_FACT in facts, detail)


def check_recall(agent: Agent, second: Run) -> Check:
    blocks = recalled_blocks(second.requests)
    with_fact = [block for block in blocks if "pnpm" in block]
    detail = (
        f"{len(with_fact)} of {len(second.requests)} request(s) recall pnpm"
        if with_fact
        else f"{len(second.requests)} request(s), {len(blocks)} <recalled-memory> block(s), "
        "none naming pnpm"
    )
    return Check(agent.name, "session 2 request recalls", bool(with_fact), detail)


def check_closed(
    agent: Agent, sessions: list[str], open_count: int | None, unclosed: list[str]
) -> Check:
    passed = bool(sessions) and open_count == 0 and not unclosed
    held = "orcad is not running" if open_count is None else f"orcad holds {open_count} open"
    detail = f"{len(sessions)} session(s), never closed: {unclosed or 'none'}; {held}"
    return Check(agent.name, "sessions closed", passed, detail)


def check_doctor(agent: Agent, doctor: Any, status: Any) -> Check:
    findings = doctor.get("findings") or []
    mine = [
        finding
        for finding in findings
        if finding.get("check") == "agents" and finding.get("detail", "").startswith(agent.name)
    ]
    hooks = [finding for finding in findings if finding.get("check") == "hooks"]
    problems = status.get("agent_hook_problems")
    passed = [finding.get("status") for finding in mine] == ["ok"] and not hooks and problems == []
    detail = "; ".join(f"{finding['status']}: {finding['detail']}" for finding in mine + hooks)
    return Check(
        agent.name,
        "doctor",
        passed,
        f"{detail or 'no finding for the agent'}; hook problems: {problems}",
    )


def check_no_deprecation(agent: Agent, first: Run, second: Run) -> Check:
    lines = [line for line in (first.stderr + second.stderr).splitlines() if "codex_hooks" in line]
    detail = f"stderr: {lines[0].strip()!r}" if lines else "no stderr line names codex_hooks"
    return Check(agent.name, "no codex_hooks warning", not lines, detail)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def on_path(name: str) -> Path | None:
    found = shutil.which(name)
    return Path(found) if found else None


def default_orcactl() -> Path | None:
    beside = Path(sys.executable).parent / "orcactl"
    return beside if beside.is_file() else on_path("orcactl")


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for agent in AGENTS:
        parser.add_argument(
            agent.option,
            type=Path,
            metavar="PATH",
            help=f"the {agent.program} binary (default: {agent.program} on PATH; skipped if none)",
        )
    parser.add_argument(
        "--orcactl",
        type=Path,
        metavar="PATH",
        help="orcactl to integrate and inspect with (default: beside this Python, else on PATH)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build the scratch homes in DIR (new or empty) and keep them (default: a temporary "
        "directory, removed at the end)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    args.orcactl = args.orcactl or default_orcactl()
    if args.orcactl is None or not os.access(args.orcactl, os.X_OK):
        parser.error(f"no runnable orcactl ({args.orcactl or 'none found'}); give --orcactl")
    args.binaries = {}
    for agent in AGENTS:
        given = getattr(args, agent.option[2:])
        if given is not None and not os.access(given, os.X_OK):
            parser.error(f"{agent.option} {given}: not a runnable file")
        args.binaries[agent] = given or on_path(agent.program)
    if not any(args.binaries.values()):
        parser.error("no agent given or found on PATH: give --claude or --codex")
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: not empty")
    return args


def report(checks: list[Check], skipped: list[str], scratch: Path | None, as_json: bool) -> None:
    passed = all(check.passed for check in checks)
    if as_json:
        document = {
            "passed": passed,
            "skipped": skipped,
            "scratch": str(scratch) if scratch else None,
            "checks": [asdict(check) for check in checks],
        }
        print(json.dumps(document, indent=2))
        return
    for agent in skipped:
        print(f"SKIP {agent}: not given and not found on PATH")
    for check in checks:
        print(f"{'PASS' if check.passed else 'FAIL'} {check.agent} {check.name}: {check.detail}")
    if scratch is not None:
        print(f"scratch kept in {scratch}")


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    chosen = [(agent, binary) for agent, binary in args.binaries.items() if binary is not None]
    skipped = [agent.name for agent, binary in args.binaries.items() if binary is None]
    root = Path(args.keep or tempfile.mkdtemp(prefix="orca-agents-")).absolute()
    root.mkdir(parents=True, exist_ok=True)
    checks: list[Check] = []
    try:
        for agent, binary in chosen:
            scratch = Scratch(root / agent.name)
            checks.extend(check_agent(agent, binary.absolute(), args.orcactl.absolute(), scratch))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    report(checks, skipped, root if args.keep else None, args.json)
    return EXIT_OK if all(check.passed for check in checks) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
