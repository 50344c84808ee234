"""Search-query derivation and planning for every FTS5 index in the daemon.

Pure: no trio, no sqlite3, no files. Deliberate-memory search and recall both turn free user
text into at most `QUERY_MAX_TERMS` terms (`derive_query_terms`), let the store count how many
records each term matches, keep the selective ones (`plan_terms`), and build a MATCH string that
FTS5 can always parse (`match_expression`).

Both FTS5 tables use `FTS5_TOKENIZE`, so "deploying" in a query finds "deploys" in a record: the
quoted terms are stemmed by FTS5 itself when the query runs.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence

from orcad.control_characters import escapes_as_words
from orcad.limits import QUERY_MAX_CONSIDERED, QUERY_MAX_TERMS

# The tokenizer of every FTS5 table in the project (porter over unicode61, diacritics folded).
FTS5_TOKENIZE = "porter unicode61 remove_diacritics 2"

# unicode61 token characters: letters, numbers and private-use code points; the rest separates.
_TOKEN = re.compile(r"(?:[^\W_]|[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd])+")

# Words that say little about which record is meant; dropped while better terms exist.
_STOP_WORD_TEXT = """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each either else
    ever every few for from further get got had has have having he her here hers him his how
    i if in into is it its itself just let like may me might more most much must my no nor
    not now of off on once one only or other our ours out over own per please same shall she
    should so some such than that the their theirs them then there these they this those
    through to too under until up upon us very via was we were what when where which while
    who whom why will with within without would yes yet you your yours
"""
STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())

# Planning: bm25 work grows with the postings of every OR-ed term, so the kept terms together
# may match at most this many records (beyond the rarest term, which is always kept); terms that
# match a large share of a big index are the ones left out.
POSTINGS_BUDGET = 1000


# The combining marks unicode61's remove_diacritics drops, the letters around them staying one
# word (SQLite's sqlite3Fts5UnicodeIsdiacritic): the accents of Latin letters. Any other mark
# (a Devanagari virama, Hebrew points) separates words there, as here, where it is no word
# character; dropping it too would join letters the index keeps apart ("हिन्दी").
_DIACRITICS = frozenset(
    chr(code)
    for code in (
        *(0x300, 0x301, 0x302, 0x303, 0x304, 0x306, 0x307, 0x308, 0x309, 0x30A, 0x30B, 0x30C),
        *(0x30F, 0x311, 0x31B, 0x323, 0x324, 0x325, 0x326, 0x327, 0x328, 0x32D, 0x32E, 0x330),
        0x331,
    )
)


def _fold(text: str) -> str:
    """Lower-case and strip diacritics, as unicode61 with remove_diacritics does."""
    lowered = text.lower()
    if lowered.isascii():  # nothing to decompose: the usual case, without a loop in Python
        return lowered
    decomposed = unicodedata.normalize("NFD", lowered)
    return "".join(ch for ch in decomposed if ch not in _DIACRITICS)


FOLD_CHUNK_CHARS = 16384  # text folded and tokenized at a time by distinct_terms
# characters of a prompt distinct_terms reads at most: far more than any pasted log needs for
# its terms, and a bound on what one without whitespace costs (folding it is a loop in Python)
QUERY_READ_CHARS = 1 << 18
_SPACE = re.compile(r"\s")


def _chunks(text: str) -> Iterator[str]:
    """`text` in pieces of about FOLD_CHUNK_CHARS, each cut just before a whitespace character:
    a token never spans one, and folding (NFD) gives the same result piece by piece, since a
    whitespace character is a starter that nothing before it combines with."""
    start = 0
    while start < len(text):
        end = start + FOLD_CHUNK_CHARS
        if end < len(text):
            cut = max(text.rfind(" ", start + 1, end), text.rfind("\n", start + 1, end))
            if cut > start:
                end = cut
            else:  # no space or newline in the piece: up to the next whitespace of any kind
                found = _SPACE.search(text, end)
                end = len(text) if found is None else found.start()
        yield text[start:end]
        start = end


def tokenize(text: str) -> list[str]:
    """The tokens of `text`, folded, in order (duplicates kept). A control character written
    out (`\\x00`, as facts are stored) is a token apart from the word it touches."""
    return _TOKEN.findall(_fold(escapes_as_words(text)))


# Light stemming, for the rankings computed in process (FTS5 stems with Porter by itself).
_VOWELS = frozenset("aeiouy")
_KEEP_DOUBLE = frozenset("lsz")


def _has_vowel(text: str) -> bool:
    return any(char in _VOWELS for char in text)


STEM_CACHED_LENGTH = 40  # longer words are stemmed anew each time: they cannot fill the cache


def stem(word: str) -> str:
    """A light English suffix stripper, applied alike to queries and facts.

    Not Porter's algorithm, but it folds the same families that matter for recall:
    deploy/deploys/deployed/deploying/deployment, release/released/releasing, migrate/migration.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if len(word) <= STEM_CACHED_LENGTH:  # recall stems the same words prompt after prompt
        return _cached_stem(word)
    return _stem(word)


@functools.lru_cache(maxsize=65536)
def _cached_stem(word: str) -> str:
    return _stem(word)


def _stem(word: str) -> str:
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ments", "ment", "ingly", "ing", "edly", "ed", "ation", "ations"):
        base = word[: -len(suffix)]
        if word.endswith(suffix) and len(base) >= 3 and _has_vowel(base):
            word = base + ("at" if suffix.startswith("ation") else "")
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in _VOWELS | _KEEP_DOUBLE:
                word = word[:-1]
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def stems(text: str) -> set[str]:
    return {stem(token) for token in tokenize(text)}


def is_weak_term(term: str) -> bool:
    """A stop word or a single character: kept only when nothing better is there."""
    return term in STOP_WORDS or len(term) < 2


def distinct_terms(text: str, max_terms: int = QUERY_MAX_CONSIDERED) -> list[str]:
    """The distinct terms of `text` in order of first appearance, weak terms (stop words,
    single characters) left out when any other term exists; at most `max_terms`, from its first
    QUERY_READ_CHARS characters."""
    distinct: list[str] = []
    seen: set[str] = set()
    strong = 0
    for chunk in _chunks(text[:QUERY_READ_CHARS]):  # read only as far as the terms go
        for token in tokenize(chunk):
            if token not in seen:
                seen.add(token)
                distinct.append(token)
                strong += not is_weak_term(token)
        if strong >= max_terms:
            break
    strong_terms = [term for term in distinct if not is_weak_term(term)]
    return (strong_terms if strong_terms else distinct)[:max_terms]


def most_selective(
    terms: Sequence[str],
    doc_freq: Mapping[str, int] | None = None,
    max_terms: int = QUERY_MAX_TERMS,
) -> list[str]:
    """At most `max_terms` of `terms`, in their original order: all of them when they fit,
    else the most selective. With `doc_freq` (records containing each term), terms that match
    something come first, fewest matches first; without it, or among equals, longer terms first
    (an identifier or error name says more than "file" or "line")."""
    if len(terms) <= max_terms:
        return list(terms)

    def selectivity(index: int) -> tuple[int, int, int, int]:
        term = terms[index]
        freq = doc_freq.get(term, 0) if doc_freq is not None else 0
        return (0 if freq > 0 else 1, freq, -len(term), index)

    kept = sorted(sorted(range(len(terms)), key=selectivity)[:max_terms])
    return [terms[index] for index in kept]


def derive_query_terms(text: str, max_terms: int = QUERY_MAX_TERMS) -> list[str]:
    """At most `max_terms` distinct terms of `text`, in order of first appearance; when there
    are more, the longest (a stand-in for the most selective when no counts are at hand)."""
    return most_selective(distinct_terms(text), None, max_terms)


# NUL ends an FTS5 string early and surrogates cannot be encoded; neither is a token character.
_UNQUOTABLE = re.compile("[\x00\ud800-\udfff]")


def quote_term(term: str) -> str:
    """An FTS5 string literal: double quotes around, embedded quotes doubled."""
    return '"' + _UNQUOTABLE.sub("", term).replace('"', '""') + '"'


def match_expression(terms: Sequence[str]) -> str:
    """An FTS5 MATCH string OR-ing the quoted terms; every term is a literal, never syntax.

    An empty list gives an empty string, which callers must not pass to MATCH (list instead).
    """
    return " OR ".join(quote_term(term) for term in terms if _UNQUOTABLE.sub("", term))


def plan_terms(terms: Sequence[str], doc_freq: Mapping[str, int], total_docs: int) -> list[str]:
    """The subset of `terms` worth querying, in their original order.

    `doc_freq[term]` is how many of the `total_docs` records contain the term (missing means
    none); counts may stop at `POSTINGS_BUDGET + 1`, which is all the plan needs to know. Terms
    that match nothing are dropped. An index no bigger than `POSTINGS_BUDGET` keeps every matching
    term. Otherwise the rarest matching term is always kept and further terms are added from the
    most selective up while their postings together fit `POSTINGS_BUDGET`. When no term matches
    anything the terms come back unchanged (the query costs nothing and the caller's counts may
    be approximate).
    """
    matching = [(doc_freq.get(term, 0), index) for index, term in enumerate(terms)]
    matching = [entry for entry in matching if entry[0] > 0]
    if not matching:
        return list(terms)
    matching.sort()
    kept = {matching[0][1]}
    postings = 0
    for freq, index in matching[1:]:
        if total_docs > POSTINGS_BUDGET and postings + freq > POSTINGS_BUDGET:
            break
        postings += freq
        kept.add(index)
    return [term for index, term in enumerate(terms) if index in kept]
