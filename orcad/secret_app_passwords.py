"""App passwords as Google and Apple hand them out: four groups of four lower-case letters,
"app password: abcd efgh ijkl mnop", "App-Passwort abcd efgh ijkl mnop", "app-specific
password: abcd-efgh-ijkl-mnop".

Pure module: no I/O. The groups are random letters, so four words of four letters after the
name are prose when one of them is a common word ("app password: this will work fine", "the
app password form uses four text boxes"). One search for the name, which the regex engine
skips to by its literal start, is what a text without one costs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.secret_values import Span, is_placeholder

# The name, up to 40 characters of its sentence ("for gmail is", "(smtp):"), then the groups,
# joined by spaces or by hyphens, and no fifth group after them.
_APP_PASSWORD = re.compile(
    r"app[ \t\-](?:specific[ \t\-])?passw(?:ord|ort)[^\n]{0,40}?(?<![a-z0-9\-])"
    r"(?P<value>[a-z]{4}(?P<join>[ \-])[a-z]{4}(?P=join)[a-z]{4}(?P=join)[a-z]{4}|[a-z]{16})"
    r"(?![a-z0-9]|(?P=join)[a-z]{4}(?![a-z]))"
)
# The groups run together ("abcdefghijklmnop"), as a user may paste them: random letters hold
# about three vowels in sixteen, an English word of that length six or more ("responsibilities").
_MOST_VOWELS_IN_A_RUN = 5
# Four-letter words of prose and of talk about mail and sign-in: random groups are almost never
# one of them.
_COMMON_WORDS = frozenset(
    (
        "able", "also", "area", "auth", "away", "back", "base", "been", "best", "body", "both",
        "call", "came", "case", "code", "come", "copy", "cost", "data", "date", "days", "does",
        "done", "down", "each", "easy", "edit", "else", "even", "ever", "fail", "fast", "file",
        "fill", "find", "fine", "flow", "form", "four", "free", "from", "full", "gave", "give",
        "goes", "gone", "good", "half", "hand", "hard", "have", "help", "here", "high", "hold",
        "home", "host", "idea", "into", "item", "just", "keep", "kept", "kind", "knew", "know",
        "last", "late", "left", "less", "like", "line", "link", "list", "live", "load", "lock",
        "logs", "long", "look", "lost", "made", "mail", "main", "make", "many", "mark", "mean",
        "menu", "mind", "miss", "mode", "more", "most", "move", "much", "must", "name", "need",
        "next", "none", "note", "okay", "once", "only", "open", "over", "page", "part", "pass",
        "past", "path", "plan", "port", "post", "pull", "push", "read", "real", "rest", "role",
        "root", "rule", "runs", "safe", "said", "same", "save", "says", "seen", "self", "send",
        "sent", "show", "side", "sign", "site", "size", "some", "soon", "spam", "step", "stop",
        "such", "sure", "sync", "take", "tell", "term", "test", "text", "than", "that", "them",
        "then", "they", "this", "time", "told", "tool", "true", "turn", "type", "used", "user",
        "uses", "very", "view", "wait", "want", "ways", "week", "well", "went", "were", "what",
        "when", "will", "with", "word", "work", "year", "your", "zero", "imap", "smtp", "gets",
        "sets", "puts",
    )
)  # fmt: skip


def find_app_passwords(text: str, lowered: str) -> Iterator[Span]:
    """Four groups of four lower-case letters after "app password" (or "App-Passwort",
    "app-specific password") on its line."""
    if "app" not in lowered:
        return
    for match in _APP_PASSWORD.finditer(lowered):
        start, end = match.span("value")
        value = text[start:end]
        join = match.group("join")
        if join is None and sum(value.count(vowel) for vowel in "aeiouy") > _MOST_VOWELS_IN_A_RUN:
            continue  # a long word, not random letters
        groups = value.split(join) if join else [value[i : i + 4] for i in range(0, 16, 4)]
        if value.islower() and not is_placeholder(value) and _COMMON_WORDS.isdisjoint(groups):
            yield start, end
