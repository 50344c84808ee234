"""Calibrate recall's lexical weight, floor, gate, unrelated and project weights and lexical
gate on the labelled set (bench/eval_data.py).

In process, without a daemon: every fact, correction and distractor is embedded with the chosen
model, and for each prompt the ranking module (orcad/recall/rank.py) ranks all of them (the
automatic part: the 128 ledger facts, top 6; the deliberate part: facts plus 1,000 distractors,
top 8; and a new user's small store: the prompt's wanted facts and three others, top 6) for a
grid of settings. A prompt's gate is `gate + unrelated_weight x the probability that it is
about nothing a project stores - project_weight x its cosine with the nearest of
orcad/recall/project_prompts.txt`, as the daemon computes it (`Embeddings.gate_for`; the
probability comes from a logistic regression over the prompt's vector and its cosines with the
nearest prompt of each set, fitted on orcad/recall/unrelated_prompts.txt against the project
prompts, none of them in the labelled set); a
candidate covering at least the lexical gate of the prompt's weighted terms opens it on its
words alone. Prints the best setting at each unrelated and project weight and the chosen one's
neighbours (hit@k of the "shares" and "other" classes, the share of "none" prompts left empty).
The chosen setting keeps "shares" hit@6 >= 0.95 (or its best) in the automatic part and >= 0.9
in the small store, has a lexical weight of at least MIN_LEXICAL_WEIGHT, leaves at least 85% of
the "none" prompts empty in the automatic and deliberate parts (or as many as any setting does),
and among those finds the most "other" facts in those parts. With --folds 2, it also chooses on
half of the prompts and scores the other half, as a check that the choice is not fitted to these
prompts alone.

    .venv/bin/python -m bench.calibrate_recall [--model DIR] [--folds 2]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_data import CORRECTIONS, FACTS, PROMPTS, distractors
from orcad.query import derive_query_terms, stem, stems
from orcad.recall import rank
from orcad.recall.embedding import (
    BUILTIN_DIR,
    PROJECT_PROMPTS,
    UNRELATED_PROMPTS,
    GateReferences,
    load_embedder,
    read_prompts,
)

POOL = 16  # per kind of match, as recall fetches
# A prompt that shares one distinctive word with a fact in other forms ("deploying" for
# "deploys") has a cosine of about 0.4 with it; below this weight its words cannot lift it over
# the gate, and a small store (where this set's 128 facts do not reach) then answers nothing.
MIN_LEXICAL_WEIGHT = 0.3
# For the same reason the coverage that opens the gate on words alone is at most 0.4: in a
# store of 71 records, "which package manager does the frontend use?" covers 0.44 of the one
# record about the frontend, and is closer to "what is a context manager" than to it.
LEXICAL_GATES = (0.3, 0.35, 0.4)
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


WEIGHTS = tuple(w for w in (0.0, 0.1, 0.2, 0.3, 0.5, 0.7) if w >= MIN_LEXICAL_WEIGHT)
FLOORS = [round(float(f), 2) for f in np.arange(0.1, 0.7, 0.02)]
GATES = [round(float(g), 2) for g in np.arange(-0.8, 0.8, 0.04)]
UNRELATED_WEIGHTS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
PROJECT_WEIGHTS = (0.0, 0.5, 0.75, 1.0, 1.25, 1.5)
EMPTY_TARGET = 0.85  # of unrelated prompts left empty, in both parts
SHARES_TARGET = 0.95  # of prompts sharing a word with their fact, found in the automatic part
# in a small store the gate costs more of those: there every term is rare, so a shared word
# weighs little, and a prompt is as close to a general question as to the fact (with the
# unrelated prompts alone, 0.95 there left the "other" class near 0.08)
SMALL_SHARES_TARGET = 0.9
FIGURES = (
    *("auto_shares", "auto_other", "auto_none", "deli_shares", "deli_other", "deli_none"),
    *("smal_shares", "smal_other", "smal_none"),
)
SMALL_STORE_OTHERS = 3  # facts beside the wanted ones in a prompt's small store


class Outcomes:
    """Per (lexical weight, floor): for every prompt and part, whether its ranking (before the
    gate) holds a wanted fact, or for an unrelated prompt anything, and its best relevance. The
    gate only decides whether that ranking is shown, so the gate grid costs no ranking."""

    def __init__(self, prepared, closeness, classes):  # type: ignore[no-untyped-def]
        self.closeness = closeness  # (P(unrelated), closeness to the project prompts)
        self.classes = classes
        self.table = {}
        for weight in WEIGHTS:
            for floor in FLOORS:
                entry = {}
                for name, (top, prompts) in prepared.items():
                    found, best, covered = [], [], []
                    for cls, wanted, docs, candidates in prompts:
                        ranked = rank.rank(
                            candidates,
                            semantic=True,
                            limit=top,
                            floor=floor,
                            lexical_weight=weight,
                            gate=None,
                        )
                        ids = {docs[int(c.key)][0] for c in ranked}
                        found.append(bool(ids) if cls == "none" else bool(ids & set(wanted)))
                        scores = sorted(
                            ((rank.relevance(c, floor, weight), c.coverage) for c in candidates),
                            reverse=True,
                        )[: rank.CONSIDERED_PER_SHOWN * top]  # what rank() looks at
                        best.append(scores[0][0] if scores else -1.0)
                        covered.append(max((cov for _r, cov in scores), default=0.0))
                    entry[name] = (np.array(found), np.array(best), np.array(covered))
                self.table[weight, floor] = entry

    def figures(self, setting, subset):  # type: ignore[no-untyped-def]
        weight, floor, gate, unrelated, project, lexical_gate = setting
        row = {
            "weight": weight,
            "floor": floor,
            "gate": gate,
            "unrelated": unrelated,
            "project": project,
            "lexical_gate": lexical_gate,
        }
        bar = gate + unrelated * self.closeness[0] - project * self.closeness[1]
        for name, (found, best, covered) in self.table[weight, floor].items():
            shown = found & ((best >= bar) | (covered >= lexical_gate))
            for cls in ("shares", "other", "none"):
                mask = subset & (self.classes == cls)
                value = shown[mask].mean() if cls != "none" else 1 - shown[mask].mean()
                row[f"{name[:4]}_{cls}"] = round(float(value), 3)
        return row


def choose(outcomes, subset):  # type: ignore[no-untyped-def]
    """Every setting's figures on `subset`, and the chosen one (see the module docstring)."""
    rows = [
        outcomes.figures((weight, floor, gate, unrelated, project, lexical_gate), subset)
        for weight in WEIGHTS
        for floor in FLOORS
        for unrelated in UNRELATED_WEIGHTS
        for project in PROJECT_WEIGHTS
        for gate in GATES
        for lexical_gate in LEXICAL_GATES
        # without them, a gate below the floor is none
        if unrelated > 0 or project > 0 or gate >= floor - 1e-9
    ]
    targets = {"auto_shares": SHARES_TARGET, "smal_shares": SMALL_SHARES_TARGET}
    shares = {k: min(target, max(r[k] for r in rows)) for k, target in targets.items()}
    feasible = [r for r in rows if all(r[k] >= v for k, v in shares.items())]
    reach = min(EMPTY_TARGET, max(min(r["auto_none"], r["deli_none"]) for r in feasible))
    quiet = [r for r in feasible if min(r["auto_none"], r["deli_none"]) >= reach]

    def merit(r: dict[str, float]) -> tuple[float, ...]:
        return (
            r["auto_other"] + r["deli_other"],
            r["deli_shares"],
            r["auto_none"] + r["deli_none"],
            r["gate"],
            r["floor"],
        )

    return rows, quiet, max(quiet, key=merit), merit


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(BUILTIN_DIR))
    parser.add_argument("--folds", type=int, choices=(1, 2), default=1)
    args = parser.parse_args()
    embedder = load_embedder(args.model)
    assert embedder is not None
    unrelated, project = (
        embedder.embed(read_prompts(p)) for p in (UNRELATED_PROMPTS, PROJECT_PROMPTS)
    )
    parts = {
        "automatic": (ALL, 6),
        "deliberate": ([("x", t) for t in distractors()] + ALL, 8),
    }
    queries = embedder.embed([prompt for _cls, prompt, _wanted in PROMPTS])
    # as Embeddings.gate_for: how likely each prompt is to be about nothing a project stores,
    # and its closeness to the nearest project prompt
    references = GateReferences(unrelated, project)
    nearest = references.nearest(queries)
    closeness = [references.probability(queries, nearest), np.maximum(0.0, nearest[:, 1])]
    classes = np.array([cls for cls, _prompt, _wanted in PROMPTS])
    prepared = {}
    for name, (docs, top) in parts.items():
        matrix = embedder.embed([t for _i, t in docs])
        doc_stems = [stems(t) for _i, t in docs]
        prepared[name] = (
            top,
            [
                (cls, wanted, docs, part_candidates(docs, matrix, doc_stems, prompt, query))
                for (cls, prompt, wanted), query in zip(PROMPTS, queries, strict=True)
            ],
        )
    # a new user's store: each prompt against its wanted facts and a few others, where every
    # term is rare and a prompt shares one word with the fact it wants
    chance = random.Random(1)
    small = []
    for (cls, prompt, wanted), query in zip(PROMPTS, queries, strict=True):
        others = chance.sample([i for i, _t in ALL if i not in wanted], SMALL_STORE_OTHERS)
        docs = [(i, t) for i, t in ALL if i in wanted or i in others]
        matrix = embedder.embed([t for _i, t in docs])
        doc_stems = [stems(t) for _i, t in docs]
        small.append((cls, wanted, docs, part_candidates(docs, matrix, doc_stems, prompt, query)))
    prepared["small"] = (6, small)
    outcomes = Outcomes(prepared, closeness, classes)
    everyone = np.ones(len(PROMPTS), dtype=bool)
    rows, quiet, best, merit = choose(outcomes, everyone)
    for unrelated in UNRELATED_WEIGHTS:
        for project in PROJECT_WEIGHTS:
            candidates = [
                r for r in quiet if (r["unrelated"], r["project"]) == (unrelated, project)
            ]
            if candidates:
                print(f"best at weights {unrelated} / {project}:", max(candidates, key=merit))
    keys = list(rows[0])
    print(" ".join(f"{k:>11}" for k in keys))
    for r in rows:
        same = all(
            r[k] == best[k] for k in ("weight", "floor", "unrelated", "project", "lexical_gate")
        )
        if (same and round(r["gate"] * 100) % 4 == 0) or r is best:
            print(" ".join(f"{r[k]:>11}" for k in keys) + ("  <- chosen" if r is best else ""))
    print("chosen:", best)
    if args.folds == 2:
        # every other prompt of each class: choose on one half, score on the other
        halves = np.zeros(len(PROMPTS), dtype=bool)
        for cls in set(classes):
            halves[np.flatnonzero(classes == cls)[::2]] = True
        for name, fit in (("first", halves), ("second", ~halves)):
            _rows, _quiet, chosen, _merit = choose(outcomes, fit)
            setting = tuple(chosen[k] for k in ("weight", "floor", "gate", "unrelated", "project"))
            held = outcomes.figures((*setting, chosen["lexical_gate"]), ~fit)
            print(f"chosen on the {name} half:", chosen)
            print("   scored on the other half:", {k: held[k] for k in FIGURES})


if __name__ == "__main__":
    main()
