"""`orcactl hook codex EVENT` in real processes against a real daemon. Every fixture validates
against the input schema Codex publishes for its event and every answer against the output
schema (copies in tests/schemas/codex/, source named in its README)."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from orcactl.hooks import codex, transcript
from orcactl.hooks.common import HookContext, agent_id
from protocol.types import CLIENT_ID_MAX_CHARS
from tests.harness import DaemonProcess, OrcaEnv
from tests.hook_helpers import ORCACTL, CodexRollout, HookRun, codex_schema, run_hook

pytestmark = pytest.mark.daemon

SESSION = "0199a213-81c0-7800-8aa1-bbab2a035a53"
SCHEMA_NAMES = {
    "UserPromptSubmit": "user-prompt-submit",
    "Stop": "stop",
    "SubagentStop": "subagent-stop",
    "SessionStart": "session-start",
}


def _rollout(tmp_path: Path) -> CodexRollout:
    project = tmp_path / "repo"
    project.mkdir(exist_ok=True)
    path = tmp_path / "codex" / "sessions" / "2026" / "11" / "30" / f"rollout-{SESSION}.jsonl"
    return CodexRollout(path, SESSION, str(project))


def _payload(log: CodexRollout, event: str, **extra: Any) -> dict[str, Any]:
    payload = {
        "session_id": SESSION,
        "transcript_path": str(log.path),
        "cwd": str(log.path.parents[5] / "repo"),
        "hook_event_name": event,
        "model": "gpt-5-codex",
        "permission_mode": "default",
        **extra,
    }
    if event != "SessionStart":  # Codex publishes no input schema for SessionStart
        jsonschema.validate(payload, codex_schema(f"{SCHEMA_NAMES[event]}.command.input"))
    return payload


def _hook(
    orca: OrcaEnv, event: str, payload: dict[str, Any], command: str | None = None
) -> HookRun:
    run = run_hook(orca, "codex", command or event, payload)
    assert run.status == 0, run.stderr
    assert run.answer is not None
    jsonschema.validate(run.answer, codex_schema(f"{SCHEMA_NAMES[event]}.command.output"))
    return run


def _jobs(daemon: DaemonProcess) -> list[Any]:
    jobs = daemon.call("jobs.list", {}).jobs
    return [job for job in jobs if job.session_id == f"codex:{SESSION}"]


def test_the_turn_is_read_from_its_task_started_event(tmp_path: Path) -> None:
    log = _rollout(tmp_path)
    log.user_turn("t1", "first")
    log.agent("first answer")
    log.user_turn("t2", "Remember that we use pnpm.")
    log.reasoning("thinking about lockfiles")
    log.shell("cat package.json", '{"private": true}')
    log.agent("Noted: pnpm.")
    turn = transcript.codex_turn(log.path.read_bytes(), "t2")
    assert (turn.prompt, turn.assistant, turn.ordinal) == (
        "Remember that we use pnpm.",
        ["Noted: pnpm."],
        1,
    )
    first = transcript.codex_turn(log.path.read_bytes(), "t1")
    assert (first.prompt, first.assistant) == ("first", ["first answer"])


def _stop_context() -> HookContext:
    return HookContext("codex", "Stop", "/nonexistent.sock", time.monotonic() + 10, start=False)


def test_stop_waits_for_the_final_answer_behind_an_earlier_note(tmp_path: Path) -> None:
    # Codex may run Stop before its rollout holds the last agent message, while it already
    # holds a note the agent wrote before a tool call: the answer must not be left out.
    log = _rollout(tmp_path)
    log.user_turn("t1", "Remember that staging deploys go through ArgoCD.")
    log.agent("Let me look at the workflows first.")
    log.shell("ls .github/workflows", "ci.yml")
    final = "Noted: staging deploys go through ArgoCD."
    payload = _payload(
        log, "Stop", turn_id="t1", stop_hook_active=False, last_assistant_message=final
    )
    writer = threading.Timer(0.3, log.agent, args=(final,))
    writer.start()
    try:
        report = codex.turn_report(payload, _stop_context(), failed=False)
    finally:
        writer.join()
    assert [m["content"] for m in report["messages"]] == [
        "Remember that staging deploys go through ArgoCD.",
        "Let me look at the workflows first.",
        final,
    ]
    assert report["transcript_committed"] is True


def test_a_final_answer_the_rollout_never_shows_comes_from_the_input(tmp_path: Path) -> None:
    log = _rollout(tmp_path)
    log.user_turn("t1", "We always squash merge.")
    log.agent("Checking the repository settings.")
    payload = _payload(
        log, "Stop", turn_id="t1", stop_hook_active=False, last_assistant_message="Understood."
    )
    started = time.monotonic()
    report = codex.turn_report(payload, _stop_context(), failed=False)
    assert time.monotonic() - started < codex.FINAL_ENTRY_WAIT_S + 1.0
    assert [m["content"] for m in report["messages"]][-2:] == [
        "Checking the repository settings.",
        "Understood.",
    ]


def test_a_subagents_stop_is_reported_without_waiting_on_the_rollout(tmp_path: Path) -> None:
    # the session's rollout never ends with a subagent's answer: reading it waited a second
    # for a turn that is not captured anyway
    log = _rollout(tmp_path)
    log.user_turn("t1", "Find where staging is deployed.")
    log.agent("Asking a subagent to look.")
    payload = _payload(
        log,
        "SubagentStop",
        turn_id="t1",
        stop_hook_active=False,
        last_assistant_message="deploy/argocd/app.yaml",
        agent_id="agent-1",
        agent_type="explorer",
        agent_transcript_path=None,
    )
    context = HookContext(
        "codex", "SubagentStop", "/nonexistent.sock", time.monotonic() + 10, start=False
    )
    started = time.monotonic()
    report = codex.turn_report(payload, context, failed=False)
    assert time.monotonic() - started < codex.FINAL_ENTRY_WAIT_S / 2
    assert (report["subagent"], report["turn_id"], report["messages"]) == (True, "codex_t1", [])


@pytest.mark.slow
def test_a_simulated_codex_session(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    log = _rollout(tmp_path)
    project = str(tmp_path / "repo")
    with daemon.client() as client:
        opened = client.call("session.open", {"cwd": project})
        ids = {"session_id": opened.session_id, "epoch": opened.epoch}
        client.call(
            "remember", {**ids, "text": "Release checks use make release-check", "scope": "project"}
        )

    start = _hook(orca_env, "SessionStart", _payload(log, "SessionStart", source="startup"))
    assert "Release checks use make release-check" in start.context

    log.user_turn("turn-1", "Set up CI. Remember that our staging deploys go through ArgoCD.")
    submit = _hook(
        orca_env,
        "UserPromptSubmit",
        _payload(
            log,
            "UserPromptSubmit",
            turn_id="turn-1",
            prompt="Set up CI. Remember that our staging deploys go through ArgoCD.",
        ),
    )
    assert submit.answer == {}
    log.shell("ls .github/workflows", "ci.yml")
    log.agent("CI is set up; staging deploys go through ArgoCD.")
    stop_payload = _payload(
        log,
        "Stop",
        turn_id="turn-1",
        stop_hook_active=False,
        last_assistant_message="CI is set up; staging deploys go through ArgoCD.",
    )
    _hook(orca_env, "Stop", stop_payload)
    _hook(orca_env, "Stop", stop_payload)  # repeated: the same job
    jobs = _jobs(daemon)
    assert [job.turn_id for job in jobs] == ["codex_turn-1"]

    prompt2 = "how do staging deploys work?"
    log.user_turn("turn-2", prompt2)
    submit2 = _hook(
        orca_env,
        "UserPromptSubmit",
        _payload(log, "UserPromptSubmit", turn_id="turn-2", prompt=prompt2),
    )
    assert "ArgoCD" in submit2.context
    again = _hook(
        orca_env,
        "UserPromptSubmit",
        _payload(log, "UserPromptSubmit", turn_id="turn-2", prompt=prompt2),
    )
    assert again.context == submit2.context  # the snapshot holds for the same turn
    log.agent("Through ArgoCD.")
    _hook(
        orca_env,
        "Stop",
        _payload(
            log,
            "Stop",
            turn_id="turn-2",
            stop_hook_active=True,
            last_assistant_message="Through ArgoCD.",
        ),
    )
    assert len(_jobs(daemon)) == 1  # a stop-hook continuation is not a root turn

    subagent = _payload(
        log,
        "SubagentStop",
        turn_id="turn-2",
        stop_hook_active=False,
        last_assistant_message="x",
        agent_id="agent-1",
        agent_type="explorer",
        agent_transcript_path=None,
    )
    _hook(orca_env, "SubagentStop", subagent, command="Stop")
    assert len(_jobs(daemon)) == 1

    log.user_turn("turn-3", "We always squash merge.")
    log.error("stream disconnected before completion")
    _hook(
        orca_env,
        "Stop",
        _payload(
            log, "Stop", turn_id="turn-3", stop_hook_active=False, last_assistant_message=None
        ),
    )
    assert len(_jobs(daemon)) == 1  # a failed turn

    _hook(orca_env, "SessionStart", _payload(log, "SessionStart", source="resume"))
    log.user_turn("turn-4", "Note that our convention is to squash merge every pull request.")
    log.agent("Understood.")
    _hook(
        orca_env,
        "Stop",
        _payload(
            log,
            "Stop",
            turn_id="turn-4",
            stop_hook_active=False,
            last_assistant_message="Understood.",
        ),
    )
    assert sorted(job.turn_id for job in _jobs(daemon)) == ["codex_turn-1", "codex_turn-4"]
    assert not (orca_env.memory_root / "agent-hooks.jsonl").exists()


def test_no_transcript_means_no_capture_and_no_failure(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    log = _rollout(tmp_path)
    payload = _payload(
        log, "Stop", turn_id="t1", stop_hook_active=False, last_assistant_message="done"
    )
    payload["transcript_path"] = None
    _hook(orca_env, "Stop", payload)
    assert _jobs(daemon) == []
    assert not (orca_env.memory_root / "agent-hooks.jsonl").exists()


def test_a_stop_hook_active_that_is_not_a_boolean_is_not_a_continuation(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # Codex's schema makes stop_hook_active a boolean: only true marks a forced continuation
    log = _rollout(tmp_path)
    log.user_turn("turn-1", "Remember that our staging deploys go through ArgoCD.")
    log.agent("Noted: staging deploys go through ArgoCD.")
    payload = _payload(
        log, "Stop", turn_id="turn-1", stop_hook_active=False, last_assistant_message="Noted."
    )
    _hook(orca_env, "Stop", {**payload, "stop_hook_active": "false"})
    assert [job.turn_id for job in _jobs(daemon)] == ["codex_turn-1"]


def test_daemon_down_answers_an_empty_valid_payload(tmp_path: Path, orca_env: OrcaEnv) -> None:
    log = _rollout(tmp_path)
    payload = _payload(log, "UserPromptSubmit", turn_id="t1", prompt="hi")
    run = run_hook(orca_env, "codex", "UserPromptSubmit", payload, extra_args=("--no-start",))
    assert run.status == 0 and run.answer == {}
    jsonschema.validate(run.answer, codex_schema("user-prompt-submit.command.output"))
    assert len(run.stderr.strip().splitlines()) == 1
    failure = json.loads((orca_env.memory_root / "agent-hooks.jsonl").read_text().splitlines()[-1])
    assert (failure["agent"], failure["kind"]) == ("codex", "unreachable")


def test_a_turn_id_longer_than_orcad_takes_is_named_by_its_digest(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    log = _rollout(tmp_path)
    turn = "turn-" + "9" * 300  # Codex's are UUIDs; orcad takes at most 256 characters
    prompt = "Remember that our staging deploys go through ArgoCD."
    log.user_turn(turn, prompt)
    submit = _hook(
        orca_env, "UserPromptSubmit", _payload(log, "UserPromptSubmit", turn_id=turn, prompt=prompt)
    )
    assert submit.answer == {}  # recalled (nothing yet), not failed
    assert not (orca_env.memory_root / "agent-hooks.jsonl").exists()
    log.agent("Noted: staging deploys go through ArgoCD.")
    stop = _payload(
        log,
        "Stop",
        turn_id=turn,
        stop_hook_active=False,
        last_assistant_message="Noted: staging deploys go through ArgoCD.",
    )
    _hook(orca_env, "Stop", stop)
    [job] = _jobs(daemon)
    assert job.turn_id == "codex_" + hashlib.sha256(turn.encode()).hexdigest()[:32]


def test_an_agent_id_too_long_for_orcad_is_named_by_its_digest() -> None:
    uuid = "0199a213-81c0-7800-8aa1-bbab2a035a53"
    assert agent_id("codex", ":", uuid) == f"codex:{uuid}"
    fits = "x" * (CLIENT_ID_MAX_CHARS - len("codex:"))
    assert agent_id("codex", ":", fits) == f"codex:{fits}"
    longer = fits + "x"
    digest = hashlib.sha256(longer.encode()).hexdigest()[:32]
    assert agent_id("codex", ":", longer) == f"codex:{digest}"
    assert agent_id("codex", ":", "\ud800" * 300).startswith("codex:")  # a lone surrogate


def test_an_agent_id_with_a_control_character_is_named_by_its_digest() -> None:
    # orcad refuses a session id holding one: the hook's session would not open
    for value in ("0199a213\n81c0", "0199a213-81c0\n", "\x1b[2J0199a213", "0199\x85a213"):
        digest = hashlib.sha256(value.encode()).hexdigest()[:32]
        assert agent_id("codex", ":", value) == f"codex:{digest}"


# `hook codex Stop` as `integrate` writes it (straight to the hook runner), and with a global
# option before `hook` (through orcactl's full command line)
HOOK_COMMANDS = [["hook", "codex", "Stop", "--no-start"], ["--no-start", "hook", "codex", "Stop"]]


@pytest.mark.parametrize("words", HOOK_COMMANDS, ids=["direct", "full"])
@pytest.mark.parametrize("closed", ["<&-", ">&-", "2>&-", "<&- >&- 2>&-", "2>/dev/full"])
def test_a_hook_started_with_a_closed_stream_ends_without_a_traceback(
    tmp_path: Path, orca_env: OrcaEnv, closed: str, words: list[str]
) -> None:
    payload = json.dumps({"session_id": "s", "turn_id": "t", "cwd": str(tmp_path)})
    command = shlex.join([ORCACTL, *words])
    result = subprocess.run(
        ["bash", "-c", f"{command} {closed}"],
        input=payload,
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert result.returncode in (0, 1)  # a failure to flush a closed stream exits 120
    redirections = closed.split()
    if ">&-" not in redirections:
        # what Codex reads is its answer alone: the line orcad's absence gets goes nowhere else
        assert json.loads(result.stdout) == {}
        if "<&-" not in redirections:
            assert result.returncode == 0


def test_a_fifo_at_the_daemon_log_leaves_the_hook_its_answer(
    tmp_path: Path, orca_env: OrcaEnv
) -> None:
    orca_env.home.mkdir(exist_ok=True)
    os.mkfifo(orca_env.home / "orcad.log")  # starting orcad would wait to open it for good
    payload = {"session_id": "s", "turn_id": "t", "cwd": str(tmp_path), "prompt": "hi"}
    run = run_hook(orca_env, "codex", "UserPromptSubmit", payload, timeout=6)
    assert (run.status, run.answer) == (0, {})
    assert "its log" in run.stderr and "is not a regular file" in run.stderr
