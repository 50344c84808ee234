"""Pure logic stays pure: these modules import neither trio nor sqlite3."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness import REPO_ROOT

pytestmark = pytest.mark.pure

PURE_MODULES = [
    "orcad.limits",
    "orcad.control_characters",
    "orcad.query",
    "orcad.secrets",
    # every part of the secret detector, found by name so that a new one is held too
    *sorted(f"orcad.{path.stem}" for path in (REPO_ROOT / "orcad").glob("secret_*.py")),
    "orcad.capture.output",
    "orcad.capture.fact_folding",
    "orcad.session_snapshot",
    "orcad.capture.eligibility",
    "orcad.capture.states",
    "orcad.capture.leases",
    "orcad.capture.source",
    "orcad.capture.schedule",
    "orcad.deliberate.policy",
    "orcad.deliberate.review",
    "orcad.recall.select",
    "orcad.recall.render",
    "orcad.recall.rank",
    "orcad.recall.wordpiece",
    "orcad.recall.bert",
    "orcad.providers.heuristic",
    "orcad.providers.heuristic_refusals",
    "orcad.providers.heuristic_setup",
    "protocol.framing",
    "protocol.types",
]


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_imports_no_io_framework(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "print(sorted(m for m in ('trio', 'sqlite3', '_sqlite3') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", f"{module} pulls in {out.stdout.strip()}"
