"""Ranking: what `orcad.recall.rank.rank` costs a recall, in process.

Builds the pools recall ranks for every prompt of a labelled set (bench/eval_data.py by
default), embedded with the built-in model, as recall builds them: the automatic part (the
ledger's 128 facts, the 36 most relevant ranked for 12) and the deliberate part (the facts and
the 1,000 distractors, the 32 nearest and 16 best lexical ranked for 16; see
bench/calibrate_recall.py's `part_candidates`). Times `rank()` on each pool, against sorting
the same pool by relevance and cutting it to the limit (what ranking without the gate, the
lifting of corrections and the leaving out of records alike would cost), interleaved pool by
pool. Prints p50/p99 per call for each part and the ratio of the p50s. The pools of main's
deliberate part hold many records cut from one template, where finding the near-duplicates
costs most.

    .venv/bin/python -m bench.rank [--set main] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.calibrate_recall import part_candidates
from bench.common import percentile
from bench.eval_recall import LABELLED_SETS, Labelled
from orcad.query import stems
from orcad.recall import rank
from orcad.recall.embedding import load_embedder
from orcad.recall.local_models import BUILTIN_DIR
from orcad.recall.service import AUTOMATIC_FETCH, DELIBERATE_FETCH

LIMIT = {"automatic": AUTOMATIC_FETCH, "deliberate": DELIBERATE_FETCH}
NEAREST = {"automatic": None, "deliberate": 32}  # None: every fact, as the automatic part
FLOOR, WEIGHT, GATE = 0.2, 0.3, -1.0  # the built-in model's floor and weight; every gate open


def pools(labelled: Labelled) -> dict[str, list[Any]]:
    embedder = load_embedder(str(BUILTIN_DIR))
    assert embedder is not None
    facts = [(i, t) for i, _c, _k, t in labelled.all_facts()]
    stores = {
        "automatic": facts,
        "deliberate": [("x", t) for t in labelled.distractors] + facts,
    }
    queries = embedder.embed([prompt for _cls, prompt, _wanted in labelled.prompts])
    found: dict[str, list[Any]] = {}
    for part, docs in stores.items():
        matrix = embedder.embed([t for _i, t in docs])
        doc_stems = [stems(t) for _i, t in docs]
        nearest = NEAREST[part] or len(docs)
        cut = rank.CONSIDERED_PER_SHOWN * LIMIT[part]  # the automatic part passes the best only
        found[part] = []
        for (_cls, prompt, _wanted), query in zip(labelled.prompts, queries, strict=True):
            distinctive, asked, candidates = part_candidates(
                docs, matrix, doc_stems, prompt, query, nearest=nearest
            )
            candidates.sort(key=lambda c: -rank.relevance(c, FLOOR, WEIGHT))
            found[part].append((distinctive, asked, candidates[:cut]))
    return found


def run(name: str, rounds: int) -> dict[str, Any]:
    report: dict[str, Any] = {"set": name, "parts": {}}
    for part, prepared in pools(Labelled.named(name)).items():
        limit = LIMIT[part]
        timed: dict[str, list[float]] = {"rank": [], "sorted": []}
        for _round in range(rounds):
            for distinctive, asked, candidates in prepared:
                started = time.perf_counter()
                rank.rank(
                    candidates,
                    semantic=True,
                    limit=limit,
                    floor=FLOOR,
                    lexical_weight=WEIGHT,
                    gate=GATE,
                    distinctive=distinctive,
                    asked=asked,
                )
                middle = time.perf_counter()
                sorted(candidates, key=lambda c: -rank.relevance(c, FLOOR, WEIGHT))[:limit]
                timed["rank"].append(middle - started)
                timed["sorted"].append(time.perf_counter() - middle)
        figures = {
            kind: (percentile(values, 0.5), percentile(values, 0.99))
            for kind, values in timed.items()
        }
        report["parts"][part] = {
            **figures,
            "pool": sum(len(c) for _d, _a, c in prepared) / len(prepared),
            "ratio": figures["rank"][0] / figures["sorted"][0],
        }
    return report


def format_report(report: dict[str, Any]) -> str:
    lines = [f"rank() on the pools of the {report['set']} set, in process:"]
    for part, figures in report["parts"].items():
        lines.append(
            f"  {part:<10} pool {figures['pool']:5.1f}  rank p50 {figures['rank'][0] * 1e3:.3f} ms"
            f"  p99 {figures['rank'][1] * 1e3:.3f} ms  sorted p50"
            f" {figures['sorted'][0] * 1e3:.3f} ms  ratio {figures['ratio']:.1f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="main", choices=sorted(LABELLED_SETS))
    parser.add_argument("--rounds", type=int, default=5, help="times each pool is ranked")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.set, args.rounds)
    print(json.dumps(report) if args.json else format_report(report))


if __name__ == "__main__":
    main()
