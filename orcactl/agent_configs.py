"""What `orcactl integrate` writes into each agent's own configuration files, as pure edits:
the text of a file in, its new text out. No file access here (orcactl.integrate does that).

An entry is orca's when its command is one integrate writes (`<orcactl> hook <agent> <event>`,
perhaps with `--socket PATH`) or its MCP server is named `orca`; everything else in a file is
kept as it is (TOML comments included, through tomlkit).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

AGENTS = ("claude-code", "codex")
MCP_NAME = "orca"
# Seconds each hook may run (the agents' `timeout`); the hook keeps within them itself.
CLAUDE_HOOKS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 30, "SessionEnd": 10}
CODEX_HOOKS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 30}
CODEX_HOOKS_FLAG = "features.codex_hooks = true"
# The agents' own non-interactive CLIs, offered as orca's `command` extraction provider. orcad
# runs them in its own working directory (/ when orcactl starts it, the home directory under
# systemd), where `codex exec` refuses to run without --skip-git-repo-check.
EXTRACTOR_ARGV = {
    "claude-code": ["claude", "-p"],
    "codex": ["codex", "exec", "--skip-git-repo-check", "-"],
}
# What earlier versions wrote: still orca's to replace or remove.
OLDER_EXTRACTOR_ARGV = {"claude-code": [], "codex": [["codex", "exec", "-"]]}


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


def hook_command(orcactl: str, agent: str, event: str, socket: str | None = None) -> str:
    command = f"{shlex.quote(orcactl)} hook {agent} {event}"
    return f"{command} --socket {shlex.quote(socket)}" if socket else command


def _hook_event(command: object, agent: str) -> str | None:
    """The event of a command integrate wrote for `agent` (None: not orca's). Exactly that
    shape: a program (whatever it is called: a wrapper given with --orcactl), `hook AGENT
    EVENT`, then nothing or `--socket PATH`. A user's own command that runs orcactl among
    other things (`bash -c 'orcactl hook ...; audit.sh'`) is the user's."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command integrate wrote
        return None
    if len(words) not in (4, 6) or words[1:3] != ["hook", agent] or not words[3].isalpha():
        return None
    if len(words) == 6 and words[4] != "--socket":
        return None
    return words[3]


def _is_ours(command: object, agent: str) -> bool:
    return _hook_event(command, agent) is not None


def _load_json(text: str, path: Path) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = json.loads(
            text,
            parse_float=partial(_finite_number, path),
            parse_constant=partial(_no_constant, path),
        )
    except ValueError as exc:
        raise Unparseable(f"{path} is not valid JSON ({exc})") from None
    except RecursionError:  # Python's reader recurses once per level, to ~1000 levels
        raise Unparseable(
            f"{path} is not JSON orca can read (arrays or objects nested too deeply)"
        ) from None
    if not isinstance(data, dict):
        raise Unparseable(f"{path} does not hold a JSON object")
    return data


def _finite_number(path: Path, literal: str) -> float:
    """A JSON number as a float; one too large for a float (`1e400`) would be written back as
    `Infinity`, which is not JSON: the file is refused instead."""
    value = float(literal)
    if math.isinf(value):
        raise Unparseable(
            f"{path}: the number {literal[:40]} is too large to be written back unchanged"
        )
    return value


def _no_constant(path: Path, literal: str) -> float:
    """NaN, Infinity and -Infinity are Python's extensions, not JSON."""
    raise Unparseable(f"{path} is not valid JSON ({literal} is not a JSON value)")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _dump_json(data: dict[str, Any]) -> str:
    """The JSON text; a lone surrogate (`"\\ud83d"`, which Node writes for a cut emoji) is
    written back as the same escape: it has no UTF-8 encoding of its own."""
    if not data:
        return ""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def edit_hooks(
    text: str, path: Path, agent: str, orcactl: str, socket: str | None = None, *, remove: bool
) -> str:
    """settings.json (Claude Code) or hooks.json (Codex): our hook groups out, then back in,
    each with `--socket` when one is given. Adding leaves orca's hooks on other events (one the
    user added for `StopFailure`, say) alone; removing takes out all of orca's."""
    data = _load_json(text, path)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise Unparseable(f"{path}: `hooks` is not an object")
    events = CLAUDE_HOOKS if agent == "claude-code" else CODEX_HOOKS
    places: dict[str, int] = {}  # where each event's orca group was: it goes back there
    emptied: set[str] = set()
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list) or not (remove or event in events):
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
                "command": hook_command(orcactl, agent, event, socket),
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


def _ours_updated(current: object, owned: dict[str, Any]) -> dict[str, Any]:
    """orca's MCP entry with the keys integrate owns set, and every key the user added to it
    (`env`, `timeout`) kept where it was."""
    kept = current if isinstance(current, dict) else {}
    return {**kept, **owned}


def edit_claude_mcp(
    text: str, path: Path, orcactl: str, socket: str | None, cwd: Path | None, *, remove: bool
) -> str:
    data = _load_json(text, path)
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise Unparseable(f"{path}: `mcpServers` is not an object")
    if remove:
        servers.pop(MCP_NAME, None)
    else:
        servers[MCP_NAME] = _ours_updated(
            servers.get(MCP_NAME), {"type": "stdio", **mcp_server(orcactl, socket, cwd)}
        )
        servers[MCP_NAME].setdefault("env", {})
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


def _meaning(text: str, path: Path) -> dict[str, Any]:
    """What a TOML file says, as the agent's own parser reads it."""
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise Unparseable(f"{path} is not valid TOML ({exc})") from None


def _newline(text: str) -> str:
    """The file's own line ending (its first one), for every line orca adds."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def _lone_newlines(text: str) -> int:
    return text.count("\n") - text.count("\r\n")


def _tidy(text: str, newline: str = "\n") -> str:
    """No trailing blank lines left behind by a removed table."""
    return text.rstrip("\r\n") + newline if text.strip() else ""


def _table(document: Any, key: str, path: Path) -> Any:
    if key not in document:
        document[key] = tomlkit.table()
    table = document[key]
    if not isinstance(table, dict):
        raise Unparseable(f"{path}: `{key}` is not a table")
    return table


def _comparable(value: Any) -> Any:
    """tomllib's data with NaN made equal to itself, so `x = nan` does not read as a change."""
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return value


def _faithful(
    text: str, candidates: Iterable[Callable[[], str]], expected: dict[str, Any]
) -> str | None:
    """The first candidate text that means exactly `expected` (and adds no line ending of another
    kind); None when none does. A candidate that tomlkit cannot even build is skipped: every edit is
    judged by what it means, never trusted for how it was made."""
    newline = _newline(text)
    for candidate in candidates:
        try:
            result = candidate()
            if newline == "\r\n" and not _lone_newlines(text):
                result = re.sub(r"(?<!\r)\n", "\r\n", result)  # what tomlkit added
            meaning = tomllib.loads(result)
        except Exception:  # noqa: S112 - tomlkit raises ValueError, KeyError, its own errors
            continue
        if _comparable(meaning) != _comparable(expected):
            continue
        if newline == "\r\n" and _lone_newlines(result) != _lone_newlines(text):
            continue
        return result
    return None


def _append(text: str, block: list[str], newline: str) -> str:
    """A block of lines at the end of the file, after a blank line."""
    if text.strip():
        text = text if text.endswith("\n") else text + newline
        text += newline
    else:
        text = ""
    return text + "".join(line + newline for line in block)


def _insert_after(text: str, index: int, line: str, newline: str) -> str:
    """`line` after the file's line `index` (-1: as its first line)."""
    lines = text.splitlines(keepends=True)
    if index >= 0 and not lines[index].endswith("\n"):
        lines[index] += newline
    lines.insert(index + 1, line + newline)
    return "".join(lines)


def _table_of(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise Unparseable(f"{path}: `{key}` is not a table")
    return table


def _without_server(text: str, path: Path) -> str:
    """config.toml without orca's MCP server, everything else meaning what it meant."""
    data = _meaning(text, path)
    servers = _table_of(data, "mcp_servers", path)
    if MCP_NAME not in servers:
        return text
    expected = copy.deepcopy(data)
    del expected["mcp_servers"][MCP_NAME]
    if not expected["mcp_servers"]:
        del expected["mcp_servers"]

    def by_tomlkit(drop_empty: bool) -> str:
        document = tomlkit.parse(text)
        table = document["mcp_servers"]
        del table[MCP_NAME]
        if drop_empty and not table:
            del document["mcp_servers"]
        return _tidy(document.as_string(), _newline(text))

    kept = copy.deepcopy(expected)
    kept.setdefault("mcp_servers", {})
    result = _faithful(text, [lambda: by_tomlkit(True)], expected)
    if result is None:
        result = _faithful(text, [lambda: by_tomlkit(False)], kept)
    if result is None:
        raise Unparseable(
            f"{path}: orca's `mcp_servers.{MCP_NAME}` cannot be taken out without changing what "
            "the rest of the file means; take it out by hand"
        )
    return result


_FEATURES_HEADER = re.compile(r"[ \t]*\[[ \t]*features[ \t]*\][ \t]*(#.*)?\r?\n?")
_FEATURES_DOTTED = re.compile(r"[ \t]*features[ \t]*\.")


def edit_codex_config(
    text: str, path: Path, orcactl: str, socket: str | None, cwd: Path | None, *, remove: bool
) -> str:
    """config.toml: [mcp_servers.orca], and [features] codex_hooks = true for the hooks.

    Every edit is checked against what the file means to a TOML parser: each of the user's keys
    keeps its value and its table (a `[table]` header added after dotted keys would capture the
    keys below it), or the file is refused, unchanged. Lines orca adds use the file's own line
    ending."""
    _load_toml(text, path)
    data = _meaning(text, path)
    servers = _table_of(data, "mcp_servers", path)
    features = _table_of(data, "features", path)
    if remove:
        return _without_server(text, path)
    owned = mcp_server(orcactl, socket, cwd)
    wanted = _ours_updated(servers.get(MCP_NAME), owned)
    if servers.get(MCP_NAME) == wanted and features.get("codex_hooks") is True:
        return text  # already there: not a byte changes
    newline = _newline(text)
    added = _server_updated_in_place(text, data, owned, wanted)
    if added is None:
        added = _server_added(text, path, wanted, newline)
    return _with_hooks_flag(added, data, features, path, newline)


def _server_updated_in_place(
    text: str, data: dict[str, Any], owned: dict[str, Any], wanted: dict[str, Any]
) -> str | None:
    """orca's existing server table with only the keys integrate owns set (the user's `env`
    table, `timeout` and comments stay); None when there is none, or that changes a meaning."""
    if not isinstance(data.get("mcp_servers", {}).get(MCP_NAME), dict):
        return None
    expected = copy.deepcopy(data)
    expected["mcp_servers"][MCP_NAME] = wanted

    def set_owned_keys() -> str:
        document = tomlkit.parse(text)
        server = document["mcp_servers"][MCP_NAME]
        for key, value in owned.items():
            server[key] = value
        return document.as_string()

    return _faithful(text, [set_owned_keys], expected)


def _server_added(text: str, path: Path, wanted: dict[str, Any], newline: str) -> str:
    """config.toml with orca's server taken out (if there) and `wanted` added as a table."""
    text = _without_server(text, path)
    data = tomllib.loads(text)
    expected = copy.deepcopy(data)
    expected.setdefault("mcp_servers", {})[MCP_NAME] = wanted

    def server_table() -> str:
        values = [f"{key} = {tomlkit.item(value).as_string()}" for key, value in wanted.items()]
        return _append(text, [f"[mcp_servers.{MCP_NAME}]", *values], newline)

    def inline_server() -> str:
        document = tomlkit.parse(text)
        server = tomlkit.inline_table()
        server.update(wanted)
        document["mcp_servers"][MCP_NAME] = server
        return document.as_string()

    added = _faithful(
        text,
        [server_table, inline_server],
        expected,
    )
    if added is None:
        raise Unparseable(
            f"{path}: orca's MCP server cannot be added without changing what the rest of the "
            f"file means; add `[mcp_servers.{MCP_NAME}]` by hand"
        )
    return added


def _with_hooks_flag(
    text: str, data: dict[str, Any], features: dict[str, Any], path: Path, newline: str
) -> str:
    """`features.codex_hooks = true` added where it keeps every other key's meaning."""
    if features.get("codex_hooks") is True:
        return text
    expected = tomllib.loads(text)
    expected.setdefault("features", {})["codex_hooks"] = True  # hooks are behind this flag
    lines = text.splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if _FEATURES_HEADER.fullmatch(line)]
    dotted = [i for i, line in enumerate(lines) if _FEATURES_DOTTED.match(line)]

    def by_tomlkit() -> str:
        document = tomlkit.parse(text)
        if "features" not in document:
            document["features"] = tomlkit.table()
        document["features"]["codex_hooks"] = True
        return document.as_string()

    candidates: list[Callable[[], str]] = []
    if "features" not in data:
        candidates.append(lambda: _append(text, ["[features]", "codex_hooks = true"], newline))
    candidates += [partial(_insert_after, text, i, "codex_hooks = true", newline) for i in headers]
    candidates += [
        partial(_insert_after, text, i, "features.codex_hooks = true", newline)
        for i in reversed(dotted)
    ]
    candidates += [
        lambda: _append(text, ["[features]", "codex_hooks = true"], newline),
        by_tomlkit,
        lambda: _insert_after(text, -1, "features.codex_hooks = true", newline),
    ]
    result = _faithful(text, candidates, expected)
    if result is None:
        raise Unparseable(
            f"{path}: `features.codex_hooks = true` cannot be added without changing what the "
            "rest of the file means; add it by hand"
        )
    return result


def edit_orca_config(text: str, path: Path, agent: str, *, remove: bool) -> str:
    """orca's config.toml: the agent's own CLI as the `command` extraction provider (each edit
    checked against what the file means, as in edit_codex_config)."""
    _load_toml(text, path)
    data = _meaning(text, path)
    argv = EXTRACTOR_ARGV[agent]
    extraction = _table_of(data, "extraction", path)
    command = extraction.get("command")
    ours = isinstance(command, dict) and list(command.get("argv", [])) in [
        argv,
        *OLDER_EXTRACTOR_ARGV[agent],
    ]
    expected = copy.deepcopy(data)
    if remove:
        if not ours:
            return text
        table = expected["extraction"]
        del table["command"]
        if table.get("provider") == "command":
            del table["provider"]
        if not table:
            del expected["extraction"]

        def taken_out() -> str:
            document = tomlkit.parse(text)
            table = document["extraction"]
            del table["command"]
            if table.get("provider") == "command":
                del table["provider"]
            if not table:
                del document["extraction"]
            return _tidy(document.as_string(), _newline(text))

        candidates = [taken_out]
    else:
        if extraction.get("provider") == "command" and command == {"argv": argv}:
            return text  # already there: not a byte changes
        table = expected.setdefault("extraction", {})
        table["provider"] = "command"
        table["command"] = {"argv": argv}
        newline = _newline(text)
        block = [
            "[extraction]",
            'provider = "command"',
            "",
            "[extraction.command]",
            f"argv = {tomlkit.item(argv).as_string()}",
        ]

        def put_in(inline: bool) -> str:
            document = tomlkit.parse(text)
            table = _table(document, "extraction", path)
            table["provider"] = "command"
            command = tomlkit.inline_table() if inline else tomlkit.table()
            command["argv"] = argv
            table["command"] = command
            return document.as_string()

        candidates = [lambda: put_in(False), lambda: put_in(True)]
        if "extraction" not in data:
            candidates.insert(0, lambda: _append(text, block, newline))
    result = _faithful(text, candidates, expected)
    if result is None:
        raise Unparseable(
            f"{path}: the `[extraction]` settings cannot be "
            f"{'taken out' if remove else 'written'} without changing what the rest of the "
            "file means; edit them by hand"
        )
    return result


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


def registered_programs(text: str, path: Path, kind: str, agent: str) -> list[str]:
    """The programs orca's entries in a file run (for orcactl doctor, which checks each is
    there: an orcactl since removed leaves the agent with hooks that all fail)."""
    if kind in ("claude-hooks", "codex-hooks"):
        hooks = _load_json(text, path).get("hooks")
        commands = [
            handler.get("command")
            for groups in (hooks.values() if isinstance(hooks, dict) else [])
            if isinstance(groups, list)
            for group in groups
            if isinstance(group, dict) and isinstance(group.get("hooks"), list)
            for handler in group["hooks"]
            if isinstance(handler, dict)
        ]
        ours = [shlex.split(command) for command in commands if _is_ours(command, agent)]
        return [words[0] for words in ours if words]
    if kind == "claude-mcp":
        servers = _load_json(text, path).get("mcpServers")
    else:
        servers = _meaning(text, path).get("mcp_servers")
    server = servers.get(MCP_NAME) if isinstance(servers, dict) else None
    command = server.get("command") if isinstance(server, dict) else None
    return [command] if isinstance(command, str) and command else []


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
            if not any(_hook_event(command, agent) == event for command in commands):
                missing.append(f"{event} hook")
        return missing
    if kind == "claude-mcp":
        servers = _load_json(text, path).get("mcpServers")
        return [] if isinstance(servers, dict) and MCP_NAME in servers else ["MCP server"]
    data = _meaning(text, path)
    servers, features = data.get("mcp_servers"), data.get("features")
    missing = [] if isinstance(servers, dict) and MCP_NAME in servers else ["MCP server"]
    if not (isinstance(features, dict) and features.get("codex_hooks") is True):
        missing.append(CODEX_HOOKS_FLAG)  # Codex runs no hook without it
    return missing
