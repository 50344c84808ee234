"""Characters that act on a terminal or reorder what a reader sees, written out visibly. Pure.

Text a model or a client wrote reaches terminals (`orcactl`, `cat`) and agents' context: an
escape sequence there can retitle or clear a terminal or write its clipboard, and a
bidirectional override (U+202E) shows a reader text in another order than a model reads it.
Unicode tag characters (U+E0000 to U+E007F) spell ASCII text no reader sees but a model reads
("ASCII smuggling"): a fact could carry hidden orders past the user who reviews it. They are
written as `\\xNN` (as the Markdown files write C0 and C1 controls), `\\uNNNN` or `\\UNNNNNNNN`.
"""

from __future__ import annotations

import re
import unicodedata

# The bidirectional formatting characters, as a character class's ranges: marks (U+061C,
# U+200E, U+200F), embeddings and overrides, isolates
BIDI_FORMATTING = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# The tag characters: invisible, each stands for an ASCII character a model can read
TAG_CHARACTERS = "\U000e0000-\U000e007f"
# Other characters nobody sees, which carry hidden text as well as tag characters do, one
# bit or byte each: zero-width spaces, joiners and non-joiners, the word joiner and invisible
# operators, deprecated format characters, the byte order mark, Hangul fillers, the combining
# grapheme joiner, interlinear annotation marks and the variation selectors (the 256 of them
# spell a byte each after any character)
INVISIBLE_CHARACTERS = (
    "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2064\u206a-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000e0100-\U000e01ef"
)
# C0 controls but tab and newline, DEL, C1 controls, the bidirectional formatting characters,
# the tag characters and the other invisible ones
_CONTROL_CHARACTERS = re.compile(
    f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_FORMATTING}{TAG_CHARACTERS}{INVISIBLE_CHARACTERS}]"
)
# Kept where they do what a reader sees, and nowhere else: a joiner between two emoji (👨‍👩‍👧) or
# two letters of a script that joins them (a Persian or Indic word), and one presentation
# selector after an emoji or a keycap's digit (❤️, 1️⃣). Between Latin letters, or one after
# another, each could carry a few bits nobody sees, so there they are escaped.
_JOINERS = "\u200c\u200d"
_PRESENTATION = "\ufe0e\ufe0f"
_KEYCAP = "\u20e3"
# The scripts whose letters zero-width joiners and non-joiners shape: Arabic, Syriac, Thaana,
# N'Ko, the Indic scripts, Sinhala, Tibetan, Myanmar, Khmer, Mongolian and Arabic's
# presentation forms
_JOINING_SCRIPTS = re.compile(
    "[\u0600-\u07ff\u0800-\u08ff\u0900-\u0dff\u0f00-\u0fff\u1000-\u109f"
    "\u1780-\u18af\ufb50-\ufdff\ufe70-\ufefe]"
)


def _emoji(char: str) -> bool:
    """A pictograph or a modifier of one (a skin tone): what presentation selectors and emoji
    joiners follow."""
    return unicodedata.category(char) in {"So", "Sk"} and not char.isascii()


def _shown_as_is(text: str, at: int) -> bool:
    char = text[at]
    before = text[at - 1] if at else ""
    after = text[at + 1] if at + 1 < len(text) else ""
    if char in _JOINERS:
        if before and after and _JOINING_SCRIPTS.match(before) and _JOINING_SCRIPTS.match(after):
            return True
        emoji_before = bool(before) and (
            _emoji(before) or (before == "\ufe0f" and at >= 2 and _emoji(text[at - 2]))
        )
        return char == "\u200d" and emoji_before and bool(after) and _emoji(after)
    if char in _PRESENTATION:
        if not before or (after and after in _PRESENTATION):
            return False
        return _emoji(before) or (before in "0123456789#*" and after == _KEYCAP)
    return False


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code in _KEPT_IN_PLACE and _shown_as_is(match.string, match.start()):
        return match.group()
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


_KEPT_IN_PLACE = frozenset(map(ord, _JOINERS + _PRESENTATION))


def escape_control_characters(text: str) -> str:
    """`text` with each control, bidirectional formatting, tag or other invisible character
    written as an escape (but for joiners and presentation selectors where a reader sees what
    they do); tab and newline are kept."""
    return _CONTROL_CHARACTERS.sub(_escape, text)


# What ends a line besides the C0 and C1 controls: to Python's str.splitlines and to
# JavaScript, the line and paragraph separators
_LINE_SEPARATORS = re.compile("[\n\u2028\u2029]")


def escape_to_one_line(text: str) -> str:
    """`text` escaped as escape_control_characters does, and its line ends too (a newline,
    U+2028, U+2029): one line, as a log line or a message on stderr must stay, whatever it
    quotes."""
    return _LINE_SEPARATORS.sub(_escape, escape_control_characters(text))


# An escape as escape_control_characters writes one (or as text may hold one already)
_WRITTEN_ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def _word_for_escape(match: re.Match[str]) -> str:
    code = int(match.group()[2:], 16)
    if code > 0x10FFFF or not _CONTROL_CHARACTERS.fullmatch(chr(code)):
        return match.group()  # not one of the characters written out: text as it is
    return f" {match.group()[1:]} "


def escapes_as_words(text: str) -> str:
    """`text` with each written-out control, bidirectional formatting or tag character made a
    word of its own, for search: the word after `\\x00` or `\\u200f` in a stored fact is not
    glued to the escape, and the escape stays a word, since the same text may be one written
    by hand (a fact or record about `\\u200f`, a prompt asking for `\\x1b`)."""
    if "\\" not in text:
        return text
    return _WRITTEN_ESCAPE.sub(_word_for_escape, text)


# Characters nobody sees: controls, format characters (zero-width spaces and joiners, the
# bidirectional and tag characters) and, as str.isspace says, white space
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf"})


def has_visible_character(text: str) -> bool:
    """Whether `text` shows a reader anything: a fact or record of NULs, zero-width spaces,
    variation selectors, Hangul fillers or tag characters alone would be kept as a line of
    escapes that says nothing."""
    return any(
        not char.isspace()
        and unicodedata.category(char) not in _INVISIBLE_CATEGORIES
        and _CONTROL_CHARACTERS.match(char) is None
        for char in text
    )
