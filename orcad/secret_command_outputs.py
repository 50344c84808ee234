"""Passwords and keys a command prints, found in its output pasted after it: macOS's `security
find-generic-password … -w` (the password alone on the next line), `heroku auth:token` (a UUID
or an HRKU- token on a line of its own), `az storage account keys list` (each key's 88
characters of base64 under its `"keyName"`) and `cat` of a file named for a key or token.

Pure module: no I/O. The keychain commands' names and a storage key are each one long run, so
those rules open on the text's long runs (their gates in `COMMAND_OUTPUT_RULES`) and cost a
text without them nothing; the Heroku command is no such run and costs one search for its name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_formats import Finder
from orcad.secret_gates import Gate, _always, _any_trigger, _TriggerGate
from orcad.secret_values import (
    Span,
    given_password,
    is_chosen_password,
    is_label,
    looks_random,
)

# ------------------------------------------------------------ macOS keychain: security … -w
_KEYCHAIN_TRIGGERS = ("find-generic-password", "find-internet-password")
# The command and its arguments up to its line's end, then the line it printed. A pipe, a
# redirect, a subshell or a backtick after the command sends its output elsewhere (`PW=$(security
# … -w)`, `security … -w | pbcopy`); a line of one word holds the password alone.
_KEYCHAIN_OUTPUT = lazy_compile(
    r"security[ \t]+find-(?:generic|internet)-password(?P<arguments>[^\n|;&()<>`]{0,300}+)\n"
    r"(?P<output>[^\s]{1,256}+)[ \t\r]*(?:\n|\Z)"
)
# -w prints the password alone (-g prints the whole item, `password: "…"`, read elsewhere)
_PASSWORD_ONLY_FLAG = lazy_compile(r"[ \t]-w(?=[ \t\r]|\Z)")
# what starts a line of a transcript or a listing that is no password
_NOT_OUTPUT = ("```", "~~~", "security", "$", "%", "#", ">")
# A path, as a listing or a note prints one: names joined by slashes or backslashes that a
# password of two parts ("Summer/2024") is not: after a drive, from or to a separator, of three
# names or more, or ending in a file's extension (`C:\Users\me`, `build/`, `src/main.py`).
_PATH = lazy_compile(
    r"(?:[A-Za-z]:[\\/]|[\\/])?(?:[\w.\-]++[\\/])++[\w.\-]*+\Z",
)
_PATH_LIKE_ENDS = lazy_compile(r"\A(?:[A-Za-z]:)?[\\/]|[\\/]\Z|\.[A-Za-z]{1,5}\Z")
_PATH_SEPARATOR = lazy_compile(r"[\\/]")


def find_keychain_passwords(text: str, lowered: str) -> Iterator[Span]:
    """The password `security find-generic-password … -w` printed on the line below it."""
    for trigger in _KEYCHAIN_TRIGGERS:
        at = lowered.find(trigger)
        while at >= 0:
            command = lowered.rfind("security", max(0, at - 16), at)
            match = _KEYCHAIN_OUTPUT.match(lowered, command) if command >= 0 else None
            if match is not None and _PASSWORD_ONLY_FLAG.search(text, *match.span("arguments")):
                start, end = match.span("output")
                if _printed_password(text[start:end]):
                    yield start, end
            at = lowered.find(trigger, at + len(trigger))


def _printed_password(value: str) -> bool:
    """A line of one word a command printed as a password: one chosen or generated, not a
    prompt, a fence, a script's keyword (`fi`, `done`), a name (`my-script.sh`), a heading
    (`Output:`) or a path of names (`src/main.py`); digits alone are a PIN's."""
    return (
        not value.startswith(_NOT_OUTPUT)
        and not _is_heading(value)
        and not _is_path(value)
        and given_password(value)
        and (is_chosen_password(value) or looks_random(value))
        and (value.isdigit() or not is_label(value))
    )


def _is_heading(value: str) -> bool:
    """A word and its colon, as prose introduces what follows: `Output:`, `Note:`."""
    return len(value) > 1 and value.endswith(":") and value[:-1].isalpha()


def _is_path(value: str) -> bool:
    """A path of names: see _PATH. Two names alone are a password's parts as often."""
    if _PATH.match(value) is None:
        return False
    names = [part for part in _PATH_SEPARATOR.split(value) if part]
    return len(names) >= 3 or _PATH_LIKE_ENDS.search(value) is not None


# ---------------------------------------------------------------- heroku auth:token
_HEROKU_COMMAND = "heroku auth:token"
# The command ends its line (its flags may follow); the CLI's warnings, each after a U+203A or
# U+25B8 mark, may come before the token, which is a line of its own.
_HEROKU_TOKEN = lazy_compile(
    r"heroku[ \t]+auth:token(?![a-z:])[^\n|;&()<>`]{0,100}+\n"
    r"(?:[ \t]*[\u203a\u25b8][^\n]{0,300}+\n){0,4}+"
    r"[ \t]*(?P<token>[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|hrku-[a-z0-9_\-]{20,300}+)"
    r"[ \t\r]*(?:\n|\Z)"
)


def find_heroku_tokens(text: str, lowered: str) -> Iterator[Span]:
    """The token `heroku auth:token` printed: a UUID, or an HRKU- token of any length."""
    at = lowered.find(_HEROKU_COMMAND)
    while at >= 0:
        match = _HEROKU_TOKEN.match(lowered, at)
        if match is not None:
            yield match.span("token")
        at = lowered.find(_HEROKU_COMMAND, at + len(_HEROKU_COMMAND))


# ------------------------------------------------------- az storage account keys list
# A storage account key: 64 bytes of base64, 88 characters with its padding. Its run opens the
# rule; the key is then read only after a "keyName", as the JSON value of one (`"keyName":
# "key1", …, "value": "…"`) or on a table's row after key1, key2 (kerb1, kerb2 for Kerberos).
_STORAGE_KEY = r"(?<![A-Za-z0-9+/\-])([A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])"
_STORAGE_KEY_GATE = lazy_compile(r"[A-Za-z0-9+/]{86}==")
_LISTED_KEY = lazy_compile(
    r"(?:\"value\"[ \t]*:[ \t]*\"|(?<![a-z0-9])(?:key|kerb)[12][ \t][^\n]{0,80}?)" + _STORAGE_KEY,
    re.IGNORECASE,
)
_KEY_NAME = "keyname"
_KEYS_REACH = 800  # from a "keyName" to the key of its object, or of a table's last row


def find_listed_storage_keys(text: str, lowered: str) -> Iterator[Span]:
    """The storage account keys `az storage account keys list` (or Get-AzStorageAccountKey)
    printed, as JSON or as a table."""
    at = lowered.find(_KEY_NAME)
    searched = 0
    while at >= 0:
        position, end = max(at, searched), at + _KEYS_REACH
        while (match := _LISTED_KEY.search(text, position, end)) is not None:
            start, key_end = match.span(1)
            if looks_random(text[start:key_end]):
                yield start, key_end
            position = key_end
        searched = end
        at = lowered.find(_KEY_NAME, at + len(_KEY_NAME))


# ------------------------------------------------------------------ a key file printed
# `cat config/master.key`, `cat ~/.vault-token`, `type deploy_token.txt`: a file named for a
# key, token, secret or password printed, its value alone on the line below (the command's
# output not piped or redirected elsewhere); taken when it looks generated
_PRINTED_FILE = lazy_compile(
    r"[ \t]*(?:-[a-z]{1,8}[ \t]+)*[\"']?"
    r"(?P<path>[^\s|;&()<>`\"']{1,256}+)[\"']?[ \t\r]*\n"
    r"[ \t]*(?P<output>[^\s]{16,512}+)[ \t\r]*(?:\n|\Z)"
)
_SECRET_FILE_NAME = lazy_compile(
    r"(?:^|[._\-])(?:key|token|secret|secrets|password|passwd|credentials?|apikey|api-key)"
    r"(?:[._\-][a-z0-9]{1,8})?\Z|\.(?:key|token|secret)\Z"
)
# a public key's file, named so beside its private one (WireGuard's public.key, key.pub):
# printed to be shared
_PUBLIC_FILE_NAME = lazy_compile(r"(?:^|[._\-])pub(?:lic)?(?:[._\-]|\Z)")
# each with the space after it: "cat" alone is in "application", "location", "category"
_PRINTING_COMMANDS = ("cat ", "type ", "get-content ")


def find_printed_key_files(text: str, lowered: str) -> Iterator[Span]:
    """The value a key or token file printed, on the line below the command."""
    for command in _PRINTING_COMMANDS:
        yield from _printed_after(text, lowered, command)


_PROMPT_ENDS = ("$", ">", "#", "%")
_PROMPT_REACH = 64  # characters a prompt may take, up to its last


def _starts_a_command(lowered: str, at: int) -> bool:
    """`at` starts its line, or follows a shell's prompt (`$ `, `PS C:\\> `): a command typed,
    its output below it. Read back no further than a prompt's length: a line naming the
    command at each of its words would else be read back to its start at each, in quadratic
    time (8.6 s for 512 KiB of "cat cat …")."""
    end = at  # back over the blanks before `at`, which come before no other name
    while end > 0 and lowered[end - 1] in " \t":
        end -= 1
    if end == 0 or lowered[end - 1] == "\n":
        return True
    if not lowered.endswith(_PROMPT_ENDS, 0, end):
        return False
    line_break = lowered.rfind("\n", max(0, end - _PROMPT_REACH - 1), end)
    return end - line_break - 1 <= _PROMPT_REACH


# `sudo cat /etc/ssl/private.key`, `sudo -u www -- cat …`, `doas cat …`: a key file is often
# readable by root or its service alone, so its printing is asked for as another user
_RUN_AS = lazy_compile(
    r"(?:sudo|doas)(?:[ \t]++-{1,2}[a-z][a-z\-]*+(?:[ \t=]++[^\s\-][^\s]{0,32}+)?)*?"
    r"(?:[ \t]++--)?[ \t]++\Z"
)
_RUN_AS_REACH = 96  # characters `sudo` and its options may take before the command


def _run_as_another(lowered: str, at: int) -> bool:
    """The command at `at` is run through `sudo` or `doas`, which a command typed starts."""
    # (read back no further than that reach, whatever the line's length: see _starts_a_command)
    reach = max(0, at - _RUN_AS_REACH)
    line_break = lowered.rfind("\n", reach, at)
    line_start = reach if line_break < 0 else line_break + 1
    before = lowered[line_start:at]
    for word in ("sudo", "doas"):
        found = before.rfind(word)
        if (
            found >= 0
            and _RUN_AS.match(before, found)
            and _starts_a_command(lowered, line_start + found)
        ):
            return True
    return False


def _printed_after(text: str, lowered: str, command: str) -> Iterator[Span]:
    """What `command` printed of a key file, found from each place it is named (a search for
    the literal, where a pattern starting with the three names was tried at every position)."""
    at = lowered.find(command)
    while at >= 0:
        end = at + len(command)
        match = None
        if _starts_a_command(lowered, at) or (command == "cat " and _run_as_another(lowered, at)):
            match = _PRINTED_FILE.match(lowered, end)
        at = lowered.find(command, end)
        if match is None:
            continue
        name = match["path"].replace("\\", "/").rsplit("/", 1)[-1]
        if _SECRET_FILE_NAME.search(name) is None or _PUBLIC_FILE_NAME.search(name) is not None:
            continue
        start, output_end = match.span("output")
        if looks_random(text[start:output_end]):
            yield start, output_end


# (kind, finder, gate) for the detector's rule table: a storage key opens its rule by its run
COMMAND_OUTPUT_RULES: tuple[tuple[str, Finder, Gate], ...] = (
    ("password_flag", find_keychain_passwords, _any_trigger(_KEYCHAIN_TRIGGERS)),
    ("heroku_api_key", find_heroku_tokens, _always),
    ("credential_assignment", find_printed_key_files, _always),
    ("azure_storage_key", find_listed_storage_keys, _TriggerGate(("==",), _STORAGE_KEY_GATE)),
)
