"""A password given with a login in plain words, no word for password near it: "ssh in as root
with tr0ub4dor&3abc", "log in to grafana as admin using P@ssw0rd!23zz", "use `Winter2024!xq`
to log in as admin".

Pure module: no I/O. Both forms are found from a literal (" as " before the user, " to " before
"log in" and its kin after the value), looked for with str.find, and each place is matched
there: text without them costs two passes at C speed. The value counts only when it looks
chosen (`is_chosen_password`) and holds a digit or a symbol a name does not (`!@#$%^&*+=?~`):
"log in as admin with sso", "with okta" or "with the-ssh-key" are ways to log in, not
passwords, and "npm@10" is a package.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.secret_values import (
    Span,
    end_before_trailing,
    is_chosen_password,
    is_placeholder,
    is_reference,
)

# " as USER with|using [the] [password] VALUE", a value quoted or not
_AS_USER_WITH = re.compile(
    r" as [ \t]*[^\s]{1,64}[ \t]+(?:with|using)[ \t]+(?:(?:the[ \t]+)?pass(?:word)?[ \t]+)?"
    r"(?P<quote>[`'\"]?)(?P<value>[^\s`'\"]{4,128}+)(?P=quote)"
)
# what comes before " as" on its line for a login: the verb, perhaps where to ("log in to
# grafana", "ssh into the bastion")
_LOGIN_BEFORE = re.compile(
    r"(?<![a-z0-9_\-])(?:log(?:ged|ging)?[ \t-]?(?:in|on)|login|sign(?:ed|ing)?[ \t-]?in|"
    r"ssh(?:[ \t]+in(?:to)?)?|connect(?:ed|ing)?|authenticate[sd]?)"
    r"(?:[ \t]+(?:to|into|on|at)[ \t]+(?:the[ \t]+)?[^\s]{1,64})?[ \t]*\Z"
)
_LOGIN_REACH = 96  # characters before " as" the verb may start at
# "use|with|try VALUE to log in|sign in|log on|ssh", the value quoted or not (matched at each
# " to ": a search for each of the five phrases cost more than the rest of the module)
_AFTERWARDS = re.compile(r" to (?:log(?:[ -]?in| on)|login|sign[ -]?in|ssh)(?![a-z])")
_USE_VALUE = re.compile(
    r"(?<![a-z0-9_\-])(?:use|using|with|try)[ \t]+(?P<quote>[`'\"]?)"
    r"(?P<value>[^\s`'\"]{4,128}+)(?P=quote)\Z"
)
_VALUE_REACH = 160
_SYMBOLS = frozenset("!@#$%^&*+=?~")
# a package at a version ("try npm@10 to log in to the registry")
_PACKAGE = re.compile(r"[a-z0-9][\w.\-/]*@(?:\d[\w.\-]*|latest|next)\Z", re.IGNORECASE)


def _password_like(value: str) -> bool:
    return (
        is_chosen_password(value)
        and (any(char.isdigit() for char in value) or any(char in _SYMBOLS for char in value))
        and not is_placeholder(value)
        and not is_reference(value)
        and _PACKAGE.match(value) is None
    )


def _places(lowered: str, literal: str) -> Iterator[int]:
    """Where `literal` occurs in `lowered`: str.find is three times as fast as a pattern's
    search for its literal start."""
    at = lowered.find(literal)
    while at >= 0:
        yield at
        at = lowered.find(literal, at + 1)


def find_login_passwords(text: str, lowered: str) -> Iterator[Span]:
    """The password a login in plain words gives (see the module's docstring)."""
    for at in _places(lowered, " as "):
        match = _AS_USER_WITH.match(lowered, at)
        if match is None:
            continue
        start = max(0, at - _LOGIN_REACH)
        start = max(start, lowered.rfind("\n", start, at) + 1)
        if _LOGIN_BEFORE.search(lowered, start, at) is None:
            continue
        value_start, value_end = match.span("value")
        value_end = end_before_trailing(text, value_start, value_end)
        if _password_like(text[value_start:value_end]):
            yield value_start, value_end
    for at in _places(lowered, " to "):
        if _AFTERWARDS.match(lowered, at) is None:
            continue
        start = max(0, at - _VALUE_REACH)
        start = max(start, lowered.rfind("\n", start, at) + 1)
        found = _USE_VALUE.search(lowered, start, at)
        if found is not None:
            value_start, value_end = found.span("value")
            if _password_like(text[value_start:value_end]):
                yield value_start, value_end
