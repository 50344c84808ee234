"""String literals that code joins into one token, read joined. Pure module: no I/O.

A long token kept in source is often cut to fit the line width and joined again by the language:
Python and C put two literals side by side (`("ghp_…"` on one line, `"…")` on the next), Java
and JavaScript add them (`"sk-…" + "…"`), PHP joins them with a dot. No rule matches either
half, yet the code holds the token whole. The detector also reads such literals joined, and
keeps what it finds there only when it spans a join, so nothing else is read differently.
"""

from __future__ import annotations

from typing import NamedTuple

from orcad.lazy_patterns import lazy_compile
from orcad.secret_invisible import VisibleText

# the end of one literal and the start of the next: a token's characters before and after, the
# same quote, and between them blanks, one line break and at most one `+`, `.` or `\`
# (the quote first, then what stands before it: the engine skips to each quote, where a
# look-behind first is tried at every position)
_JOIN = lazy_compile(
    r"(?P<quote>[\"'])(?<=[A-Za-z0-9_\-+/=.]{4}[\"'])[ \t]*(?:[+.\\][ \t]*)?"
    r"(?:\r?\n[ \t]*(?:[+.][ \t]*)?)?(?P=quote)(?=[A-Za-z0-9_\-+/=]{4})"
)


class JoinedText(NamedTuple):
    reading: VisibleText
    joins: list[int]  # where, in the reading's text, each join is (the first character after)


def joined_literals(text: str) -> JoinedText | None:
    """`text` with each pair of joined literals made one; None when it holds none."""
    if "'" not in text and '"' not in text:
        return None
    positions: list[int] = []
    joins: list[int] = []
    pieces: list[str] = []
    kept_from = 0
    for match in _JOIN.finditer(text):
        positions.extend(range(kept_from, match.start()))
        pieces.append(text[kept_from : match.start()])
        joins.append(len(positions))
        kept_from = match.end()
    if not joins:
        return None
    positions.extend(range(kept_from, len(text)))
    pieces.append(text[kept_from:])
    return JoinedText(VisibleText("".join(pieces), positions), joins)
