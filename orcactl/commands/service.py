"""`orcactl service install | uninstall | status`: run orcad under systemd (user units) or launchd.

Every step is printed as it happens (or, with --dry-run, as it would happen); running a step twice
changes nothing the second time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orcactl import service_files
from orcactl.arguments import executable_file, ignores_global_options
from orcactl.commands.service_steps import (
    UNITS,
    Steps,
    daemon_pid,
    probe,
    systemd_reachable,
    systemd_socket_path,
    unit_states,
)
from orcactl.connect import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CommandError, print_json
from orcad.durable_files import replace_file_atomically
from orcad.paths import (
    MACOS_SOCKET_PATH_MAX_BYTES,
    SHORTER_SOCKET,
    launchd_log_path,
    resolve_paths,
    socket_path_problem,
    xdg_directory,
)
from orcad.regular_files import NotARegularFile, read_regular_file


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    service = subparsers.add_parser(
        "service", help="install orcad as a systemd user service or a launchd agent"
    )
    actions = service.add_subparsers(dest="service_command", metavar="ACTION", required=True)
    for name, run, summary in (
        ("install", run_install, "write the units (or plist) for this user, enable and start them"),
        ("uninstall", run_uninstall, "stop, disable and remove what install wrote"),
        ("status", run_status, "show what is installed, enabled and running"),
    ):
        parser = actions.add_parser(name, help=summary)
        shown = "the report" if name == "status" else "the steps"
        parser.add_argument("--json", action="store_true", help=f"print {shown} as JSON")
        parser.add_argument(
            "--manager",
            choices=("systemd", "launchd"),
            default="launchd" if sys.platform == "darwin" else "systemd",
            help="service manager (default: launchd on macOS, systemd elsewhere)",
        )
        if name != "status":
            parser.add_argument(
                "--dry-run", action="store_true", help="print the steps, change nothing"
            )
        if name == "install":
            parser.add_argument(
                "--orcad",
                metavar="PATH",
                type=executable_file,
                help="the orcad executable (default: next to orcactl, else on PATH)",
            )
            parser.add_argument(
                "--no-sandbox",
                action="store_true",
                help="systemd: leave out the sandbox (where user namespaces are not allowed)",
            )
        parser.set_defaults(run=_socket_option_as_variable(run))
        ignores_global_options(parser, "--no-start")  # the service manager starts orcad


def _socket_option_as_variable(
    run: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """`--socket PATH` names the daemon's socket here as everywhere, as ORCA_SOCKET does: the
    launchd agent listens there, and systemd, which listens where it always does, says so."""

    def run_with_socket(args: argparse.Namespace) -> int:
        if getattr(args, "socket", None):
            os.environ["ORCA_SOCKET"] = args.socket
        return run(args)

    return run_with_socket


# --- what to install ------------------------------------------------------------------------


def find_orcad(explicit: str | None) -> tuple[list[str], dict[str, str]]:
    """The command that starts orcad, as absolute paths, and any environment it needs."""
    if explicit:
        return [os.path.abspath(explicit)], {}
    here = [Path(sys.argv[0]).parent, Path(sys.executable).parent]
    for directory in here:
        candidate = directory / "orcad"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return [os.path.abspath(candidate)], {}
    on_path = shutil.which("orcad")
    if on_path:
        return [os.path.abspath(on_path)], {}
    # No orcad script installed (a source checkout): run the package with this interpreter.
    import orcad  # noqa: PLC0415 - only to locate the package

    package_parent = str(Path(orcad.__file__).resolve().parent.parent)
    installed = any(part in package_parent for part in ("site-packages", "dist-packages"))
    return [sys.executable, "-m", "orcad"], ({} if installed else {"PYTHONPATH": package_parent})


def systemd_unit_dir(environ: dict[str, str] | os._Environ[str]) -> Path:
    """Where the user manager looks for units: $XDG_CONFIG_HOME/systemd/user, or ~/.config's
    when it is unset or relative, which systemd ignores (sd-path's from_home_dir), as the XDG
    base directory specification says to: units written under a relative one went unseen."""
    if config_home := xdg_directory(environ, "XDG_CONFIG_HOME"):
        return config_home / "systemd" / "user"
    return Path(environ.get("HOME") or Path.home()) / ".config" / "systemd" / "user"


def launchd_plist_path(environ: dict[str, str] | os._Environ[str]) -> Path:
    home = Path(environ.get("HOME") or Path.home())
    return home / "Library" / "LaunchAgents" / f"{service_files.LAUNCHD_LABEL}.plist"


def _checked(argv: list[str], values: dict[str, str]) -> None:
    """Every value written into the unit or plist, checked before anything is written."""
    try:
        for word in argv:
            service_files.check_carriable("the orcad command's", word)
        for name, value in values.items():
            service_files.check_carriable(name, value)
    except service_files.UncarriableValue as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None


def wanted_files(args: argparse.Namespace) -> dict[Path, bytes]:
    """Each file install writes, with its content."""
    if args.manager == "systemd":
        unit_dir = systemd_unit_dir(os.environ)
        argv, environment = find_orcad(getattr(args, "orcad", None))
        carried = service_files.carried_environment(os.environ)
        _checked(argv, {**environment, **carried})
        exec_start = service_files.systemd_exec_line(argv)
        service = service_files.systemd_service_unit(
            exec_start,
            {**environment, **carried},
            service_files.writable_paths(carried),
            sandbox=not getattr(args, "no_sandbox", False),
        )
        return {
            unit_dir / service_files.SOCKET_UNIT: service_files.systemd_socket_unit().encode(),
            unit_dir / service_files.SERVICE_UNIT: service.encode(),
        }
    paths = resolve_paths()
    argv, environment = find_orcad(getattr(args, "orcad", None))
    log_path = os.path.abspath(launchd_log_path())
    socket = os.path.abspath(paths.socket)  # launchd has no directory to resolve it against
    too_long = socket_path_problem(socket, MACOS_SOCKET_PATH_MAX_BYTES)
    if too_long is not None:  # launchd would make a socket no orcad or client could use
        raise CommandError(
            f"{too_long} on macOS; {SHORTER_SOCKET}; nothing was written", EXIT_USAGE
        )
    carried = {**environment, **service_files.carried_environment(os.environ)}
    _checked(argv, {**carried, "the socket path": socket, "the log path": log_path})
    plist = service_files.launchd_plist(argv, socket, log_path, carried)
    return {launchd_plist_path(os.environ): plist}


# --- install --------------------------------------------------------------------------------


def _refuse_what_cannot_be_replaced(path: Path) -> None:
    """A unit or plist path holding something a file cannot be renamed over (a directory), or
    that is no file at all (a FIFO, which reading would wait on), is a failure named as such."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except NotADirectoryError:  # the system's words named the unit, not the file above it
        above = next(p for p in path.parents if p.exists() or p.is_symlink())
        raise CommandError(
            f"cannot install: {above} is not a directory, so {path} cannot be written; move "
            f"{above} aside; nothing was written"
        ) from None
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise CommandError(f"cannot install: {path} is {kind}; nothing was written")


def _made_directories_record() -> Path:
    """Where install notes the directories it made for the units or plist (none made before
    is ever removed): in orca's own home, so that the user's directories stay as they were."""
    return resolve_paths().home / "service-directories.json"


# far more than the few directories install notes: a longer record is none to trust
_MADE_DIRECTORIES_MAX_BYTES = 64 * 1024

# A made directory as noted: its path and what identifies it (st_dev, st_ino) when it was made
MadeDirectories = dict[str, tuple[int, int]]


def _identity(path: str) -> tuple[int, int] | None:
    """A directory's (st_dev, st_ino), not followed through a symlink; None when none is there."""
    try:
        found = os.lstat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino) if stat.S_ISDIR(found.st_mode) else None


def _noted_directories() -> MadeDirectories:
    """The record as written. A path noted without what identifies it (by orcactl before it
    noted that) cannot be told from one made again since by someone else: it is none to trust."""
    try:
        noted = json.loads(
            read_regular_file(_made_directories_record(), _MADE_DIRECTORIES_MAX_BYTES)
        )
    except (OSError, NotARegularFile, ValueError, RecursionError):  # none noted, or none to trust
        return {}
    made: MadeDirectories = {}
    for entry in noted if isinstance(noted, list) else []:
        if not isinstance(entry, dict):
            continue
        path, device, inode = entry.get("path"), entry.get("device"), entry.get("inode")
        if isinstance(path, str) and type(device) is int and type(inode) is int:
            made[path] = (device, inode)
    return made


def _made_directories() -> list[str]:
    """The noted directories that are still the ones install made: one removed since, or moved
    aside and another put in its place (by the user, or by another install under another
    ORCA_HOME, whose record is its own), is no longer this install's to remove."""
    return [path for path, made in _noted_directories().items() if _identity(path) == made]


def _note_made_directories(made: list[str]) -> None:
    """Noted for uninstall, with what identifies each one now; a record that cannot be
    written only leaves them there then."""
    entries = []
    for path in made:
        identity = _identity(path)
        if identity is not None:
            entries.append({"path": path, "device": identity[0], "inode": identity[1]})
    with contextlib.suppress(OSError):
        record = _made_directories_record()
        if not entries:
            record.unlink(missing_ok=True)
            return
        record.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        replace_file_atomically(record, json.dumps(entries).encode())


def _made_depth(manager: str) -> int:
    """How many directories above a unit file or the plist install may make."""
    return 3 if manager == "systemd" else 2


def _through_a_symlink(path: Path, made: list[str]) -> bool:
    """Whether `path`, or a directory above it that install made, is now a symlink (put there
    since, to somewhere else): nothing is removed through it."""
    for directory in (path, *path.parents):
        if directory != path and str(directory) not in made:
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.lstat(directory).st_mode):
                return True
    return False


def _missing_directories(files: list[Path], manager: str) -> list[str]:
    """The directories above `files` that do not exist yet, deepest first: of the unit
    directory, `systemd/user` and the configuration directory; of the plist's,
    `Library/LaunchAgents` (never the home directory or one above it)."""
    depth = _made_depth(manager)
    missing: dict[str, None] = {}
    for path in files:
        for parent in path.parents[:depth]:
            if os.path.lexists(parent):
                break
            missing[str(parent)] = None
    return list(missing)


def run_install(args: argparse.Namespace) -> int:
    steps = Steps(dry_run=args.dry_run, json=args.json)
    changed = False
    wanted = wanted_files(args)
    for path in wanted:  # before anything is written: no half install
        _refuse_what_cannot_be_replaced(path)
    made = [] if args.dry_run else _missing_directories(list(wanted), args.manager)
    for path, content in wanted.items():
        changed = steps.write(path, content) or changed
    if args.manager == "systemd":
        for directory in service_files.writable_directories(os.environ):
            steps.make_directory(directory)
    noted = {} if args.dry_run else _noted_directories()
    if made or noted:  # (after orca's home is made as a step of its own); stale ones dropped
        _note_made_directories(list(dict.fromkeys([*made, *_made_directories()])))
    if args.manager == "systemd":
        install_systemd(steps, changed)
    else:
        install_launchd(steps, changed, next(iter(wanted_files(args))))
    return steps.finish(args.manager)


def install_systemd(steps: Steps, changed: bool) -> None:
    socket_path = systemd_socket_path()
    if os.environ.get("ORCA_SOCKET") and Path(os.environ["ORCA_SOCKET"]) != socket_path:
        steps.note(
            f"the socket given is {os.environ['ORCA_SOCKET']} but systemd listens on "
            f"{socket_path}; leave ORCA_SOCKET unset (and --socket out) so clients find the "
            "service"
        )
    if not systemd_reachable():
        steps.note(
            "systemctl --user cannot reach a user service manager, so the units are not "
            "enabled; in a session that has one, run: "
            f"systemctl --user enable --now {' '.join(UNITS)}"
        )
        return
    if changed:
        steps.run(["systemctl", "--user", "daemon-reload"])
    enabled = unit_states("is-enabled")
    if all(state == "enabled" for state in enabled.values()):
        steps.say("unchanged", f"already enabled: {' '.join(UNITS)}", units=list(UNITS))
    else:
        steps.run(["systemctl", "--user", "enable", *UNITS])
    active = unit_states("is-active")
    if all(state == "active" for state in active.values()):
        if changed:
            steps.run(["systemctl", "--user", "restart", service_files.SERVICE_UNIT])
        else:
            steps.say("unchanged", f"already running: {' '.join(UNITS)}", units=list(UNITS))
        return
    if active[service_files.SOCKET_UNIT] != "active":
        pid = daemon_pid(socket_path)
        if pid is not None:
            steps.note(
                f"orcad pid {pid} already serves {socket_path} outside systemd, so the socket unit "
                f"cannot bind it; stop it (kill -TERM {pid}), then run: "
                f"systemctl --user start {' '.join(UNITS)}"
            )
            return
    steps.run(["systemctl", "--user", "start", *UNITS])


def launchd_target() -> str:
    return f"gui/{os.getuid()}/{service_files.LAUNCHD_LABEL}"


def install_launchd(steps: Steps, changed: bool, plist: Path) -> None:
    steps.make_directory(resolve_paths().socket.parent)
    if shutil.which("launchctl") is None:
        steps.note(
            "launchctl not found; load the agent later with: "
            f"launchctl bootstrap gui/{os.getuid()} {plist}"
        )
        return
    loaded = probe(["launchctl", "print", launchd_target()])
    is_loaded = loaded is not None and loaded.returncode == 0
    if is_loaded and not changed:
        steps.say("unchanged", f"already loaded: {launchd_target()}", label=launchd_target())
        return
    if is_loaded:
        steps.run(["launchctl", "bootout", launchd_target()])
    steps.run(["launchctl", "enable", launchd_target()])
    steps.run(["launchctl", "bootstrap", f"gui/{os.getuid()}", str(plist)])


# --- uninstall ------------------------------------------------------------------------------


def run_uninstall(args: argparse.Namespace) -> int:
    steps = Steps(dry_run=args.dry_run, json=args.json)
    files = list(wanted_files(args))
    if args.manager == "systemd":
        if systemd_reachable():
            enabled = unit_states("is-enabled")
            active = unit_states("is-active")
            if any(state in ("enabled", "linked") for state in enabled.values()) or any(
                state in ("active", "activating", "reloading") for state in active.values()
            ):
                steps.run(["systemctl", "--user", "disable", "--now", *reversed(UNITS)])
        removed = [steps.remove(path) for path in files]
        if any(removed) and systemd_reachable():
            steps.run(["systemctl", "--user", "daemon-reload"])
    else:
        loaded = probe(["launchctl", "print", launchd_target()])
        if loaded is not None and loaded.returncode == 0:
            steps.run(["launchctl", "bootout", launchd_target()])
        for path in files:
            steps.remove(path)
    _remove_made_directories(steps, files, args.manager)
    return steps.finish(args.manager)


def _remove_made_directories(steps: Steps, files: list[Path], manager: str) -> None:
    """The directories install made for `files`, once nothing else is in them: one the user
    had before (systemd users often keep units of their own there) is never removed, nor one
    the record names that install could not have made (a record edited by hand: `~`, `/`)."""
    made = _made_directories()
    depth = _made_depth(manager)
    ours = [path for path in made if any(Path(path) in file.parents[:depth] for file in files)]
    if not ours:
        if not steps.dry_run and _noted_directories():  # what is left noted is stale
            _note_made_directories(made)
        return
    noted = list(_noted_directories())  # one now a symlink is no longer among `made`
    for path in sorted(ours, key=lambda path: len(Path(path).parts), reverse=True):
        if not _through_a_symlink(Path(path), noted):
            steps.remove_empty_directory(Path(path))
    if not steps.dry_run:
        _note_made_directories([path for path in made if path not in ours])


# --- status ---------------------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    files = wanted_files(args)
    # what `install --no-sandbox` writes is as current as what `install` writes
    unsandboxed = wanted_files(argparse.Namespace(**{**vars(args), "no_sandbox": True}))
    report: dict[str, Any] = {"manager": args.manager, "files": {}, "units": {}}
    healthy = True
    for path, content in files.items():
        try:
            found = read_regular_file(path)
            state = "current" if found in (content, unsandboxed.get(path)) else "differs"
            if content != unsandboxed.get(path) and state == "current":  # the unit it changes
                report["sandbox"] = found == content
        except (FileNotFoundError, NotADirectoryError):  # nothing there, or a file above it
            state = "missing"
        except NotARegularFile:  # a directory, or a FIFO: never waited on
            state = "not_a_file"
        healthy = healthy and state == "current"
        report["files"][str(path)] = state
    if args.manager == "systemd":
        socket_path = systemd_socket_path()
        if systemd_reachable():
            enabled, active = unit_states("is-enabled"), unit_states("is-active")
            for unit in UNITS:
                report["units"][unit] = {"enabled": enabled[unit], "active": active[unit]}
            healthy = healthy and enabled[service_files.SOCKET_UNIT] == "enabled"
        else:
            report["units"] = None
    else:
        socket_path = resolve_paths().socket
        loaded = probe(["launchctl", "print", launchd_target()])
        if loaded is None:  # no launchctl to ask, as systemd without a user manager
            report["units"] = None
        else:
            is_loaded = loaded.returncode == 0
            report["units"] = {service_files.LAUNCHD_LABEL: {"loaded": is_loaded}}
            healthy = healthy and is_loaded
    if args.manager == "systemd":  # not known unless the service unit is installed as written
        report.setdefault("sandbox", None)
    report["socket"] = str(socket_path)
    report["daemon_pid"] = daemon_pid(socket_path)
    report["healthy"] = healthy
    if args.json:
        print_json(report)
    else:
        print(render_service_status(report))
    return EXIT_OK if healthy else EXIT_ERROR


def _unit_state(key: str, value: object) -> str:
    """As systemctl says it ("enabled enabled"), and launchd's yes or no as "loaded" or "not
    loaded" rather than a Python boolean."""
    if isinstance(value, bool):
        return key if value else f"not {key}"
    return f"{key} {value}"


def render_service_status(report: dict[str, Any]) -> str:
    explain = {
        "current": "installed",
        "differs": "installed, but differs from what `orcactl service install` writes now",
        "missing": "not installed (run: orcactl service install)",
        "not_a_file": "not a regular file (a directory or a FIFO): move it aside, then run "
        "orcactl service install",
    }
    lines = [f"Service manager: {report['manager']}"]
    lines += [f"  {path}: {explain[state]}" for path, state in report["files"].items()]
    if report.get("sandbox") is False:
        lines.append("  sandbox: off (installed with --no-sandbox)")
    if report["units"] is None and report["manager"] == "systemd":
        lines.append("  systemctl --user: no user service manager reachable")
    elif report["units"] is None:
        lines.append("  launchctl: not found, so whether the agent is loaded is not known")
    else:
        for unit, states in report["units"].items():
            described = ", ".join(_unit_state(key, value) for key, value in states.items())
            lines.append(f"  {unit}: {described}")
    pid = report["daemon_pid"]
    answer = f"orcad pid {pid} answers" if pid else "nothing answers"
    lines.append(f"  socket {report['socket']}: {answer}")
    return "\n".join(lines)
