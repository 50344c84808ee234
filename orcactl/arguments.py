"""argparse types: a value the daemon would refuse is bad usage (exit 2) before any request."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable

from orcactl.connect import EXIT_USAGE, CommandError
from orcad.control_characters import has_visible_character
from orcad.deliberate.approvals import parse_grant_id
from orcad.errors import InvalidParams
from protocol.types import CLIENT_ID_MAX_CHARS, NO_CONTROL_CHARACTERS

_PROJECT_ID = re.compile(r"[0-9a-f]{64}")  # sha256 of the project identity, as orcad names it
_CANDIDATE_ID = re.compile(r"cand_[0-9a-f]{32}")  # orcad.capture.ledger's
_JOB_ID = re.compile(r"job_[0-9a-f]{32}")  # orcad.capture.source's
_RECORD_ID = re.compile(r"mem_[0-9a-f]{32}")  # orcad.deliberate.queries'
_APPROVAL_ID = re.compile(r"apr_[0-9a-f]{32}")  # orcad.deliberate.approvals'


def bounded_int(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high] (no upper bound when high is None)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            wanted = f"{low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{value} is out of range ({wanted})")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive, finite number of seconds")
    return value


def utf8_text(text: str) -> str:
    """Text a request can carry. Bytes that are not UTF-8 (a terminal in another encoding) reach
    Python as lone surrogates, which no JSON encoder writes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("the text is not valid UTF-8") from None
    return text


utf8_text.__name__ = "text"  # argparse names the type in its own messages


def text_of_at_most(max_chars: int) -> Callable[[str], str]:
    """Text that is not blank and, trimmed, has at most max_chars characters."""

    def parse(text: str) -> str:
        trimmed = utf8_text(text).strip()
        if not trimmed:
            raise argparse.ArgumentTypeError("the text is empty")
        if not has_visible_character(trimmed):  # orcad refuses it too: nothing to keep
            raise argparse.ArgumentTypeError(
                "the text holds only control or invisible characters (such as zero-width spaces)"
            )
        if len(trimmed) > max_chars:
            raise argparse.ArgumentTypeError(
                f"the text has {len(trimmed)} characters; at most {max_chars} are allowed"
            )
        return text

    parse.__name__ = "text"
    return parse


CWD_GONE = (
    "the current directory no longer exists (it was removed or renamed after the shell entered "
    "it); cd to one that does"
)


def utf8_path(role: str, path: str, consequence: str) -> str:
    """`path` when it is UTF-8. One named in another encoding (a directory made on a system with
    another locale) reaches Python with lone surrogates, which neither orcad's JSON nor an
    agent's configuration can carry: bad usage, naming the path's role (`the socket path`) and
    showing its bytes, then `consequence` (which cannot carry it, and what to do)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise CommandError(
            f"{role} {shown} is not valid UTF-8, {consequence}", EXIT_USAGE
        ) from None
    return path


def current_directory(instead: str = "give --cwd DIR") -> str:
    """The working directory; one removed under the shell is bad usage, named as such, before
    any request (os.getcwd fails with a bare ENOENT there), and so is one whose path is not
    UTF-8, which no JSON request can carry: refused before a daemon is started for it. The
    message ends with `instead`, how the command is given a directory of its own."""
    try:
        path = os.getcwd()
    except FileNotFoundError:
        raise CommandError(f"{CWD_GONE}, or {instead}", EXIT_USAGE) from None
    return utf8_path(
        "the current directory's path",
        path,
        f"which orcad cannot be sent; cd to another directory, or {instead}",
    )


def _absolute(text: str) -> str:
    """An argument's path made absolute; a relative one needs the current directory."""
    try:
        return os.path.abspath(os.path.expanduser(text))
    except FileNotFoundError:
        raise argparse.ArgumentTypeError(f"{text} is relative and {CWD_GONE}") from None


def socket_file(text: str) -> str:
    """argparse type for --socket: the path made absolute (`~` expanded, which a shell leaves in
    `--socket=~/x.sock`), as the hooks, MCP servers and commands it is written into reach it
    from anywhere; it must be valid UTF-8, as it is shown in JSON. An empty one (`--socket=`,
    an unset variable in `--socket "$X"`) would be the current directory: refused."""
    if not text:
        raise argparse.ArgumentTypeError("the socket's path is empty")
    path = _absolute(text)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("the socket's path is not valid UTF-8") from None
    return path


def directory_path(text: str) -> str:
    """argparse type for --home and --config-dir: the path made absolute, `~` expanded (it may
    not exist yet: orcad makes it). An empty one would be the current directory, and a file
    there is no directory orcad could make: both refused, before any daemon is started."""
    if not text:
        raise argparse.ArgumentTypeError("the directory's path is empty")
    path = _absolute(text)
    if os.path.exists(path) and not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is not a directory")
    return path


def existing_directory(text: str) -> str:
    """argparse type for --cwd, inspect's PATH and grants' --workspace: an existing directory,
    made absolute. An empty one (`--cwd "$DIR"` with DIR unset) would be the current directory,
    and the command would act on its workspace instead: refused, as for --socket."""
    if not text:
        raise argparse.ArgumentTypeError("the directory's path is empty")
    path = _absolute(text)
    if not os.path.isdir(path):
        reason = "is not a directory" if os.path.exists(path) else "does not exist"
        raise argparse.ArgumentTypeError(f"{path} {reason}")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(
            "the directory's path is not valid UTF-8, which orcad cannot be sent"
        ) from None
    return path


def executable_file(value: str) -> str:
    """argparse type for --orcad and --orcactl: an existing regular file this user may execute,
    as an absolute path (what a service or an agent runs from another directory)."""
    path = _absolute(value)
    if not os.path.exists(path):
        raise argparse.ArgumentTypeError(f"{path} does not exist")
    if not os.path.isfile(path):
        raise argparse.ArgumentTypeError(f"{path} is not a file")
    if not os.access(path, os.X_OK):
        raise argparse.ArgumentTypeError(f"{path} is not executable (chmod +x it)")
    return path


def project_id(text: str) -> str:
    if not _PROJECT_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a project id (64 lowercase hex digits; orcactl projects lists them)"
        )
    return text


def candidate_id(text: str) -> str:
    """An automatic-memory candidate's id as the ledger writes them: one of another shape is no
    candidate of any project, and forgetting it would only say it was already gone."""
    if not _CANDIDATE_ID.fullmatch(utf8_text(text)):
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is not a candidate id (cand_ and 32 lowercase hex digits; orcactl "
            "inspect lists them)"
        )
    return text


def job_id(text: str) -> str:
    """An extraction job's id as orcad names them: one of another shape is no job, and retrying
    it would only start orcad to be told so."""
    if not utf8_text(text).strip():
        raise argparse.ArgumentTypeError("the id is empty (orcactl jobs lists them)")
    if not _JOB_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is not a job id (job_ and 32 lowercase hex digits; orcactl jobs "
            "lists them)"
        )
    return text


def grant_id(text: str) -> str:
    """A grant id of the shape `grants list` shows: orcad refuses any other as invalid params,
    which is bad usage here, refused before any request."""
    try:
        parse_grant_id(utf8_text(text))
    except InvalidParams:
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is not a grant id (global, workspace:<id> or "
            "session:<id>:<workspace|global>; orcactl grants list shows them)"
        ) from None
    return text


def id_listed_by(shape: re.Pattern[str], described: str, listing: str) -> Callable[[str], str]:
    """An id to send, of the `shape` orcad gives them (`described`), as `listing` shows them:
    one of another shape names nothing, and orcad would only be started to answer not_found."""

    def parse(text: str) -> str:
        if not utf8_text(text).strip():
            raise argparse.ArgumentTypeError(f"the id is empty ({listing})")
        if not shape.fullmatch(text):
            raise argparse.ArgumentTypeError(
                f"{text[:80]!r} is not {described} ({shape.pattern[:4]} and 32 lowercase hex "
                f"digits; {listing})"
            )
        return text

    parse.__name__ = "id"  # argparse names the type in its own messages
    return parse


record_id = id_listed_by(_RECORD_ID, "a record id", "orcactl memory list shows them")
approval_id = id_listed_by(
    _APPROVAL_ID, "an approval id", "the client that left the change pending showed it"
)


def client_id(text: str) -> str:
    """A session id as orcad takes one: 1 to CLIENT_ID_MAX_CHARS characters, none of them a
    control character."""
    if not 1 <= len(text) <= CLIENT_ID_MAX_CHARS:
        raise argparse.ArgumentTypeError(
            f"the id has {len(text)} characters; 1 to {CLIENT_ID_MAX_CHARS} are allowed"
        )
    if not re.match(NO_CONTROL_CHARACTERS, text):
        raise argparse.ArgumentTypeError(
            "the id holds a control character (U+0000 to U+001F, U+007F to U+009F); none is allowed"
        )
    return utf8_text(text)


# What '-' reads of stdin at most: far more than any fact or record holds, and a bound on an
# endless one (`yes | orcactl remember -`), which is refused rather than read to its end.
STDIN_TEXT_MAX_CHARS = 1 << 20


def text_or_stdin(text: str, parse: Callable[[str], str]) -> str:
    """TEXT as argparse checked it, or for '-' the text on stdin, checked by the same `parse`:
    what it refuses, and a stdin that cannot be read, is bad usage (exit 2), as it would be on
    the command line."""
    if text != "-":
        return text
    try:
        read = sys.stdin.read(STDIN_TEXT_MAX_CHARS + 1)
        if len(read) > STDIN_TEXT_MAX_CHARS:
            raise argparse.ArgumentTypeError(f"more than {STDIN_TEXT_MAX_CHARS} characters")
        return parse(read)
    except UnicodeDecodeError:
        raise CommandError("the text on stdin is not valid UTF-8", EXIT_USAGE) from None
    except OSError as exc:  # opened for writing only (`0>file`), a read error: say it is stdin
        raise CommandError(
            f"cannot read the text from stdin: {exc.strerror or exc}", EXIT_USAGE
        ) from None
    except argparse.ArgumentTypeError as exc:
        raise CommandError(f"the text on stdin: {exc}", EXIT_USAGE) from None


def ignores_global_options(parser: argparse.ArgumentParser, *flags: str) -> None:
    """Global options that change nothing in this command (`--no-start` where the command never
    starts orcad): still accepted, as anywhere on the line, but left out of its help."""
    parser.set_defaults(ignored_global_options=flags)
