"""The labelled recall evaluation: well-formed data, the scoring, and the figures on the real
paths (a real daemon with the built-in embedding model)."""

from __future__ import annotations

import pytest

from bench.eval_data import STALE
from bench.eval_recall import LABELLED_SETS, Labelled, run, score
from orcad.recall.embedding import load_embedder
from orcad.recall.prompt_gate import PROJECT_PROMPTS, UNRELATED_PROMPTS, read_prompts

pytestmark = pytest.mark.daemon


@pytest.mark.parametrize("name", sorted(LABELLED_SETS))
def test_evaluation_set_is_well_formed(name: str) -> None:
    labelled = Labelled.named(name)
    facts, corrections, prompts = labelled.facts, labelled.corrections, labelled.prompts
    ids = [fact_id for fact_id, *_rest in facts] + [new for new, *_rest in corrections]
    texts = [text for *_rest, text in facts] + [text for *_rest, text in corrections]
    assert len(ids) >= 128 and len(prompts) >= 100
    assert len(set(ids)) == len(ids) and len(set(texts)) == len(texts)
    assert all(len(text) <= 400 for text in texts)  # each fits an extracted fact
    noise = labelled.distractors
    assert len(noise) >= 1000 and len(set(noise)) == len(noise) and not set(noise) & set(texts)
    classes = {kind for kind, _prompt, _wanted in prompts}
    assert classes == {"shares", "other", "none"}
    assert len({prompt for _kind, prompt, _wanted in prompts}) == len(prompts)
    for kind, _prompt, wanted in prompts:
        assert (kind == "none") == (not wanted)
        assert set(wanted) <= set(ids)
    stale = labelled.stale
    assert set(stale.values()) <= set(ids) and any(new in w for *_p, w in prompts for new in stale)
    # the reference prompts that set each prompt's gate were written without these prompts;
    # one copied in, or a close paraphrase, would be measured as its own answer
    model = load_embedder("builtin")
    assert model is not None
    asked = model.embed([prompt for _kind, prompt, _wanted in prompts])
    for path in (UNRELATED_PROMPTS, PROJECT_PROMPTS):
        closest = (model.embed(read_prompts(path)) @ asked.T).max()
        assert closest < PARAPHRASE, (path, closest)


# Close paraphrases score 0.79-0.98 with the built-in model, two different requests of one kind
# ("undo that" / "no no no, revert that") 0.66-0.72. Its int8 products differ between CPUs
# (tests/test_recall_embedding.py: INT8_KERNELS_DIFFER): one pair scores 0.683 with the float
# weights, 0.691 where the products are exact and 0.708 on an AVX2 CPU without VNNI. So the
# line sits between the two groups, clear of that.
PARAPHRASE = 0.75


@pytest.mark.parametrize(
    ("prompt", "paraphrase"),
    [
        ("How many approvals does a pull request need?", "how many approvals does a PR need"),
        ("undo that", "revert that"),
        ("how do vaccines work", "explain how vaccines work"),
    ],
)
def test_a_close_paraphrase_is_over_the_line_the_reference_prompts_keep_under(
    prompt: str, paraphrase: str
) -> None:
    model = load_embedder("builtin")
    assert model is not None
    vectors = model.embed([prompt, paraphrase])
    assert vectors[0] @ vectors[1] > PARAPHRASE


def test_score_counts_hits_ranks_empty_parts_and_stale_first() -> None:
    rows = [
        {"wanted": ["b"], "automatic": ["a", "b"], "automatic_bytes": 10},
        {"wanted": ["b"], "automatic": ["x", "y", "z", "w", "v", "u", "b"], "automatic_bytes": 0},
        {"wanted": ["c"], "automatic": [], "automatic_bytes": 20},
    ]
    figures = score("automatic", rows, STALE)
    assert figures["hit@6"] == round(1 / 3, 3)
    assert figures["mrr"] == round((1 / 2 + 1 / 7) / 3, 3)
    assert figures["mean_bytes"] == 10.0
    new, old = next(iter(STALE.items()))
    stale = [
        {"wanted": [new], "automatic": [old, new], "automatic_bytes": 0},
        {"wanted": [new], "automatic": [old], "automatic_bytes": 0},
        {"wanted": [new], "automatic": [new, old], "automatic_bytes": 0},
    ]
    assert score("automatic", stale, STALE)["stale_first"] == 2
    empty = [
        {"wanted": [], "automatic": [], "automatic_bytes": 0},
        {"wanted": [], "automatic": ["a"], "automatic_bytes": 5},
    ]
    assert score("automatic", empty, STALE)["empty"] == 0.5


# (shares automatic, shares deliberate, other automatic, other deliberate, none automatic, none
# deliberate) that each set must keep, a little under what the built-in model was measured at
# (README, "Measuring recall"), each set's measured figures beside it. all-MiniLM-L6-v2 before
# its fine-tuning measured main 1.0 / 1.0, 0.77 / 0.541, 0.98 / 0.961; fresh 1.0 / 1.0, 0.786 /
# 0.571, 0.886 / 0.886; check 1.0 / 1.0, 0.682 / 0.5, 0.886 / 0.886; fourth 1.0 / 1.0, 0.659 /
# 0.386, 0.8 / 0.8: the fine-tuned model finds far more facts asked for in other words and
# leaves two more of check's unrelated prompts filled and one more of fourth's (docs/recall.md, "The
# embedding model").
FLOORS = {
    # 0.981 / 0.981, 0.838 / 0.77, 0.98 / 0.98
    "main": (0.97, 0.97, 0.82, 0.62, 0.95, 0.95),
    # 1.0 / 1.0, 0.952 / 0.905, 0.914 / 0.914
    "fresh": (0.97, 0.97, 0.92, 0.83, 0.88, 0.88),
    # 1.0 / 1.0, 0.75 / 0.705, 0.857 / 0.857
    "check": (0.97, 0.97, 0.72, 0.63, 0.83, 0.83),
    # 1.0 / 1.0, 0.818 / 0.75, 0.829 / 0.829 (0.841 in the automatic part before it was ordered
    # from the ledger's centre)
    "fourth": (0.97, 0.97, 0.79, 0.72, 0.8, 0.8),
    # 1.0 / 1.0, 0.911 / 0.844 (0.889 / 0.889 with AVX2 alone, before the eighth round), 0.541 /
    # 0.541: written after the built-in model and its settings and never used to choose
    # anything, but the eighth round of reference prompts was briefed with some of its misses
    # (docs/recall.md), so it no longer judges that round
    "fifth": (0.97, 0.97, 0.88, 0.84, 0.52, 0.52),
    # 0.972 / 0.972, 0.889 / 0.778, 0.889 / 0.861: written blind after everything else and
    # never used to choose anything (but the compound-name rule came after its misses)
    "sixth": (0.94, 0.94, 0.86, 0.77, 0.83, 0.83),
    # 1.0 / 1.0, 0.889 / 0.833, 0.775 / 0.75: written blind, before the eighth round of
    # reference prompts and without sight of it
    "seventh": (0.97, 0.97, 0.86, 0.8, 0.72, 0.72),
    # 1.0 / 1.0, 0.75 / 0.778, 0.8 / 0.8 (0.806 in the automatic part before it was ordered from
    # the ledger's centre): written blind after the eighth round of reference prompts, whose
    # author never saw it; nothing has been chosen after its misses
    "eighth": (0.97, 0.97, 0.72, 0.75, 0.77, 0.77),
    # 0.972 / 0.972, 0.75 / 0.722, 0.725 / 0.725: written blind after everything else; it has
    # judged five changes since, one kept (the automatic part ordered from the ledger's centre,
    # which changed none of its figures here) (docs/recall.md, "A ninth set, written blind"),
    # and nothing was chosen on it
    "ninth": (0.94, 0.94, 0.72, 0.69, 0.7, 0.7),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LABELLED_SETS))
def test_recall_figures_on_each_labelled_set(name: str) -> None:
    """What the built-in model achieves on each set (README "Measuring recall"): words-sharing
    prompts found, corrections never below what they correct, most unrelated prompts empty,
    and as many facts asked for in other words as measured."""
    report = run(labelled=Labelled.named(name))
    misses = report["misses"]
    floors = iter(FLOORS[name])
    for kind, empty in (("shares", False), ("other", False), ("none", True)):
        for part, hit in (("automatic", "hit@6"), ("deliberate", "hit@8")):
            figure = report[kind][part]["empty" if empty else hit]
            assert figure >= next(floors), (kind, part, figure, misses)
            if not empty:
                assert report[kind][part]["stale_first"] == 0, report["stale"]
