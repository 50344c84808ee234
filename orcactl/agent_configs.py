"""What `orcactl integrate` writes into each agent's own configuration files, as pure edits:
the text of a file in, its new text out. No file access here (orcactl.integrate does that).

An entry is orca's when its command runs `<orcactl> hook <agent>` or its MCP server is named
`orca`; everything else in a file is kept as it is (TOML comments included, through tomlkit).
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

AGENTS = ("claude-code", "codex")
MCP_NAME = "orca"
# Seconds each hook may run (the agents' `timeout`); the hook keeps within them itself.
CLAUDE_HOOKS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 30, "SessionEnd": 10}
CODEX_HOOKS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 30}
# The agents' own non-interactive CLIs, offered as orca's `command` extraction provider.
EXTRACTOR_ARGV = {"claude-code": ["claude", "-p"], "codex": ["codex", "exec", "-"]}


class Unparseable(Exception):
    """A configuration file that does not parse: reported, never rewritten."""


@dataclass(frozen=True)
class Target:
    path: Path
    kind: str  # "claude-hooks", "claude-mcp", "codex-hooks", "codex-config", "orca-config"


def claude_config_dir(env: dict[str, str]) -> Path:
    if env.get("CLAUDE_CONFIG_DIR"):
        return Path(env["CLAUDE_CONFIG_DIR"])
    return Path(env.get("HOME") or Path.home()) / ".claude"


def codex_home(env: dict[str, str]) -> Path:
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or Path.home()) / ".codex"


def targets(agent: str, project: Path | None, env: dict[str, str]) -> list[Target]:
    """The files integrate edits, user-level or (with a project) project-level."""
    if agent == "claude-code":
        if project is not None:
            return [
                Target(project / ".claude" / "settings.json", "claude-hooks"),
                Target(project / ".mcp.json", "claude-mcp"),
            ]
        directory = claude_config_dir(env)
        # Claude Code keeps user-scope MCP servers in ~/.claude.json (inside the dir when
        # CLAUDE_CONFIG_DIR moves it).
        mcp_file = (
            directory / ".claude.json"
            if env.get("CLAUDE_CONFIG_DIR")
            else Path(env.get("HOME") or Path.home()) / ".claude.json"
        )
        return [Target(directory / "settings.json", "claude-hooks"), Target(mcp_file, "claude-mcp")]
    base = project / ".codex" if project is not None else codex_home(env)
    return [
        Target(base / "hooks.json", "codex-hooks"),
        Target(base / "config.toml", "codex-config"),
    ]


def hook_command(orcactl: str, agent: str, event: str) -> str:
    return f"{shlex.quote(orcactl)} hook {agent} {event}"


def _is_ours(command: object, agent: str) -> bool:
    return isinstance(command, str) and f" hook {agent} " in f"{command} " and "orcactl" in command


def _load_json(text: str, path: Path) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise Unparseable(f"{path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise Unparseable(f"{path} does not hold a JSON object")
    return data


def _dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n" if data else ""


def edit_hooks(text: str, path: Path, agent: str, orcactl: str, *, remove: bool) -> str:
    """settings.json (Claude Code) or hooks.json (Codex): our hook groups out, then back in."""
    data = _load_json(text, path)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise Unparseable(f"{path}: `hooks` is not an object")
    events = CLAUDE_HOOKS if agent == "claude-code" else CODEX_HOOKS
    places: dict[str, int] = {}  # where each event's orca group was: it goes back there
    emptied: set[str] = set()
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept: list[Any] = []
        for group in groups:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(handlers, list):
                others = [
                    h
                    for h in handlers
                    if not (isinstance(h, dict) and _is_ours(h.get("command"), agent))
                ]
                if not others and handlers:
                    places.setdefault(event, len(kept))
                    continue  # a group that only ran orca
                kept.append({**group, "hooks": others})
                continue
            kept.append(group)
        if groups and not kept:
            emptied.add(event)
        hooks[event] = kept  # emptied events leave at the end, so the keys keep their order
    if not remove:
        for event, timeout in events.items():
            handler = {
                "type": "command",
                "command": hook_command(orcactl, agent, event),
                "timeout": timeout,
            }
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise Unparseable(f"{path}: `hooks.{event}` is not a list")
            groups.insert(places.get(event, len(groups)), {"hooks": [handler]})
    for event in emptied:
        if not hooks[event]:
            del hooks[event]
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    return _dump_json(data)


def mcp_server(orcactl: str, socket: str | None, cwd: Path | None) -> dict[str, Any]:
    args = ["mcp"]
    if cwd is not None:
        args += ["--cwd", str(cwd)]
    if socket:
        args += ["--socket", socket]
    return {"command": orcactl, "args": args}


def edit_claude_mcp(
    text: str, path: Path, orcactl: str, socket: str | None, cwd: Path | None, *, remove: bool
) -> str:
    data = _load_json(text, path)
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise Unparseable(f"{path}: `mcpServers` is not an object")
    servers.pop(MCP_NAME, None)
    if not remove:
        servers[MCP_NAME] = {"type": "stdio", **mcp_server(orcactl, socket, cwd), "env": {}}
    if servers:
        data["mcpServers"] = servers
    else:
        data.pop("mcpServers", None)
    return _dump_json(data)


def _load_toml(text: str, path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
        raise Unparseable(f"{path} is not valid TOML ({exc})") from None


def _tidy(text: str) -> str:
    """No trailing blank lines left behind by a removed table."""
    return text.rstrip("\n") + "\n" if text.strip() else ""


def _table(document: Any, key: str, path: Path) -> Any:
    if key not in document:
        document[key] = tomlkit.table()
    table = document[key]
    if not isinstance(table, dict):
        raise Unparseable(f"{path}: `{key}` is not a table")
    return table


def edit_codex_config(
    text: str, path: Path, orcactl: str, socket: str | None, cwd: Path | None, *, remove: bool
) -> str:
    """config.toml: [mcp_servers.orca], and [features] codex_hooks = true for the hooks."""
    document = _load_toml(text, path)
    if remove:
        servers = document.get("mcp_servers")
        if isinstance(servers, dict) and MCP_NAME in servers:
            del servers[MCP_NAME]
            if not servers:
                del document["mcp_servers"]
        return _tidy(document.as_string())
    servers = _table(document, "mcp_servers", path)
    server = tomlkit.table()
    for key, value in mcp_server(orcactl, socket, cwd).items():
        server[key] = value
    servers[MCP_NAME] = server
    _table(document, "features", path)["codex_hooks"] = True  # hooks are behind this flag
    return document.as_string()


def edit_orca_config(text: str, path: Path, agent: str, *, remove: bool) -> str:
    """orca's config.toml: the agent's own CLI as the `command` extraction provider."""
    document = _load_toml(text, path)
    argv = EXTRACTOR_ARGV[agent]
    extraction = document.get("extraction")
    if remove:
        if isinstance(extraction, dict):
            command = extraction.get("command")
            if isinstance(command, dict) and list(command.get("argv", [])) == argv:
                del extraction["command"]
                if extraction.get("provider") == "command":
                    del extraction["provider"]
                if not extraction:
                    del document["extraction"]
        return _tidy(document.as_string())
    extraction = _table(document, "extraction", path)
    extraction["provider"] = "command"
    command = tomlkit.table()
    command["argv"] = argv
    extraction["command"] = command
    return document.as_string()


def orcactl_path(env: dict[str, str], argv0: str, executable: str) -> str:
    """The absolute orcactl the agents should run: the running one, else the one next to this
    Python, else the one on PATH."""
    running = Path(os.path.abspath(argv0))
    # os.path.isfile, not Path.is_file: a directory the user cannot search is "not here",
    # where Path.is_file raises PermissionError
    if running.name == "orcactl" and os.path.isfile(running):
        return str(running)
    beside = Path(executable).parent / "orcactl"
    if os.path.isfile(beside):
        return str(beside)
    return _which("orcactl", env) or str(beside)


def _which(name: str, env: dict[str, str]) -> str | None:
    for directory in env.get("PATH", "").split(os.pathsep):
        candidate = Path(directory) / name
        if directory and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def missing_entries(text: str, path: Path, kind: str, agent: str) -> list[str]:
    """What of orca's registration a file lacks (for orcactl doctor)."""
    if kind in ("claude-hooks", "codex-hooks"):
        hooks = _load_json(text, path).get("hooks")
        hooks = hooks if isinstance(hooks, dict) else {}
        events = CLAUDE_HOOKS if agent == "claude-code" else CODEX_HOOKS
        missing = []
        for event in events:
            listed = hooks.get(event)
            groups: list[Any] = listed if isinstance(listed, list) else []
            commands = [
                handler.get("command")
                for group in groups
                if isinstance(group, dict) and isinstance(group.get("hooks"), list)
                for handler in group["hooks"]
                if isinstance(handler, dict)
            ]
            if not any(
                _is_ours(command, agent) and str(command).endswith(f" {event}")
                for command in commands
            ):
                missing.append(f"{event} hook")
        return missing
    if kind == "claude-mcp":
        servers = _load_json(text, path).get("mcpServers")
        return [] if isinstance(servers, dict) and MCP_NAME in servers else ["MCP server"]
    servers = _load_toml(text, path).get("mcp_servers")
    return [] if isinstance(servers, dict) and MCP_NAME in servers else ["MCP server"]
