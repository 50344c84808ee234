"""Generated values stated in English words for an API key, token or secret.

Pure module: no I/O. "the api key is 3f9a...", "the token is kT9v...": the value such a
sentence gives is a credential when it looks generated, as it must be after such a name in an
assignment. Passwords stated in words are `secret_sentences`'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.secret_values import STATED_VERB, Span, end_before_trailing, looks_random

# "the api key is 3f9a...", "the token is kT9v...": a value a sentence gives for a key, token or
# secret is one when it looks generated, as it must be after such a name in an assignment.
_KEY_STATEMENT_TAIL = (
    r"(?![a-z0-9_\-])"
    r"(?:[ \t]+[^\s.,;:!?=]{1,30}+){0,8}?"
    rf"(?:[ \t]*:|{STATED_VERB}[ \t]*:?)"
    r"[ \t]+[\"'`]?([^\s\"'`()\[\]{}<>]{16,256}+)(?![(\[{<])"
)
# one pattern per name: a literal prefix lets the engine skip ahead (an alternation does not)
_KEY_STATEMENTS = tuple(
    (name, re.compile(name + _KEY_STATEMENT_TAIL)) for name in ("token", "secret", "key")
)
# "datadog api key 4f9c2e7b...", "token kT9v...": the value right after the name, no verb nor
# colon between, counts when it is longer and looks generated
# (no invisible character in it: a token cut by one is read by the rules of its format)
_KEY_ADJACENT_TAIL = (
    r"(?![a-z0-9_\-])[ \t]+[\"'`]?"
    r"([^\s\"'`()\[\]{}<>\u200b-\u200f\u2060-\u2064\ufeff]{24,256}+)(?![(\[{<])"
)
_KEY_ADJACENT = tuple(
    (name, re.compile(name + _KEY_ADJACENT_TAIL)) for name in ("token", "secret", "key")
)
ADJACENT_MIN = 24
# "key" alone is too common (primary key, cache key): only these qualifiers make it a credential.
_KEY_QUALIFIER = re.compile(
    r"(?:api|access|secret|private|signing|encryption|master|auth|client|account|app|license)"
    r"[_\-. ]?\Z"
)


def find_stated_keys(text: str, lowered: str) -> Iterator[Span]:
    """A generated value stated for an API key, token or secret in words."""
    for shortest, patterns in ((16, _KEY_STATEMENTS), (ADJACENT_MIN, _KEY_ADJACENT)):
        for name, pattern in patterns:
            if name not in lowered:
                continue
            for match in pattern.finditer(lowered):
                at = match.start()
                if name == "key" and not _KEY_QUALIFIER.search(lowered, max(0, at - 16), at):
                    continue
                start, end = match.span(1)
                end = end_before_trailing(text, start, end)
                if end - start >= shortest and looks_random(text[start:end]):
                    yield start, end
