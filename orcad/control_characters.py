"""Characters that act on a terminal or reorder what a reader sees, written out visibly. Pure.

Text a model or a client wrote reaches terminals (`orcactl`, `cat`) and agents' context: an
escape sequence there can retitle or clear a terminal or write its clipboard, and a
bidirectional override (U+202E) shows a reader text in another order than a model reads it.
They are written as `\\xNN` (as the Markdown files write C0 and C1 controls) or `\\uNNNN`.
"""

from __future__ import annotations

import re

# The bidirectional formatting characters, as a character class's ranges: marks (U+061C,
# U+200E, U+200F), embeddings and overrides, isolates
BIDI_FORMATTING = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional formatting characters
_CONTROL_CHARACTERS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_FORMATTING}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_control_characters(text: str) -> str:
    """`text` with each control or bidirectional formatting character written as an escape;
    tab and newline are kept."""
    return _CONTROL_CHARACTERS.sub(_escape, text)
