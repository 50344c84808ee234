"""Recall while its embedding endpoint answers, then while it hangs, against lexical recall.

Two real orcads on throwaway homes holding the same memory (the labelled set's 128 facts in the
project ledger and as deliberate records): one configured with an OpenAI-compatible embedding
endpoint, one with `embedding = "none"` (lexical recall, the baseline). The endpoint is a real
HTTP server on loopback that embeds with the built-in model in this process, and later stops
answering (it reads each request and never replies, as a host gone from the network does).
Recalls alternate between the two daemons, back to back while the endpoint answers, one pair
every 50 ms while it hangs (the rests are seconds long); prints p50, p99 and max of each phase,
how many recalls waited on the hung endpoint (half its deadline or more) and the requests it
received. Without a rest after a failure, every recall waited the endpoint's deadline (0.5 s
by default) once or more.

    .venv/bin/python -m bench.recall_endpoint_down [--requests 200] [--timeout 0.5]
        [--hung-seconds 40] [--json]
"""

from __future__ import annotations

import argparse
import itertools
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
from bench.recall import wait_for_backfill
from orcad.log import configure_logging
from orcad.recall.embedding import Embeddings
from tests.fake_openai import FakeOpenAI, stall_before_headers
from tests.harness import DaemonProcess, OrcaEnv

PACE_S = 0.05  # between recalls while the endpoint hangs


def embedding_server(model: Embeddings) -> Any:
    """A behaviour of the fake server that embeds every input with `model`."""

    def respond(handler: Any, state: FakeOpenAI) -> None:
        inputs = state.requests[-1].json()["input"]
        matrix = model.embed(inputs)
        assert matrix is not None
        data = [{"index": n, "embedding": row.tolist()} for n, row in enumerate(matrix)]
        handler.send_fixed(200, json.dumps({"data": data}).encode(), "application/json", {})

    return respond


def figures(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": statistics.median(ordered) * 1e3,
        "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1e3,
        "max": ordered[-1] * 1e3,
    }


def run(requests: int, timeout_s: float, hung_s: float) -> dict[str, Any]:
    labelled = Labelled.named()
    prompts = [prompt for _kind, prompt, _wanted in labelled.prompts]
    model = Embeddings.load("builtin")
    report: dict[str, Any] = {"requests": requests, "timeout_s": timeout_s, "hung_s": hung_s}
    with (
        tempfile.TemporaryDirectory(prefix="orcad-bench-endpoint-") as temp,
        FakeOpenAI() as server,
    ):
        server.default = embedding_server(model)
        endpoint = (
            f'embedding = "endpoint"\n[recall.endpoint]\nbase_url = "{server.base_url}"\n'
            f'model = "builtin-over-http"\ntimeout_s = {timeout_s}\n'
        )
        daemons: dict[str, DaemonProcess] = {}
        sessions: dict[str, Any] = {}
        try:  # a daemon is never left running when the bench fails
            for name, recall in (("endpoint", endpoint), ("lexical", 'embedding = "none"\n')):
                (Path(temp) / name).mkdir()
                orca = OrcaEnv(Path(temp) / name)
                orca.write_config(f"[extraction]\nworkers = 0\n[recall]\n{recall}")
                workdir = Path(temp) / name / "repo"
                workdir.mkdir()
                daemons[name] = daemon = DaemonProcess(orca)
                daemon.start()
                opened = daemon.call("session.open", {"cwd": str(workdir), "mode": "yolo"})
                load_automatic(
                    orca.memory_root / "projects" / opened.project.id, time.time(), labelled
                )
                sessions[name] = opened
                ids = {"session_id": opened.session_id, "epoch": opened.epoch}
                for _fact_id, _created, kind, text in labelled.facts:
                    save = {"action": "save", "content": text, "kind": kind, "is_global": False}
                    daemon.call("memory.manage", {**ids, **save})
            wait_for_backfill(daemons["endpoint"], 120, session=sessions["endpoint"])
            state = daemons["endpoint"].call("daemon.status", {}).embedding
            if state.state != "ready" or state.embedded < len(labelled.facts) or state.pending:
                raise SystemExit(f"the endpoint model did not embed the records: {state}")
            for phase in ("answering", "hung"):
                if phase == "hung":
                    server.default = stall_before_headers(3600.0)
                    asked = len(server.requests)
                    ends = time.monotonic() + hung_s
                samples: dict[str, list[float]] = {"endpoint": [], "lexical": []}
                for number in itertools.count():
                    if phase == "answering" and number == requests:
                        break
                    if phase == "hung":  # an agent's pace: the rests are seconds long
                        if time.monotonic() >= ends:
                            break
                        time.sleep(PACE_S)
                    for name, daemon in daemons.items():
                        started = time.perf_counter()
                        daemon.call(
                            "recall",
                            {
                                "session_id": sessions[name].session_id,
                                "epoch": sessions[name].epoch,
                                "turn_id": f"{phase}-{number}",
                                "prompt": prompts[number % len(prompts)],
                            },
                        )
                        samples[name].append(time.perf_counter() - started)
                report[phase] = {name: figures(taken) for name, taken in samples.items()}
            report["hung"]["requests_received"] = len(server.requests) - asked
            waited = [t for t in samples["endpoint"] if t >= timeout_s / 2]
            report["hung"]["recalls"] = len(samples["endpoint"])
            report["hung"]["recalls_waiting"] = len(waited)
            status = daemons["endpoint"].call("daemon.status", {})
            report["hung"]["reason"] = status.embedding.reason
        finally:
            server.closing.set()  # ends the stalls, so that the daemons stop at once
            for daemon in daemons.values():
                daemon.stop()
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="recalls per phase and daemon")
    parser.add_argument("--timeout", type=float, default=0.5, help="the endpoint's timeout_s")
    parser.add_argument(
        "--hung-seconds", type=float, default=40.0, help="how long the endpoint hangs"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    configure_logging(sys.stderr, level=logging.WARNING)
    report = run(args.requests, args.timeout, args.hung_seconds)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"endpoint deadline {args.timeout} s; answering: {args.requests} recalls each; hung: "
        f"{args.hung_seconds:.0f} s, a recall each every {PACE_S * 1000:.0f} ms"
    )
    for phase in ("answering", "hung"):
        lexical = report[phase]["lexical"]
        for name in ("endpoint", "lexical"):
            taken = report[phase][name]
            print(
                f"  {phase:9} {name:8} p50 {taken['p50']:8.2f} ms  p99 {taken['p99']:8.2f} ms  "
                f"max {taken['max']:8.2f} ms  p50 {taken['p50'] / lexical['p50']:5.2f}x lexical"
            )
    hung = report["hung"]
    print(
        f"  while hung: {hung['recalls_waiting']} of {hung['recalls']} recalls waited on the "
        f"endpoint; it received {hung['requests_received']} requests"
    )
    print(f"  status says: {report['hung']['reason']}")


if __name__ == "__main__":
    main()
