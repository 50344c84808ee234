"""The automatic review auto mode applies to a memory change: deterministic, says why.

Refused: content matching the secret detector, empty content, content over
`AUTO_REVIEW_MAX_CHARS`, transient progress notes (what is being done right now is not durable),
and exact duplicates in the same scope. Forgetting a visible record is always accepted.
"""

from __future__ import annotations

import re

import msgspec

from orcad.limits import AUTO_REVIEW_MAX_CHARS
from orcad.secrets import secret_kinds


class ReviewVerdict(msgspec.Struct, frozen=True, kw_only=True):
    accepted: bool
    reason: str | None = None


# Phrases that mark a note about current work in progress rather than a durable fact.
_TRANSIENT = re.compile(
    r"\b("
    r"(currently|now|right now|still) (working|looking|fixing|debugging|investigating|running|"
    r"waiting|trying|implementing|writing|testing)"
    r"|(i am|i'm|we are|we're) (working|fixing|debugging|investigating|trying|implementing|"
    r"writing|testing|in the middle)"
    r"|in progress|wip|work in progress|next step|next steps|todo( for)? (today|now)|"
    r"(just|have just|has just) (finished|started|fixed|ran|run|added|updated|pushed|committed)"
    r"|so far|for now|at the moment|this session|this turn|today i|today we|"
    r"step \d+ (of|/) \d+|\d+ of \d+ (tests|steps|files) (pass|passing|done|remaining)"
    r")\b",
    re.IGNORECASE,
)


def is_transient_note(content: str) -> bool:
    return _TRANSIENT.search(content) is not None


def review_content(content: str, *, duplicate_id: str | None) -> ReviewVerdict:
    """The verdict on saving or updating to `content`; duplicate_id = an identical record's id."""
    text = content.strip()
    if not text:
        return ReviewVerdict(accepted=False, reason="automatic review: the content is empty")
    kinds = secret_kinds(text)
    if kinds:
        return ReviewVerdict(
            accepted=False, reason=f"automatic review: the content looks like a secret ({kinds})"
        )
    if len(text) > AUTO_REVIEW_MAX_CHARS:
        return ReviewVerdict(
            accepted=False,
            reason=f"automatic review: {len(text)} characters is over the "
            f"{AUTO_REVIEW_MAX_CHARS}-character limit for a memory; keep one short durable fact",
        )
    if is_transient_note(text):
        return ReviewVerdict(
            accepted=False,
            reason="automatic review: this reads as a note about current progress, "
            "not a durable fact",
        )
    if duplicate_id is not None:
        return ReviewVerdict(
            accepted=False, reason=f"automatic review: an identical record exists ({duplicate_id})"
        )
    return ReviewVerdict(accepted=True)
