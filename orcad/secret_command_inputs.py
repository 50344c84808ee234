"""Passwords a command reads from its standard input or takes as a literal to protect: `echo
PASS | docker login -u me --password-stdin`, `echo PASS | passwd --stdin USER` and PowerShell's
`ConvertTo-SecureString "PASS" -AsPlainText`.

Pure module: no I/O. A value that only names where the password is (`echo "$CR_PAT"`, `cat
pw.txt |`, `$(pass show x)`) is no password and stays. Both are opened by their flag's or
cmdlet's name among the text's long runs (`STDIN_TRIGGERS`), so a text without one costs no
scan here; `passwd --stdin` is no long run and is looked for by `secret_commands`' rule once
the text names passwd (as htpasswd and chpasswd do), one search for the three.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import QUOTED_VALUES, Span, given_password, value_span

_VALUE = rf"(?:{QUOTED_VALUES}|([^\s\"'`;&|()<>]{{1,256}}+))"

# `echo PASS |` or `printf '%s' PASS |` into a command that reads a password from its input:
# a registry login's --password-stdin (docker, podman, helm, oras, skopeo, buildah). Found
# from each flag, a literal; then the last pipe before it on its line, and the echo or printf
# last before that pipe, matched from where it starts (a search for the echo over the line
# cost 1.3 s a megabyte of repeated flags).
_STDIN_FLAG = "--password-stdin"
_PIPED_INTO = lazy_compile(
    r"(?<![a-z0-9_\-])(?:echo(?:[ \t]+-[ne]{1,2})?|printf(?:[ \t]+[\"']?%s(?:\\n)?[\"']?)?)"
    r"[ \t]+" + _VALUE + r"[ \t]*\|[ \t]*(?:sudo[ \t]+)?(?:[a-z][^\n|;&]{0,200}?)?\Z"
)
_COMMAND_REACH = 256  # the command between the pipe and its flag
_ECHO_REACH = 300  # the echo, its flags and its value before the pipe

# PowerShell: `ConvertTo-SecureString "PASS" -AsPlainText -Force` (also with -String): the
# literal is the password; a variable (`$env:PW`, `$pw`) is not.
_SECURE_STRING = lazy_compile(
    r"convertto-securestring[ \t]+(?:-string[ \t]+)?" + QUOTED_VALUES + r"(?=[^\n]{0,64}?-asplain)"
)
# the names that open this module's rule, as its long runs hold them (each is one)
STDIN_TRIGGERS = (_STDIN_FLAG, "ConvertTo-SecureString", "convertto-securestring")
# `echo PASS | passwd --stdin USER` (Red Hat's passwd): no long run, so looked for as written
_STDIN_SETTER = "passwd --stdin"


def find_piped_passwords(text: str, lowered: str) -> Iterator[Span]:
    """A password echoed into a command that reads it from its input, and a literal turned
    into a PowerShell secure string."""
    at = lowered.find(_STDIN_FLAG)
    while at >= 0:
        if not lowered[at + len(_STDIN_FLAG) : at + len(_STDIN_FLAG) + 1].isalnum():
            piped = _piped_into(lowered, at)
            if piped is not None:
                yield from _given(text, piped)
        at = lowered.find(_STDIN_FLAG, at + len(_STDIN_FLAG))
    if "convertto-securestring" in lowered:
        for match in _SECURE_STRING.finditer(lowered):
            yield from _given(text, match)


def find_passwd_stdin(text: str, lowered: str) -> Iterator[Span]:
    """A password echoed into `passwd --stdin`, which sets it as a user's new one."""
    at = lowered.find(_STDIN_SETTER)
    while at >= 0:
        flag = at + len(_STDIN_SETTER) - len("--stdin")
        if not lowered[at - 1 : at].isalnum() and not lowered[flag + 7 : flag + 8].isalnum():
            piped = _piped_into(lowered, flag)
            if piped is not None:
                yield from _given(text, piped)
        at = lowered.find(_STDIN_SETTER, at + len(_STDIN_SETTER))


def _piped_into(lowered: str, reader: int) -> re.Match[str] | None:
    """The echo or printf piped into the command whose flag starts at `reader`."""
    pipe = lowered.rfind("|", max(0, reader - _COMMAND_REACH), reader)
    if pipe < 0:
        return None
    reach = max(0, pipe - _ECHO_REACH)
    echo = max(lowered.rfind("echo", reach, pipe), lowered.rfind("printf", reach, pipe))
    return _PIPED_INTO.match(lowered, echo, reader) if echo >= 0 else None


def _given(text: str, match: re.Match[str]) -> Iterator[Span]:
    start, end, _ = value_span(match)
    if given_password(text[start:end]):
        yield start, end
