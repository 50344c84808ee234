"""orcactl run in a current directory no request can name."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.harness import OrcaEnv
from tests.test_orcactl_usage import orcactl

pytestmark = pytest.mark.daemon


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "x"],
        ["remember", "x"],
        ["memory", "list"],
        ["inspect"],
        ["forget", "cand_" + "0" * 32],
        ["integrate", "codex", "--project", "--dry-run"],
        ["mcp"],
    ],
    ids=" ".join,
)
def test_a_current_directory_not_named_in_utf8_is_bad_usage_before_any_start(
    orca_env: OrcaEnv, tmp_path: Path, argv: list[str]
) -> None:
    # a directory named in Latin-1 (b"caf\xe9"): JSON cannot carry its path. It was exit 1
    # with a message that named no directory, after starting orcad for nothing.
    latin1 = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    latin1.mkdir()
    result = orcactl(orca_env, *argv, "--json", cwd=latin1)
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, result.stderr
    shown = f"{tmp_path}/caf\\xe9"
    assert f"the current directory's path {shown} is not valid UTF-8" in result.stderr
    if argv != ["mcp"]:  # mcp speaks JSON-RPC on stdout, not orcactl's --json
        assert json.loads(result.stdout)["error"]["data"] == {"kind": "usage"}
    assert not orca_env.socket.exists()  # refused before orcad was started for it
