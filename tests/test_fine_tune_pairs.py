"""The pairs the built-in model was fine-tuned on (scripts/fine_tune_pairs.jsonl): well-formed,
read strictly, and apart from the labelled sets that judge recall."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.eval_recall import LABELLED_SETS, Labelled
from scripts.fine_tune_model import PAIRS, PROMPTS_PER_FACT, check_directories, read_pairs

pytestmark = pytest.mark.pure


def words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", text.lower()))


def test_shipped_pairs_are_well_formed_and_distinct() -> None:
    records = read_pairs(PAIRS)
    assert len(records) >= 900
    facts = [r["fact"] for r in records]
    assert len(set(facts)) == len(facts)
    prompts = [p for r in records for p in r["prompts"]]
    assert len(prompts) == PROMPTS_PER_FACT * len(records)
    assert not set(facts) & {r["hard_negative"] for r in records}


@pytest.mark.slow
def test_shipped_pairs_stay_apart_from_the_labelled_sets() -> None:
    """A training text that overlaps a labelled fact or prompt by more than half its words
    (Jaccard) would let the sets measure what the model was taught, not what it learned."""
    judged = []
    for name in LABELLED_SETS:
        labelled = Labelled.named(name)
        judged += [words(text) for *_rest, text in labelled.all_facts()]
        judged += [words(prompt) for _kind, prompt, _wanted in labelled.prompts]
    judged = [w for w in judged if len(w) >= 3]
    close = [
        text
        for record in read_pairs(PAIRS)
        for text in (record["fact"], record["hard_negative"], *record["prompts"])
        if len(mine := words(text)) >= 3
        and any(len(mine & theirs) / len(mine | theirs) > 0.5 for theirs in judged)
    ]
    assert close == []


GOOD = {"fact": "f", "kind": "fact", "prompts": ["a", "b", "c"], "hard_negative": "n"}


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("{not json", "not JSON"),
        ("[" * 100_000, "not JSON"),  # nested too deep for the parser
        (json.dumps([GOOD]), "expected an object"),
        (json.dumps({**GOOD, "extra": 1}), "expected exactly the fields"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "hard_negative"}), "expected exactly"),
        (json.dumps({**GOOD, "fact": 7}), "fact: expected a non-empty string"),
        (json.dumps({**GOOD, "fact": " "}), "fact: expected a non-empty string"),
        (json.dumps({**GOOD, "kind": "rumour"}), "kind: expected one of"),
        (json.dumps({**GOOD, "kind": ["fact"]}), "kind: expected one of"),
        (json.dumps({**GOOD, "prompts": ["a", "b"]}), "prompts: expected a list of 3"),
        (json.dumps({**GOOD, "prompts": "abc"}), "prompts: expected a list of 3"),
        (
            json.dumps({**GOOD, "prompts": ["a", " ", "c"]}),
            "prompts: expected 3 different non-empty strings",
        ),
        (
            json.dumps({**GOOD, "prompts": ["a", "a", "c"]}),
            "prompts: expected 3 different non-empty strings",
        ),
        (json.dumps({**GOOD, "hard_negative": ""}), "hard_negative: expected"),
        (json.dumps({**GOOD, "hard_negative": "f"}), "hard_negative: expected"),
        (json.dumps({**GOOD, "prompts": ["x", "y", "z"]}), "fact: the same as line 1's"),
    ],
)
def test_a_bad_line_is_named_with_its_number(tmp_path: Path, line: str, complaint: str) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"pairs.jsonl:3: {re.escape(complaint)}"):
        read_pairs(path)


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"cannot read .*missing\.jsonl"):
        read_pairs(tmp_path / "missing.jsonl")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(SystemExit, match=r"cannot read .*binary\.jsonl"):
        read_pairs(binary)


def test_the_source_must_hold_a_model_and_differ_from_the_output(tmp_path: Path) -> None:
    source = tmp_path / "model"
    source.mkdir()
    (source / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(SystemExit, match=re.escape("no model.safetensors, vocab.txt")):
        check_directories(source, tmp_path / "out")
    for name in ("model.safetensors", "vocab.txt"):
        (source / name).write_bytes(b"")
    check_directories(source, tmp_path / "out")
    with pytest.raises(SystemExit, match="is the source model's directory"):
        check_directories(source, source / ".." / "model")


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no records"):
        read_pairs(path)
