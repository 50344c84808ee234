"""The tags that frame what orca gives an agent: the recall block (orcad.recall.render) and the
startup block of explicit facts (orcactl.hooks.common.render_startup). No stored text may open
or close either, so every text put inside one goes through `without_tags`. Pure, and light
(the standard library only): the agent hooks import it on every prompt.
"""

from __future__ import annotations

import re

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
_LESS_THAN = "[<\u2039\u27e8\u3008\ufe64\uff1c]"
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
    return _TAG.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)
