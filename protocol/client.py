"""A small synchronous client, for orcactl and scripts. One request at a time."""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from typing import Any, Protocol, TypeVar, overload

import msgspec

from protocol.errors import RemoteError
from protocol.framing import LineFramer, LineTooLong
from protocol.jsonrpc import Request, encode_line, params_object, response_decoder
from protocol.types import METHODS, Params, Result

R = TypeVar("R", bound=Result)

CLIENT_MAX_LINE_BYTES = 64 * 1024 * 1024
CALL_TIMEOUT_S = 30.0  # by default: a call's send, and the whole wait for its answer
CONNECT_BACKLOG_WAIT_S = 30.0  # without a timeout, how long to wait for room in a full backlog


class DaemonUnavailable(ConnectionError):
    """Nothing answers on the socket (not running, or the path is wrong)."""


class ProtocolViolation(Exception):
    """The peer sent something that is not a JSON-RPC response."""


class ForeignPeer(PermissionError):
    """The process serving the socket runs as another user: nothing is sent to it. A socket in
    a directory others can write in may have been put there by anyone, and what a client sends
    (prompts, turns, memory) is for the user's own daemon only."""


class _Connected(Protocol):
    def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...


def peer_uid(sock: _Connected) -> int | None:
    """The uid of the process at the other end of a connected Unix socket (a client's, or one
    orcad accepted), where the OS tells (SO_PEERCRED on Linux; None elsewhere); asked of the
    connection, so a path swapped since cannot fool it."""
    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if so_peercred is None:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", raw)[1]
    return uid


class RequestRefused(RemoteError, ConnectionError):
    """An error the daemon could tie to no request (its id is null): it refused the connection
    (busy), or could not read the line it was sent (too large, nested too deep). It answers the
    request in flight, and is a ConnectionError too, since the daemon may have closed it."""


class Client:
    def __init__(self, socket_path: str, *, timeout: float | None = CALL_TIMEOUT_S) -> None:
        self.socket_path = socket_path
        self._timeout = timeout  # for each call: its send, and the whole wait for its answer
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._connect(socket_path, timeout)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            self._sock.close()
            raise DaemonUnavailable(f"no daemon answers at {socket_path}: {exc.strerror}") from exc
        except OSError:
            self._sock.close()
            raise
        uid = peer_uid(self._sock)
        if uid is not None and uid != os.getuid():
            self._sock.close()
            raise ForeignPeer(
                f"the process serving {socket_path} runs as uid {uid}, not as you "
                f"({os.getuid()}); nothing was sent to it"
            )
        self._framer = LineFramer(CLIENT_MAX_LINE_BYTES)
        self._lines: list[bytes] = []
        self._ids = itertools.count(1)

    def fileno(self) -> int:
        """The connection's descriptor (to ask who is at the other end)."""
        return self._sock.fileno()

    def _connect(self, socket_path: str, timeout: float | None) -> None:
        # A Unix socket whose listen backlog is full refuses a socket with a timeout at once
        # (EAGAIN) instead of waiting: wait for room ourselves, within the timeout.
        deadline = time.monotonic() + (CONNECT_BACKLOG_WAIT_S if timeout is None else timeout)
        pause = 0.001
        while True:
            try:
                self._sock.connect(socket_path)
                return
            except BlockingIOError:
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    @overload
    def call(self, method: str, params: Params | None = None, *, result_type: type[R]) -> R: ...
    @overload
    def call(self, method: str, params: Params | dict[str, Any] | None = None) -> Any: ...

    def call(
        self,
        method: str,
        params: Params | dict[str, Any] | None = None,
        *,
        result_type: type[Any] | None = None,
    ) -> Any:
        """Send one request and wait for its response; raise RemoteError on an error object.

        Returns the result decoded as `result_type`, else as the method's result Struct when the
        method is known, else as plain JSON values.
        """
        request_id = next(self._ids)
        self._sock.settimeout(self._timeout)  # (a wait for an earlier answer shortened it)
        try:
            self._sock.sendall(encode_line(Request(method, params_object(params), request_id)))
        except (BrokenPipeError, ConnectionResetError) as exc:
            refusal = self._refusal()  # refused (busy) and closed before the request arrived
            if refusal is not None:
                raise refusal from exc
            raise
        # the timeout bounds the whole wait for this answer: a server sending other lines (or
        # one byte at a time) must not restart it with each read
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            line = self._read_line(deadline)
            response = response_decoder.decode(line)
            if response.id is None and response.error is not None:
                raise RequestRefused(response.error)
            if response.id != request_id:
                continue  # a late answer to a request we gave up on
            if response.error is not None:
                raise RemoteError(response.error)
            if result_type is None and method in METHODS:
                result_type = METHODS[method][1]
            raw = response.result
            if result_type is None:
                return msgspec.json.decode(raw)
            return msgspec.json.decode(raw, type=result_type)

    def _refusal(self) -> RequestRefused | None:
        """The error a closing daemon left on the connection, if it left one."""
        try:
            while True:
                response = response_decoder.decode(self._read_line())
                if response.id is None and response.error is not None:
                    return RequestRefused(response.error)
        except (OSError, ProtocolViolation, msgspec.MsgspecError):
            return None

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (for tests and diagnostics)."""
        self._sock.sendall(data)

    def read_raw_line(self) -> bytes:
        return self._read_line()

    def _read_line(self, deadline: float | None = None) -> bytes:
        """The next line, read by `deadline` (time.monotonic()) when given, else within the
        socket's timeout for each read."""
        while not self._lines:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("timed out")
                self._sock.settimeout(remaining)
            data = self._sock.recv(65536)
            if not data:
                raise ConnectionError("the daemon closed the connection")
            for event in self._framer.feed(data):
                if isinstance(event, LineTooLong):
                    raise ProtocolViolation("response line exceeds the client limit")
                self._lines.append(event)
        return self._lines.pop(0)
