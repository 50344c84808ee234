"""What orcad imports before it answers its first request, and that what it leaves for later is
still there when first needed. Each check runs in a fresh interpreter: in this one, other tests
have long imported everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.inprocess

REPO_ROOT = Path(__file__).resolve().parent.parent

# a GitHub personal access token given as the user name of a remote helper's address
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_secret_detector_is_not_imported_before_orcad_listens() -> None:
    # its modules were some 14 ms of CPU of every start, and nothing before the first
    # answer reads a text for secrets
    loaded = _run(
        "import sys, orcad.main\n"
        "print(sorted(m for m in sys.modules if m.startswith('orcad.secret')))"
    )
    assert loaded == "[]"


def test_a_token_as_a_helpers_user_is_dropped_in_a_fresh_process() -> None:
    # the detector is imported at the first address that needs it
    url = f"hg::ssh://{TOKEN}@example.org/repo"
    normalized = _run(
        f"import sys, orcad.identity\n"
        f"assert 'orcad.secrets' not in sys.modules\n"
        f"print(orcad.identity.normalize_origin({url!r}))"
    )
    assert normalized == "hg/:ssh:/example.org/repo"


def test_an_error_recorded_before_the_features_are_in_is_redacted(tmp_path: Path) -> None:
    # daemon.status shows recent errors to anyone who asks; one recorded before the features
    # (which import the detector) are installed is redacted all the same
    code = f"""
import os, sys
root = {str(tmp_path)!r}
os.environ.update(
    ORCA_HOME=root + "/home", ORCA_CONFIG_DIR=root + "/config", ORCA_SOCKET=root + "/orcad.sock"
)
from orcad.app import Daemon
from orcad.config import load_config
from orcad.paths import resolve_paths
paths = resolve_paths()
daemon = Daemon(paths=paths, loaded=load_config(paths.config_file))
assert "orcad.secrets" not in sys.modules
daemon.record_error("connection", "endpoint said: bad key {TOKEN}")
print(daemon.recent_errors[-1].message)
"""
    message = _run(code)
    assert message.startswith("endpoint said: bad key")
    assert TOKEN not in message
