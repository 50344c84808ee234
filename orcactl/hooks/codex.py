"""`orcactl hook codex EVENT`: Codex's hooks in, Codex's hook output out.

Codex names its turns (`turn_id`), sends `last_assistant_message` and `transcript_path` (its
rollout file), and marks a subagent's input with `agent_id`. Every answer validates against the
output schema Codex publishes for the event (copies under tests/schemas/codex/).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from orcactl.hooks import transcript
from orcactl.hooks.common import (
    HookContext,
    agent_id,
    bounded,
    bounded_messages,
    context_output,
    final_answer,
    forced_continuation,
    holds_final,
    open_session,
    render_startup,
    report_to_orcad,
    text_field,
)
from orcactl.hooks.failures import record_failure

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Answer = dict[str, Any] | None

AGENT = "codex"
FINAL_ENTRY_WAIT_S = 1.0
FINAL_ENTRY_POLL_S = 0.1


def _turn_id(payload: dict[str, Any]) -> str:
    return agent_id(AGENT, "_", text_field(payload, "turn_id"))


def session_start(payload: dict[str, Any], context: HookContext) -> Answer:
    join = payload.get("source") == "clear"  # startup/resume: a new Codex process
    with context.connect() as client:
        opened, _ids = open_session(client, context, payload, join=join)
    return context_output("SessionStart", render_startup(opened.get("startup") or {})) or {}


def prompt_submit(payload: dict[str, Any], context: HookContext) -> Answer:
    prompt = text_field(payload, "prompt", required=False)
    turn_id = _turn_id(payload)
    with context.connect() as client:
        _opened, ids = open_session(client, context, payload)
        result = client.call("recall", {**ids, "turn_id": turn_id, "prompt": bounded(prompt)})
    return context_output("UserPromptSubmit", str(result.get("context") or "")) or {}


def _final_turn(payload: dict[str, Any], context: HookContext) -> transcript.Turn:
    """The turn as the rollout holds it once its final answer is there: Codex may run the hook
    before the rollout has the last agent message, while it holds earlier ones (a note before a
    tool call), so the rollout is read again until its last agent message is the one the input
    names, for at most a second. A turn whose rollout never shows that answer but holds others
    gets it from the input, so the answer is never left out."""
    turn_id = text_field(payload, "turn_id")
    final = final_answer(payload)
    deadline = time.monotonic() + min(FINAL_ENTRY_WAIT_S, max(0.0, context.remaining() / 4))
    while True:
        try:
            turn = transcript.codex_turn(
                transcript.read_transcript(payload.get("transcript_path")), turn_id
            )
        except (transcript.PartialLine, transcript.EmptyTurn):  # read it again shortly
            if time.monotonic() >= deadline:
                raise
            time.sleep(FINAL_ENTRY_POLL_S)
            continue
        if holds_final(turn.assistant, final) or turn.api_error or turn.aborted:
            return turn
        if time.monotonic() >= deadline:
            if turn.assistant and final.text:
                turn.assistant.append(final.text)
            return turn
        time.sleep(FINAL_ENTRY_POLL_S)


def turn_report(payload: dict[str, Any], context: HookContext, *, failed: bool) -> dict[str, Any]:
    report: dict[str, Any] = {
        "turn_id": _turn_id(payload),
        "root": not forced_continuation(payload),
        "subagent": bool(payload.get("agent_id")) or context.event == "SubagentStop",
        "outcome": "failed" if failed else "succeeded",
        "verifier": "none",
        "transcript_committed": True,
        "messages": [],
    }
    if report["subagent"]:  # never captured: its answer is not the session rollout's to wait for
        return report
    try:
        turn = _final_turn(payload, context)
    except transcript.TranscriptProblem as problem:
        if payload.get("transcript_path"):
            record_failure(AGENT, context.event, "transcript", problem.reason)
        report["transcript_committed"] = False
        return report
    if turn.api_error:
        report["outcome"] = "failed"
    elif turn.aborted:
        report["outcome"] = "cancelled"
    if not turn.assistant:
        report["transcript_committed"] = False  # the final agent message is not in the rollout
    messages = [{"role": "user", "content": turn.prompt}] if turn.prompt else []
    messages += [{"role": "assistant", "content": text} for text in turn.assistant]
    report["messages"] = bounded_messages(messages)
    return report


def _report(payload: dict[str, Any], context: HookContext, *, failed: bool) -> Answer:
    report_to_orcad(
        context, payload, "turn.completed", turn_report(payload, context, failed=failed)
    )
    return {}


def stop(payload: dict[str, Any], context: HookContext) -> Answer:
    return _report(payload, context, failed=False)


def stop_failure(payload: dict[str, Any], context: HookContext) -> Answer:
    return _report(payload, context, failed=True)


def session_end(payload: dict[str, Any], context: HookContext) -> Answer:
    report_to_orcad(context, payload, "session.close", {})
    return {}


EVENTS: dict[str, Callable[[dict[str, Any], HookContext], Answer]] = {
    "SessionStart": session_start,
    "SessionEnd": session_end,
    "UserPromptSubmit": prompt_submit,
    "Stop": stop,
    "SubagentStop": stop,
    "StopFailure": stop_failure,
}


def empty_answer(event: str) -> Answer:
    return {}  # valid for every Codex hook output schema: no context, no decision
