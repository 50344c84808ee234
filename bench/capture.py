"""Automatic-memory capture: turn.completed acknowledgement latency next to the durability floor
measured in the same run (write 4 KiB, fsync, rename, fsync the directory), jobs.publish to
committed, and redaction throughput on the secrets corpus.

The acknowledgement includes a durable job file, so it cannot beat the floor; the target is a
p50 within 2x of it. Run: python bench/capture.py [--turns N]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from common import millis, running_daemon, summarize
from redaction import measure_redaction

from protocol.client import Client

PROJECTS = 10  # turns are spread so that no project reaches the 64-active-job limit
MESSAGE_BYTES = 4096


def floor_once(directory: Path, index: int, payload: bytes) -> float:
    """The cheapest durable atomic replace of a 4 KiB file: what a job write must cost."""
    temp = directory / f".floor-{index}.tmp"
    final = directory / f"floor-{index}.json"
    start = time.perf_counter()
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(descriptor, payload)
    os.fsync(descriptor)
    os.close(descriptor)
    os.replace(temp, final)
    directory_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(directory_fd)
    os.close(directory_fd)
    return time.perf_counter() - start


def turn(session: object, turn_id: str, index: int) -> dict[str, object]:
    words = " ".join(f"word{(index * 7 + n) % 997}" for n in range(MESSAGE_BYTES // 9))
    return {
        "session_id": session.session_id,  # type: ignore[attr-defined]
        "epoch": session.epoch,  # type: ignore[attr-defined]
        "turn_id": turn_id,
        "outcome": "succeeded",
        "verifier": "passed",
        "transcript_committed": True,
        "messages": [
            # punctuation as in real turns (`:` and `=` open more of the secret detector's rules)
            {
                "role": "user",
                "content": f"We decided: builds use tool {index} (make -j4 CC=clang). {words}",
            },
            {"role": "assistant", "content": "Done."},
        ],
    }


def measure(turn_count: int) -> dict[str, float]:
    with running_daemon("[extraction]\nworkers = 0\n") as (_proc, socket_path, root):
        floor_dir = Path(tempfile.mkdtemp(dir=root / "home"))  # same file system as the jobs
        payload = os.urandom(MESSAGE_BYTES // 2).hex().encode()
        floor: list[float] = []
        acks: list[float] = []
        publishes: list[float] = []
        with Client(socket_path) as client:
            sessions = []
            for number in range(PROJECTS):
                directory = root / f"project-{number}"
                directory.mkdir()
                sessions.append(client.call("session.open", {"cwd": str(directory)}))
            for index in range(turn_count):
                # interleaved with the acknowledgements, so both see the same disk conditions
                floor.append(floor_once(floor_dir, index, payload))
                params = turn(sessions[index % PROJECTS], f"turn-{index}", index)
                start = time.perf_counter()
                result = client.call("turn.completed", params)
                acks.append(time.perf_counter() - start)
                assert result.eligible, result
            for index in range(turn_count):
                claimed = client.call("jobs.claim", {"worker": "bench"})
                output = json.dumps({"category": "project", "fact": f"Fact number {index}."})
                start = time.perf_counter()
                client.call(
                    "jobs.publish",
                    {
                        "job_id": claimed.job.job_id,
                        "token": claimed.lease.token,
                        "output": output,
                        "provider": "bench",
                        "model": "",
                    },
                )
                publishes.append(time.perf_counter() - start)
    floor_p50, floor_p99 = summarize(floor)
    ack_p50, ack_p99 = summarize(acks)
    publish_p50, publish_p99 = summarize(publishes)
    return {
        "floor_p50": floor_p50,
        "floor_p99": floor_p99,
        "ack_p50": ack_p50,
        "ack_p99": ack_p99,
        "publish_p50": publish_p50,
        "publish_p99": publish_p99,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    figures = measure(args.turns)
    ratio = figures["ack_p50"] / figures["floor_p50"]
    verdict = "met" if ratio <= 2 else "NOT met"

    def line(label: str, p50: float, p99: float) -> str:
        return f"  {label:<48} p50 {millis(p50)}  p99 {millis(p99)}"

    print(f"turn.completed acknowledgement, {args.turns} turns of ~4 KiB in {PROJECTS} projects")
    print(
        line(
            "floor: write 4 KiB, fsync, rename, fsync dir",
            figures["floor_p50"],
            figures["floor_p99"],
        )
    )
    print(line("acknowledgement (job file durable)", figures["ack_p50"], figures["ack_p99"]))
    print(f"  p50 ratio to the floor: {ratio:.2f}x (target <= 2x: {verdict})")
    print("jobs.publish until committed (parse, fencing, ledger, job commit, projections)")
    print(line("publish", figures["publish_p50"], figures["publish_p99"]))
    print(f"  p50 ratio to the floor: {figures['publish_p50'] / figures['floor_p50']:.2f}x")
    redaction = measure_redaction()
    rate = redaction["corpus.redact_mb_s"]
    size = redaction["corpus.megabytes"]
    split = redaction["corpus.redact_over_split"]
    print("redaction throughput on the secrets corpus (bench/redaction.py)")
    print(f"  redact {rate:.1f} MB/s over {size:.2f} MB ({split:.2f}x a whitespace split)")


if __name__ == "__main__":
    main()
