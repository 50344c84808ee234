"""Doctor's checks of the daemon: its runtime directory and socket, who answers on it, and the
faults the running daemon recorded."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import msgspec

from orcactl.approval import shell_word
from orcactl.commands.doctor_faults import EXTRACTION_FIX, Finding, judge_daemon_errors
from orcactl.commands.doctor_files import judge_private
from orcad.limits import DOCTOR_DAEMON_TIMEOUT_S
from orcad.paths import SHORTER_SOCKET, Paths, socket_path_problem
from protocol.client import Client, DaemonUnavailable, ProtocolViolation
from protocol.errors import ErrorCode, RemoteError


def _shorter_socket(paths: Paths, sock: Path) -> str:
    """The fix for a socket path too long: XDG_RUNTIME_DIR only when the path was made from it,
    not given by ORCA_SOCKET or --socket."""
    if sock == paths.socket and not paths.socket_from_env:
        return f"{SHORTER_SOCKET}, or use a shorter XDG_RUNTIME_DIR"
    return SHORTER_SOCKET


def _unusable_runtime(paths: Paths, sock: Path, problem: str) -> Finding:
    """The socket's directory is no directory orcad can make or use: no daemon can listen on
    the socket, and no client reaches one there."""
    where = (
        "set ORCA_SOCKET (or give --socket) to a path in a directory of your own"
        if sock != paths.socket or paths.socket_from_env
        else "set XDG_RUNTIME_DIR to a directory of your own, or ORCA_SOCKET to a socket path"
    )
    return Finding("runtime dir", "problem", f"{problem}; orcad cannot listen on {sock}", where)


def check_runtime_and_socket(
    paths: Paths, sock: Path, uid: int
) -> tuple[list[Finding], Client | None]:
    found: list[Finding] = []
    too_long = socket_path_problem(str(sock))
    if too_long is not None:  # orcad cannot start; its runtime directory is still judged
        found.append(Finding("socket", "problem", too_long, _shorter_socket(paths, sock)))
    runtime = sock.parent
    try:
        info = runtime.lstat()
    except FileNotFoundError:
        if too_long is None:
            found.append(
                Finding("runtime dir", "ok", f"{runtime} does not exist yet (created at start)")
            )
        return found, None
    except OSError as exc:  # a file where a directory above it should be, a name too long
        found.append(_unusable_runtime(paths, sock, f"{runtime} cannot be used ({exc.strerror})"))
        return found, None
    if stat.S_ISLNK(info.st_mode):
        found.append(
            Finding(
                "runtime dir",
                "problem",
                f"{runtime} is a symbolic link; orcad refuses it",
                f"rm {shell_word(str(runtime))}  (orcad creates a real directory)",
            )
        )
        return found, None
    if not stat.S_ISDIR(info.st_mode):
        found.append(_unusable_runtime(paths, sock, f"{runtime} is not a directory"))
        return found, None
    mode = stat.S_IMODE(info.st_mode)
    judged = judge_private("runtime dir", runtime, info, uid)
    writable = os.access(runtime, os.W_OK | os.X_OK)  # for the socket and the lock beside it
    if not judged and not writable:
        judged = [
            Finding(
                "runtime dir",
                "problem",
                f"{runtime} is not writable (mode {mode:04o}); orcad cannot make its socket there",
                f"chmod 700 {shell_word(str(runtime))}",
            )
        ]
    found.extend(judged or [Finding("runtime dir", "ok", f"{runtime} is yours, mode {mode:04o}")])
    if too_long is not None:
        return found, None
    try:
        sock_info = sock.lstat()
    except FileNotFoundError:
        if writable:  # else no client can start it: the runtime dir's problem says why
            found.append(
                Finding(
                    "socket", "ok", f"orcad is not running; clients start it on demand ({sock})"
                )
            )
        return found, None
    except OSError as exc:  # a runtime directory it may not search
        found.append(Finding("socket", "problem", f"{sock} cannot be looked at ({exc.strerror})"))
        return found, None
    if not (stat.S_ISSOCK(sock_info.st_mode) or stat.S_ISLNK(sock_info.st_mode)):
        found.append(_no_socket(sock, sock_info.st_mode))
        return found, None
    try:
        client = Client(str(sock), timeout=DOCTOR_DAEMON_TIMEOUT_S)
        pid = client.call("daemon.ping").pid
    except (DaemonUnavailable, OSError) as exc:
        found.append(
            Finding(
                "socket",
                "problem",
                f"{sock} exists but nothing answers ({exc})",
                "orcad has stopped without removing its socket: `orcactl ping` starts it again "
                "(it replaces a socket nothing answers on); if a service runs it, restart that "
                "instead (`orcactl service status`)",
            )
        )
        return found, None
    except (ProtocolViolation, msgspec.MsgspecError, RemoteError) as exc:
        # orcad answers daemon.ping with its pid, never an error: an error is another server
        client.close()
        found.append(
            Finding(
                "socket",
                "problem",
                f"{sock} answers, but not orcad protocol 1 ({exc})",
                f"stop whatever listens on {sock}, or point ORCA_SOCKET elsewhere",
            )
        )
        return found, None
    judged = judge_private("socket", sock, sock_info, uid)
    found.extend(
        judged or [Finding("socket", "ok", f"orcad pid {pid} answers on {sock} (mode 0600)")]
    )
    return found, client


def _no_socket(sock: Path, mode: int) -> Finding:
    """A directory or a file where the socket goes: connecting there is refused as if a daemon
    had died, but orcad will not start over it either (it replaces only a socket)."""
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else ("a regular file" if stat.S_ISREG(mode) else "a FIFO or a device")
    )
    aside = shell_word(f"{sock}.aside")
    return Finding(
        "socket",
        "problem",
        f"{sock} is {kind}, not a socket: orcad refuses to start over it",
        f"mv {shell_word(str(sock))} {aside}  (orcad then creates its socket there)",
    )


def offered(client: Client, method: str, params: dict[str, Any]) -> tuple[Any, Finding | None]:
    """Call `method`; a -32601 answer becomes a 'skipped' finding instead of a failure."""
    try:
        return client.call(method, params), None
    except RemoteError as exc:
        if exc.code == ErrorCode.METHOD_NOT_FOUND:
            return None, Finding(
                method.partition(".")[0], "skipped", f"the daemon does not offer {method}"
            )
        raise


def served_elsewhere(status: Any, paths: Paths) -> tuple[str, str, str] | None:
    """When the running daemon (its `daemon.status`) serves other memory than this
    environment's (ORCA_HOME, ORCA_CONFIG_DIR): the variable, what it serves and what the
    variable gives here. One started elsewhere (by an agent's hook without them, or before they
    changed) answers on the same socket, and every command here reads and writes its memory."""
    served = (
        ("ORCA_HOME", status.memory_root, paths.memory_root),
        ("ORCA_CONFIG_DIR", status.deliberate_db, paths.deliberate_db),
    )
    for variable, theirs, ours in served:
        if os.path.realpath(theirs) != os.path.realpath(ours):
            return variable, str(theirs), str(ours)
    return None


def check_daemon_memory(client: Client, paths: Paths) -> list[Finding]:
    """The memory the running daemon serves is this environment's (`served_elsewhere`)."""
    status = client.call("daemon.status")
    elsewhere = served_elsewhere(status, paths)
    if elsewhere is None:
        memory = status.memory_root
        return [Finding("daemon", "ok", f"orcad serves this environment's memory ({memory})")]
    variable, theirs, ours = elsewhere
    return [
        Finding(
            "daemon",
            "problem",
            f"orcad pid {status.pid} serves {theirs}, but {variable} here gives {ours}",
            f"stop it (kill {status.pid}, or systemctl --user restart orcad for the "
            f"service) so that it starts again with this environment, or set "
            f"{variable} as it was when it started",
        )
    ]


def check_daemon_errors(
    client: Client, disks_with_room: frozenset[int] = frozenset()
) -> list[Finding]:
    """Storage faults and crashes the running daemon recorded (daemon.status recent_errors);
    a full disk on one of `disks_with_room` is left to the disk check. Extraction stopped for
    a provider that could not be built is named from the status itself, which keeps it while
    orcad runs, not from its recorded fault, which newer ones may push out of the list."""
    status = client.call("daemon.status")
    problem = status.extraction_problem
    if problem is None:
        return judge_daemon_errors(status.recent_errors, disks_with_room)
    errors = [error for error in status.recent_errors if error.kind != "provider_config"]
    stopped = Finding(
        "daemon",
        "problem",
        f"extraction is stopped: the provider cannot be built: {problem}",
        EXTRACTION_FIX,
    )
    others = judge_daemon_errors(errors, disks_with_room)
    return [stopped, *(finding for finding in others if finding.status != "ok")]
