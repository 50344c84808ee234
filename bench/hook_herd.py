"""Hooks of several agent sessions that find no daemon at once (a machine that just booted, a
terminal multiplexer restoring its panes): how long each hook takes, and how many orcad
processes they start, against one hook alone finding no daemon, measured in the same run.

Each round starts from no daemon in a fresh home; a `UserPromptSubmit` hook (Codex's payload)
per session is started at once. Printed: the hooks' median and slowest time, their ratio to the
lone hook's median, and the orcad processes started (one serves; the others find it and exit).

    .venv/bin/python bench/hook_herd.py [--hooks 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import isolated_env

ORCACTL = str(Path(sys.executable).with_name("orcactl"))
LOST = ("already running", "another orcad")  # what an orcad that lost the start says


def payload(cwd: Path) -> bytes:
    return json.dumps(
        {
            "session_id": "herd",
            "turn_id": "t1",
            "transcript_path": None,
            "cwd": str(cwd),
            "hook_event_name": "UserPromptSubmit",
            "model": "gpt-5-codex",
            "permission_mode": "default",
            "prompt": "why does the deploy fail?",
        }
    ).encode()


def one_round(hooks: int) -> tuple[float, int]:
    """The time until the last of `hooks` hooks started at once has answered, and the orcad
    processes they started."""
    root = Path(tempfile.mkdtemp(prefix="orca-herd-"))
    try:
        env = isolated_env(root)
        (root / "repo").mkdir()
        (root / "input.json").write_bytes(payload(root / "repo"))
        started = time.perf_counter()
        running = []
        for _ in range(hooks):
            with (root / "input.json").open("rb") as stdin:  # each its own: all read at once
                running.append(
                    subprocess.Popen(
                        [ORCACTL, "hook", "codex", "UserPromptSubmit"],
                        stdin=stdin,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        env=env,
                    )
                )
        for process in running:
            process.wait(timeout=60)
        slowest = time.perf_counter() - started
        time.sleep(1.0)  # an orcad that lost the start says so within a moment
        log = (root / "home" / "orcad.log").read_text(errors="replace")
        lost = sum(
            1
            for line in log.splitlines()
            if line.startswith("orcad: ") and any(marker in line for marker in LOST)
        )
        _stop(root)
        return slowest, 1 + lost
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _stop(root: Path) -> None:
    pid_file = root / "home" / "memory" / "orcad.pid"
    try:
        pid = json.loads(pid_file.read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return
    subprocess.run(["kill", f"-{signal.SIGTERM.value}", str(pid)], check=False)
    deadline = time.monotonic() + 10
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hooks", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    alone: list[float] = []
    herd: list[float] = []
    orcads: list[int] = []
    for _ in range(args.rounds):  # interleaved: both see the same machine
        alone.append(one_round(1)[0])
        slowest, started = one_round(args.hooks)
        herd.append(slowest)
        orcads.append(started)
    lone = statistics.median(alone)
    slowest = statistics.median(herd)
    print(f"one hook, no daemon      : {lone * 1000:8.0f} ms (median of {args.rounds})")
    print(f"{args.hooks} hooks at once, slowest: {slowest * 1000:8.0f} ms (median of rounds)")
    print(f"ratio                    : {slowest / lone:8.2f}x")
    print(f"orcad processes started  : {orcads} (one serves)")


if __name__ == "__main__":
    main()
