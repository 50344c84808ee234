"""The labelled recall evaluation: well-formed data, and the hit@6 target on the real paths."""

from __future__ import annotations

from bench.eval_data import FACTS, PROMPTS
from bench.eval_recall import run, score


def test_evaluation_set_is_well_formed() -> None:
    ids = [fact_id for fact_id, _category, _kind, _text in FACTS]
    texts = [text for _id, _category, _kind, text in FACTS]
    assert len(FACTS) >= 100 and len(PROMPTS) >= 40
    assert len(set(ids)) == len(ids) and len(set(texts)) == len(texts)
    assert all(len(text) <= 400 for text in texts)  # each fits an extracted fact
    for _prompt, wanted in PROMPTS:
        assert wanted and set(wanted) <= set(ids)


def test_score_counts_hits_in_the_first_six_and_reciprocal_ranks() -> None:
    rankings = [["a", "b"], ["x", "y", "z", "w", "v", "u", "b"], []]
    figures = score(rankings, [["b"], ["b"], ["c"]])
    assert figures["hit@6"] == round(1 / 3, 3)
    assert figures["mrr"] == round((1 / 2 + 1 / 7) / 3, 3)


def test_recall_meets_the_hit_at_6_target_on_the_evaluation_set() -> None:
    report = run()
    assert report["automatic"]["hit@6"] >= 0.9, report["misses"]
    assert report["deliberate"]["hit@6"] >= 0.9, report["misses"]
    assert report["fallback"]["hit@6"] >= 0.9
