"""Taking the listening socket from a service manager instead of binding one.

systemd passes sockets as inherited descriptors starting at fd 3, announced by LISTEN_PID (the
process they are meant for) and LISTEN_FDS (how many). launchd hands them out on request through
`launch_activate_socket`. Either way the socket is used as it is: never re-bound, never unlinked,
since the service manager owns it and keeps it listening while orcad restarts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import sys
from collections.abc import MutableMapping
from pathlib import Path

import structlog

from orcad.errors import StartupError

log = structlog.get_logger("orcad.activation")

SD_LISTEN_FDS_START = 3  # first inherited descriptor (sd_listen_fds(3))
LAUNCHD_SOCKET_NAME = "Listeners"  # the key under Sockets in the LaunchAgent plist
ACTIVATION_VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")
ON_MACOS = sys.platform == "darwin"  # launchd's API exists only there; Linux never loads it


def _parse_count(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise StartupError(f"{name}={value!r} from the service manager is not a number") from None


def adopt_listening_socket(fd: int) -> socket.socket:
    """Wrap an inherited descriptor, refusing anything but a listening Unix stream socket."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise StartupError(f"inherited descriptor {fd} is not a socket: {exc.strerror}") from exc
    try:
        if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
            raise StartupError(
                f"inherited descriptor {fd} is a {sock.family.name}/{sock.type.name} socket; "
                "orcad needs a Unix stream socket (ListenStream= with a path)"
            )
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise StartupError(f"inherited socket on descriptor {fd} is not listening")
    except BaseException:
        sock.detach()  # the descriptor stays the service manager's business, not ours to close
        raise
    os.set_inheritable(fd, False)  # workers and providers we spawn must not hold the listener
    return sock


def inherited_socket(environ: MutableMapping[str, str], pid: int) -> socket.socket | None:
    """The listening socket systemd passed to process `pid`, or None when there is none for us.

    The activation variables are removed from `environ` in every case, so that child processes
    never mistake our descriptors for theirs. A LISTEN_PID naming another process means the
    variables leaked from a parent: they are ignored and fd 3 is left alone.
    """
    announced = {name: environ.pop(name, None) for name in ACTIVATION_VARIABLES}
    listen_pid = _parse_count(announced["LISTEN_PID"], "LISTEN_PID")
    listen_fds = _parse_count(announced["LISTEN_FDS"], "LISTEN_FDS")
    if listen_pid is None or listen_fds is None or listen_pid != pid or listen_fds <= 0:
        return None
    if listen_fds != 1:
        raise StartupError(
            f"the service manager passed {listen_fds} sockets; orcad serves exactly one "
            "(one ListenStream= line in orcad.socket)"
        )
    return adopt_listening_socket(SD_LISTEN_FDS_START)


def listening_path(sock: socket.socket, expected: Path) -> Path:
    """The path an inherited socket listens on; a warning when clients will look elsewhere."""
    name = sock.getsockname()
    path = Path(os.fsdecode(name)) if isinstance(name, (str, bytes)) and name else None
    if path != expected:
        log.warning(
            "activation.socket_mismatch",
            inherited=str(path) if path else "(unnamed)",
            expected=str(expected),
            hint="make ListenStream= (or SockPathName) match ORCA_SOCKET so clients find it",
        )
    else:
        log.info("activation.socket_inherited", socket=str(path))
    return path or expected


def launchd_socket(name: str = LAUNCHD_SOCKET_NAME) -> socket.socket | None:
    """On macOS, the socket launchd holds for us under Sockets/<name>; None when not launched so."""
    if not ON_MACOS:
        return None
    return _launch_activate_socket(name)


def _launch_activate_socket(name: str) -> socket.socket | None:
    libc = ctypes.CDLL(None, use_errno=True)
    activate = getattr(libc, "launch_activate_socket", None)
    if activate is None:
        return None
    fds = ctypes.POINTER(ctypes.c_int)()
    count = ctypes.c_size_t(0)
    activate.argtypes = [
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_int)),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    activate.restype = ctypes.c_int
    error = activate(name.encode(), ctypes.byref(fds), ctypes.byref(count))
    if error != 0:
        return None  # ESRCH: not started by launchd; ENOENT: no such socket in the plist
    try:
        received = [fds[i] for i in range(count.value)]
    finally:
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free(fds)
    if not received:
        return None
    for extra in received[1:]:
        with contextlib.suppress(OSError):
            os.close(extra)
    return adopt_listening_socket(received[0])


def activated_socket(environ: MutableMapping[str, str], pid: int) -> socket.socket | None:
    """The socket a service manager prepared for this process, whichever manager it was."""
    return inherited_socket(environ, pid) or launchd_socket()
