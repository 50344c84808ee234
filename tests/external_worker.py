"""An external extraction worker: a separate process that speaks jobs.claim / jobs.publish.

Run as `python -m tests.external_worker --socket S --worker NAME --fact TEXT [--lease-s N]
[--wait]`: it claims one job (retrying until `--claim-timeout`), prints a JSON line
`{"event": "claimed", ...}`, waits for a line on stdin when `--wait` is given (so a test can
freeze it with SIGSTOP while it "works"), publishes one project fact and prints
`{"event": "published", ...}` or `{"event": "refused", "code": ..., "kind": ...}`.

The module also holds the small client-side helpers the capture tests share.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from protocol.client import Client
from protocol.errors import RemoteError

T = TypeVar("T")


# --- helpers shared by the capture tests ----------------------------------------------------


def turn_params(session: Any, turn_id: str, *texts: str, **changes: Any) -> dict[str, Any]:
    """turn.completed params for an eligible turn whose user says `texts` (alternating with a
    short assistant answer)."""
    messages: list[dict[str, str]] = []
    for text in texts or ("hello",):
        messages.append({"role": "user", "content": text})
        messages.append({"role": "assistant", "content": "Understood."})
    params: dict[str, Any] = {
        "session_id": session.session_id,
        "epoch": session.epoch,
        "turn_id": turn_id,
        "outcome": "succeeded",
        "verifier": "passed",
        "transcript_committed": True,
        "messages": messages,
    }
    params.update(changes)
    return params


def wait_for(probe: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.02) -> T:
    """Poll `probe` until it returns something truthy; AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s (last value {value!r})")
        time.sleep(interval)


def backfill_done(daemon: Any) -> bool:
    """The background embedding has counted and has no automatic fact left to embed."""
    embedding = daemon.call("daemon.status", {}).embedding
    return embedding.state != "loading" and not embedding.facts_pending


def job_file(memory_root: Path, project_id: str, job_id: str) -> Path:
    return memory_root / "projects" / project_id / "jobs" / f"{job_id}.json"


def read_job_file(memory_root: Path, project_id: str, job_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(job_file(memory_root, project_id, job_id).read_text())
    return data


def fact_output(*facts: str, category: str = "project") -> str:
    return "\n".join(json.dumps({"category": category, "fact": fact}) for fact in facts)


def publish_as_a_worker(daemon: Any, session: Any, turn_id: str, fact: str) -> str:
    """Report a turn that states `fact`, then claim and publish its job as an external worker
    would, the fact as its one output; the job's id."""
    job_id: str = daemon.call(
        "turn.completed", turn_params(session, turn_id, f"note that {fact}")
    ).job_id
    claimed = daemon.call("jobs.claim", {"worker": "test"})
    published = {"output": fact_output(fact), "provider": "external", "model": "test"}
    daemon.call("jobs.publish", {"job_id": job_id, "token": claimed.lease.token, **published})
    return job_id


# --- the worker program -----------------------------------------------------------------------


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="external_worker")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--worker", required=True)
    parser.add_argument("--fact", required=True)
    parser.add_argument("--lease-s", type=float, default=None)
    parser.add_argument("--claim-timeout", type=float, default=30.0)
    parser.add_argument("--wait", action="store_true", help="read a line before publishing")
    args = parser.parse_args(argv)
    with Client(args.socket, timeout=60) as client:
        params: dict[str, Any] = {"worker": args.worker}
        if args.lease_s is not None:
            params["lease_s"] = args.lease_s
        deadline = time.monotonic() + args.claim_timeout
        claimed = client.call("jobs.claim", params)
        while claimed.job is None:
            if time.monotonic() > deadline:
                emit("no_job")
                return 1
            time.sleep(0.02)
            claimed = client.call("jobs.claim", params)
        emit(
            "claimed",
            job_id=claimed.job.job_id,
            token=claimed.lease.token,
            expires_at=claimed.lease.expires_at,
            attempt=claimed.job.attempt,
        )
        if args.wait:
            sys.stdin.readline()
        try:
            result = client.call(
                "jobs.publish",
                {
                    "job_id": claimed.job.job_id,
                    "token": claimed.lease.token,
                    "output": fact_output(args.fact),
                    "provider": "external",
                    "model": args.worker,
                },
            )
        except RemoteError as exc:
            emit("refused", code=exc.code, kind=exc.kind)
            return 0
        emit("published", added=result.added, duplicates=result.duplicates)
    return 0


if __name__ == "__main__":
    sys.exit(main())
