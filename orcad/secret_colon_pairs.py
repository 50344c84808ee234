"""A user and a password joined by a colon in a note: "creds admin:Hunter2!", "login for
staging is deploy:Summer2024!".

Pure module: no I/O. A colon joins many things that are no credential (`localhost:5432`,
`python:3.12-slim`, `level:info`, `12:30:45`, `read:user`, `npm:lodash@4`, `std::vector`,
`main:src/app.py`, `sha256:abcd…`), so a pair counts only after a word that announces one
(creds, credentials, login, logon, account, auth, user/pass, user:pass) on its line, a few
words before it, or on the line above a pair that starts its own, and only when its password
looks chosen: it starts with a letter and mixes letters with digits or symbols, and is no label
(`us-east-1`), hex digest, path or version.
"""

from __future__ import annotations

from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import (
    Span,
    end_before_trailing,
    is_label,
    is_placeholder,
    is_reference,
)

# The pair is found from its colon, tight between a name's character and a letter (a literal
# the engine skips ahead to: code holds many colons, prose few such), and the words that
# announce it are looked for on its line before it. Looking for each word in the whole text
# instead cost a scan of it per word. A password of letters alone (`user:pass`) is passed over
# in C too (`curl -u user:pass` repeated cost 0.27 s a megabyte), and so is a redaction's
# marker (`[REDACTED:rule]`): text that held many secrets is read again once redacted.
_COLON = lazy_compile(
    r":(?<=[A-Za-z0-9_.+@\-]:)(?<!\[REDACTED:)"
    r"(?=[^\W\d_][^\s:/\\\"'`<>]{3})"
    r"(?=[^\s:/\\\"'`<>]{1,128}?(?:[\d_]|[^\w\s:/\\\"'`<>]))"  # a digit or a symbol in it
)
_USER = lazy_compile(r"(?<![^\s\"'(\[,;=])[A-Za-z0-9_][A-Za-z0-9_.+\-@]{0,63}\Z")
_LONGEST_USER = 64
_VALUE = lazy_compile(r"[^\s:/\\\"'`<>]{4,128}+(?=[\s\"'`)\],;]|\Z)")
_ANNOUNCING = lazy_compile(
    r"(?<![a-z])(?:cred(?:s|entials?)?|logins?|logon|accounts?|auth|user[/:]pass(?:word)?"
    r"|username[/:]password)(?![a-z])"
)
_REACH = 48  # "login for the staging box is deploy:…": the word ends this far before the user
_LONGEST_ANNOUNCING = len("username/password")
_HEX = lazy_compile(r"[0-9a-f]{6,}\Z")
# Namespaces a colon joins to a name: a scheme, a package registry, a digest's algorithm, a
# setting's key (`npm:lodash@4`, `docker:Dockerfile`, `sha256:…`, `level:info`).
NAMESPACES = frozenset(
    (
        "http", "https", "ws", "wss", "ftp", "sftp", "ssh", "file", "mailto", "tel", "urn",
        "data", "npm", "jsr", "pypi", "pip", "git", "github", "gh", "gitlab", "docker", "oci",
        "image", "nuget", "cargo", "gem", "maven", "go", "pkg", "arn", "s3", "gs", "ref", "refs",
        "origin", "md5", "sha1", "sha256", "sha384", "sha512", "blake2b", "scope", "level",
        "env", "type", "tag", "version", "error", "warning", "line", "col", "at", "std", "node",
        "python", "ruby", "java", "label", "key", "name", "id", "role", "path", "repo",
    )
)  # fmt: skip


def _is_chosen(text: str, user_start: int, value_start: int, value_end: int) -> bool:
    """The value after the colon is a password someone chose, after a user's name."""
    value = text[value_start:value_end]
    user = text[user_start : value_start - 1]
    return (
        len(value) >= 4
        and value[0].isalpha()
        and not value.isalpha()  # letters with digits or symbols
        and user.lower() not in NAMESPACES
        and _HEX.match(value.lower()) is None
        and not is_label(value)
        and not is_placeholder(value)
        and not is_reference(value)
    )


# A pair alone on its line, after spaces and a list's bullet or number at most ("creds for
# db" then "admin:Hunter2!", "1. admin:Hunter2!"), is announced by a word in the end of the
# line above (not a blank one), or above the pairs listed before it ("2. ops:Deploy2024").
# A bullet's pair may follow what it is for: "- jenkins: admin:Jenk!ns2024"
_BULLET = r"[ \t]*(?:(?:[-*•]|\d{1,3}[.)])[ \t]+(?:[A-Za-z0-9_.\-]{1,32}:[ \t]+)?)?"
_PAIR_LEAD = lazy_compile(_BULLET)
_LISTED_PAIR = lazy_compile(
    _BULLET + r"[A-Za-z0-9_][A-Za-z0-9_.+\-@]{0,63}:[^\s:/\\\"'`<>]{4,128}[ \t\r]*"
)
_LONGEST_LEAD = 56
_LINE_ABOVE = 64


def _announced(lowered: str, user_start: int, above: dict[int, bool]) -> bool:
    """A word announcing a credential ends fewer than _REACH characters before the user, on
    its line, or on the line above a pair that starts its own (`above`: see _announced_above)."""
    reach = max(0, user_start - _REACH - _LONGEST_ANNOUNCING)
    line = lowered.rfind("\n", reach, user_start) + 1
    return any(
        word.end() > user_start - _REACH
        for word in _ANNOUNCING.finditer(lowered, max(line, reach), user_start)
    ) or _announced_above(lowered, user_start, above)


def _announced_above(lowered: str, user_start: int, above: dict[int, bool]) -> bool:
    """A word announcing a credential in the last _LINE_ABOVE characters of the line above a
    pair that starts its line, or of the line above the list of pairs it ends. `above` keeps
    the answer for each line break walked, so a column of pairs is walked once, not once a
    pair."""
    line_break = lowered.rfind("\n", max(0, user_start - _LONGEST_LEAD), user_start)
    if line_break < 0 or _PAIR_LEAD.fullmatch(lowered, line_break + 1, user_start) is None:
        return False
    walked: list[int] = []
    answer = False
    while line_break >= 0 and line_break not in above:
        walked.append(line_break)
        above_start = max(0, line_break - _LINE_ABOVE)
        newline = lowered.rfind("\n", above_start, line_break)
        if newline >= 0:  # (a blank line above: nothing to search)
            above_start = newline + 1
        if _ANNOUNCING.search(lowered, above_start, line_break) is not None:
            answer = True
            break
        if newline < 0 or _LISTED_PAIR.fullmatch(lowered, above_start, line_break) is None:
            break
        line_break = newline
    else:
        answer = above.get(line_break, False)
    for walked_break in walked:
        above[walked_break] = answer
    return answer


def find_colon_pairs(text: str, lowered: str) -> Iterator[Span]:
    """The password of a `user:password` pair a credential word announces on its line."""
    above: dict[int, bool] = {}
    for colon in _COLON.finditer(text):
        at = colon.start()
        user = _USER.search(text, max(0, at - _LONGEST_USER), at)
        value = _VALUE.match(text, at + 1) if user is not None else None
        if user is None or value is None:
            continue
        user_start = user.start()
        if not _announced(lowered, user_start, above):
            continue
        value_start = at + 1
        value_end = end_before_trailing(text, value_start, value.end())
        if _is_chosen(text, user_start, value_start, value_end):
            yield value_start, value_end
