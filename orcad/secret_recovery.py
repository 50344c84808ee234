"""A wallet's recovery phrase and Vault's unseal keys, after their names in notes and sentences.

Pure module: no I/O. A recovery phrase is 12 to 24 words of a wordlist (BIP39's are 3 to 8
letters): after "seed phrase", "recovery phrase", "mnemonic phrase", "backup phrase" or "wallet
phrase" and a colon, an `=` or a verb ("seed phrase: abandon ability …", "my recovery phrase is
…", `SEED_PHRASE="…"`), as the assignment rule reads one under a `mnemonic` name. Words of a
sentence (the, and, with, …) make it prose ("the seed phrase is the only way to restore …"),
and one word over and over a published test phrase ("test test … junk").

Vault's unseal keys are 44 characters of base64 (or another whole number of bytes, 40 to 88
characters, or 64 to 66 hex digits): after "unseal key"
(numbered as `vault operator init` prints them, "Unseal Key 1:") and a colon or a verb, on its
line or listed on the lines below ("the vault unseal keys are:" then one a line). A value that
is no such key ("(hidden)", a path, a variable) is none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import STATED_VERB, Span, looks_random

# -------------------------------------------------------------------- recovery phrases
_PHRASE = "phrase"
_PHRASE_NAMED = lazy_compile(r"(?<![a-z0-9])(?:seed|recovery|mnemonic|backup|wallet)[ _\-.]?\Z")
_PHRASE_NAMED_REACH = len("recovery_")
_PHRASE_VALUE = lazy_compile(
    r"phrase(?:[ \t]+(?:for|of|on)(?:[ \t]+[a-z0-9_.'\-]{1,24}+){1,4}?)?"  # "for the ledger"
    rf"(?:[\"']?[ \t]*(?:=|:)|{STATED_VERB}[ \t]*:?)(?:[ \t]+|[ \t]*\r?\n[ \t]*)?"
    r"[\"'`]?(?P<words>[a-z]{3,8}+(?:[ \t]+[a-z]{3,8}+){11,23}+)(?![a-z])"
)
# words of sentences that no wordlist holds
_SENTENCE_WORDS = frozenset(
    ("the", "and", "with", "from", "your", "that", "this", "are", "was", "for", "not", "but")
)


def _could_be_a_wallets(words: list[str]) -> bool:
    """No word of a sentence, and not a published test phrase: Hardhat's and Foundry's "test
    test … junk", BIP39's "abandon abandon … about" repeat one word, where a phrase drawn from
    2,048 words rarely holds one three times."""
    return not _SENTENCE_WORDS.intersection(words) and len(set(words)) * 4 >= len(words) * 3


def find_recovery_phrases(text: str, lowered: str) -> Iterator[Span]:
    """The words of a recovery phrase after its name."""
    at = lowered.find(_PHRASE)
    while at >= 0:
        if _PHRASE_NAMED.search(lowered, max(0, at - _PHRASE_NAMED_REACH), at) is not None:
            match = _PHRASE_VALUE.match(lowered, at)
            if match is not None and _could_be_a_wallets(match["words"].split()):
                yield match.span("words")
        at = lowered.find(_PHRASE, at + len(_PHRASE))


# "my test wallet seed is abandon ladder … junior,", "mnemonic: …", "the recovery words are …":
# the phrase named by "seed" or "mnemonic" alone, or by its words, then a colon or a verb; as
# "seed" also names a random generator's, the phrase must be a wordlist's whole length (12, 15,
# 18, 21 or 24 words) and end its clause
_SEED_TAIL = lazy_compile(
    r"(?:[ \t]+(?:for|of|on)(?:[ \t]+[a-z0-9_.'\-]{1,24}+){1,4}?)?"
    rf"(?:[ \t]*:|{STATED_VERB}[ \t]*:?)(?:[ \t]+|[ \t]*\r?\n[ \t]*)"
    r"[\"'`]?(?P<words>[a-z]{3,8}+(?:[ \t]+[a-z]{3,8}+){11,23}+)(?![a-z])"
)
_WORDS_NAMED = lazy_compile(r"(?<![a-z0-9])(?:seed|recovery|mnemonic|backup|wallet)[ \t]+\Z")
_SEED_NAMES = ("seed", "mnemonic", "words")
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_WORDLIST_LENGTHS = frozenset((12, 15, 18, 21, 24))
_PHRASE_ENDS = frozenset(",.;!?\"'`)\r\n")


def find_seed_words(text: str, lowered: str) -> Iterator[Span]:
    """The words of a recovery phrase after "seed" or "mnemonic" alone, or their words. Found
    from each name (a literal searched for at C speed), what names "words" looked for before."""
    for name in _SEED_NAMES:
        at = lowered.find(name)
        while at >= 0:
            end = at + len(name)
            if (at == 0 or lowered[at - 1] not in _NAME_CHARACTERS) and (
                name != "words" or _WORDS_NAMED.search(lowered, max(0, at - 10), at) is not None
            ):
                match = _SEED_TAIL.match(lowered, end)
                if match is not None and _wordlists_phrase(text, match):
                    yield match.span("words")
            at = lowered.find(name, end)


def _wordlists_phrase(text: str, match: re.Match[str]) -> bool:
    words = match["words"].split()
    end = match.end("words")
    return (
        len(words) in _WORDLIST_LENGTHS
        and (end == len(text) or text[end] in _PHRASE_ENDS)
        and _could_be_a_wallets(words)
    )


# ------------------------------------------------------------------------ unseal keys
_UNSEAL = "unseal key"
_UNSEAL_LEAD = lazy_compile(
    rf"unseal key(?:s|[ \t]+#?[0-9]{{1,2}})?(?:[ \t]*:|{STATED_VERB}[ \t]*:?)"
)
# one key: on the lead's line, or on a line of its own below (a list's bullet or number first)
_UNSEAL_KEY = lazy_compile(
    r"(?:[ \t]+|[ \t]*\r?\n[ \t]*(?:(?:[-*•]|[0-9]{1,2}[.)])[ \t]+)?)[\"'`]?"
    r"(?P<key>[A-Za-z0-9+/]{40,88}+={0,2}|[0-9a-f]{64,66})(?![A-Za-z0-9+/=])"
)
# base64 of a whole number of bytes: Vault's 44 characters (a share of 33 bytes, or 32 and
# `=`), and longer ones, `Zm9v…ZG8=` (52), as other key sizes print
_MOST_KEYS = 10


def find_unseal_keys(text: str, lowered: str) -> Iterator[Span]:
    """The unseal keys after "unseal key" and a colon or a verb."""
    at = lowered.find(_UNSEAL)
    while at >= 0:
        lead = _UNSEAL_LEAD.match(lowered, at)
        if lead is not None and not lowered[at - 1 : at].isalpha():
            position = lead.end()
            for _ in range(_MOST_KEYS):
                key = _UNSEAL_KEY.match(text, position)
                if key is None or not _unseal_key(key["key"]):
                    break
                yield key.span("key")
                position = key.end()
        at = lowered.find(_UNSEAL, at + len(_UNSEAL))


_HEX_DIGITS = frozenset("0123456789abcdef")


def _unseal_key(key: str) -> bool:
    """Hex digits of a whole key, or base64 of whole bytes, that look generated."""
    whole = (64 <= len(key) <= 66 and _HEX_DIGITS.issuperset(key)) or len(key) % 4 == 0
    return whole and looks_random(key)
