"""Sans-io newline-delimited JSON framing: bytes in, complete lines out.

The framer never does I/O. Feed it whatever the transport delivered; it returns the complete
lines and keeps the rest. A line longer than the limit yields one `LineTooLong` event, after
which the framer refuses more input: the connection's framing can no longer be trusted.
"""

from __future__ import annotations

import itertools
import operator
import re
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LineTooLong:
    limit: int


class FramingClosed(Exception):
    """Raised when data is fed after a `LineTooLong` event."""


@dataclass(slots=True)
class LineFramer:
    max_line_bytes: int
    _buffer: bytearray = field(default_factory=bytearray)
    _scanned: int = 0  # bytes of _buffer already known to hold no newline
    _broken: bool = False

    def feed(self, data: bytes) -> list[bytes | LineTooLong]:
        """Add received bytes; return every complete line (without its newline) in order."""
        if self._broken:
            raise FramingClosed("the framer stopped after an oversized line")
        self._buffer += data
        events: list[bytes | LineTooLong] = []
        start = 0
        while True:
            newline = self._buffer.find(b"\n", max(start, self._scanned))
            if newline < 0:
                break
            line = bytes(self._buffer[start:newline])
            if len(line) > self.max_line_bytes:
                return self._break(events)
            if line.endswith(b"\r"):
                line = line[:-1]
            if line and not line.isspace():  # blank lines are skipped (no copy to test it)
                events.append(line)
            start = newline + 1
            self._scanned = start
        del self._buffer[:start]
        self._scanned = len(self._buffer)
        if len(self._buffer) > self.max_line_bytes:
            return self._break(events)
        return events

    def _break(self, events: list[bytes | LineTooLong]) -> list[bytes | LineTooLong]:
        self._broken = True
        self._buffer.clear()
        events.append(LineTooLong(self.max_line_bytes))
        return events

    @property
    def pending_bytes(self) -> int:
        """Bytes received that do not yet form a complete line."""
        return len(self._buffer)

    @property
    def pending_text(self) -> bool:
        """Whether the bytes not yet forming a line hold more than blanks (a line of them would
        be skipped)."""
        return bool(self._buffer) and not self._buffer.isspace()


# What a line's nesting depends on: quotes and brackets, `{}` counted as `[]`, once the escaped
# backslashes and quotes inside strings are gone (outside strings, JSON has no backslash).
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_QUOTES_OR_BRACKETS = bytes(set(range(256)) - set(b'"[]{}'))
# a string left of those, or an unterminated one running to the end of the line
_STRING_MARKS = re.compile(rb'"[^"]*(?:"|\Z)')
_BRACKET_RUN = re.compile(rb"\[+|\]+")
_DEPTH_CHUNK = 64 * 1024  # brackets walked at once: bounds the runs held in memory


def json_nesting_exceeds(line: bytes, limit: int) -> bool:
    """Does this JSON text nest arrays and objects deeper than `limit`? Checked before decoding,
    since a decoder recurses once per level and a line of a thousand `[` would exhaust it.

    Cheap for ordinary lines (two byte counts). Otherwise only the brackets outside strings
    are kept, each step a pass over bytes in C: escaped backslashes and quotes go, then every
    byte but quotes and brackets, then the strings. Removing every innermost pair `[]` lowers
    the deepest point by one while it is deeper than where the line ends, so up to `limit`
    such rounds run while they shrink the brackets much, and the depth of what is left is
    walked run by run. Text that is not valid JSON may be judged deeper or shallower than it
    is, but only past its first invalid byte, where every decoder stops.
    """
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    unescaped = line.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = unescaped.translate(_AS_SQUARE, _NOT_QUOTES_OR_BRACKETS).replace(b'""', b"")
    brackets = _STRING_MARKS.sub(b"", marks) if b'"' in marks else marks
    left_open = 2 * brackets.count(b"[") - len(brackets)  # the depth where the line ends
    if left_open > limit:
        return True
    brackets += b"]" * max(left_open, 0)  # closed, so that only innermost pairs are deepest
    rounds = 0
    while rounds < limit:
        shorter = brackets.replace(b"[]", b"")
        removed = len(brackets) - len(shorter)
        if not removed:
            return False  # nothing left above depth 0: the line was at most `rounds` deep
        brackets = shorter
        rounds += 1
        if removed * 4 < len(brackets) + removed:
            break  # few pairs per round: walking the runs left is cheaper
    return _deepest(brackets) > limit - rounds


def _deepest(brackets: bytes) -> int:
    """The greatest depth after a prefix of `brackets` (only `[` and `]`)."""
    deepest = depth = 0
    for start in range(0, len(brackets), _DEPTH_CHUNK):
        chunk = brackets[start : start + _DEPTH_CHUNK]
        runs = list(map(len, _BRACKET_RUN.findall(chunk)))
        if chunk.startswith(b"]"):
            runs.insert(0, 0)  # runs alternate: opening ones at even positions
        rises = map(operator.sub, runs[0::2], itertools.chain((0,), runs[1::2]))
        deepest = max(deepest, *itertools.accumulate(rises, initial=depth))
        depth += 2 * chunk.count(b"[") - len(chunk)
    return deepest
