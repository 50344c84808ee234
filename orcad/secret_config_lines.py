"""Credentials in settings and outputs that name them by a word and a space, not `=` or `:`.

Pure module: no I/O. LDAP clients' `bindpw X` and slapd's `rootpw X`; SNMP's community
strings (`rocommunity X 10.0.0.0/24`, `snmpwalk -v2c -c X host`); an IPsec pre-shared key
(`%any host : PSK "X"`); what a password manager's command printed on the line below it
(`op read`, `op item get … --fields password`, `bw get password`, `pass show`, `gopass
show`); and the password line of OpenVPN's `auth-user-pass` file pasted below the directive,
inline in a client's config (a `<auth-user-pass>` block) or printed by `cat` from a VPN's
directory. All but the PSK start their line (after a shell's prompt). Each value must look
chosen (letters with digits or symbols): SNMP's `public` and `private`, a placeholder, a
`{{ variable }}` stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_files import second_line_password
from orcad.secret_values import Span, is_chosen_password, looks_random

# a setting's name starting its line, a space, its value
_SPACED_SETTING = lazy_compile(
    r"[ \t]*+(?:bindpw|rootpw|olcrootpw:?|r[ow]community6?)[ \t]++([^\s\"']{4,128}+)(?![^\s])"
)
_SETTING_REACH = 24  # characters of indentation and name before the literal searched for
_SNMP_COMMAND = lazy_compile(
    r"snmp(?:walk|get|getnext|bulkwalk|bulkget|set|table|trap|check|df|status)\b[^\n]{0,200}?"
    r"[ \t]-c[ \t]*+[\"']?([^\s\"']{4,128})"
)
_PSK = lazy_compile(r":[ \t]*PSK[ \t]+\"([^\"\n]{4,128})\"|:[ \t]*PSK[ \t]+'([^'\n]{4,128})'")

# a password manager asked for a secret: what it printed is the line below
_MANAGER_COMMAND = lazy_compile(
    r"(?:op[ \t]+read[ \t]+\S*+|op[ \t]+item[ \t]+get[ \t][^\n]*--fields?[ \t=]+\S*(?:pass|secret|"
    r"credential|token|key)|bw[ \t]+get[ \t]+(?:password|totp|notes)|(?:gopass|pass)[ \t]+"
    r"(?:show[ \t]+(?:-[a-z][ \t]+)*[\w@.\-]++|(?:-[a-z][ \t]+)*[\w@.\-]+/)[\w@./\-]*+)"
    r"[^\n]*+\n"
    r"[ \t]*([^\s]{4,256})[ \t\r]*(?:\n|$)"
)
# characters of a password manager's command line read: what could end the command was tried
# against the rest of its line, so a long line cost its length squared (6 s for 64 KiB of
# `op read` with no line below); a command typed is far shorter
_COMMAND_REACH = 1024


# what starts a line (after a shell's prompt) for each rule but the PSK's:
# one search for them all, which finds a line break and tries the names there
# (through sudo or doas, with their options, as secret_command_outputs reads them before a key
# file's `cat`: a VPN's files are often root's alone)
_RUN_AS = (
    r"(?:(?:sudo|doas)(?:[ \t]++-{1,2}[a-z][a-z\-]*+(?:[ \t=]++[^\s\-][^\s]{0,32}+)?)*?"
    r"(?:[ \t]++--)?[ \t]++)?"
)
_LINE_HEAD = r"[ \t]*+(?:[$#>%][ \t]++)?" + _RUN_AS
_NAMES = (
    r"(?=[<abcgoprs])(?P<name>snmp|op[ \t]|bw[ \t]|pass[ \t]|gopass[ \t]|bindpw|rootpw|olcrootpw|"
    r"r[ow]community|auth-user-pass|<auth-user-pass>|cat[ \t])"
)
_FIRST_LINE = lazy_compile(_LINE_HEAD + _NAMES)
_LINE = lazy_compile(r"\n" + _LINE_HEAD + _NAMES)
_MANAGERS = frozenset(("op", "bw", "pass", "gopass"))


def find_config_line_credentials(text: str, lowered: str) -> Iterator[Span]:
    """Each kind found at the lines it starts, and IPsec's PSK after its literal: a text is
    searched twice in all (a megabyte takes about 1 ms a search here; one for each name
    took 7)."""
    first = _FIRST_LINE.match(lowered)
    for line in ([first] if first is not None else []) + list(_LINE.finditer(lowered)):
        found = _at_line(text, lowered, line.start() if line is first else line.start() + 1, line)
        if found is not None:
            yield found
    if "psk" in lowered:
        for match in _PSK.finditer(text):
            group = 1 if match.start(1) >= 0 else 2
            yield from _chosen(text, *match.span(group))


def _at_line(text: str, lowered: str, line_start: int, line: re.Match[str]) -> Span | None:
    name = line["name"].rstrip(" \t")
    at = line.start("name")
    if name == "snmp":
        value = _SNMP_COMMAND.match(lowered, at)
    elif name in _MANAGERS:
        if lowered.find("\n", at, at + _COMMAND_REACH) < 0:
            return None  # no line below within reach, or a line no one typed
        value = _MANAGER_COMMAND.match(lowered, at)
        if value is not None:
            span = value.span(1)
            word = text[span[0] : span[1]]
            return span if is_chosen_password(word) or looks_random(word) else None
        return None
    elif name in ("auth-user-pass", "<auth-user-pass>", "cat"):  # (<…>: the two lines inline)
        line_end = lowered.find("\n", at)
        if line_end < 0 or (name == "cat" and "vpn" not in lowered[at:line_end]):
            return None
        return second_line_password(text, line_end + 1)
    else:
        value = _SPACED_SETTING.match(lowered, line_start)
    if value is None or not is_chosen_password(text[value.start(1) : value.end(1)]):
        return None
    return value.span(1)


def _chosen(text: str, start: int, end: int) -> Iterator[Span]:
    if is_chosen_password(text[start:end]):
        yield start, end
