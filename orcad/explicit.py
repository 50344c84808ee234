"""Explicit facts: `remember` appends to user.md or a project's memory.md; startup reads both.

Each fact is one Markdown list item appended at the end, so the newest facts are last. A write
takes the file's lock, writes the whole new file to a temporary sibling, fsyncs it, renames it
over the old one and fsyncs the directory: a reader never sees half a file, and a crash leaves
either the old or the new file. Startup hands a session at most a fixed number of bytes of each
file, keeping the newest whole lines (spec: the files are loaded with bounded size), with
control characters a file written by hand or by an older version holds escaped as `remember`
writes them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
from collections.abc import Callable
from pathlib import Path

import filelock
import structlog

from orcad.control_characters import escape_control_characters, has_visible_character
from orcad.durable_files import FileSignature, remove_stale_temps, replace_file_unless_changed
from orcad.errors import InvalidParams, StorageError
from orcad.limits import (
    EXPLICIT_FACT_MAX_CHARS,
    EXPLICIT_LOCK_TIMEOUT_S,
    STARTUP_PROJECT_MAX_BYTES,
)
from orcad.regular_files import NotARegularFile, open_regular_file
from orcad.secrets import secret_kinds
from orcad.storage_faults import advice, fault_reason
from protocol.types import ExplicitFactsInfo

log = structlog.get_logger("orcad.explicit")

PROJECT_MEMORY_FILE = "memory.md"  # a project's explicit facts, in its directory
LOCK_SUFFIX = ".lock"
EXPLICIT_EDITED_RETRIES = 5  # times a fact is added again to a file saved by hand meanwhile
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))  # of a UTF-8 character, after its first byte
# what an editor that saves "UTF-8 with BOM" puts at a file's start: a mark, not a character of
# its first fact
_BYTE_ORDER_MARK = b"\xef\xbb\xbf"


# --- pure ---------------------------------------------------------------------------------


def format_fact(text: str) -> str:
    """The Markdown list item for `text`, ending in a newline; refuses what must not be kept.

    Continuation lines are indented so that a multi-line fact stays one list item.
    """
    fact = text.strip()
    if not fact:
        raise InvalidParams("`text` is empty; give the fact to remember", field="text")
    if not has_visible_character(fact):
        raise InvalidParams(
            "`text` holds only control or invisible characters; give the fact to remember",
            field="text",
        )
    if len(fact) > EXPLICIT_FACT_MAX_CHARS:
        raise InvalidParams(
            f"`text` has {len(fact)} characters; a remembered fact may have at most "
            f"{EXPLICIT_FACT_MAX_CHARS}. Shorten it or split it into several facts",
            field="text",
        )
    kinds = secret_kinds(fact)
    if kinds:
        raise InvalidParams(
            f"`text` looks like it contains a secret ({kinds}); secrets are never written "
            "to memory. Remove the secret and try again",
            field="text",
        )
    lines = [line.rstrip() for line in fact.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    return "- " + "\n  ".join(_visible(line) for line in lines if line) + "\n"


def _visible(line: str) -> str:
    # the files are read with `cat`: a terminal acts on an escape sequence (retitles, clears,
    # writes the clipboard) and a bidirectional override reorders what a reader sees
    return escape_control_characters(line)


def visible_bytes(data: bytes) -> bytes:
    """`data` as startup hands it over: control and bidirectional formatting characters escaped
    as `remember` writes them, a CRLF line end as a newline, and each byte that is not UTF-8 as
    U+FFFD (three bytes, which the bound must count)."""
    text = data.replace(b"\r\n", b"\n").decode("utf-8", errors="replace")
    return escape_control_characters(text).encode("utf-8")


def holds_fact(existing: bytes, line: str) -> bool:
    """Whether the file's content `existing` already holds the list item `line` (as
    `format_fact` writes it) as a whole item: its lines, and no continuation line after them
    (a longer fact that starts with the same line is another fact)."""
    item = b"\n" + line.encode("utf-8").rstrip(b"\n") + b"\n"
    text = b"\n" + existing.removeprefix(_BYTE_ORDER_MARK).replace(b"\r\n", b"\n") + b"\n"
    at = text.find(item)
    while at >= 0:
        if not text.startswith(b"  ", at + len(item)):
            return True
        at = text.find(item, at + 1)
    return False


def append_line(existing: bytes, line: str) -> bytes:
    """`existing` with `line` appended, adding the newline the old content may lack."""
    if existing and not existing.endswith(b"\n"):
        existing += b"\n"
    return existing + line.encode("utf-8")


def newest_lines(data: bytes, max_bytes: int, *, cut: bool) -> tuple[str, bool]:
    """At most `max_bytes` of `data`, keeping its end, as text; and whether anything was dropped.

    `cut` says `data` is already the tail of a larger file. Whole facts are kept: the text
    starts at a list item, never at the indented continuation of one whose start was dropped.
    When not even the newest item fits, its newest whole lines are kept, and when even the last
    line is too long, its end (starting at a character boundary).
    """
    truncated = cut or len(data) > max_bytes
    if len(data) > max_bytes:
        start = len(data) - max_bytes
        cut = data[start - 1 : start] != b"\n"  # a window starting right after a newline is clean
        data = data[start:]
    if cut:
        newline = data.find(b"\n")
        if 0 <= newline < len(data) - 1:
            data = data[newline + 1 :]
        else:
            while data and (data[0] & 0xC0) == 0x80:  # skip UTF-8 continuation bytes
                data = data[1:]
            return data.decode("utf-8", errors="replace"), truncated
    if truncated:
        data = data[_first_item(data) :]
    return data.decode("utf-8", errors="replace"), truncated


def _first_item(data: bytes) -> int:
    """Where the first line of `data` that starts a fact (is not indented) begins; 0 if none."""
    position = 0
    while position < len(data) and data[position] in b" \t":
        newline = data.find(b"\n", position)
        if newline < 0:
            return 0
        position = newline + 1
    return position if position < len(data) else 0


# --- files ----------------------------------------------------------------------------------


def lock_path_for(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


def remember_fact(path: Path, text: str) -> tuple[int, bool]:
    """Append the fact `text` to `path` under `<path>.lock`: the file's size in bytes, and
    whether it held the fact already (then nothing is written)."""
    line = format_fact(text)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with filelock.FileLock(str(lock_path_for(path)), timeout=EXPLICIT_LOCK_TIMEOUT_S):
            return append_fact(path, line)
    except filelock.Timeout as exc:
        raise StorageError(
            f"{path} is locked by another process for more than {EXPLICIT_LOCK_TIMEOUT_S:.0f} s; "
            "try again, or look for a stuck orcad or orcactl",
            path=str(path),
            reason="locked",  # as for a project's lock: a client retries once it is let go
        ) from exc
    except OSError as exc:  # the lock file or the directory: named, not the fact file
        raise StorageError(
            f"could not write {exc.filename or path}: {exc.strerror or exc}; nothing was changed"
        ) from exc


def fact_kept(path: Path, text: str) -> tuple[int, bool]:
    """Whether `path` holds the fact `text` already, as `remember_fact` would find it, and the
    file's size; reads only (no lock, no directory made, nothing written)."""
    line = format_fact(text)
    existing, _signature = _read_facts(path, Path(os.path.realpath(path)))
    return len(existing), holds_fact(existing, line)


def append_fact(path: Path, line: str) -> tuple[int, bool]:
    """Append a formatted fact to `path` atomically, unless the file holds it already (the same
    fact kept twice would be handed to every session twice); the caller holds the file's lock.
    The file's size in bytes, and whether it held the fact already.

    StorageError (nothing written) when the file cannot be read or replaced. A symbolic link
    (a user.md kept with the user's dotfiles) stays one: the file it points to gets the fact, as
    startup reads that file.
    """
    target = Path(os.path.realpath(path))
    # the lock keeps out other writers of facts, not an editor: a file saved by hand while the
    # new one was written is read again, and the fact added to what the user saved
    for _attempt in range(EXPLICIT_EDITED_RETRIES):
        existing, signature = _read_facts(path, target)
        if holds_fact(existing, line):
            log.info("explicit.already_kept", path=str(path), bytes=len(existing))
            return len(existing), True
        content = append_line(existing, line)
        # a copy a crash left between its write and its rename holds the facts as they were,
        # and would outlive one the user deletes from the file by hand
        remove_stale_temps(target)
        if replace_file_unless_changed(target, content, signature):
            log.info("explicit.remembered", path=str(path), bytes=len(content))
            return len(content), False
        log.info("explicit.changed_while_written", path=str(path))
    raise StorageError(
        f"{path} kept changing while the fact was written; nothing was changed. Try again",
        path=str(path),
    )


def _read_facts(path: Path, target: Path) -> tuple[bytes, FileSignature | None]:
    """The bytes of the facts file `target` (`path`, followed), and its signature as read (None
    when it is absent). StorageError when it cannot be read or is not a regular file."""
    try:
        # a FIFO would wait for a writer, holding the lock
        with open_regular_file(target) as handle:
            status = os.fstat(handle.fileno())
            existing = handle.read()
    except FileNotFoundError:
        return b"", None
    except NotARegularFile as exc:  # no passing fault: what to do is the file's own
        wrong, what_to_do = facts_file_fault(path, exc)
        raise StorageError(
            f"{wrong}; nothing was changed: {what_to_do}", path=str(path), reason="corrupt"
        ) from exc
    except OSError as exc:
        raise StorageError(
            f"could not read {path}: {exc.strerror or exc}; nothing was changed", path=str(path)
        ) from exc
    return existing, (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def facts_file_fault(path: Path, exc: OSError) -> tuple[str, str]:
    """What is wrong with the facts file `path` that reading it met `exc`, and what to do:
    `remember` is refused with it, a session starts without the file's facts and records it,
    and doctor says the same."""
    if isinstance(exc, NotARegularFile):
        aside = shlex.quote(f"{path}.not-a-file")
        return (
            f"{path} is not a regular file (a FIFO, a device or a directory), so the facts kept "
            "there cannot be read",
            f"move it aside (mv {shlex.quote(str(path))} {aside}), and `remember` makes the file "
            "again",
        )
    reason = fault_reason(exc)
    what_to_do = advice(reason) if reason is not None else None
    return (
        f"could not read {path}: {exc.strerror or exc}",
        what_to_do or "look at the file and its disk (dmesg), and try again",
    )


# How a session start records a facts file it could not read (recent errors, for
# daemon.status): doctor's memory check names such a file itself, as it is now.
_STARTUP_FAULT_PREFIX = "session.open: "
_STARTUP_FAULT_CONSEQUENCE = "; the session started without them: "


def startup_fault(wrong: str, what_to_do: str) -> str:
    """The recent error a session start records for a facts file it could not read."""
    return f"{_STARTUP_FAULT_PREFIX}{wrong}{_STARTUP_FAULT_CONSEQUENCE}{what_to_do}"


def is_startup_fault(message: str) -> bool:
    """Whether a recorded error is one `startup_fault` made."""
    return message.startswith(_STARTUP_FAULT_PREFIX) and _STARTUP_FAULT_CONSEQUENCE in message


def facts_file_problem(path: Path) -> tuple[str, str] | None:
    """facts_file_fault for the facts file `path` when it is there and cannot be read (opened
    as startup opens it, never waited on); None when it is absent or can be read."""
    try:
        with open_regular_file(path):
            return None
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return facts_file_fault(path, exc)


def read_bounded(
    path: Path,
    max_bytes: int,
    on_fault: Callable[[OSError], None] | None = None,
    *,
    log_fault: bool = True,
) -> tuple[str, bool]:
    """The newest whole lines of `path` within `max_bytes`, and whether lines were left out.

    A missing file is empty; so is one that cannot be read, or is not a regular file (a FIFO
    would wait for a writer), which is logged (unless not `log_fault`: orcactl keeps no log)
    and handed to `on_fault`. Only the file's tail is read, however large. The bound counts the
    text as returned, control characters escaped.
    """
    try:
        with open_regular_file(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - max_bytes - 1)  # one byte more tells whether a line starts there
            if start <= len(_BYTE_ORDER_MARK):  # read from the file's start, which may be a mark
                start = 0
            handle.seek(start)
            data = handle.read(size - start)
    except FileNotFoundError:
        return "", False
    except OSError as exc:
        if log_fault:
            log.warning("explicit.unreadable", path=str(path), error=str(exc))
        if on_fault is not None:
            on_fault(exc)
        return "", False
    if start == 0:
        return newest_lines(
            visible_bytes(data.removeprefix(_BYTE_ORDER_MARK)), max_bytes, cut=False
        )
    # The extra byte decides the first line: a newline there, and the rest starts a line;
    # anything else, and the rest starts inside one. Decided on the text as handed over, since
    # a CRLF line end made a newline can leave the tail short of the bound; the rest of a
    # character the read started inside is no text.
    data = visible_bytes(data.lstrip(_CONTINUATION_BYTES))
    if not data.startswith(b"\n"):
        return newest_lines(data, max_bytes, cut=True)[0], True
    data = data[1:]
    return newest_lines(data[_first_item(data) :], max_bytes, cut=False)[0], True


def explicit_facts(
    path: Path, user_file: Path | None, *, log_fault: bool = True
) -> ExplicitFactsInfo:
    """The project's memory.md at `path` as a new session is given it (bounded, never waited
    on: see read_bounded), and where user.md is (projects.inspect, and orcactl inspect of a
    project whose ledger orcad cannot read). Blocking: call from a thread."""
    faults: list[str] = []

    def fault(exc: OSError) -> None:
        wrong, what_to_do = facts_file_fault(path, exc)
        faults.append(f"{wrong}; {what_to_do}")

    text, truncated = read_bounded(path, STARTUP_PROJECT_MAX_BYTES, fault, log_fault=log_fault)
    user_bytes = None
    if user_file is not None:
        with contextlib.suppress(OSError):
            found = user_file.stat()
            # a directory or a FIFO there gives a session no facts, whatever its size says
            user_bytes = found.st_size if stat.S_ISREG(found.st_mode) else None
    return ExplicitFactsInfo(
        path=str(path),
        text=text,
        truncated=truncated,
        problem=faults[0] if faults else None,
        user_path=None if user_file is None else str(user_file),
        user_bytes=user_bytes,
    )
