"""The first recall after a deliberate record is saved, against any other recall.

One real orcad with the built-in model (or `--embedding SETTING`) on a throwaway home: the
project ledger of 128 facts and the deliberate database grown to `--records` records, fully
embedded. Each round recalls a new turn, saves a record, waits `--wait` seconds (the backfill
embeds the record meanwhile) and recalls a new turn again. Prints p50 and max of both recalls:
the second one used to read every record's vector again (100 ms or more at 10k records).

    .venv/bin/python -m bench.recall_after_save [--records 10000] [--rounds 40] [--wait 1.2]
        [--embedding SETTING] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_recall import Labelled, load_automatic
from bench.recall import Populator, wait_for_backfill
from orcad.log import configure_logging
from tests.harness import DaemonProcess, OrcaEnv


def run(records: int, rounds: int, wait: float, embedding: str) -> dict[str, Any]:
    prompts = [prompt for _kind, prompt, _wanted in Labelled.named().prompts]
    with tempfile.TemporaryDirectory(prefix="orcad-bench-after-save-") as temp:
        root = Path(temp)
        (root / "home").mkdir()
        orca = OrcaEnv(root / "home")
        orca.write_config(f'[extraction]\nworkers = 0\n[recall]\nembedding = "{embedding}"\n')
        workdir = root / "repo"
        workdir.mkdir()
        daemon = DaemonProcess(orca)
        try:  # a daemon is never left running when the bench fails
            daemon.start()
            opened = daemon.call("session.open", {"cwd": str(workdir)})
            load_automatic(
                orca.memory_root / "projects" / opened.project.id, time.time(), Labelled.named()
            )
            populator = Populator(orca.deliberate_db, opened.workspace.id, opened.workspace.root)
        finally:
            daemon.stop()
        print(f"growing the deliberate database to {records} records", file=sys.stderr)
        populator.grow_to(records)
        try:
            daemon.start()
            wait_for_backfill(daemon, session=opened)
            state = daemon.call("daemon.status", {}).embedding
            if state.state != "ready":  # else every recall would be lexical, and as fast
                raise SystemExit(f"the {embedding} model is {state.state}: {state.reason}")
            plain: list[float] = []
            after: list[float] = []
            with daemon.client() as client:
                session = client.call("session.open", {"cwd": str(workdir), "mode": "yolo"})
                ids = {"session_id": session.session_id, "epoch": session.epoch}
                for number in range(rounds):
                    prompt = prompts[number % len(prompts)]
                    for samples, turn in ((plain, f"plain-{number}"), (after, f"after-{number}")):
                        started = time.perf_counter()
                        client.call("recall", {**ids, "turn_id": turn, "prompt": prompt})
                        samples.append(time.perf_counter() - started)
                        if samples is plain:
                            content = f"Widget {number} of the bench is painted blue."
                            save = {"action": "save", "content": content, "kind": "fact"}
                            client.call("memory.manage", {**ids, **save, "is_global": False})
                            time.sleep(wait)
        finally:
            daemon.stop()
    return {
        "records": records,
        "embedding": embedding,
        "rounds": rounds,
        "wait_s": wait,
        "recall_ms": {"p50": statistics.median(plain) * 1e3, "max": max(plain) * 1e3},
        "after_save_ms": {"p50": statistics.median(after) * 1e3, "max": max(after) * 1e3},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--wait", type=float, default=1.2, help="seconds between save and recall")
    parser.add_argument("--embedding", default="builtin", help="the model's [recall] embedding")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    configure_logging(sys.stderr, level=logging.WARNING)
    figures = run(args.records, args.rounds, args.wait, args.embedding)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    plain, after = figures["recall_ms"], figures["after_save_ms"]
    print(f"{figures['records']} deliberate records, {figures['embedding']} model:")
    print(f"  recall                  p50 {plain['p50']:7.1f} ms  max {plain['max']:7.1f} ms")
    print(f"  first after a save      p50 {after['p50']:7.1f} ms  max {after['max']:7.1f} ms")


if __name__ == "__main__":
    main()
