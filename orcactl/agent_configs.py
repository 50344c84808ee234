"""What `orcactl integrate` writes into each agent's own configuration files, as pure edits:
the text of a file in, its new text out. No file access here (orcactl.integrate does that);
the TOML files' edits are in orcactl.toml_edits.

An entry is orca's when its command is one integrate writes (`<orcactl> hook <agent> <event>`,
perhaps with `--socket PATH`, `--home DIR`, `--config-dir DIR`) or its MCP server is named
`orca`; everything else in a file is kept as it is (TOML comments included, through tomlkit).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, NamedTuple

AGENTS = ("claude-code", "codex")
MCP_NAME = "orca"
# Seconds each hook may run (the agents' `timeout`); the hook keeps within them itself.
CLAUDE_HOOKS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 30, "SessionEnd": 10}
# (Codex gives SessionEnd at most 3 s)
CODEX_HOOKS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 30, "SessionEnd": 3}
# Codex's switch for hooks: `hooks` (on by default since it was renamed from `codex_hooks`,
# which still works and is warned about on every run); either set to false turns them off
CODEX_HOOKS_FEATURE = "hooks"
CODEX_OLD_HOOKS_FEATURE = "codex_hooks"
CODEX_HOOKS_FLAG = f"features.{CODEX_HOOKS_FEATURE} = true"
CODEX_DEFAULT_TIMEOUT_S = 600  # what Codex gives a hook that sets none
# how Codex reads a definition before it hashes it (codex-cli 0.171, tests/recorded/): these
# events take no matcher, and these have their timeout capped
_CODEX_MATCHERLESS = frozenset({"user_prompt_submit", "stop"})
_CODEX_TIMEOUT_CAPS = {"session_end": 3}
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


class Refused(Unparseable):
    """A file that parses, but whose change orca will not make: its message says what to do
    instead (set a key yourself, edit by hand, leave out an option), not to move the file."""


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


@dataclass(frozen=True)
class Pinned:
    """Where the agent's hooks and MCP server find orcad, written into both (absolute), since
    the agents start them with their own environment: the socket, and the home and
    configuration directory an orcad they start must use (else an orcad started by a hook
    would serve the default memory on that socket)."""

    socket: str | None = None
    home: str | None = None
    config_dir: str | None = None

    def options(self) -> list[str]:
        given = (
            ("--socket", self.socket),
            ("--home", self.home),
            ("--config-dir", self.config_dir),
        )
        return [word for option, value in given if value for word in (option, value)]


# the options a command integrate wrote may end with, each once (Pinned.options)
PINNED_OPTIONS = frozenset({"--socket", "--home", "--config-dir"})


def hook_command(orcactl: str, agent: str, event: str, pinned: Pinned | None = None) -> str:
    options = (pinned or Pinned()).options()
    return shlex.join([orcactl, "hook", agent, event, *options])


def _hook_event(command: object, agent: str) -> str | None:
    """The event of a command integrate wrote for `agent` (None: not orca's). Exactly that
    shape: a program (whatever it is called: a wrapper given with --orcactl), `hook AGENT
    EVENT`, then nothing or `--socket PATH`, `--home DIR`, `--config-dir DIR` (or
    `--home=DIR`), each once. A user's own command that runs orcactl among other things
    (`bash -c 'orcactl hook ...; audit.sh'`) is the user's."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:  # unbalanced quotes: not a command integrate wrote
        return None
    if len(words) < 4 or words[1:3] != ["hook", agent] or not words[3].isalpha():
        return None
    return words[3] if _pinned_options(words[4:]) else None


def _pinned_options(words: list[str]) -> bool:
    """Whether `words` are pinned options alone, each once, as `--home DIR` or `--home=DIR`."""
    seen: set[str] = set()
    rest = iter(words)
    for word in rest:
        name, equals, _value = word.partition("=")
        if name not in PINNED_OPTIONS or name in seen or (not equals and next(rest, None) is None):
            return False
        seen.add(name)
    return True


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
            object_pairs_hook=partial(_unique_keys, path),
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


def _unique_keys(path: Path, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once. Given twice, a reader keeps one of the
    two (Python the last, the agent maybe another), and writing the file back would drop the
    other for good: the file is refused, as TOML with a key given twice is."""
    seen: set[str] = set()
    for key, _value in pairs:
        if key in seen:
            raise Unparseable(
                f"{path} gives the key {json.dumps(key)[:80]} twice in one object; keep one "
                "(nothing was changed)"
            )
        seen.add(key)
    return dict(pairs)


def _no_constant(path: Path, literal: str) -> float:
    """NaN, Infinity and -Infinity are Python's extensions, not JSON."""
    raise Unparseable(f"{path} is not valid JSON ({literal} is not a JSON value)")


_SURROGATE = re.compile("[\ud800-\udfff]")


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


class _Layout(NamedTuple):
    indent: str | None  # None: all on one line
    separators: tuple[str, str]
    newline: str  # "\n", or "\r\n" for a file written with CRLF line ends
    ending: str  # what follows the last brace: a newline or nothing
    ascii_only: bool  # characters beyond ASCII written as \u escapes


def _layout(text: str) -> _Layout:
    """How a JSON file is laid out, to be written back the same way: its indent (None for one
    line), its separators when on one line, its line ends and its ending, and whether it
    writes characters beyond ASCII as escapes. A new file gets two spaces and a newline, as the
    agents write theirs."""
    bare = _JSON_STRING.sub('""', text.strip())  # no string's content can mislead
    newline = "\r\n" if "\r\n" in text else "\n"
    ascii_only = text.isascii() and "\\u" in text
    if re.fullmatch(r"(\{\s*\})?", bare):
        return _Layout("  ", (",", ": "), newline, newline, ascii_only)
    ending = newline if text.endswith("\n") else ""
    lines = bare.splitlines()
    indents = [line[: len(line) - len(line.lstrip())] for line in lines[1:]]
    indent = next((unit for unit in indents if unit), "" if len(lines) > 1 else None)
    if indent is not None:  # "": over several lines, none indented
        return _Layout(indent, (",", ": "), newline, ending, ascii_only)
    keys = ": " if re.search(r":\s", bare) or ":" not in bare else ":"
    spaced = re.search(r",\s", bare) if "," in bare else keys == ": "
    return _Layout(None, (", " if spaced else ",", keys), newline, ending, ascii_only)


def _dump_json(data: dict[str, Any], like: str) -> str:
    """The JSON text, laid out as `like` (the file as it was) is; a lone surrogate
    (`"\\ud83d"`, which Node writes for a cut emoji) is written back as the same escape: it
    has no UTF-8 encoding of its own."""
    if not data:
        return ""
    layout = _layout(like)
    text = json.dumps(
        data,
        indent=layout.indent,
        separators=layout.separators,
        ensure_ascii=layout.ascii_only,
    )
    text = _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return text.replace("\n", layout.newline) + layout.ending


def edit_hooks(
    text: str, path: Path, agent: str, orcactl: str, pinned: Pinned | None = None, *, remove: bool
) -> str:
    """settings.json (Claude Code) or hooks.json (Codex): our hook groups out, then back in,
    each with the `pinned` options. Adding leaves orca's hooks on other events (one the
    user added for `StopFailure`, say) alone; removing takes out all of orca's."""
    data = _load_json(text, path)
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise Unparseable(f"{path}: `hooks` is not an object")
    events = CLAUDE_HOOKS if agent == "claude-code" else CODEX_HOOKS
    places: dict[str, int] = {}  # where each event's orca group was: it goes back there
    settings: dict[str, dict[str, Any]] = {}  # and what the user set on it (a `matcher`)
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
                    settings.setdefault(event, {k: v for k, v in group.items() if k != "hooks"})
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
                "command": hook_command(orcactl, agent, event, pinned),
                "timeout": timeout,
            }
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise Unparseable(f"{path}: `hooks.{event}` is not a list")
            group = {**settings.get(event, {}), "hooks": [handler]}
            groups.insert(places.get(event, len(groups)), group)
    for event in emptied:
        if not hooks[event]:
            del hooks[event]
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    return _dump_json(data, text)


class CodexHook(NamedTuple):
    key: str  # `<hooks.json path>:<event>:<group>:<handler>`, where Codex records trust
    digest: str  # `sha256:<hex>`: the hash of the hook's definition Codex trusts
    ours: bool


def codex_hooks(text: str, path: Path) -> list[CodexHook]:
    """Every command hook in Codex's hooks.json `text` at `path`, with where Codex records the
    trust it needs to run it and the hash of its definition, as Codex computes them (sha256 of
    the compact JSON, keys sorted, of the event, the group's matcher if the event takes one,
    and the handler with Codex's defaults filled in). Codex skips a hook whose hash is not
    recorded there, saying nothing."""
    hooks = _load_json(text, path).get("hooks")
    # Codex names the file by its home's real path (a symlinked ~/.codex resolved)
    listed = os.path.join(os.path.realpath(path.parent), path.name)
    found: list[CodexHook] = []
    for event, groups in (hooks if isinstance(hooks, dict) else {}).items():
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(event)).lower()
        for group_index, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for index, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if not (isinstance(handler, dict) and handler.get("type") == "command"):
                    continue
                command = handler.get("command")
                timeout = handler.get("timeout", CODEX_DEFAULT_TIMEOUT_S)
                if snake in _CODEX_TIMEOUT_CAPS and isinstance(timeout, int):
                    timeout = min(timeout, _CODEX_TIMEOUT_CAPS[snake])
                identity: dict[str, Any] = {
                    "event_name": snake,
                    "hooks": [
                        {
                            "async": handler.get("async", False),
                            "command": command,
                            "timeout": timeout,
                            "type": "command",
                        }
                    ],
                }
                if group.get("matcher") is not None and snake not in _CODEX_MATCHERLESS:
                    identity["matcher"] = group["matcher"]
                canonical = json.dumps(
                    identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False
                )
                digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
                key = f"{listed}:{snake}:{group_index}:{index}"
                found.append(CodexHook(key, f"sha256:{digest}", _is_ours(command, "codex")))
    return found


def codex_trust(text: str, path: Path) -> dict[str, str]:
    """Where Codex records trust in each of orca's hooks in hooks.json, and its hash."""
    return {hook.key: hook.digest for hook in codex_hooks(text, path) if hook.ours}


def codex_moves(before: str, after: str, path: Path) -> dict[str, str]:
    """The user's hooks that an edit of orca's moved: old key to new (Codex records trust by a
    hook's place), told by their definitions."""
    old = [hook for hook in codex_hooks(before, path) if not hook.ours]
    new = [hook for hook in codex_hooks(after, path) if not hook.ours]
    moves: dict[str, str] = {}
    # the edit keeps the user's hooks in their order: hooks of one definition pair up by it
    for digest in dict.fromkeys(hook.digest for hook in new):
        was = [hook.key for hook in old if hook.digest == digest]
        now = [hook.key for hook in new if hook.digest == digest]
        if len(was) == len(now):
            moves.update((a, b) for a, b in zip(was, now, strict=True) if a != b)
    return moves


def mcp_server(orcactl: str, pinned: Pinned | None, cwd: Path | None) -> dict[str, Any]:
    args = ["mcp"]
    if cwd is not None:
        args += ["--cwd", str(cwd)]
    args += (pinned or Pinned()).options()
    return {"command": orcactl, "args": args}


def updated_mcp_entry(current: object, owned: dict[str, Any]) -> dict[str, Any]:
    """orca's MCP entry with the keys integrate owns set, and every key the user added to it
    (`env`, `timeout`) kept where it was."""
    kept = current if isinstance(current, dict) else {}
    return {**kept, **owned}


def edit_claude_mcp(
    text: str, path: Path, orcactl: str, pinned: Pinned | None, cwd: Path | None, *, remove: bool
) -> str:
    data = _load_json(text, path)
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise Unparseable(f"{path}: `mcpServers` is not an object")
    if remove:
        servers.pop(MCP_NAME, None)
    else:
        servers[MCP_NAME] = updated_mcp_entry(
            servers.get(MCP_NAME), {"type": "stdio", **mcp_server(orcactl, pinned, cwd)}
        )
        servers[MCP_NAME].setdefault("env", {})
    if servers:
        data["mcpServers"] = servers
    else:
        data.pop("mcpServers", None)
    return _dump_json(data, text)


def toml_meaning(text: str, path: Path) -> dict[str, Any]:
    """What a TOML file says, as the agent's own parser reads it: a new dict, the caller's to
    change."""
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise Unparseable(f"{path} is not valid TOML ({exc})") from None
    except RecursionError:
        raise Unparseable(f"{path} nests arrays or tables too deep to read") from None


@lru_cache(maxsize=4)
def _parsed_once(text: str) -> dict[str, Any]:
    return tomllib.loads(text)


def toml_read(text: str, path: Path) -> dict[str, Any]:
    """toml_meaning for a caller that only reads it: a text is parsed once per process, and
    the same dict is given to every such caller, so none may change it. tomllib is pure Python
    (a third of a second of CPU for a Codex config.toml trusting 30,000 projects), and doctor
    reads the user's config.toml for several findings."""
    try:
        return _parsed_once(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise Unparseable(f"{path} is not valid TOML ({exc})") from None
    except RecursionError:
        raise Unparseable(f"{path} nests arrays or tables too deep to read") from None


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


def registered_commands(text: str, path: Path, kind: str, agent: str) -> list[list[str]]:
    """The command line of each of orca's entries in a file, as words: each hook's, and the MCP
    server's program and arguments."""
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
        return [shlex.split(command) for command in commands if _is_ours(command, agent)]
    if kind == "claude-mcp":
        servers = _load_json(text, path).get("mcpServers")
    else:
        servers = toml_read(text, path).get("mcp_servers")
    server = servers.get(MCP_NAME) if isinstance(servers, dict) else None
    command = server.get("command") if isinstance(server, dict) else None
    if not isinstance(command, str) or not command:
        return []
    args = server.get("args") if isinstance(server, dict) else None
    words = [word for word in args if isinstance(word, str)] if isinstance(args, list) else []
    return [[command, *words]]


def pinned_value(words: list[str], option: str) -> str | None:
    """The value a command line gives `option` (`--home DIR` or `--home=DIR`), if any."""
    for index, word in enumerate(words):
        if word == option and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(option + "="):
            return word.partition("=")[2]
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
            if not any(_hook_event(command, agent) == event for command in commands):
                missing.append(f"{event} hook")
        return missing
    if kind == "claude-mcp":
        servers = _load_json(text, path).get("mcpServers")
        return [] if isinstance(servers, dict) and MCP_NAME in servers else ["MCP server"]
    data = toml_read(text, path)
    servers = data.get("mcp_servers")
    missing = [] if isinstance(servers, dict) and MCP_NAME in servers else ["MCP server"]
    if not codex_hooks_on(codex_features(text, path)):
        missing.append(CODEX_HOOKS_FLAG)  # older Codex runs no hook without it
    return missing


def codex_features(text: str, path: Path) -> dict[str, Any]:
    """A Codex config.toml's `[features]` table (empty when it has none)."""
    features = toml_read(text, path).get("features")
    return features if isinstance(features, dict) else {}


def codex_hooks_on(features: dict[str, Any]) -> bool:
    """Whether a `[features]` table sets Codex's hooks switch, under either of its names."""
    return True in (features.get(CODEX_HOOKS_FEATURE), features.get(CODEX_OLD_HOOKS_FEATURE))
