"""The trust Codex records before it runs a hook, as `integrate` writes it: the key and hash of
each of orca's hooks must be what the real `codex` computes (its `app-server`'s `hooks/list`,
recorded from codex-cli 0.171.0 in tests/recorded/), or Codex skips the hook without a word."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from orcactl import agent_configs, toml_edits

pytestmark = pytest.mark.pure

RECORDED = Path(__file__).parent / "recorded" / "codex-0.171.0" / "hooks-list.json"
# where the recorded hooks.json lay when Codex listed it: the keys name it
LISTED_AT = Path("/tmp/trustcheck/codex/hooks.json")


def _cases() -> list[dict[str, Any]]:
    return list(json.loads(RECORDED.read_text())["cases"])


@pytest.mark.parametrize("case", _cases(), ids=["pinned-and-users-own", "matchers"])
def test_the_trust_of_each_orca_hook_is_what_codex_computes(case: dict[str, Any]) -> None:
    trusted = agent_configs.codex_trust(json.dumps(case["hooks.json"]), LISTED_AT)
    listed = {row["key"]: row for row in case["listed"]}
    ours = {
        key: row["currentHash"]
        for key, row in listed.items()
        if agent_configs._is_ours(row["command"], "codex")
    }
    assert trusted == ours
    assert ours  # the recording holds orca's hooks
    # the user's own hook is not trusted on their behalf
    assert all(agent_configs._is_ours(listed[key]["command"], "codex") for key in trusted)


def test_integrate_records_the_trust_and_takes_it_back_on_remove() -> None:
    hooks_path = Path("/home/dev/.codex/hooks.json")
    hooks_text = agent_configs.edit_hooks("", hooks_path, "codex", "/bin/orcactl", remove=False)
    trust = agent_configs.codex_trust(hooks_text, hooks_path)
    config = '# mine\n[hooks.state."/elsewhere/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:1"\n'
    edited = toml_edits.edit_codex_config(
        config, Path("config.toml"), "/bin/orcactl", None, None, remove=False, trust=trust
    )
    states = tomllib.loads(edited)["hooks"]["state"]
    assert states == {
        "/elsewhere/hooks.json:stop:0:0": {"trusted_hash": "sha256:1"},
        **{key: {"trusted_hash": digest} for key, digest in trust.items()},
    }
    assert edited.startswith(config)
    again = toml_edits.edit_codex_config(
        edited, Path("config.toml"), "/bin/orcactl", None, None, remove=False, trust=trust
    )
    assert again == edited  # a second run changes no byte
    removed = toml_edits.edit_codex_config(
        edited, Path("config.toml"), "/bin/orcactl", None, None, remove=True, previous=trust
    )
    assert tomllib.loads(removed)["hooks"]["state"] == {
        "/elsewhere/hooks.json:stop:0:0": {"trusted_hash": "sha256:1"}
    }
    assert removed.startswith(config)  # the user's lines as they were
    assert tomllib.loads(removed) == {
        "hooks": {"state": {"/elsewhere/hooks.json:stop:0:0": {"trusted_hash": "sha256:1"}}},
        "features": {"hooks": True},  # the flag stays (documented)
    }


def test_hooks_state_of_the_wrong_shape_is_refused_naming_the_file() -> None:
    with pytest.raises(agent_configs.Unparseable, match=r"config\.toml"):
        toml_edits.edit_codex_config(
            "hooks = 1\n",
            Path("config.toml"),
            "/bin/orcactl",
            None,
            None,
            remove=False,
            trust={"/h/hooks.json:stop:0:0": "sha256:2"},
        )
