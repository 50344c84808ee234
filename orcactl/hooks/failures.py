"""Hook problems, kept where `orcactl status` and `orcactl doctor` find them afterwards.

A hook must never fail the agent, so it cannot report a problem by failing: it appends one line
to `<memory root>/agent-hooks.jsonl` (private, bounded, under `agent-hooks.jsonl.lock`) and goes
on. Never turn content.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from orcad.regular_files import read_regular_file

if TYPE_CHECKING:
    from typing import Any

FAILURES_FILE = "agent-hooks.jsonl"
FAILURES_MAX_BYTES = 64 * 1024  # past this the older half is dropped
MESSAGE_MAX_CHARS = 300  # a message naming an agent-given path or cwd stays one short line
FAILURES_SHOWN = 5
LOCK_SUFFIX = ".lock"  # agent-hooks.jsonl.lock: taken to append and trim
# How long a hook waits for another's append and trim (milliseconds each) before it leaves its
# own problem unrecorded; the watchdog's record must not outlast the hook's budget either.
FAILURES_LOCK_TIMEOUT_S = 1.0
LOCK_POLL_S = 0.005

_recording = False  # a record is under way in this process (the watchdog must not start another)


def memory_root() -> Path:
    """$ORCA_HOME/memory, else ~/.orca/memory (as orcad.paths resolves it, without imports)."""
    home = os.environ.get("ORCA_HOME")
    if home:
        if home == "~" or home.startswith("~/"):  # as orcad.paths.expand_home reads it
            home = str(os.environ.get("HOME") or Path.home()) + home[1:]
        return Path(home) / "memory"
    return Path(os.environ.get("HOME") or Path.home()) / ".orca" / "memory"


def failures_path() -> Path:
    return memory_root() / FAILURES_FILE


def recording() -> bool:
    """Whether this process is in the middle of recording a problem. The hook's watchdog, a
    signal handler, may come in there: a record of its own would wait for the lock this process
    is already waiting on (or holds), and meet a module half imported."""
    return _recording


def abandon_record() -> None:
    """What a record cut short by the process's exit leaves: this process's trimmed copy."""
    path = failures_path()
    with contextlib.suppress(OSError):
        os.unlink(path.with_name(f"{path.name}.{os.getpid()}.tmp"))


def record_failure(
    agent: str,
    event: str,
    kind: str,
    message: str,
    *,
    lock_timeout: float = FAILURES_LOCK_TIMEOUT_S,
) -> None:
    """Append one problem; a failure to record is itself ignored (the hook already told stderr)."""
    global _recording  # noqa: PLW0603  (one flag for the whole process, read by a signal handler)
    _recording = True
    try:
        _record(agent, event, kind, message, lock_timeout)
    finally:
        _recording = False


def _record(agent: str, event: str, kind: str, message: str, lock_timeout: float) -> None:
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if len(message) > MESSAGE_MAX_CHARS:
        message = message[: MESSAGE_MAX_CHARS - 3] + "..."
    fields = {"at": at, "agent": agent[:40], "event": event[:40], "kind": kind, "message": message}
    line = json.dumps(fields) + "\n"
    path = failures_path()
    # OSError (filelock.Timeout among them), and a module half imported when the watchdog
    # records while the hook was importing it: a record that fails is left out, nothing more
    with contextlib.suppress(Exception):
        if not os.environ.get("ORCA_HOME") and not os.path.isdir(path.parents[2]):
            return  # a HOME that does not exist (`nobody`'s /nonexistent) is not made for this
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        import filelock  # noqa: PLC0415  (only a hook that met a problem loads it)

        # hooks of several agents fail at once: a trim replaces the file, and an append or
        # another trim meanwhile would go to the replaced one and be lost
        lock = filelock.FileLock(str(path.with_name(path.name + LOCK_SUFFIX)), mode=0o600)
        with lock.acquire(timeout=lock_timeout, poll_interval=LOCK_POLL_S):
            _append(path, line.encode("utf-8"))


def _append(path: Path, line: bytes) -> None:
    """Append `line`, then trim the file to its bound; the caller holds the file's lock."""
    # O_NONBLOCK: a FIFO there must not hold the hook (nor its watchdog) until a reader comes
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    descriptor = os.open(path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return
        os.fchmod(descriptor, 0o600)  # private even when an older file was not
        os.write(descriptor, line)
        size = os.fstat(descriptor).st_size
        if size > FAILURES_MAX_BYTES:
            _trim(path, descriptor, size)
    finally:
        os.close(descriptor)


def _trim(path: Path, descriptor: int, size: int) -> None:
    """Keep the newest whole lines of the last half of the bound (the file may be far larger)."""
    tail = os.pread(descriptor, FAILURES_MAX_BYTES // 2, size - FAILURES_MAX_BYTES // 2)
    kept = tail.partition(b"\n")[2]  # the first line read is cut
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    temp = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(temp, "wb") as handle:
            handle.write(kept)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def read_failures(path: Path | None = None) -> list[dict[str, Any]]:
    """Every recorded problem, oldest first; lines that do not parse are skipped."""
    try:
        text = read_regular_file(path or failures_path()).decode("utf-8", errors="replace")
    except OSError:  # a FIFO or device there included (never waited on)
        return []
    failures = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            failures.append(entry)
    return failures


def recent_failures(since_s: float = 86400.0, now: float | None = None) -> list[dict[str, Any]]:
    """The problems recorded in the last `since_s` seconds, oldest first."""
    moment = time.time() if now is None else now
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment - since_s))
    return [f for f in read_failures() if str(f.get("at", "")) >= cutoff]


def status_lines(failures: list[dict[str, Any]]) -> list[str]:
    """What `orcactl status` shows about agent hook problems (nothing when there were none)."""
    if not failures:
        return []
    lines = ["", f"Agent hook problems (last day, {len(failures)}; {failures_path()}):"]
    for failure in failures[-FAILURES_SHOWN:]:
        lines.append(
            f"  {failure.get('at')} {failure.get('agent')} {failure.get('event')} "
            f"{failure.get('kind')}: {failure.get('message')}"
        )
    return lines
