"""Recall and precision of the offline extractor (orcad/providers/heuristic.py) on a labelled
set of user messages (bench/heuristic_eval_data.py; with --set heldout, the messages written
after its rules, bench/heuristic_eval_heldout.py; with --set blind, messages written without
reading the rules, bench/heuristic_eval_blind.py; with --set judge1 and judge2, two more sets
written without reading the rules, by two other authors: web, mobile, SaaS, data and ML
messages, bench/heuristic_eval_judge1.py; infrastructure, embedded, games, open source and
enterprise Java/.NET, bench/heuristic_eval_judge2.py).

Each message is read as one turn, `user: MESSAGE` then `assistant: OK.`. Recall is the share of
fact messages that yield at least one fact; precision is the share of yielded facts that come
from fact messages. In process, no daemon: the rules and, as the daemon runs them by default,
the fact classifier over the built-in model (`--rules-only`: the rules alone, as with another
model). The classifier's threshold was chosen on `blind`; `judge1` and `judge2` were used for
nothing but its figures.

    .venv/bin/python -m bench.heuristic_eval [--set main|heldout|blind|judge1|judge2]
        [--rules-only] [--misses] [--kept] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orcad.providers import fact_classifier
from orcad.providers.fact_classifier import SentenceJudge
from orcad.providers.heuristic import HEURISTIC_VERSION, extract_facts
from orcad.recall.embedding import Embeddings

SETS = {
    "main": "bench.heuristic_eval_data",
    "heldout": "bench.heuristic_eval_heldout",
    "blind": "bench.heuristic_eval_blind",
    "judge1": "bench.heuristic_eval_judge1",
    "judge2": "bench.heuristic_eval_judge2",
}


def facts_of(message: str, judge: SentenceJudge | None = None) -> list[str]:
    source = f"user: {message}\n\nassistant: OK."
    return [f"{f.category}: {f.fact}" for f in extract_facts(source, judge)]


def builtin_judge() -> SentenceJudge:
    """The fact classifier over the built-in model, as the daemon runs it by default."""
    embeddings = Embeddings.load("builtin")
    judge = SentenceJudge(embeddings, fact_classifier.load())
    if not judge.model:
        raise SystemExit(f"the fact classifier cannot run: {embeddings.reason or 'not shipped'}")
    return judge


def evaluate(
    facts: list[str], nothing: list[str], judge: SentenceJudge | None = None
) -> dict[str, object]:
    found = {message: facts_of(message, judge) for message in facts}
    false = {message: got for message in nothing if (got := facts_of(message, judge))}
    kept = sum(len(got) for got in found.values())
    wrong = sum(len(got) for got in false.values())
    return {
        "fact_messages": len(facts),
        "nothing_messages": len(nothing),
        "recall": sum(1 for got in found.values() if got) / len(facts),
        "precision": kept / (kept + wrong) if kept + wrong else 1.0,
        "facts_kept": kept,
        "false_facts": wrong,
        "misses": [message for message, got in found.items() if not got],
        "false_positives": false,
        "kept": found,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(SETS), default="main")
    parser.add_argument("--misses", action="store_true", help="list misses and false positives")
    parser.add_argument("--kept", action="store_true", help="list every fact kept")
    parser.add_argument(
        "--rules-only",
        action="store_true",
        help="without the fact classifier (as with a model other than the built-in one)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    module = importlib.import_module(SETS[args.set])
    judge = None if args.rules_only else builtin_judge()
    result = evaluate(module.FACTS, module.NOTHING, judge)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "kept"}, indent=2))
        return
    print(
        f"{HEURISTIC_VERSION}{' (rules only)' if judge is None else ''} on {args.set}:"
        f" {result['fact_messages']} fact messages,"
        f" {result['nothing_messages']} nothing messages"
    )
    print(
        f"recall {result['recall']:.3f}  precision {result['precision']:.3f}"
        f"  ({result['facts_kept']} facts kept, {result['false_facts']} from nothing messages)"
    )
    if args.misses:
        print("\nmissed:")
        for message in result["misses"]:  # type: ignore[attr-defined]
            print(f"  {message!r}")
        print("\nfalse positives:")
        for message, got in result["false_positives"].items():  # type: ignore[attr-defined]
            print(f"  {message!r}")
            for fact in got:
                print(f"      -> {fact}")
    if args.kept:
        print("\nkept:")
        for message, got in result["kept"].items():  # type: ignore[attr-defined]
            for fact in got:
                print(f"  {message!r}\n      -> {fact}")


if __name__ == "__main__":
    main()
