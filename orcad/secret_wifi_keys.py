"""Wi-Fi keys in the files and commands that hold them: wpa_supplicant.conf's and
NetworkManager's `psk=` (a passphrase of 8 to 63 characters, quoted in wpa_supplicant.conf, or
the key as 64 hex digits), hostapd.conf's `wpa_psk=`, nmcli's `wifi-sec.psk X`, and the `P:`
field of the string a Wi-Fi QR code holds (`WIFI:T:WPA;S:Cafe;P:...;;`), and a passphrase a
sentence gives for the network itself, without a word for password ("the wifi is Kitten!2024").

Pure module: no I/O. It costs a text one search for "psk", which prose rarely holds, and one
for the network's names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import (
    STATED_VERB,
    Span,
    end_before_trailing,
    given_password,
    is_credential_literal,
    is_label,
    is_placeholder,
    is_reference,
    line_start_before,
    mixes_letters_and_others,
    value_ends_clause,
)

# A setting on a line of its own: `psk="..."` (wpa_supplicant.conf, network={ ... }), `psk=...`
# (a NetworkManager keyfile's [wifi-security]), `wpa_psk=...` (hostapd.conf). A comment may
# follow a quoted value; an unquoted one runs to the line's end (those files have no comment
# after a value: `#` is part of it).
_PSK_SETTING = lazy_compile(
    r"[ \t]*(?:wpa_)?psk[ \t]*=[ \t]*"
    r"(?:\"([^\"\n]{8,63}+)\"[ \t\r]*(?:#[^\n]*+)?|([^\s\"'#][^\n]{7,63}?)[ \t\r]*)(?:\n|\Z)"
)
# nmcli's property, by its alias or its whole name, then the key as one shell word (or, as
# `nmcli --show-secrets connection show` prints it, after a colon)
_NMCLI_PROPERTY = ("wifi-sec.", "802-11-wireless-security.")
_NMCLI_PSK = lazy_compile(
    r"psk(?:[ \t]+|:[ \t]*)"
    r"(?:\"([^\"\n]{8,63}+)\"|'([^'\n]{8,63}+)'|([^\s\"'`;&|()<>]{8,64}+))"
    r"(?=[ \t\r\n;&|)]|\Z)"
)
# Code that sets a variable named psk: a call, an attribute, a template's `@NAME@`
_CODE = lazy_compile(r".*[()]|.*;\Z|@.*@\Z|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z")
_HEX_KEY = lazy_compile(r"[0-9a-fA-F]{64}\Z")
# A NetworkManager keyfile's own settings around the key: its section, or WPA-PSK chosen as
# the key management in its spelling. (wpa_supplicant.conf's `key_mgmt=WPA-PSK` is not one:
# there an unquoted psk is 64 hex digits or nothing valid, `psk=hash_of_key` in code.)
_KEYFILE = lazy_compile(r"^[ \t]*(?:\[wifi-security\]|key-mgmt[ \t]*=[ \t]*wpa-psk)", re.MULTILINE)


def find_wifi_keys(text: str, lowered: str) -> Iterator[Span]:
    """The passphrase or key of a Wi-Fi network in a configuration line or an nmcli command."""
    at = lowered.find("psk")
    keyfile: bool | None = None  # whether the text holds a network's settings, once asked
    while at >= 0:
        line = line_start_before(lowered, at, ("wpa_",))
        match = _PSK_SETTING.match(lowered, line) if line is not None else None
        if match is None and lowered.endswith(_NMCLI_PROPERTY, 0, at):
            match = _NMCLI_PSK.match(lowered, at)
        searched = at + 3
        if match is not None:
            group = next(g for g in range(1, (match.lastindex or 0) + 1) if match.start(g) >= 0)
            start, end = match.span(group)
            setting = match.re.pattern == _PSK_SETTING.pattern
            if setting and keyfile is None:
                keyfile = _KEYFILE.search(lowered) is not None
            quoted = text[start - 1] in "\"'"
            if _wifi_key(text[start:end], quoted=quoted, setting=setting, keyfile=bool(keyfile)):
                yield start, end
            searched = max(searched, match.end())  # a "psk" inside the value is not another
        at = lowered.find("psk", searched)


def _wifi_key(value: str, *, quoted: bool, setting: bool, keyfile: bool) -> bool:
    """A key as given: not a variable, a placeholder or an example. Quoted, or given to nmcli,
    any passphrase is one ("purple monkey dishwasher"); an unquoted setting's value is one when
    it is the 64 hex digits of a key, or a literal that is not a name or code (`psk=psk_bytes`,
    `psk=derive_psk(ssid, passphrase)`), or any value but code beside the network's own
    settings (`key-mgmt=wpa-psk` then `psk=sunshinebeach`)."""
    if not given_password(value):
        return False
    if quoted or not setting or _HEX_KEY.match(value) is not None:
        return True
    if _CODE.match(value) is not None:
        return False
    return keyfile or is_credential_literal(value, quoted=False, upper_key=False, bare=False)


# WIFI:T:WPA;S:<name>;P:<key>;; (fields in any order, `\;` escaping a semicolon)
_QR_KEY = lazy_compile(
    r"wifi:(?:(?!p:)[a-z]:(?:\\.|[^;\\\n]){0,256}+;){0,8}+p:((?:\\.|[^;\\\n]){1,256}+)"
)


def find_wifi_qr_keys(text: str, lowered: str) -> Iterator[Span]:
    """The key in the string a Wi-Fi QR code holds."""
    if "wifi:" not in lowered:
        return
    for match in _QR_KEY.finditer(lowered):
        start, end = match.span(1)
        if given_password(text[start:end]):
            yield start, end


# "the wifi is Kitten!2024", "guest wi-fi is now Cafe#Latte42", "the wifi in the cabin is
# Cheddar!88": a verb gives the network a
# passphrase (8 to 63 characters, as WPA takes) that starts with a letter and mixes letters
# with digits or symbols, in quotes or ending its clause. The network's state or kind is a
# word or a label ("the wifi is down", "the wifi is WPA2-Enterprise", "the wifi is AX210"),
# and a pair of standards (`WPA2/WPA3`) names no key.
_WIFI_STATEMENT = lazy_compile(
    r"(?:wi-?fi|wlan)(?:[ \t]+network)?"
    # where the network is, "the wifi in the cabin is Cheddar!88"
    r"(?:[ \t]+(?:in|at|on|for)(?:[ \t]+[a-z0-9_\-]{1,20}+){1,3}?(?=[ \t]+(?:is|was)[ \t]))?"
    + STATED_VERB
    + r"[ \t]+([\"'`]?)([a-z][^\s\"'`/]{7,62}+)\1"
)
# the network's names, looked for in one pass (three substring searches cost three); the
# statement is matched from each (a pattern that opens with a look-behind is tried at every
# character), the name a word of its own
# (then a verb's or "network"'s first character: not `WIFI:T:WPA;…`)
_WIFI_NAME = lazy_compile(r"w(?:i-?fi|lan)(?=[ \t,'\u2019])")
_BEFORE_WIFI = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-.")


def find_wifi_statements(text: str, lowered: str) -> Iterator[Span]:
    """The passphrase a sentence gives for a Wi-Fi network without naming it a password."""
    for name in _WIFI_NAME.finditer(lowered):
        at = name.start()
        if at > 0 and lowered[at - 1] in _BEFORE_WIFI:
            continue
        match = _WIFI_STATEMENT.match(lowered, at)
        if match is None:
            continue
        start, end = match.span(2)
        stripped = end_before_trailing(text, start, end)
        value = text[start:stripped]
        if (
            len(value) >= 8
            and mixes_letters_and_others(value.rstrip("!?"))  # not "the wifi is flaky!!"
            and not is_label(value)
            and not is_placeholder(value)
            and not is_reference(value)
            and (match.group(1) != "" or value_ends_clause(text, end, stripped))
        ):
            yield start, stripped
