"""Characters no reader sees, looked through by the secret detector. Pure: no I/O.

A token copied from a web page or a chat can carry a zero-width space or a soft hyphen that the
page put in to let a long word wrap. The terminal, the editor and whoever copies the text
again show the token whole, so it is still the secret, yet no rule matches it split. The
detector therefore also reads the text with these characters taken out, and maps what it finds
there back onto the text as given.
"""

from __future__ import annotations

from typing import NamedTuple

from orcad.lazy_patterns import lazy_compile

# soft hyphen, Mongolian vowel separator, zero-width space, non-joiner and joiner, direction
# marks, embeddings and overrides, word joiner and invisible operators, isolates, BOM
_INVISIBLE = lazy_compile(
    "[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


class VisibleText(NamedTuple):
    """A text without its invisible characters, and where each of its characters was."""

    text: str
    positions: list[int]  # in the text as given, of each character kept

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the text as given that `text[start:end]` came from."""
        return self.positions[start], self.positions[end - 1] + 1


def visible_text(text: str) -> VisibleText | None:
    """`text` without the characters no reader sees; None when it holds none (the usual case)."""
    # every such character is outside ASCII: most text is told apart in one pass at memory
    # speed, where the character class was tried at each character (4 ms a megabyte)
    if text.isascii() or _INVISIBLE.search(text) is None:
        return None
    positions: list[int] = []
    kept_from = 0
    for match in _INVISIBLE.finditer(text):
        positions.extend(range(kept_from, match.start()))
        kept_from = match.end()
    positions.extend(range(kept_from, len(text)))
    return VisibleText(_INVISIBLE.sub("", text), positions)
