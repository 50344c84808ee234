"""The ledger writer killed at its failpoints (a real process that exits at the named step):
the old ledger or the whole new one, never half of either."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orcad.capture.ledger import LEDGER_FILE, Ledger, read_ledger, write_ledger
from orcad.failpoints import FAILPOINT_ENV, FAILPOINT_EXIT_STATUS
from tests.harness import REPO_ROOT
from tests.test_ledger import merge

pytestmark = pytest.mark.crash


CRASHING_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from orcad.capture.ledger import Provenance, merge_job_candidates, read_ledger, write_ledger
    from protocol.types import ExtractedFact

    project = Path(sys.argv[1])
    ledger = read_ledger(project)
    provenance = Provenance("s", "t", "heuristic", "rules", "v1")
    new, _ = merge_job_candidates(
        ledger, "job_crash", [ExtractedFact("user", "Written by the crashing writer")],
        provenance, 1.0,
    )
    write_ledger(project, new)
    print("survived")
    """
)


def run_writer(project: Path, point: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, FAILPOINT_ENV: point}
    return subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(project)],
        env=environment,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_crash_after_temp_write_leaves_the_old_ledger_intact(tmp_path: Path) -> None:
    old, _ = merge(Ledger(), "job_a", "One", "Two")
    write_ledger(tmp_path, old)
    result = run_writer(tmp_path, "ledger.after_temp_write")
    assert result.returncode == FAILPOINT_EXIT_STATUS, result.stderr
    assert "survived" not in result.stdout
    assert read_ledger(tmp_path) == old
    leftovers = [p for p in tmp_path.iterdir() if p.name != LEDGER_FILE]
    assert len(leftovers) == 1 and leftovers[0].name.endswith(".tmp")
    # the next write clears the crash's temp file
    newer, _ = merge(old, "job_b", "Three")
    write_ledger(tmp_path, newer)
    assert [p.name for p in tmp_path.iterdir()] == [LEDGER_FILE]
    assert read_ledger(tmp_path) == newer


def test_crash_after_rename_leaves_the_whole_new_ledger(tmp_path: Path) -> None:
    old, _ = merge(Ledger(), "job_a", "One")
    write_ledger(tmp_path, old)
    result = run_writer(tmp_path, "ledger.after_rename")
    assert result.returncode == FAILPOINT_EXIT_STATUS, result.stderr
    new = read_ledger(tmp_path)
    assert new.revision == old.revision + 1
    assert [c.fact for c in new.candidates] == ["One", "Written by the crashing writer"]


def test_unarmed_writer_completes(tmp_path: Path) -> None:
    result = run_writer(tmp_path, "some.other.point")
    assert result.returncode == 0, result.stderr
    assert "survived" in result.stdout
    assert read_ledger(tmp_path).revision == 1
