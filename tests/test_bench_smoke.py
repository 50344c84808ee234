"""The benchmarks still run: a name they import renamed, or an option they pass removed, fails
here rather than for whoever runs them next. Each starts (its imports and options), and the
quick ones run at their smallest sizes and print their figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.daemon]

BENCH = REPO_ROOT / "bench"
# a helper other benchmarks start (bench/rpc.py's floor), with no options of its own
HELPERS = {"echo_server.py"}
RUNNABLE = sorted(
    path.name
    for path in BENCH.glob("*.py")
    if path.name not in HELPERS and 'if __name__ == "__main__":' in path.read_text()
)

# Those that take a few seconds at their smallest sizes, with a figure each prints. The others
# start a daemon per phase, load the embedding model over every labelled prompt, or run for a
# time of their own (bench/hostile.py's phases: 150 s), and are only started above.
QUICK = {
    "deliberate.py": (["--sizes", "100", "--queries", "5", "--forgets", "5"], "forget / (raw"),
    "redaction.py": (["--repeats", "1"], "redact/split"),
    "redaction_scaling.py": (["--size", "4", "--repeats", "1"], "2x/1x"),
    "rpc.py": (["--seconds", "0.2", "--pings", "50", "--starts", "1"], "ratio p50"),
    "recall_queued.py": (["--requests", "5"], "ratio of the p50s"),
}


def _run(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / name), *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "ORCA_HOME": str(tmp_path / "home"),
            "ORCA_CONFIG_DIR": str(tmp_path / "config"),
        },
        timeout=120,
    )


def test_the_benchmarks_are_found() -> None:
    assert set(QUICK) <= set(RUNNABLE)
    assert len(RUNNABLE) >= 20, RUNNABLE


@pytest.mark.parametrize("name", RUNNABLE)
def test_a_benchmark_starts(tmp_path: Path, name: str) -> None:
    run = _run(tmp_path, name, "--help")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage:"), run.stdout


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_quick_benchmark_prints_its_figures(tmp_path: Path, name: str) -> None:
    args, figure = QUICK[name]
    run = _run(tmp_path, name, *args)
    assert run.returncode == 0, run.stderr
    assert figure in run.stdout, run.stdout
