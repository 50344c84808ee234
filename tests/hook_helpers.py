"""Running `orcactl hook` as the agents do, and transcripts shaped as the agents write them."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.harness import OrcaEnv

ORCACTL = str(Path(sys.executable).parent / "orcactl")
SCHEMAS = Path(__file__).parent / "schemas" / "codex"


class HookRun:
    def __init__(self, completed: subprocess.CompletedProcess[str]) -> None:
        self.status = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr

    @property
    def answer(self) -> dict[str, Any] | None:
        return json.loads(self.stdout) if self.stdout.strip() else None

    @property
    def context(self) -> str:
        answer = self.answer or {}
        return str((answer.get("hookSpecificOutput") or {}).get("additionalContext") or "")


def run_hook(
    orca: OrcaEnv,
    agent: str,
    event: str,
    payload: Any,
    *,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> HookRun:
    data = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
    completed = subprocess.run(
        [ORCACTL, "hook", agent, event, *extra_args],
        input=data if isinstance(data, str) else data.decode(),
        capture_output=True,
        text=True,
        env={**orca.env, **(env or {})},
        timeout=timeout,
    )
    run = HookRun(completed)
    assert run.status != 2, f"a hook exited with the blocking status: {run.stderr}"
    assert "Traceback" not in run.stderr, run.stderr
    return run


def codex_schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return loaded


class ClaudeTranscript:
    """A Claude Code session transcript (~/.claude/projects/<dir>/<session>.jsonl)."""

    def __init__(self, path: Path, session_id: str, cwd: str) -> None:
        self.path = path
        self.session_id = session_id
        self.cwd = cwd
        self.last: str | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def payload(
        self, event: str, *, permission_mode: str = "default", **extra: Any
    ) -> dict[str, Any]:
        """The hook JSON Claude Code sends for `event` in this transcript's session."""
        return {
            "session_id": self.session_id,
            "transcript_path": str(self.path),
            "cwd": self.cwd,
            "permission_mode": permission_mode,
            "hook_event_name": event,
            **extra,
        }

    def _write(self, entry: dict[str, Any], *, sidechain: bool = False) -> str:
        entry_id = str(uuid.uuid4())
        full = {
            "parentUuid": self.last,
            "isSidechain": sidechain,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": "2.0.31",
            "gitBranch": "main",
            **entry,
            "uuid": entry_id,
            "timestamp": "2026-11-30T23:50:00.000Z",
        }
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(full) + "\n")
        if not sidechain:
            self.last = entry_id
        return entry_id

    def user(self, text: str, **extra: Any) -> str:
        return self._write({"type": "user", "message": {"role": "user", "content": text}, **extra})

    def meta(self, text: str) -> str:
        return self.user(text, isMeta=True)

    def command(self, name: str, output: str) -> None:
        self.user(
            f"<command-name>/{name}</command-name>\n<command-message>{name}</command-message>\n"
            "<command-args></command-args>"
        )
        self.user(f"<local-command-stdout>{output}</local-command-stdout>")

    def _assistant(self, block: dict[str, Any], *, sidechain: bool = False, **extra: Any) -> str:
        message = {
            "id": "msg_01" + uuid.uuid4().hex[:20],
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        entry = {"type": "assistant", "message": message, "requestId": "req_011C", **extra}
        return self._write(entry, sidechain=sidechain)

    def thinking(self, text: str) -> str:
        return self._assistant({"type": "thinking", "thinking": text, "signature": "c2ln"})

    def text(self, text: str) -> str:
        return self._assistant({"type": "text", "text": text})

    def tool_call(self, name: str, tool_input: dict[str, Any], result: str) -> None:
        tool_id = "toolu_01" + uuid.uuid4().hex[:20]
        self._assistant({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
        content = [{"tool_use_id": tool_id, "type": "tool_result", "content": result}]
        self._write(
            {
                "type": "user",
                "message": {"role": "user", "content": content},
                "toolUseResult": {"stdout": result, "stderr": "", "interrupted": False},
            }
        )

    def sidechain(self, prompt: str, answer: str) -> None:
        self._write(
            {"type": "user", "message": {"role": "user", "content": prompt}}, sidechain=True
        )
        self._assistant({"type": "text", "text": answer}, sidechain=True)

    def api_error(self, text: str = "API Error: 529 Overloaded") -> str:
        return self._assistant({"type": "text", "text": text}, isApiErrorMessage=True)

    def append_raw(self, data: bytes) -> None:
        with self.path.open("ab") as handle:
            handle.write(data)


class CodexRollout:
    """A Codex rollout file (~/.codex/sessions/YYYY/MM/DD/rollout-….jsonl)."""

    def __init__(self, path: Path, session_id: str, cwd: str) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._line(
            "session_meta",
            {
                "id": session_id,
                "timestamp": "2026-11-30T23:50:00.000Z",
                "cwd": cwd,
                "originator": "codex_cli_rs",
                "cli_version": "0.63.0",
                "instructions": None,
                "source": "cli",
            },
        )

    def _line(self, kind: str, payload: dict[str, Any]) -> None:
        line = {"timestamp": "2026-11-30T23:50:01.000Z", "type": kind, "payload": payload}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")

    def user_turn(self, turn_id: str, prompt: str) -> None:
        self._line("event_msg", {"type": "task_started", "turn_id": turn_id})
        self._line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "<environment_context>x</environment_context>"}
                ],
            },
        )
        self._line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
        )
        self._line("event_msg", {"type": "user_message", "message": prompt, "images": []})
        self._line("turn_context", {"cwd": "/", "approval_policy": "on-request", "model": "gpt-5"})

    def reasoning(self, text: str) -> None:
        self._line("event_msg", {"type": "agent_reasoning", "text": text})
        self._line(
            "response_item",
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}]},
        )

    def shell(self, command: str, output: str) -> None:
        self._line(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps({"command": [command]}),
                "call_id": "call_1",
            },
        )
        self._line(
            "response_item",
            {"type": "function_call_output", "call_id": "call_1", "output": output},
        )

    def agent(self, text: str) -> None:
        self._line("event_msg", {"type": "agent_message", "message": text})
        self._line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            },
        )

    def error(self, message: str) -> None:
        self._line("event_msg", {"type": "error", "message": message})

    def complete(self, turn_id: str, last: str | None) -> None:
        self._line(
            "event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": last}
        )


# What a program that is not orcad may send back on the socket: retitle the terminal, clear it,
# and a C1 CSI (one byte 0x9b) that starts a colour
TERMINAL_ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m"


def _answer_each_request(listener: socket.socket, answer: Callable[[dict[str, Any]], Any]) -> None:
    """A peer on the socket that answers every request line with `answer(request)`."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return  # the listener was closed: the test is over
        with connection, connection.makefile("rwb") as stream:
            for line in stream:
                stream.write(json.dumps(answer(json.loads(line))).encode() + b"\n")
                stream.flush()


@contextlib.contextmanager
def peer_answering(path: Path, answer: Callable[[dict[str, Any]], Any]) -> Iterator[None]:
    """A program on the socket at `path` that is not orcad: it answers each request line with
    `answer(request)` until the block ends."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        thread = threading.Thread(target=_answer_each_request, args=(listener, answer))
        thread.start()
        try:
            yield
        finally:
            listener.shutdown(socket.SHUT_RDWR)
            thread.join(timeout=10)
            path.unlink()


def error_with_escapes(request: dict[str, Any]) -> dict[str, Any]:
    """An error answer whose message and kind hold TERMINAL_ESCAPES."""
    error = {"code": -32000, "message": TERMINAL_ESCAPES, "data": {"kind": TERMINAL_ESCAPES}}
    return {"jsonrpc": "2.0", "id": request["id"], "error": error}
