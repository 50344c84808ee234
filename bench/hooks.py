"""Spawn-to-exit time of `orcactl hook claude-code UserPromptSubmit` against a warm daemon,
next to `python -c pass` (the floor of any Python hook) and `orcactl ping`, interleaved.

A hook runs on every prompt, so the target is hook p50 <= 3x `python -c pass`. Each hook run is
a new turn (its own prompt, so a real recall, not a snapshot) over a transcript of 40 turns.

    python bench/hooks.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import isolated_env, millis, running_daemon, summarize

ORCACTL = str(Path(sys.executable).parent / "orcactl")


def timed(argv: list[str], env: dict[str, str], stdin: str = "") -> float:
    start = time.perf_counter()
    completed = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if completed.returncode != 0:
        raise RuntimeError(f"{argv} failed: {completed.stderr}")
    return elapsed


def write_transcript(path: Path, session: str, cwd: str, turns: int) -> None:
    lines = []
    for number in range(turns):
        lines.append(
            {
                "type": "user",
                "isSidechain": False,
                "sessionId": session,
                "cwd": cwd,
                "uuid": f"u{number}",
                "message": {"role": "user", "content": f"question {number} about the build"},
            }
        )
        lines.append(
            {
                "type": "assistant",
                "isSidechain": False,
                "sessionId": session,
                "cwd": cwd,
                "uuid": f"a{number}",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "step " * 50},
                        {"type": "text", "text": f"answer {number}: run make test " * 10},
                    ],
                },
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    with running_daemon() as (_proc, _socket, root):
        env = isolated_env(root)
        project = root / "project"
        project.mkdir()
        session = "bench-session"
        transcript = root / "transcript.jsonl"
        write_transcript(transcript, session, str(project), 40)
        common = {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": str(project),
            "permission_mode": "default",
        }
        with_facts = "\n".join(f"- the build uses make target {n}" for n in range(20))
        (root / "home" / "memory").mkdir(parents=True, exist_ok=True)
        (root / "home" / "memory" / "user.md").write_text(with_facts + "\n")
        start = {**common, "hook_event_name": "SessionStart", "source": "startup"}
        timed([ORCACTL, "hook", "claude-code", "SessionStart"], env, json.dumps(start))
        floor: list[float] = []
        hook: list[float] = []
        ping: list[float] = []
        for run in range(args.runs):
            floor.append(timed([sys.executable, "-c", "pass"], env))
            payload = {
                **common,
                "hook_event_name": "UserPromptSubmit",
                "prompt": f"how do we run the build, attempt {run}?",
            }
            hook.append(
                timed(
                    [ORCACTL, "hook", "claude-code", "UserPromptSubmit"], env, json.dumps(payload)
                )
            )
            ping.append(timed([ORCACTL, "--no-start", "ping"], env))
    rows = [
        ("python -c pass", floor),
        ("orcactl hook claude-code UserPromptSubmit", hook),
        ("orcactl ping", ping),
    ]
    print(f"{args.runs} interleaved runs each (spawn to exit)")
    for name, values in rows:
        p50, p99 = summarize(values)
        print(f"  {name:<44} p50 {millis(p50)}  p99 {millis(p99)}")
    base = summarize(floor)[0]
    print(f"  hook / python -c pass (p50): {summarize(hook)[0] / base:5.2f}x   (target <= 3x)")
    print(f"  ping / python -c pass (p50): {summarize(ping)[0] / base:5.2f}x")


if __name__ == "__main__":
    main()
