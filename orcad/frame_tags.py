"""The tags that frame what orca gives an agent: the recall block (orcad.recall.render) and the
startup block of explicit facts (orcactl.hooks.common.render_startup). No stored text may open
or close either, so every text put inside one goes through `without_tags`. Pure, and light
(the standard library only): the agent hooks import it on every prompt.
"""

from __future__ import annotations

import re
import unicodedata

RECALL_TAG_NAME = "recalled-memory"
# The frame the agent hooks put around the explicit facts at session start
# (orcactl.hooks.common.render_startup): no stored text may open or close it either.
STARTUP_TAG_NAME = "orca-startup-memory"

# The frames' tags, also written with white space or invisible characters inside them (a
# zero-width space, a soft hyphen, a direction mark), which a reader would still take for a tag.
# Possessive, so that a long run of them is read once (a text is up to 32 KiB).
_INVISIBLE = r"[\s\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]*+"
# ...and written with look-alikes a model reads the same: a full-width or small angle bracket
# or slash, full-width letters, and the words joined by another dash, an underscore, white
# space or nothing ("</recalled_memory>", the same in full-width characters)
_LESS_THAN_CHARS = "<\u02c2\u1438\u2039\u2329\u27e8\u3008\ufe64\uff1c"
_LESS_THAN = f"[{_LESS_THAN_CHARS}]"
_SLASH = "[/\u2044\u2215\uff0f]"
_JOINER = r"[-_\s\u2010-\u2015\u2212\ufe63\uff0d\uff3f]*+"


def _word(word: str) -> str:
    """A pattern of `word` in ASCII or full-width letters, invisible characters allowed inside
    (the pattern is compiled to ignore case)."""
    return _INVISIBLE.join(f"[{letter}{chr(ord(letter) + 0xFEE0)}]" for letter in word)


def _name(name: str) -> str:
    return f"{_INVISIBLE}{_JOINER}{_INVISIBLE}".join(map(_word, name.split("-")))


_NAMES = "|".join(map(_name, (RECALL_TAG_NAME, STARTUP_TAG_NAME)))
_TAG = re.compile(rf"{_LESS_THAN}{_INVISIBLE}({_SLASH}?){_INVISIBLE}({_NAMES})", re.IGNORECASE)


def without_tags(text: str) -> str:
    """`text` unable to open or close the recall block or the startup block."""
    text = _TAG.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)
    return _OPENING.sub(_escaped_if_look_alike, text)


# ...and written in letters of other scripts that look like the ASCII ones (Cyrillic U+0435
# and U+043E, Greek U+03BF, Latin small capitals, mathematical and accented letters): a model
# reads `</orca-startup-mem\u03bfry>`, with that omicron, as the tag. What follows an opening
# bracket is reduced to the ASCII letters it looks like (compatibility forms decomposed; marks,
# format characters, white space and joiners dropped; case folded; the look-alikes below
# mapped), and the bracket is escaped when that names a tag; it is read only as far as it can
# still name one. A bracket followed by an ASCII character no name starts with (code's `a < b`,
# `List<int>`, `<<<`) is passed over by the pattern itself.
_OPENING = re.compile(rf"{_LESS_THAN}(?=[\s_-]*+(?:[/rRoO0|]|[^\x00-\x7f]))")
_LOOK_ALIKES = str.maketrans(
    {
        **dict.fromkeys("\u0430\u0251\u03b1\u1d00\u237a", "a"),
        **dict.fromkeys("\u0441\u03f2\u1d04", "c"),
        **dict.fromkeys("\u0501\u1d05", "d"),
        **dict.fromkeys("\u0435\u04bd\u1d07", "e"),
        **dict.fromkeys("\u04cf\u029f\u0131\u01c0\u03b9i1|", "l"),
        **dict.fromkeys("\u043c\u1d0d", "m"),
        **dict.fromkeys("\u043e\u03bf\u03c3\u0585\u1d0f0", "o"),
        **dict.fromkeys("\u0440\u03c1\u1d18\u2374", "p"),
        **dict.fromkeys("\u0433\u0280\u1d26", "r"),
        **dict.fromkeys("\u0455\ua731", "s"),
        **dict.fromkeys("\u0442\u03c4\u1d1b", "t"),
        **dict.fromkeys("\u03c5\u057d\u028b\u1d1c", "u"),
        **dict.fromkeys("\u0443\u04af\u028f\u03b3", "y"),
        **dict.fromkeys("\u2044\u2215\u29f8", "/"),
    }
)
_DROPPED_CATEGORIES = frozenset(("Mn", "Me", "Cf", "Cc", "Zs", "Zl", "Zp", "Pd"))
_DROPPED = frozenset("_\u115f\u1160\u3164\uffa0")  # the joiner `_` and Hangul fillers
_SKELETON_NAMES = ("recalledmemory", "orcastartupmemory", "/recalledmemory", "/orcastartupmemory")
_LOOK_AHEAD_CHARS = 256  # enough for a name with invisible characters between its letters


def _escaped_if_look_alike(match: re.Match[str]) -> str:
    skeleton = ""
    text, start = match.string, match.end()
    for char in text[start : start + _LOOK_AHEAD_CHARS]:
        for part in unicodedata.normalize("NFKD", char).casefold():
            if part not in _DROPPED and unicodedata.category(part) not in _DROPPED_CATEGORIES:
                skeleton += part.translate(_LOOK_ALIKES)
        if any(skeleton.startswith(name) for name in _SKELETON_NAMES):
            return "&lt;"
        if not any(name.startswith(skeleton) for name in _SKELETON_NAMES):
            return match.group()  # read no further than the text can still name a tag
    return match.group()
