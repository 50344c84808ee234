"""`orcactl integrate` while another program writes the same files (the agent itself rewrites
~/.claude.json as it runs): the other program's write is never lost."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orcactl import agent_configs
from orcactl.connect import CommandError
from orcactl.integrate import run_integrate
from tests.hook_helpers import ORCACTL

pytestmark = pytest.mark.inprocess

MINE = {"model": "opus", "hooks": {"Stop": [{"hooks": [{"command": "notify-send done"}]}]}}


def _args() -> argparse.Namespace:
    return argparse.Namespace(
        agent="claude-code",
        project=False,
        cwd=None,
        orcactl=ORCACTL,
        remove=False,
        extractor=False,
        dry_run=False,
        json=False,
        socket=None,
    )


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for name in ("CLAUDE_CONFIG_DIR", "ORCA_SOCKET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(MINE))
    return path


def _edited_meanwhile(
    monkeypatch: pytest.MonkeyPatch, path: Path, times: int
) -> list[dict[str, Any]]:
    """The first `times` plans of settings.json are followed by another program's write to it,
    after integrate read it and before it replaces it; the texts written, in order."""
    written: list[dict[str, Any]] = []
    plan_hooks: Callable[..., str] = agent_configs.edit_hooks

    def edit_then_another_program_writes(*args: Any, **kwargs: Any) -> str:
        after = plan_hooks(*args, **kwargs)
        if len(written) < times:
            theirs = {**json.loads(path.read_text()), "theme": f"dark-{len(written)}"}
            path.write_text(json.dumps(theirs))
            written.append(theirs)
        return after

    monkeypatch.setattr(agent_configs, "edit_hooks", edit_then_another_program_writes)
    return written


def test_a_file_written_meanwhile_is_read_again_and_the_write_kept(
    settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _edited_meanwhile(monkeypatch, settings, times=2)
    assert run_integrate(_args()) == 0
    result = json.loads(settings.read_text())
    assert result["theme"] == "dark-1" and result["model"] == "opus"
    stops = [h["command"] for group in result["hooks"]["Stop"] for h in group["hooks"]]
    assert stops == ["notify-send done", f"{ORCACTL} hook claude-code Stop"]
    backups = list(settings.parent.glob("settings.json.orca-backup-*"))
    assert [json.loads(b.read_text())["theme"] for b in backups] == ["dark-1"]


def test_a_file_that_keeps_changing_is_refused_and_nothing_changes(
    settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = _edited_meanwhile(monkeypatch, settings, times=99)
    with pytest.raises(CommandError) as refused:
        run_integrate(_args())
    assert str(settings) in str(refused.value) and "nothing was changed" in str(refused.value)
    assert json.loads(settings.read_text()) == theirs[-1]  # the other program's last write
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]
    assert not (settings.parents[1] / ".claude.json").exists()
