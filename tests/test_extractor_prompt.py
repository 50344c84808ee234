"""The extractor prompt agrees with the parser and the limits that judge its answers.

A model only follows what the prompt says: a category, a limit or a rejected kind the prompt
drops or gets wrong makes every attempt of a careful model fail, or lets through what the spec
(What Is Captured) has the prompt reject. And a prompt edited without a new PROMPT_VERSION
leaves every ledger entry after it traced to instructions that never produced it.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from orcad import limits
from orcad.capture.output import CATEGORIES, NOTHING, parse_extractor_output
from orcad.providers import prompt

pytestmark = pytest.mark.pure

# The sha256 of each version's text. Editing extractor-prompt.md means a new PROMPT_VERSION and
# its digest here: the version in a job's provenance must name the words the model was given.
PROMPT_DIGESTS = {
    "extract-v1": "34fd51b0a46554bd01f2cbe6bf81c435b3f854615a70114fc28d71f40555e191",
}


def test_the_prompt_text_is_the_one_its_version_names() -> None:
    digest = hashlib.sha256(prompt.prompt_text().encode("utf-8")).hexdigest()
    assert PROMPT_DIGESTS.get(prompt.PROMPT_VERSION) == digest, (
        "extractor-prompt.md changed: give it a new PROMPT_VERSION and record its digest"
    )


def test_the_prompt_names_exactly_the_categories_the_parser_accepts() -> None:
    text = prompt.prompt_text()
    listed = set(re.findall(r"^- `(\w+)`:", text, flags=re.MULTILINE))
    assert listed == CATEGORIES
    allowed = re.search(r"category is one of (.+)\.$", text, flags=re.MULTILINE)
    assert allowed is not None
    assert set(re.findall(r'"(\w+)"', allowed.group(1))) == CATEGORIES


def test_the_prompt_states_the_limits_the_parser_enforces() -> None:
    text = " ".join(prompt.prompt_text().split())
    assert f"at most {limits.EXTRACTOR_FACT_MAX_CHARS} characters" in text
    assert f"Output at most {limits.EXTRACTOR_MAX_FACTS} facts" in text


def test_the_prompt_offers_nothing_as_the_only_empty_answer() -> None:
    text = " ".join(prompt.prompt_text().split())
    assert f"output the single word {NOTHING} and nothing else" in text
    assert parse_extractor_output(NOTHING) == []


def test_the_example_answer_in_the_prompt_parses() -> None:
    examples = [
        line.strip()
        for line in prompt.prompt_text().splitlines()
        if line.strip().startswith('{"category"')
    ]
    assert examples
    for example in examples:
        facts = parse_extractor_output(example)
        assert [(fact.category, fact.fact) for fact in facts] == [
            (value["category"], value["fact"]) for value in [json.loads(example)]
        ]


@pytest.mark.parametrize(
    "rejected",
    [
        "transient task state",
        "summaries of code",
        "raw tool output",
        "credentials and private values",
        "unverified claims",
    ],
)
def test_the_prompt_rejects_each_kind_the_spec_names(rejected: str) -> None:
    text = prompt.prompt_text()
    rejections = text[text.index("Reject, and never output:") :]
    assert f"- {rejected}" in rejections


def test_the_model_is_given_the_prompt_and_the_source_only() -> None:
    # no project identity, path or other metadata reaches the provider (spec: Storage)
    source = "user: We deploy with make release."
    messages = prompt.render_messages(source)
    assert messages == [
        {"role": "system", "content": prompt.prompt_text()},
        {"role": "user", "content": f"{prompt.EXCHANGE_MARKER}\n{source}"},
    ]
    assert prompt.render_text(source) == (
        f"{prompt.prompt_text()}\n\n{prompt.EXCHANGE_MARKER}\n{source}\n"
    )
