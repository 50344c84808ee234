"""Tokens a terminal or an email wrapped across two lines. Pure module: no I/O.

A token pasted from a terminal 80 columns wide, or from an email wrapped at 72, is cut by a line
break at a fixed column; joined again it still works, yet no rule matches either half. Each line
break between two runs of token characters, long enough together to hold a token, is read
joined by the token formats, and a match that crosses the break is a secret. A format of one
length cannot take in the next line's word; one whose length varies could, so its match counts
only when the line before the break holds no whole token of that format from the same start.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from orcad.secret_formats import Finder

# A line break with two token characters or more after it and ten on one side (a token of 20
# characters or more cut in two has them); the side before is checked after. One literal opens
# the pattern, and the cheapest test follows it: most line breaks are passed over in C.
_R = r"[A-Za-z0-9_\-.+/=]"
_BREAK = re.compile(rf"\n(?={_R}{{2}})(?:(?={_R}{{10}})|(?<={_R}{{10}}\n)|(?<={_R}{{10}}\r\n))")
_RUN_AFTER = re.compile(_R + r"{1,256}+")
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
    pieces = [piece for cut in _breaks(text) if (piece := _joined(text, *cut)) is not None]
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


def _joined(text: str, cut: int, resumed: int) -> _Joined | None:
    """The run of token characters before the break (and the character before it, for a
    word's boundary) and the run after it (and the character after); None inside a block of
    lines of one width that runs fill (base64, hex): a token's rest is a line of its own."""
    run_after = _RUN_AFTER.match(text, resumed)
    if run_after is None or cut == 0 or text[cut - 1] not in _TOKEN_CHARACTERS:
        return None
    line = text.rfind("\n", max(0, cut - _REACH), cut) + 1
    tail = run_after.end()
    if tail - resumed == cut - line and text[tail : tail + 1] in ("\n", "\r"):
        return None
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
