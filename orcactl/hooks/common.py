"""What the Claude Code and Codex hooks share: reading the hook input, the session every hook
process of one agent session joins, permission modes, and the startup-facts block."""

from __future__ import annotations

import hashlib
import os
import re
import time
from typing import TYPE_CHECKING, NamedTuple

from orcactl.hooks import transcript
from orcactl.hooks.wire import HookClient, connect, encode_json
from orcad.control_characters import escape_control_characters
from orcad.frame_tags import STARTUP_TAG_NAME, without_tags

if TYPE_CHECKING:
    from typing import Any

# Agent permission modes (both agents use Claude Code's names) -> orcad mode, interactive.
PERMISSION_MODES: dict[str, tuple[str, bool]] = {
    "default": ("normal", True),
    "acceptEdits": ("normal", True),  # file edits are pre-approved, memory changes are not
    "plan": ("plan", True),
    "dontAsk": ("normal", False),  # headless: orcad denies its memory changes, grants or not
    "bypassPermissions": ("yolo", True),
    "auto": ("auto", True),  # Claude Code's classifier approves: orcad's automatic review
}


# Bytes a hook sends orcad, as the request encodes them, per message and per turn: far above
# what orcad keeps of a turn (its 32 KiB source keeps the first message's ends and the newest
# messages), far below its 8 MiB request bound, which a pasted log could pass (orcad would close
# the connection). Bytes, not characters: an emoji takes 4, a control character 6 (escaped).
SEND_TEXT_MAX_BYTES = 256 * 1024
SEND_TURN_MAX_BYTES = 2 * 1024 * 1024
# protocol.types.CLIENT_ID_MAX_CHARS, named again: importing protocol loads msgspec, about a
# third of a hook's imports, and a hook speaks its JSON with the standard library
CLIENT_ID_MAX_CHARS = 256
# protocol.types.NO_CONTROL_CHARACTERS, the same way round: what orcad refuses in a session id
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f]")
CUT_MARK = "\n[...]\n"


class HookInputError(Exception):
    """The agent sent something that is not this event's hook input."""


class HookContext:
    """One hook run: which agent and event, where orcad is, and the time left to answer."""

    __slots__ = ("agent", "chosen", "deadline", "event", "socket", "start")

    def __init__(  # noqa: PLR0917  (what a hook run is)
        self,
        agent: str,
        event: str,
        socket: str,
        deadline: float,
        start: bool,
        chosen: bool = False,
    ) -> None:
        self.agent = agent  # "claude-code" or "codex": also the prefix of orcad session ids
        self.event = event
        self.socket = socket
        self.deadline = deadline  # time.monotonic() by which the hook must have answered
        self.start = start  # start orcad when none answers
        self.chosen = chosen  # the socket was given (--socket, ORCA_SOCKET), not derived

    def connect(self) -> HookClient:
        return connect(
            self.socket, deadline=self.deadline, start=self.start, elsewhere=not self.chosen
        )

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


def text_field(payload: dict[str, Any], name: str, *, required: bool = True) -> str:
    """A string field of the input; one that is not required may be left out (""), but when
    it is there it must be a string, as both agents document it (null is not "")."""
    if name not in payload and not required:
        return ""
    value = payload.get(name)
    if isinstance(value, str) and (value or not required):
        return value
    if name in payload and not required:
        raise HookInputError(f"the hook input's {name!r} is not a string")
    raise HookInputError(f"the hook input has no {name!r} string")


def forced_continuation(payload: dict[str, Any]) -> bool:
    """Whether a stop hook made the agent go on: both agents document `stop_hook_active` as a
    boolean, so only JSON true counts ("false", a string, must not drop a root turn)."""
    return payload.get("stop_hook_active") is True


class FinalAnswer(NamedTuple):
    """The turn's final answer as the Stop input gives it (`last_assistant_message`)."""

    text: str  # cleaned as transcript text is ("" when the input gives none)
    spaced: str  # its words, one space apart: the transcript's copy is compared by these


def final_answer(payload: dict[str, Any]) -> FinalAnswer:
    final = payload.get("last_assistant_message")
    text = transcript.clean_text(final) if isinstance(final, str) else ""
    return FinalAnswer(text, " ".join(text.split()))


def holds_final(assistant: list[str], final: FinalAnswer) -> bool:
    """Whether a turn's assistant texts, as the transcript holds them, end with its final
    answer (any text will do when the input gives none). Spacing aside: the input's copy may
    join the message's text blocks with blank lines. Only the last texts, as long as the answer,
    are compared: the hook reads the transcript again and again while it waits."""
    if not assistant:
        return False
    if not final.spaced:
        return True
    tail: list[str] = []
    size = -1
    for text in reversed(assistant):
        if words := " ".join(text.split()):
            tail.append(words)
            size += len(words) + 1
            if size >= len(final.spaced):
                break
    return " ".join(reversed(tail)).endswith(final.spaced)


def mode_of(payload: dict[str, Any]) -> tuple[str, bool]:
    return PERMISSION_MODES.get(str(payload.get("permission_mode", "default")), ("normal", True))


def agent_id(agent: str, separator: str, value: str) -> str:
    """orcad's name for an agent's session or turn id: `agent`, `separator` and the id, or the
    id's digest in its place when that would be longer than orcad takes or the id holds a control
    character, which orcad refuses in a session id (agents' are UUIDs)."""
    name = f"{agent}{separator}{value}"
    if len(name) <= CLIENT_ID_MAX_CHARS and not _CONTROL_CHARACTER.search(value):
        return name
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{agent}{separator}{digest}"


def _own_directory() -> str:
    """The hook's own directory, for an input without `cwd` (both agents send one)."""
    try:
        return os.getcwd()
    except OSError:  # removed since the agent started the hook there
        raise HookInputError(
            "the hook input has no 'cwd', and the hook's own directory is gone"
        ) from None


def session_params(context: HookContext, payload: dict[str, Any], *, join: bool) -> dict[str, Any]:
    """session.open for the agent's session: every hook process joins the open session; only a
    new agent process (a startup or resume) opens it anew, which fences the previous one."""
    agent_session = text_field(payload, "session_id")
    cwd = text_field(payload, "cwd", required=False) or _own_directory()
    if not os.path.isabs(cwd):
        raise HookInputError(f"the hook input's cwd {cwd!r} is not an absolute path")
    mode, interactive = mode_of(payload)
    persistent = bool(payload.get("transcript_path"))
    return {
        "cwd": cwd,
        "session_id": agent_id(context.agent, ":", agent_session),
        "history": "persistent" if persistent else "disabled",
        "mode": mode,
        "interactive": interactive,
        "join": join,
    }


# a call orcad went away in the middle of (a restart, a crash) is made again on a new connection
# while the hook has at least this much of its time left, after a pause that doubles from the
# first to the longest (a daemon that keeps closing connections is not hammered)
RESEND_MIN_LEFT_S = 1.0
RESEND_PAUSE_S = 0.1
RESEND_PAUSE_MAX_S = 1.0


def report_to_orcad(
    context: HookContext, payload: dict[str, Any], method: str, params: dict[str, Any]
) -> None:
    """Join the agent's session and make `method`, one orcad answers the same however often it
    is made (turn.completed: the same session, turn and text make one job; session.close). When
    orcad goes away in the middle (the connection reset, closed or broken: `systemctl restart`,
    a crash), it is made again on a new connection, which starts orcad if none answers, while
    the hook has time: a Stop that gave up there lost its turn for good."""
    pause = RESEND_PAUSE_S
    while True:
        try:
            with context.connect() as client:
                _opened, ids = open_session(client, context, payload)
                client.call(method, {**ids, **params})
            return
        except ConnectionError:
            if context.remaining() < RESEND_MIN_LEFT_S + pause:
                raise
            time.sleep(pause)
            pause = min(RESEND_PAUSE_MAX_S, 2 * pause)


def open_session(
    client: HookClient, context: HookContext, payload: dict[str, Any], *, join: bool = True
) -> tuple[dict[str, Any], dict[str, Any]]:
    opened = client.call("session.open", session_params(context, payload, join=join))
    return opened, {"session_id": opened["session_id"], "epoch": opened["epoch"]}


# Claude Code hands the model a hook's context of more than 10,000 characters only as a file's
# path and a short preview: the startup block stays within it, frame included. Claude Code is
# JavaScript, whose string length counts UTF-16 code units: a character beyond U+FFFF (an emoji,
# a mathematical letter, a rarer CJK ideograph) is two of them, so the block is measured so too.
CONTEXT_MAX_CHARS = 10_000
_STARTUP_FRAME_CHARS = 400  # the tags, the first line and both headings, with room to spare
# not "the user asked": in auto or yolo mode an agent's `remember` is kept without asking anyone
_USER_HEADING = "Facts kept with remember (user-wide):\n"
_PROJECT_HEADING = "Facts kept with remember for this project:\n"


def render_startup(startup: dict[str, Any]) -> str:
    """The explicit facts (user.md, the project's memory.md) as one context block of at most
    CONTEXT_MAX_CHARS. A fact (an agent's `remember`, a line edited by hand) cannot close the
    block and go on outside it. orcad hands over up to 8 KiB of each file; when both together
    are over the block's room, each keeps its newest whole facts in half of it (one that needs
    less leaves the rest to the other)."""
    user = without_tags(str(startup.get("user") or "").strip())
    project = without_tags(str(startup.get("project") or "").strip())
    room = CONTEXT_MAX_CHARS - _STARTUP_FRAME_CHARS
    user_room = max(room // 2, room - context_length(project))
    user, user_cut = newest_facts(user, user_room)
    project, project_cut = newest_facts(project, room - context_length(user))
    parts = []
    if user:
        parts.append(_USER_HEADING + user)
    if project:
        parts.append(_PROJECT_HEADING + project)
    if not parts:
        return ""
    cut = startup.get("truncated") or user_cut or project_cut
    note = " (older lines were left out to fit)" if cut else ""
    return (
        f"<{STARTUP_TAG_NAME}>\nExplicit facts kept by orca{note}.\n\n"
        + "\n\n".join(parts)
        + f"\n</{STARTUP_TAG_NAME}>\n"
    )


def context_length(text: str) -> int:
    """The length of `text` as Claude Code measures a hook's context: in UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def newest_facts(text: str, room: int) -> tuple[str, bool]:
    """The newest whole facts of `text` within `room` characters (counted by context_length),
    and whether any were left out. A fact starts at a line that is not indented, as orcad reads
    the files: `remember` writes `- ` list items whose further lines are indented, and a file
    edited by hand may use `* ` or numbered items, headings or plain lines."""
    if context_length(text) <= room:
        return text, False
    start, used = len(text), 0
    while start > 0:  # the longest end of the text that fits
        width = 2 if ord(text[start - 1]) > 0xFFFF else 1
        if used + width > room:
            break
        start, used = start - 1, used + width
    if text[start - 1] != "\n":  # inside a line: the next fact starts after a newline
        newline = text.find("\n", start)
        start = len(text) if newline < 0 else newline + 1
    while start < len(text) and text[start] in " \t\n":  # a fact's further line, or a blank
        newline = text.find("\n", start)
        start = len(text) if newline < 0 else newline + 1
    return text[start:], True


def _part_within(text: str, budget: int, *, end: bool) -> str:
    """The longest start (or end) of `text` whose encoding fits `budget` bytes. A character
    takes 1 to 6 of them, and which varies along the text, so the length is found by halving."""

    def part(count: int) -> str:
        return text[len(text) - count :] if end else text[:count]

    fits, over = 0, min(len(text), budget) + 1  # no more characters than bytes can fit
    while over - fits > 1:
        middle = (fits + over) // 2
        if len(encode_json(part(middle))) <= budget:
            fits = middle
        else:
            over = middle
    return part(fits)


def bounded(text: str) -> str:
    """The text, or its start and its end when its encoding is over SEND_TEXT_MAX_BYTES."""
    if len(text) <= SEND_TEXT_MAX_BYTES and len(encode_json(text)) <= SEND_TEXT_MAX_BYTES:
        return text
    half = (SEND_TEXT_MAX_BYTES - len(encode_json(CUT_MARK))) // 2
    return _part_within(text, half, end=False) + CUT_MARK + _part_within(text, half, end=True)


def bounded_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message bounded; over SEND_TURN_MAX_BYTES in all (each encoded whole), the first and
    the newest that fit (what orcad keeps of a turn anyway)."""
    cut = [{**message, "content": bounded(str(message["content"]))} for message in messages]
    sizes = [len(encode_json(message)) for message in cut]
    if sum(sizes) <= SEND_TURN_MAX_BYTES or len(cut) < 2:
        return cut
    room = SEND_TURN_MAX_BYTES - sizes[0]
    newest: list[dict[str, Any]] = []
    for message, size in zip(reversed(cut[1:]), reversed(sizes[1:]), strict=True):
        room -= size
        if room < 0:
            break
        newest.append(message)
    return [cut[0], *reversed(newest)]


def context_output(event: str, text: str) -> dict[str, Any] | None:
    """The hook's answer that adds `text` to the agent's context (both agents read
    `hookSpecificOutput.additionalContext`), or None for no text. Control characters are
    escaped: what answered on the socket may not be orcad, which escapes what it gives."""
    if not text:
        return None
    shown = escape_control_characters(text)
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": shown}}
