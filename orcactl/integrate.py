"""`orcactl integrate claude-code|codex [--project] [--dry-run] [--remove] [--extractor]`.

Plans every file's new text first; if any file does not parse, nothing at all is written and
the file is named. Otherwise each changed file is backed up (`<file>.orca-backup-<time>`) and
replaced atomically; an unchanged file is not touched. `--dry-run` prints unified diffs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from orcactl import agent_configs, toml_edits
from orcactl.agent_configs import Pinned, Refused, Target, Unparseable
from orcactl.agent_files import (
    Change,
    ChangedMeanwhile,
    Written,
    check_writable,
    read_config,
    write_all,
)
from orcactl.arguments import current_directory, utf8_path
from orcactl.codex_projects import ProjectTrust, project_trust
from orcactl.commands.doctor_faults import UNMET_FAULT_EXPIRY_S, Finding, met_lately
from orcactl.connect import EXIT_OK, EXIT_USAGE, CommandError, print_json
from orcactl.hooks.failures import failures_path, recent_failures
from orcactl.mcp_handshake import warm_up
from orcactl.service_files import carried_environment
from orcad.paths import resolve_paths, socket_path_problem
from orcad.workspace import derive_workspace


def _runnable(program: str) -> bool:
    return os.path.isfile(program) and os.access(program, os.X_OK)


def _default_orcactl(env: dict[str, str], remove: bool) -> str:
    """The orcactl to register when none is given. One that is not there is refused: the agent
    would fail every hook and never start the MCP server (--remove registers nothing)."""
    orcactl = agent_configs.orcactl_path(env, sys.argv[0], sys.executable)
    if not remove and not _runnable(orcactl):
        raise CommandError(
            f"no orcactl to register: {orcactl} does not exist or is not executable; "
            "pass --orcactl PATH (the orcactl the agent should run)",
            EXIT_USAGE,
        )
    return orcactl


# A path written into the agent's configuration must be UTF-8, which JSON and TOML carry; one
# that is not was blamed on the configuration file, "cannot be written back".
NOT_IN_CONFIG = "which the agent's configuration cannot carry; nothing was changed"


def project_root(args: argparse.Namespace) -> Path | None:
    """With --project, the project whose files are written: the root orcad takes for a session
    started in --cwd (or the current directory), its Git top level, else that directory itself.
    The agents read a project's files there (Codex its `.codex/` from the root down), so files
    written in a subdirectory served only sessions started in it, or none."""
    if not args.project:
        return None
    directory = args.cwd or current_directory()
    try:
        return Path(derive_workspace(directory).root)
    except ValueError as exc:  # .git could not be looked for (no access, a path too long)
        raise CommandError(f"{exc}; nothing was changed", EXIT_USAGE) from None


def plan(args: argparse.Namespace, env: dict[str, str]) -> list[Change]:
    project = project_root(args)
    orcactl = args.orcactl or _default_orcactl(env, args.remove)
    if not args.remove:  # --remove writes neither
        utf8_path("the orcactl path", orcactl, NOT_IN_CONFIG)
    # Agents start MCP servers with a small environment and from their own directory, and an
    # agent started from another shell runs its hooks without this one's ORCA_SOCKET: the
    # socket chosen here (--socket, else ORCA_SOCKET) is written absolute into both, so that
    # the hooks and the MCP server always reach the same daemon.
    chosen = getattr(args, "socket", None) or env.get("ORCA_SOCKET")
    socket = os.path.abspath(chosen) if chosen else None
    if socket is not None and not args.remove:
        utf8_path("the socket path", socket, NOT_IN_CONFIG)
        if problem := socket_path_problem(socket):  # hooks written with it could never connect
            raise CommandError(f"{problem}; choose a shorter one; nothing was changed", EXIT_USAGE)
    # and so are ORCA_HOME and ORCA_CONFIG_DIR as set here: an orcad that a hook or the MCP
    # server starts, when none runs, must serve this memory, not the default one on that socket
    carried = carried_environment(env)
    pinned = Pinned(socket, carried.get("ORCA_HOME"), carried.get("ORCA_CONFIG_DIR"))
    if not args.remove:
        for name, value in carried.items():
            utf8_path(name, value, NOT_IN_CONFIG)
    found = agent_configs.targets(args.agent, project, env)
    if args.extractor:
        found.append(Target(resolve_paths(env).config_file, "orca-config"))
    changes = []
    # Codex runs a hook only when its user config records trust in the hook's definition: what
    # integrate writes is trusted as Codex's /hooks would (unless --no-trust), and the trust in
    # orca's hooks that were there before is taken back (their definitions are gone)
    trust: dict[str, str] = {}
    previous: dict[str, str] = {}
    moves: dict[str, str] = {}
    for target in found:
        before = read_config(target.path)
        text = before or ""
        remove = args.remove
        if target.kind in ("claude-hooks", "codex-hooks"):
            after = agent_configs.edit_hooks(
                text, target.path, args.agent, orcactl, pinned, remove=remove
            )
            if target.kind == "codex-hooks" and project is None:
                previous = agent_configs.codex_trust(text, target.path)
                moves = agent_configs.codex_moves(text, after, target.path)  # the user's
                if not args.no_trust:
                    trust = agent_configs.codex_trust(after, target.path)
        elif target.kind == "claude-mcp":
            after = agent_configs.edit_claude_mcp(
                text, target.path, orcactl, pinned, project, remove=remove
            )
        elif target.kind == "codex-config":
            after = toml_edits.edit_codex_config(
                text,
                target.path,
                orcactl,
                pinned,
                project,
                remove=remove,
                trust=trust,
                previous=previous,
                moves=moves,
                take_back=not args.no_trust,
            )
        else:
            after = toml_edits.edit_orca_config(text, target.path, args.agent, remove=remove)
        if before is None and not after:
            continue  # nothing to remove from a file that does not exist
        change = Change(target.path, before, after)
        if change.changed:
            check_writable(target.path, backed_up=before is not None)
            try:  # every new text is known to be writable before the first file is written
                after.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise Unparseable(
                    f"{target.path} cannot be written back as UTF-8 ({exc})"
                ) from None
        changes.append(change)
    return changes


# Reads and writes of all the files while another program keeps writing one, before giving up.
ATTEMPTS = 3


def _pending(args: argparse.Namespace, env: dict[str, str]) -> list[Change]:
    try:
        changes = plan(args, env)
    except Refused as exc:  # it says what to do instead: moving the file would not be it
        raise CommandError(f"{exc}; nothing was changed.") from None
    except Unparseable as exc:
        raise CommandError(
            f"{exc}; nothing was changed. Fix or move that file and run again."
        ) from None
    return [change for change in changes if change.changed]


def _apply(args: argparse.Namespace, env: dict[str, str]) -> list[Written]:
    """Every change written. A file another program wrote after it was read is read again and
    the change redone on what is there now; one that keeps changing is refused, nothing
    changed, since replacing it would lose the other program's write."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    attempt = 1
    while True:
        try:
            return write_all(_pending(args, env), stamp)
        except ChangedMeanwhile as exc:
            if attempt == ATTEMPTS:
                raise CommandError(
                    f"{exc} ({ATTEMPTS} times); nothing was changed. Close the program that "
                    "writes it and run again."
                ) from None
            attempt += 1


def _extractor_kept(args: argparse.Namespace, env: dict[str, str]) -> Path | None:
    """orca's config.toml when a user-level --remove without --extractor left the agent's CLI
    there as the extraction provider (that --extractor wrote): orcad goes on running it for
    every turn captured, which a user taking orca out of the agent does not expect."""
    if not args.remove or args.extractor or args.project:
        return None
    path = resolve_paths(env).config_file
    try:
        text = read_config(path)
        if text is None:
            return None
        return (
            path
            if toml_edits.edit_orca_config(text, path, args.agent, remove=True) != text
            else None
        )
    except (Unparseable, Refused):
        return None


def _project_note(args: argparse.Namespace, project: Path | None) -> None:
    """Where the project's files are, when that is not the directory integrate was run for."""
    if project is None:
        return
    given = args.cwd or current_directory()
    if os.path.realpath(given) != str(project):
        print(f"note: {given} is in the project at {project}: its files are written there")


def _written_project_trust(
    args: argparse.Namespace, project: Path | None, env: dict[str, str]
) -> ProjectTrust | None:
    """For Codex files written into a project: whether Codex will read them, which it does
    only in a project the user trusts (None otherwise, and when the project's `.codex/` is the
    user's own Codex home, read whatever the trust)."""
    if args.agent != "codex" or project is None or args.remove:
        return None
    if os.path.realpath(project / ".codex") == os.path.realpath(agent_configs.codex_home(env)):
        return None
    return _codex_project_trust(project, env)


def _trust_note(project: Path, trust: ProjectTrust | None) -> None:
    if trust is not None and not trust.trusted:
        print(f"note: {_not_read(project, trust)}; to trust it: {trust.fix()}")


def run_integrate(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    project = project_root(args)
    shown = str(project) if project is not None else None
    trust = _written_project_trust(args, project, env)
    trust_fields = {
        "project_trusted": trust.trusted if trust is not None else None,
        "trust_fix": trust.fix() if trust is not None and not trust.trusted else None,
    }
    if args.dry_run:
        pending = _pending(args, env)
        if args.json:
            diffs = [{"path": str(change.path), "diff": change.diff()} for change in pending]
            print_json(
                {
                    "agent": args.agent,
                    "project": shown,
                    "removed": args.remove,
                    "dry_run": True,
                    "changed": diffs,
                    **trust_fields,
                }
            )
            return EXIT_OK
        _project_note(args, project)
        for change in pending:
            print(change.diff(), end="")
        if not pending:
            print("nothing to change")
        if project is not None:
            _trust_note(project, trust)
        return EXIT_OK
    report = [
        {
            "path": str(done.change.path),
            "backup": str(done.backup) if done.backup else None,
            "deleted": done.removed,
        }
        for done in _apply(args, env)
    ]
    # orcad reads [extraction] only when it starts: a running one keeps its provider until then
    restart = str(resolve_paths(env).config_file) in [entry["path"] for entry in report]
    # the MCP server's first answers, recorded now rather than by the agent's first session,
    # which would otherwise start without orca's tools (codex exec does not wait for them)
    warmed = not args.remove and warm_up(
        args.orcactl or _default_orcactl(env, False), args.agent, env
    )
    kept = _extractor_kept(args, env)
    if args.json:
        print_json(
            {
                "agent": args.agent,
                "project": shown,
                "removed": args.remove,
                "dry_run": False,
                "changed": report,
                "restart_orcad": restart,
                "mcp_answers_recorded": warmed,
                "extractor_kept": kept is not None,
                **trust_fields,
            }
        )
        return EXIT_OK
    _project_note(args, project)
    if not report:
        state = "disconnected" if args.remove else "connected"
        print(f"{args.agent}: already {state}; nothing to change")
    verb = "removed orca from" if args.remove else "connected orca in"
    for entry in report:
        saved = f" (backup: {entry['backup']})" if entry["backup"] else " (new file)"
        if entry["deleted"]:
            saved = " (it held only orca's entries: deleted)"
        print(f"{verb} {entry['path']}{saved}")
    if not args.remove and not warmed:
        print(
            "note: the first answers of orca's MCP server could not be recorded; "
            "the agent's first session may start without orca's tools (`orcactl doctor`)"
        )
    if kept is not None:
        program = " ".join(agent_configs.EXTRACTOR_ARGV[args.agent])
        print(
            f"note: orcad still extracts facts with `{program}`, as --extractor set in {kept}; "
            f"`orcactl integrate {args.agent} --remove --extractor` takes that out too"
        )
    if restart:
        print(
            "note: orcad reads the extraction provider when it starts: restart orcad if it is "
            "running (orcactl status says whether it runs with this config)"
        )
    if project is not None:
        _trust_note(project, trust)
    if args.agent == "codex" and not args.remove and (args.project or args.no_trust):
        print(
            "note: Codex runs a hook only once you trust it: open Codex and trust orca's hooks "
            "with /hooks (`orcactl doctor` says whether they are trusted)"
        )
    return EXIT_OK


# --- what doctor reports ------------------------------------------------------------------


def agent_status(agent: str, env: dict[str, str]) -> tuple[bool, bool, str]:
    """(found, connected, detail) for one agent's user-level configuration."""
    found, connected, detail, _ = _agent_state(agent, env)
    return found, connected, detail


def _agent_state(
    agent: str, env: dict[str, str], project: Path | None = None
) -> tuple[bool, bool, str, bool]:
    """agent_status, and whether one of the agent's files could not be read or parsed (which
    `integrate` refuses to change until it is fixed). With a project, its files (`--project`);
    not found when they hold none of orca's entries."""
    directory = (
        agent_configs.claude_config_dir(env)
        if agent == "claude-code"
        else agent_configs.codex_home(env)
    )
    binary = "claude" if agent == "claude-code" else "codex"
    found = directory.is_dir() or agent_configs._which(binary, env) is not None
    if not found and project is None:
        return False, False, f"{agent} not found", False
    label = agent if project is None else f"{agent} in the project at {project}"
    missing: list[str] = []
    commands: list[list[str]] = []
    texts: dict[str, tuple[Path, str]] = {}
    for target in agent_configs.targets(agent, project, env):
        try:
            text = read_config(target.path) or ""
            missing += agent_configs.missing_entries(text, target.path, target.kind, agent)
            commands += agent_configs.registered_commands(text, target.path, target.kind, agent)
            texts[target.kind] = (target.path, text)
        except Unparseable as exc:
            if project is not None:  # a project's own file is not doctor's to judge
                return False, False, str(exc), True
            return True, False, str(exc), True
    everything = (
        len(agent_configs.CLAUDE_HOOKS if agent == "claude-code" else agent_configs.CODEX_HOOKS) + 1
    )
    # not connected: none of orca's own entries, whether or not the flag is set (other hooks)
    connected_to_none = (
        len([entry for entry in missing if entry != agent_configs.CODEX_HOOKS_FLAG]) == everything
    )
    if connected_to_none and project is not None:  # a project not connected is no finding
        return False, False, f"{label}: not connected to orca", False
    for program in dict.fromkeys(words[0] for words in commands if words):
        found_program = program if os.sep in program else agent_configs._which(program, env)
        if found_program is None or not _runnable(found_program):
            return (
                True,
                False,
                f"{label}: the registered {program} does not exist or cannot run",
                False,
            )
    if connected_to_none:
        return True, False, f"{agent}: found, not connected to orca", False
    if agent == "codex" and project is not None:
        # Codex reads the user's config.toml under the project's, which wins key by key (so
        # `[features] hooks = true` in either is enough unless the project's sets it false),
        # and keeps the trust in a project's hooks in the user's own
        project_config = texts["codex-config"]
        user_config = agent_configs.targets(agent, None, env)[1].path
        try:
            texts["codex-config"] = (user_config, read_config(user_config) or "")
            features = {
                **agent_configs.codex_features(texts["codex-config"][1], user_config),
                **agent_configs.codex_features(project_config[1], project_config[0]),
            }
        except Unparseable:  # the user-level finding names it
            return False, False, f"{label}: {user_config} cannot be read", True
        # and reads none of the project's files (orca's hooks and MCP server among them) unless
        # the user trusts the project
        trust = project_trust(project, user_config, texts["codex-config"][1])
        if not trust.trusted:
            return True, False, f"{label}: {_not_read(project, trust)}", False
        if agent_configs.codex_hooks_on(features):
            missing = [entry for entry in missing if entry != agent_configs.CODEX_HOOKS_FLAG]
    if missing:
        return True, False, f"{label}: partly connected (missing {', '.join(missing)})", False
    if elsewhere := _pinned_elsewhere(commands, env):
        return True, False, f"{label}: registered for {elsewhere}", False
    if agent == "codex" and (untrusted := _untrusted_codex_hooks(texts)):
        remedy = (
            "trust them in Codex: /hooks"
            if project is not None
            else "run `orcactl integrate codex`, or trust them in Codex: /hooks"
        )
        return (
            True,
            False,
            (
                f"{label}: Codex does not trust orca's {', '.join(untrusted)} hook(s), so it "
                f"skips them without a word ({remedy})"
            ),
            False,
        )
    return True, True, f"{label}: hooks and MCP server registered", False


def _not_read(project: Path, trust: ProjectTrust) -> str:
    """What Codex does with an untrusted project's files, and why."""
    return (
        f"Codex does not read {project / '.codex'} (orca's hooks and MCP server there): it "
        f"reads a project's files only in a project you trust, and {trust.reason()}"
    )


def _codex_project_trust(project: Path, env: dict[str, str]) -> ProjectTrust | None:
    """Whether Codex reads the project's `.codex/`; None when the user's config.toml cannot
    be read (a finding of its own)."""
    user_config = agent_configs.targets("codex", None, env)[1].path
    try:
        return project_trust(project, user_config, read_config(user_config) or "")
    except Unparseable:
        return None


def _untrusted_codex_hooks(texts: dict[str, tuple[Path, str]]) -> list[str]:
    """orca's Codex hooks whose definitions config.toml records no trust in (by event)."""
    hooks_path, hooks_text = texts["codex-hooks"]
    config_path, config_text = texts["codex-config"]
    try:
        states = agent_configs.toml_read(config_text, config_path).get("hooks", {}).get("state", {})
    except (Unparseable, AttributeError):
        return ["every"]
    states = states if isinstance(states, dict) else {}
    return [
        key.split(":")[-3]
        for key, digest in agent_configs.codex_trust(hooks_text, hooks_path).items()
        if not (isinstance(states.get(key), dict) and states[key].get("trusted_hash") == digest)
    ]


def _same_directory(first: str, second: str) -> bool:
    """Two spellings of one directory: `~`, `..`, a trailing slash and symlinks resolved."""
    return os.path.realpath(os.path.expanduser(first)) == os.path.realpath(
        os.path.expanduser(second)
    )


def _pinned_elsewhere(commands: list[list[str]], env: dict[str, str]) -> str | None:
    """Where orca's entries would keep memory, when that is not where this environment keeps
    it: an orcad one of them starts would serve other memory than this shell's orcactl sees
    (they share the socket). An entry without `--home` (`--config-dir`) starts it with the
    agent's environment, taken to have no ORCA_HOME (ORCA_CONFIG_DIR): the default."""
    outside = {k: v for k, v in env.items() if k != "ORCA_SOCKET"}
    paths = resolve_paths(outside)
    defaults = resolve_paths(
        {k: v for k, v in outside.items() if k not in ("ORCA_HOME", "ORCA_CONFIG_DIR")}
    )
    checked = (
        ("--home", "ORCA_HOME", paths.home, defaults.home),
        (
            "--config-dir",
            "ORCA_CONFIG_DIR",
            paths.deliberate_db.parent,
            defaults.deliberate_db.parent,
        ),
    )
    for option, variable, here, default in checked:
        for words in commands:
            pinned = agent_configs.pinned_value(words[1:], option)
            if pinned is not None and not _same_directory(pinned, str(here)):
                return f"another memory: {option} {pinned}, where {variable} here gives {here}"
            if pinned is None and not _same_directory(str(default), str(here)):
                return (
                    f"another memory: no {option}, so an orcad it starts uses {default}, where "
                    f"{variable} here gives {here}"
                )
    return None


# what the agent went without, by the kind of the hook's last problem
FAILURE_EFFECTS = {
    "bad_input": "a hook given input it could not read did nothing for that event",
    "transcript": "a turn whose transcript could not be read was not captured",
    "output": "the agent did not get that hook's answer",
    "internal": "a hook that failed gave the agent no memory for that event",
}
UNREACHED = ("unreachable", "connection", "timeout")


def _failure_effect(kind: str) -> str:
    if kind in FAILURE_EFFECTS:
        return FAILURE_EFFECTS[kind]
    if kind in UNREACHED:
        return "a hook that could not reach orcad gave the agent no memory for that prompt"
    return "a hook that orcad answered with an error gave the agent no memory for that prompt"


def _project_findings(env: dict[str, str]) -> list[Finding]:
    """The agents connected in the project of the current directory (`integrate --project`):
    whether that works as it does at user level, the trust Codex needs in its hooks included.
    A project whose files are the user's own (run in the home directory) is left to the
    user-level check."""
    try:
        project = Path(derive_workspace(os.getcwd()).root)
    except (OSError, ValueError):  # a removed directory, .git not to be looked for
        return []
    findings = []
    for agent in agent_configs.AGENTS:
        user_files = {
            os.path.realpath(target.path) for target in agent_configs.targets(agent, None, env)
        }
        here = {
            os.path.realpath(target.path) for target in agent_configs.targets(agent, project, env)
        }
        if user_files & here:
            continue
        found, connected, detail, _ = _agent_state(agent, env, project)
        if not found:
            continue
        trust = _codex_project_trust(project, env) if agent == "codex" else None
        if connected:
            findings.append(Finding("agents", "ok", detail))
        elif trust is not None and detail.endswith(_not_read(project, trust)):
            findings.append(Finding("agents", "problem", detail, trust.fix()))
        elif "Codex does not trust" in detail:
            findings.append(Finding("agents", "problem", detail, "trust them in Codex: /hooks"))
        else:
            findings.append(
                Finding(
                    "agents",
                    "problem",
                    detail,
                    f"run `orcactl integrate {agent} --project --cwd {shlex.quote(str(project))}`",
                )
            )
    return findings


def _hook_problem_findings(failures: list[dict[str, Any]], now: float) -> list[Finding]:
    """The hook problems of the last day. Only those met lately (met_lately) fail: a
    hook records its problem each time it meets it, so one that still happens is recent, and
    one hooks no longer meet (a daemon slow under a burst of hooks) is history, as doctor
    judges the daemon's recorded faults naming no file."""
    if not failures:
        return []
    recent = [failure for failure in failures if met_lately(failure.get("at"), now)]
    minutes = round(UNMET_FAULT_EXPIRY_S / 60)
    last = (recent or failures)[-1]
    said = (
        f"last: {last.get('agent')} {last.get('event')} at {last.get('at')}: {last.get('message')}"
    )
    if not recent:
        return [
            Finding(
                "hooks",
                "ok",
                f"{len(failures)} agent hook problem(s) in the last day, none in the last "
                f"{minutes} minutes (orcactl status still lists them); {said}",
            )
        ]
    return [
        Finding(
            "hooks",
            "problem",
            f"{len(recent)} agent hook problem(s) in the last {minutes} minutes "
            f"({len(failures)} in the last day); {said}",
            f"see {failures_path()}; {_failure_effect(str(last.get('kind')))}; once the "
            f"cause is fixed, `rm {shlex.quote(str(failures_path()))}` clears this report "
            f"(the file holds only these problems; the next one makes it again), or it stops "
            f"failing after {minutes} minutes without one",
        )
    ]


def agent_findings() -> list[Finding]:
    """For orcactl doctor: each agent found, connected or not; hook problems of the last day."""
    env = dict(os.environ)
    findings = []
    for agent in agent_configs.AGENTS:
        found, connected, detail, unreadable = _agent_state(agent, env)
        if not found:
            continue
        if connected:
            findings.append(Finding("agents", "ok", detail))
        elif detail.endswith("not connected to orca"):  # a choice, not a fault
            findings.append(
                Finding("agents", "skipped", detail, f"to connect it: orcactl integrate {agent}")
            )
        elif unreadable:  # integrate changes nothing until the file is fixed
            findings.append(
                Finding(
                    "agents",
                    "problem",
                    detail,
                    f"fix or move that file, then run `orcactl integrate {agent}`",
                )
            )
        else:
            findings.append(
                Finding("agents", "problem", detail, f"run `orcactl integrate {agent}`")
            )
    findings += _project_findings(env)
    findings += _hook_problem_findings(recent_failures(), time.time())
    return findings
