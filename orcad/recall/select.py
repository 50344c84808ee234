"""Recall selection: the caps on what is injected, and the fallback ranking. Pure: no I/O.

The automatic part injects at most 6 entries and at most 3,072 bytes (spec: Recall); the
deliberate part at most 8 records and at most 4,096 characters (deliberate spec). Each size cap
covers the whole block its part would make alone (frame, heading and lines), so the lines get
what the frame leaves. Ranked input is taken in order; an entry that would overflow the
size budget is skipped so that a shorter, lower-ranked one can still fit.

When the project's FTS5 index cannot be used, `rank_by_overlap` orders ledger candidates by the
query terms they share (each weighted by how rare it is among the candidates) and then by
recency, with the same light stemming on both sides so that "deploying" meets "deploys".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import msgspec

from orcad.clock import format_time
from orcad.limits import (
    LEDGER_MAX_CANDIDATES,
    RECALL_AUTOMATIC_MAX_BYTES,
    RECALL_AUTOMATIC_MAX_ENTRIES,
    RECALL_DELIBERATE_MAX_CHARS,
    RECALL_DELIBERATE_MAX_RECORDS,
)
from orcad.query import tokenize
from orcad.recall.render import (
    AUTOMATIC_FRAME_BYTES,
    DELIBERATE_FRAME_CHARS,
    automatic_line,
    deliberate_line,
)
from protocol.types import AutomaticEntry, Category, DeliberateEntry


class AutomaticCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """One ledger candidate as recall sees it; `recorded_at` in unix seconds."""

    id: str
    category: Category
    fact: str
    session_id: str
    turn_id: str
    recorded_at: float


def to_entry(candidate: AutomaticCandidate, now: float) -> AutomaticEntry:
    return AutomaticEntry(
        id=candidate.id,
        category=candidate.category,
        text=candidate.fact,
        age_s=round(max(0.0, now - candidate.recorded_at), 3),
        session_id=candidate.session_id,
        turn_id=candidate.turn_id,
        recorded_at=format_time(candidate.recorded_at),
    )


def cap_automatic(
    ranked: Iterable[AutomaticEntry],
    max_entries: int = RECALL_AUTOMATIC_MAX_ENTRIES,
    max_bytes: int = RECALL_AUTOMATIC_MAX_BYTES - AUTOMATIC_FRAME_BYTES,
) -> list[AutomaticEntry]:
    chosen: list[AutomaticEntry] = []
    used = 0
    for entry in ranked:
        if len(chosen) == max_entries:
            break
        size = len(automatic_line(entry).encode("utf-8"))
        if used + size <= max_bytes:
            chosen.append(entry)
            used += size
    return chosen


def cap_deliberate(
    ranked: Iterable[DeliberateEntry],
    now: float,
    max_records: int = RECALL_DELIBERATE_MAX_RECORDS,
    max_chars: int = RECALL_DELIBERATE_MAX_CHARS - DELIBERATE_FRAME_CHARS,
) -> list[DeliberateEntry]:
    chosen: list[DeliberateEntry] = []
    used = 0
    for entry in ranked:
        if len(chosen) == max_records:
            break
        size = len(deliberate_line(entry, now))
        if used + size <= max_chars:
            chosen.append(entry)
            used += size
    return chosen


# --- fallback ranking -----------------------------------------------------------------------

_VOWELS = frozenset("aeiouy")
_KEEP_DOUBLE = frozenset("lsz")


def _has_vowel(text: str) -> bool:
    return any(char in _VOWELS for char in text)


def stem(word: str) -> str:
    """A light English suffix stripper, applied alike to queries and facts.

    Not Porter's algorithm, but it folds the same families that matter for recall:
    deploy/deploys/deployed/deploying/deployment, release/released/releasing, migrate/migration.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
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


def rank_by_overlap(
    candidates: Sequence[AutomaticCandidate],
    terms: Sequence[str],
    limit: int = RECALL_AUTOMATIC_MAX_ENTRIES,
    scan_limit: int = LEDGER_MAX_CANDIDATES,
) -> list[AutomaticCandidate]:
    """Candidates sharing at least one query term: rarer shared terms first, then newer first.

    Only the newest `scan_limit` candidates are scanned, so the work is bounded.
    """
    query = {stem(term) for term in terms if term}
    if not query or not candidates:
        return []
    pool = sorted(candidates, key=lambda c: c.recorded_at, reverse=True)[:scan_limit]
    documents = [(candidate, stems(candidate.fact) & query) for candidate in pool]
    frequency: dict[str, int] = {}
    for _candidate, shared in documents:
        for term in shared:
            frequency[term] = frequency.get(term, 0) + 1
    total = len(documents)
    scored = []
    for candidate, shared in documents:
        if shared:
            score = sum(math.log(1.0 + total / frequency[term]) for term in shared)
            scored.append((-score, -candidate.recorded_at, candidate.id, candidate))
    scored.sort(key=lambda item: item[:3])
    return [item[3] for item in scored[:limit]]
