"""orca's edits of TOML configuration files (Codex's config.toml, orca's own config.toml), as
pure edits: each new text is read back with tomllib and compared with what the file should mean,
so every one of the user's keys keeps its value and its table, and comments stay (tomlkit).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from functools import partial
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from orcactl.agent_configs import (
    CODEX_HOOKS_FEATURE,
    CODEX_HOOKS_FLAG,
    CODEX_OLD_HOOKS_FEATURE,
    EXTRACTOR_ARGV,
    MCP_NAME,
    OLDER_EXTRACTOR_ARGV,
    Pinned,
    Refused,
    Unparseable,
    mcp_server,
    toml_meaning,
    toml_read,
    updated_mcp_entry,
)


def _load_toml(text: str, path: Path) -> tomlkit.TOMLDocument:
    """The file as tomlkit edits it. A file no TOML parser reads is named with tomllib's
    message, as orcad and `orcactl doctor` name it: tomlkit reports the end of a file cut short
    as "Unexpected character: '\\x00'" at a line and column where there is none."""
    toml_meaning(text, path)  # raises Unparseable, with tomllib's message
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
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
            meaning = toml_read(result, Path("<candidate>"))  # read again by the next edit
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
    data = toml_read(text, path)
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
        raise Refused(
            f"{path}: orca's `mcp_servers.{MCP_NAME}` cannot be taken out without changing what "
            "the rest of the file means; take it out by hand"
        )
    return result


_FEATURES_HEADER = re.compile(r"[ \t]*\[[ \t]*features[ \t]*\][ \t]*(#.*)?\r?\n?")
_FEATURES_DOTTED = re.compile(r"[ \t]*features[ \t]*\.")


def edit_codex_config(
    text: str,
    path: Path,
    orcactl: str,
    pinned: Pinned | None,
    cwd: Path | None,
    *,
    remove: bool,
    trust: Mapping[str, str] | None = None,
    previous: Mapping[str, str] | None = None,
    moves: Mapping[str, str] | None = None,
    take_back: bool = True,
) -> str:
    """config.toml: [mcp_servers.orca], [features] hooks = true, and the trust Codex needs to
    run orca's hooks: `[hooks.state."<key>"] trusted_hash` for each of `trust` (set), none for
    orca's hooks that were there before (`previous`) and are gone (with `take_back`), and the
    user's hooks' trust moved with them (`moves`).

    Every edit is checked against what the file means to a TOML parser: each of the user's keys
    keeps its value and its table (a `[table]` header added after dotted keys would capture the
    keys below it), or the file is refused, unchanged. Lines orca adds use the file's own line
    ending."""
    try:
        return _edit_codex_config(
            text,
            path,
            orcactl,
            pinned,
            cwd,
            remove=remove,
            trust=trust,
            previous=previous,
            moves=moves,
            take_back=take_back,
        )
    except Refused:
        # an edit that needed tomlkit, on a file tomlkit cannot read: named as not valid TOML.
        # Only then is the whole file parsed by tomlkit (seconds for a config.toml that trusts
        # tens of thousands of projects); edits made line by line do not need it
        _load_toml(text, path)
        raise


def _edit_codex_config(
    text: str,
    path: Path,
    orcactl: str,
    pinned: Pinned | None,
    cwd: Path | None,
    *,
    remove: bool,
    trust: Mapping[str, str] | None,
    previous: Mapping[str, str] | None,
    moves: Mapping[str, str] | None,
    take_back: bool,
) -> str:
    data = toml_read(text, path)
    servers = _table_of(data, "mcp_servers", path)
    features = _table_of(data, "features", path)
    if remove:
        return _with_trust(
            _without_server(text, path), path, {}, previous or {}, moves, take_back=take_back
        )
    for name in (CODEX_HOOKS_FEATURE, CODEX_OLD_HOOKS_FEATURE):
        if features.get(name) is False:
            # the user turned Codex's hooks off: turning them on runs every hook they configured
            raise Refused(
                f"{path} sets `[features] {name} = false`, so Codex runs no hooks, orca's "
                "included; turning it on would run every other hook configured too. Set it to "
                "true yourself (or remove the line) and run integrate again"
            )
    owned = mcp_server(orcactl, pinned, cwd)
    wanted = updated_mcp_entry(servers.get(MCP_NAME), owned)
    newline = _newline(text)
    added = text  # orca's server already there: not a byte of it changes
    if servers.get(MCP_NAME) != wanted:
        in_place = _server_updated_in_place(text, data, owned, wanted)
        added = _server_added(text, path, wanted, newline) if in_place is None else in_place
    flagged = _with_hooks_flag(added, features, path, newline)
    return _with_trust(flagged, path, trust or {}, previous or {}, moves, take_back=take_back)


def _with_trust(
    text: str,
    path: Path,
    trust: Mapping[str, str],
    previous: Mapping[str, str],
    moves: Mapping[str, str] | None = None,
    *,
    take_back: bool = True,
) -> str:
    """`[hooks.state."<key>"] trusted_hash = "<hash>"` for each of `trust`; with `take_back`,
    the trust in orca's hooks that were there before (`previous`) and are not given again taken
    out; and the trust of each of the user's hooks that orca's edit moved (`moves`, old key to
    new: Codex keys it by the hook's place) moved with it, over orca's earlier trust there if
    need be. A table that held orca's trust keeps the other keys the user set in it (`enabled =
    false`); one left at that place by another hook is replaced whole. A table is taken out, or
    renamed, as its lines, so the comments around it stay; tomlkit does it when the lines are
    not as orca writes them."""
    moves = moves or {}
    data = toml_read(text, path)
    hooks = data.get("hooks", {})
    state = hooks.get("state", {}) if isinstance(hooks, dict) else None
    if not isinstance(hooks, dict) or not isinstance(state, dict):
        raise Unparseable(f"{path}: `hooks` or `hooks.state` is not a table")
    touched = [*trust, *previous, *moves, *moves.values()]
    if any(key in state and not isinstance(state[key], dict) for key in touched):
        raise Unparseable(f"{path}: an entry of `hooks.state` that orca's hooks use is not a table")
    # a move may take the place of orca's earlier trust, or of another moved hook's
    moves = {
        old: new
        for old, new in moves.items()
        if old in state and (new not in state or new in previous or new in moves)
    }
    replaced = [new for new in moves.values() if new in state and new not in moves]
    untrust = previous if take_back else {}
    gone = [
        key
        for key in untrust
        if key in state and key not in trust and key not in moves and key not in replaced
    ]
    gone += replaced
    # orca's trust at a place another hook's table holds: that table goes, and a new one comes
    foreign = [
        key
        for key, digest in trust.items()
        if key in state
        and key not in moves
        and state[key].get("trusted_hash") not in (digest, previous.get(key))
    ]
    gone += foreign
    changed = {
        key: digest
        for key, digest in trust.items()
        if key in foreign or state.get(key, {}).get("trusted_hash") != digest
    }
    if not gone and not changed and not moves:
        return text
    expected = copy.deepcopy(data)
    table = expected.setdefault("hooks", {}).setdefault("state", {})
    for key in gone:
        del table[key]
    table.update({new: table.pop(old) for old, new in moves.items()})
    for key, digest in changed.items():
        table.setdefault(key, {})["trusted_hash"] = digest
    # tables left empty go, unless the file names them with a header of their own
    keep_state = _header_of("hooks.state").search(text) is not None
    keep_hooks = keep_state or _header_of("hooks").search(text) is not None
    if not table and not keep_state:
        del expected["hooks"]["state"]
    if not expected["hooks"] and not keep_hooks:
        del expected["hooks"]

    def by_lines() -> str:
        edited = text
        for key in gone:
            edited = _TRUST_TABLE.sub("", edited.replace(_state_header(key), _GONE, 1), count=1)
        marks = [f"\x00orca-move-{index}\x00" for index in range(len(moves))]
        for mark, old in zip(marks, moves, strict=True):  # (a chain of moves: a to b, b to c)
            edited = edited.replace(_state_header(old), mark, 1)
        for mark, new in zip(marks, moves.values(), strict=True):
            edited = edited.replace(mark, _state_header(new), 1)
        if "hooks" not in data and edited == text and (appended := _trust_appended(text, changed)):
            return appended  # a file without trust: the tables added at its end
        return _with_changed_trust(edited, changed)

    def by_tomlkit() -> str:
        document = tomlkit.parse(text)
        states = _state_table(document)
        for key in gone:
            del states[key]
        moved = {new: states[old] for old, new in moves.items()}
        for old in moves:
            del states[old]
        for new, entry in moved.items():
            states[new] = entry
        if not states and not keep_state:
            del document["hooks"]["state"]
        if not document["hooks"] and not keep_hooks:
            del document["hooks"]
        return _with_changed_trust(document.as_string(), changed)

    result = _faithful(text, [by_lines, by_tomlkit], expected)
    if result is None:
        raise Refused(
            f"{path}: the trust Codex needs to run orca's hooks cannot be recorded without "
            "changing what the rest of the file means; trust them in Codex (/hooks)"
        )
    return result


# A trust table as orca writes it, marked for removal: its header and its one line
_GONE = "\x00orca-gone\x00"
_TRUST_TABLE = re.compile(
    r"(?m)(?:^[ \t]*\r?\n)?"  # and the blank line tomlkit wrote before it
    + re.escape(_GONE)
    + r"\r?\n[ \t]*trusted_hash[ \t]*=[ \t]*\"[^\"\n]*\"[ \t]*(?:\r?\n|\Z)"
)


def _header_of(name: str) -> re.Pattern[str]:
    """A `[name]` header line (dotted parts spaced or not)."""
    parts = r"[ \t]*\.[ \t]*".join(re.escape(part) for part in name.split("."))
    return re.compile(rf"(?m)^[ \t]*\[[ \t]*{parts}[ \t]*\][ \t]*(?:#.*)?\r?$")


def _state_header(key: str) -> str:
    """The header tomlkit writes for `hooks.state.<key>`, as orca wrote it."""
    return tomlkit.dumps({"hooks": {"state": {key: {}}}}).strip()


def _state_table(document: tomlkit.TOMLDocument) -> Any:
    """The document's `hooks.state` table, made (as tables of dotted headers alone) if need be."""
    if "hooks" not in document:
        document["hooks"] = tomlkit.table(is_super_table=True)
    if "state" not in document["hooks"]:
        document["hooks"]["state"] = tomlkit.table(is_super_table=True)
    return document["hooks"]["state"]


_ARRAY_OF_TABLES = re.compile(r"(?m)^[ \t]*\[\[")


def _trust_appended(text: str, changed: Mapping[str, str]) -> str | None:
    """`text`, a file without `hooks`, with a trust table for each of `changed` added at its end,
    byte for byte as _with_changed_trust adds them (tomlkit), without parsing the whole file
    again (tomlkit takes seconds for a config.toml that trusts tens of thousands of projects):
    after a blank line unless the file is empty or its last line is blank already, and a blank
    line between two tables. None for a file whose last line has no line end, or that has an
    array of tables (left to tomlkit, which lays those out in ways of its own)."""
    if (text and not text.endswith("\n")) or _ARRAY_OF_TABLES.search(text):
        return None
    last = text[:-1].rpartition("\n")[2]  # the file's last line, without its line end
    lead = "" if not text or not last.strip(" \t\r") else "\n"
    tables = [
        f"{_state_header(key)}\ntrusted_hash = {tomlkit.item(digest).as_string()}\n"
        for key, digest in changed.items()
    ]
    return text + lead + "\n".join(tables)


def _with_changed_trust(text: str, changed: Mapping[str, str]) -> str:
    """`text` with each of `changed` given its trusted_hash (a table set in place, or added)."""
    if not changed:
        return text
    document = tomlkit.parse(text)
    states = _state_table(document)
    for key, digest in changed.items():
        if key in states:
            states[key]["trusted_hash"] = digest
        else:
            entry = tomlkit.table()
            entry["trusted_hash"] = digest
            states[key] = entry
    return document.as_string()


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
    data = toml_read(text, path)
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
        raise Refused(
            f"{path}: orca's MCP server cannot be added without changing what the rest of the "
            f"file means; add `[mcp_servers.{MCP_NAME}]` by hand"
        )
    return added


def _with_hooks_flag(text: str, features: dict[str, Any], path: Path, newline: str) -> str:
    """`features.hooks = true` added where it keeps every other key's meaning (an older Codex
    runs no hook without it; `codex_hooks = true`, its old name, is as good)."""
    if True in (features.get(CODEX_HOOKS_FEATURE), features.get(CODEX_OLD_HOOKS_FEATURE)):
        return text
    data = toml_read(text, path)
    expected = copy.deepcopy(data)
    expected.setdefault("features", {})[CODEX_HOOKS_FEATURE] = True
    lines = text.splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if _FEATURES_HEADER.fullmatch(line)]
    dotted = [i for i, line in enumerate(lines) if _FEATURES_DOTTED.match(line)]

    def by_tomlkit() -> str:
        document = tomlkit.parse(text)
        if "features" not in document:
            document["features"] = tomlkit.table()
        document["features"][CODEX_HOOKS_FEATURE] = True
        return document.as_string()

    candidates: list[Callable[[], str]] = []
    if "features" not in data:
        candidates.append(
            lambda: _append(text, ["[features]", f"{CODEX_HOOKS_FEATURE} = true"], newline)
        )
    candidates += [
        partial(_insert_after, text, i, f"{CODEX_HOOKS_FEATURE} = true", newline) for i in headers
    ]
    candidates += [
        partial(_insert_after, text, i, CODEX_HOOKS_FLAG, newline) for i in reversed(dotted)
    ]
    candidates += [
        lambda: _append(text, ["[features]", f"{CODEX_HOOKS_FEATURE} = true"], newline),
        by_tomlkit,
        lambda: _insert_after(text, -1, CODEX_HOOKS_FLAG, newline),
    ]
    result = _faithful(text, candidates, expected)
    if result is None:
        raise Refused(
            f"{path}: `{CODEX_HOOKS_FLAG}` cannot be added without changing what the "
            "rest of the file means; add it by hand"
        )
    return result


def _without_extractor(config: MutableMapping[str, Any]) -> None:
    """Take orca's extraction command out of `config` (what the file means, or the tomlkit
    document itself): the command, the provider when it names it, and a table left empty."""
    table = config["extraction"]
    del table["command"]
    if table.get("provider") == "command":
        del table["provider"]
    if not table:
        del config["extraction"]


def edit_orca_config(text: str, path: Path, agent: str, *, remove: bool) -> str:
    """orca's config.toml: the agent's own CLI as the `command` extraction provider (each edit
    checked against what the file means, as in edit_codex_config). A byte order mark, which
    orcad reads past (some Windows editors write one), is kept as it was, and is no part of
    the TOML edited."""
    mark = "\ufeff" if text.startswith("\ufeff") else ""
    edited = _edit_orca_config(text.removeprefix(mark), path, agent, remove=remove)
    return mark + edited if edited else edited


def _edit_orca_config(text: str, path: Path, agent: str, *, remove: bool) -> str:
    _load_toml(text, path)
    data = toml_meaning(text, path)
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
        _without_extractor(expected)

        def taken_out() -> str:
            document = tomlkit.parse(text)
            _without_extractor(document)
            return _tidy(document.as_string(), _newline(text))

        candidates = [taken_out]
    else:
        if extraction.get("provider") == "command" and command == {"argv": argv}:
            return text  # already there: not a byte changes
        provider = extraction.get("provider")
        if provider not in (None, "heuristic") and not (provider == "command" and ours):
            # the user's own choice (an endpoint, their own command): --remove could not give
            # it back, so it is not replaced
            raise Refused(
                f"{path} sets [extraction] provider = {_shown_value(provider)}, which "
                "--extractor would replace with the agent's own CLI; change that setting "
                "yourself to use the agent's CLI, or leave out --extractor"
            )
        if command is not None and not ours:
            # a command of the user's own, kept for later while another provider runs: it would
            # be overwritten, and --remove would then delete the table with nothing to give back
            shown = command.get("argv") if isinstance(command, dict) else command
            raise Refused(
                f"{path} sets [extraction.command] argv = {_shown_value(shown)}, which "
                "--extractor would replace with the agent's own CLI; change that setting "
                "yourself to use the agent's CLI, or leave out --extractor"
            )
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
        raise Refused(
            f"{path}: the `[extraction]` settings cannot be "
            f"{'taken out' if remove else 'written'} without changing what the rest of the "
            "file means; edit them by hand"
        )
    return result


def _shown_value(value: object) -> str:
    """A TOML value as the file would write it, shortened: named in an error message."""
    try:
        written = tomlkit.item(value).as_string()
    except (TypeError, ValueError):
        written = repr(value)
    return written if len(written) <= 60 else written[:57] + "..."
