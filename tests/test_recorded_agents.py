"""The hooks on what the real agents wrote: transcripts, rollouts and hook inputs recorded from
claude 2.1.332 and 2.1.337 and codex-cli 0.171.0 run against a loopback model server (long texts
cut, paths moved under /home/dev), read by the hooks' parsers and sent through real hook
processes to a real daemon."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from orcactl.hooks import transcript
from tests.harness import DaemonProcess, OrcaEnv
from tests.hook_helpers import run_hook

pytestmark = pytest.mark.daemon

RECORDED = Path(__file__).parent / "recorded"
CLAUDE = RECORDED / "claude-code-2.1.332"
CLAUDE_337 = RECORDED / "claude-code-2.1.337"
TOOL_CALL_SESSION = "7b422125-9d89-485c-a187-0a99032a1fa0"  # in CLAUDE_337's hook inputs
CODEX = RECORDED / "codex-0.171.0"
CODEX_TURN = "01a2481b-f2eb-75d1-8154-3bdf5032e16e"
CODEX_PROMPT = (
    "Remember for this project: we use pnpm, never npm, for the web app. "
    "The staging database is db-staging-2."
)


TOOL_CALL_TURNS = [
    (
        "Remember this for the project: we use pnpm, never npm, for the web app. Also "
        "the staging database is db-staging-2.",
        ["OK, noted."],
    ),
    ("which package manager do we use for the web app?", ["OK, noted."]),
    # a Bash call between two texts: its command and output are not the turn's
    (
        "USE_BASH_TOOL: run the hello command",
        ["Calling Bash.", "Bash ran; final answer after the tool."],
    ),
]
# /compact: its summary and the command entries are no prompts
COMPACT_TURNS = [
    ("where is staging?", ["OK, noted."]),
    ("after compact: we deploy through ArgoCD", ["OK, noted."]),
]


@pytest.mark.parametrize(
    ("name", "turns"), [("tool-call-and-resume", TOOL_CALL_TURNS), ("compact", COMPACT_TURNS)]
)
def test_claude_codes_transcripts_give_each_root_turn_once(
    name: str, turns: list[tuple[str, list[str]]]
) -> None:
    read = transcript.claude_turns((CLAUDE / f"{name}.jsonl").read_bytes())
    assert [(turn.prompt, turn.assistant) for turn in read] == turns
    assert [turn.ordinal for turn in read] == list(range(len(turns)))


@pytest.mark.parametrize(
    ("name", "turns"), [("tool-call-and-resume", TOOL_CALL_TURNS), ("compact", COMPACT_TURNS)]
)
def test_claude_code_2_1_337s_transcripts_give_each_root_turn_once_with_its_prompt_id(
    name: str, turns: list[tuple[str, list[str]]]
) -> None:
    # 2.1.337 adds `turnPromptId` to a prompt's entry, `toolResultScreened` to a tool result's
    # and an `api-request-route` entry before each model request
    log = transcript.read_claude((CLAUDE_337 / f"{name}.jsonl").read_bytes())
    assert [(turn.prompt, turn.assistant) for turn in log.turns] == turns
    assert [turn.ordinal for turn in log.turns] == list(range(len(turns)))
    assert all(turn.prompt_id in log.prompt_ids for turn in log.turns)


def _claude_337_inputs(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The recorded hook inputs, their transcripts and cwd moved under `tmp_path`."""
    project = tmp_path / "webapp"
    project.mkdir()
    logs = tmp_path / "projects"
    logs.mkdir()
    inputs: dict[str, dict[str, Any]] = json.loads((CLAUDE_337 / "hook-inputs.json").read_text())
    for name in ("tool-call-and-resume", "compact"):
        shutil.copy(CLAUDE_337 / f"{name}.jsonl", logs / f"{name}.jsonl")
    for payload in inputs.values():
        # the Bash call's session, or the one /compact ran in
        name = "tool-call-and-resume" if payload["session_id"] == TOOL_CALL_SESSION else "compact"
        payload.update(transcript_path=str(logs / f"{name}.jsonl"), cwd=str(project))
    return inputs


def test_a_claude_code_2_1_337_session_is_recalled_captured_and_closed(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # a resumed session's turn with a Bash call: SessionStart carries 2.1.337's resume fields,
    # Stop its `effort`, `background_tasks` and `session_crons`, SessionEnd the last prompt_id
    inputs = _claude_337_inputs(tmp_path)
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        run = run_hook(orca_env, "claude-code", event, inputs[event])
        assert (run.status, run.stderr) == (0, ""), event
    stop = inputs["Stop"]
    [job] = daemon.call("jobs.list", {}).jobs
    assert job.session_id == f"claude-code:{stop['session_id']}"
    # named by the prompt_id UserPromptSubmit and Stop both carry
    assert job.turn_id == transcript.turn_id_for("cc", stop["session_id"], -2, stop["prompt_id"])
    assert not (orca_env.memory_root / "agent-hooks.jsonl").exists()  # no hook problem
    open_before = daemon.call("daemon.status", {}).sessions
    end = run_hook(orca_env, "claude-code", "SessionEnd", inputs["SessionEnd"])
    assert (end.status, end.stderr) == (0, "")
    assert daemon.call("daemon.status", {}).sessions == open_before - 1


def test_claude_code_2_1_337s_compact_keeps_its_session_and_its_subagents_are_not_captured(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # /compact runs summarizing subagents, whose SubagentStop carries the command's prompt_id
    inputs = _claude_337_inputs(tmp_path)
    start = dict(inputs["SessionStart:compact"], source="startup")
    start.pop("prompt_id")
    assert run_hook(orca_env, "claude-code", "SessionStart", start).status == 0
    opened = daemon.call("daemon.status", {}).sessions
    compacted = run_hook(orca_env, "claude-code", "SessionStart", inputs["SessionStart:compact"])
    assert (compacted.status, compacted.stderr) == (0, "")
    sub = run_hook(orca_env, "claude-code", "SubagentStop", inputs["SubagentStop"])
    assert (sub.status, sub.stderr) == (0, "")
    assert daemon.call("daemon.status", {}).sessions == opened  # the same session, still open
    assert daemon.call("jobs.list", {}).jobs == []
    assert not (orca_env.memory_root / "agent-hooks.jsonl").exists()


def test_codex_0_171s_rollout_gives_the_turn() -> None:
    # this Codex writes a turn's messages as item_completed events: read as the older
    # user_message and agent_message, no turn was ever captured
    turn = transcript.codex_turn((CODEX / "rollout.jsonl").read_bytes(), CODEX_TURN)
    assert (turn.ordinal, turn.prompt, turn.assistant) == (0, CODEX_PROMPT, ["OK, noted."])
    assert not (turn.api_error or turn.aborted)


def _codex_inputs(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The recorded hook inputs, their rollout and cwd moved under `tmp_path`."""
    rollout = tmp_path / "sessions" / "rollout.jsonl"
    rollout.parent.mkdir()
    shutil.copy(CODEX / "rollout.jsonl", rollout)
    project = tmp_path / "webapp"
    project.mkdir()
    inputs: dict[str, dict[str, Any]] = json.loads((CODEX / "hook-inputs.json").read_text())
    for payload in inputs.values():
        payload.update(transcript_path=str(rollout), cwd=str(project))
    # SessionEnd was recorded for another session of the run: this one's
    inputs["SessionEnd"]["session_id"] = inputs["Stop"]["session_id"]
    return inputs


def test_a_codex_0_171_session_is_recalled_captured_and_closed(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    inputs = _codex_inputs(tmp_path)
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        run = run_hook(orca_env, "codex", event, inputs[event])
        assert (run.status, run.stderr, run.answer) == (0, "", {})
    [job] = [j for j in daemon.call("jobs.list", {}).jobs if j.session_id.startswith("codex:")]
    assert job.turn_id == f"codex_{CODEX_TURN}"
    assert not (orca_env.memory_root / "agent-hooks.jsonl").exists()  # no hook problem
    open_before = daemon.call("daemon.status", {}).sessions
    end = run_hook(orca_env, "codex", "SessionEnd", inputs["SessionEnd"])
    assert (end.status, end.stderr) == (0, "")
    assert daemon.call("daemon.status", {}).sessions == open_before - 1


def test_a_codex_rollout_of_a_form_not_read_is_a_recorded_problem(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # the turn's start is there and no message orcactl can read: a later Codex that writes
    # messages yet another way must show in doctor, not capture nothing in silence
    inputs = _codex_inputs(tmp_path)
    rollout = Path(inputs["Stop"]["transcript_path"])
    kept = [line for line in rollout.read_text().splitlines() if '"item_completed"' not in line]
    rollout.write_text("\n".join(kept) + "\n")
    run = run_hook(orca_env, "codex", "Stop", inputs["Stop"])
    assert run.status == 0
    assert daemon.call("jobs.list", {}).jobs == []
    problems = (orca_env.memory_root / "agent-hooks.jsonl").read_text()
    assert f"no message of turn {CODEX_TURN}" in problems


def test_a_session_resumed_across_codex_versions_gives_each_turn_in_its_form() -> None:
    # begun on a Codex that wrote user_message/agent_message, resumed on 0.171: a first
    # reading of the older form alone found the newer turn empty, and it was never captured
    older = [
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": "turn-old"}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "we use yarn"}},
        {"type": "event_msg", "payload": {"type": "agent_message", "message": "Noted."}},
    ]
    data = (
        "".join(json.dumps(line) + "\n" for line in older).encode()
        + (CODEX / "rollout.jsonl").read_bytes()
    )
    old = transcript.codex_turn(data, "turn-old")
    new = transcript.codex_turn(data, CODEX_TURN)
    assert (old.prompt, old.assistant) == ("we use yarn", ["Noted."])
    assert (new.prompt, new.assistant) == (CODEX_PROMPT, ["OK, noted."])


def test_an_aborted_turn_of_the_newer_form_after_older_ones_keeps_its_messages() -> None:
    lines = [
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t1"}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "old prompt"}},
        {"type": "event_msg", "payload": {"type": "agent_message", "message": "old answer"}},
        {"type": "event_msg", "payload": {"type": "task_started", "turn_id": "t2"}},
        {
            "type": "event_msg",
            "payload": {
                "type": "item_completed",
                "turn_id": "t2",
                "item": {"type": "UserMessage", "content": [{"type": "text", "text": "new"}]},
            },
        },
        {
            "type": "event_msg",
            "payload": {
                "type": "item_completed",
                "turn_id": "t2",
                "item": {"type": "AgentMessage", "content": [{"type": "Text", "text": "partial"}]},
            },
        },
        {"type": "event_msg", "payload": {"type": "turn_aborted", "turn_id": "t2"}},
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    turn = transcript.codex_turn(data, "t2")
    assert (turn.prompt, turn.assistant, turn.aborted) == ("new", ["partial"], True)
