"""Recall quality on a labelled set (bench/eval_data.py, or with --set the fresh or check set),
per prompt class and part.

Runs a real orcad on a temporary home. The facts (then their later corrections) become
automatic-memory candidates through the real ledger and its index, and deliberate records
through `memory.manage`, together with 1,000 distractor records about other components; every
prompt then goes through `recall`, exactly as an agent asks. For each class of prompt (shares
words with its fact / the same need in other words / nothing relevant) and each part (automatic,
hit@6; deliberate, hit@8) it prints hit@k, MRR, the share of nothing-relevant prompts answered
with an empty part, how often an outdated fact ranks above its correction, mean bytes
injected, recall p50, and the daemon's RSS.

    .venv/bin/python -m bench.eval_recall [--set NAME] [--misses] [--json]
        [--config 'TOML']
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orcad.capture.ledger import Provenance, merge_job_candidates, read_ledger, write_ledger
from orcad.capture.projections import publish_projections
from orcad.log import configure_logging
from orcad.recall.render import automatic_line, deliberate_line
from protocol.types import ExtractedFact
from tests.harness import DaemonProcess, OrcaEnv

TOP = {"automatic": 6, "deliberate": 8}
CLASSES = ("shares", "other", "none")
# bench/eval_data.py, bench/eval_data_fresh.py, bench/eval_data_check.py: each written apart
# from the others, by authors who saw neither them nor the reference prompts; recall's settings
# are chosen on main and fresh, and check only scores them (the classifier's four constants in
# orcad/recall/prompt_gate.py were picked with all three sets' AUC in view)
LABELLED_SETS = {
    "main": "bench.eval_data",
    "fresh": "bench.eval_data_fresh",
    "check": "bench.eval_data_check",
    "fourth": "bench.eval_data_fourth",
    "fifth": "bench.eval_data_fifth",
    "sixth": "bench.eval_data_sixth",
    "seventh": "bench.eval_data_seventh",
    "eighth": "bench.eval_data_eighth",
    "ninth": "bench.eval_data_ninth",
}


class Labelled(NamedTuple):
    """One labelled set: its facts, their later corrections, prompts and distractors."""

    facts: list[tuple[str, str, str, str]]  # (fact id, category, kind, text)
    corrections: list[tuple[str, str, str, str, str]]  # (new id, old id, category, kind, text)
    prompts: list[tuple[str, str, list[str]]]  # (class, prompt, ids that answer it)
    stale: dict[str, str]  # correction id -> the fact id it corrects
    distractors: list[str]

    @classmethod
    def named(cls, name: str = "main") -> Labelled:
        module = importlib.import_module(LABELLED_SETS[name])
        return cls(
            module.FACTS, module.CORRECTIONS, module.PROMPTS, module.STALE, module.distractors()
        )

    def all_facts(self) -> list[tuple[str, str, str, str]]:
        """Every stored text, in the order it was recorded: (fact id, category, kind, text)."""
        later = ((new, cat, kind, text) for new, _old, cat, kind, text in self.corrections)
        return [*self.facts, *later]


def load_automatic(project_dir: Path, now: float, labelled: Labelled) -> dict[str, str]:
    """Commit every fact, then the corrections, to the project ledger, 8 per job as extraction
    would. Returns candidate id -> fact id."""
    project_dir.mkdir(parents=True, exist_ok=True)
    ledger = read_ledger(project_dir)
    everything = labelled.all_facts()
    for start in range(0, len(everything), 8):
        batch = everything[start : start + 8]
        ledger, _ = merge_job_candidates(
            ledger,
            "job_" + secrets.token_hex(16),
            [ExtractedFact(category, text) for _id, category, _kind, text in batch],  # type: ignore[arg-type]
            Provenance("ses_eval", f"turn-{start}", "eval", "none", "eval"),
            now - (len(everything) - start) * 60,
        )
    write_ledger(project_dir, ledger)
    publish_projections(project_dir, ledger)
    by_text = {text: fact_id for fact_id, _c, _k, text in everything}
    return {candidate.id: by_text[candidate.fact] for candidate in ledger.candidates}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def score(part: str, rows: Sequence[dict[str, Any]], stale: dict[str, str]) -> dict[str, Any]:
    """The figures of one part over the prompts of one class (`stale`: correction id -> the
    fact id it corrects)."""
    top = TOP[part]
    wanted_rows = [row for row in rows if row["wanted"]]
    hits = reciprocal = 0.0
    stale_first = 0
    for row in wanted_rows:
        ranking = row[part]
        ranks = [position for position, item in enumerate(ranking, 1) if item in row["wanted"]]
        if ranks and ranks[0] <= top:
            hits += 1
        if ranks:
            reciprocal += 1.0 / ranks[0]
        for new in row["wanted"]:
            old = stale.get(new)
            if old in ranking and (new not in ranking or ranking.index(old) < ranking.index(new)):
                stale_first += 1
    figures: dict[str, Any] = {"prompts": len(rows)}
    if wanted_rows:
        figures[f"hit@{top}"] = round(hits / len(wanted_rows), 3)
        figures["mrr"] = round(reciprocal / len(wanted_rows), 3)
        figures["stale_first"] = stale_first
    else:
        figures["empty"] = round(sum(1 for row in rows if not row[part]) / len(rows), 3)
    figures["mean_bytes"] = round(statistics.fmean(row[f"{part}_bytes"] for row in rows), 1)
    return figures


def run(
    config: str = "",
    progress: Callable[[str], None] = lambda _line: None,
    labelled: Labelled | None = None,
) -> dict[str, Any]:
    """The figures of one labelled set (main by default) through a real daemon."""
    labelled = labelled or Labelled.named()
    with tempfile.TemporaryDirectory(prefix="orcad-eval-") as temp:
        root = Path(temp)
        orca = OrcaEnv(root)
        orca.write_config("[extraction]\nworkers = 0\n" + config)
        workdir = root / "repo"
        workdir.mkdir()
        daemon = DaemonProcess(orca).start()
        try:
            with daemon.client() as client:
                opened = client.call("session.open", {"cwd": str(workdir), "mode": "yolo"})
                ids = {"session_id": opened.session_id, "epoch": opened.epoch}
                project_dir = orca.memory_root / "projects" / opened.project.id
                candidate_facts = load_automatic(project_dir, time.time(), labelled)

                def save(text: str, kind: str) -> str:
                    saved = client.call(
                        "memory.manage",
                        {
                            **ids,
                            "action": "save",
                            "content": text,
                            "kind": kind,
                            "is_global": False,
                        },
                    )
                    return str(saved.record.id)

                record_facts = {
                    save(text, kind): fact_id for fact_id, _c, kind, text in labelled.facts
                }
                for text in labelled.distractors:
                    save(text, "fact")
                time.sleep(0.01)  # corrections are updated strictly later
                for new, _old, _c, kind, text in labelled.corrections:
                    record_facts[save(text, kind)] = new
                saved_records = len(record_facts) + len(labelled.distractors)
                # the ledger's facts, written there directly, have no vector: a first recall
                # notes the project for the backfill, which embeds them in the background
                note = "a first recall notes the project for the backfill"
                client.call("recall", {**ids, "turn_id": "eval-note", "prompt": note})
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:  # until the backfill has embedded them all
                    embedding = client.call("daemon.status", {}).embedding
                    if embedding is None or embedding.state in ("off", "unavailable"):
                        break  # lexical recall: nothing to wait for
                    if (
                        embedding.embedded >= saved_records
                        and not embedding.pending
                        and not embedding.facts_pending
                        and not embedding.corrections_pending
                    ):
                        break  # (its counts may lag a save, so every record is counted)
                    time.sleep(0.05)
                progress(
                    f"loaded {len(labelled.all_facts())} facts into the ledger, and those plus "
                    f"{len(labelled.distractors)} distractors into the deliberate store"
                )
                rows: list[dict[str, Any]] = []
                for number, (kind, prompt, wanted) in enumerate(labelled.prompts):
                    started = time.perf_counter()
                    result = client.call(
                        "recall", {**ids, "turn_id": f"eval-{number}", "prompt": prompt}
                    )
                    elapsed_ms = (time.perf_counter() - started) * 1000
                    now = time.time()
                    rows.append(
                        {
                            "class": kind,
                            "prompt": prompt,
                            "wanted": wanted,
                            "automatic": [candidate_facts[e.id] for e in result.automatic],
                            "deliberate": [
                                record_facts.get(r.id, "distractor") for r in result.deliberate
                            ],
                            "automatic_bytes": sum(
                                len(automatic_line(e).encode()) for e in result.automatic
                            ),
                            "deliberate_bytes": sum(
                                len(deliberate_line(r, now).encode()) for r in result.deliberate
                            ),
                            "bytes": result.bytes,
                            "ms": elapsed_ms,
                        }
                    )
                assert daemon.proc is not None
                rss = rss_mib(daemon.proc.pid)
                # a part that failed answered nothing: its figures would measure the failure
                failed = [
                    e.message
                    for e in client.call("daemon.status", {}).recent_errors
                    if e.kind == "recall"
                ]
                if failed:
                    raise RuntimeError(f"recall failed during the evaluation: {failed[-1]}")
        finally:
            daemon.stop()
    report: dict[str, Any] = {
        "facts": len(labelled.all_facts()),
        "prompts": len(rows),
        "rss_mib": rss,
    }
    for kind in CLASSES:
        chosen = [row for row in rows if row["class"] == kind]
        report[kind] = {
            "automatic": score("automatic", chosen, labelled.stale),
            "deliberate": score("deliberate", chosen, labelled.stale),
            "block_empty": round(sum(1 for row in chosen if not row["bytes"]) / len(chosen), 3),
            "mean_block_bytes": round(statistics.fmean(row["bytes"] for row in chosen), 1),
            "max_block_bytes": max(row["bytes"] for row in chosen),
            "recall_p50_ms": round(statistics.median(row["ms"] for row in chosen), 2),
        }
    report["misses"] = [
        (row["class"], part, row["prompt"])
        for row in rows
        for part in ("automatic", "deliberate")
        if (row["wanted"] and not set(row[part][: TOP[part]]) & set(row["wanted"]))
        or (not row["wanted"] and row[part])
    ]
    report["stale"] = [
        (row["class"], part, row["prompt"])
        for row in rows
        for part in ("automatic", "deliberate")
        if score(part, [row], labelled.stale).get("stale_first")
    ]
    return report


def print_table(report: dict[str, Any]) -> None:
    print(
        f"recall evaluation: {report['facts']} facts, {report['prompts']} prompts, "
        f"daemon RSS {report['rss_mib']} MiB"
    )
    print("| class | part | prompts | hit@k | MRR | empty | stale first | mean bytes | p50 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in CLASSES:
        block = report[kind]
        for part in ("automatic", "deliberate"):
            f = block[part]
            hit = f.get(f"hit@{TOP[part]}", "")
            print(
                f"| {kind} | {part} | {f['prompts']} | {hit} | {f.get('mrr', '')} | "
                f"{f.get('empty', '')} | {f.get('stale_first', '')} | {f['mean_bytes']} | "
                f"{block['recall_p50_ms']} |"
            )
        print(
            f"| {kind} | whole block | | | | {block['block_empty']} | | "
            f"{block['mean_block_bytes']} (max {block['max_block_bytes']}) | |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--misses",
        action="store_true",
        help="list every missed prompt, and every one that shows an outdated fact first",
    )
    parser.add_argument("--config", default="", help="extra config.toml text for the daemon")
    parser.add_argument(
        "--set",
        choices=sorted(LABELLED_SETS),
        default="main",
        help="the labelled set: main (bench/eval_data.py), fresh, check, fourth, fifth, sixth, "
        "seventh, eighth or ninth (bench/eval_data_<name>.py: each written apart from the "
        "others; check and the ones after it are never used to choose a setting)",
    )
    args = parser.parse_args(argv)
    configure_logging(sys.stderr, level=logging.WARNING)  # in-process ledger writes stay quiet
    report = run(args.config, lambda line: print(line, file=sys.stderr), Labelled.named(args.set))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print_table(report)
    if args.misses:
        for kind, part, prompt in report["misses"]:
            print(f"  miss ({kind}, {part}): {prompt}")
        for kind, part, prompt in report["stale"]:
            print(f"  outdated first ({kind}, {part}): {prompt}")


if __name__ == "__main__":
    main()
