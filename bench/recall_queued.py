"""What a queued job the workers leave costs the recalls of its session, interleaved.

One real orcad, two sessions in two repositories. Session `queued` completed a turn whose job
stays queued (auto memory was switched off in config.toml after the session opened: its
snapshot keeps capturing, the workers leave the job); session `clear` has no job. Each round
sends a new-turn recall for one and then the other on their own connections, so both see the
same machine load. Every such recall asks the barrier whether the queued job may run now.
Prints recall p50/p99 of each and the ratio of the p50s (1.0: the queued job costs nothing).

    .venv/bin/python -m bench.recall_queued [--requests 400] [--json]
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

from bench.common import millis, running_daemon, summarize
from protocol.client import Client

PROMPT = "how do we deploy the release and which tests run before the tag is pushed"


def open_session(client: Client, cwd: Path) -> dict[str, Any]:
    opened = client.call("session.open", {"cwd": str(cwd), "mode": "yolo"})
    return {"session_id": opened.session_id, "epoch": opened.epoch}


def queue_held_job(client: Client, ids: dict[str, Any]) -> None:
    completed = client.call(
        "turn.completed",
        {
            **ids,
            "turn_id": "queued-turn",
            "outcome": "succeeded",
            "verifier": "passed",
            "transcript_committed": True,
            "messages": [
                {"role": "user", "content": "remember that we deploy with make release"},
                {"role": "assistant", "content": "Noted."},
            ],
        },
    )
    if not completed.eligible:
        raise SystemExit(f"the turn was not queued: {completed.reason}")


def measure(requests: int) -> dict[str, float]:
    # no built-in worker: the job stays queued whatever the switch says, until it is turned off
    with running_daemon("embedding = 'none'\n[extraction]\nworkers = 0\n") as (_, sock, root):
        for name in ("queued", "clear"):
            (root / name).mkdir()
        with Client(sock) as queued, Client(sock) as clear:
            ids = {"queued": open_session(queued, root / "queued")}
            ids["clear"] = open_session(clear, root / "clear")
            queue_held_job(queued, ids["queued"])
            (root / "home" / "config.toml").write_text("embedding = 'none'\nauto_memory = false\n")
            clients = {"queued": queued, "clear": clear}
            times: dict[str, list[float]] = {"queued": [], "clear": []}
            for number in range(requests):
                for name, client in clients.items():
                    params = {**ids[name], "turn_id": f"t{number}", "prompt": PROMPT}
                    started = time.perf_counter()
                    result = client.call("recall", params)
                    times[name].append(time.perf_counter() - started)
                    if result.barrier != "none":
                        raise SystemExit(f"{name}: the barrier waited ({result.barrier})")
    (queued_p50, queued_p99), (clear_p50, clear_p99) = map(summarize, times.values())
    return {
        "queued_p50_s": queued_p50,
        "queued_p99_s": queued_p99,
        "clear_p50_s": clear_p50,
        "clear_p99_s": clear_p99,
        "ratio_p50": queued_p50 / clear_p50,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = measure(args.requests)
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"recall, session with a queued job: p50 {millis(figures['queued_p50_s'])}  "
        f"p99 {millis(figures['queued_p99_s'])}"
    )
    print(
        f"recall, session with none:         p50 {millis(figures['clear_p50_s'])}  "
        f"p99 {millis(figures['clear_p99_s'])}"
    )
    print(f"ratio of the p50s: {figures['ratio_p50']:.2f}")


if __name__ == "__main__":
    main()
