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


# A string, or an unterminated one running to the end of the line: no quote is scanned twice,
# which a line of `"\"\"\"...` would otherwise cost for each of its quotes (quadratic time).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_OPEN_AS_TWO = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def json_nesting_exceeds(line: bytes, limit: int) -> bool:
    """Does this JSON text nest arrays and objects deeper than `limit`? Checked before decoding,
    since a decoder recurses once per level and a line of a thousand `[` would exhaust it.

    Cheap for ordinary lines (two byte counts); otherwise strings are removed in one linear
    pass, then the depth after each bracket is a running sum (each opener counted 2, closer 0,
    minus its position). Text that is not valid JSON may be judged deeper than it is, and
    shallower only past an unterminated string, where every decoder stops anyway.
    """
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", line).translate(_OPEN_AS_TWO, _NOT_BRACKETS)
    depths = map(operator.sub, itertools.accumulate(brackets), itertools.count(1))
    return max(depths, default=0) > limit
