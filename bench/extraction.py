"""Extraction overhead per job with an instant provider, and job throughput with 1 and 4 workers.

The provider is the built-in heuristic: a pure function taking microseconds, measured in-process
on the same sources as the baseline. Each job's daemon time is committed_at - created_at from
its job file (admission to commit: wake-up, claim, lease, provider, parse, ledger, projections),
minus the provider's own median time.

Run: python bench/extraction.py [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import micros, millis, percentile, running_daemon, summarize

from orcad.clock import parse_time
from orcad.providers.heuristic import heuristic_output
from protocol.client import Client

CONFIG = '[extraction]\nprovider = "heuristic"\nworkers = {workers}\n'
PROJECTS = 4  # spread over projects: each admits at most 64 active jobs
WAIT_S = 120.0


def user_text(index: int) -> str:
    return f"We use tool{index} for task{index}. I prefer short answers about tool{index}."


def source_of(index: int) -> str:
    return f"user: {user_text(index)}\n\nassistant: Noted, tool{index} for task{index}."


def open_session(client: Client, cwd: Path) -> dict[str, Any]:
    cwd.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = client.call("session.open", {"cwd": str(cwd)}, result_type=dict)
    return result


def complete_turn(client: Client, session: dict[str, Any], index: int) -> str:
    result = client.call(
        "turn.completed",
        {
            "session_id": session["session_id"],
            "epoch": session["epoch"],
            "turn_id": f"turn-{index}",
            "outcome": "succeeded",
            "verifier": "passed",
            "transcript_committed": True,
            "messages": [
                {"role": "user", "content": user_text(index)},
                {"role": "assistant", "content": f"Noted, tool{index} for task{index}."},
            ],
        },
        result_type=dict,
    )
    if not result["eligible"] or result["job_id"] is None:
        raise SystemExit(f"turn {index} was not captured: {result['reason']}")
    job_id: str = result["job_id"]
    return job_id


def committed_jobs(memory_root: Path, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """Wait until every wanted job file says committed; return their records."""
    deadline = time.monotonic() + WAIT_S
    found: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        for path in memory_root.glob("projects/*/jobs/*.json"):
            if path.stem in wanted and path.stem not in found:
                try:
                    record = json.loads(path.read_bytes())
                except (OSError, ValueError):
                    continue  # replaced under us; read it on the next pass
                if record["state"] == "committed":
                    found[path.stem] = record
                elif record["state"] == "exhausted":
                    raise SystemExit(f"job {path.stem} failed: {record['errors']}")
        if len(found) == len(wanted):
            return found
        time.sleep(0.005)
    raise SystemExit(f"only {len(found)} of {len(wanted)} jobs committed within {WAIT_S:.0f} s")


def daemon_seconds(record: dict[str, Any]) -> float:
    return parse_time(record["committed_at"]) - parse_time(record["created_at"])


def provider_baseline(count: int) -> float:
    samples = []
    for index in range(count):
        source = source_of(index)
        started = time.perf_counter()
        heuristic_output(source)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def one_at_a_time(jobs: int) -> list[float]:
    """Per-job latency with one worker and an empty queue: submit, wait for commit, repeat."""
    with (
        running_daemon(CONFIG.format(workers=1)) as (_proc, socket_path, root),
        Client(socket_path) as client,
        tempfile.TemporaryDirectory(prefix="orcad-bench-project-") as work,
    ):
        session = open_session(client, Path(work) / "project")
        latencies = []
        for index in range(jobs):
            job_id = complete_turn(client, session, index)
            record = committed_jobs(root / "home" / "memory", {job_id})[job_id]
            latencies.append(daemon_seconds(record))
        return latencies


def throughput(jobs: int, workers: int) -> float:
    """Jobs per second from the first admission to the last commit, the queue full at start."""
    per_project = max(1, jobs // PROJECTS)
    with (
        running_daemon(CONFIG.format(workers=workers)) as (_proc, socket_path, root),
        Client(socket_path) as client,
        tempfile.TemporaryDirectory(prefix="orcad-bench-project-") as work,
    ):
        sessions = [open_session(client, Path(work) / f"project-{p}") for p in range(PROJECTS)]
        job_ids = {
            complete_turn(client, session, p * per_project + i)
            for p, session in enumerate(sessions)
            for i in range(per_project)
        }
        records = committed_jobs(root / "home" / "memory", job_ids).values()
        first = min(parse_time(r["created_at"]) for r in records)
        last = max(parse_time(r["committed_at"]) for r in records)
        return len(job_ids) / max(last - first, 1e-3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs per measurement")
    args = parser.parse_args()

    provider_s = provider_baseline(args.jobs)
    latencies = one_at_a_time(min(args.jobs, 100))  # committed job files kept: newest 128
    overhead = [max(0.0, value - provider_s) for value in latencies]
    p50, p99 = summarize(overhead)
    print(f"heuristic provider, in-process (baseline): median {micros(provider_s)}")
    print(
        f"daemon time per job excluding the provider, 1 worker, {len(overhead)} jobs: "
        f"p50 {millis(p50)}  p99 {millis(p99)}  max {millis(max(overhead))}"
    )
    print(f"  ratio p50 / provider: {p50 / max(provider_s, 1e-9):,.0f}x")
    rates = {workers: throughput(args.jobs, workers) for workers in (1, 4)}
    for workers, rate in rates.items():
        print(
            f"throughput, {workers} worker(s), {args.jobs} jobs over {PROJECTS} projects: "
            f"{rate:8.1f} jobs/s"
        )
    print(f"  ratio 4 workers / 1 worker: {rates[4] / rates[1]:.2f}")
    print(f"  (timestamps have millisecond resolution; p90 {millis(percentile(overhead, 0.9))})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
