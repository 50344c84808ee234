"""Reaching the daemon: the socket path, start-on-demand, and printing results."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

import orcad
from orcactl.hooks.wire import peer_is_this_user, serving_elsewhere
from orcad.control_characters import BIDI_FORMATTING, INVISIBLE_CHARACTERS, TAG_CHARACTERS
from orcad.errors import StartupError
from orcad.log import DAEMON_LOG_OPEN_FLAGS, move_aside_if_past_bound
from orcad.paths import SHORTER_SOCKET, expand_home, resolve_paths, socket_path_problem
from orcad.runtime import check_home_directory
from protocol.client import (
    CALL_TIMEOUT_S,
    Client,
    DaemonUnavailable,
    ForeignPeer,
    ProtocolViolation,
)
from protocol.errors import ErrorObject, RemoteError

# Exit statuses (documented in the README and in `orcactl --help`).
EXIT_OK = 0
EXIT_ERROR = 1  # the daemon answered with an error, or the request failed
EXIT_USAGE = 2  # bad command line (argparse)
EXIT_NOT_RUNNING = 3  # no daemon answers (and none was started)
EXIT_DECLINED = 4  # a pending change was not approved
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT

START_TIMEOUT_S = 15.0


class CommandError(Exception):
    """A failure to report on stderr with an exit status; never a traceback. `error`: the
    daemon's error object when the daemon answered with one (what --json reports of it);
    `details`: what --json adds to a failure of orcactl's own (the steps already carried out)."""

    def __init__(
        self,
        message: str,
        status: int = EXIT_ERROR,
        *,
        error: ErrorObject | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.details = dict(details or {})


# data.kind of a failure the daemon did not answer with, by exit status
LOCAL_FAILURE_KINDS = {
    EXIT_USAGE: "usage",
    EXIT_NOT_RUNNING: "not_running",
    EXIT_INTERRUPTED: "interrupted",
}


def failure_document(exc: CommandError) -> dict[str, Any]:
    """What --json prints for a failure, so a script reading stdout always gets one document:
    the message stderr has, with the daemon's code and data when it answered with an error,
    else code null and a data.kind of orcactl's own."""
    if exc.error is not None:
        code, data = exc.error.code, dict(exc.error.data)
    else:
        code = None
        data = {"kind": LOCAL_FAILURE_KINDS.get(exc.status, "failed"), **exc.details}
    return {"ok": False, "error": {"code": code, "message": str(exc), "data": data}}


def socket_path(args: argparse.Namespace) -> str:
    if getattr(args, "socket", None):
        return os.path.abspath(str(args.socket))
    return os.path.abspath(resolve_paths().socket)  # a relative ORCA_SOCKET: named in full


def daemon_log_path() -> Path:
    return resolve_paths().home / "orcad.log"


# How long a start waits for another's rotation (a stat, a rename and an open) before it starts
# without rotating: a hook starting orcad has seconds in all.
DAEMON_LOG_LOCK_TIMEOUT_S = 1.0


def rotate_daemon_log(log_path: Path) -> None:
    """Move a log grown past its bound to `orcad.log.1` (see orcad.log); the open that follows
    refuses anything but a regular file there, and through a symbolic link it creates the new
    log beside the old one."""
    try:
        move_aside_if_past_bound(log_path)
    except OSError:
        # none yet, or another start moved it first; or it cannot be moved aside (orcad.log.1
        # a directory, say): housekeeping, so the daemon starts all the same and it grows on
        pass


def open_daemon_log(log_path: Path) -> int:
    """orcad.log opened to append, rotated first when past its bound, under `orcad.log.lock`:
    two starts at once would both find it past the bound, and the second would move the
    first's new log over the old one in orcad.log.1. Without the lock, nothing is rotated.
    Non-blocking, since a FIFO there would hold the open until a reader came."""
    import filelock  # noqa: PLC0415  (only a start needs it)

    flags = DAEMON_LOG_OPEN_FLAGS
    lock = filelock.FileLock(str(log_path.with_name(log_path.name + ".lock")), mode=0o600)
    try:
        lock.acquire(timeout=DAEMON_LOG_LOCK_TIMEOUT_S, poll_interval=0.01)
    except OSError:  # filelock.Timeout included: rotating is housekeeping
        return os.open(log_path, flags, 0o600)
    try:
        rotate_daemon_log(log_path)
        return os.open(log_path, flags, 0o600)  # the next start finds this new log, not the old
    finally:
        lock.release()


def _is_devnull(info: os.stat_result) -> bool:
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == null.st_rdev


def start_daemon(path: str) -> tuple[subprocess.Popen[bytes], int]:
    """Start orcad in the background, detached, logging to $ORCA_HOME/orcad.log; returns the
    process and the log's size before it started (where its own lines begin). A home or a log
    it cannot use leaves orcad not started: exit 3, as for a daemon that exits at its start."""
    log_path = daemon_log_path()
    try:
        check_home_directory(log_path.parent)
    except StartupError as exc:
        raise CommandError(f"cannot start orcad: {exc}", EXIT_NOT_RUNNING) from None
    except OSError as exc:  # a name too long, a link loop: the system's words, not its errno
        raise CommandError(
            f"cannot start orcad: its home {log_path.parent} (ORCA_HOME) cannot be used: "
            f"{exc.strerror or exc}",
            EXIT_NOT_RUNNING,
        ) from None
    try:
        log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:  # a read-only disk above it, say
        raise CommandError(
            f"cannot start orcad: cannot create {log_path.parent}: {exc.strerror or exc}",
            EXIT_NOT_RUNNING,
        ) from None
    env = daemon_environment(os.environ, path)
    # it holds session ids and project paths: private whatever the umask, even if made earlier
    not_a_file = CommandError(
        f"cannot start orcad: its log {log_path} is not a regular file", EXIT_NOT_RUNNING
    )
    try:
        descriptor = open_daemon_log(log_path)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise not_a_file from None
        # a read-only home, a directory or a link loop there, a log another user owns (sudo)
        raise CommandError(
            f"cannot start orcad: its log {log_path} cannot be opened: {exc.strerror or exc}",
            EXIT_NOT_RUNNING,
        ) from None
    opened = os.fstat(descriptor)
    discarded = _is_devnull(opened)  # orcad.log linked to /dev/null: the log is not wanted
    if not stat.S_ISREG(opened.st_mode) and not discarded:
        os.close(descriptor)
        raise not_a_file
    os.set_blocking(descriptor, True)  # what orcad inherits: ordinary writes
    if not discarded:
        os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "ab") as log_file:
        offset = log_file.seek(0, os.SEEK_END)
        process = subprocess.Popen(
            [sys.executable, "-m", "orcad"],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            env=env,
            start_new_session=True,
            close_fds=True,
            cwd="/",  # a daemon must not keep the caller's directory busy (or unmountable)
        )
    return process, offset


# What orcad reads paths from: made absolute for a daemon that runs in / (the caller's relative
# ORCA_HOME=home still names the same files). XDG_* are passed as they are: a relative one is
# invalid and orcad ignores it, as this process does (orcad.paths), so both use the default.
PATH_VARIABLES = ("ORCA_HOME", "ORCA_CONFIG_DIR", "HOME")


def daemon_environment(environ: Mapping[str, str], socket: str) -> dict[str, str]:
    """The environment of an orcad started here: paths absolute, and this orcad package on its
    path when it is not installed (a source checkout found through the current directory)."""
    env = dict(environ, ORCA_SOCKET=os.path.abspath(socket))
    for name in PATH_VARIABLES:
        if env.get(name):
            # `~` as orcad.paths reads it (HOME itself is taken as it is)
            value = env[name] if name == "HOME" else expand_home(env[name], environ)
            env[name] = os.path.abspath(value)
    python_path = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    package_parent = str(Path(orcad.__file__).resolve().parent.parent)
    if not any(part in package_parent for part in ("site-packages", "dist-packages")):
        python_path.insert(0, package_parent)
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join(python_path)
    return env


def startup_failure(offset: int) -> str:
    """What a daemon that exited at start said about why (its `orcad: ...` line)."""
    try:
        with open(daemon_log_path(), "rb") as log_file:
            log_file.seek(offset)
            lines = log_file.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    said = [line for line in lines if line.startswith("orcad: ")]
    return said[-1].removeprefix("orcad: ") if said else ""


def _ping(path: str) -> tuple[Client, int] | None:
    """A client on the daemon answering at `path`, and that daemon's pid."""
    try:
        client = Client(path, timeout=CALL_TIMEOUT_S)
    except (DaemonUnavailable, ConnectionError):
        return None
    try:
        pid: int = client.call("daemon.ping").pid
    except ConnectionError:
        client.close()
        return None
    return client, pid


def connect(
    args: argparse.Namespace, *, start: bool | None = None, timeout: float = CALL_TIMEOUT_S
) -> Client:
    """A client on the daemon's socket, starting the daemon first when allowed and needed;
    `timeout` bounds each of its calls (and, without a start, connecting)."""
    return open_client(args, start=start, timeout=timeout)[0]


def no_answer_on(path: str) -> str:
    """What a command says when nothing answers on the socket (and no start was allowed)."""
    return f"orcad is not running (no answer on {path})"


def open_client(
    args: argparse.Namespace, *, start: bool | None = None, timeout: float = CALL_TIMEOUT_S
) -> tuple[Client, subprocess.Popen[bytes] | None]:
    """As connect, and the daemon process this call started (None when one was running)."""
    path = socket_path(args)
    problem = socket_path_problem(path)
    if problem is not None:  # no start could help
        raise CommandError(f"{problem}; {SHORTER_SOCKET}", EXIT_NOT_RUNNING)
    allowed = (not getattr(args, "no_start", False)) if start is None else start
    try:
        return Client(path, timeout=timeout), None
    except DaemonUnavailable:
        # a socket derived from the runtime directory, not chosen (--socket, ORCA_SOCKET)
        chosen = getattr(args, "socket", None) or os.environ.get("ORCA_SOCKET")
        if not chosen and (other := serving_elsewhere(path)) is not None:
            with contextlib.suppress(DaemonUnavailable, OSError):
                client = Client(other, timeout=timeout)
                if peer_is_this_user(client.fileno()):
                    return client, None
                client.close()
        if not allowed:
            raise CommandError(no_answer_on(path), EXIT_NOT_RUNNING) from None
    except ForeignPeer as exc:  # no orcad of this user's answers there, and none can start
        raise CommandError(f"cannot connect to orcad at {path}: {exc}", EXIT_NOT_RUNNING) from None
    except OSError as exc:  # path too long, no permission: starting a daemon would not help
        raise CommandError(f"cannot connect to orcad at {path}: {exc}") from None
    with one_start_at_a_time(START_TIMEOUT_S):
        try:  # another orcactl started it while this one waited for its turn
            return Client(path, timeout=timeout), None
        except DaemonUnavailable:
            pass
        except OSError as exc:
            raise CommandError(f"cannot connect to orcad at {path}: {exc}") from None
        return _start_and_reach(path)


@contextlib.contextmanager
def one_start_at_a_time(timeout: float) -> Iterator[None]:
    """Hold the start lock in orcad's home while one orcactl starts orcad: hooks of several
    agent sessions that find none at once (a machine that just booted) started one orcad each,
    of which all but one exited, and on two cores each hook then took about as long as its
    whole budget. A home not made yet is made first, as the start would make it: on a new
    machine all of them find none at once. With a home that cannot be used, or no lock to be
    had within `timeout` seconds, it starts as before (orcad itself lets only one serve)."""
    import filelock  # noqa: PLC0415  (only a start needs it)

    home = daemon_log_path().parent
    lock = filelock.FileLock(str(home / "orcad.start.lock"), mode=0o600)
    try:
        if not home.is_dir():  # start_daemon says why a home cannot be used
            check_home_directory(home)
            home.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock.acquire(timeout=timeout)
    except (filelock.Timeout, OSError, StartupError):
        yield
        return
    try:
        yield
    finally:
        lock.release()


def _start_and_reach(path: str) -> tuple[Client, subprocess.Popen[bytes] | None]:
    process, offset = start_daemon(path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        answered = _ping(path)
        if answered is not None:
            # another orcactl's start may have won while this one's is still on its way out
            client, pid = answered
            return client, (process if pid == process.pid else None)
        if process.poll() is not None:
            # It exited: another orcactl may have started one first; otherwise say why.
            answered = _ping(path)
            if answered is not None:
                return answered[0], None
            reason = startup_failure(offset) or f"exit status {process.returncode}"
            raise CommandError(
                f"orcad could not start: {reason} (log: {daemon_log_path()})", EXIT_NOT_RUNNING
            )
        time.sleep(0.05)
    raise CommandError(
        f"started orcad but it did not answer on {path} within {START_TIMEOUT_S:.0f} s; "
        f"see {daemon_log_path()}",
        EXIT_NOT_RUNNING,
    )


def call(
    args: argparse.Namespace, method: str, params: Any = None, *, start: bool | None = None
) -> Any:
    """One request; a daemon error becomes a CommandError with the daemon's message."""
    with connect(args, start=start) as client:
        try:
            return client.call(method, params)
        except RemoteError as exc:
            raise remote_failure(exc) from None


def remote_failure(exc: RemoteError) -> CommandError:
    """A daemon error for the user (bad usage is refused by argparse before any request)."""
    return CommandError(f"{exc.error.message} ({exc.kind})", error=exc.error)


# What a client call raises when the daemon dies mid-call or answers outside protocol 1.
CONNECTION_FAILURES = (OSError, ProtocolViolation, msgspec.MsgspecError)


def connection_failure(exc: BaseException) -> CommandError:
    """The message for a call that failed below JSON-RPC (no traceback for the user)."""
    if isinstance(exc, (ProtocolViolation, msgspec.MsgspecError)):
        return CommandError(
            f"orcad sent an answer this orcactl cannot read ({exc}); are orcad and orcactl "
            "the same version?"
        )
    if isinstance(exc, TimeoutError):
        return CommandError(
            f"orcad did not answer within {CALL_TIMEOUT_S:g} s: it may be stopped or stuck "
            "(`orcactl doctor` checks it)"
        )
    if isinstance(exc, ConnectionError):
        return CommandError(f"the connection to orcad failed: {exc}")
    return CommandError(str(exc))  # another OSError (a file it could not write, say)


# What JSON leaves raw in strings and a terminal or a reader acts on: DEL, the C1 controls (0x9b
# is CSI), the bidirectional formatting characters (U+202E shows the text after it reversed),
# the tag characters and the other invisible ones (text no reader sees, which a model reads).
# Escaped here as JSON escapes (a surrogate pair above U+FFFF), or the terminal filter
# (orcactl.terminal) would write `\x85` or `\U000e0041`, which are not JSON escapes; the JSON
# still decodes to what was stored.
# So are lone surrogates, which stand for bytes that are not UTF-8 (a path's, decoded with
# surrogateescape): written raw they would be those bytes, and the document no JSON.
_RAW_IN_JSON = re.compile(
    f"[\x7f-\x9f\ud800-\udfff{BIDI_FORMATTING}{TAG_CHARACTERS}{INVISIBLE_CHARACTERS}]"
)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def escape_raw_in_json(text: str) -> str:
    """JSON text with the characters JSON leaves raw that must not reach a reader raw escaped."""
    return _RAW_IN_JSON.sub(_json_escape, text)


def to_json(value: Any, *, ascii_only: bool = False) -> str:
    dumped = json.dumps(msgspec.to_builtins(value), indent=2, ensure_ascii=ascii_only)
    return escape_raw_in_json(dumped)


def writes_unicode(stream: Any) -> bool:
    """Whether `stream` encodes every character (UTF-8, say); one in a terminal's legacy
    encoding (Latin-1) cannot write ☕, and JSON for it escapes every character beyond ASCII."""
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return True
    try:
        return codecs.lookup(encoding).name.startswith("utf-")
    except LookupError:
        return False


def print_json(value: Any) -> None:
    print(to_json(value, ascii_only=not writes_unicode(sys.stdout)))
