"""The hooks on what the real agents wrote: transcripts, rollouts and hook inputs recorded from
claude 2.1.332 and codex-cli 0.171.0 run against a loopback model server (long texts cut, paths
moved under /home/dev), read by the hooks' parsers and sent through real hook processes to a
real daemon."""

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
CODEX = RECORDED / "codex-0.171.0"
CODEX_TURN = "01a2481b-f2eb-75d1-8154-3bdf5032e16e"
CODEX_PROMPT = (
    "Remember for this project: we use pnpm, never npm, for the web app. "
    "The staging database is db-staging-2."
)


@pytest.mark.parametrize(
    ("name", "turns"),
    [
        (
            "tool-call-and-resume",
            [
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
            ],
        ),
        # /compact: its summary and the command entries are no prompts
        (
            "compact",
            [
                ("where is staging?", ["OK, noted."]),
                ("after compact: we deploy through ArgoCD", ["OK, noted."]),
            ],
        ),
    ],
)
def test_claude_codes_transcripts_give_each_root_turn_once(
    name: str, turns: list[tuple[str, list[str]]]
) -> None:
    read = transcript.claude_turns((CLAUDE / f"{name}.jsonl").read_bytes())
    assert [(turn.prompt, turn.assistant) for turn in read] == turns
    assert [turn.ordinal for turn in read] == list(range(len(turns)))


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
