"""App passwords as Google and Apple hand them out: four groups of four lower-case letters,
"app password: abcd efgh ijkl mnop", "App-Passwort abcd efgh ijkl mnop", "app-specific
password: abcd-efgh-ijkl-mnop".

Pure module: no I/O. The groups are random letters, so four words of four letters after the
name are prose when one of them is a common word ("app password: this will work fine", "the
app password form uses four text boxes"). One search for the name, which the regex engine
skips to by its literal start, is what a text without one costs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import Span, is_placeholder

# The name, up to 40 characters of its sentence ("for gmail is", "(smtp):"), then the groups,
# joined by spaces or by hyphens, and no fifth group after them.
_APP_PASSWORD = lazy_compile(
    r"app[ \t\-](?:specific[ \t\-])?passw(?:ord|ort)[^\n]{0,40}?(?<![a-z0-9\-])"
    r"(?P<value>[a-z]{4}(?P<join>[ \-])[a-z]{4}(?P=join)[a-z]{4}(?P=join)[a-z]{4}|[a-z]{16})"
    r"(?![a-z0-9]|(?P=join)[a-z]{4}(?![a-z]))"
)
# The groups run together ("fkzqmwpthxlrdvny"), as a user may paste them. Random letters put
# consonants side by side in pairs English does not write (kz, zq, qm, mw): 16 of them hold four
# or more such pairs 91% of the time, where a word or a name run together holds few or none
# ("misunderstanding" 0, "utcfromtimestamp" 3; 4 of 281 such names in installed packages).
_ENGLISH_PAIRS_WRITTEN = (
    "bl br ch ck cl cr ct dr fl fr gh gl gr ld lf lk ll lm lp ls lt mb mm mp ms nc nd ng nk nn ns "
    "nt ph pl pr ps pt rb rc rd rg rk rl rm rn rp rr rs rt sc sh sk sl sm sn sp ss st sw th tr ts "
    "tt tw wh wr nf bs ds gs ks rv lv nv sq xt xp dg cc ff gg pp dd bb zz rf rh nl ln mn wn wl wk "
    "ws nh lb sf gn kn"
)
_ENGLISH_CONSONANT_PAIRS = frozenset(_ENGLISH_PAIRS_WRITTEN.split())
# Letters in the alphabet's order ("abcdefghijklmnop"): an example, not letters drawn at random
_ALPHABET_RUN = lazy_compile(
    "|".join("".join(chr(code + step) for step in range(4)) for code in range(97, 120))
)
_VOWELS = frozenset("aeiouy")
_FEWEST_FOREIGN_PAIRS = 4
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
        if join is None and (
            _foreign_pairs(value) < _FEWEST_FOREIGN_PAIRS or _ALPHABET_RUN.search(value)
        ):
            continue  # a word or a name run together, or an example: not random letters
        groups = value.split(join) if join else [value[i : i + 4] for i in range(0, 16, 4)]
        if value.islower() and not is_placeholder(value) and _COMMON_WORDS.isdisjoint(groups):
            yield start, end


def _foreign_pairs(letters: str) -> int:
    """How many adjacent consonants in `letters` (lower case) English does not write together."""
    return sum(
        1
        for first, second in itertools.pairwise(letters)
        if first not in _VOWELS
        and second not in _VOWELS
        and first + second not in _ENGLISH_CONSONANT_PAIRS
    )
