"""Approving a pending memory change: the terminal prompt, its answers, and the command that
approves the change when there is no terminal to ask on."""

from __future__ import annotations

import argparse
import re
import shlex
from typing import Any, TextIO

from orcad.control_characters import BIDI_FORMATTING, INVISIBLE_CHARACTERS, TAG_CHARACTERS
from protocol.types import MemoryManageResult

PROMPT = "Apply this change? [o]nce, this [s]ession, this [w]orkspace, [N]o: "
RETRY_HINT = "Answer o (once), s (this session), w (this workspace) or n (no)."
ASK_AT_MOST = 3  # unreadable answers before the change is declined

# --approve SCOPE (and --yes, which is --approve once) -> memory.approve decision
SCOPES = {"once": "allow_once", "session": "allow_session", "workspace": "allow_workspace"}

# What a word of the printed command must not hold as it is: control characters, which would act
# on the terminal, bidirectional formatting, which would show the command in another order than
# the shell reads it, tag characters and other invisible ones, which no reader sees, and tab and
# newline, which would not paste back as one line
_UNPRINTABLE = re.compile(
    f"[\x00-\x1f\x7f-\x9f{BIDI_FORMATTING}{TAG_CHARACTERS}{INVISIBLE_CHARACTERS}]"
)
_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t"}

_ANSWERS = {
    **{word: "allow_once" for word in ("o", "once", "y", "yes")},
    **{word: "allow_session" for word in ("s", "session")},
    **{word: "allow_workspace" for word in ("w", "workspace")},
    **{word: "deny" for word in ("", "n", "no", "d", "deny")},
}


def decision_for(answer: str) -> str | None:
    """The memory.approve decision a typed answer means; None when it means none."""
    return _ANSWERS.get(answer.strip().lower())


def ask(summary: str, stdin: TextIO, stdout: TextIO) -> str:
    """Show the change and ask until the answer is one of the choices; end of input is no."""
    print(summary, file=stdout)
    for _ in range(ASK_AT_MOST):
        print(PROMPT, end="", file=stdout, flush=True)
        line = stdin.readline()
        if not line:  # end of input
            print(file=stdout)
            return "deny"
        decision = decision_for(line)
        if decision is not None:
            return decision
        print(RETRY_HINT, file=stdout)
    return "deny"


def approving_command(args: argparse.Namespace, cwd: str, content: str | None) -> str:
    """The orcactl command that makes the same change and approves it once. `content` is the
    text sent, written out even when it came from stdin ('-'), which is not there to read again
    (trimmed, as orcad stores it)."""
    positional = [args.id] if args.action in ("update", "forget") else []
    if content is not None:
        positional.append(content.strip())
    options = []
    if args.action == "save":
        options += ["--kind", args.kind, "--global" if args.is_global else "--workspace"]
    if getattr(args, "socket", None):
        options += ["--socket", args.socket]
    options += ["--cwd", cwd, "--yes"]
    if any(word.startswith("-") for word in positional):  # text such as "-O2": after `--`
        words = ["orcactl", "memory", args.action, *options, "--", *positional]
    else:
        words = ["orcactl", "memory", args.action, *positional, *options]
    return " ".join(map(shell_word, words))


def shell_word(word: str) -> str:
    """`word` quoted for a shell, as shlex.quote does; one holding a character that cannot be
    printed as it is (`_UNPRINTABLE`) in ANSI-C quotes, `$'...'` (bash, zsh, ksh), each such
    character written as its escape, so that the printed command is one line, shows what it
    does, and pasted into the shell passes the text itself."""
    if not _UNPRINTABLE.search(word):
        return shlex.quote(word)
    quoted = word.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _UNPRINTABLE.sub(_escape, quoted) + "'"


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    if character in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[character]
    # its UTF-8 bytes, each as \xNN: a shell writes \uNNNN in its locale's encoding, and bash
    # in the C locale leaves it as it is
    return "".join(f"\\x{byte:02x}" for byte in character.encode("utf-8"))


def already_so(result: MemoryManageResult, params: dict[str, Any]) -> bool:
    """A save of a record the scope already holds, or an update of a record to the text it has:
    nothing changed because the memory already says it, which is what the command asked for.
    Not an update that also gives the record another kind: that is a change, and denied."""
    record = result.record
    return (
        result.outcome == "denied"
        and record is not None
        and "content" in params
        and record.content == params["content"].strip()  # as orcad stores it
        and params.get("id", record.id) == record.id  # not another record's text
        and (params.get("action") != "update" or params.get("kind") in (None, record.kind))
    )
