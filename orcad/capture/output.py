"""The strict extractor-output parser: what a provider must answer, and nothing else.

Every provider and `jobs.publish` go through `parse_extractor_output`. Anything that is not
exactly the documented format is a failed attempt, never a zero-candidate success: the only
way to say "no durable fact" is the single word NOTHING.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from orcad import limits
from orcad.control_characters import escape_control_characters, has_visible_character
from orcad.secrets import redact, shorten_redacted
from protocol.types import Category, ExtractedFact

NOTHING = "NOTHING"
CATEGORIES: frozenset[str] = frozenset(get_args(Category))
_FIELDS = frozenset({"category", "fact"})
# a fence of JSON lines, labelled as models label it (any case): JSON, JSON Lines, NDJSON
_OPENING_FENCES = frozenset({"```", "```json", "```jsonl", "```ndjson"})
_CLOSING_FENCE = "```"
_REASON_MAX_CHARS = 200


class MalformedOutput(ValueError):
    """The output breaks the format; `reason` is short and safe to record in the job."""

    def __init__(self, reason: str) -> None:
        # a reason may quote the output (an unexpected key): redacted whole, then shortened
        self.reason = shorten_redacted(redact(reason), _REASON_MAX_CHARS)
        super().__init__(self.reason)


def parse_extractor_output(text: str) -> list[ExtractedFact]:
    """The facts in one extractor output, with each fact trimmed.

    Returns [] only for the explicit NOTHING; raises MalformedOutput for everything that is
    not the documented format (empty output included).
    """
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise MalformedOutput("output is not valid UTF-8 text") from exc
    if size > limits.EXTRACTOR_OUTPUT_MAX_BYTES:
        raise MalformedOutput(
            f"output is {size} bytes, over the {limits.EXTRACTOR_OUTPUT_MAX_BYTES}-byte limit"
        )
    stripped = text.strip()
    if not stripped:
        raise MalformedOutput("output is empty; NOTHING is the only way to report no fact")
    if stripped == NOTHING:
        return []
    facts: list[ExtractedFact] = []
    for number, line in _content_lines(stripped):
        if len(facts) == limits.EXTRACTOR_MAX_FACTS:
            raise MalformedOutput(f"more than {limits.EXTRACTOR_MAX_FACTS} facts")
        facts.append(_parse_fact_line(number, line))
    if not facts:
        raise MalformedOutput("output holds no fact lines")
    return facts


def _content_lines(stripped: str) -> list[tuple[int, str]]:
    """Non-blank lines (1-based numbers) with one surrounding code fence removed."""
    lines = [line.rstrip("\r") for line in stripped.split("\n")]
    if lines[0].strip().startswith(_CLOSING_FENCE):
        if lines[0].strip().lower() not in _OPENING_FENCES:
            raise MalformedOutput(
                "line 1: only ```, ```json, ```jsonl or ```ndjson may open the code fence"
            )
        if len(lines) < 2 or lines[-1].strip() != _CLOSING_FENCE:
            raise MalformedOutput("code fence is not closed on the last line")
        numbered = list(enumerate(lines, start=1))[1:-1]
    else:
        numbered = list(enumerate(lines, start=1))
    content = [(number, line.strip()) for number, line in numbered if line.strip()]
    for number, line in content:
        if line.startswith(_CLOSING_FENCE):
            raise MalformedOutput(f"line {number}: only one surrounding code fence is allowed")
    return content


def _parse_fact_line(number: int, line: str) -> ExtractedFact:
    try:
        value = json.loads(line, object_pairs_hook=_object_without_repeats)
    except (ValueError, RecursionError) as exc:
        raise MalformedOutput(f"line {number}: not a JSON object") from exc
    if not isinstance(value, dict):
        raise MalformedOutput(f"line {number}: not a JSON object")
    keys = set(value)
    if keys != _FIELDS:
        extra = sorted(keys - _FIELDS)
        missing = sorted(_FIELDS - keys)
        detail = f"unexpected key {extra[0]!r}" if extra else f"missing key {missing[0]!r}"
        raise MalformedOutput(f"line {number}: {detail}")
    category, fact = value["category"], value["fact"]
    if not isinstance(category, str) or category not in CATEGORIES:
        raise MalformedOutput(f"line {number}: unknown category")
    if not isinstance(fact, str):
        raise MalformedOutput(f"line {number}: fact is not a string")
    if not _is_utf8_text(fact):  # a \ud800 escape decodes to a lone surrogate
        raise MalformedOutput(f"line {number}: fact is not valid UTF-8 text")
    fact = fact.strip()
    if not fact:
        raise MalformedOutput(f"line {number}: fact is empty")
    if not has_visible_character(fact):  # kept, it would be recalled as a line of escapes
        raise MalformedOutput(f"line {number}: fact holds only control or invisible characters")
    if len(fact) > limits.EXTRACTOR_FACT_MAX_CHARS:
        raise MalformedOutput(
            f"line {number}: fact is {len(fact)} characters, over the "
            f"{limits.EXTRACTOR_FACT_MAX_CHARS}-character limit"
        )
    # the ledger never holds a terminal escape or a bidirectional override: the limit is the
    # model's, counted before the escapes that make them visible
    fact = escape_control_characters(fact)
    return ExtractedFact(category=category, fact=fact)  # type: ignore[arg-type]


def _is_utf8_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _object_without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("repeated key")
    return dict(pairs)
