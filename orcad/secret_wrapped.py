"""Tokens a terminal or an email wrapped across two lines or more. Pure module: no I/O.

A token pasted from a terminal 80 columns wide, or from an email wrapped at 72, is cut by a line
break at a fixed column; joined again it still works, yet no rule matches either half. Each line
break between two runs of token characters, long enough together to hold a token, is read
joined by the token formats, and a match that crosses the break is a secret. A format of one
length cannot take in the next line's word; one whose length varies could, so its match counts
only when the line before the break holds no whole token of that format from the same start.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from orcad.lazy_patterns import lazy_compile
from orcad.secret_formats import Finder

# A line break with two token characters or more after it and ten on one side (a token of 20
# characters or more cut in two has them); the side before is checked after. One literal opens
# the pattern, and the cheapest test follows it: most line breaks are passed over in C.
_R = r"[A-Za-z0-9_\-.+/=]"
_BREAK = lazy_compile(rf"\n(?={_R}{{2}})(?:(?={_R}{{10}})|(?<={_R}{{10}}\n)|(?<={_R}{{10}}\r\n))")
_RUN_AFTER = lazy_compile(_R + r"{1,256}+")
_TOKEN_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.+/="
)
_REACH = 256  # longer than any token of one length
_SHORTEST_TOKEN = 20  # LTAI and 20 characters: no format read across a break is shorter


class WrappableRule(NamedTuple):
    """A token format, as read across a line break."""

    name: str
    triggers: tuple[str, ...]
    finder: Finder
    fixed_length: bool


def find_wrapped_tokens(
    text: str, wrappable: Sequence[WrappableRule]
) -> Iterator[tuple[str, int, int]]:
    """(rule, start, end) of each token a line break cuts in two, in the text as given."""
    if "\n" not in text:
        return
    pieces: list[_Joined] = []
    blocks: list[_Block] = []
    for cut in _breaks(text):
        piece = _joined(text, *cut)
        if isinstance(piece, _Block):
            blocks.append(piece)
        elif piece is not None:
            pieces.append(piece)
    yield from _find_tokens_over_lines(text, blocks, wrappable)
    if not pieces:
        return
    everything = " ".join(piece.text for piece in pieces)  # each literal looked for once
    rules = [rule for rule in wrappable if any(t in everything for t in rule.triggers)]
    for piece in pieces:
        for rule in rules:
            if not any(trigger in piece.text for trigger in rule.triggers):
                continue
            for start, end in rule.finder(piece.text, piece.text.lower()):
                if (
                    piece.join > start
                    and end > piece.join
                    and (rule.fixed_length or not _whole_on_its_line(text, rule, piece, start))
                ):
                    yield rule.name, piece.before + start, piece.resumed + end - piece.join


class _Joined(NamedTuple):
    """The runs of token characters either side of a line break, joined."""

    text: str
    before: int  # where the run before the break starts in the text as given (less one)
    join: int  # where the break was, in `text`
    resumed: int  # where the run after the break starts in the text as given


def _breaks(text: str) -> Iterator[tuple[int, int]]:
    """Where each line break with token characters either side cuts the text, and resumes."""
    for line_break in _BREAK.finditer(text):
        newline = line_break.start()
        yield newline - (text[newline - 1] == "\r"), newline + 1


class _Block(NamedTuple):
    """A line break before a line of the same width that a run fills (base64, hex, or the
    middle of a token over three lines or more)."""

    cut: int
    resumed: int


def _joined(text: str, cut: int, resumed: int) -> _Joined | _Block | None:
    """The run of token characters before the break (and the character before it, for a
    word's boundary) and the run after it (and the character after); a _Block inside a block
    of lines of one width that runs fill (base64, hex): a token's rest is a line of its own."""
    run_after = _RUN_AFTER.match(text, resumed)
    if run_after is None or cut == 0 or text[cut - 1] not in _TOKEN_CHARACTERS:
        return None
    # the line is read back _REACH characters at most: a longer one, found from the text's
    # start, was copied whole at each break (2 MB of 300-character lines took 3.6 s)
    reach = max(0, cut - _REACH)
    newline = text.rfind("\n", reach, cut)
    line = newline + 1 if newline >= 0 else reach
    tail = run_after.end()
    whole_line = newline >= 0 or reach == 0
    if whole_line and tail - resumed == cut - line and text[tail : tail + 1] in ("\n", "\r"):
        return _Block(cut, resumed)
    run_before = _RUN_AFTER.match(text[line:cut][::-1])  # the line read backwards, in C
    head = cut - (run_before.end() if run_before is not None else 0)
    if (cut - head) + (tail - resumed) < _SHORTEST_TOKEN:
        return None  # too short together for any token ("-----BEGIN" after a key's END line)
    before = max(head - 1, 0)
    return _Joined(text[before:cut] + text[resumed : tail + 1], before, cut - before, resumed)


def _whole_on_its_line(text: str, rule: WrappableRule, piece: _Joined, at: int) -> bool:
    """The line before the break already holds a whole token of `rule` from `at`: the next
    line's run is another word, not the rest of it."""
    line = text[piece.before : piece.before + piece.join + 1]
    return any(start == at for start, _ in rule.finder(line, line.lower()))


# ----------------------------------------------------------- over three lines or more
# A token longer than two lines' width (github_pat_ is 93 characters, an Anthropic key 108)
# fills the middle lines whole, as a block of base64 or hex does, which is why such a block is
# left alone above. It is read joined when the token starts on the line before the block and
# ends on the line after it: a block's lines hold no token's start (`ghp_`, `sk-ant-`), and a
# match must cross every break.
_LONGEST_WRAPPED = 1_024  # of the joined lines: longer than any token a rule bounds
_LONGEST_TRIGGER = 32  # longer than any trigger (github_pat_, sk-ant-api03-, ...)


class _Lines(NamedTuple):
    """The run before a block's first break, the block's whole lines and the last line's run,
    joined, with where each line's part starts in the text as given."""

    text: str
    starts: list[int]  # in the text as given, of each part
    offsets: list[int]  # in `text`, of each part


def _lines_from(text: str, cut: int, resumed: int) -> _Lines | None:
    """The lines a token cut at `cut` runs on over, when two breaks or more cut it."""
    line = text.rfind("\n", max(0, cut - _REACH), cut) + 1
    width = cut - line
    run_before = _RUN_AFTER.match(text[line:cut][::-1])
    head = cut - (run_before.end() if run_before is not None else 0)
    parts = [text[head:cut]]
    starts, offsets, length = [head], [0], cut - head
    while length < _LONGEST_WRAPPED:
        run = _RUN_AFTER.match(text, resumed)
        if run is None:
            break
        parts.append(run.group())
        starts.append(resumed)
        offsets.append(length)
        length += run.end() - resumed
        after = _next_break(text, run.end())
        if run.end() - resumed != width or after is None:
            break  # the last line: shorter, or followed by more than a line break
        resumed = after
    if len(parts) < 3:
        return None
    return _Lines("".join(parts), starts, offsets)


def _next_break(text: str, at: int) -> int | None:
    """Where the next line starts, when a line break is at `at`."""
    if text.startswith("\n", at):
        return at + 1
    if text.startswith("\r\n", at):
        return at + 2
    return None


def _find_tokens_over_lines(
    text: str, blocks: list[_Block], wrappable: Sequence[WrappableRule]
) -> Iterator[tuple[str, int, int]]:
    """(rule, start, end) of each token three lines or more hold, from the breaks before
    blocks of lines of one width."""
    passed = 0  # a block already read is not read again from a break inside it
    for cut, resumed in blocks:
        if resumed < passed:
            continue
        lines = _lines_from(text, cut, resumed)
        if lines is None:
            continue
        passed = lines.starts[-1]
        first = lines.text[: lines.offsets[1] + _LONGEST_TRIGGER]  # a trigger the break cut
        for rule in wrappable:
            if not any(trigger in first for trigger in rule.triggers):
                continue
            for start, end in rule.finder(lines.text, lines.text.lower()):
                if start < lines.offsets[1] and end > lines.offsets[-1]:
                    yield (
                        rule.name,
                        lines.starts[0] + start,
                        lines.starts[-1] + end - lines.offsets[-1],
                    )
