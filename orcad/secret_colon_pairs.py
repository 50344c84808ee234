"""A user and a password joined by a colon in a note: "creds admin:Hunter2!", "login for
staging is deploy:Summer2024!".

Pure module: no I/O. A colon joins many things that are no credential (`localhost:5432`,
`python:3.12-slim`, `level:info`, `12:30:45`, `read:user`, `npm:lodash@4`, `std::vector`,
`main:src/app.py`, `sha256:abcd…`), so a pair counts only after a word that announces one
(creds, credentials, login, logon, account, auth, user/pass) on its line, a few words before
it, and only when its password looks chosen: it starts with a letter and mixes letters with
digits or symbols, and is no label (`us-east-1`), hex digest, path or version.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.secret_values import (
    Span,
    end_before_trailing,
    is_label,
    is_placeholder,
    is_reference,
)

# The words that announce a pair, as found at memchr speed; whole words only (not "author",
# "accountant", "blogin"): _ANNOUNCES checks the letters either side.
_ANNOUNCING = ("cred", "login", "logon", "account", "auth", "user/pass", "username/password")
_ANNOUNCES = {
    "cred": re.compile(r"cred(?:s|entials?)?(?![a-z])"),
    "login": re.compile(r"logins?(?![a-z])"),
    "logon": re.compile(r"logon(?![a-z])"),
    "account": re.compile(r"accounts?(?![a-z])"),
    "auth": re.compile(r"auth(?![a-z])"),
    "user/pass": re.compile(r"user/pass(?:word)?(?![a-z])"),
    "username/password": re.compile(r"username/password(?![a-z])"),
}
# How far after the word its pair may start: "login for the staging box is deploy:…"
_REACH = 48
# The pair: a user tight against a colon and the password, each a whole word (no colon or
# slash either side, so no time, address, scope path or URL).
_PAIR = re.compile(
    r"(?<![^\s\"'(\[,;=])[A-Za-z0-9_][A-Za-z0-9_.+\-@]{0,63}"
    r":(?P<value>[^\s:/\\\"'`<>]{4,128}+)(?=[\s\"'`)\],;]|\Z)"
)
_LONGEST_PAIR = 64 + 1 + 128 + 1  # a user, its colon, a password and what follows
_HEX = re.compile(r"[0-9a-f]{6,}\Z")
# Namespaces a colon joins to a name: a scheme, a package registry, a digest's algorithm, a
# setting's key (`npm:lodash@4`, `docker:Dockerfile`, `sha256:…`, `level:info`).
_NAMESPACES = frozenset(
    (
        "http", "https", "ws", "wss", "ftp", "sftp", "ssh", "file", "mailto", "tel", "urn",
        "data", "npm", "jsr", "pypi", "pip", "git", "github", "gh", "gitlab", "docker", "oci",
        "image", "nuget", "cargo", "gem", "maven", "go", "pkg", "arn", "s3", "gs", "ref", "refs",
        "origin", "md5", "sha1", "sha256", "sha384", "sha512", "blake2b", "scope", "level",
        "env", "type", "tag", "version", "error", "warning", "line", "col", "at", "std", "node",
        "python", "ruby", "java", "label", "key", "name", "id", "role", "path", "repo",
    )
)  # fmt: skip


def _announcements(lowered: str) -> Iterator[int]:
    """Where each announcing word ends, in no particular order."""
    for word in _ANNOUNCING:
        whole = _ANNOUNCES[word]
        at = lowered.find(word)
        while at >= 0:
            if at == 0 or not lowered[at - 1].isalpha():
                match = whole.match(lowered, at)
                if match is not None:
                    yield match.end()
            at = lowered.find(word, at + len(word))


def _is_chosen(text: str, user_start: int, value_start: int, value_end: int) -> bool:
    """The value after the colon is a password someone chose, after a user's name."""
    value = text[value_start:value_end]
    user = text[user_start : value_start - 1]
    return (
        len(value) >= 4
        and value[0].isalpha()
        and not value.isalpha()  # letters with digits or symbols
        and user.lower() not in _NAMESPACES
        and _HEX.match(value.lower()) is None
        and not is_label(value)
        and not is_placeholder(value)
        and not is_reference(value)
    )


def _ends_there(text: str, match: re.Match[str]) -> bool:
    """The pair `match` found in a stretch of `text` ends where it does in the whole text."""
    whole = _PAIR.match(text, match.start())
    return whole is not None and whole.end() == match.end()


def find_colon_pairs(text: str, lowered: str) -> Iterator[Span]:
    """The password of a `user:password` pair a credential word announces on its line."""
    if ":" not in text:
        return
    searched = 0  # each stretch of text is searched for a pair once, however many words
    for word_end in sorted(_announcements(lowered)):
        # the line's end is looked for only as far as a pair can reach: a line of megabytes
        # is not read to its end from each word on it
        far = word_end + _REACH + _LONGEST_PAIR
        line_end = lowered.find("\n", word_end, far)
        stop = min(len(text), far) if line_end < 0 else line_end
        end = min(word_end + _REACH, stop)
        start = max(word_end, searched)
        if start >= end:
            continue
        searched = end
        for match in _PAIR.finditer(text, start, stop):
            if match.start() >= end:
                break
            if match.end() == stop and not _ends_there(text, match):
                continue  # the cut at `stop` fell inside the password
            value_start, value_end = match.span("value")
            value_end = end_before_trailing(text, value_start, value_end)
            if _is_chosen(text, match.start(), value_start, value_end):
                yield value_start, value_end
