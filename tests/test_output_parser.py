"""The strict extractor-output parser (orcad/capture/output.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orcad import limits
from orcad.capture.output import MalformedOutput, parse_extractor_output
from orcad.control_characters import INVISIBLE_CHARACTERS, has_visible_character
from protocol.types import ExtractedFact
from tests.harness import REPO_ROOT

pytestmark = pytest.mark.pure


def line(category: str, fact: str) -> str:
    return json.dumps({"category": category, "fact": fact})


VALID = [
    ("NOTHING", []),
    ("  \n NOTHING \n\n", []),
    (
        line("user", "The user prefers short answers."),
        [("user", "The user prefers short answers.")],
    ),
    (
        "\n".join(
            [
                line("project", "Deploys go through make release."),
                "",
                line("reference", " https://docs.example.org/runbook "),
            ]
        ),
        [
            ("project", "Deploys go through make release."),
            ("reference", "https://docs.example.org/runbook"),
        ],
    ),
    (
        "```\n" + line("feedback", "Run the linter before committing.") + "\n```",
        [("feedback", "Run the linter before committing.")],
    ),
    (
        "```json\n" + line("user", "Likes tabs.") + "\n\n" + line("user", "Likes vim.") + "\n```\n",
        [("user", "Likes tabs."), ("user", "Likes vim.")],
    ),
    # a model labels a fence of JSON lines as it likes: JSON, jsonl, ndjson
    *(
        (f"```{label}\n" + line("user", "Likes tabs.") + "\n```", [("user", "Likes tabs.")])
        for label in ("JSON", "jsonl", "JSONL", "ndjson", "json ")
    ),
    (
        line("project", "Uses CRLF") + "\r\n" + line("project", "Uses uv") + "\r\n",
        [("project", "Uses CRLF"), ("project", "Uses uv")],
    ),
    (line("project", "Unicode é ✓ \u2028 inside"), [("project", "Unicode é ✓ \u2028 inside")]),
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_valid_outputs_parse_to_trimmed_facts(text: str, expected: list[tuple[str, str]]) -> None:
    facts = parse_extractor_output(text)
    assert [(fact.category, fact.fact) for fact in facts] == expected


MALFORMED = [
    ("", "empty"),
    ("   \n\t\n", "empty"),
    ("nothing", "not a JSON object"),
    ("NOTHING.", "not a JSON object"),
    ("NOTHING\n" + line("user", "x"), "not a JSON object"),
    ("```\nNOTHING\n```", "not a JSON object"),
    ("Here are the facts:\n" + line("user", "x"), "line 1: not a JSON object"),
    (line("user", "x") + "\nThanks!", "line 2: not a JSON object"),
    ('["user", "x"]', "not a JSON object"),
    ('"just a string"', "not a JSON object"),
    ('{"category": "user", "fact": "x"} {"category": "user", "fact": "y"}', "not a JSON object"),
    ('{"category": "user", "fact": "x", "confidence": 0.9}', "unexpected key 'confidence'"),
    ('{"category": "user"}', "missing key 'fact'"),
    ('{"fact": "x"}', "missing key 'category'"),
    ('{"category": "user", "category": "project", "fact": "x"}', "not a JSON object"),
    (line("preference", "x"), "unknown category"),
    (line("User", "x"), "unknown category"),
    ('{"category": null, "fact": "x"}', "unknown category"),
    ('{"category": "user", "fact": 3}', "fact is not a string"),
    ('{"category": "user", "fact": "x\\ud800y"}', "fact is not valid UTF-8"),  # lone surrogate
    (line("user", "   "), "fact is empty"),
    (line("user", ""), "fact is empty"),
    ("```\n" + line("user", "x"), "not closed"),
    ("```python\n" + line("user", "x") + "\n```", "only ```, ```json, ```jsonl or ```ndjson"),
    ("```yaml\n" + line("user", "x") + "\n```", "may open the code fence"),
    ("```json5\n" + line("user", "x") + "\n```", "may open the code fence"),
    ("```\n```\n" + line("user", "x") + "\n```\n```", "only one surrounding code fence"),
    ("```\n```", "no fact lines"),
    ("\ud800", "not valid UTF-8"),
]


@pytest.mark.parametrize(("text", "reason"), MALFORMED)
def test_malformed_outputs_are_rejected_with_a_short_reason(text: str, reason: str) -> None:
    with pytest.raises(MalformedOutput) as caught:
        parse_extractor_output(text)
    assert reason in caught.value.reason
    assert len(caught.value.reason) <= 200


def test_a_secret_quoted_in_a_reason_is_redacted_before_the_reason_is_shortened() -> None:
    token = "ghp_" + "Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA9eK2"
    key = "k" * 160 + " " + token  # the token straddles the 200-character cut of the reason
    with pytest.raises(MalformedOutput) as caught:
        parse_extractor_output(json.dumps({"category": "user", "fact": "x", key: 1}))
    assert "unexpected key" in caught.value.reason
    assert "Qm8v" not in caught.value.reason and "Qm8v" not in str(caught.value)
    assert len(caught.value.reason) <= 200


def test_eight_facts_pass_and_nine_fail() -> None:
    eight = "\n".join(
        line("project", f"Fact number {n}.") for n in range(limits.EXTRACTOR_MAX_FACTS)
    )
    assert len(parse_extractor_output(eight)) == 8
    nine = eight + "\n" + line("project", "One too many.")
    with pytest.raises(MalformedOutput, match="more than 8 facts"):
        parse_extractor_output(nine)


def test_fact_of_400_characters_passes_and_401_fails() -> None:
    at_limit = "é" * limits.EXTRACTOR_FACT_MAX_CHARS  # characters, not bytes
    padded = "  " + at_limit + "\t"  # trimming happens before the length check
    assert parse_extractor_output(line("user", padded))[0].fact == at_limit
    with pytest.raises(MalformedOutput, match="401 characters"):
        parse_extractor_output(line("user", at_limit + "x"))


def test_output_of_16_kib_passes_and_one_byte_more_fails() -> None:
    fact_line = line("project", "x" * 300)
    body = "\n".join([fact_line] * 3)
    padding = limits.EXTRACTOR_OUTPUT_MAX_BYTES - len(body.encode())
    exact = body + "\n" * padding  # blank lines count toward the byte limit
    assert len(exact.encode()) == limits.EXTRACTOR_OUTPUT_MAX_BYTES
    assert len(parse_extractor_output(exact)) == 3
    with pytest.raises(MalformedOutput, match="16385 bytes"):
        parse_extractor_output(exact + " ")


def test_byte_limit_counts_utf8_bytes_not_characters() -> None:
    raw = '{"category": "project", "fact": "' + "€" * 400 + '"}'  # € is three UTF-8 bytes
    assert parse_extractor_output(raw)[0].fact == "€" * 400
    over = raw + " " * (limits.EXTRACTOR_OUTPUT_MAX_BYTES + 1 - len(raw.encode()))
    assert len(over) < limits.EXTRACTOR_OUTPUT_MAX_BYTES < len(over.encode())
    with pytest.raises(MalformedOutput, match="16385 bytes"):
        parse_extractor_output(over)


def test_deeply_nested_json_is_malformed_not_a_crash() -> None:
    with pytest.raises(MalformedOutput):
        parse_extractor_output("[" * 8000 + "]" * 8000)


def test_parser_module_is_pure() -> None:
    code = (
        "import sys, orcad.capture.output; "
        "print(sorted(m for m in ('trio', 'sqlite3') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert result.stdout.strip() == "[]"


categories = st.sampled_from(["user", "feedback", "project", "reference"])
facts_text = st.text(min_size=1, max_size=limits.EXTRACTOR_FACT_MAX_CHARS).filter(
    lambda text: text.strip() == text and text != ""
)
# the bidirectional formatting characters: marks, embeddings, overrides and isolates
BIDI_CONTROLS = frozenset({"LRE", "RLE", "PDF", "LRO", "RLO", "LRI", "RLI", "FSI", "PDI"})
BIDI_MARKS = "\u061c\u200e\u200f"


def escaped_by_the_parser(char: str) -> bool:
    return (
        (unicodedata.category(char) == "Cc" and char not in "\t\n")
        or unicodedata.bidirectional(char) in BIDI_CONTROLS
        or char in BIDI_MARKS
        or 0xE0000 <= ord(char) <= 0xE007F  # tag characters: text no reader sees
    )


# the invisible characters the parser writes as escapes too (joiners and presentation selectors
# only where they show nothing: kept out of the round trip's facts altogether)
INVISIBLE = re.compile(f"[{INVISIBLE_CHARACTERS}]")

# facts a round trip keeps as they are: no character the parser writes as an escape, and one
# that shows (a fact of invisible characters alone, a soft hyphen say, is refused)
plain_facts_text = facts_text.filter(
    lambda text: (
        not any(map(escaped_by_the_parser, text))
        and not INVISIBLE.search(text)
        and has_visible_character(text)
    )
)


@given(
    facts=st.lists(
        st.tuples(categories, plain_facts_text), min_size=1, max_size=limits.EXTRACTOR_MAX_FACTS
    ),
    fenced=st.sampled_from([None, "```", "```json"]),
    ascii_json=st.booleans(),
)
def test_valid_outputs_round_trip(
    facts: list[tuple[str, str]], fenced: str | None, ascii_json: bool
) -> None:
    lines = [json.dumps({"category": c, "fact": f}, ensure_ascii=ascii_json) for c, f in facts]
    if fenced:
        lines = [fenced, *lines, "```"]
    text = "\n".join(lines)
    if len(text.encode()) > limits.EXTRACTOR_OUTPUT_MAX_BYTES:
        with pytest.raises(MalformedOutput):
            parse_extractor_output(text)
        return
    parsed = parse_extractor_output(text)
    assert parsed == [ExtractedFact(category=c, fact=f) for c, f in facts]  # type: ignore[arg-type]


@given(st.text(max_size=2000))
def test_arbitrary_text_only_ever_raises_malformed_output(text: str) -> None:
    try:
        facts = parse_extractor_output(text)
    except MalformedOutput as exc:
        assert exc.reason
        return
    assert len(facts) <= limits.EXTRACTOR_MAX_FACTS
    assert all(0 < len(fact.fact) <= limits.EXTRACTOR_FACT_MAX_CHARS for fact in facts)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    st.lists(
        st.dictionaries(st.sampled_from(["category", "fact", "extra"]), json_values),
        min_size=1,
        max_size=10,
    )
)
def test_arbitrary_json_lines_only_ever_raise_malformed_output(
    objects: list[dict[str, object]],
) -> None:
    text = "\n".join(json.dumps(obj) for obj in objects)
    try:
        facts = parse_extractor_output(text)
    except MalformedOutput:
        return
    assert len(facts) == len(objects)
    for obj, fact in zip(objects, facts, strict=True):
        assert set(obj) == {"category", "fact"}
        assert obj["category"] == fact.category
        assert isinstance(obj["fact"], str)
        assert obj["fact"].strip() == fact.fact


def test_control_and_bidirectional_characters_in_a_fact_are_written_as_escapes() -> None:
    fact = "deploy with \x1b]0;owned\x07make \u202erelease\u202c\x7f\x85\tnow\nthen"
    [parsed] = parse_extractor_output(line("project", fact))
    assert parsed.fact == (
        "deploy with \\x1b]0;owned\\x07make \\u202erelease\\u202c\\x7f\\x85\tnow\nthen"
    )


@given(facts_text)
def test_no_parsed_fact_holds_a_control_character(fact: str) -> None:
    try:
        [parsed] = parse_extractor_output(line("user", fact))
    except MalformedOutput:
        return
    assert not any(map(escaped_by_the_parser, parsed.fact))


@pytest.mark.parametrize("fact", ["\xad", "\u200b\u200d", "\x00", "\u202e\u202c"])
def test_a_fact_of_invisible_characters_alone_is_refused(fact: str) -> None:
    with pytest.raises(MalformedOutput, match="only control or invisible characters"):
        parse_extractor_output(line("user", fact))
