"""Passwords a command reads from its standard input or takes as a literal to protect: `echo
PASS | docker login -u me --password-stdin`, `echo PASS | passwd --stdin root`, PowerShell's
`ConvertTo-SecureString "PASS" -AsPlainText`, and a Wi-Fi network's key: `psk="PASS"` in
wpa_supplicant.conf, `wpa_passphrase SSID PASS`, nmcli's `wifi-sec.psk PASS`.

Pure module: no I/O. A value that only names where the password is (`echo "$CR_PAT"`, `cat
pw.txt |`, `$(pass show x)`) is no password and stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.secret_values import QUOTED_VALUES, Span, given_password, value_span

_VALUE = rf"(?:{QUOTED_VALUES}|([^\s\"'`;&|()<>]{{1,256}}+))"

# `echo PASS |` or `printf '%s' PASS |` into a command that reads a password from its input:
# a registry login's --password-stdin (docker, podman, helm, oras, skopeo, buildah), or
# `passwd --stdin USER`. Found from each "stdin", a literal; then the last pipe before it on
# its line, and the echo or printf last before that pipe, matched from where it starts (a
# search for the echo over the line cost 1.3 s a megabyte of repeated flags).
_STDIN_READER = re.compile(r"--password-stdin(?![a-z0-9_\-])|passwd[ \t]+--stdin(?![a-z0-9_\-])")
_PIPED_INTO = re.compile(
    r"(?<![a-z0-9_\-])(?:echo(?:[ \t]+-[ne]{1,2})?|printf(?:[ \t]+[\"']?%s(?:\\n)?[\"']?)?)"
    r"[ \t]+" + _VALUE + r"[ \t]*\|[ \t]*(?:sudo[ \t]+)?(?:[a-z][^\n|;&]{0,200}?)?\Z"
)
_COMMAND_REACH = 256  # the command between the pipe and its flag
_ECHO_REACH = 300  # the echo, its flags and its value before the pipe
# PowerShell: `ConvertTo-SecureString "PASS" -AsPlainText -Force` (also with -String): the
# literal is the password; a variable (`$env:PW`, `$pw`) is not.
_SECURE_STRING = re.compile(
    r"convertto-securestring[ \t]+(?:-string[ \t]+)?" + QUOTED_VALUES + r"(?=[^\n]{0,64}?-asplain)"
)

# A Wi-Fi key: `psk="PASS"` starting its line (wpa_supplicant.conf; a raw key is 64 hex
# digits, unquoted), `wpa_passphrase SSID PASS`, nmcli's `wifi-sec.psk PASS`.
_WIFI_KEYS = (
    re.compile(r"^[ \t]*psk[ \t]*=[ \t]*(?:\"([^\"\n]{8,63})\"|([0-9a-f]{64}))[ \t]*\r?$", re.M),
    re.compile(
        r"(?<![a-z0-9_\-])wpa_passphrase[ \t]+(?:\"[^\"\n]{1,32}\"|'[^'\n]{1,32}'|[^\s\"']{1,32})"
        r"[ \t]+" + _VALUE
    ),
    re.compile(r"(?:wifi-sec|802-11-wireless-security)\.psk[ \t]+" + _VALUE),
)
_WIFI_TRIGGERS = ("psk", "wpa_passphrase")


def find_piped_passwords(text: str, lowered: str) -> Iterator[Span]:
    """A password echoed into a command that reads it from its input, and a literal turned
    into a PowerShell secure string."""
    if "stdin" in lowered:
        for reader in _STDIN_READER.finditer(lowered):
            piped = _piped_into(lowered, reader.start())
            if piped is not None:
                yield from _given(text, piped)
    if "convertto-securestring" in lowered:
        for match in _SECURE_STRING.finditer(lowered):
            yield from _given(text, match)


def find_wifi_keys(text: str, lowered: str) -> Iterator[Span]:
    """A Wi-Fi network's key in wpa_supplicant.conf, given to wpa_passphrase or to nmcli."""
    if not any(trigger in lowered for trigger in _WIFI_TRIGGERS):
        return
    for pattern in _WIFI_KEYS:
        for match in pattern.finditer(lowered):
            yield from _given(text, match)


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
