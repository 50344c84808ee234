"""Why recall filled an unrelated prompt's block, or missed a fact asked for in other words.

In process, without a daemon, with the built-in model and its own settings (MODEL.txt): every
prompt of a labelled set is ranked against the set's automatic part (its facts, top 6) and
deliberate part (its facts and 1,000 distractors, top 8), as bench/calibrate_recall.py ranks
them (`part_candidates`, `rank.rank`), with each prompt's gate from `Embeddings.query` as recall
computes it. For each unrelated prompt that gets entries, and each "other words" prompt whose
fact is not shown, it
prints the classifier's probability that the prompt is about nothing a project stores, the
prompt's gate, the best candidate's relevance (cosine + w x coverage) and text, what opened
the gate (that relevance, or a distinctive term), and for a miss where its fact stands in the
full ranking and its relevance. The deliberate part's lexical half comes from a real
deliberate store's bm25 search, and each part ranks twice what it shows, as recall fetches:
what this misses and fills matches bench/eval_recall.py's figures through the daemon on all
nine labelled sets to within one prompt a part (the same counts on seventh, eighth and
ninth).

    .venv/bin/python -m bench.why_recall [--set main] [--part automatic|deliberate] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.calibrate_recall import AUTOMATIC, DELIBERATE, POOL, DeliberateLexical, part_candidates
from bench.eval_recall import LABELLED_SETS, Labelled
from orcad.query import stems
from orcad.recall import rank
from orcad.recall.deliberate import NEAREST_PER_SHOWN
from orcad.recall.embedding import Embeddings
from orcad.recall.prompt_gate import gate_references

TEXT_SHOWN = 100  # characters of a candidate's text printed


def explain(name: str, part: str) -> list[dict[str, Any]]:
    labelled = Labelled.named(name)
    facts = [(i, t) for i, _c, _k, t in labelled.all_facts()]
    docs = facts if part == "automatic" else [("x", t) for t in labelled.distractors] + facts
    with tempfile.TemporaryDirectory(prefix="orcad-why-") as scratch:
        store = DeliberateLexical(docs, Path(scratch)) if part == "deliberate" else None
        try:
            return _explained(labelled, docs, part, store)
        finally:
            if store is not None:
                store.close()


def _explained(
    labelled: Labelled, docs: list[tuple[str, str]], part: str, store: DeliberateLexical | None
) -> list[dict[str, Any]]:
    embeddings = Embeddings.load("builtin")  # each prompt's vector and gate as recall's
    embedder = embeddings.embedder
    references = gate_references(embedder)  # for the probability printed
    assert embedder is not None and references is not None
    nearest = POOL if part == "automatic" else int(NEAREST_PER_SHOWN * POOL)
    shown_count, fetch = AUTOMATIC if part == "automatic" else DELIBERATE
    matrix = embedder.embed([t for _i, t in docs])
    doc_stems = [stems(t) for _i, t in docs]
    prompts = [prompt for _cls, prompt, _wanted in labelled.prompts]
    queries = embedder.embed(prompts)
    closest = references.nearest(queries)
    unrelated = references.probability(queries, prompts, closest)
    floor, weight = embedder.floor, embedder.lexical_weight
    found = []
    for number, ((cls, prompt, wanted), query) in enumerate(
        zip(labelled.prompts, queries, strict=True)
    ):
        if cls == "shares":
            continue
        distinctive, asked, candidates = part_candidates(
            docs, matrix, doc_stems, prompt, query, nearest=nearest, store=store
        )
        asked_for = embeddings.query(prompt)
        assert asked_for is not None
        gate = asked_for.gates.gate
        shown = rank.rank(
            candidates,
            semantic=True,
            limit=fetch,
            floor=floor,
            lexical_weight=weight,
            gate=gate,
            distinctive=distinctive,
            asked=asked,
        )[:shown_count]
        shown_ids = {docs[int(c.key)][0] for c in shown}
        if (cls == "none" and not shown) or (cls == "other" and shown_ids & set(wanted)):
            continue
        best = max(candidates, key=lambda c: rank.relevance(c, floor, weight))
        entry: dict[str, Any] = {
            "class": cls,
            "prompt": prompt,
            "unrelated_probability": round(float(unrelated[number]), 3),
            "gate": round(gate, 3),
            "best_relevance": round(rank.relevance(best, floor, weight), 3),
            "best_text": docs[int(best.key)][1][:TEXT_SHOWN],
            "opened_by": [
                *(["relevance"] if rank.relevance(best, floor, weight) >= gate else []),
                *sorted(
                    term
                    for term in distinctive
                    if any(rank.holds_distinctive(c.text, frozenset({term})) for c in candidates)
                ),
            ],
        }
        if cls == "other":
            ranked = rank.rank(
                candidates,
                semantic=True,
                limit=len(candidates),
                floor=floor,
                lexical_weight=weight,
                gate=None,
                asked=asked,
            )
            places = [n for n, c in enumerate(ranked) if docs[int(c.key)][0] in wanted]
            entry["fact_place"] = places[0] + 1 if places else None  # None: not fetched
            entry["fact_relevance"] = (
                round(rank.relevance(ranked[places[0]], floor, weight), 3) if places else None
            )
        found.append(entry)
    return found


def format_entries(name: str, part: str, entries: list[dict[str, Any]]) -> str:
    lines = [f"{name}, {part} part: {len(entries)} unrelated prompts filled or facts missed"]
    for entry in entries:
        lines.append(
            f"{entry['class']:<5} P(unrelated) {entry['unrelated_probability']:.3f}"
            f"  gate {entry['gate']:+.2f}  best {entry['best_relevance']:.2f}"
            f"  opened by {', '.join(entry['opened_by']) or 'nothing'}  | {entry['prompt']}"
        )
        if entry["class"] == "other":
            place = entry["fact_place"]
            lines.append(
                "      its fact: "
                + (
                    "not among the candidates fetched"
                    if place is None
                    else f"place {place}, relevance {entry['fact_relevance']:.2f}"
                )
            )
        lines.append(f"      best: {entry['best_text']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="main", choices=sorted(LABELLED_SETS))
    parser.add_argument("--part", default="automatic", choices=("automatic", "deliberate"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    entries = explain(args.set, args.part)
    print(json.dumps(entries) if args.json else format_entries(args.set, args.part, entries))


if __name__ == "__main__":
    main()
