"""Calibrate recall's lexical weight, floor and gate on the labelled set (bench/eval_data.py).

In process, without a daemon: every fact, correction and distractor is embedded with the chosen
model, and for each prompt the ranking module (orcad/recall/rank.py) ranks all of them (the
automatic part: the 128 ledger facts, top 6; the deliberate part: facts plus 1,000 distractors,
top 8) for a grid of weights, floors and gates. Prints, per setting, hit@k of the "shares" and
"other" classes, the share of "none" prompts left empty, and stale-first counts, and the best
setting at each weight; the chosen setting is the one that keeps automatic "shares" hit@6 >=
0.95 (or its best), has a lexical weight of at least MIN_LEXICAL_WEIGHT, and maximises the sum
of the other figures.

    .venv/bin/python -m bench.calibrate_recall [--model DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_data import CORRECTIONS, FACTS, PROMPTS, STALE, distractors
from orcad.query import derive_query_terms, stem, stems
from orcad.recall import rank
from orcad.recall.embedding import BUILTIN_DIR, load_embedder

POOL = 16  # per kind of match, as recall fetches
# A prompt that shares one distinctive word with a fact in other forms ("deploying" for
# "deploys") has a cosine of about 0.4 with it; below this weight its words cannot lift it over
# the gate, and a small store (where this set's 128 facts do not reach) then answers nothing.
MIN_LEXICAL_WEIGHT = 0.3
ALL = [(f, t) for f, _c, _k, t in FACTS] + [(n, t) for n, _o, _c, _k, t in CORRECTIONS]


def part_candidates(docs, matrix, doc_stems, prompt, query):  # type: ignore[no-untyped-def]
    terms = derive_query_terms(prompt)
    frequency = {t: sum(1 for s in doc_stems if stem(t) in s) for t in terms}
    weights = rank.query_weights(terms, frequency, len(docs))
    cosines = matrix @ query
    covered = [rank.coverage(s, weights) for s in doc_stems]
    # the pool recall builds: the nearest vectors and the best lexical matches
    nearest = np.argsort(-cosines)[:POOL]
    lexical = [
        i for i in sorted(range(len(docs)), key=lambda i: -covered[i])[:POOL] if covered[i] > 0
    ]
    return [
        rank.Candidate(
            key=f"{i}",
            text=docs[i][1],
            recorded_at=float(i),
            coverage=covered[i],
            cosine=float(cosines[i]),
        )
        for i in sorted({*map(int, nearest), *lexical})
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(BUILTIN_DIR))
    args = parser.parse_args()
    embedder = load_embedder(args.model)
    assert embedder is not None
    parts = {
        "automatic": (ALL, 6),
        "deliberate": ([("x", t) for t in distractors()] + ALL, 8),
    }
    prepared = {}
    for name, (docs, top) in parts.items():
        matrix = embedder.embed([t for _i, t in docs])
        doc_stems = [stems(t) for _i, t in docs]
        prepared[name] = (
            docs,
            top,
            [
                (
                    cls,
                    wanted,
                    part_candidates(docs, matrix, doc_stems, prompt, embedder.embed([prompt])[0]),
                )
                for cls, prompt, wanted in PROMPTS
            ],
        )
    results = []
    settings = [
        (weight, round(float(floor), 2), round(float(gate), 2))
        for weight in (0.0, 0.1, 0.2, 0.3, 0.5, 0.7)
        for floor in np.arange(0.1, 0.7, 0.02)
        for gate in np.arange(0.3, 0.8, 0.02)
        if gate >= floor - 1e-9
    ]
    for weight, floor, gate in settings:
        row = {"weight": weight, "floor": floor, "gate": gate}
        for name, (docs, top, prompts) in prepared.items():
            hits = {"shares": [], "other": [], "none": []}
            stale = 0
            for cls, wanted, candidates in prompts:
                ranked = [
                    docs[int(c.key)][0]
                    for c in rank.rank(
                        candidates,
                        semantic=True,
                        limit=top,
                        floor=floor,
                        lexical_weight=weight,
                        gate=gate,
                    )
                ]
                if cls == "none":
                    hits[cls].append(not ranked)
                else:
                    hits[cls].append(bool(set(ranked) & set(wanted)))
                for new in wanted:
                    old = STALE.get(new)
                    if old in ranked and (
                        new not in ranked or ranked.index(old) < ranked.index(new)
                    ):
                        stale += 1
            for cls, values in hits.items():
                row[f"{name[:4]}_{cls}"] = round(sum(values) / len(values), 3)
            row[f"{name[:4]}_stale"] = stale
        results.append(row)
    # the "shares" class must not lose what lexical recall already finds; among the settings
    # that keep it, the one that answers most of the rest right
    top_shares = max(r["auto_shares"] for r in results)
    feasible = [r for r in results if r["auto_shares"] >= min(0.95, top_shares)]

    def merit(r: dict[str, float]) -> tuple[float, float, float]:
        figures = ("auto_other", "deli_other", "auto_none", "deli_none", "deli_shares")
        return (sum(r[k] for k in figures), r["gate"], r["floor"])

    for weight in sorted({r["weight"] for r in feasible}):
        print(
            "best at weight", weight, max((r for r in feasible if r["weight"] == weight), key=merit)
        )
    best = max((r for r in feasible if r["weight"] >= MIN_LEXICAL_WEIGHT), key=merit)
    keys = list(results[0])
    print(" ".join(f"{k:>13}" for k in keys))
    for r in results:
        if (r["floor"] == best["floor"] and r["gate"] * 100 % 4 == 2) or r is best:
            print(" ".join(f"{r[k]:>13}" for k in keys) + ("  <- chosen" if r is best else ""))
    print("chosen:", best)


if __name__ == "__main__":
    main()
