"""`orcactl integrate claude-code|codex [--project] [--dry-run] [--remove] [--extractor]`.

Plans every file's new text first; if any file does not parse, nothing at all is written and
the file is named. Otherwise each changed file is backed up (`<file>.orca-backup-<time>`) and
replaced atomically; an unchanged file is not touched. `--dry-run` prints unified diffs.
"""

from __future__ import annotations

import argparse
import difflib
import os
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from orcactl import agent_configs
from orcactl.agent_configs import Target, Unparseable
from orcactl.arguments import current_directory
from orcactl.commands.doctor_faults import Finding
from orcactl.connect import EXIT_OK, EXIT_USAGE, CommandError, print_json
from orcactl.hooks.failures import failures_path, recent_failures
from orcad.paths import resolve_paths
from orcad.regular_files import NotARegularFile, read_regular_file


@dataclass
class Change:
    path: Path
    before: str | None  # None: the file does not exist
    after: str

    @property
    def changed(self) -> bool:
        return (self.before or "") != self.after

    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path),
        )
        return "".join(lines)


def _read(path: Path) -> str | None:
    """The file's text (None: no file there). A path whose real target is not a regular file (a
    FIFO, a device, a directory, a dangling symlink) is refused: it is never opened in a way that
    could block, and never replaced by a regular file."""
    try:
        status = os.stat(path)  # follows a symlink to what it names; opens nothing
    except FileNotFoundError:
        if os.path.islink(path):
            raise Unparseable(
                f"{path} is a symlink to {os.readlink(path)}, which does not exist"
            ) from None
        return None
    except OSError as exc:
        raise Unparseable(f"{path} cannot be read ({exc})") from None
    if not stat.S_ISREG(status.st_mode):
        raise Unparseable(f"{path} is not a regular file")
    try:
        # bytes, decoded: reading as text would turn the file's CRLF line endings into LF
        return read_regular_file(path).decode("utf-8")
    except FileNotFoundError:
        return None
    except NotARegularFile:  # it became one since the stat: the open did not wait
        raise Unparseable(f"{path} is not a regular file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Unparseable(f"{path} cannot be read ({exc})") from None


def _read_only(path: Path) -> bool:
    # no write bit at all is a choice even for root, whom os.access lets write anything
    return not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222


def _check_directory(path: Path, purpose: str) -> None:
    directory = path.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent  # the one that will hold the directories made for it
    if _read_only(directory) or not os.access(directory, os.X_OK):
        raise Unparseable(f"{path} cannot be written ({purpose} {directory} is read-only)")


def _check_writable(path: Path, backed_up: bool) -> None:
    """Every place a change writes (the file, or the file a symlink names; the directory of its
    temporary copy; the directory of its backup, beside the path itself) is checked before
    anything is written: a read-only file or directory is the user's choice, not ours to
    override, and finding it halfway would leave the agent half connected."""
    real = Path(os.path.realpath(path))
    if real.exists() and _read_only(real):
        raise Unparseable(f"{path} is read-only")
    _check_directory(real, "its directory")
    if backed_up:  # written beside the path, which may be a symlink from elsewhere
        _check_directory(path, "its backup's directory")


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


def plan(args: argparse.Namespace, env: dict[str, str]) -> list[Change]:
    project = Path(args.cwd or current_directory()) if args.project else None
    orcactl = args.orcactl or _default_orcactl(env, args.remove)
    # MCP clients may start us without ORCA_SOCKET, and from their own directory: written
    # absolute. A --socket is in no environment the agent has, so its hooks carry it too.
    chosen = getattr(args, "socket", None)
    hook_socket = os.path.abspath(chosen) if chosen else None
    socket = hook_socket or (
        os.path.abspath(env["ORCA_SOCKET"]) if env.get("ORCA_SOCKET") else None
    )
    found = agent_configs.targets(args.agent, project, env)
    if args.extractor:
        found.append(Target(resolve_paths(env).config_file, "orca-config"))
    changes = []
    for target in found:
        before = _read(target.path)
        text = before or ""
        remove = args.remove
        if target.kind in ("claude-hooks", "codex-hooks"):
            after = agent_configs.edit_hooks(
                text, target.path, args.agent, orcactl, hook_socket, remove=remove
            )
        elif target.kind == "claude-mcp":
            after = agent_configs.edit_claude_mcp(
                text, target.path, orcactl, socket, project, remove=remove
            )
        elif target.kind == "codex-config":
            after = agent_configs.edit_codex_config(
                text, target.path, orcactl, socket, project, remove=remove
            )
        else:
            after = agent_configs.edit_orca_config(text, target.path, args.agent, remove=remove)
        if before is None and not after:
            continue  # nothing to remove from a file that does not exist
        change = Change(target.path, before, after)
        if change.changed:
            _check_writable(target.path, backed_up=before is not None)
            try:  # every new text is known to be writable before the first file is written
                after.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise Unparseable(
                    f"{target.path} cannot be written back as UTF-8 ({exc})"
                ) from None
        changes.append(change)
    return changes


def _backup_path(path: Path, stamp: str) -> Path:
    backup = path.with_name(f"{path.name}.orca-backup-{stamp}")
    number = 1
    while backup.exists():  # two runs within a second keep both backups
        number += 1
        backup = path.with_name(f"{path.name}.orca-backup-{stamp}-{number}")
    return backup


def _back_up(path: Path, stamp: str) -> Path:
    """A private copy (0600 whatever the file's mode: ~/.claude.json may hold credentials); a
    copy cut short (a full disk) is not left behind."""
    backup = _backup_path(path, stamp)
    descriptor = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(path.read_bytes())
    except BaseException:
        backup.unlink(missing_ok=True)
        raise
    return backup


def _replace(real: Path, data: bytes, mode: int) -> None:
    """`real` holds `data` afterwards, or (any failure) is as it was: a temporary copy beside it
    is renamed over it."""
    descriptor, temporary = tempfile.mkstemp(dir=real.parent, prefix=".orca-")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, real)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Written:
    """What one write did, enough to undo it."""

    change: Change
    backup: Path | None  # None: the file is new
    mode: int


def write(change: Change, stamp: str) -> Written:
    """Back the file up, then replace it atomically (or remove it when nothing is left in it:
    a JSON file that held only orca's entries).

    A symlink (a dotfiles checkout, say) stays a symlink: the file it names is replaced."""
    real = Path(os.path.realpath(change.path))
    real.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    mode = 0o600
    after = change.after
    if change.before is not None:
        backup = _back_up(change.path, stamp)
        mode = real.stat().st_mode & 0o777
        if not after and not change.path.is_symlink():
            change.path.unlink()
            return Written(change, backup, mode)
        if not after and change.path.suffix == ".json":
            after = "{}\n"  # a linked file is the user's: emptied, never deleted
    try:
        _replace(real, after.encode("utf-8"), mode)
    except BaseException:
        if backup is not None:  # the file is as it was: its copy would only mislead
            backup.unlink(missing_ok=True)
        raise
    return Written(change, backup, mode)


def _undo(written: Written) -> None:
    """The file as it was before `write`: its backup put back atomically, or a new file gone."""
    real = Path(os.path.realpath(written.change.path))
    if written.backup is None:
        real.unlink(missing_ok=True)
    else:
        _replace(real, written.backup.read_bytes(), written.mode)
        written.backup.unlink()


def _undo_all(done: list[Written]) -> list[str]:
    """Every file written so far put back, last first; what could not be, as advice."""
    left = []
    for written in reversed(done):
        try:
            _undo(written)
        except OSError as exc:
            saved = written.backup or "nothing (it was new)"
            left.append(f"{written.change.path} ({exc.strerror or exc}; its backup: {saved})")
    return left


def write_all(pending: list[Change], stamp: str) -> list[Written]:
    """All the changes, or (a write fails anyway: a full disk) none: those already made are put
    back from their backups, and the error names the file that failed and why."""
    done: list[Written] = []
    for change in pending:
        try:
            done.append(write(change, stamp))
        except OSError as exc:
            left = _undo_all(done)
            outcome = (
                f"these could not be put back: {'; '.join(left)}"
                if left
                else "nothing was changed (files already written were put back)"
            )
            raise CommandError(
                f"{change.path} could not be written ({exc.strerror or exc}); {outcome}"
            ) from None
    return done


def run_integrate(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    try:
        changes = plan(args, env)
    except Unparseable as exc:
        raise CommandError(
            f"{exc}; nothing was changed. Fix or move that file and run again."
        ) from None
    pending = [change for change in changes if change.changed]
    if args.dry_run:
        if args.json:
            diffs = [{"path": str(change.path), "diff": change.diff()} for change in pending]
            print_json(
                {"agent": args.agent, "removed": args.remove, "dry_run": True, "changed": diffs}
            )
            return EXIT_OK
        for change in pending:
            print(change.diff(), end="")
        if not pending:
            print("nothing to change")
        return EXIT_OK
    stamp = time.strftime("%Y%m%dT%H%M%S")
    report = [
        {"path": str(done.change.path), "backup": str(done.backup) if done.backup else None}
        for done in write_all(pending, stamp)
    ]
    if args.json:
        print_json(
            {"agent": args.agent, "removed": args.remove, "dry_run": False, "changed": report}
        )
    elif not report:
        state = "disconnected" if args.remove else "connected"
        print(f"{args.agent}: already {state}; nothing to change")
    else:
        verb = "removed orca from" if args.remove else "connected orca in"
        for entry in report:
            saved = f" (backup: {entry['backup']})" if entry["backup"] else " (new file)"
            print(f"{verb} {entry['path']}{saved}")
    return EXIT_OK


# --- what doctor reports ------------------------------------------------------------------


def agent_status(agent: str, env: dict[str, str]) -> tuple[bool, bool, str]:
    """(found, connected, detail) for one agent's user-level configuration."""
    directory = (
        agent_configs.claude_config_dir(env)
        if agent == "claude-code"
        else agent_configs.codex_home(env)
    )
    binary = "claude" if agent == "claude-code" else "codex"
    found = directory.is_dir() or agent_configs._which(binary, env) is not None
    if not found:
        return False, False, f"{agent} not found"
    missing: list[str] = []
    programs: list[str] = []
    for target in agent_configs.targets(agent, None, env):
        try:
            text = _read(target.path) or ""
            missing += agent_configs.missing_entries(text, target.path, target.kind, agent)
            programs += agent_configs.registered_programs(text, target.path, target.kind, agent)
        except Unparseable as exc:
            return True, False, str(exc)
    for program in dict.fromkeys(programs):
        found_program = program if os.sep in program else agent_configs._which(program, env)
        if found_program is None or not _runnable(found_program):
            return True, False, f"{agent}: the registered {program} does not exist or cannot run"
    everything = (
        len(agent_configs.CLAUDE_HOOKS if agent == "claude-code" else agent_configs.CODEX_HOOKS) + 1
    )
    # not connected: none of orca's own entries, whether or not the flag is set (other hooks)
    if len([entry for entry in missing if entry != agent_configs.CODEX_HOOKS_FLAG]) == everything:
        return True, False, f"{agent}: found, not connected to orca"
    if missing:
        return True, False, f"{agent}: partly connected (missing {', '.join(missing)})"
    return True, True, f"{agent}: hooks and MCP server registered"


def agent_findings() -> list[Finding]:
    """For orcactl doctor: each agent found, connected or not; hook problems of the last day."""
    env = dict(os.environ)
    findings = []
    for agent in agent_configs.AGENTS:
        found, connected, detail = agent_status(agent, env)
        if not found:
            continue
        if connected:
            findings.append(Finding("agents", "ok", detail))
        elif detail.endswith("not connected to orca"):  # a choice, not a fault
            findings.append(
                Finding("agents", "skipped", detail, f"to connect it: orcactl integrate {agent}")
            )
        else:
            findings.append(
                Finding("agents", "problem", detail, f"run `orcactl integrate {agent}`")
            )
    failures = recent_failures()
    if failures:
        last = failures[-1]
        findings.append(
            Finding(
                "hooks",
                "problem",
                f"{len(failures)} agent hook problem(s) in the last day; last: {last.get('agent')} "
                f"{last.get('event')} at {last.get('at')}: {last.get('message')}",
                f"see {failures_path()}; a hook that could not reach orcad gave the agent no "
                "memory for that prompt",
            )
        )
    return findings
