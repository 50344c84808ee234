"""What the embedding model costs recall: the built-in model against lexical-only recall
(`embedding = "none"`, recall as it was before embeddings), on the same data, interleaved.

Two real orcad processes on copies of one home (the project ledger of 128 facts, the deliberate
database grown to each size and fully embedded), both serving the same working directory. Each
round sends the same new-turn recall to one and then the other, so both see the same machine
load. Prints recall p50/p99 of each, the ratio of the p50s, and the entries each injected per
recall (a daemon whose search fails answers fast and empty).

`--against REV` adds a third daemon: orcad as it was at git revision REV (its files, from `git
archive`), with its own defaults, on a third copy of the home. Recall before embeddings existed
(the issue's "today's") is `--against 7f6e06b`, the tree the semantic-recall issue was filed
against: the baseline of its target, at most 2x at 10k deliberate records. Lexical-only
recall of this tree is not quite that recall: it also picks the most selective terms,
isolates the two parts and caps the whole block, which that tree did not.

`--busy N` keeps N other processes spinning on the CPU while it measures, as a build or a test
run does on a developer's machine (on this 2-core machine, `--busy 1` leaves one core to the
two daemons and the client). `--embedding` measures another model than the built-in one
("static", a model directory). The prompts are bench/recall.py's (three or four questions
run together, about 44 tokens; a prompt's embedding grows with its tokens), or with `--prompts
labelled` the labelled set's (bench/eval_data.py: one question each, a median of 8 tokens).

    .venv/bin/python -m bench.recall_cost [--sizes 1000,10000] [--requests 300] [--busy N]
        [--embedding SETTING] [--prompts bench|labelled] [--against REV] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import percentile, rss_mib
from bench.eval_recall import Labelled, load_automatic
from bench.recall import Populator, latency_prompts, wait_for_backfill
from orcad.log import configure_logging
from tests.harness import DaemonProcess, OrcaEnv

CONFIG = '[extraction]\nworkers = 0\n[recall]\nembedding = "{embedding}"\n'
REVISION_CONFIG = "[extraction]\nworkers = 0\n"  # an older orcad may not know [recall]
REPOSITORY = Path(__file__).resolve().parent.parent


def measure(
    daemons: dict[str, DaemonProcess], cwd: str, prompts: list[str], requests: int, size: int
) -> dict[str, Any]:
    samples: dict[str, list[float]] = {name: [] for name in daemons}
    entries: dict[str, int] = dict.fromkeys(daemons, 0)  # injected: a daemon that fails is fast
    clients = {name: daemon.client() for name, daemon in daemons.items()}
    try:
        ids = {}
        for name, client in clients.items():
            opened = client.call("session.open", {"cwd": cwd, "mode": "normal"})
            ids[name] = {"session_id": opened.session_id, "epoch": opened.epoch}
        for number in range(requests + 30):  # the first 30 warm caches
            prompt = prompts[number % len(prompts)]
            order = list(clients) if number % 2 == 0 else list(reversed(clients))
            for name in order:
                params = {**ids[name], "turn_id": f"c-{size}-{number}", "prompt": prompt}
                started = time.perf_counter()
                result = clients[name].call("recall", params)
                if number >= 30:
                    samples[name].append(time.perf_counter() - started)
                    entries[name] += len(result.automatic) + len(result.deliberate)
    finally:
        for client in clients.values():
            client.close()
    figures: dict[str, Any] = {"records": size}
    for name, values in samples.items():
        figures[name] = (percentile(values, 0.5), percentile(values, 0.99))
        process = daemons[name].proc
        assert process is not None
        figures[f"{name}_rss_mib"] = rss_mib(process.pid)
        figures[f"{name}_entries"] = entries[name] / max(1, len(values))
    figures["ratio"] = figures["builtin"][0] / figures["none"][0]
    if "against" in figures:
        figures["ratio_against"] = figures["builtin"][0] / figures["against"][0]
        figures["none_over_against"] = figures["none"][0] / figures["against"][0]
    return figures


def export_revision(revision: str, directory: Path) -> Path:
    """The files of git `revision` of this repository, in `directory` (SystemExit with git's
    reason when it is not a commit here)."""
    resolved = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
    )
    if resolved.returncode != 0:
        raise SystemExit(f"--against {revision}: not a commit of {REPOSITORY}")
    directory.mkdir()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", resolved.stdout.strip()],
        cwd=REPOSITORY,
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    return directory


def busy_processes(count: int) -> list[subprocess.Popen[bytes]]:
    """`count` processes that spin on the CPU until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def run(
    sizes: list[int],
    requests: int,
    busy: int = 0,
    embedding: str = "builtin",
    prompts: list[str] | None = None,
    *,
    against: str | None = None,
) -> list[dict[str, Any]]:
    prompts = prompts or latency_prompts()
    report = []
    with tempfile.TemporaryDirectory(prefix="orcad-bench-recall-cost-") as temp:
        base = Path(temp)
        code = None if against is None else export_revision(against, base / "revision")
        workdir = base / "repo"  # outside both homes: both daemons see the same project
        workdir.mkdir()
        cwd = str(workdir)
        homes = {"builtin": base / "builtin", "none": base / "none"}
        homes["builtin"].mkdir()
        orca = OrcaEnv(homes["builtin"])
        orca.write_config(CONFIG.format(embedding=embedding))
        daemon = DaemonProcess(orca)
        try:  # a daemon is never left running when the bench fails
            daemon.start()
            opened = daemon.call("session.open", {"cwd": cwd})
            load_automatic(
                orca.memory_root / "projects" / opened.project.id, time.time(), Labelled.named()
            )
            populator = Populator(orca.deliberate_db, opened.workspace.id, opened.workspace.root)
        finally:
            daemon.stop()
        for size in sizes:
            print(f"growing the deliberate database to {size} records", file=sys.stderr)
            populator.grow_to(size)
            try:
                daemon.start()
                wait_for_backfill(daemon, session=opened)  # the ledger's facts' vectors too
            finally:
                daemon.stop()
            shutil.rmtree(homes["none"], ignore_errors=True)
            shutil.copytree(homes["builtin"], homes["none"], symlinks=True)
            lexical = OrcaEnv(homes["none"])
            lexical.write_config(CONFIG.format(embedding="none"))
            older = None
            if code is not None:  # copied while no daemon runs (a socket cannot be copied)
                homes["against"] = base / "against"
                shutil.rmtree(homes["against"], ignore_errors=True)
                shutil.copytree(homes["builtin"], homes["against"], symlinks=True)
                older = OrcaEnv(homes["against"], extra_env={"PYTHONPATH": str(code)})
                older.write_config(REVISION_CONFIG)
            daemons = {"builtin": daemon, "none": DaemonProcess(lexical)}
            if older is not None:
                daemons["against"] = DaemonProcess(older)
            spinning: list[subprocess.Popen[bytes]] = []
            try:  # every daemon is stopped, whichever fails to start
                for started in daemons.values():
                    started.start()
                spinning = busy_processes(busy)
                print(f"measuring at {size} records", file=sys.stderr)
                figures = measure(daemons, cwd, prompts, requests, size)
                figures["busy"] = busy
                if against is not None:
                    figures["revision"] = against
            finally:
                for process in spinning:
                    process.kill()
                    process.wait()
                for started in daemons.values():
                    try:
                        started.stop()
                    except Exception:  # (subprocess.TimeoutExpired) the others are stopped too
                        started.kill()
            report.append(figures)
            print(format_figures(figures), file=sys.stderr)
    return report


def format_figures(figures: dict[str, Any]) -> str:
    def ms(value: float) -> str:
        return f"{value * 1e3:7.3f} ms"

    lines = [
        f"{figures['records']:>7} deliberate records, ledger of 128"
        + (f", {figures['busy']} busy processes" if figures.get("busy") else "")
        + ":",
        f"  recall, with the model  p50 {ms(figures['builtin'][0])}"
        f"  p99 {ms(figures['builtin'][1])}  RSS {figures['builtin_rss_mib']:.1f} MiB"
        f"  entries {figures['builtin_entries']:.1f}",
        f"  recall, lexical only    p50 {ms(figures['none'][0])}  p99 {ms(figures['none'][1])}"
        f"  RSS {figures['none_rss_mib']:.1f} MiB  entries {figures['none_entries']:.1f}",
        f"  ratio of the p50s: {figures['ratio']:.2f}x",
    ]
    if "against" in figures:
        lines += [
            f"  recall at {figures['revision']:<12} p50 {ms(figures['against'][0])}"
            f"  p99 {ms(figures['against'][1])}  RSS {figures['against_rss_mib']:.1f} MiB"
            f"  entries {figures['against_entries']:.1f}",
            f"  with the model / {figures['revision']}: {figures['ratio_against']:.2f}x"
            f" (target <= 2x at 10k); lexical only / {figures['revision']}:"
            f" {figures['none_over_against']:.2f}x",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--requests", type=int, default=300, help="timed recalls per daemon")
    parser.add_argument(
        "--busy", type=int, default=0, help="other processes spinning on the CPU meanwhile"
    )
    parser.add_argument("--embedding", default="builtin", help="the model's [recall] embedding")
    parser.add_argument("--prompts", choices=("bench", "labelled"), default="bench")
    parser.add_argument(
        "--against", metavar="REV", help="also measure orcad as it was at git revision REV"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    configure_logging(sys.stderr, level=logging.WARNING)
    prompts = None
    if args.prompts == "labelled":
        prompts = [prompt for _kind, prompt, _wanted in Labelled.named().prompts]
    report = run(
        [int(size) for size in args.sizes.split(",")],
        args.requests,
        args.busy,
        args.embedding,
        prompts,
        against=args.against,
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for figures in report:
            print(format_figures(figures))


if __name__ == "__main__":
    main()
