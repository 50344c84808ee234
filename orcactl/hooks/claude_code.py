"""`orcactl hook claude-code EVENT`: Claude Code's hooks in, Claude Code's hook output out.

Claude Code 2.1 gives both hooks of one prompt its `prompt_id`, which names the turn: the recall
at UserPromptSubmit and the capture at Stop name the same turn, and a repeated Stop reports the
same turn again (the daemon answers it as a duplicate). Without one (earlier versions), the
turn's id is derived from the transcript's entry for the user's prompt (its position among the
session's root prompts and its text), which names one turn too, but for a prompt submitted
before its session's transcript exists: that one gets an id of its own at submit.
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING

from orcactl.hooks import transcript
from orcactl.hooks.common import (
    HookContext,
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

AGENT = "claude-code"
TURN_PREFIX = "cc"
# The Stop hook may run a moment before the turn's last assistant entry is flushed.
FINAL_ENTRY_WAIT_S = 1.0
FINAL_ENTRY_POLL_S = 0.1
# ... and before the session's transcript exists (tens of milliseconds); with persistence off
# (`claude -p --no-session-persistence`, `cleanupPeriodDays: 0`) it never will, and every
# Stop waits this long
TRANSCRIPT_APPEAR_WAIT_S = 0.5


def session_start(payload: dict[str, Any], context: HookContext) -> Answer:
    # startup/resume: a new agent process (fences the old one); clear/compact: the same one
    join = payload.get("source") in ("clear", "compact")
    with context.connect() as client:
        opened, _ids = open_session(client, context, payload, join=join)
    return context_output("SessionStart", render_startup(opened.get("startup") or {}))


def _turns(path: str | None) -> list[transcript.Turn]:
    return transcript.claude_turns(transcript.read_transcript(path))


def _submitted_turn_id(turns: list[transcript.Turn], session_id: str, prompt: str) -> str:
    """The id Stop will derive for the prompt being submitted, from the transcript's turns."""
    ordinal = transcript.claude_submit_ordinal(turns, prompt)
    if ordinal < len(turns):
        return transcript.turn_id_for(TURN_PREFIX, session_id, ordinal, turns[ordinal].prompt)
    return transcript.turn_id_for(TURN_PREFIX, session_id, ordinal, transcript.clean_text(prompt))


def _prompt_turn_id(payload: dict[str, Any], session_id: str) -> str | None:
    """The turn named by the input's `prompt_id`, which Claude Code (2.1) gives both
    UserPromptSubmit and Stop of one prompt: no transcript needs reading, and a prompt asked
    again is another turn."""
    prompt_id = payload.get("prompt_id")
    if not isinstance(prompt_id, str) or not prompt_id:
        return None
    return transcript.turn_id_for(TURN_PREFIX, session_id, -2, prompt_id)


def prompt_submit(payload: dict[str, Any], context: HookContext) -> Answer:
    prompt = text_field(payload, "prompt", required=False)
    session_id = text_field(payload, "session_id")
    try:
        named = _prompt_turn_id(payload, session_id)
        turns = [] if named is not None else _turns(payload.get("transcript_path"))
    except transcript.TranscriptProblem:
        # No transcript (none kept, missing, over the bound, malformed) to place the prompt in:
        # named by its text alone, a repeated prompt ("continue") would be taken for the earlier
        # turn and given that turn's snapshot, so the turn gets a name of its own. Stop names it
        # from the transcript, if there is one by then.
        turn_id = transcript.turn_id_for(TURN_PREFIX, session_id, -1, secrets.token_hex(16))
    else:
        turn_id = named or _submitted_turn_id(turns, session_id, prompt)
    with context.connect() as client:
        _opened, ids = open_session(client, context, payload)
        result = client.call("recall", {**ids, "turn_id": turn_id, "prompt": bounded(prompt)})
    return context_output("UserPromptSubmit", str(result.get("context") or ""))


def _final_turn(payload: dict[str, Any], context: HookContext) -> transcript.Turn | None:
    """The turn that just ended, once the transcript holds it with its final answer. Claude
    Code writes the transcript while its Stop hook runs: it creates a session's transcript
    some tens of milliseconds after the first prompt's Stop hook has started (claude 2.1.332),
    and may write a turn's entries, its last assistant entry among them, after that too. So
    the transcript is read again, for at most a second, until it holds the turn the input
    names (`_named_turn`) ending with the answer the input names (`last_assistant_message`;
    without one, any assistant text). A final answer the transcript never shows comes from
    the input, so the answer is never left out; a turn it never shows is TurnMissing, and a
    transcript that is not there after half a second TranscriptMissing."""
    path = payload.get("transcript_path")
    final = final_answer(payload)
    started = time.monotonic()
    deadline = started + min(FINAL_ENTRY_WAIT_S, max(0.0, context.remaining() / 4))
    appeared_by = min(deadline, started + TRANSCRIPT_APPEAR_WAIT_S)
    while True:
        try:
            log = transcript.read_claude(transcript.read_transcript(path))
            turn = _named_turn(log, payload.get("prompt_id"))
        except (transcript.PartialLine, transcript.TurnMissing):
            # the agent is still writing it: read it again shortly
            if time.monotonic() >= deadline:
                raise
            time.sleep(FINAL_ENTRY_POLL_S)
            continue
        except transcript.TranscriptMissing:  # not created yet, or never
            if time.monotonic() >= appeared_by:
                raise
            time.sleep(FINAL_ENTRY_POLL_S)
            continue
        if turn is None or holds_final(turn.assistant, final) or turn.api_error:
            return turn
        if time.monotonic() >= deadline:
            if final.text:
                turn.assistant.append(final.text)
            return turn
        time.sleep(FINAL_ENTRY_POLL_S)


def _named_turn(log: transcript.ClaudeLog, prompt_id: object) -> transcript.Turn | None:
    """The turn the input's `prompt_id` names, or None when that prompt is no turn (a slash
    command); without one, or in a transcript that records none (earlier versions), its last
    turn. TurnMissing when the transcript does not hold it (yet)."""
    if isinstance(prompt_id, str) and prompt_id and log.prompt_ids:
        if prompt_id not in log.prompt_ids:
            raise transcript.TurnMissing(f"the transcript does not hold prompt {prompt_id}")
        return next((turn for turn in log.turns if turn.prompt_id == prompt_id), None)
    if not log.turns:
        raise transcript.TurnMissing("the transcript holds no prompt")
    return log.turns[-1]


def turn_report(
    payload: dict[str, Any], context: HookContext, *, failed: bool = False
) -> dict[str, Any]:
    """turn.completed's params (without session ids) for the Stop that just came in."""
    session_id = text_field(payload, "session_id")
    report: dict[str, Any] = {
        "root": not forced_continuation(payload),
        "subagent": bool(payload.get("agent_id")) or context.event == "SubagentStop",
        "outcome": "failed" if failed else "succeeded",
        "verifier": "none",
        "transcript_committed": True,
        "messages": [],
    }
    if report["subagent"]:  # never captured: its answer is not the session transcript's to wait for
        report["turn_id"] = _prompt_turn_id(payload, session_id) or transcript.turn_id_for(
            TURN_PREFIX, session_id, -1, "subagent"
        )
        return report
    try:
        turn = _final_turn(payload, context)
    except transcript.TranscriptProblem as problem:
        if payload.get("transcript_path") and not isinstance(
            problem, (transcript.TranscriptMissing, transcript.TurnMissing)
        ):
            record_failure(AGENT, context.event, "transcript", problem.reason)
        report.update(
            turn_id=_prompt_turn_id(payload, session_id)
            or transcript.turn_id_for(TURN_PREFIX, session_id, -1, problem.reason),
            transcript_committed=False,
        )
        return report
    if turn is None:
        report["turn_id"] = _prompt_turn_id(payload, session_id) or transcript.turn_id_for(
            TURN_PREFIX, session_id, -1, ""
        )
        return report
    report["turn_id"] = _prompt_turn_id(payload, session_id) or transcript.turn_id_for(
        TURN_PREFIX, session_id, turn.ordinal, turn.prompt
    )
    if turn.api_error:
        report["outcome"] = "failed"
    if not turn.assistant:
        report["transcript_committed"] = False  # the final assistant entry is not recorded
    report["messages"] = bounded_messages(
        [{"role": "user", "content": turn.prompt}]
        + [{"role": "assistant", "content": text} for text in turn.assistant]
    )
    return report


def _report(payload: dict[str, Any], context: HookContext, *, failed: bool) -> Answer:
    report_to_orcad(
        context, payload, "turn.completed", turn_report(payload, context, failed=failed)
    )
    return None


def stop(payload: dict[str, Any], context: HookContext) -> Answer:
    return _report(payload, context, failed=False)


def stop_failure(payload: dict[str, Any], context: HookContext) -> Answer:
    return _report(payload, context, failed=True)


def session_end(payload: dict[str, Any], context: HookContext) -> Answer:
    report_to_orcad(context, payload, "session.close", {})
    return None


EVENTS: dict[str, Callable[[dict[str, Any], HookContext], Answer]] = {
    "SessionStart": session_start,
    "UserPromptSubmit": prompt_submit,
    "Stop": stop,
    "SubagentStop": stop,
    "StopFailure": stop_failure,
    "SessionEnd": session_end,
}


def empty_answer(event: str) -> Answer:
    return None  # no output and exit 0: Claude Code goes on as if the hook were not there
