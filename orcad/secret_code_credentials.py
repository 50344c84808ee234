"""Credentials that code and deployment files give by position or under a name held apart.

Pure module: no I/O. A container's environment lists a variable's name and value as two keys
(`- name: DB_PASSWORD` / `value: ...` in Kubernetes, `{"name": ..., "value": ...}` in an ECS
task); a call takes a user and a password as its two arguments (`auth=('admin', '...')`,
`HTTPBasicAuth(...)`, `smtp.login(...)`) or a password alone (`setPassword("...")`); PHP's
`define('DB_PASSWORD', '...')`, a subscript's key (`app.config['SECRET_KEY'] = '...'`), a
shell default (`${DB_PASSWORD:-...}`) and a Terraform variable's `default` name it where an
assignment's finder does not look. Every value is judged as an assignment's is: a password's
or secret's whatever its entropy, a key's or token's when it looks generated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.secret_formats import Span
from orcad.secret_values import is_credential_literal, looks_random

# A variable's name that holds a credential: its last part a password's or secret's (any
# value), or a key's or token's (a generated value); DB_PASSWORD_FILE, TOKEN_URL name others.
_NAME = (
    r"(?P<name>[a-z0-9_.\-]{0,64}?(?P<word>password|passwd|passphrase|pwd|secret|"
    r"(?:api|access|secret|private|signing|auth|client|app)[_\-.]?key|token|salt))"
    r"(?:[_\-.](?:prod|production|dev|staging|test|local|base|v?[0-9]{1,3}))?"
)
_QUOTED = r"(?:\"(?P<dq>[^\"\n]{1,256})\"|'(?P<sq>[^'\n]{1,256})')"
_PLAIN_WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "secret"})

# `- name: DB_PASSWORD` and, on the next line, `value: ...` (quoted or to the line's end)
_YAML_PAIR = re.compile(
    rf"\bname:[ \t]*[\"']?{_NAME}[\"']?[ \t]*\r?\n[ \t]*(?:-[ \t]+)?value:[ \t]*"
    rf"(?:{_QUOTED}|(?P<plain>[^\s\"'#][^\n#]{{0,255}}?))[ \t]*(?:#[^\n]*)?\r?$",
    re.MULTILINE,
)
# {"name": "DB_PASSWORD", "value": "..."}
_JSON_PAIR = re.compile(
    rf"\"name\"[ \t]*:[ \t]*\"{_NAME}\"[ \t]*,[ \t\r\n]*\"value\"[ \t]*:[ \t]*"
    r"\"(?P<dq>[^\"\n]{1,256})\""
)
# define('DB_PASSWORD', '...'), config['SECRET_KEY'] = '...', os.environ["API_TOKEN"] = "..."
_DEFINE = re.compile(rf"\bdefine[ \t]*\([ \t]*[\"']{_NAME}[\"'][ \t]*,[ \t]*{_QUOTED}")
_SUBSCRIPT = re.compile(rf"\[[ \t]*[\"']{_NAME}[\"'][ \t]*\][ \t]*=(?!=)[ \t]*{_QUOTED}")
# ${DB_PASSWORD:-default} (or `-`): the default a shell or Compose falls back on
_SHELL_DEFAULT = re.compile(rf"\$\{{{_NAME}:?-(?P<plain>[^}}\s\"'$]{{1,256}})\}}")
# variable "db_password" { ... default = "..." ... }
_TERRAFORM_DEFAULT = re.compile(
    rf"\bvariable[ \t]+\"{_NAME}\"[ \t]*\{{[^}}]{{0,400}}?\bdefault[ \t]*=[ \t]*"
    r"\"(?P<dq>[^\"\n]{1,256})\""
)
# a user and a password, by position: auth=('u', 'p'), HTTPBasicAuth('u', 'p'), .login('u', 'p')
_USER_AND_PASSWORD = re.compile(
    r"(?:\bauth[ \t]*=[ \t]*[(\[]|\b(?:httpbasicauth|httpdigestauth|basicauth|"
    r"networkcredential|passwordauthentication|usernamepasswordcredentials|login)[ \t]*\()"
    r"[ \t]*(?:\"[^\"\n]{1,256}\"|'[^'\n]{1,256}')[ \t]*,[ \t]*"
    rf"{_QUOTED}[ \t]*[)\],]"
)
# a password alone: setPassword("..."), .auth("..."), withPassword("...")
_PASSWORD_CALL = re.compile(
    r"(?:\bset_?password|\bwith_?password|\.password|\.auth)[ \t]*\([ \t]*"
    rf"{_QUOTED}[ \t]*\)"
)
# each pattern with the literals one of which every match holds (the pattern runs only then)
_NAMED = (
    (_YAML_PAIR, ("value:",)),
    (_JSON_PAIR, ('"value"',)),
    (_DEFINE, ("define",)),
    (_SUBSCRIPT, ("]",)),
    (_SHELL_DEFAULT, ("${",)),
    (_TERRAFORM_DEFAULT, ("variable",)),
)
_POSITIONAL = (
    (_USER_AND_PASSWORD, ("auth", "login", "credential")),
    (_PASSWORD_CALL, ("password", ".auth")),
)


def _value(match: re.Match[str]) -> Span | None:
    for group in ("dq", "sq", "plain"):
        if group in match.re.groupindex and match.start(group) >= 0:
            return match.span(group)
    return None


def _credential(value: str, word: str | None, *, quoted: bool) -> bool:
    """A password's or secret's value whatever its entropy; a key's, token's or salt's when it
    looks generated."""
    if word is None or word in _PLAIN_WORDS:
        return is_credential_literal(value, quoted=quoted, upper_key=True, bare=False)
    return looks_random(value)


def find_code_credentials(text: str, lowered: str) -> Iterator[Span]:
    """The values code and deployment files give credentials by position or under a name held
    apart (see the module's text)."""
    for pattern, literals in (*_NAMED, *_POSITIONAL):
        if not any(literal in lowered for literal in literals):
            continue
        for match in pattern.finditer(lowered):
            span = _value(match)
            if span is None:
                continue
            start, end = span
            while end > start and text[end - 1] in " \t\r":
                end -= 1
            quoted = match.start("plain") < 0 if "plain" in pattern.groupindex else True
            word = match["word"] if "word" in pattern.groupindex else None
            if start < end and _credential(text[start:end], word, quoted=quoted):
                yield start, end
