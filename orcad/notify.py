"""Telling systemd how the daemon is doing: sd_notify over the NOTIFY_SOCKET datagram socket.

Without NOTIFY_SOCKET (not started by systemd with Type=notify) every call does nothing.
"""

from __future__ import annotations

import socket
from collections.abc import MutableMapping

import structlog

from orcad.limits import NOTIFY_SEND_TIMEOUT_S

log = structlog.get_logger("orcad.notify")


def notify_address(value: str) -> str | None:
    """The AF_UNIX address for a NOTIFY_SOCKET value: a path, or `@name` for the abstract
    namespace (a leading NUL byte); None for kinds orcad does not speak (vsock:...)."""
    if value.startswith("@"):
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    return None


def status_line(text: str) -> str:
    """A STATUS= assignment; assignments are newline-separated, so the text stays on one line."""
    return "STATUS=" + " ".join(text.split())


class Notifier:
    """Sends state changes to the service manager; a no-op when none asked for them."""

    def __init__(self, address: str | None) -> None:
        self.address = address

    @classmethod
    def from_environ(cls, environ: MutableMapping[str, str]) -> Notifier:
        """Take NOTIFY_SOCKET out of the environment: processes we spawn must not speak for us."""
        value = environ.pop("NOTIFY_SOCKET", None)
        if not value:
            return cls(None)
        address = notify_address(value)
        if address is None:
            log.warning("notify.unsupported_socket", notify_socket=value)
        return cls(address)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *assignments: str) -> bool:
        """Send `KEY=value` lines as one datagram; False (logged) when it could not be sent."""
        if self.address is None:
            return False
        message = "\n".join(assignments).encode("utf-8")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.settimeout(NOTIFY_SEND_TIMEOUT_S)
                sock.connect(self.address)
                sock.sendall(message)
        except OSError as exc:
            log.warning("notify.failed", error=exc.strerror or str(exc), message=assignments[0])
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", status_line(status))

    def stopping(self, status: str) -> bool:
        return self.send("STOPPING=1", status_line(status))

    def status(self, status: str) -> bool:
        return self.send(status_line(status))
