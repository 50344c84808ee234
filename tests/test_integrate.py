"""`orcactl integrate` against real configuration files: existing hooks, comments, garbage."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
import trio

from orcactl import agent_configs
from orcactl.codex_projects import project_trust
from orcactl.integrate import agent_status
from orcad.config import load_config
from orcad.paths import SOCKET_PATH_MAX_BYTES
from orcad.providers.command import CommandProvider
from protocol.client import Client
from tests.harness import OrcaEnv
from tests.hook_helpers import ORCACTL, run_hook

pytestmark = pytest.mark.daemon

CLAUDE_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}
CODEX_CONFIG = """# my Codex settings
model = "gpt-5-codex"  # the one I like

[mcp_servers.github]
command = "github-mcp"   # keep me
args = ["--read-only"]
"""


def _integrate(
    orca: OrcaEnv,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORCACTL, "integrate", *args],
        capture_output=True,
        text=True,
        env={**orca.env, **(env or {})},
        timeout=timeout,
        cwd=cwd,
    )


def _doctor(
    orca: OrcaEnv, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ORCACTL, "--no-start", "doctor", *args],
        capture_output=True,
        text=True,
        env={**orca.env, **(env or {})},
        timeout=60,
        cwd=cwd,
    )


def _home(orca: OrcaEnv) -> Path:
    return orca.root / "user-home"


def _commands(settings: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for group in settings["hooks"].get(event, []) for h in group["hooks"]]


def _pinned(orca: OrcaEnv) -> str:
    """The options after a hook's event that carry the test environment's ORCA_HOME and
    ORCA_CONFIG_DIR."""
    return f"--home {orca.home} --config-dir {orca.config_dir}"


def _ours(orca: OrcaEnv, agent: str, event: str, program: object = ORCACTL) -> str:
    """The hook command integrate writes in the test environment, whose ORCA_SOCKET,
    ORCA_HOME and ORCA_CONFIG_DIR it carries."""
    return f"{program} hook {agent} {event} --socket {orca.socket} {_pinned(orca)}"


def test_claude_code_user_level_is_idempotent_and_removable(orca_env: OrcaEnv) -> None:
    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    settings_path.write_text(json.dumps(CLAUDE_SETTINGS, indent=4))
    first = _integrate(orca_env, "claude-code")
    assert first.returncode == 0, first.stderr
    settings = json.loads(settings_path.read_text())
    assert settings["model"] == "opus" and settings["permissions"] == CLAUDE_SETTINGS["permissions"]
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        ours = [c for c in _commands(settings, event) if "orcactl" in c]
        assert ours == [_ours(orca_env, "claude-code", event)]
    assert "notify-send done" in _commands(settings, "Stop")
    assert settings["hooks"]["PreToolUse"] == CLAUDE_SETTINGS["hooks"]["PreToolUse"]
    mcp = json.loads((_home(orca_env) / ".claude.json").read_text())["mcpServers"]["orca"]
    assert (mcp["command"], mcp["args"][0]) == (ORCACTL, "mcp")
    backups = sorted(settings_path.parent.glob("settings.json.orca-backup-*"))
    assert len(backups) == 1 and json.loads(backups[0].read_text()) == CLAUDE_SETTINGS

    again = _integrate(orca_env, "claude-code")
    assert again.returncode == 0 and "nothing to change" in again.stdout
    assert len(list(settings_path.parent.glob("settings.json.orca-backup-*"))) == 1

    removed = _integrate(orca_env, "claude-code", "--remove")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(settings_path.read_text()) == CLAUDE_SETTINGS
    assert not (_home(orca_env) / ".claude.json").exists()  # it held only orca's server


@pytest.mark.parametrize(
    "layout",
    [
        {"indent": 2},
        {"indent": 4},
        {"indent": "\t"},
        {"separators": (",", ":")},
        {},  # one line, Python's default separators
    ],
    ids=["two-spaces", "four-spaces", "tabs", "compact", "one-line"],
)
@pytest.mark.parametrize("ending", ["\n", ""], ids=["newline", "no-newline"])
def test_adding_and_removing_leaves_the_users_file_as_it_was_laid_out(
    orca_env: OrcaEnv, layout: dict[str, Any], ending: str
) -> None:
    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    before = json.dumps(CLAUDE_SETTINGS, **layout) + ending
    settings_path.write_text(before)
    assert _integrate(orca_env, "claude-code").returncode == 0
    added = settings_path.read_text()
    assert added.endswith(ending) and added.removesuffix(ending).endswith("}")
    if "indent" in layout:  # laid out with the user's indent, ours included
        unit = layout["indent"] if isinstance(layout["indent"], str) else " " * layout["indent"]
        assert f'\n{unit}"hooks": {{' in added and f'\n{unit * 2}"SessionStart"' in added
    else:  # still one line
        assert "\n" not in added.removesuffix(ending)
    assert _integrate(orca_env, "claude-code", "--remove").returncode == 0
    assert settings_path.read_text() == before


def test_codex_keeps_comments_and_other_servers(orca_env: OrcaEnv) -> None:
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(CODEX_CONFIG)
    env = {"CODEX_HOME": str(codex_home)}
    assert _integrate(orca_env, "codex", env=env).returncode == 0
    text = (codex_home / "config.toml").read_text()
    assert "# my Codex settings" in text and "# the one I like" in text and "# keep me" in text
    config = tomllib.loads(text)
    assert config["mcp_servers"]["github"] == {"command": "github-mcp", "args": ["--read-only"]}
    assert config["mcp_servers"]["orca"]["command"] == ORCACTL
    assert config["features"]["hooks"] is True
    hooks = json.loads((codex_home / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"}
    assert hooks["Stop"][0]["hooks"][0]["command"] == _ours(orca_env, "codex", "Stop")
    # Codex runs only the hooks whose definition its user config trusts
    hooks_file = codex_home / "hooks.json"
    assert config["hooks"]["state"] == {
        key: {"trusted_hash": digest}
        for key, digest in agent_configs.codex_trust(hooks_file.read_text(), hooks_file).items()
    }
    assert len(config["hooks"]["state"]) == 4
    assert "nothing to change" in _integrate(orca_env, "codex", env=env).stdout
    assert _integrate(orca_env, "codex", "--remove", env=env).returncode == 0
    after = (codex_home / "config.toml").read_text()
    assert after.startswith(CODEX_CONFIG) and "orca" not in after
    assert not (codex_home / "hooks.json").exists()


def test_orca_socket_is_written_absolute_into_the_mcp_server_and_every_hook(
    orca_env: OrcaEnv,
) -> None:
    # the agent starts the MCP server from its own directory, not from where integrate ran, and
    # an agent started from another shell runs its hooks without this ORCA_SOCKET: both must
    # name the same daemon, or automatic memory and the memory tools reach different ones
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    env = {**orca_env.env, "CODEX_HOME": str(codex_home), "ORCA_SOCKET": "run/orcad.sock"}
    for agent in ("claude-code", "codex"):
        done = subprocess.run(
            [ORCACTL, "integrate", agent],
            capture_output=True,
            text=True,
            env=env,
            cwd=orca_env.root,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    claude = json.loads((_home(orca_env) / ".claude.json").read_text())["mcpServers"]["orca"]
    codex = tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["orca"]
    chosen = orca_env.root / "run" / "orcad.sock"
    for args in (claude["args"], codex["args"]):
        assert args[args.index("--socket") + 1] == str(chosen)
    settings = json.loads((_home(orca_env) / ".claude" / "settings.json").read_text())
    hooks = json.loads((codex_home / "hooks.json").read_text())
    for agent, written in (("claude-code", settings), ("codex", hooks)):
        for event in written["hooks"]:
            assert _commands(written, event) == [
                f"{ORCACTL} hook {agent} {event} --socket {chosen} {_pinned(orca_env)}"
            ]


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_socket_option_is_written_into_the_mcp_server_and_every_hook(
    orca_env: OrcaEnv, where: str
) -> None:
    # agents run hooks and MCP servers from their own directory and environment, where neither
    # --socket nor the ORCA_SOCKET of this shell reaches: the chosen socket is written, absolute
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    env = {**orca_env.env, "CODEX_HOME": str(codex_home)}
    chosen = orca_env.root / "elsewhere" / "orcad.sock"
    for agent in ("claude-code", "codex"):
        command = (
            [ORCACTL, "--socket", "elsewhere/orcad.sock", "integrate", agent]
            if where == "before"
            else [ORCACTL, "integrate", agent, "--socket", "elsewhere/orcad.sock"]
        )
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, cwd=orca_env.root, timeout=60
        )
        assert done.returncode == 0, done.stderr
    claude = json.loads((_home(orca_env) / ".claude.json").read_text())["mcpServers"]["orca"]
    codex = tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["orca"]
    for args in (claude["args"], codex["args"]):
        assert args[args.index("--socket") + 1] == str(chosen)
    settings = json.loads((_home(orca_env) / ".claude" / "settings.json").read_text())
    hooks = json.loads((codex_home / "hooks.json").read_text())
    for agent, written in (("claude-code", settings), ("codex", hooks)):
        for event in written["hooks"]:
            assert _commands(written, event) == [
                f"{ORCACTL} hook {agent} {event} --socket {chosen} {_pinned(orca_env)}"
            ]
        assert agent_status(agent, env)[1], agent_status(agent, env)  # doctor: connected
    again = subprocess.run(
        [ORCACTL, "--socket", str(chosen), "integrate", "claude-code"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert again.returncode == 0 and "nothing to change" in again.stdout


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_socket_path_too_long_for_a_unix_socket_is_bad_usage_and_nothing_is_written(
    orca_env: OrcaEnv, agent: str
) -> None:
    # the hooks and the MCP server would carry a socket no orcad can listen on, and every
    # hook would fail
    chosen = str(orca_env.root / ("s" * 120) / "orcad.sock")
    done = _integrate(orca_env, agent, "--socket", chosen)
    assert done.returncode == 2, done.stderr
    length = len(os.fsencode(chosen))
    assert done.stderr == (
        f"orcactl: no orcad can listen on {chosen}: its path is {length} bytes, and a Unix "
        f"socket's path may have at most {SOCKET_PATH_MAX_BYTES}; choose a shorter one; nothing "
        "was changed\n"
    )
    assert sorted(path.name for path in _home(orca_env).iterdir()) == []


@pytest.mark.parametrize(
    ("name", "garbage"),
    [
        ("settings.json", "{ not json"),
        ("settings.json", "[1, 2]"),
        ("settings.json", '{"hooks": 3}'),
        ("settings.json", '{"hooks": {"Stop": "notify-send done"}}'),
        ("settings.json", '{\n  // my settings\n  "model": "opus"\n}'),
    ],
)
def test_a_file_that_does_not_parse_is_reported_and_nothing_changes(
    orca_env: OrcaEnv, name: str, garbage: str
) -> None:
    directory = _home(orca_env) / ".claude"
    directory.mkdir(parents=True)
    (directory / name).write_text(garbage)
    run = _integrate(orca_env, "claude-code")
    assert run.returncode == 1 and str(directory / name) in run.stderr
    assert "Traceback" not in run.stderr
    assert (directory / name).read_text() == garbage
    assert sorted(p.name for p in directory.iterdir()) == [name]
    assert not (_home(orca_env) / ".claude.json").exists()


def test_garbage_toml_is_left_alone(orca_env: OrcaEnv) -> None:
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text("model = \n[[[")
    run = _integrate(orca_env, "codex", env={"CODEX_HOME": str(codex_home)})
    assert run.returncode == 1 and "config.toml" in run.stderr
    assert sorted(p.name for p in codex_home.iterdir()) == ["config.toml"]


@pytest.mark.parametrize("agent", ["codex", "claude-code"])
def test_a_toml_file_cut_short_is_named_as_orcad_names_it(orca_env: OrcaEnv, agent: str) -> None:
    """A file ending inside an array was reported as "Unexpected character: '\\x00' at line 2
    col 0": no such character, nor that place, is in it, and orcad and doctor say otherwise."""
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    garbage = "a = 1\nb = [1,\n"
    path = codex_home / "config.toml" if agent == "codex" else orca_env.home / "config.toml"
    path.write_text(garbage)
    extra = () if agent == "codex" else ("--extractor",)
    run = _integrate(orca_env, agent, *extra, "--json", env={"CODEX_HOME": str(codex_home)})
    assert run.returncode == 1
    message = json.loads(run.stdout)["error"]["message"]
    assert message.startswith(f"{path} is not valid TOML (Invalid value (at end of document))")
    assert "x00" not in message and "x00" not in run.stderr
    assert path.read_text() == garbage


def test_doctor_does_not_send_a_file_that_does_not_parse_to_integrate(orca_env: OrcaEnv) -> None:
    """doctor's fix for an agent file that does not parse was `run orcactl integrate codex`,
    which refuses that very file and changes nothing."""
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text("model = \n[[[")
    env = {**orca_env.env, "CODEX_HOME": str(codex_home)}
    run = _doctor(orca_env, "--json", env=env)
    [finding] = [
        f
        for f in json.loads(run.stdout)["findings"]
        if f["check"] == "agents" and str(codex_home) in f["detail"]
    ]
    assert finding["status"] == "problem" and "is not valid TOML" in finding["detail"]
    assert finding["fix"] == "fix or move that file, then run `orcactl integrate codex`"
    assert run.returncode == 1


def test_doctor_says_what_a_hook_problem_cost_by_its_kind(orca_env: OrcaEnv) -> None:
    """A hook given input it could not read was reported as one that "could not reach orcad
    gave the agent no memory for that prompt": orcad was never asked."""
    hook = run_hook(orca_env, "codex", "Stop", "not json")
    assert hook.status == 1 and "not JSON" in hook.stderr
    run = _doctor(orca_env, "--json")
    [finding] = [f for f in json.loads(run.stdout)["findings"] if f["check"] == "hooks"]
    assert finding["status"] == "problem" and "bad_input" not in finding["fix"]
    assert "agent-hooks.jsonl; a hook given input it could not read did nothing" in finding["fix"]
    assert "reach orcad" not in finding["fix"]


def test_doctor_says_how_to_clear_a_hook_problem_once_fixed(orca_env: OrcaEnv) -> None:
    """doctor kept failing for a day after the cause of a hook problem was fixed, and its fix
    only said "see <file>": it now gives the command that clears the report, which works."""
    run_hook(orca_env, "codex", "Stop", "not json")

    def doctor() -> tuple[int, list[dict[str, Any]]]:
        run = _doctor(orca_env, "--json")
        findings = json.loads(run.stdout)["findings"]
        return run.returncode, [f for f in findings if f["check"] == "hooks"]

    _, [finding] = doctor()
    problems = orca_env.memory_root / "agent-hooks.jsonl"
    command = f"`rm {problems}` clears this report"
    assert finding["status"] == "problem" and command in finding["fix"]
    subprocess.run(["sh", "-c", f"rm {problems}"], check=True, env=orca_env.env, timeout=60)
    _, hooks = doctor()
    assert hooks == []


def test_doctor_fails_on_hook_problems_only_while_they_keep_happening(orca_env: OrcaEnv) -> None:
    """Hooks timed out under a burst on a loaded machine, and doctor failed for the whole day
    after: a hook problem not met for 15 minutes is now only mentioned, while one met again
    fails doctor once more (it is recorded anew each time it happens)."""
    problems = orca_env.memory_root / "agent-hooks.jsonl"
    problems.parent.mkdir(parents=True, exist_ok=True)
    twenty_minutes_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 20 * 60))
    old = {"agent": "codex", "event": "Stop", "kind": "timeout", "message": "gave up after 5 s"}
    problems.write_text(json.dumps({"at": twenty_minutes_ago, **old}) + "\n")

    def hooks() -> list[dict[str, Any]]:
        findings = json.loads(_doctor(orca_env, "--json").stdout)["findings"]
        return [f for f in findings if f["check"] == "hooks"]

    [past] = hooks()
    assert past["status"] == "ok", past
    assert "1 agent hook problem(s) in the last day, none in the last 15 minutes" in past["detail"]
    run_hook(orca_env, "codex", "Stop", "not json")
    [again] = hooks()
    assert again["status"] == "problem", again
    assert "1 agent hook problem(s) in the last 15 minutes (2 in the last day)" in again["detail"]
    assert "not JSON" in again["detail"]


def test_a_hook_problem_recorded_before_the_clock_was_set_back_stops_failing_doctor(
    orca_env: OrcaEnv,
) -> None:
    """A problem stamped hours ahead was recorded before the clock was set back, and not met
    since (a hook records each problem anew with the clock as it is): doctor must not fail on
    it until the clock has caught up with it."""
    problems = orca_env.memory_root / "agent-hooks.jsonl"
    problems.parent.mkdir(parents=True, exist_ok=True)
    ahead = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3 * 3600))
    old = {"agent": "codex", "event": "Stop", "kind": "timeout", "message": "gave up after 5 s"}
    problems.write_text(json.dumps({"at": ahead, **old}) + "\n")
    findings = json.loads(_doctor(orca_env, "--json").stdout)["findings"]
    [hooks] = [f for f in findings if f["check"] == "hooks"]
    assert hooks["status"] == "ok", hooks
    assert "none in the last 15 minutes" in hooks["detail"], hooks


def test_dry_run_prints_a_diff_and_writes_nothing(orca_env: OrcaEnv) -> None:
    config_dir = orca_env.root / "claude-config"
    run = _integrate(
        orca_env, "claude-code", "--dry-run", env={"CLAUDE_CONFIG_DIR": str(config_dir)}
    )
    assert run.returncode == 0
    assert f"+++ {config_dir / 'settings.json'}" in run.stdout
    assert f"+++ {config_dir / '.claude.json'}" in run.stdout
    assert "hook claude-code UserPromptSubmit" in run.stdout
    assert not config_dir.exists()
    env = {"CLAUDE_CONFIG_DIR": str(config_dir)}
    as_json = _integrate(orca_env, "claude-code", "--dry-run", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)  # one JSON document, as with every --json
    assert (report["agent"], report["removed"], report["dry_run"]) == ("claude-code", False, True)
    changed = {entry["path"]: entry["diff"] for entry in report["changed"]}
    assert set(changed) == {str(config_dir / "settings.json"), str(config_dir / ".claude.json")}
    assert "hook claude-code UserPromptSubmit" in changed[str(config_dir / "settings.json")]
    assert not config_dir.exists()
    assert _integrate(orca_env, "claude-code", "--json", env=env).returncode == 0
    again = json.loads(_integrate(orca_env, "claude-code", "--dry-run", "--json", env=env).stdout)
    assert again["changed"] == []


def test_dry_run_diffs_a_file_without_a_final_line_end_line_by_line(orca_env: OrcaEnv) -> None:
    # its last line ran into the added lines and the next file's header: `-{"hooks": {}}+{...`
    config_dir = orca_env.root / "claude-config"
    config_dir.mkdir()
    (config_dir / "settings.json").write_text('{"hooks": {}}')
    run = _integrate(
        orca_env, "claude-code", "--dry-run", env={"CLAUDE_CONFIG_DIR": str(config_dir)}
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert '-{"hooks": {}}' in lines
    assert lines[lines.index('-{"hooks": {}}') + 1] == "\\ No newline at end of file"
    headers = [line for line in lines if line.startswith(("--- ", "+++ "))]
    assert headers == [
        f"--- {config_dir / 'settings.json'}",
        f"+++ {config_dir / 'settings.json'}",
        "--- /dev/null",
        f"+++ {config_dir / '.claude.json'}",
    ]
    assert all(line[:1] in "-+@ \\" for line in lines if line), lines
    assert (config_dir / "settings.json").read_text() == '{"hooks": {}}'


def test_project_level_files(orca_env: OrcaEnv, tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    assert _integrate(orca_env, "claude-code", "--project", "--cwd", str(project)).returncode == 0
    assert (
        "SessionStart" in json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    )
    server = json.loads((project / ".mcp.json").read_text())["mcpServers"]["orca"]
    assert server["args"][:3] == ["mcp", "--cwd", str(project)]
    assert _integrate(orca_env, "codex", "--project", "--cwd", str(project)).returncode == 0
    assert (project / ".codex" / "hooks.json").exists()
    assert tomllib.loads((project / ".codex" / "config.toml").read_text())["mcp_servers"]["orca"]
    assert not (_home(orca_env) / ".claude").exists()  # nothing user-level


def test_doctor_checks_the_agents_connected_in_the_current_project(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """`integrate codex --project` says "`orcactl doctor` says whether they are trusted", but
    doctor read only the user's files: run in the project, it said Codex was not connected, and
    never that Codex would skip the project's untrusted hooks."""
    project = tmp_path / "repo"
    (project / "src").mkdir(parents=True)
    (project / ".git").mkdir()
    codex_home = orca_env.root / "codex-home"
    env = {"CODEX_HOME": str(codex_home)}
    for agent in ("claude-code", "codex"):
        run = _integrate(orca_env, agent, "--project", "--cwd", str(project), env=env)
        assert run.returncode == 0, run.stderr
    # a project Codex trusts: it reads none of the project's files otherwise
    codex_home.mkdir(exist_ok=True)
    trusted = f'[projects."{os.path.realpath(project)}"]\ntrust_level = "trusted"\n'
    (codex_home / "config.toml").write_text(trusted)

    def agents() -> dict[str, dict[str, str]]:
        run = _doctor(orca_env, "--json", env=env, cwd=project / "src")
        findings = json.loads(run.stdout)["findings"]
        return {
            f["detail"].split(":")[0]: f
            for f in findings
            if f["check"] == "agents" and "in the project at" in f["detail"]
        }

    found = agents()
    claude = found[f"claude-code in the project at {project}"]
    assert claude["status"] == "ok" and "hooks and MCP server registered" in claude["detail"]
    codex = found[f"codex in the project at {project}"]
    assert codex["status"] == "problem" and "Codex does not trust" in codex["detail"]
    assert codex["fix"] == "trust them in Codex: /hooks"
    # trusted in Codex (/hooks records it in the user's config.toml): nothing more to say
    hooks_file = project / ".codex" / "hooks.json"
    trust = agent_configs.codex_trust(hooks_file.read_text(), hooks_file)
    (codex_home / "config.toml").write_text(
        trusted
        + "".join(
            f'[hooks.state."{key}"]\ntrusted_hash = "{digest}"\n' for key, digest in trust.items()
        )
    )
    assert agents()[f"codex in the project at {project}"]["status"] == "ok"


def test_doctor_run_in_a_symlinked_home_reports_the_user_files_once(orca_env: OrcaEnv) -> None:
    """The home directory is no project of its own: run there, with HOME naming it through a
    symbolic link, doctor took the user's files for a project's and reported them twice."""
    home = _home(orca_env)
    home.mkdir(parents=True, exist_ok=True)
    link = orca_env.root / "home-link"
    link.symlink_to(home)
    env = {"HOME": str(link)}
    assert _integrate(orca_env, "claude-code", env=env).returncode == 0
    run = _doctor(orca_env, "--json", env=env, cwd=home)
    claude = [
        f["detail"]
        for f in json.loads(run.stdout)["findings"]
        if f["check"] == "agents" and f["detail"].startswith("claude-code")
    ]
    assert claude == ["claude-code: hooks and MCP server registered"]


def test_doctor_reads_codexs_hooks_switch_from_the_user_and_project_configs_merged(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """Codex merges the user's config.toml under a project's, key by key: `[features] hooks =
    true` in the user's alone turns the project's hooks on, yet doctor said the project's were
    partly connected for the want of it."""
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    codex_home = orca_env.root / "codex-home"
    env = {"CODEX_HOME": str(codex_home)}
    run = _integrate(orca_env, "codex", "--project", "--cwd", str(project), env=env)
    assert run.returncode == 0, run.stderr
    project_config = project / ".codex" / "config.toml"
    written = project_config.read_text()
    assert tomllib.loads(written)["features"] == {"hooks": True}
    without_flag = written.replace("[features]\nhooks = true\n", "")
    assert "features" not in tomllib.loads(without_flag)
    hooks_file = project / ".codex" / "hooks.json"
    trust = f'[projects."{os.path.realpath(project)}"]\ntrust_level = "trusted"\n' + "".join(
        f'[hooks.state."{key}"]\ntrusted_hash = "{digest}"\n'
        for key, digest in agent_configs.codex_trust(hooks_file.read_text(), hooks_file).items()
    )

    def codex_finding(user: str, project_text: str) -> dict[str, str]:
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(user + trust)
        project_config.write_text(project_text)
        run = _doctor(orca_env, "--json", env=env, cwd=project)
        [finding] = [
            f
            for f in json.loads(run.stdout)["findings"]
            if f["detail"].startswith(f"codex in the project at {project}")
        ]
        return finding

    on, off = "[features]\nhooks = true\n", "[features]\nhooks = false\n"
    for user, project_text in ((on, without_flag), ("", written), (off, written)):
        finding = codex_finding(user, project_text)
        assert finding["status"] == "ok", (user, project_text, finding)
    for user, project_text in (("", without_flag), (on, without_flag + off)):
        finding = codex_finding(user, project_text)
        assert finding["status"] == "problem", (user, project_text, finding)
        assert agent_configs.CODEX_HOOKS_FLAG in finding["detail"], finding


def _codex_project_finding(
    orca: OrcaEnv, env: dict[str, str], project: Path, cwd: Path | None = None
) -> dict[str, str]:
    """doctor's finding (--json) on orca's Codex files in `project`, run in `cwd` (the
    project), after checking that its text report says the same."""
    reports = [_doctor(orca, *extra, env=env, cwd=cwd or project) for extra in (["--json"], [])]
    [finding] = [
        f
        for f in json.loads(reports[0].stdout)["findings"]
        if f["detail"].startswith(f"codex in the project at {project}:")
    ]
    assert finding["detail"] in reports[1].stdout, reports[1].stdout
    assert finding["fix"] in reports[1].stdout, reports[1].stdout
    return finding


def test_doctor_says_codex_reads_no_file_of_a_project_it_does_not_trust(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """Codex reads a project's .codex/ only when the user's config.toml trusts the project
    (`[projects."<path>"] trust_level = "trusted"`, looked up by the project's own resolved path
    or its repository's root for trust, no parent's, no symlinked spelling). doctor run in an
    untrusted project said orca's Codex entries there were connected, while Codex started
    neither orca's hooks nor its MCP server."""
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    env = {"CODEX_HOME": str(codex_home)}
    run = _integrate(orca_env, "codex", "--project", "--cwd", str(project), env=env)
    assert run.returncode == 0, run.stderr
    real = os.path.realpath(project)
    hooks_file = project / ".codex" / "hooks.json"
    hooks_trust = "".join(  # the trust in orca's hooks themselves, which is another matter
        f'[hooks.state."{key}"]\ntrusted_hash = "{digest}"\n'
        for key, digest in agent_configs.codex_trust(hooks_file.read_text(), hooks_file).items()
    )
    link = tmp_path / "link"
    link.symlink_to(project)
    user_config = codex_home / "config.toml"

    def finding(projects: str) -> dict[str, str]:
        user_config.write_text(projects + hooks_trust)
        return _codex_project_finding(orca_env, env, project)

    def entry(path: object, level: str = "trusted") -> str:
        return f'[projects."{path}"]\ntrust_level = "{level}"\n'

    for projects in ("", entry(tmp_path), entry(link), entry(real + "/"), entry(real, "no")):
        found = finding(projects)
        assert found["status"] == "problem", (projects, found)
        assert f"Codex does not read {project / '.codex'}" in found["detail"], found
        if projects == entry(real, "no"):
            assert "which Codex does not accept" in found["detail"], found
            assert found["fix"] == (
                f'set trust_level = "trusted" under [projects."{real}"] in {user_config}'
            )
            continue
        assert f"{user_config} does not trust {real}" in found["detail"], found
        assert f'`[projects."{real}"]` with `trust_level = "trusted"`' in found["fix"], found
    found = finding(entry(real, "untrusted"))
    assert found["status"] == "problem"
    assert f"{user_config} marks {real} untrusted" in found["detail"], found
    assert f'set trust_level = "trusted" under [projects."{real}"]' in found["fix"], found
    # the lines the fix gives, as given: Codex reads the project, and so it is connected
    assert finding(entry(real))["status"] == "ok"
    # from a subdirectory, it is still the root's entry that counts, not the subdirectory's
    (project / "src").mkdir()
    user_config.write_text(entry(project / "src") + hooks_trust)
    assert _codex_project_finding(orca_env, env, project, project / "src")["status"] == "problem"
    user_config.write_text(entry(real) + hooks_trust)
    assert _codex_project_finding(orca_env, env, project, project / "src")["status"] == "ok"


# doctor run as orcactl is, with Codex's system config.toml at the path given first
_DOCTOR_WITH_SYSTEM_CONFIG = """
import pathlib, sys
from orcactl import codex_projects
codex_projects.SYSTEM_CONFIG = pathlib.Path(sys.argv[1])
sys.argv = ["orcactl", "--no-start", "doctor", *sys.argv[2:]]
from orcactl.entry import main
main()
"""


def test_doctor_names_the_system_config_when_its_entry_decides_a_projects_trust(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """An entry in Codex's system config.toml (`/etc/codex/config.toml`) that the user's does
    not override decides the trust: doctor said the user's config.toml marked the project
    untrusted, and told the user to change a table their file does not have."""
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    env = {**orca_env.env, "CODEX_HOME": str(codex_home)}
    run = _integrate(orca_env, "codex", "--project", "--cwd", str(project), env=env)
    assert run.returncode == 0, run.stderr
    real = os.path.realpath(project)
    hooks_file = project / ".codex" / "hooks.json"
    hooks_trust = "".join(
        f'[hooks.state."{key}"]\ntrusted_hash = "{digest}"\n'
        for key, digest in agent_configs.codex_trust(hooks_file.read_text(), hooks_file).items()
    )
    user_config = codex_home / "config.toml"
    user_config.write_text(hooks_trust)
    system_config = tmp_path / "system" / "config.toml"
    system_config.parent.mkdir()

    def finding(system_level: str, *, as_text: bool = False) -> dict[str, str]:
        system_config.write_text(f'[projects."{real}"]\ntrust_level = "{system_level}"\n')
        reports = [
            subprocess.run(
                [sys.executable, "-c", _DOCTOR_WITH_SYSTEM_CONFIG, str(system_config), *extra],
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
                cwd=project,
            )
            for extra in ((["--json"], []) if as_text else (["--json"],))
        ]
        [found] = [
            f
            for f in json.loads(reports[0].stdout)["findings"]
            if f["detail"].startswith(f"codex in the project at {project}:")
        ]
        if as_text:  # the text report says the same
            assert found["detail"] in reports[1].stdout and found["fix"] in reports[1].stdout
        return found

    found = finding("untrusted", as_text=True)
    assert found["status"] == "problem", found
    assert f"{system_config} marks {real} untrusted" in found["detail"], found
    assert found["fix"] == (
        f'add to {user_config} the table `[projects."{real}"]` with `trust_level = "trusted"`: '
        f"it overrides the entry in {system_config}"
    )
    found = finding("no")
    assert f'{system_config} gives {real} trust_level = "no"' in found["detail"], found
    assert found["fix"].startswith(f"add to {user_config} the table"), found
    assert finding("trusted")["status"] == "ok"
    # the fix as given: the user's entry wins over the system's
    user_config.write_text(f'[projects."{real}"]\ntrust_level = "trusted"\n' + hooks_trust)
    assert finding("untrusted")["status"] == "ok"
    # and a user's entry that decides is named as the user's
    user_config.write_text(f'[projects."{real}"]\ntrust_level = "untrusted"\n' + hooks_trust)
    found = finding("trusted")
    assert f"{user_config} marks {real} untrusted" in found["detail"], found
    assert found["fix"] == f'set trust_level = "trusted" under [projects."{real}"] in {user_config}'


def test_the_trust_fix_doctor_gives_is_toml_codex_matches_for_any_path(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """The `[projects."<path>"]` table doctor says to add, for a path with a character outside
    the Basic Multilingual Plane (besides a quote and a backslash): it was written with JSON's
    pair of surrogate escapes, which is no TOML, so the lines as given broke config.toml."""
    project = tmp_path / 'repo "\\ \U0001f600'
    (project / ".git").mkdir(parents=True)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    env = {"CODEX_HOME": str(codex_home)}
    run = _integrate(orca_env, "codex", "--project", "--cwd", str(project), env=env)
    assert run.returncode == 0, run.stderr
    hooks_file = project / ".codex" / "hooks.json"
    trust = agent_configs.codex_trust(hooks_file.read_text(), hooks_file)
    hooks_trust = tomlkit.dumps(
        {"hooks": {"state": {key: {"trusted_hash": digest} for key, digest in trust.items()}}}
    )
    user_config = codex_home / "config.toml"
    user_config.write_text(hooks_trust)
    found = _codex_project_finding(orca_env, env, project)
    assert found["status"] == "problem", found
    [table] = re.findall(r"`(\[projects\..*?\])`", found["fix"])
    entry = f'{table}\ntrust_level = "trusted"\n'
    assert list(tomllib.loads(entry)["projects"]) == [os.path.realpath(project)]
    user_config.write_text(entry + hooks_trust)
    assert _codex_project_finding(orca_env, env, project)["status"] == "ok"


def test_a_path_that_is_not_utf8_is_looked_up_as_codex_spells_it(tmp_path: Path) -> None:
    """Codex spells a path whose bytes are not UTF-8 with U+FFFD in their place: the trust
    check looked it up with Python's escapes instead, never found it, and its fix was no TOML."""
    project = tmp_path / os.fsdecode(b"caf\xe9")
    project.mkdir()
    user_config = tmp_path / "config.toml"
    untrusted = project_trust(project, user_config, "")
    assert not untrusted.trusted
    [table] = re.findall(r"`(\[projects\..*?\])`", untrusted.fix())
    entry = f'{table}\ntrust_level = "trusted"\n'
    spelled = os.path.realpath(tmp_path) + "/caf\ufffd"
    assert list(tomllib.loads(entry)["projects"]) == [spelled]
    assert project_trust(project, user_config, entry).trusted


def test_a_users_codex_config_nested_too_deep_is_reported_not_a_traceback(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """A user's config.toml nesting arrays deeper than Python's TOML reading goes: the trust
    check of `integrate codex --project` ended with a traceback, and doctor said only that a
    check could not run."""
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    user_config = codex_home / "config.toml"
    user_config.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    env = {"CODEX_HOME": str(codex_home)}
    for extra in (("--dry-run",), ()):
        run = _integrate(orca_env, "codex", "--project", "--cwd", str(project), *extra, env=env)
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr
    report = _doctor(orca_env, "--json", env=env, cwd=project)
    assert "Traceback" not in report.stderr
    details = [finding["detail"] for finding in json.loads(report.stdout)["findings"]]
    assert f"{user_config} nests arrays or tables too deep to read" in details, details


def test_doctor_judges_a_linked_worktree_by_its_main_checkouts_trust(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """A linked worktree's own entry decides first; without one, Codex goes by the main
    checkout's (and names that one when it asks for trust)."""
    main = tmp_path / "main"
    admin = main / ".git" / "worktrees" / "feature"
    admin.mkdir(parents=True)
    worktree = tmp_path / "feature"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {admin}\n")
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    env = {"CODEX_HOME": str(codex_home)}
    run = _integrate(orca_env, "codex", "--project", "--cwd", str(worktree), env=env)
    assert run.returncode == 0, run.stderr
    hooks_file = worktree / ".codex" / "hooks.json"
    hooks_trust = "".join(
        f'[hooks.state."{key}"]\ntrusted_hash = "{digest}"\n'
        for key, digest in agent_configs.codex_trust(hooks_file.read_text(), hooks_file).items()
    )
    user_config = codex_home / "config.toml"
    main_key, worktree_key = os.path.realpath(main), os.path.realpath(worktree)

    def finding(projects: str) -> dict[str, str]:
        user_config.write_text(projects + hooks_trust)
        return _codex_project_finding(orca_env, env, worktree)

    found = finding("")
    assert found["status"] == "problem", found
    assert f'`[projects."{main_key}"]`' in found["fix"], found
    assert finding(f'[projects."{main_key}"]\ntrust_level = "trusted"\n')["status"] == "ok"
    assert finding(f'[projects."{worktree_key}"]\ntrust_level = "trusted"\n')["status"] == "ok"
    both = (
        f'[projects."{worktree_key}"]\ntrust_level = "untrusted"\n'
        f'[projects."{main_key}"]\ntrust_level = "trusted"\n'
    )
    assert finding(both)["status"] == "problem"


def test_integrate_project_says_when_codex_will_not_read_what_it_wrote(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """integrate codex --project wrote the project's files and said only to trust orca's hooks
    with /hooks, while Codex reads no file of a project the user has not trusted."""
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    env = {"CODEX_HOME": str(codex_home)}
    real = os.path.realpath(project)
    run = _integrate(orca_env, "codex", "--project", "--cwd", str(project), env=env)
    assert run.returncode == 0, run.stderr
    assert f"note: Codex does not read {project / '.codex'}" in run.stdout, run.stdout
    assert f'`[projects."{real}"]` with `trust_level = "trusted"`' in run.stdout, run.stdout
    for extra in ((), ("--dry-run",)):
        report = json.loads(
            _integrate(
                orca_env, "codex", "--project", "--cwd", str(project), "--json", *extra, env=env
            ).stdout
        )
        assert report["project_trusted"] is False, report
        assert f'[projects."{real}"]' in report["trust_fix"], report
    (codex_home / "config.toml").write_text(f'[projects."{real}"]\ntrust_level = "trusted"\n')
    run = _integrate(orca_env, "codex", "--project", "--cwd", str(project), env=env)
    assert run.returncode == 0, run.stderr
    assert "Codex does not read" not in run.stdout, run.stdout
    report = json.loads(
        _integrate(orca_env, "codex", "--project", "--cwd", str(project), "--json", env=env).stdout
    )
    assert report["project_trusted"] is True and report["trust_fix"] is None, report
    # Claude Code's, and user-level files: no such question
    for args in (("claude-code", "--project", "--cwd", str(project)), ("codex",)):
        report = json.loads(_integrate(orca_env, *args, "--json", env=env).stdout)
        assert report["project_trusted"] is None and report["trust_fix"] is None, report


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_project_files_go_to_the_repository_root_from_a_subdirectory(
    orca_env: OrcaEnv, tmp_path: Path, agent: str
) -> None:
    # run in a subdirectory, it wrote .claude/ (.codex/) and .mcp.json there, where the agents
    # do not look for a project's files when started at the root (orcad's workspace root)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    deeper = repo / "src" / "pkg"
    deeper.mkdir(parents=True)
    by_cwd = _integrate(orca_env, agent, "--project", "--json", cwd=deeper)
    assert by_cwd.returncode == 0, by_cwd.stderr
    assert sorted(p.name for p in (repo / "src").rglob("*")) == ["pkg"]  # nothing below
    if agent == "claude-code":
        expected = {repo / ".claude" / "settings.json", repo / ".mcp.json"}
        server = json.loads((repo / ".mcp.json").read_text())["mcpServers"]["orca"]
        assert server["args"][:3] == ["mcp", "--cwd", str(repo)]
    else:
        expected = {repo / ".codex" / "hooks.json", repo / ".codex" / "config.toml"}
    assert all(path.is_file() for path in expected)
    report = json.loads(by_cwd.stdout)
    assert {Path(entry["path"]) for entry in report["changed"]} == expected
    assert report["project"] == str(repo)
    # --cwd names a directory in the project just the same, and the human output says where
    again = _integrate(orca_env, agent, "--project", "--cwd", str(deeper), "--remove")
    assert again.returncode == 0, again.stderr
    assert f"note: {deeper} is in the project at {repo}: its files are written there" in (
        again.stdout
    )
    if agent == "claude-code":
        assert all(not path.exists() for path in expected)
    else:  # config.toml keeps `hooks = true`, which other hooks may need
        assert not (repo / ".codex" / "hooks.json").exists()
        config = tomllib.loads((repo / ".codex" / "config.toml").read_text())
        assert "orca" not in config.get("mcp_servers", {})


def test_project_files_outside_a_repository_go_to_the_directory_itself(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    plain = tmp_path / "plain" / "sub"
    plain.mkdir(parents=True)
    result = _integrate(orca_env, "codex", "--project", "--cwd", str(plain), "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["project"] == str(plain)
    assert {entry["path"] for entry in report["changed"]} == {
        str(plain / ".codex" / "hooks.json"),
        str(plain / ".codex" / "config.toml"),
    }
    assert not (plain / ".codex").exists()  # a dry run


def test_remove_leaves_a_project_as_integrate_found_it(orca_env: OrcaEnv, tmp_path: Path) -> None:
    # --remove left .claude/, and a backup of each file it deleted (files that held only orca's
    # entries), untracked in the user's repository
    project = tmp_path / "repo"
    (project / "src").mkdir(parents=True)
    where = ("--project", "--cwd", str(project))
    for agent in ("claude-code", "codex"):
        assert _integrate(orca_env, agent, *where).returncode == 0
    removed = _integrate(orca_env, "claude-code", *where, "--remove", "--json")
    assert removed.returncode == 0, removed.stderr
    assert {
        entry["path"]: (entry["backup"], entry["deleted"])
        for entry in json.loads(removed.stdout)["changed"]
    } == {
        str(project / ".claude" / "settings.json"): (None, True),
        str(project / ".mcp.json"): (None, True),
    }
    said = _integrate(orca_env, "codex", *where, "--remove")
    assert said.returncode == 0, said.stderr
    assert f"{project / '.codex' / 'hooks.json'} (it held only orca's entries: deleted)" in (
        said.stdout
    )
    left = sorted(str(path.relative_to(project)) for path in project.rglob("*"))
    # config.toml keeps `hooks = true` (other hooks may need it), so it and its backup stay
    assert [name for name in left if "orca-backup" not in name] == [
        ".codex",
        ".codex/config.toml",
        "src",
    ]
    assert [name for name in left if "orca-backup" in name] == [
        next(name for name in left if name.startswith(".codex/config.toml.orca-backup-"))
    ]


def test_remove_never_takes_the_project_directory_away(orca_env: OrcaEnv, tmp_path: Path) -> None:
    # an empty project: once .mcp.json is gone, only the agents' own folders may go with it
    project = tmp_path / "empty"
    project.mkdir()
    where = ("--project", "--cwd", str(project))
    assert _integrate(orca_env, "claude-code", *where).returncode == 0
    assert _integrate(orca_env, "claude-code", *where, "--remove").returncode == 0
    assert project.is_dir()
    assert list(project.iterdir()) == []


def test_a_file_the_user_also_wrote_in_keeps_its_backup(orca_env: OrcaEnv, tmp_path: Path) -> None:
    project = tmp_path / "repo"
    (project / ".claude").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    settings.write_text('{"model": "opus"}\n')
    where = ("--project", "--cwd", str(project))
    assert _integrate(orca_env, "claude-code", *where).returncode == 0
    assert _integrate(orca_env, "claude-code", *where, "--remove").returncode == 0
    assert json.loads(settings.read_text()) == {"model": "opus"}
    assert len(list(settings.parent.glob("settings.json.orca-backup-*"))) == 2


def test_a_project_directory_that_does_not_exist_is_bad_usage(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    typo = tmp_path / "repo-typo"
    result = _integrate(orca_env, "codex", "--project", "--cwd", str(typo))
    assert result.returncode == 2
    assert f"--cwd: {typo} does not exist" in result.stderr
    assert not typo.exists()  # no project directory made up around its files


def test_the_orcactl_option_is_written_as_an_absolute_path_to_an_executable(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    wrapper = tmp_path / "bin" / "orcactl"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {ORCACTL} "$@"\n')
    wrapper.chmod(0o755)
    settings = _home(orca_env) / ".claude" / "settings.json"
    relative = subprocess.run(
        [ORCACTL, "integrate", "claude-code", "--orcactl", "bin/orcactl"],
        capture_output=True,
        text=True,
        env=orca_env.env,
        cwd=tmp_path,
        timeout=60,
    )
    assert relative.returncode == 0, relative.stderr
    # the agent runs hooks from wherever it is: a relative path would not be found there
    hooks = json.loads(settings.read_text())
    assert _commands(hooks, "Stop") == [_ours(orca_env, "claude-code", "Stop", wrapper)]
    before = settings.read_text()
    missing = _integrate(orca_env, "claude-code", "--orcactl", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert f"--orcactl: {tmp_path / 'nowhere'} does not exist" in missing.stderr
    assert settings.read_text() == before


def test_hooks_run_through_a_wrapper_are_still_orcas(orca_env: OrcaEnv, tmp_path: Path) -> None:
    wrapper = tmp_path / "orca-for-agents"  # a script that runs orcactl, named otherwise
    wrapper.write_text(f'#!/bin/sh\nexec {ORCACTL} "$@"\n')
    wrapper.chmod(0o755)
    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    settings_path.write_text(json.dumps(CLAUDE_SETTINGS))
    for _ in range(2):
        run = _integrate(orca_env, "claude-code", "--orcactl", str(wrapper))
        assert run.returncode == 0, run.stderr
    settings = json.loads(settings_path.read_text())
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        ours = [c for c in _commands(settings, event) if c.startswith(str(wrapper))]
        assert ours == [_ours(orca_env, "claude-code", event, wrapper)]  # once, not per run
    assert agent_status("claude-code", {**orca_env.env, "PATH": "/usr/bin:/bin"})[1]
    assert _integrate(orca_env, "claude-code", "--remove").returncode == 0
    assert json.loads(settings_path.read_text()) == CLAUDE_SETTINGS


def test_the_extractor_option_sets_the_command_provider(orca_env: OrcaEnv) -> None:
    orca_env.write_config("# orca\nauto_memory = true\n")
    assert _integrate(orca_env, "claude-code").returncode == 0
    assert "extraction" not in (orca_env.home / "config.toml").read_text()  # only when asked
    assert _integrate(orca_env, "claude-code", "--extractor").returncode == 0
    config = tomllib.loads((orca_env.home / "config.toml").read_text())
    assert config["extraction"] == {"provider": "command", "command": {"argv": ["claude", "-p"]}}
    assert _integrate(orca_env, "claude-code", "--extractor", "--remove").returncode == 0
    assert (orca_env.home / "config.toml").read_text() == "# orca\nauto_memory = true\n"


def test_the_extractor_option_edits_a_config_with_a_byte_order_mark(orca_env: OrcaEnv) -> None:
    """orcad reads past the mark some Windows editors write; integrate refused such a file as
    not valid TOML ("Empty key at line 1 col 0")."""
    config = orca_env.home / "config.toml"
    original = "\ufeff# orca\r\nauto_memory = true\r\n".encode()
    config.write_bytes(original)
    done = _integrate(orca_env, "claude-code", "--extractor")
    assert done.returncode == 0, done.stderr
    written = config.read_bytes()
    assert written.startswith("\ufeff# orca\r\n".encode())
    loaded = load_config(config).config
    assert loaded.extraction.provider == "command"
    assert loaded.extraction.command.argv == ["claude", "-p"]
    assert _integrate(orca_env, "claude-code", "--extractor", "--remove").returncode == 0
    assert config.read_bytes() == original


def test_the_extractor_option_says_orcad_uses_it_only_after_a_restart(orca_env: OrcaEnv) -> None:
    # orcad reads [extraction] at its start: "connected" alone would leave a running daemon on
    # its old provider while the user believes the agent's CLI now extracts
    plain = _integrate(orca_env, "claude-code")
    assert plain.returncode == 0 and "restart" not in plain.stdout
    for remove in ((), ("--remove",)):
        changed = _integrate(orca_env, "claude-code", "--extractor", *remove)
        assert changed.returncode == 0, changed.stderr
        assert "restart orcad" in changed.stdout
    as_json = _integrate(orca_env, "claude-code", "--extractor", "--json")
    assert json.loads(as_json.stdout)["restart_orcad"] is True
    unchanged = _integrate(orca_env, "claude-code", "--extractor", "--json")
    assert json.loads(unchanged.stdout)["restart_orcad"] is False  # nothing new to read


def test_a_remove_without_the_extractor_option_says_the_extractor_stays(
    orca_env: OrcaEnv,
) -> None:
    """`integrate claude-code --remove` after `--extractor` said only what it removed: orcad
    went on sending every captured turn to `claude -p`, with not a word about it."""
    config = orca_env.home / "config.toml"
    assert _integrate(orca_env, "claude-code", "--extractor").returncode == 0
    removed = _integrate(orca_env, "claude-code", "--remove")
    assert removed.returncode == 0, removed.stderr
    assert load_config(config).config.extraction.command.argv == ["claude", "-p"]  # still there
    assert (
        "note: orcad still extracts facts with `claude -p`, as --extractor set in "
        f"{config}; `orcactl integrate claude-code --remove --extractor` takes that out too"
    ) in removed.stdout
    as_json = _integrate(orca_env, "claude-code", "--remove", "--json")
    assert json.loads(as_json.stdout)["extractor_kept"] is True
    # the other agent's extractor is not this one's, and once it is gone nothing is said
    assert "still extracts" not in _integrate(orca_env, "codex", "--remove").stdout
    assert _integrate(orca_env, "claude-code", "--remove", "--extractor").returncode == 0
    after = _integrate(orca_env, "claude-code", "--remove", "--json")
    assert json.loads(after.stdout)["extractor_kept"] is False


async def test_an_extraction_command_runs_with_the_recursion_guard() -> None:
    # The "agent CLI" fires its Stop hook as a real agent would; the hook must do nothing.
    code = (
        "import subprocess, sys; sys.stdin.read(); "
        f"hook = subprocess.run([{ORCACTL!r}, 'hook', 'claude-code', 'Stop', '--no-start'], "
        "input='{}', capture_output=True, text=True); "
        "print('NOTHING' if (hook.returncode, hook.stdout, hook.stderr) == (0, '', '') else "
        "'hook ran: ' + repr(hook.stderr))"
    )
    provider = CommandProvider([sys.executable, "-c", code])
    output = await provider.extract("user: hi", deadline=trio.current_time() + 30)
    assert output.strip() == "NOTHING"


def test_doctor_reports_each_agent_found(orca_env: OrcaEnv) -> None:
    (_home(orca_env) / ".claude").mkdir(parents=True)
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    env = {"CODEX_HOME": str(codex_home), "PATH": "/usr/bin:/bin"}

    def agents() -> list[dict[str, Any]]:
        run = _doctor(orca_env, "--json", env=env)
        findings = json.loads(run.stdout)["findings"]
        return [f for f in findings if f["check"] == "agents"]

    before = agents()
    assert [f["status"] for f in before] == ["skipped", "skipped"]
    assert "orcactl integrate claude-code" in before[0]["fix"]
    settings = _home(orca_env) / ".claude" / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [
                        {
                            "hooks": [
                                {"type": "command", "command": f"{ORCACTL} hook claude-code Stop"}
                            ]
                        }
                    ]
                }
            }
        )
    )
    partly = agents()
    assert partly[0]["status"] == "problem" and "SessionStart hook" in partly[0]["detail"]
    assert _integrate(orca_env, "claude-code", env=env).returncode == 0
    assert _integrate(orca_env, "codex", env=env).returncode == 0
    after = agents()
    assert [f["status"] for f in after] == ["ok", "ok"]
    # Codex skips, without a word, a hook its config does not trust (as every registration
    # made before integrate wrote the trust); --no-trust leaves the trust there is alone
    kept = _integrate(orca_env, "codex", "--no-trust", env=env)
    assert kept.returncode == 0 and "/hooks" in kept.stdout  # it says who trusts them now
    assert agents()[1]["status"] == "ok"
    config = codex_home / "config.toml"
    trusted = tomllib.loads(config.read_text())["hooks"]["state"]
    untrusted_text = config.read_text()
    for key in trusted:
        untrusted_text = untrusted_text.replace(json.dumps(key), json.dumps(key + "-old"))
    config.write_text(untrusted_text)
    untrusted = agents()[1]
    assert untrusted["status"] == "problem" and "does not trust" in untrusted["detail"]
    assert "SessionStart" not in untrusted["detail"] and "session_start" in untrusted["detail"]
    assert _integrate(orca_env, "codex", env=env).returncode == 0
    assert agents()[1]["status"] == "ok"
    # Codex runs no hook without its feature flag: registered hooks alone are not connected
    config.write_text(config.read_text().replace("hooks = true", "hooks = false"))
    flag_off = agents()[1]
    assert flag_off["status"] == "problem" and "features.hooks" in flag_off["detail"]


def test_a_symlinked_settings_file_stays_a_symlink_and_backups_are_private(
    orca_env: OrcaEnv,
) -> None:
    dotfiles = orca_env.root / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "claude-settings.json"
    target.write_text(json.dumps(CLAUDE_SETTINGS, indent=2))
    target.chmod(0o644)
    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    settings_path.symlink_to(target)
    run = _integrate(orca_env, "claude-code")
    assert run.returncode == 0, run.stderr
    assert settings_path.is_symlink() and settings_path.resolve() == target
    assert "SessionStart" in json.loads(target.read_text())["hooks"]
    assert target.stat().st_mode & 0o777 == 0o644  # the user's mode is kept
    backups = list(settings_path.parent.glob("settings.json.orca-backup-*"))
    assert len(backups) == 1 and json.loads(backups[0].read_text()) == CLAUDE_SETTINGS
    assert backups[0].stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in dotfiles.iterdir()) == ["claude-settings.json"]
    assert _integrate(orca_env, "claude-code", "--remove").returncode == 0
    assert settings_path.is_symlink() and json.loads(target.read_text()) == CLAUDE_SETTINGS


def test_a_read_only_settings_file_is_reported_and_nothing_changes(orca_env: OrcaEnv) -> None:
    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    settings_path.write_text(json.dumps(CLAUDE_SETTINGS))
    settings_path.chmod(0o444)
    run = _integrate(orca_env, "claude-code")
    assert run.returncode == 1 and "read-only" in run.stderr and "Traceback" not in run.stderr
    assert json.loads(settings_path.read_text()) == CLAUDE_SETTINGS
    assert sorted(p.name for p in settings_path.parent.iterdir()) == ["settings.json"]
    assert not (_home(orca_env) / ".claude.json").exists()


def test_a_second_run_changes_nothing_when_other_hooks_come_after_ours(
    orca_env: OrcaEnv,
) -> None:
    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    assert _integrate(orca_env, "claude-code").returncode == 0
    settings = json.loads(settings_path.read_text())
    later = {"hooks": [{"type": "command", "command": "notify-send done"}]}
    settings["hooks"]["Stop"].append(later)  # another tool, installed after orca
    settings_path.write_text(json.dumps(settings, indent=2) + "\n")
    before = settings_path.read_text()
    again = _integrate(orca_env, "claude-code")
    assert again.returncode == 0 and "nothing to change" in again.stdout, again.stdout
    assert settings_path.read_text() == before
    assert _integrate(orca_env, "claude-code", "--remove").returncode == 0
    assert json.loads(settings_path.read_text())["hooks"] == {"Stop": [later]}


def test_a_path_entry_that_cannot_be_searched_is_skipped_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orcactl import agent_configs

    locked, usable = tmp_path / "locked", tmp_path / "bin"
    usable.mkdir()
    (usable / "orcactl").write_text("#!/bin/sh\n")
    (usable / "orcactl").chmod(0o755)
    real_stat = agent_configs.os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).startswith(str(locked)):  # what a non-root user meets in a 0700 dir
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(agent_configs.os, "stat", stat)
    env = {"PATH": f"{locked}:{usable}"}
    found = agent_configs.orcactl_path(env, str(locked / "python"), str(locked / "python"))
    assert found == str(usable / "orcactl")


# `codex exec` as it behaves: outside a Git repository (or a directory the user trusted) it
# refuses to run unless told --skip-git-repo-check
FAKE_CODEX = """#!{python}
import os, sys
cwd = os.getcwd()
trusted = any(
    os.path.exists(os.path.join(d, ".git"))
    for d in [cwd] + [cwd.rsplit("/", n)[0] or "/" for n in range(1, cwd.count("/") + 1)]
)
if "--skip-git-repo-check" not in sys.argv and not trusted:
    print("Not inside a trusted directory and --skip-git-repo-check was not specified.",
          file=sys.stderr)
    sys.exit(1)
sys.stdin.read()
print("NOTHING")
"""


def test_the_codex_extractor_runs_in_an_orcad_started_from_a_repository(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # a Codex hook starts orcad from the project (a Git repository); orcad runs in /, where
    # `codex exec` would refuse to run: the extractor integrate writes must run there all the same
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex"
    codex.write_text(FAKE_CODEX.format(python=sys.executable))
    codex.chmod(0o755)
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    env = {
        **orca_env.env,
        "CODEX_HOME": str(codex_home),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    orca_env.write_config("[extraction]\nworkers = 1\nmax_retries = 0\n")
    assert _integrate(orca_env, "codex", "--extractor", env=env).returncode == 0
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    started = subprocess.run(
        [ORCACTL, "ping", "--json"], env=env, cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 0, started.stderr
    pid = json.loads(started.stdout)["pid"]
    try:
        with Client(str(orca_env.socket)) as client:
            session = client.call("session.open", {"cwd": str(repo.resolve())})
            job_id = client.call(
                "turn.completed",
                {
                    "session_id": session.session_id,
                    "epoch": session.epoch,
                    "turn_id": "t1",
                    "outcome": "succeeded",
                    "verifier": "none",
                    "transcript_committed": True,
                    "messages": [{"role": "user", "content": "we deploy with make release"}],
                },
            ).job_id
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                job = next(j for j in client.call("jobs.list").jobs if j.job_id == job_id)
                if job.state not in ("pending", "leased"):
                    break
                time.sleep(0.05)
            assert job.state == "committed", job
    finally:
        subprocess.run(["kill", "-TERM", str(pid)], check=False)
        deadline = time.monotonic() + 15
        while orca_env.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def test_an_orcactl_that_is_not_there_is_never_registered(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # A Python with no orcactl beside it and none on PATH (`python -m orcactl`): the default
    # it would fall back to does not exist.
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.symlink_to(os.path.realpath(sys.executable))
    env = {
        **orca_env.env,
        "PATH": "/nonexistent",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path[1:]]),
    }
    settings = _home(orca_env) / ".claude" / "settings.json"
    refused = subprocess.run(
        [str(python), "-m", "orcactl", "integrate", "claude-code"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert refused.returncode == 2, refused.stderr
    assert "pass --orcactl PATH" in refused.stderr and "Traceback" not in refused.stderr
    assert not settings.exists() and not (_home(orca_env) / ".claude.json").exists()
    # one registered earlier and since removed: doctor says so instead of "registered"
    gone = tmp_path / "old" / "orcactl"
    gone.parent.mkdir()
    gone.write_text(f'#!/bin/sh\nexec {ORCACTL} "$@"\n')
    gone.chmod(0o755)
    assert _integrate(orca_env, "claude-code", "--orcactl", str(gone)).returncode == 0
    assert agent_status("claude-code", orca_env.env)[1]
    gone.unlink()
    found, connected, detail = agent_status("claude-code", orca_env.env)
    assert (found, connected) == (True, False) and str(gone) in detail


def test_a_symlink_in_a_read_only_directory_changes_nothing(orca_env: OrcaEnv) -> None:
    # The file a symlink names is writable, but its backup goes beside the symlink.
    dotfiles = orca_env.root / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "claude-settings.json"
    target.write_text(json.dumps(CLAUDE_SETTINGS))
    claude = _home(orca_env) / ".claude"
    claude.mkdir(parents=True)
    (claude / "settings.json").symlink_to(target)
    claude.chmod(0o555)
    try:
        run = _integrate(orca_env, "claude-code")
    finally:
        claude.chmod(0o755)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert f"its backup's directory {claude} is read-only" in run.stderr
    assert json.loads(target.read_text()) == CLAUDE_SETTINGS
    assert sorted(p.name for p in claude.iterdir()) == ["settings.json"]
    assert sorted(p.name for p in dotfiles.iterdir()) == ["claude-settings.json"]
    assert not (_home(orca_env) / ".claude.json").exists()


def _integrate_on_a_full_disk(orca: OrcaEnv) -> tuple[Path, int, subprocess.CompletedProcess[str]]:
    """integrate run where no file may grow past a large ~/.claude.json (a full disk, as near
    as a process limit gets): its backup fits, settings.json is written, its own new text does
    not fit. The file, its size before, and the run."""
    claude_json = _home(orca) / ".claude.json"
    claude_json.write_text(json.dumps({"projects": {"/src/app": {"notes": "x" * 20000}}}))
    size = claude_json.stat().st_size
    limit = size + 16

    def no_file_larger_than_the_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = subprocess.run(
        [ORCACTL, "integrate", "claude-code"],
        capture_output=True,
        text=True,
        env=orca.env,
        timeout=60,
        preexec_fn=no_file_larger_than_the_limit,
    )
    return claude_json, size, run


def test_a_write_that_fails_halfway_puts_back_the_files_already_written(
    orca_env: OrcaEnv,
) -> None:
    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    settings_path.write_text(json.dumps(CLAUDE_SETTINGS))
    claude_json, size, run = _integrate_on_a_full_disk(orca_env)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert f"{claude_json} could not be written (File too large)" in run.stderr
    assert "nothing was changed" in run.stderr
    assert json.loads(settings_path.read_text()) == CLAUDE_SETTINGS  # put back
    assert claude_json.stat().st_size == size
    assert sorted(p.name for p in settings_path.parent.iterdir()) == ["settings.json"]
    assert sorted(p.name for p in claude_json.parent.iterdir()) == [".claude", ".claude.json"]


def test_a_directory_made_for_a_file_taken_back_out_is_removed(orca_env: OrcaEnv) -> None:
    # ~/.claude does not exist yet: integrate makes it for settings.json, then ~/.claude.json
    # cannot be written, and settings.json is taken back out; its directory must go with it
    claude_json, _size, run = _integrate_on_a_full_disk(orca_env)
    assert run.returncode == 1 and "nothing was changed" in run.stderr, run.stderr
    assert sorted(p.name for p in claude_json.parent.iterdir()) == [".claude.json"]


def test_only_the_hooks_integrate_writes_are_orcas(orca_env: OrcaEnv) -> None:
    wrapper = "bash -c 'orcactl hook claude-code Stop >/dev/null; ~/bin/audit.sh'"
    failure = {"hooks": [{"type": "command", "command": f"{ORCACTL} hook claude-code StopFailure"}]}
    subagent = {
        "hooks": [{"type": "command", "command": f"{ORCACTL} hook claude-code SubagentStop"}]
    }
    mine = {
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": wrapper}]}],
            "StopFailure": [failure],  # events the hook handles, registered by the user
            "SubagentStop": [subagent],
        }
    }
    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    settings_path.write_text(json.dumps(mine))
    for _ in range(2):
        assert _integrate(orca_env, "claude-code").returncode == 0
        settings = json.loads(settings_path.read_text())
        assert _commands(settings, "Stop") == [wrapper, _ours(orca_env, "claude-code", "Stop")]
        assert settings["hooks"]["StopFailure"] == [failure]
        assert settings["hooks"]["SubagentStop"] == [subagent]
    assert _integrate(orca_env, "claude-code", "--remove").returncode == 0
    removed = json.loads(settings_path.read_text())
    assert removed == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": wrapper}]}]}}


@pytest.mark.parametrize("name", ["hooks", "codex_hooks"])
def test_codex_hooks_the_user_turned_off_are_not_turned_on_behind_their_back(
    orca_env: OrcaEnv, name: str
) -> None:
    # integrate set `codex_hooks = false` to true, so every hook the user had switched off ran
    # (`hooks` is its name since Codex renamed it)
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    config = f"# hooks off while I debug\n[features]\n{name} = false\n"
    (codex_home / "config.toml").write_text(config)
    env = {"CODEX_HOME": str(codex_home)}
    refused = _integrate(orca_env, "codex", env=env)
    assert refused.returncode == 1 and f"{name} = false" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    # it says what to do (set the key yourself); it went on to say "Fix or move that file",
    # and Codex without its config.toml has every setting the user made in it undone
    assert "Set it to true yourself" in refused.stderr
    assert "move that file" not in refused.stderr
    assert (codex_home / "config.toml").read_text() == config
    assert sorted(p.name for p in codex_home.iterdir()) == ["config.toml"]  # nothing at all
    (codex_home / "config.toml").write_text(config.replace("false", "true"))
    assert _integrate(orca_env, "codex", env=env).returncode == 0


@pytest.mark.parametrize(
    "extraction",
    [
        '[extraction]\nprovider = "openai"   # my local llama\n',
        '[extraction]\nprovider = "command"\n\n[extraction.command]\nargv = ["my-extractor"]\n',
        # README's example config: a command of the user's own kept while the heuristic runs;
        # --extractor overwrote it and --remove --extractor then deleted the table
        '[extraction]\nprovider = "heuristic"\n\n[extraction.command]\n'
        'argv = ["llm", "-m", "gpt-4o-mini"]  # for later\n',
    ],
    ids=["an-endpoint", "the-users-own-command", "the-users-own-command-not-chosen-yet"],
)
def test_the_extractor_option_never_replaces_a_provider_the_user_chose(
    orca_env: OrcaEnv, extraction: str
) -> None:
    # --extractor replaced it, and --remove --extractor then deleted it: orcad fell back to
    # the heuristic provider, the user's choice and its comment gone
    orca_env.write_config(extraction)
    refused = _integrate(orca_env, "claude-code", "--extractor")
    assert refused.returncode == 1 and "--extractor would replace" in refused.stderr, refused
    # "or leave out --extractor" was followed by "Fix or move that file": orca's config.toml
    # moved away, orcad starts without the provider the user chose
    assert "or leave out --extractor; nothing was changed.\n" in refused.stderr
    assert "move that file" not in refused.stderr
    assert (orca_env.home / "config.toml").read_text() == extraction
    assert not (_home(orca_env) / ".claude").exists()  # nothing at all was changed
    orca_env.write_config('[extraction]\nprovider = "heuristic"\n')  # the default, named
    assert _integrate(orca_env, "claude-code", "--extractor").returncode == 0


def test_ctrl_c_while_integrate_writes_leaves_the_agent_connected_whole_or_not_at_all(
    orca_env: OrcaEnv,
) -> None:
    # interrupted between settings.json and ~/.claude.json, it left the hooks installed and no
    # MCP server (in 5 of 5 tries), and exited 130 as if nothing had been done
    import signal

    settings_path = _home(orca_env) / ".claude" / "settings.json"
    settings_path.parent.mkdir(parents=True)
    claude_json = _home(orca_env) / ".claude.json"
    # large enough that writing it takes a while after settings.json is replaced
    projects = {f"/p/{n}": {"history": ["x" * 200] * 20} for n in range(3000)}
    outcomes = []
    for _attempt in range(3):
        settings_path.write_text(json.dumps(CLAUDE_SETTINGS))
        claude_json.write_text(json.dumps({"projects": projects}))
        before = settings_path.stat().st_ino
        run = subprocess.Popen(
            [ORCACTL, "integrate", "claude-code"],
            env=orca_env.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while run.poll() is None and settings_path.stat().st_ino == before:
            assert time.monotonic() < deadline
        run.send_signal(signal.SIGINT)
        _out, err = run.communicate(timeout=60)
        hooks = json.loads(settings_path.read_text()) != CLAUDE_SETTINGS  # orca's added
        mcp = "orca" in json.loads(claude_json.read_text()).get("mcpServers", {})
        assert "Traceback" not in err
        assert hooks == mcp, f"exit {run.returncode}: hooks {hooks}, MCP server {mcp}"
        if run.returncode == 130:  # interrupted: nothing done, and no backup left to mislead
            assert not hooks
            assert sorted(p.name for p in settings_path.parent.iterdir()) == ["settings.json"]
        outcomes.append(run.returncode)
        if hooks:
            subprocess.run(
                [ORCACTL, "integrate", "claude-code", "--remove"],
                env=orca_env.env,
                capture_output=True,
                timeout=60,
                check=True,
            )
    assert 130 in outcomes  # the interrupt did come while it wrote


def _trusted(config: Path) -> dict[str, str]:
    states = tomllib.loads(config.read_text()).get("hooks", {}).get("state", {})
    return {key.split("hooks.json:", 1)[1]: value["trusted_hash"] for key, value in states.items()}


def test_the_trust_of_the_users_own_codex_hooks_follows_them_when_orcas_move(
    orca_env: OrcaEnv,
) -> None:
    # Codex records trust by a hook's place (event, group, handler): taking orca's group out
    # moved the user's hook after it, and its trust stayed behind, so Codex skipped it
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    env = {"CODEX_HOME": str(codex_home)}
    assert _integrate(orca_env, "codex", env=env).returncode == 0
    hooks_file, config = codex_home / "hooks.json", codex_home / "config.toml"
    hooks = json.loads(hooks_file.read_text())
    audit = {"type": "command", "command": "/usr/local/bin/audit.sh", "timeout": 5}
    hooks["hooks"]["Stop"].append({"hooks": [audit]})
    hooks_file.write_text(json.dumps(hooks, indent=2))
    [users] = [
        h for h in agent_configs.codex_hooks(hooks_file.read_text(), hooks_file) if not h.ours
    ]
    assert users.key.endswith(":stop:1:0")
    with config.open("a") as handle:  # trusted as Codex's /hooks would, with a comment
        handle.write(
            f'\n# my audit hook\n[hooks.state."{users.key}"]\ntrusted_hash = "{users.digest}"\n'
        )
    assert _integrate(orca_env, "codex", "--remove", env=env).returncode == 0
    assert _trusted(config) == {"stop:0:0": users.digest}  # moved with it; orca's are gone
    assert "# my audit hook" in config.read_text()
    assert _integrate(orca_env, "codex", env=env).returncode == 0  # orca's appended after it
    assert _trusted(config)["stop:0:0"] == users.digest
    assert len(_trusted(config)) == 5


def test_a_trust_entry_that_is_not_a_table_is_refused_without_a_traceback(
    orca_env: OrcaEnv,
) -> None:
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    env = {"CODEX_HOME": str(codex_home)}
    hooks_file = codex_home / "hooks.json"
    hooks_text = agent_configs.edit_hooks(
        "", hooks_file, "codex", ORCACTL, agent_configs.Pinned(str(orca_env.socket)), remove=False
    )
    [first, *_] = agent_configs.codex_trust(hooks_text, hooks_file)
    config = f'[hooks.state]\n"{first}" = "yes"\n'
    (codex_home / "config.toml").write_text(config)
    for extra in ((), ("--dry-run",)):
        run = _integrate(orca_env, "codex", *extra, env=env)
        assert run.returncode == 1 and "is not a table" in run.stderr, run.stderr
        assert "Traceback" not in run.stderr
    assert (codex_home / "config.toml").read_text() == config


def test_codex_trust_names_the_hooks_file_by_its_real_path(orca_env: OrcaEnv) -> None:
    # the real codex resolves a symlinked CODEX_HOME before it names a hook: trust recorded
    # under the symlink's path left every hook untrusted
    real = orca_env.root / "dotfiles" / "codex"
    real.mkdir(parents=True)
    link = orca_env.root / "codex-home"
    link.symlink_to(real)
    assert _integrate(orca_env, "codex", env={"CODEX_HOME": str(link)}).returncode == 0
    states = tomllib.loads((real / "config.toml").read_text())["hooks"]["state"]
    assert len(states) == 4
    assert all(key.startswith(f"{os.path.realpath(real)}/hooks.json:") for key in states)


def _states(config: Path) -> dict[str, dict[str, Any]]:
    states = tomllib.loads(config.read_text()).get("hooks", {}).get("state", {})
    return {key.split("hooks.json:", 1)[1]: value for key, value in states.items()}


def _codex_with_user_hooks(orca: OrcaEnv, stop: list[dict[str, Any]]) -> tuple[Path, Path]:
    codex_home = orca.root / "codex-home"
    codex_home.mkdir()
    hooks_file = codex_home / "hooks.json"
    hooks_file.write_text(json.dumps({"hooks": {"Stop": stop}}))
    return hooks_file, codex_home / "config.toml"


def test_orcas_trust_replaces_a_table_another_hook_left_at_its_place(orca_env: OrcaEnv) -> None:
    # a table a deleted hook left, `enabled = false` in it: taking it over kept that key, and
    # Codex listed orca's Stop as trusted and disabled
    audit = {"type": "command", "command": "/usr/local/bin/audit.sh", "timeout": 5}
    hooks_file, config = _codex_with_user_hooks(orca_env, [{"hooks": [audit]}])
    key = f"{os.path.realpath(hooks_file.parent)}/hooks.json:stop:1:0"
    config.write_text(f'[hooks.state."{key}"]\ntrusted_hash = "sha256:0"\nenabled = false\n')
    env = {"CODEX_HOME": str(hooks_file.parent)}
    assert _integrate(orca_env, "codex", env=env).returncode == 0
    ours = agent_configs.codex_trust(hooks_file.read_text(), hooks_file)
    assert _states(config)["stop:1:0"] == {"trusted_hash": ours[key]}
    # one the user set on orca's own hook stays: it is their choice
    config.write_text(config.read_text().replace(ours[key] + '"', ours[key] + '"\nenabled = false'))
    assert _integrate(orca_env, "codex", env=env).returncode == 0
    assert _states(config)["stop:1:0"] == {"trusted_hash": ours[key], "enabled": False}


@pytest.mark.parametrize("no_trust", [False, True])
def test_the_trust_of_identical_user_hooks_follows_each_of_them(
    orca_env: OrcaEnv, no_trust: bool
) -> None:
    audit = {"type": "command", "command": "/usr/local/bin/audit.sh", "timeout": 5}
    hooks_file, config = _codex_with_user_hooks(orca_env, [])
    env = {"CODEX_HOME": str(hooks_file.parent)}
    assert _integrate(orca_env, "codex", env=env).returncode == 0
    hooks = json.loads(hooks_file.read_text())
    hooks["hooks"]["Stop"] += [{"hooks": [audit]}, {"hooks": [audit]}]
    hooks_file.write_text(json.dumps(hooks))
    users = [h for h in agent_configs.codex_hooks(hooks_file.read_text(), hooks_file) if not h.ours]
    assert [h.key.rsplit(":", 3)[1:] for h in users] == [["stop", "1", "0"], ["stop", "2", "0"]]
    with config.open("a") as handle:
        for hook in users:
            handle.write(f'\n[hooks.state."{hook.key}"]\ntrusted_hash = "{hook.digest}"\n')
    flags = ("--no-trust",) if no_trust else ()
    assert _integrate(orca_env, "codex", "--remove", *flags, env=env).returncode == 0
    states = _states(config)
    assert states["stop:0:0"] == {"trusted_hash": users[0].digest}
    assert states["stop:1:0"] == {"trusted_hash": users[1].digest}
    assert "stop:2:0" not in states


@pytest.mark.parametrize(
    ("agent", "version"), [("codex", "2025-06-18"), ("claude-code", "2026-07-28")]
)
def test_integrate_records_the_mcp_servers_first_answers_for_the_agents_first_session(
    orca_env: OrcaEnv, agent: str, version: str
) -> None:
    # before: the agent's first session started the server with no answers recorded, and
    # codex exec sent its first request before the SDK had loaded: without orca's tools
    done = _integrate(orca_env, agent, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mcp_answers_recorded"] is True
    cache = _home(orca_env) / ".cache" / "orca" / "mcp-handshake.json"
    recorded = json.loads(cache.read_text())["versions"]
    assert list(recorded) == [version]  # what this agent asks for, as its start records it
    assert "tools" in recorded[version]["tools/list"]
    if agent == "claude-code":  # which it waits to see acknowledged before it lists anything
        [acknowledged] = recorded[version]["subscriptions/listen"].values()
        assert acknowledged["notifications"]["toolsListChanged"] is True
    assert not any(orca_env.socket.parent.glob("*.sock"))  # no orcad started for it


def test_integrate_says_when_the_mcp_servers_answers_could_not_be_recorded(
    orca_env: OrcaEnv,
) -> None:
    cache_parent = _home(orca_env) / ".cache"
    cache_parent.parent.mkdir(parents=True, exist_ok=True)
    cache_parent.write_text("a file where the cache directory goes")
    done = _integrate(orca_env, "codex")
    assert done.returncode == 0, done.stderr  # connected all the same
    assert "the first answers of orca's MCP server could not be recorded" in done.stdout
    done = _integrate(orca_env, "claude-code", "--json", "--orcactl", "/bin/false")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["mcp_answers_recorded"] is False


def test_answers_recorded_means_this_orcactls_own_not_an_older_ones_kept_by_a_failed_write(
    orca_env: OrcaEnv,
) -> None:
    # the cache holds answers for the agent's version under another orcactl's key, and the
    # warm-up cannot write this one's: that was reported as recorded
    assert _integrate(orca_env, "codex", "--json").returncode == 0
    cache = _home(orca_env) / ".cache" / "orca" / "mcp-handshake.json"
    document = json.loads(cache.read_text())
    own_key = document["key"]
    document["key"] = "0" * 64  # an older orcactl's, answering the same version
    cache.write_text(json.dumps(document))
    older = cache.read_bytes()

    def unwritable_cache() -> None:  # no file may grow past a byte: every write fails
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))

    def integrate(limit: Any) -> dict[str, Any]:
        done = subprocess.run(
            [ORCACTL, "integrate", "codex", "--json"],
            capture_output=True,
            text=True,
            env=orca_env.env,
            timeout=60,
            preexec_fn=limit,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        report: dict[str, Any] = json.loads(done.stdout)
        return report

    assert integrate(unwritable_cache)["mcp_answers_recorded"] is False
    assert cache.read_bytes() == older  # kept, as the failed write left it
    assert integrate(None)["mcp_answers_recorded"] is True  # written now: this orcactl's own
    assert json.loads(cache.read_text())["key"] == own_key
    # its own answers there already: nothing needs writing, and they are recorded
    assert integrate(unwritable_cache)["mcp_answers_recorded"] is True


def test_a_program_that_answers_nonsense_to_the_warm_up_is_no_traceback(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # a wrapper given as --orcactl that writes lines no MCP server would
    program = tmp_path / "odd-orcactl"
    program.write_text(
        "#!/bin/sh\n"
        "cat > /dev/null &\n"
        'echo \'{"id": [1], "params": "x"}\'\n'
        'echo \'{"method": "notifications/subscriptions/acknowledged", "params": []}\'\n'
        "echo 'not json'\n"
    )
    program.chmod(0o755)
    for agent in ("claude-code", "codex"):
        done = _integrate(orca_env, agent, "--json", "--orcactl", str(program))
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert json.loads(done.stdout)["mcp_answers_recorded"] is False


def test_a_program_that_answers_deeply_nested_json_to_the_warm_up_is_no_traceback(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # before: json.loads raised RecursionError, which nothing caught, out of integrate
    program = tmp_path / "nested-orcactl"
    depth = 100_000
    program.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.stdout.write('[' * {depth} + ']' * {depth} + '\\n')\n"
        "sys.stdout.flush()\n"
        "sys.stdin.read()\n"
    )
    program.chmod(0o755)
    done = _integrate(orca_env, "codex", "--json", "--orcactl", str(program))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["mcp_answers_recorded"] is False


def test_a_fifo_at_dot_git_is_never_waited_on_when_judging_codex_trust(tmp_path: Path) -> None:
    """A FIFO where a worktree's `.git` file would be: the trust check reads no such file
    (a read would wait for a writer for ever) and finds no repository root there."""
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    os.mkfifo(project / ".git")
    code = (
        "import sys; from pathlib import Path; from orcactl.codex_projects import trust_root; "
        "print(trust_root(Path(sys.argv[1])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(project / "sub")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "None"


# doctor run as orcactl is, but counting how often each text is parsed as TOML, once it ends
_COUNTING_DOCTOR = """
import atexit, collections, pathlib, sys, tomllib
parsed = collections.Counter()
loads = tomllib.loads
def counting(text, **options):
    parsed[text] += 1
    return loads(text, **options)
tomllib.loads = counting
watched, count = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
atexit.register(lambda: count.write_text(str(parsed[watched.read_text()])))
sys.argv = ["orcactl", "--no-start", "doctor", "--json", "--min-free-mb", "0"]
from orcactl.entry import main
main()
"""


def test_doctor_parses_the_users_codex_config_once(orca_env: OrcaEnv, tmp_path: Path) -> None:
    """tomllib is pure Python: a Codex config.toml trusting 30,000 projects (1.4 MB) takes a
    third of a second of CPU to parse, and doctor parsed the user's four times at user level
    and more in a project connected to Codex, taking seconds."""
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    codex_home = orca_env.root / "codex-home"
    env = {**orca_env.env, "CODEX_HOME": str(codex_home)}
    for args in ((), ("--project", "--cwd", str(project))):
        run = _integrate(orca_env, "codex", *args, env=env)
        assert run.returncode == 0, run.stderr
    user_config = codex_home / "config.toml"
    trusted = [os.path.realpath(project), *(f"/home/u/p{n:05d}" for n in range(2000))]
    hooks = [codex_home / "hooks.json", project / ".codex" / "hooks.json"]
    written = tomllib.loads(user_config.read_text()).get("hooks", {}).get("state", {})
    states = {
        key: digest
        for hooks_file in hooks
        for key, digest in agent_configs.codex_trust(hooks_file.read_text(), hooks_file).items()
        if key not in written  # trusted as Codex's /hooks does
    }
    user_config.write_text(
        user_config.read_text()
        + "".join(f'[projects."{path}"]\ntrust_level = "trusted"\n' for path in trusted)
        + "".join(
            f'[hooks.state."{key}"]\ntrusted_hash = "{digest}"\n' for key, digest in states.items()
        )
    )
    count = tmp_path / "parsed"
    run = subprocess.run(
        [sys.executable, "-c", _COUNTING_DOCTOR, str(user_config), str(count)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=project,
    )
    assert "Traceback" not in run.stderr, run.stderr
    agents = [
        (f["status"], f["detail"])
        for f in json.loads(run.stdout)["findings"]
        if f["check"] == "agents" and f["detail"].startswith("codex")
    ]
    assert agents == [
        ("ok", "codex: hooks and MCP server registered"),
        ("ok", f"codex in the project at {project}: hooks and MCP server registered"),
    ]
    assert count.read_text() == "1"


# integrate run as orcactl is, but counting how often the whole of a text as long as the
# user's config.toml is parsed, by tomlkit and by tomllib, once it ends
_COUNTING_INTEGRATE = """
import atexit, json, pathlib, sys, tomllib, tomlkit
watched, count = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
size = len(watched.read_text())
parsed = {"tomlkit": 0, "tomllib": 0}
def counting(name, parse):
    def parse_counted(text, *args, **options):
        parsed[name] += len(text) >= size
        return parse(text, *args, **options)
    return parse_counted
tomlkit.parse = counting("tomlkit", tomlkit.parse)
tomllib.loads = counting("tomllib", tomllib.loads)
atexit.register(lambda: count.write_text(json.dumps(parsed)))
sys.argv = ["orcactl", "integrate", "codex", "--orcactl", sys.argv[3]]
from orcactl.entry import main
main()
"""


def test_integrate_edits_a_codex_config_trusting_many_projects_in_linear_time(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    """tomlkit takes seconds to parse a config.toml that trusts 30,000 projects (1.5 MB), and
    integrate parsed the whole file with it twice, besides tomllib reading it eight times:
    more than 30 seconds on a busy machine. What it writes is the file as it was, orca's
    entries added at its end."""
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    user_config = codex_home / "config.toml"
    original = 'model = "gpt-5"  # mine\n\n' + "".join(
        f'[projects."/home/u/p{n:05d}"]\ntrust_level = "trusted"\n\n' for n in range(3000)
    )
    user_config.write_text(original)
    count = tmp_path / "parsed"
    run = subprocess.run(
        [sys.executable, "-c", _COUNTING_INTEGRATE, str(user_config), str(count), ORCACTL],
        capture_output=True,
        text=True,
        env={**orca_env.env, "CODEX_HOME": str(codex_home)},
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    written = user_config.read_text()
    assert written.startswith(original), written[: len(original)]
    meaning = tomllib.loads(written)
    assert set(meaning) == {"model", "projects", "mcp_servers", "features", "hooks"}
    assert set(meaning["mcp_servers"]) == {"orca"} and meaning["features"] == {"hooks": True}
    hooks_file = codex_home / "hooks.json"
    trust = agent_configs.codex_trust(hooks_file.read_text(), hooks_file)
    assert meaning["hooks"] == {
        "state": {key: {"trusted_hash": digest} for key, digest in trust.items()}
    }
    parsed = json.loads(count.read_text())
    assert parsed["tomlkit"] == 0 and parsed["tomllib"] <= 4, parsed
