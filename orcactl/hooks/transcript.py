"""Reading an agent's transcript for the turn that just ended: only the root user's text and the
assistant's text (spec: What Is Captured), never tool calls, tool results, thinking, system
reminders, command output or a subagent's (sidechain) entries.

Parsing is pure (bytes in, a `Turn` or a `TranscriptProblem` out); `read_transcript` is the one
function that touches the file, and it bounds what it reads. A transcript that is missing,
partial (a line still being written), over the bound or malformed gives a problem with a reason,
never an exception and never a guessed turn.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, NamedTuple

from orcad.regular_files import NotARegularFile, open_regular_file

if TYPE_CHECKING:
    from typing import Any

TRANSCRIPT_MAX_BYTES = 64 * 1024 * 1024  # a longer transcript is not parsed by a hook

_REMINDER_OPEN = "<system-reminder>"
_REMINDER_CLOSE = "</system-reminder>"
# Entries Claude Code writes for slash commands and their output: not a prompt, not captured.
_COMMAND_PREFIXES = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
)
# Context Codex injects as user messages in its rollout: not the user's words.
_CODEX_INJECTED_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md")


class TranscriptProblem(Exception):
    """The transcript cannot tell us the turn; `reason` says why (recorded, never raised out)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TranscriptMissing(TranscriptProblem):
    """No file at the transcript's path: not written yet (Claude Code creates it after the
    session's first prompt is submitted), or never (`claude -p --no-session-persistence`)."""


class TurnMissing(TranscriptProblem):
    """The transcript does not hold the prompt the hook input names (not written yet)."""


class EmptyTurn(TranscriptProblem):
    """The turn's start is there and no message of it (yet): a moment later it may be, else
    the rollout is written in a form this reader does not know."""


class PartialLine(TranscriptProblem):
    """The last line is still being written: the same read a moment later may succeed."""


class Turn:
    """One root turn as the transcript records it."""

    __slots__ = ("aborted", "api_error", "assistant", "ordinal", "prompt", "prompt_id")

    def __init__(self, prompt: str, ordinal: int, prompt_id: str | None = None) -> None:
        self.prompt = prompt  # the root user's text for the turn
        self.ordinal = ordinal  # how many root prompts came before it in the session
        self.prompt_id = prompt_id  # the agent's name for the prompt, where it gives one
        self.assistant: list[str] = []  # the assistant's text, in order
        self.api_error = False  # the turn ended on an API error the agent recorded
        self.aborted = False  # the user interrupted the turn


def read_transcript(path: object) -> bytes:
    """The transcript's bytes; TranscriptProblem when there is none or it is over the bound."""
    if not path:
        raise TranscriptProblem("the session has no persistent transcript")
    if not isinstance(path, str):  # an integer would be opened as a file descriptor
        raise TranscriptProblem("the hook input's transcript_path is not a string")
    over = f"transcript {path} is over {TRANSCRIPT_MAX_BYTES // (1024 * 1024)} MiB"
    try:
        with open_regular_file(path) as handle:
            if os.fstat(handle.fileno()).st_size > TRANSCRIPT_MAX_BYTES:
                raise TranscriptProblem(over)
            data = handle.read(TRANSCRIPT_MAX_BYTES + 1)
    except FileNotFoundError:
        raise TranscriptMissing(f"transcript {path} does not exist") from None
    except NotARegularFile:  # a directory, FIFO, socket or device
        raise TranscriptProblem(f"transcript {path} is not a regular file") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise TranscriptProblem(f"transcript {path} cannot be read: {reason}") from None
    if len(data) > TRANSCRIPT_MAX_BYTES:
        raise TranscriptProblem(over)
    return data


def _entries(data: bytes, wanted: tuple[bytes, ...]) -> list[dict[str, Any]]:
    """Parsed JSONL entries, skipping lines that cannot matter (none of `wanted` in them).

    A line that does not parse, including a last line still being written, is a problem: the
    turn's final record may be the line we cannot read.
    """
    entries: list[dict[str, Any]] = []
    lines = data.split(b"\n")
    unterminated = len(lines)  # a last line without its newline may still be being written
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if number != unterminated and not any(token in line for token in wanted):
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            if number == unterminated:
                raise PartialLine("the transcript's last line is not complete JSON") from None
            where = "last line" if number >= len(lines) - 1 else f"line {number}"
            raise TranscriptProblem(f"the transcript's {where} is not complete JSON") from None
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def clean_text(text: str) -> str:
    """Text without the system reminders an agent inserts, trimmed: each opening tag to the
    first closing tag after it. One pass (a pattern with a lazy `.*?` reads on to the end for
    every opening tag left unclosed: a pasted prompt of them took seconds, in every later hook
    of the session, which reads the whole transcript)."""
    if _REMINDER_OPEN not in text:
        return text.strip()
    kept: list[str] = []
    position = 0
    while (start := text.find(_REMINDER_OPEN, position)) >= 0:
        end = text.find(_REMINDER_CLOSE, start + len(_REMINDER_OPEN))
        if end < 0:  # no closing tag after it, nor after any later one: the rest stays
            break
        kept.append(text[position:start])
        position = end + len(_REMINDER_CLOSE)
    kept.append(text[position:])
    return "".join(kept).strip()


def turn_id_for(agent: str, session_id: str, ordinal: int, prompt: str) -> str:
    """A turn id that the submit hook and the stop hook derive alike for the same prompt."""
    key = f"{agent}\0{session_id}\0{ordinal}\0{prompt}".encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(key).hexdigest()  # a lone surrogate (a broken emoji) still hashes
    return f"{agent}_{digest[:32]}"


# --- Claude Code ---------------------------------------------------------------------------


def _claude_prompt(entry: dict[str, Any]) -> str | None:
    """The user's own text in a root user entry, or None for anything else."""
    if entry.get("type") != "user" or entry.get("isSidechain") or entry.get("isMeta"):
        return None
    if entry.get("isCompactSummary"):
        return None
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        blocks = [b for b in content if isinstance(b, dict)]
        if any(b.get("type") == "tool_result" for b in blocks):
            return None
        text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    else:
        return None
    text = clean_text(text)
    if not text or text.startswith(_COMMAND_PREFIXES):
        return None
    return text


def _claude_assistant_text(entry: dict[str, Any]) -> str:
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return clean_text(content)
    if not isinstance(content, list):
        return ""
    texts = [
        str(block.get("text", ""))
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    ]
    return clean_text("\n".join(texts))


class ClaudeLog(NamedTuple):
    turns: list[Turn]  # every root turn, oldest first
    # every prompt id the root user entries carry (Claude Code 2.1 gives each entry of a
    # prompt its `promptId`): a turn's, and a slash command's, which is no turn
    prompt_ids: frozenset[str]


def claude_turns(data: bytes) -> list[Turn]:
    """Every root turn of a Claude Code transcript, oldest first."""
    return read_claude(data).turns


def read_claude(data: bytes) -> ClaudeLog:
    """A Claude Code transcript's root turns and the prompt ids it records."""
    turns: list[Turn] = []
    prompt_ids: set[str] = set()
    for entry in _entries(data, (b'"user"', b'"assistant"')):
        if entry.get("isSidechain"):
            continue  # a subagent's conversation
        prompt_id = entry.get("promptId") if entry.get("type") == "user" else None
        if not isinstance(prompt_id, str) or not prompt_id:
            prompt_id = None
        else:
            prompt_ids.add(prompt_id)
        prompt = _claude_prompt(entry)
        if prompt is not None:
            turns.append(Turn(prompt=prompt, ordinal=len(turns), prompt_id=prompt_id))
            continue
        if entry.get("type") != "assistant" or not turns:
            continue
        if entry.get("isApiErrorMessage"):
            turns[-1].api_error = True
            continue
        text = _claude_assistant_text(entry)
        if text:
            turns[-1].assistant.append(text)
    return ClaudeLog(turns, frozenset(prompt_ids))


def claude_submit_ordinal(turns: list[Turn], prompt: str) -> int:
    """The ordinal of the prompt being submitted: the last transcript turn when the agent has
    already written this prompt and nothing after it, else the next one."""
    if turns and turns[-1].prompt == clean_text(prompt) and not turns[-1].assistant:
        return turns[-1].ordinal
    return len(turns)


# --- Codex ---------------------------------------------------------------------------------


def _codex_text(payload: dict[str, Any]) -> str:
    return clean_text(str(payload.get("message") or ""))


# Codex 0.171 writes a turn's messages as `item_completed` events (`UserMessage`,
# `AgentMessage`, their text in `content`), where earlier versions wrote `user_message` and
# `agent_message` events with a `message`
_CODEX_ITEMS = {"UserMessage": "user_message", "AgentMessage": "agent_message"}
_CODEX_MESSAGES = frozenset(_CODEX_ITEMS.values())


def _codex_item_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        part["text"]
        for part in content
        if isinstance(part, dict)
        and str(part.get("type")).lower() == "text"
        and isinstance(part.get("text"), str)
    )


def _codex_events(data: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rollout's events twice: with the messages as the older events give them (the
    `item_completed` ones left out), and as the item events give them, in the older events'
    form (the older ones left out). A session begun on an older Codex and resumed on a newer
    one holds both forms, each turn one of them; neither reading gives a message twice."""
    entries = [
        e.get("payload")
        for e in _entries(data, (b'"event_msg"',))
        if e.get("type") == "event_msg" and isinstance(e.get("payload"), dict)
    ]
    events: list[dict[str, Any]] = [p for p in entries if isinstance(p, dict)]
    older = [event for event in events if event.get("type") != "item_completed"]
    items: list[dict[str, Any]] = []
    for event in events:
        item = event.get("item")
        if event.get("type") in _CODEX_MESSAGES:
            continue
        if event.get("type") != "item_completed" or not isinstance(item, dict):
            items.append(event)
        elif (kind := _CODEX_ITEMS.get(str(item.get("type")))) is not None:
            items.append({"type": kind, "message": _codex_item_text(item)})
    return older, items


def codex_turn(data: bytes, turn_id: str) -> Turn:
    """The turn `turn_id` of a Codex rollout: the user messages and agent messages after its
    start (its `task_started` event, else the last user message), as the older events give
    them, else as the item events do."""
    older, items = _codex_events(data)
    try:
        turn = _codex_turn(older, turn_id)
    except TranscriptProblem:
        return _codex_turn(items, turn_id)
    if turn.prompt or turn.assistant:
        return turn
    try:  # an aborted or failed turn of the newer form: its start, no message of the older
        newer = _codex_turn(items, turn_id)
    except TranscriptProblem:
        return turn
    return newer if newer.prompt or newer.assistant else turn


def _codex_turn(events: list[dict[str, Any]], turn_id: str) -> Turn:
    start = None
    for index, event in enumerate(events):
        if event.get("type") == "task_started" and event.get("turn_id") == turn_id:
            start = index
    prompts_before = 0
    if start is None:
        users = [i for i, e in enumerate(events) if e.get("type") == "user_message"]
        if not users:
            raise TranscriptProblem(f"the transcript holds no user message for turn {turn_id}")
        start = users[-1]
    for event in events[:start]:
        if event.get("type") == "user_message":
            prompts_before += 1
    turn = Turn(prompt="", ordinal=prompts_before)
    prompts: list[str] = []
    for event in events[start:]:
        kind = event.get("type")
        if kind == "task_started" and event.get("turn_id") not in (None, turn_id):
            break  # the next turn began
        if kind == "user_message":
            text = _codex_text(event)
            if text and not text.startswith(_CODEX_INJECTED_PREFIXES):
                prompts.append(text)
        elif kind == "agent_message":
            text = _codex_text(event)
            if text:
                turn.assistant.append(text)
        elif kind == "error":
            turn.api_error = True
        elif kind == "turn_aborted":
            turn.aborted = True
    turn.prompt = "\n\n".join(prompts)
    if not (turn.prompt or turn.assistant or turn.api_error or turn.aborted):
        raise EmptyTurn(f"the transcript holds no message of turn {turn_id}")
    return turn
