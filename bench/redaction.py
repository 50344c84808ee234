"""Redaction throughput in MB/s, next to two plain-text baselines measured in the same run.

Run: python bench/redaction.py
     python bench/redaction.py --against REV   # also the detector of git revision REV, on the
                                               # same inputs, timed alternately with this one
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import typing
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # runnable as a plain script from a checkout
    sys.path.insert(0, str(ROOT))

from orcad.secrets import find_secrets, redact  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
MEGABYTE = 1_000_000
WHITESPACE = re.compile(r"\s+")
PROSE = (
    "the daemon keeps memory per project and recalls the most relevant entries before each turn "
    "we decided to keep the ledger authoritative and rebuild the index from it on demand "
    "please run the tests with pytest and check the token budget before you merge the branch "
    "the password reset flow was moved behind single sign on last quarter "
    "a worker must hold an unexpired lease when it publishes candidates to the ledger"
)
PROSE_WORDS = tuple(WHITESPACE.split(PROSE))


def corpus_text() -> str:
    with (CORPUS / "secrets.jsonl").open(encoding="utf-8") as lines:
        return "\n\n".join(json.loads(line)["text"] for line in lines)


def mixed_text(size: int, with_secrets: bool, seed: int = 7) -> str:
    """Prose paragraphs interleaved with real Python source, optionally a few corpus secrets."""
    rng = random.Random(seed)
    code = Path(typing.__file__).read_text(encoding="utf-8")
    secrets = corpus_text().split("\n\n")
    parts: list[str] = []
    length = 0
    while length < size:
        kind = rng.random()
        if kind < 0.5:
            part = " ".join(rng.choice(PROSE_WORDS) for _ in range(rng.randint(40, 120))) + "."
        elif kind < 0.995 or not with_secrets:
            start = rng.randrange(len(code) - 3_000)
            part = "```python\n" + code[start : start + rng.randint(500, 3_000)] + "\n```"
        else:
            part = rng.choice(secrets)
        parts.append(part)
        length += len(part) + 2
    return "\n\n".join(parts)[:size]


def median_seconds(function: Callable[[str], object], text: str, repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        function(text)
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def measure_redaction(repeats: int = 7) -> dict[str, float]:
    """MB/s of redact() and of the baselines on each input, plus redact/baseline ratios."""
    inputs = {
        "corpus": corpus_text(),
        "mixed_with_secrets": mixed_text(MEGABYTE, with_secrets=True),
        "mixed_no_secrets": mixed_text(MEGABYTE, with_secrets=False),
    }
    results: dict[str, float] = {}
    for name, text in inputs.items():
        megabytes = len(text.encode("utf-8")) / MEGABYTE
        redact_rate = megabytes / median_seconds(redact, text, repeats)
        split_rate = megabytes / median_seconds(WHITESPACE.split, text, repeats)
        lower_rate = megabytes / median_seconds(str.lower, text, repeats)
        results[f"{name}.megabytes"] = megabytes
        results[f"{name}.matches"] = float(len(find_secrets(text)))
        results[f"{name}.redact_mb_s"] = redact_rate
        results[f"{name}.split_mb_s"] = split_rate
        results[f"{name}.lower_mb_s"] = lower_rate
        results[f"{name}.redact_over_split"] = redact_rate / split_rate
        results[f"{name}.redact_over_lower"] = redact_rate / lower_rate
    return results


def detector_files(revision: str) -> list[str]:
    """The detector's modules at `revision`: orcad/secrets.py and every orcad/secret_*.py beside
    it (older revisions have it in one file, later ones in three, then four)."""
    listed = subprocess.run(
        ["git", "ls-tree", "--name-only", revision, "orcad/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    names = [Path(line).name for line in listed.stdout.splitlines()]
    return [n for n in names if n == "secrets.py" or re.fullmatch(r"secret_\w+\.py", n)]


def load_detector(revision: str) -> typing.Any:
    """The secret detector as it was at `revision`, imported under its own package name."""
    package = "orcad_at_" + re.sub(r"\W", "_", revision)
    directory = Path(tempfile.mkdtemp()) / package
    directory.mkdir()
    (directory / "__init__.py").write_text("", encoding="utf-8")
    for name in detector_files(revision):
        shown = subprocess.run(
            ["git", "show", f"{revision}:orcad/{name}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        source = shown.stdout.replace("from orcad.secret", f"from {package}.secret")
        (directory / name).write_text(source, encoding="utf-8")
    sys.path.insert(0, str(directory.parent))
    spec = importlib.util.spec_from_file_location(f"{package}.secrets", directory / "secrets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def compare(revision: str, repeats: int) -> None:
    """MB/s of this detector and of `revision`'s on the same inputs; medians of alternate runs."""
    baseline = load_detector(revision)
    inputs = {
        "corpus": corpus_text(),
        "mixed_with_secrets": mixed_text(MEGABYTE, with_secrets=True),
        "mixed_no_secrets": mixed_text(MEGABYTE, with_secrets=False),
    }
    print(f"\nagainst {revision}: medians of {repeats} alternate runs")
    print(f"{'input':20} {revision:>12} {'now':>10} {'now/then time':>14}")
    for name, text in inputs.items():
        megabytes = len(text.encode("utf-8")) / MEGABYTE
        then: list[float] = []
        now: list[float] = []
        for _ in range(repeats):
            then.append(median_seconds(baseline.redact, text, 1))
            now.append(median_seconds(redact, text, 1))
        then_s, now_s = statistics.median(then), statistics.median(now)
        print(
            f"{name:20} {megabytes / then_s:10.1f}/s {megabytes / now_s:8.1f}/s"
            f" {now_s / then_s:13.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--against", metavar="REV", help="also time the detector of git REV")
    arguments = parser.parse_args()
    results = measure_redaction(arguments.repeats)
    print(f"redaction throughput, median of {arguments.repeats} runs")
    columns = ("MB", "matches", "redact", "split", "lower", "redact/split", "redact/lower")
    widths = (6, 8, 9, 10, 9, 13, 13)
    print(f"{'input':20}" + "".join(f" {c:>{w}}" for c, w in zip(columns, widths, strict=True)))
    for name in ("corpus", "mixed_with_secrets", "mixed_no_secrets"):
        print(
            f"{name:20} {results[f'{name}.megabytes']:6.2f} {results[f'{name}.matches']:8.0f}"
            f" {results[f'{name}.redact_mb_s']:7.1f}/s {results[f'{name}.split_mb_s']:8.1f}/s"
            f" {results[f'{name}.lower_mb_s']:7.1f}/s {results[f'{name}.redact_over_split']:13.2f}"
            f" {results[f'{name}.redact_over_lower']:13.3f}"
        )
    if arguments.against:
        compare(arguments.against, arguments.repeats * 3)


if __name__ == "__main__":
    main()
