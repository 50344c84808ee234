"""How soon a new `orcactl mcp` lists its tools: a first start, which answers `initialize` and
`tools/list` once the MCP SDK has loaded, against a later one, which answers them from its
cache (orcactl/mcp_handshake.py) while the SDK loads.

Each round starts the server twice as an agent does, in a scratch home of its own (no daemon
is needed for these two requests): once with the cache deleted and once with it in place, in
alternating order so that both see the same machine load. The client writes `initialize`, the
`notifications/initialized` that follows it and `tools/list` at once, and the time is from the
start of the process to the last byte of the `tools/list` answer. Then it closes stdin and the
server exits. Prints p50/p99 of each and the ratio of the p50s. `codex exec` sends its first
model request about a second after starting its MCP servers, so a server that takes longer is
missing from it (README, The MCP server).

With `--client stateless` the client writes what Claude Code 2.1.332 writes to a new server
(tests/recorded/claude-code-2.1.332/mcp-start.jsonl: the protocol's stateless revision, no
`initialize`; `server/discover`, a subscription that stays open, the three lists), and the time
is to the end of the `tools/list` answer; the server is then killed, since the subscription
would keep it waiting.

    .venv/bin/python -m bench.mcp_start [--rounds 20] [--client handshake|stateless]
        [--orcactl PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO_ROOT, isolated_env, summarize

VERSION = "2025-06-18"
REQUESTS = b"".join(
    json.dumps(message).encode() + b"\n"
    for message in (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": VERSION,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    )
)


STATELESS_START = REPO_ROOT / "tests" / "recorded" / "claude-code-2.1.332" / "mcp-start.jsonl"
STATELESS_TOOLS_ID = 3  # of its tools/list


def stateless_time_to_tools(orcactl: str, env: dict[str, str], cwd: Path, *, record: bool) -> float:
    """Seconds from starting the server to the end of its answer to Claude Code's tools/list;
    with `record`, the server is let finish (its cache written) instead of killed."""
    started = time.perf_counter()
    with subprocess.Popen(
        [orcactl, "mcp", "--cwd", str(cwd)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(STATELESS_START.read_bytes())
        process.stdin.flush()
        while True:
            line = process.stdout.readline()
            if not line:
                raise SystemExit(
                    f"orcactl mcp stopped before listing its tools: exit {process.wait()}"
                )
            answer = json.loads(line)
            if answer.get("id") == STATELESS_TOOLS_ID:
                break
        elapsed = time.perf_counter() - started
        if "tools" not in answer.get("result", {}):
            raise SystemExit(f"tools/list was answered {answer!r}")
        if record:  # every request answered, then it waits out the subscription and exits
            process.stdin.close()
            process.stdout.read()
            process.wait(timeout=60)
        else:
            process.kill()
    return elapsed


def time_to_tools(orcactl: str, env: dict[str, str], cwd: Path) -> float:
    """Seconds from starting the server to the end of its answer to tools/list."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [orcactl, "mcp", "--cwd", str(cwd)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(REQUESTS)
    process.stdin.flush()
    answers = [json.loads(process.stdout.readline()) for _ in range(2)]
    elapsed = time.perf_counter() - started
    process.stdin.close()
    process.stdout.read()
    if process.wait(timeout=60) != 0 or [answer.get("id") for answer in answers] != [1, 2]:
        raise SystemExit(f"orcactl mcp answered {answers!r}, exit {process.returncode}")
    if "tools" not in answers[1].get("result", {}):
        raise SystemExit(f"tools/list was answered {answers[1]!r}")
    return elapsed


def run(orcactl: str, rounds: int, client: str = "handshake") -> dict[str, Any]:
    def timed(env: dict[str, str], root: Path, *, record: bool = False) -> float:
        if client == "stateless":
            return stateless_time_to_tools(orcactl, env, root, record=record)
        return time_to_tools(orcactl, env, root)

    with tempfile.TemporaryDirectory(prefix="orca-bench-mcp-") as scratch:
        root = Path(scratch)
        env = isolated_env(root) | {"HOME": str(root / "home")}
        env.pop("XDG_CACHE_HOME", None)
        cache = root / "home" / ".cache" / "orca"
        timed(env, root, record=True)  # writes the cache; the first import warms the disk
        if not (cache / "mcp-handshake.json").exists():
            raise SystemExit("the first start wrote no cache: nothing to compare")
        samples: dict[str, list[float]] = {"first start": [], "from the cache": []}
        for number in range(rounds):
            order = ("first start", "from the cache")[:: 1 if number % 2 == 0 else -1]
            for name in order:
                if name == "first start":
                    shutil.move(cache, root / "cache-aside")
                    samples[name].append(timed(env, root))
                    shutil.rmtree(cache, ignore_errors=True)  # a killed one may have written none
                    shutil.move(root / "cache-aside", cache)
                else:
                    samples[name].append(timed(env, root))
    figures: dict[str, Any] = {"rounds": rounds, "client": client}
    for name, values in samples.items():
        p50, p99 = summarize(values)
        figures[name] = {"p50_s": p50, "p99_s": p99}
    figures["ratio"] = figures["first start"]["p50_s"] / figures["from the cache"]["p50_s"]
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="starts of each kind")
    parser.add_argument(
        "--orcactl",
        default=str(Path(sys.executable).parent / "orcactl"),
        help="the orcactl to start (default: beside this Python)",
    )
    parser.add_argument(
        "--client",
        choices=("handshake", "stateless"),
        default="handshake",
        help="initialize then tools/list (Codex), or Claude Code's stateless start",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not os.access(args.orcactl, os.X_OK):
        parser.error(f"--orcactl {args.orcactl}: not a runnable file")
    os.environ["PYTHONPATH"] = str(REPO_ROOT)
    figures = run(args.orcactl, args.rounds, args.client)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"orcactl mcp, start to tools listed ({figures['rounds']} starts of each, "
        f"{figures['client']} client):"
    )
    for name in ("first start", "from the cache"):
        values = figures[name]
        print(f"  {name:<15} p50 {values['p50_s']:.3f} s  p99 {values['p99_s']:.3f} s")
    print(f"  ratio of the p50s: {figures['ratio']:.1f}x")


if __name__ == "__main__":
    main()
