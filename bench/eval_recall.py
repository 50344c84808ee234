"""Recall quality on the labelled set in bench/eval_data.py: hit@6 and MRR.

Runs a real orcad on a temporary home. The facts become automatic-memory candidates through the
real ledger and its FTS5 projection, and deliberate records through `memory.manage`; every
prompt then goes through `recall`, exactly as an agent asks. The in-process fallback ranking
(used when the index cannot be repaired) is scored on the same candidates.

    .venv/bin/python -m bench.eval_recall [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_data import FACTS, PROMPTS
from orcad.capture.ledger import Provenance, merge_job_candidates, read_ledger, write_ledger
from orcad.capture.projections import publish_projections
from orcad.log import configure_logging
from orcad.query import derive_query_terms
from orcad.recall.automatic import to_candidates
from orcad.recall.select import rank_by_overlap
from protocol.types import ExtractedFact
from tests.harness import DaemonProcess, OrcaEnv

TOP = 6


def score(
    ranked_ids: Sequence[Sequence[str]], expected: Sequence[Sequence[str]]
) -> dict[str, float]:
    """hit@6 (any expected id in the first 6) and MRR (first expected id's reciprocal rank)."""
    hits = 0
    reciprocal = 0.0
    for ranking, wanted in zip(ranked_ids, expected, strict=True):
        ranks = [position for position, item in enumerate(ranking, 1) if item in wanted]
        if ranks and ranks[0] <= TOP:
            hits += 1
        if ranks:
            reciprocal += 1.0 / ranks[0]
    count = len(expected)
    return {"hit@6": round(hits / count, 3), "mrr": round(reciprocal / count, 3), "prompts": count}


def load_automatic(project_dir: Path, now: float) -> dict[str, str]:
    """Commit every fact to the project ledger, 8 per job as extraction would.

    Returns candidate id -> fact id."""
    project_dir.mkdir(parents=True, exist_ok=True)
    ledger = read_ledger(project_dir)
    for start in range(0, len(FACTS), 8):
        batch = FACTS[start : start + 8]
        ledger, _ = merge_job_candidates(
            ledger,
            "job_" + secrets.token_hex(16),
            [ExtractedFact(category, text) for _id, category, _kind, text in batch],  # type: ignore[arg-type]
            Provenance("ses_eval", f"turn-{start}", "eval", "none", "eval"),
            now - (len(FACTS) - start) * 60,
        )
    write_ledger(project_dir, ledger)
    publish_projections(project_dir, ledger)
    by_text = {text: fact_id for fact_id, _c, _k, text in FACTS}
    return {candidate.id: by_text[candidate.fact] for candidate in ledger.candidates}


def run(progress: Callable[[str], None] = lambda _line: None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="orcad-eval-") as temp:
        root = Path(temp)
        orca = OrcaEnv(root)
        orca.write_config('[extraction]\nworkers = 0\n')
        workdir = root / "repo"
        workdir.mkdir()
        daemon = DaemonProcess(orca).start()
        try:
            with daemon.client() as client:
                opened = client.call("session.open", {"cwd": str(workdir), "mode": "yolo"})
                ids = {"session_id": opened.session_id, "epoch": opened.epoch}
                project_dir = orca.memory_root / "projects" / opened.project.id
                candidate_facts = load_automatic(project_dir, time.time())
                record_facts = {}
                for fact_id, _category, kind, text in FACTS:
                    saved = client.call(
                        "memory.manage",
                        {**ids, "action": "save", "content": text, "kind": kind,
                         "is_global": False},
                    )
                    record_facts[saved.record.id] = fact_id
                progress(f"loaded {len(FACTS)} facts into the ledger and the deliberate store")
                automatic, deliberate = [], []
                for number, (prompt, _wanted) in enumerate(PROMPTS):
                    result = client.call(
                        "recall", {**ids, "turn_id": f"eval-{number}", "prompt": prompt}
                    )
                    automatic.append([candidate_facts[e.id] for e in result.automatic])
                    deliberate.append([record_facts[r.id] for r in result.deliberate])
            candidates = to_candidates(read_ledger(project_dir))
            fallback = [
                [candidate_facts[c.id] for c in rank_by_overlap(candidates, terms, TOP)]
                for terms in (derive_query_terms(prompt) for prompt, _wanted in PROMPTS)
            ]
        finally:
            daemon.stop()
    expected = [wanted for _prompt, wanted in PROMPTS]
    misses = {
        name: [
            PROMPTS[i][0] for i, got in enumerate(rankings) if not set(got[:TOP]) & set(expected[i])
        ]
        for name, rankings in (("automatic", automatic), ("deliberate", deliberate))
    }
    return {
        "facts": len(FACTS),
        "automatic": score(automatic, expected),
        "deliberate": score(deliberate, expected),
        "fallback": score(fallback, expected),
        "misses": misses,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    configure_logging(sys.stderr, level=logging.WARNING)  # in-process ledger writes stay quiet
    report = run(lambda line: print(line, file=sys.stderr))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"recall evaluation: {report['facts']} facts, {report['automatic']['prompts']} prompts")
    for part in ("automatic", "deliberate", "fallback"):
        figures = report[part]
        print(f"  {part:<10}  hit@6 {figures['hit@6']:.3f}   MRR {figures['mrr']:.3f}")
    for part, prompts in report["misses"].items():
        for prompt in prompts:
            print(f"  miss ({part}): {prompt}")


if __name__ == "__main__":
    main()
