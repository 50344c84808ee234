"""Reaching orcad from a hook with the standard library only (no msgspec, no trio).

One JSON-RPC request per line, one answer per line: the same wire as `protocol.client`, kept
minimal so that a hook process starts in a few milliseconds.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import stat
import struct
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

ANSWER_MAX_BYTES = 64 * 1024 * 1024
START_POLL_S = 0.05


def encode_json(value: Any) -> bytes:
    """`value` as a request carries it to orcad (the hooks bound what they send by this size).
    A lone surrogate (half an emoji an agent passed on) becomes U+FFFD, not a failed call; two
    halves that meet (text blocks joined) become their emoji again."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        whole = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return whole.encode("utf-8")


class DaemonError(Exception):
    """The daemon answered with a JSON-RPC error object."""

    def __init__(self, error: dict[str, Any]) -> None:
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        self.code = error.get("code")
        self.kind = str((data or {}).get("kind", "unknown"))
        self.message = str(error.get("message", "error"))
        super().__init__(f"{self.message} ({self.kind})")


class Unreachable(Exception):
    """No daemon answers on the socket, and none could be started in time."""


def socket_path(explicit: str | None = None) -> str:
    """The daemon's socket, resolved as orcactl resolves it (`~` expanded, made absolute)."""
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    if os.environ.get("ORCA_SOCKET"):
        return os.environ["ORCA_SOCKET"]
    runtime_home = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime_home):  # a relative one is ignored, as orcad.paths ignores it
        return os.path.join(runtime_home, "orca", "orcad.sock")
    from orcad.paths import resolve_paths  # noqa: PLC0415  (platformdirs: rarely needed)

    return str(resolve_paths().socket)


class HookClient:
    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(path)
        except OSError:
            self._sock.close()
            raise
        if not peer_is_this_user(self._sock.fileno()):
            # a socket another user put where orcad's was looked for: no prompt goes to it
            self._sock.close()
            raise PermissionError(
                f"the process serving {path} runs as another user; nothing was sent to it"
            )
        self._buffer = b""
        self._ids = itertools.count(1)

    def fileno(self) -> int:
        """The connection's descriptor (to ask who is at the other end)."""
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> HookClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self._ids)
        request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        line = encode_json(request) + b"\n"
        self._sock.sendall(line)
        while True:
            answer = json.loads(self._read_line())
            if not isinstance(answer, dict) or answer.get("id") != request_id:
                continue
            if answer.get("error") is not None:
                raise DaemonError(answer["error"])
            result = answer.get("result")
            return result if isinstance(result, dict) else {}

    def _read_line(self) -> bytes:
        while b"\n" not in self._buffer:
            data = self._sock.recv(65536)
            if not data:
                raise ConnectionError("orcad closed the connection")
            self._buffer += data
            if len(self._buffer) > ANSWER_MAX_BYTES:
                raise ConnectionError("orcad's answer is too long")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line


# what orcad writes in its memory root while it serves: its pid and its socket
INSTANCE_FILE = os.path.join("memory", "orcad.pid")
INSTANCE_MAX_BYTES = 4096


def serving_elsewhere(path: str) -> str | None:
    """The socket of the orcad serving this environment's memory (ORCA_HOME, else ~/.orca) as
    its pid file names it, when that is not `path`. One orcad serves one memory: a client whose
    environment gives another runtime directory (an agent starts its MCP server without
    XDG_RUNTIME_DIR) finds nothing on its own socket, and the orcad it started exited at once,
    naming the one already serving.

    Only an orcad of this user's, alive, is trusted so: the pid must name a live process of
    this user, and the socket and its directory must be this user's and closed to others. A
    pid file left by a crash may name a socket in a shared directory (`/tmp/runtime-UID`),
    which another user could have taken since."""
    home = os.environ.get("ORCA_HOME") or os.path.join("~", ".orca")
    if home == "~" or home.startswith("~/"):  # as orcad.paths.expand_home reads it
        home = os.path.expanduser("~") + home[1:]
    try:
        instance = _read_instance(os.path.join(home, INSTANCE_FILE))
        pid, socket_file = instance["pid"], instance["socket"]
        if not (isinstance(pid, int) and pid > 0 and isinstance(socket_file, str)):
            return None
        if not os.path.isabs(socket_file) or socket_file == path:
            return None
        os.kill(pid, 0)  # alive, and ours (another user's: PermissionError)
        uid = os.getuid()
        found = os.lstat(socket_file)
        directory = os.lstat(os.path.dirname(socket_file))
    except Exception:  # no pid file, a foreign or dead one, garbage: none
        return None
    if not stat.S_ISSOCK(found.st_mode) or found.st_uid != uid:
        return None
    if not stat.S_ISDIR(directory.st_mode) or directory.st_uid != uid:
        return None
    if directory.st_mode & 0o022:  # others could put a socket there
        return None
    return socket_file


def peer_is_this_user(descriptor: int) -> bool:
    """Whether the process at the other end of a connected Unix socket runs as this user
    (Linux's SO_PEERCRED; where there is none, the checks of the socket's path stand alone).
    Asked of the connection itself, it holds even if the path was swapped after it was looked
    at."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    with socket.socket(fileno=os.dup(descriptor)) as connected:
        credentials = connected.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS)
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return bool(uid == os.getuid())


_PEER_CREDENTIALS = struct.calcsize("3i")


def _read_instance(path: str) -> dict[str, Any]:
    """The pid file's JSON object; it must be a regular file (a FIFO would block the open)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError(path)
        data = os.read(descriptor, INSTANCE_MAX_BYTES)
    finally:
        os.close(descriptor)
    instance = json.loads(data)
    if not isinstance(instance, dict):
        raise TypeError(path)
    return instance


def connect(
    path: str, *, deadline: float, start: bool = True, elsewhere: bool = False
) -> HookClient:
    """A client on the socket, else (with `elsewhere`: a socket derived, not chosen) on the one
    the orcad serving this memory names; when nothing answers, start orcad as orcactl does and
    wait for it until `deadline` (time.monotonic)."""
    timeout = max(0.1, deadline - time.monotonic())
    try:
        return HookClient(path, timeout)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        if elsewhere and (other := serving_elsewhere(path)) is not None:
            try:
                client = HookClient(other, max(0.1, deadline - time.monotonic()))
            except OSError:
                pass  # a pid file left by an orcad that is gone
            else:
                if peer_is_this_user(client.fileno()):
                    return client
                client.close()
        if not start:
            raise Unreachable(f"orcad is not running (no answer on {path})") from exc
    except OSError as exc:
        raise Unreachable(f"cannot connect to orcad at {path}: {exc}") from exc
    from orcactl.connect import one_start_at_a_time  # noqa: PLC0415  (orcad is down)

    with one_start_at_a_time(max(0.0, deadline - time.monotonic())):
        try:  # another hook (or orcactl) started it while this one waited for its turn
            return HookClient(path, max(0.1, deadline - time.monotonic()))
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        except OSError as exc:
            raise Unreachable(f"cannot connect to orcad at {path}: {exc}") from exc
        if time.monotonic() >= deadline:  # the wait for another start took the hook's time
            raise Unreachable(f"orcad is not running (no answer on {path}) and no time is left")
        return _start_and_wait(path, deadline)


def _start_and_wait(path: str, deadline: float) -> HookClient:
    from orcactl.connect import CommandError, start_daemon  # noqa: PLC0415  (orcad is down)

    try:
        process, _offset = start_daemon(path)
    except CommandError as exc:  # its log cannot be opened to start it with
        raise Unreachable(str(exc)) from None
    retried = False
    while time.monotonic() < deadline:
        try:
            client = HookClient(path, max(0.1, deadline - time.monotonic()))
        except (FileNotFoundError, ConnectionRefusedError):
            if process.poll() is not None and process.returncode != 0:
                if not retried:  # it may have lost to another orcad, serving by now: once more
                    retried = True
                    continue
                raise Unreachable(
                    f"orcad could not start (exit status {process.returncode}); "
                    "see orcad.log under ORCA_HOME"
                ) from None
            time.sleep(START_POLL_S)
            continue
        except OSError as exc:
            raise Unreachable(f"cannot connect to orcad at {path}: {exc}") from exc
        try:
            client.call("daemon.ping", {})
        except (OSError, ValueError, DaemonError):
            client.close()
            time.sleep(START_POLL_S)
            continue
        return client
    raise Unreachable(f"started orcad but it did not answer on {path} in time")
