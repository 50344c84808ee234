"""BERT uncased WordPiece tokenization over a vocabulary list. Pure: no I/O.

The same steps as BERT's own tokenizer (lower-case, strip accents, split punctuation and CJK
characters, then greedy longest-match sub-words), so that a static embedding built from a BERT
model's vocabulary is looked up with the tokens the model itself would have seen.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence

MAX_WORD_CHARS = 100  # BERT's limit: a longer "word" is one unknown token
WORD_CACHE_ENTRIES = 65536  # words whose ids are kept: prompts bring endless new words
CONTINUATION = "##"


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


# ASCII text, the usual case, in one regular expression: every printable non-alphanumeric
# ASCII character is punctuation to BERT, and control characters are dropped
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ASCII_WORD = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")


def basic_words(text: str) -> list[str]:
    """Lower-cased, accent-free words with every punctuation and CJK character on its own."""
    return list(iter_basic_words(text))


def iter_basic_words(text: str) -> Iterator[str]:
    """`basic_words`, one at a time: a caller that needs only the first few stops the work."""
    if text.isascii():
        for match in _ASCII_WORD.finditer(_ASCII_CONTROL.sub("", text.lower())):
            yield match.group()
        return
    folded = unicodedata.normalize("NFD", text.lower())
    current: list[str] = []
    for char in folded:
        code = ord(char)
        category = unicodedata.category(char)
        if (
            category == "Mn"
            or code in {0, 0xFFFD}
            or (category.startswith("C") and char not in "\t\n\r")
        ):
            continue
        if char.isspace():
            if current:
                yield "".join(current)
                current = []
        elif _is_punctuation(char) or _is_cjk(code):
            if current:
                yield "".join(current)
                current = []
            yield char
        else:
            current.append(char)
    if current:
        yield "".join(current)


class WordPiece:
    """Greedy longest-match-first sub-word split of BERT words into vocabulary ids."""

    def __init__(self, vocabulary: Sequence[str], unknown: str = "[UNK]") -> None:
        self.ids = {token: index for index, token in enumerate(vocabulary)}
        self.unknown_id = self.ids.get(unknown, 0)
        # no piece is longer than the longest vocabulary entry: the longest match starts there
        self._longest = max((len(t.removeprefix(CONTINUATION)) for t in self.ids), default=1)
        self._cache: dict[str, tuple[int, ...]] = {}

    def word_ids(self, word: str) -> tuple[int, ...]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        result = self._split(word)
        # bounded in entries and in the length of a word (longer ones are a single unknown)
        if len(self._cache) < WORD_CACHE_ENTRIES and len(word) <= MAX_WORD_CHARS:
            self._cache[word] = result
        return result

    def _split(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_WORD_CHARS:
            return (self.unknown_id,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = min(len(word), start + self._longest)
            found = -1
            while start < end:
                piece = word[start:end] if start == 0 else CONTINUATION + word[start:end]
                found = self.ids.get(piece, -1)
                if found >= 0:
                    break
                end -= 1
            if found < 0:
                return (self.unknown_id,)
            pieces.append(found)
            start = end
        return tuple(pieces)

    def encode(self, text: str, limit: int | None = None) -> list[int]:
        """The vocabulary ids of `text`, without [CLS]/[SEP]; with `limit`, only its first
        `limit` ids, and the rest of the text is not looked at (a pasted megabyte of log costs
        what its first words do)."""
        ids: list[int] = []
        for word in iter_basic_words(text):
            if limit is not None and len(ids) >= limit:
                break
            ids.extend(self.word_ids(word))
        return ids if limit is None else ids[:limit]
