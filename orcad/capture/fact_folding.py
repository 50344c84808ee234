"""Unicode compatibility folding for the ledger's exact-duplicate key (ledger.normalize_fact).

The key should not tell apart two writings of the same text: full-width letters from an input
method, ligatures, compatibility spaces, an ellipsis character for three dots. NFKC folds all of
those, but also characters whose plain form says something else: "10²" is not "102", "x₂" is
not "x2", "①" is a list number and "1½" is not eleven halves. Those keep their own form here, so two
facts that differ only in them stay two facts.
"""

from __future__ import annotations

import functools
import re
import unicodedata

# Unicode decomposition tags whose mapping changes a number or a name, not just its look.
MEANINGFUL_FORMS = ("<super>", "<sub>", "<circle>", "<fraction>")


_NOT_ASCII = re.compile(r"[^\x00-\x7f]")


@functools.lru_cache(maxsize=4096)  # a fact's non-ASCII characters are few and recur
def keeps_its_form(char: str) -> bool:
    """Whether NFKC would turn `char` into text that means something else."""
    return unicodedata.decomposition(char).startswith(MEANINGFUL_FORMS)


def fold_compatibility_forms(text: str) -> str:
    """NFKC, except that characters in MEANINGFUL_FORMS stay as written (composed, as NFC
    leaves them). Such a character is a starter that composes with nothing, so the text
    between two of them is folded on its own without changing what NFKC would give there."""
    if unicodedata.is_normalized("NFKC", text):  # ASCII, and most text: nothing to fold
        return text
    pieces: list[str] = []
    start = 0
    for found in _NOT_ASCII.finditer(text):  # only a non-ASCII character can be one
        if keeps_its_form(found.group()):
            pieces.append(unicodedata.normalize("NFKC", text[start : found.start()]))
            pieces.append(found.group())
            start = found.end()
    pieces.append(unicodedata.normalize("NFKC", text[start:]))
    return "".join(pieces)
