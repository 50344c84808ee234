"""`orcactl service` steps carried out (or, dry, described) and recorded, and what the service
manager and the daemon say without anything being changed."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from orcactl import service_files
from orcactl.connect import EXIT_ERROR, EXIT_OK, CommandError, print_json
from orcad.paths import runtime_dir_for
from orcad.regular_files import NotARegularFile, read_regular_file
from protocol.client import Client, DaemonUnavailable, ProtocolViolation
from protocol.errors import RemoteError

COMMAND_TIMEOUT_S = 60.0
UNITS = (service_files.SOCKET_UNIT, service_files.SERVICE_UNIT)


@dataclass
class Steps:
    """Carries out (or, dry, only describes) each step and keeps a record to print."""

    dry_run: bool
    json: bool
    record: list[dict[str, Any]] = field(default_factory=list)
    failed: bool = False

    def say(self, action: str, shown: str, **fields: Any) -> None:
        self.record.append({"action": action, **fields})
        if not self.json:
            print(shown)

    def note(self, text: str) -> None:
        self.say("note", f"note: {text}", text=text)

    def write(self, path: Path, content: bytes) -> bool:
        """Write `path` if its content differs; True when it changed (or would)."""
        try:
            if read_regular_file(path) == content:
                self.say("unchanged", f"unchanged {path}", path=str(path))
                return False
        except (FileNotFoundError, NotARegularFile):  # (a link to a FIFO: replaced, not read)
            pass
        if self.dry_run:
            text = content.decode()
            indented = "".join(f"    {line}\n" for line in text.splitlines())
            shown = f"would write {path}:\n{indented}"
            self.say("would_write", shown, path=str(path), content=text)
            return True
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()  # whatever is there, a symlink included, is not written through
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with os.fdopen(os.open(tmp, flags, 0o644), "wb") as tmp_file:
                tmp_file.write(content)
            tmp.chmod(0o644)
            tmp.replace(path)
        except OSError as exc:  # a full or read-only disk: no half-written file is left there
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise self.stopped(
                f"cannot write {path}: {_reason(exc, path)}; it is as it was"
            ) from None
        self.say("wrote", f"wrote {path}", path=str(path))
        return True

    def make_directory(self, path: Path) -> None:
        """Create a private directory (and its parents) when it is missing."""
        if path.is_dir():
            return
        if self.dry_run:
            self.say("would_create", f"would create {path} (mode 0700)", path=str(path))
            return
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise self.stopped(f"cannot create {path}: {exc.strerror or exc}") from None
        self.say("created", f"created {path} (mode 0700)", path=str(path))

    def remove(self, path: Path) -> bool:
        if not os.path.lexists(path):  # a dangling symlink is still something to remove
            self.say("absent", f"already absent {path}", path=str(path))
            return False
        if self.dry_run:
            self.say("would_remove", f"would remove {path}", path=str(path))
            return True
        try:
            path.unlink()
        except OSError as exc:
            raise self.stopped(f"cannot remove {path}: {exc.strerror or exc}") from None
        self.say("removed", f"removed {path}", path=str(path))
        return True

    def remove_empty_directory(self, path: Path) -> None:
        """Remove a directory install made, when nothing is left in it (else leave it)."""
        if self.dry_run:
            shown = f"would remove {path}, made by install, if nothing else is in it"
            self.say("would_remove", shown, path=str(path))
            return
        try:
            path.rmdir()
        except OSError:  # gone already, or holds what is not orca's: left as it is
            return
        self.say("removed", f"removed {path}, made by install and now empty", path=str(path))

    def run(self, argv: list[str]) -> bool:
        shown = shlex.join(argv)
        if self.dry_run:
            self.say("would_run", f"would run: {shown}", argv=argv)
            return True
        try:
            result = subprocess.run(
                argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
            )
        except (subprocess.TimeoutExpired, OSError) as exc:
            self.failed = True
            error = (
                f"no answer within {COMMAND_TIMEOUT_S:g} s"
                if isinstance(exc, subprocess.TimeoutExpired)
                else str(exc)
            )
            self.say("failed", f"failed: {shown}: {error}", argv=argv, status=None, error=error)
            return False
        if result.returncode == 0:
            self.say("ran", f"ran: {shown}", argv=argv, status=0)
            return True
        detail = (result.stderr or result.stdout).strip().splitlines()
        error = detail[-1] if detail else ""
        self.failed = True
        text = f"failed ({result.returncode}): {shown}" + (f": {error}" if error else "")
        self.say("failed", text, argv=argv, status=result.returncode, error=error)
        return False

    def stopped(self, reason: str) -> CommandError:
        """A step that failed where carrying on would install half a service: the steps shown
        before it stand, none after it is tried. With --json the failure document lists the
        steps carried out, so that what was written can be found and cleaned up."""
        return CommandError(
            f"{reason}; no later step was carried out",
            details={"dry_run": self.dry_run, "steps": self.record},
        )

    def finish(self, manager: str, **extra: Any) -> int:
        if self.json:
            print_json({"manager": manager, "dry_run": self.dry_run, "steps": self.record, **extra})
        return EXIT_ERROR if self.failed else EXIT_OK


def _reason(exc: OSError, path: Path) -> str:
    """The system's words, after the path they are about when that is not `path` (its
    temporary file, a directory above it): "Is a directory" alone would blame the unit."""
    words = exc.strerror or str(exc)
    if exc.filename is None or os.fspath(exc.filename) == str(path):
        return words
    return f"{os.fspath(exc.filename)}: {words}"


def probe(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    """Ask the service manager something without changing anything; None when it cannot answer."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except OSError:
        return None


def systemd_reachable() -> bool:
    result = probe(["systemctl", "--user", "show-environment"])
    return result is not None and result.returncode == 0


def unit_states(query: str) -> dict[str, str]:
    """`systemctl --user is-enabled|is-active` for both units: {unit: state}."""
    result = probe(["systemctl", "--user", query, *UNITS])
    lines = result.stdout.split() if result else []
    return {unit: (lines[i] if i < len(lines) else "unknown") for i, unit in enumerate(UNITS)}


def daemon_pid(socket_path: Path) -> int | None:
    """The pid of the orcad answering on the socket; None when nothing does, or something that
    is not orcad (it answers outside the protocol, or with an error where orcad gives its pid)."""
    try:
        with Client(str(socket_path), timeout=5) as client:
            return int(client.call("daemon.ping").pid)
    except (DaemonUnavailable, OSError, ProtocolViolation, msgspec.MsgspecError, RemoteError):
        return None


def systemd_socket_path() -> Path:
    """Where the user manager puts ListenStream=%t/orca/orcad.sock."""
    return runtime_dir_for(os.environ) / "orcad.sock"
