"""The extraction source of one turn: user and assistant messages, redacted, bounded, digested.

Format (the heuristic provider parses exactly this): each kept message is a block
`user: <content>` or `assistant: <content>`, blocks separated by one blank line. System and tool
messages are dropped, and so are messages with no text. A line inside a message that begins like
a role label (`user:`/`assistant:`) gets one leading space, so that an assistant message quoting
"user: ..." cannot pose as the user.

Secrets are redacted in every message before anything is cut, so a cut can never expose half
of a secret that redaction would have caught whole; the piece a cut leaves is redacted again on
its own, in case the cut removed what made a value read as harmless.

Bound (spec: 32 KiB of UTF-8). When the whole text fits it is kept unchanged. Otherwise:

1. the first user message is kept (at least FIRST_USER_HEAD_BYTES of that block, more when the
   later messages leave room), because it usually states the task and the standing
   instructions that later messages refer to; when it must be cut, its start and its end are
   kept (a quarter of its room goes to the end), since a long pasted prompt often ends with
   the request itself ("... and remember that we use pnpm");
2. then the newest messages, as many whole ones as fit, because a turn's conclusion (what was
   decided, confirmed or corrected) is at its end;
3. the oldest of those newest messages may be cut at its start to fill the remaining room.

Cuts fall on a character boundary, and on whitespace when there is some nearby, so no word (and
no token that could be part of a credential) is split. A cut is marked with `[...]`. Messages
between the first user message and the kept newest ones are dropped.

Pure module.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable

import msgspec

from orcad import limits
from orcad.secrets import contains_secret, redact

KEPT_ROLES = frozenset({"user", "assistant"})
BLOCK_SEPARATOR = "\n\n"
CUT_MARK = "[...]"
FIRST_USER_HEAD_BYTES = 4096  # the first user message's room when the source is cut
FIRST_USER_END_SHARE = 4  # a cut first user message keeps its end in 1/4 of that room
WORD_SEARCH_CHARS = 256  # how far a cut may move to land on whitespace
_SEPARATOR_BYTES = len(BLOCK_SEPARATOR)
_ROLE_LABEL_LINE = re.compile(r"\n(?=(?:user|assistant):)")  # starts with a literal: fast
# where a block of a built source starts: its role labels stand nowhere else at a line's start
_BLOCK_START = re.compile(r"(?:\A|(?<=\n\n))(user|assistant): ")


class SourceBlock(msgspec.Struct, frozen=True):
    role: str
    content: str  # redacted and stripped

    def render(self) -> str:
        return f"{self.role}: {self.content}"


class BuiltSource(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    digest: str  # sha256 hex of `text` as UTF-8
    size: int  # bytes of `text` as UTF-8
    truncated: bool
    messages_kept: int  # blocks present whole or in part


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def prepare_blocks(
    messages: Iterable[tuple[str, str]], max_bytes: int = limits.SOURCE_MAX_BYTES
) -> list[SourceBlock]:
    """User and assistant messages with text, redacted, role-label lines neutralised; of a turn
    with more of them than a source of `max_bytes` could ever hold (`_within_reach`), only
    those that `bound_blocks` may keep, so that a turn of a million tiny messages costs the
    redaction of a few thousand."""
    texts = [
        (role, text)
        for role, content in messages
        if role in KEPT_ROLES and (text := content.strip())
    ]
    return [
        SourceBlock(role, _ROLE_LABEL_LINE.sub("\n ", redact(text)))
        for role, text in _within_reach(texts, max_bytes)
    ]


def _within_reach(texts: list[tuple[str, str]], max_bytes: int) -> list[tuple[str, str]]:
    """`texts` whole, or when the messages after the first user one are more than `most` (a
    quarter of `max_bytes`, and 2), that message and the newest `most` of them. A block takes at
    least 8 bytes with its separator (`user: ` and one character), so that many make a source
    over the bound, which `bound_blocks` fills from the first user message and from the newest
    ones down, stopping at the first that does not fit (at most an eighth of `max_bytes`, and
    2): it never reaches the older ones, and the source is the same without them."""
    most = max_bytes // 4 + 2
    first_user = next((i for i, (role, _) in enumerate(texts) if role == "user"), None)
    head = [] if first_user is None else [texts[first_user]]
    tail_start = 0 if first_user is None else first_user + 1
    if len(texts) - tail_start <= most:
        return texts
    return head + texts[len(texts) - most :]


def build_source(
    messages: Iterable[tuple[str, str]], max_bytes: int = limits.SOURCE_MAX_BYTES
) -> BuiltSource | None:
    """The bounded redacted source of a turn's (role, content) messages; None when no user or
    assistant message has text (reason `no_content`)."""
    blocks = prepare_blocks(messages, max_bytes)
    if not blocks:
        return None
    text = BLOCK_SEPARATOR.join(block.render() for block in blocks)
    encoded = text.encode("utf-8")  # once: the size test, the digest and the size use it
    truncated = len(encoded) > max_bytes
    kept = len(blocks)
    if truncated:
        text, kept = bound_blocks(blocks, max_bytes)
        encoded = text.encode("utf-8")
    return BuiltSource(
        text=text,
        digest=hashlib.sha256(encoded).hexdigest(),
        size=len(encoded),
        truncated=truncated,
        messages_kept=kept,
    )


def bound_blocks(blocks: list[SourceBlock], max_bytes: int) -> tuple[str, int]:
    """The first user message's start plus the newest messages, within `max_bytes`."""
    rendered = [block.render() for block in blocks]
    sizes = [utf8_size(text) for text in rendered]
    first_user = next((i for i, block in enumerate(blocks) if block.role == "user"), None)
    tail_start = 0 if first_user is None else first_user + 1
    pieces: list[str] = []
    used = 0
    if first_user is not None:
        later = sum(sizes[tail_start:]) + _SEPARATOR_BYTES * (len(blocks) - tail_start)
        head_budget = min(max_bytes, max(FIRST_USER_HEAD_BYTES, max_bytes - later))
        pieces.append(_cut_keeping_start(blocks[first_user], rendered[first_user], head_budget))
        used = utf8_size(pieces[0])
    newest: list[str] = []
    for index in range(len(blocks) - 1, tail_start - 1, -1):
        separator = _SEPARATOR_BYTES if (pieces or newest) else 0
        room = max_bytes - used - separator
        if sizes[index] <= room:
            newest.append(rendered[index])
            used += separator + sizes[index]
            continue
        partial = _cut_keeping_end(blocks[index], room)
        if partial is not None:
            newest.append(partial)
        break
    pieces.extend(reversed(newest))
    return BLOCK_SEPARATOR.join(pieces), len(pieces)


def bound_again(text: str, max_bytes: int = limits.SOURCE_MAX_BYTES) -> str:
    """A built source edited since (a forget put a mark longer than a short fact in its place),
    within `max_bytes` again: unchanged when it fits; otherwise its blocks are bounded as
    `build_source` bounds a turn's messages (the first user message's start, then the newest
    messages whole, the oldest text giving way). A text that is not made of labelled blocks
    keeps its end, marked as cut."""
    if utf8_size(text) <= max_bytes:
        return text
    starts = list(_BLOCK_START.finditer(text))
    if not starts or starts[0].start() != 0:
        kept = keep_end(text, max_bytes - utf8_size(CUT_MARK) - 1)
        return f"{CUT_MARK} {kept}" if kept else ""
    ends = [match.start() - _SEPARATOR_BYTES for match in starts[1:]] + [len(text)]
    blocks = [
        SourceBlock(match.group(1), text[match.end() : end])
        for match, end in zip(starts, ends, strict=True)
    ]
    return bound_blocks(blocks, max_bytes)[0]


def _cut_keeping_start(block: SourceBlock, rendered: str, budget: int) -> str:
    """The block within `budget`: its start, a cut mark, and its end (a quarter of the room)."""
    if utf8_size(rendered) <= budget:
        return rendered
    prefix = f"{block.role}: "
    middle = f" {CUT_MARK} "
    room = budget - utf8_size(prefix) - len(middle)
    end = _redacted_again(keep_end(block.content, room // FIRST_USER_END_SHARE), keep_end)
    start = _redacted_again(keep_start(block.content, room - utf8_size(end)), keep_start)
    return prefix + start + middle + end


def _cut_keeping_end(block: SourceBlock, room: int) -> str | None:
    prefix = f"{block.role}: {CUT_MARK} "
    available = room - utf8_size(prefix)
    if available <= 0:
        return None
    kept = _redacted_again(keep_end(block.content, available), keep_end)
    return prefix + kept if kept else None


def _redacted_again(piece: str, keep: Callable[[str, int], str]) -> str:
    """A piece cut from a redacted message, redacted on its own: the cut may have removed the
    context that made a rule read a value as harmless. Only the piece is read, never the
    labelled source around it, whose `user:` labels would read as context of their own. A
    marker is longer than what it hides: `keep` bounds the result to the piece's size."""
    if not contains_secret(piece):
        return piece
    return keep(redact(piece), utf8_size(piece))


def keep_start(text: str, max_bytes: int) -> str:
    """The longest start of `text` within `max_bytes`, ending before whitespace when possible."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    piece = encoded[: max(max_bytes, 0)].decode("utf-8", "ignore")
    if piece and not text[len(piece)].isspace():
        window_start = max(0, len(piece) - WORD_SEARCH_CHARS)
        for index in range(len(piece) - 1, window_start - 1, -1):
            if piece[index].isspace():
                piece = piece[:index]
                break
    return piece.rstrip()


def keep_end(text: str, max_bytes: int) -> str:
    """The longest end of `text` within `max_bytes`, starting after whitespace when possible."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    if max_bytes <= 0:
        return ""
    piece = encoded[-max_bytes:].decode("utf-8", "ignore")
    cut = len(text) - len(piece)
    if piece and not text[cut - 1].isspace():
        for index in range(min(len(piece), WORD_SEARCH_CHARS)):
            if piece[index].isspace():
                piece = piece[index:]
                break
    return piece.lstrip()


def derive_job_id(session_id: str, turn_id: str, digest: str) -> str:
    """Jobs are idempotent by session, turn and redacted-source digest: the id is their hash,
    so the same report finds the same job file, before or after a restart."""
    key = msgspec.json.encode([session_id, turn_id, digest])
    return "job_" + hashlib.sha256(key).hexdigest()[:32]
