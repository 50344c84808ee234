"""`orcactl integrate` against configuration files written in unusual but valid ways (dotted TOML
keys, inline tables, CRLF, lone-surrogate JSON escapes, huge numbers) and against config paths
that are not regular files: the rest of each file keeps its meaning, or nothing changes."""

from __future__ import annotations

import argparse
import copy
import json
import os
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from orcactl import agent_configs, toml_edits
from orcactl.agent_configs import Unparseable
from tests.harness import OrcaEnv
from tests.hook_helpers import ORCACTL
from tests.test_integrate import _integrate

ORCA = "/opt/orca/bin/orcactl"
WANTED = {"command": ORCA, "args": ["mcp"]}
PATH = Path("/home/u/.codex/config.toml")

LAYOUTS = {
    "dotted server, then a root key": 'mcp_servers.other.command = "x"\nmodel = "o3"\n',
    "dotted server, then dotted features": (
        'mcp_servers.other.command = "x"\nfeatures.web = true\nmodel = "o3"\n'
    ),
    "dotted features before a table": (
        '# mine\nfeatures.web = true  # keep\n\n[mcp_servers.other]\ncommand = "x"\n'
    ),
    "super-table and keys after tables": (
        'model = "o3"\n[mcp_servers]\n[mcp_servers.other]\ncommand = "x"\n'
        '[profiles.fast]\nmodel = "o4-mini"\n'
    ),
    "features table between tables": (
        '[features]\nweb = true\n\n[mcp_servers.other]\ncommand = "x"\n[tui]\nnotify = true\n'
    ),
    "features sub-table only": "[features.sub]\nx = 1\n",
    # (one set to false is refused: test_codex_hooks_the_user_turned_off_are_not_turned_on...)
    "codex_hooks already on in a table": "[features]\ncodex_hooks = true\nweb = true\n",
    "dotted inside a table": '[mcp_servers]\nother.command = "x"\nother.args = ["a"]\n',
    "a header inside a multi-line string": 'note = """\n[features]\n"""\nfeatures.web = true\n',
    "inline server table": 'mcp_servers = { other = { command = "x" } }\nmodel = "o3"\n',
    "inline features table": 'features = { web = true }\nmodel = "o3"\n',
    "no final newline": '# just a comment\nmodel = "o3"',
    "empty": "",
    "CRLF": (
        '# c\r\nmodel = "o3"\r\nfeatures.web = true\r\n\r\n[mcp_servers.other]\r\ncommand = "x"\r\n'
    ),
}


def _without_orca(data: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    servers = data.get("mcp_servers", {})
    servers.pop("orca", None)
    if not servers:
        data.pop("mcp_servers", None)
    features = data.get("features", {})
    features.pop("hooks", None)  # what integrate adds, where neither name is set
    if not features:
        data.pop("features", None)
    return data


def _edit(text: str, *, remove: bool = False) -> str:
    return toml_edits.edit_codex_config(text, PATH, ORCA, None, None, remove=remove)


def _lone_newlines(text: str) -> int:
    return text.count("\n") - text.count("\r\n")


TRUST = {
    "/home/u/.codex/hooks.json:session_start:0:0": "sha256:aa",
    '/home/u/"odd\\dir"/hooks.json:stop:0:0': "sha256:bb",
}
ENDINGS = ["", "\n", "\n\n", "\n  \n", "\n\t\n", "\n# last\n", "  # mine\n\n\n"]


@pytest.mark.pure
@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
@pytest.mark.parametrize("ending", ENDINGS)
def test_trust_added_to_a_file_without_it_is_written_as_tomlkit_writes_it(
    layout: str, ending: str
) -> None:
    """Trust tables added to a file that has none are written at its end without tomlkit
    parsing the whole file (seconds for one trusting 30,000 projects), byte for byte as
    tomlkit writes them."""
    text = LAYOUTS[layout].rstrip("\r\n") + ending
    if "\r\n" in LAYOUTS[layout]:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    untrusted = toml_edits.edit_codex_config(text, PATH, ORCA, None, None, remove=False)
    trusted = toml_edits.edit_codex_config(text, PATH, ORCA, None, None, remove=False, trust=TRUST)
    by_tomlkit = toml_edits._with_changed_trust(untrusted, TRUST)
    if "\r\n" in text:
        by_tomlkit = by_tomlkit.replace("\r\n", "\n").replace("\n", "\r\n")
    assert trusted == by_tomlkit
    assert tomllib.loads(trusted)["hooks"]["state"] == {
        key: {"trusted_hash": digest} for key, digest in TRUST.items()
    }


@pytest.mark.pure
@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_codex_config_keeps_the_meaning_of_every_user_key(layout: str) -> None:
    text = LAYOUTS[layout]
    before = tomllib.loads(text)
    first = _edit(text)
    after = tomllib.loads(first)
    assert after["mcp_servers"]["orca"] == WANTED
    assert True in (after["features"].get("hooks"), after["features"].get("codex_hooks"))
    assert _without_orca(after) == _without_orca(before)
    assert _edit(first) == first  # a second run changes no byte
    if "\r\n" in text:  # the file's own line ending, not a mix
        assert _lone_newlines(first) == 0
    removed = _edit(first, remove=True)
    data = tomllib.loads(removed)
    assert "orca" not in data.get("mcp_servers", {})
    assert _without_orca(data) == _without_orca(before)
    if "codex_hooks" not in before.get("features", {}):
        # hooks = true stays (documented); everything else is as it was
        assert data.get("features", {}).pop("hooks") is True
        if not data.get("features", {}):
            data.pop("features", None)
        assert data == before
    if "\r\n" in text:
        assert _lone_newlines(removed) == 0


@pytest.mark.pure
def test_an_orca_entry_from_another_orcactl_is_replaced_in_place() -> None:
    text = _edit('mcp_servers.other.command = "x"\nmodel = "o3"\n').replace(ORCA, "/old/orcactl")
    again = _edit(text)
    data = tomllib.loads(again)
    assert data["mcp_servers"]["orca"] == WANTED and data["model"] == "o3"
    assert _edit(again) == again


@pytest.mark.pure
@pytest.mark.parametrize(
    "text",
    [
        "mcp_servers = 3\n",
        'features = "on"\n',
        '[[mcp_servers]]\nname = "x"\n',
    ],
)
def test_a_codex_config_of_the_wrong_shape_is_refused_naming_the_file(text: str) -> None:
    with pytest.raises(Unparseable, match=str(PATH)):
        _edit(text)


@pytest.mark.daemon
def test_codex_with_dotted_keys_and_crlf_end_to_end(orca_env: OrcaEnv) -> None:
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    original = (
        b'# mine\r\nmcp_servers.other.command = "x"\r\nfeatures.web = true\r\nmodel = "o3"\r\n'
    )
    config.write_bytes(original)
    env = {"CODEX_HOME": str(codex_home)}
    run = _integrate(orca_env, "codex", env=env)
    assert run.returncode == 0, run.stderr
    first = config.read_bytes()
    assert b"\n" not in first.replace(b"\r\n", b"")
    data = tomllib.loads(first.decode())
    assert data["model"] == "o3" and data["features"] == {"web": True, "hooks": True}
    assert data["mcp_servers"]["other"] == {"command": "x"}
    assert sorted(key.split(":")[-3] for key in data["hooks"]["state"]) == [
        "session_end",
        "session_start",
        "stop",
        "user_prompt_submit",
    ]
    again = _integrate(orca_env, "codex", env=env)
    assert "nothing to change" in again.stdout and config.read_bytes() == first
    assert _integrate(orca_env, "codex", "--remove", env=env).returncode == 0
    data = tomllib.loads(config.read_bytes().decode())
    assert data == {
        "mcp_servers": {"other": {"command": "x"}},
        "features": {"web": True, "hooks": True},
        "model": "o3",
    }


@pytest.mark.daemon
def test_an_inline_server_table_gets_orca_inline(orca_env: OrcaEnv) -> None:
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text('mcp_servers = { other = { command = "x" } }\nfeatures = { web = true }\n')
    run = _integrate(orca_env, "codex", env={"CODEX_HOME": str(codex_home)})
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    data = tomllib.loads(config.read_text())
    assert data["mcp_servers"]["other"] == {"command": "x"}
    assert data["mcp_servers"]["orca"]["command"] == ORCACTL
    assert data["features"] == {"web": True, "hooks": True}


@pytest.mark.pure
@pytest.mark.parametrize(
    "text",
    [
        "extraction.timeout = 30\nauto_memory = true\n",
        "extraction = { timeout = 30 }\nauto_memory = true\n",
        "# orca\r\nauto_memory = true\r\n[extraction]\r\ntimeout = 30\r\n",
        "",
    ],
)
def test_orca_config_keeps_the_meaning_of_every_user_key(text: str) -> None:
    orca_path = Path("/home/u/.orca/config.toml")
    before = tomllib.loads(text)
    first = toml_edits.edit_orca_config(text, orca_path, "codex", remove=False)
    after = tomllib.loads(first)
    extraction = after.pop("extraction")
    assert extraction.pop("provider") == "command"
    assert extraction.pop("command") == {"argv": ["codex", "exec", "--skip-git-repo-check", "-"]}
    if extraction:
        after["extraction"] = extraction
    assert after == before
    assert toml_edits.edit_orca_config(first, orca_path, "codex", remove=False) == first
    if "\r\n" in text:
        assert _lone_newlines(first) == 0
    removed = toml_edits.edit_orca_config(first, orca_path, "codex", remove=True)
    assert tomllib.loads(removed) == before


def pinned(orca: OrcaEnv) -> list[str]:
    """The MCP server's options that carry the test environment's ORCA_HOME and
    ORCA_CONFIG_DIR."""
    return ["--home", str(orca.home), "--config-dir", str(orca.config_dir)]


def _home(orca: OrcaEnv) -> Path:
    return orca.root / "user-home"


@pytest.mark.daemon
def test_a_lone_surrogate_escape_in_claude_json_is_written_back_as_it_was(
    orca_env: OrcaEnv,
) -> None:
    settings = _home(orca_env) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"model": "opus"}\n')
    claude_json = _home(orca_env) / ".claude.json"
    claude_json.write_text(r'{"projects":{"/x":{"lastPrompt":"broken emoji \ud83d"}}}')
    run = _integrate(orca_env, "claude-code")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    written = claude_json.read_text()
    assert r"broken emoji \ud83d" in written
    data = json.loads(written)
    assert data["projects"] == {"/x": {"lastPrompt": "broken emoji \ud83d"}}
    assert data["mcpServers"]["orca"]["command"] == ORCACTL
    assert "SessionStart" in json.loads(settings.read_text())["hooks"]
    assert _integrate(orca_env, "claude-code", "--remove").returncode == 0
    assert json.loads(claude_json.read_text()) == {
        "projects": {"/x": {"lastPrompt": "broken emoji \ud83d"}}
    }


@pytest.mark.inprocess
def test_a_text_that_cannot_be_encoded_stops_everything_before_the_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from orcactl import integrate
    from orcactl.connect import CommandError

    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    settings = home / ".claude" / "settings.json"
    settings.write_text('{"model": "opus"}\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setattr(
        agent_configs, "edit_claude_mcp", lambda *args, **kwargs: '{"x": "\ud83d"}\n'
    )
    args = argparse.Namespace(
        agent="claude-code",
        project=False,
        cwd=None,
        dry_run=False,
        remove=False,
        extractor=False,
        orcactl=ORCA,
        json=False,
    )
    with pytest.raises(CommandError, match=r"\.claude\.json"):
        integrate.run_integrate(args)
    assert settings.read_text() == '{"model": "opus"}\n'
    assert sorted(p.name for p in home.iterdir()) == [".claude"]
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


@pytest.mark.daemon
@pytest.mark.parametrize("number", ["1e400", "-1e400", "Infinity", "NaN"])
def test_a_number_json_cannot_hold_is_refused_not_written_as_infinity(
    orca_env: OrcaEnv, number: str
) -> None:
    settings = _home(orca_env) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    text = f'{{"limit": {number}}}\n'
    settings.write_text(text)
    run = _integrate(orca_env, "claude-code")
    assert run.returncode == 1 and str(settings) in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert settings.read_text() == text
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]
    assert not (_home(orca_env) / ".claude.json").exists()


@pytest.mark.daemon
@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"a": 1, "a": 2}\n', '"a"'),
        (
            '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}],'
            ' "Stop": [{"hooks": [{"type": "command", "command": "echo second"}]}]}}\n',
            '"Stop"',
        ),
    ],
    ids=["top-level", "a-hooks-event"],
)
def test_a_key_given_twice_is_refused_not_written_back_as_one(
    orca_env: OrcaEnv, text: str, key: str
) -> None:
    # a reader keeps one of the two; writing the file back (integrate, then --remove) lost the
    # other, here a hook group of the user's, for good
    settings = _home(orca_env) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(text)
    for args in (["--dry-run"], [], ["--remove"]):
        run = _integrate(orca_env, "claude-code", *args)
        assert run.returncode == 1, run.stderr
        assert str(settings) in run.stderr and f"{key} twice" in run.stderr, run.stderr
        assert "Traceback" not in run.stderr
        assert settings.read_text() == text
        assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


@pytest.mark.daemon
def test_a_fifo_at_a_config_path_is_refused_even_in_a_dry_run_without_blocking(
    orca_env: OrcaEnv,
) -> None:
    settings = _home(orca_env) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    os.mkfifo(settings)
    for args in (["--dry-run"], []):
        run = _integrate(orca_env, "claude-code", *args, timeout=20)
        assert run.returncode == 1 and f"{settings} is not a regular file" in run.stderr
        assert "Traceback" not in run.stderr
        assert stat.S_ISFIFO(os.lstat(settings).st_mode)
        assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]
        assert not (_home(orca_env) / ".claude.json").exists()


@pytest.mark.daemon
@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_a_symlink_to_a_device_is_refused_and_the_device_stays(orca_env: OrcaEnv) -> None:
    device = orca_env.root / "null-device"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").symlink_to(device)
    run = _integrate(orca_env, "codex", env={"CODEX_HOME": str(codex_home)})
    assert run.returncode == 1 and "config.toml is not a regular file" in run.stderr, run.stderr
    assert stat.S_ISCHR(os.stat(device).st_mode)
    assert sorted(p.name for p in codex_home.iterdir()) == ["config.toml"]


@pytest.mark.daemon
def test_a_dangling_symlink_or_a_directory_is_refused(orca_env: OrcaEnv) -> None:
    settings = _home(orca_env) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.symlink_to(orca_env.root / "dotfiles" / "missing.json")
    run = _integrate(orca_env, "claude-code")
    assert run.returncode == 1 and f"{settings} is a symlink to" in run.stderr, run.stderr
    assert not (orca_env.root / "dotfiles").exists()
    (_home(orca_env) / ".claude.json").mkdir()
    settings.unlink()
    run = _integrate(orca_env, "claude-code")
    assert run.returncode == 1 and ".claude.json is not a regular file" in run.stderr
    assert sorted(p.name for p in settings.parent.iterdir()) == []


@pytest.mark.pure
def test_an_older_codex_extractor_is_upgraded_and_removable() -> None:
    # written before `codex exec` was told to skip its Git check: still orca's
    orca_path = Path("/home/u/.orca/config.toml")
    older = '[extraction]\nprovider = "command"\n'
    older += '[extraction.command]\nargv = ["codex", "exec", "-"]\n'
    upgraded = toml_edits.edit_orca_config(older, orca_path, "codex", remove=False)
    assert tomllib.loads(upgraded)["extraction"]["command"]["argv"] == [
        "codex",
        "exec",
        "--skip-git-repo-check",
        "-",
    ]
    assert toml_edits.edit_orca_config(older, orca_path, "codex", remove=True) == ""


@pytest.mark.daemon
def test_what_the_user_added_to_orcas_mcp_entry_is_kept(orca_env: OrcaEnv) -> None:
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text(
        '[mcp_servers.orca]\ncommand = "/old/orcactl"\nargs = ["mcp"]\n'
        "startup_timeout_sec = 30  # slow disk\n\n"
        '[mcp_servers.orca.env]\nORCA_LOG = "debug"\n'
    )
    claude_json = _home(orca_env) / ".claude.json"
    claude_json.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "orca": {
                        "type": "stdio",
                        "command": "/old/orcactl",
                        "args": ["mcp"],
                        "env": {"ORCA_LOG": "debug"},
                        "timeout": 30000,
                    },
                    "github": {"command": "github-mcp"},
                }
            }
        )
    )
    env = {"CODEX_HOME": str(codex_home)}
    for _ in range(2):
        for agent in ("codex", "claude-code"):
            run = _integrate(orca_env, agent, env=env)
            assert run.returncode == 0, run.stderr
        codex = tomllib.loads(config.read_text())["mcp_servers"]["orca"]
        assert codex == {
            "command": ORCACTL,
            "args": ["mcp", "--socket", str(orca_env.socket), *pinned(orca_env)],
            "startup_timeout_sec": 30,
            "env": {"ORCA_LOG": "debug"},
        }
        assert "# slow disk" in config.read_text()
        servers = json.loads(claude_json.read_text())["mcpServers"]
        assert list(servers) == ["orca", "github"]
        assert servers["orca"] == {
            "type": "stdio",
            "command": ORCACTL,
            "args": ["mcp", "--socket", str(orca_env.socket), *pinned(orca_env)],
            "env": {"ORCA_LOG": "debug"},
            "timeout": 30000,
        }


@pytest.mark.daemon
def test_json_nested_too_deeply_is_refused_naming_the_file(orca_env: OrcaEnv) -> None:
    settings = _home(orca_env) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    settings.write_text(deep)
    run = _integrate(orca_env, "claude-code")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert (
        f"{settings} is not JSON orca can read" in run.stderr and "nested too deeply" in run.stderr
    )
    assert settings.read_text() == deep
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]
    assert not (_home(orca_env) / ".claude.json").exists()
    doctor = subprocess.run(
        [ORCACTL, "--no-start", "doctor", "--json"],
        capture_output=True,
        text=True,
        env={**orca_env.env, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert "Traceback" not in doctor.stderr
    agents = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "agents"]
    assert agents[0]["status"] == "problem" and str(settings) in agents[0]["detail"]
    assert "nested too deeply" in agents[0]["detail"]


@pytest.mark.pure
@pytest.mark.parametrize(
    ("text", "starts"),
    [
        ('{"note":"a: b, c"}', '{"note":"a: b, c","hooks":{'),  # a string's own separators
        ('{"note": "a:b,c"}', '{"note": "a:b,c", "hooks": {'),
        # CRLF line ends, and characters beyond ASCII written as escapes
        ('{\r\n  "note": "caf\\u00e9"\r\n}\r\n', '{\r\n  "note": "caf\\u00e9",\r\n  "hooks"'),
        ('{\n  "note": "café"\n}\n', '{\n  "note": "café",\n  "hooks"'),
        ('{\n"note": "x"\n}\n', '{\n"note": "x",\n"hooks": {\n"SessionStart"'),  # none indented
        ("{}", '{\n  "hooks": {\n    "SessionStart"'),  # nothing to follow: two spaces
        ("", '{\n  "hooks": {\n    "SessionStart"'),
    ],
)
def test_hooks_are_written_in_the_files_own_layout(text: str, starts: str) -> None:
    written = agent_configs.edit_hooks(
        text, Path("settings.json"), "claude-code", ORCA, remove=False
    )
    assert written.startswith(starts), written[:80]
    removed = agent_configs.edit_hooks(
        written, Path("settings.json"), "claude-code", ORCA, remove=True
    )
    assert removed == (text if text.strip("{}") else "")


@pytest.mark.pure
def test_what_the_user_set_on_orcas_hook_group_stays_on_the_next_run() -> None:
    # a `matcher` added to orca's SessionStart group was dropped when integrate ran again
    path = Path("settings.json")
    first = json.loads(agent_configs.edit_hooks("", path, "claude-code", ORCA, remove=False))
    first["hooks"]["SessionStart"][0] = {
        "matcher": "startup|resume",
        **first["hooks"]["SessionStart"][0],
    }
    edited = json.dumps(first, indent=2) + "\n"
    again = agent_configs.edit_hooks(edited, path, "claude-code", ORCA, remove=False)
    assert again == edited
    moved = agent_configs.edit_hooks(edited, path, "claude-code", "/usr/bin/orcactl", remove=False)
    group = json.loads(moved)["hooks"]["SessionStart"][0]
    assert group["matcher"] == "startup|resume"
    assert group["hooks"][0]["command"].startswith("/usr/bin/orcactl hook claude-code")
