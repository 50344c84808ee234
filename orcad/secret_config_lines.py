"""Credentials in settings and outputs that name them by a word and a space, not `=` or `:`.

Pure module: no I/O. LDAP clients' `bindpw X` and slapd's `rootpw X`; SNMP's community
strings (`rocommunity X 10.0.0.0/24`, `snmpwalk -v2c -c X host`); an IPsec pre-shared key
(`%any host : PSK "X"`); the response of HTTP Digest authentication; and what a password
manager's command printed on the line below it (`op read`, `op item get … --fields
password`, `bw get password`, `pass show`, `gopass show`). Each value must look chosen
(letters with digits or symbols): SNMP's `public` and `private`, a placeholder, a
`{{ variable }}` stay.
"""

from __future__ import annotations

from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_command_outputs import _starts_a_command
from orcad.secret_values import Span, is_chosen_password, looks_random

# a setting's name starting its line, a space, its value
_SPACED_SETTING = lazy_compile(
    r"(?m)^[ \t]*(?:bindpw|rootpw|olcrootpw:?|ldap_default_authtok[ \t]*=|"
    r"r[ow]community6?|com2sec[ \t]+\S{1,64}[ \t]+\S{1,64})[ \t]+([^\s\"']{4,128})(?=[ \t\r]|$)"
)
_SPACED_TRIGGERS = ("bindpw", "rootpw", "authtok", "community", "com2sec")
_SNMP_COMMAND = lazy_compile(
    r"snmp(?:walk|get|getnext|bulkwalk|bulkget|set|table|trap|check|df|status)\b[^\n]{0,200}?"
    r"[ \t]-c[ \t]*+[\"']?([^\s\"']{4,128})"
)
_PSK = lazy_compile(r":[ \t]*PSK[ \t]+\"([^\"\n]{4,128})\"|:[ \t]*PSK[ \t]+'([^'\n]{4,128})'")
_DIGEST = lazy_compile(r"response=\"?([0-9a-f]{32,64})\b")
_DIGEST_REACH = 600  # characters of a Digest header's other fields before its response

# a password manager asked for a secret: what it printed is the line below
_MANAGER_COMMAND = lazy_compile(
    r"(?:op[ \t]+read[ \t]+\S*|op[ \t]+item[ \t]+get[ \t][^\n]*--fields?[ \t=]+\S*(?:pass|secret|"
    r"credential|token|key)|bw[ \t]+get[ \t]+(?:password|totp|notes)|(?:gopass|pass)[ \t]+"
    r"(?:show[ \t]+)?(?:-[a-z][ \t]+)*[\w@.\-]+/[\w@./\-]+)[^\n]*\n"
    r"[ \t]*([^\s]{4,256})[ \t\r]*(?:\n|$)"
)
_MANAGER_TRIGGERS = ("op read", "op item get", "bw get", "pass ", "gopass ")


def find_config_line_credentials(text: str, lowered: str) -> Iterator[Span]:
    if any(trigger in lowered for trigger in _SPACED_TRIGGERS):
        for match in _SPACED_SETTING.finditer(lowered):
            yield from _chosen(text, *match.span(1))
    if "snmp" in lowered:
        for match in _SNMP_COMMAND.finditer(lowered):
            yield from _chosen(text, *match.span(1))
    if "psk" in lowered:
        for match in _PSK.finditer(text):
            group = 1 if match.start(1) >= 0 else 2
            yield from _chosen(text, *match.span(group))
    at = lowered.find("digest ")
    while at >= 0:  # its response on its line, found with a search for the literal
        line_end = lowered.find("\n", at, at + _DIGEST_REACH)
        end = at + _DIGEST_REACH if line_end < 0 else line_end
        response = lowered.find("response=", at, end)
        digest = _DIGEST.match(lowered, response) if response >= 0 else None
        if digest is not None:
            yield digest.span(1)
        at = lowered.find("digest ", at + 7)
    for trigger in _MANAGER_TRIGGERS:  # each place a command may start, matched there alone
        at = lowered.find(trigger)
        while at >= 0:
            printed = (
                _MANAGER_COMMAND.match(lowered, at) if _starts_a_command(lowered, at) else None
            )
            at = lowered.find(trigger, at + len(trigger))
            if printed is None:
                continue
            value = text[printed.start(1) : printed.end(1)]
            if is_chosen_password(value) or looks_random(value):
                yield printed.span(1)


def _chosen(text: str, start: int, end: int) -> Iterator[Span]:
    if is_chosen_password(text[start:end]):
        yield start, end
