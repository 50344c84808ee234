"""Credentials that code and deployment files give by position or under a name held apart.

Pure module: no I/O. A container's environment lists a variable's name and value as two keys
(`- name: DB_PASSWORD` / `value: ...` in Kubernetes, `{"name": ..., "value": ...}` in an ECS task);
a call takes a user and a password as its two arguments (`auth=('admin', '...')`,
`HTTPBasicAuth(...)`, `smtp.login(...)`; a connect call's quoted argument with a symbol right
after a quoted plain name, `ssh.connect(host, 22, 'admin', '...')`) or a password alone
(`setPassword("...")`); PHP's database handles (`new PDO($dsn, 'app', '...')`, `new
mysqli(...)`) and `define('DB_PASSWORD', '...')`, a subscript's key
(`app.config['SECRET_KEY'] = '...'`), a shell default (`${DB_PASSWORD:-...}`) and a Terraform
variable's `default` name it where an assignment's finder does not look. Every value is judged
as an assignment's is: a password's or secret's whatever its entropy, a key's or token's when it
looks generated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_formats import Span
from orcad.secret_values import is_chosen_password, is_credential_literal, looks_random

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
_YAML_PAIR = lazy_compile(
    rf"name:[ \t]*[\"']?{_NAME}[\"']?[ \t]*\r?\n[ \t]*(?:-[ \t]+)?value:[ \t]*"
    rf"(?:{_QUOTED}|(?P<plain>[^\s\"'#][^\n#]{{0,255}}?))[ \t]*(?:#[^\n]*)?\r?$",
    re.MULTILINE,
)
# {"name": "DB_PASSWORD", "value": "..."}
_JSON_PAIR = lazy_compile(
    rf"\"name\"[ \t]*:[ \t]*\"{_NAME}\"[ \t]*,[ \t\r\n]*\"value\"[ \t]*:[ \t]*"
    r"\"(?P<dq>[^\"\n]{1,256})\""
)
# define('DB_PASSWORD', '...'), config['SECRET_KEY'] = '...', os.environ["API_TOKEN"] = "..."
_DEFINE = lazy_compile(rf"define[ \t]*\([ \t]*[\"']{_NAME}[\"'][ \t]*,[ \t]*{_QUOTED}")
# a setter given the name and then the value: os.environ.setdefault("DB_PASSWORD", "..."),
# monkeypatch.setenv(...), Go's t.Setenv(...), Rust's env::set_var(...), putenv(...),
# System.setProperty("db.password", "..."), config.set("password", ...), props.put(...)
# (matched from the parenthesis, which the engine skips to; the setter's name is then looked
# for before it: a pattern starting with the names was tried at every position, 0.19 s a MB)
_SETTER = lazy_compile(rf"\([ \t]*[\"']{_NAME}[\"'][ \t]*,[ \t]*{_QUOTED}")
_SETTER_NAME = lazy_compile(
    r"(?:set_?var|set_?env|putenv|setdefault|set_?property|[.:](?:set|put))[ \t]*\Z"
)
_SETTER_NAME_REACH = len("set_property") + 4
_SUBSCRIPT = lazy_compile(rf"\[[ \t]*[\"']{_NAME}[\"'][ \t]*\][ \t]*=(?!=)[ \t]*{_QUOTED}")
# ${DB_PASSWORD:-default} (or `-`): the default a shell or Compose falls back on
_SHELL_DEFAULT = lazy_compile(rf"\$\{{{_NAME}:?-(?P<plain>[^}}\s\"'$]{{1,256}})\}}")
# variable "db_password" { ... default = "..." ... }
_TERRAFORM_DEFAULT = lazy_compile(
    rf"variable[ \t]+\"{_NAME}\"[ \t]*\{{[^}}]{{0,400}}?\bdefault[ \t]*=[ \t]*"
    r"\"(?P<dq>[^\"\n]{1,256})\""
)
# A call's arguments, found from its opening parenthesis (one character is searched for at
# C speed, where a pattern that starts with a choice of names is tried at every position):
# the name before it, then a user and a password (auth=('u', 'p'), HTTPBasicAuth('u', 'p'),
# .login('u', 'p')) or a password alone (setPassword("..."), .auth("...")).
_WINDOW = 40
_USER_AND_PASSWORD_CALLS = (
    "httpbasicauth",
    "httpdigestauth",
    "basicauth",
    "networkcredential",
    "passwordauthentication",
    "usernamepasswordcredentials",
    "login",
)
_PASSWORD_ALONE_CALLS = ("setpassword", "set_password", "withpassword", "with_password")
_PASSWORD_ALONE_METHODS = (".password", ".auth")
_USER_AND_PASSWORD = lazy_compile(
    rf"[ \t]*(?:\"[^\"\n]{{1,256}}\"|'[^'\n]{{1,256}}')[ \t]*,[ \t]*{_QUOTED}[ \t]*[)\],]"
)
_PASSWORD_ALONE = lazy_compile(rf"[ \t]*{_QUOTED}[ \t]*\)")


_OPENING = lazy_compile(r"[ \t]*(?:=[ \t]*)?([(\[])")


def _calls(lowered: str) -> Iterator[re.Match[str]]:
    """The arguments of each call (or `auth=` tuple) that gives a password by position: found
    from the words every such name holds, each searched for at C speed."""
    seen: set[int] = set()
    for word in _POSITIONAL_NAMES:
        at = lowered.find(word)
        while at >= 0:
            opening = _OPENING.match(lowered, at + len(word))
            at = lowered.find(word, at + len(word))
            if opening is None or opening.start(1) in seen:
                continue
            paren = opening.start(1)
            seen.add(paren)
            name = lowered[max(0, paren - _WINDOW) : paren].rstrip(" \t")
            arguments = None
            if name.endswith("connect") and lowered[paren] == "(":
                yield from _connect_arguments(lowered, paren + 1)
                continue
            if name.endswith(_USER_AND_PASSWORD_CALLS) or _assigned_to_auth(name):
                arguments = _USER_AND_PASSWORD.match(lowered, paren + 1)
            elif lowered[paren] == "(" and (
                name.endswith(_PASSWORD_ALONE_METHODS)
                or _ends_with_word(name, _PASSWORD_ALONE_CALLS)
            ):
                arguments = _PASSWORD_ALONE.match(lowered, paren + 1)
            if arguments is not None:
                yield arguments


# `ssh.connect(host, 22, 'admin', 'X')`, `MySQLdb.connect('localhost', 'root', 'X', 'db')`: a
# connect call takes a host, a port, a database as well, in an order each library sets, so
# each quoted argument right after another (its user) is a candidate, up to the call's end
_CONNECT_REACH = 320
_QUOTED_AFTER_QUOTED = lazy_compile(
    rf"(?:\"[^\"\n]{{1,256}}\"|'[^'\n]{{1,256}}')[ \t]*,[ \t\r\n]*(?={_QUOTED}[ \t\r\n]*[),])"
)


_PLAIN_USER = lazy_compile(r"[a-z_][a-z0-9_\-]{0,31}")


def _connect_arguments(lowered: str, at: int) -> Iterator[re.Match[str]]:
    """Each quoted argument of the connect call opened at `at` that follows a quoted one."""
    close = lowered.find(")", at, at + _CONNECT_REACH)
    if close < 0:
        return
    position = at
    while (pair := _QUOTED_AFTER_QUOTED.search(lowered, position, close + 1)) is not None:
        # the user a plain name (a host, a DSN, a URL is none) and the password with a symbol
        # (`_connect_password`): a connect call's other quoted arguments are a database, a
        # client id, a queue, a signal and its handler ("clicked", "OnClick2")
        if _PLAIN_USER.fullmatch(pair.group().split(",")[0].strip(" \t\r\n\"'")):
            yield pair
        position = pair.end()


def _assigned_to_auth(before: str) -> bool:
    """`auth=` (or `auth =`) ends `before`, auth a whole word."""
    return before.endswith("=") and _ends_with_word(before[:-1].rstrip(" \t"), ("auth",))


def _ends_with_word(text: str, words: tuple[str, ...]) -> bool:
    """`text` ends with one of `words`, whole (no letter, digit or _ before it)."""
    for word in words:
        if text.endswith(word):
            before = text[-len(word) - 1 : -len(word)]
            return not (before.isalnum() or before == "_")
    return False


# each pattern with the literals one of which every match holds (the pattern runs only then)
_NAMED = (
    (_YAML_PAIR, ("value:",)),
    (_JSON_PAIR, ('"value"',)),
    (_DEFINE, ("define",)),
    (_SETTER, ("set", "put")),
    (_SUBSCRIPT, ("]",)),
    (_SHELL_DEFAULT, ("${",)),
    (_TERRAFORM_DEFAULT, ("default",)),  # (rarer than "variable", which it also holds)
)
_WORDS_FIRST = frozenset({_YAML_PAIR, _DEFINE, _TERRAFORM_DEFAULT})
_POSITIONAL_NAMES = ("auth", "login", "credential", "password", "connect")


def _value(match: re.Match[str]) -> Span | None:
    for group in ("dq", "sq", "plain"):
        if group in match.re.groupindex and match.start(group) >= 0:
            return match.span(group)
    return None


def _credential(value: str, word: str | None, *, quoted: bool, upper_name: bool) -> bool:
    """A password's or secret's value: under an upper-case name (an environment variable's,
    `DB_PASSWORD`), whatever its entropy; under another (a form field's `password`, a widget's,
    a translation's) or by position in a call, only one that looks chosen, letters with digits
    or symbols (not `PasswordInput`, `Contraseña`, `AuthController`). A key's, token's or salt's
    when it looks generated. Never words with blanks between them (`Enter password`)."""
    if any(char.isspace() for char in value):
        return False
    if word is not None and word not in _PLAIN_WORDS:
        return looks_random(value)
    if upper_name:
        return is_credential_literal(value, quoted=quoted, upper_key=True, bare=False)
    return is_chosen_password(value)


def find_code_credentials(text: str, lowered: str) -> Iterator[Span]:
    """The values code and deployment files give credentials by position or under a name held
    apart (see the module's text)."""
    for pattern, literals in _NAMED:
        if not any(literal in lowered for literal in literals):
            continue
        for match in pattern.finditer(lowered):
            span = _value(match)
            if span is None or (pattern in _WORDS_FIRST and not _starts_a_word(lowered, match)):
                continue
            if pattern is _SETTER and not _after_a_setter(lowered, match.start()):
                continue
            start, end = span
            while end > start and text[end - 1] in " \t\r":
                end -= 1
            quoted = match.start("plain") < 0 if "plain" in pattern.groupindex else True
            name = text[match.start("name") : match.end("name")]
            value = text[start:end]
            if start < end and _credential(
                value, match["word"], quoted=quoted, upper_name=name.isupper()
            ):
                yield start, end
    if "pdo" in lowered or "mysql" in lowered:
        yield from _php_handle_passwords(text, lowered)
    if any(name in lowered for name in _POSITIONAL_NAMES):
        for match in _calls(lowered):
            span = _value(match)
            if span is None:
                continue
            value = text[span[0] : span[1]]
            connect = match.re.pattern == _QUOTED_AFTER_QUOTED.pattern
            if _credential(value, None, quoted=True, upper_name=False) and (
                not connect or _connect_password(value)
            ):
                yield span


# PHP's database handles take the password by position, whatever it looks like: `new
# PDO($dsn, 'app', 'X')` and `new mysqli('db', 'root', 'X', 'app')` third, as do
# `mysqli_connect()` and `mysql_connect()`; `mysqli_real_connect($link, ...)` fourth. The
# arguments before it are read one by one (a string, a variable, a constant or a short call).
_PHP_HANDLES = lazy_compile(
    r"(?:new[ \t]+\\?(?:pdo|mysqli)|(?<![a-z0-9_])mysqli?_(?:real_)?connect)[ \t]*\("
)
_PHP_ARGUMENT = lazy_compile(
    r"[ \t\r\n]*(?:\"(?P<dq>[^\"\n]{0,256})\"|'(?P<sq>[^'\n]{0,256})'"
    r"|\$?[a-z_\\][a-z0-9_\\:]{0,64}(?:->[a-z_][a-z0-9_]{0,64}|\[[^\]\n]{0,64}\]"
    r"|\([^()\n]{0,64}\))*)[ \t\r\n]*(?P<after>[,)])"
)


def _php_handle_passwords(text: str, lowered: str) -> Iterator[Span]:
    for call in _PHP_HANDLES.finditer(lowered):
        position = 3 if "real_connect" in call.group() else 2
        at = call.end()
        for index in range(position + 1):
            argument = _PHP_ARGUMENT.match(lowered, at)
            if argument is None or (index < position and argument["after"] == ")"):
                break
            at = argument.end()
            if index == position:
                span = _value(argument)
                if span is not None and is_credential_literal(
                    text[span[0] : span[1]], quoted=True, upper_key=False, bare=False
                ):
                    yield span


def _connect_password(value: str) -> bool:
    """A connect call's quoted argument after an account that is a password: letters, a digit
    and a symbol (not a database's name, `MyDatabase2`, nor an encoding, `utf-8`)."""
    return (
        any(char.isalpha() for char in value)
        and any(char.isdigit() for char in value)
        and any(char in "!@#$%^*~" for char in value)
    )


def _after_a_setter(lowered: str, parenthesis: int) -> bool:
    """A setter's name ends right before `parenthesis`, itself a whole word."""
    name = _SETTER_NAME.search(lowered, max(0, parenthesis - _SETTER_NAME_REACH), parenthesis)
    if name is None:
        return False
    at = name.start()
    return (
        lowered[at] in ".:" or at == 0 or not (lowered[at - 1].isalnum() or lowered[at - 1] == "_")
    )


def _starts_a_word(lowered: str, match: re.Match[str]) -> bool:
    """The match's first word is whole (its pattern cannot say so: a `\\b` before a literal
    makes the regex engine try every position instead of searching for the literal)."""
    at = match.start()
    return at == 0 or not (lowered[at - 1].isalnum() or lowered[at - 1] == "_")
