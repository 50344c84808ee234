"""Credentials in the formats of files and notes.

Pure module: no I/O. Finds netrc passwords (`machine host login user password X`), a user and
password given as a pair (`login: admin / S3cretPass`, `creds: root/toor`), passwords in SQL
statements that create or change a user (`CREATE USER ... IDENTIFIED BY 'X'`), the password
field of a .pgpass line, the values of credential-named XML elements and key/value settings
(`<password>X</password>`), and YAML block scalars under a credential's name (`password: |`).
Leaves alone a path after a login's name ("login: see /docs/login"), a hash given with
`IDENTIFIED BY PASSWORD '*6BB4...'`, /etc/passwd lines, times and counters (`12:30:45:...`),
and a token or key that does not look generated.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from orcad.lazy_patterns import alternation_matches, lazy_compile
from orcad.secret_values import (
    PARTS_OF_A_LOGIN,
    QUOTED_VALUES,
    Span,
    end_before_trailing,
    given_password,
    is_chosen_password,
    is_credential_literal,
    is_phrase_value,
    is_placeholder,
    looks_random,
    mixes_letters_and_others,
    value_ends_clause,
    value_span,
)

# ------------------------------------------------------------------------ netrc
_NETRC_PASSWORD = lazy_compile(r"password[ \t]+([^\s]{1,256})")
_NETRC_LOGIN = lazy_compile(r"(?<![^ \t\n])login[ \t]+[^\s]{1,128}[ \t]+\Z")
_NETRC_CONTEXT = 200  # a password on its own line belongs to a machine/login just above
# How far back on its line a password's login is looked for: the whole line was searched again
# for each password on it, quadratic on a long line of them.
_NETRC_REACH = 256


def find_netrc_passwords(text: str, lowered: str) -> Iterator[Span]:
    """`machine host login user password X`, on one line or on its own line below them."""
    if "password" not in lowered or ("machine" not in lowered and "login" not in lowered):
        return
    for match in _NETRC_PASSWORD.finditer(lowered):
        keyword = match.start()
        reach = max(0, keyword - _NETRC_REACH)
        newline = lowered.rfind("\n", reach, keyword)
        line = newline + 1 if newline >= 0 or reach == 0 else -1  # -1: starts out of reach
        before = lowered[max(line, reach) : keyword]
        if line < 0 or (before and not before.isspace()):
            if "login" not in before or _NETRC_LOGIN.search(lowered, reach, keyword) is None:
                continue
            netrc_line = "machine" in before or "default" in before
            if not netrc_line and not is_chosen_password(text[slice(*match.span(1))]):
                continue  # prose: "the login form's password input", no netrc line
        else:
            context = lowered[max(0, line - _NETRC_CONTEXT) : line]
            if "machine " not in context and "login " not in context:
                continue
        start, end = match.span(1)
        value = text[start:end]
        if given_password(value):
            yield start, end


# ------------------------------------------------------------ login pairs
# A user and a password given together: `login: admin / S3cretPass`, `creds: root/toor`, "the
# default credentials are admin/admin123", `username & password: grafana / Gr4fana!`. Found
# from the slash (one character is looked for at memchr speed, where each word would cost a
# scan of the text): the name and the user end right before it, on its line; the slash has
# spaces on both sides or neither, as a pair is written ("login: see /docs/login" is a path).
# The head (`login: admin `: a name, `:`, `=` or a verb, a user, blanks) is matched on its
# line read backwards from the slash, once, in C: searched forwards, it was tried at each of
# the 128 characters before every slash ("login: a / " repeated: 0.7 s a megabyte). The
# name's start is checked after it, where the window's edge cut the line.
# ("log in with admin / X", "log into the kiosk using kiosk/X": a verb of logging in, a few
# words, then "with" or "using" give the pair too)
_PAIR_HEAD_BACKWARDS = lazy_compile(
    r"(?P<before>[ \t]*)(?P<user>[a-z0-9_.@+\-]{1,64})"
    # where the login is, between its name and the colon ("login on the lab pc: ...")
    r"(?:[ \t]*[:=][ \t]*(?:(?:[a-z0-9_.\-]{1,30}[ \t]+){1,4}?(?:no|rof|ta|ni|fo)[ \t]+)?"
    r"|[ \t]+(?:si|era|saw|erew)[ \t]+|(?P<bare>[ \t]+)"
    r"|[ \t]+(?P<given>htiw|gnisu)(?:[ \t]+[a-z0-9_.\-]{1,30}){0,6}?[ \t]+"
    r"(?=(?:ni|otni)[ \t]+g|nigol))"
    r"(?P<name>nigol|nogol|(?:s|s?laitne)derc|"
    r"(?:drow)?ssap[ \t]*(?:/|&|dna)[ \t]*(?:eman)?resu|"
    r"(?:ni|otni)[ \t]+(?:gol|gniggol))"
    r"(?![a-z0-9_\-])"
)
_PAIR_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


class _PairHead(NamedTuple):
    credentials: bool  # named creds or credentials: any word of 4 or more is the password
    spaced: bool  # blanks before the slash: the value must have them after it too
    given: bool  # by a verb of logging in ("log in with admin / X"): its sentence may go on
    bare: bool  # a blank alone between the name and the user: the password must look chosen


def _pair_head(lowered: str, start: int, slash: int) -> _PairHead | None:
    """The head of a pair that ends at `slash`, from `start` on its line."""
    head = _PAIR_HEAD_BACKWARDS.match(lowered[start:slash][::-1])
    if head is None:
        return None
    name = slash - head.end()
    if name > 0 and lowered[name - 1] in _PAIR_NAME_CHARACTERS:
        return None
    if head["bare"] is not None and head["user"][::-1] in _NOT_BARE_USERS:
        return None  # "the login page / Dashboard2": a thing of a login, not its user
    return _PairHead(
        head["name"].endswith("derc"),
        bool(head["before"]),
        head["given"] is not None,
        head["bare"] is not None,
    )


# what follows a login's name with a blank and is no user: its parts and what it does
_NOT_BARE_USERS = PARTS_OF_A_LOGIN | frozenset(
    ("fails", "failed", "works", "worked", "is", "was", "and", "or", "via", "with", "then")
)


_PAIR_REACH = 128
_PAIR_VALUE = lazy_compile(r"(?P<after>[ \t]*)(?P<value>[^\s\"'`/]{1,128}+)")


def _pair_ends(text: str, value_end: int, stripped_end: int) -> bool:
    """The pair ends its clause, or its cell of a Markdown table."""
    rest = text[value_end : value_end + 8].lstrip(" \t")
    return rest[:1] == "|" or value_ends_clause(text, value_end, stripped_end)


# where the sentence of a pair given by a verb of logging in goes on: "log in with admin /
# S3cretPass! on the dashboard"
_GOES_ON = lazy_compile(r"[ \t]+(?:on|at|in|to|into|for|via|from|and|then)[ \t]")
_PAIR_NAMES = ("log", "cred", "user")  # a head holds one (login, logon, creds, username)
_SHORTEST_PAIR_NAME = 3


def _first_pair_name(lowered: str, start: int, found: dict[str, int]) -> int:
    """Where the first of _PAIR_NAMES from `start` begins, or -1. `found` keeps where each
    name was last found (_NOT_LOOKED_FOR before the first look), so each is looked for once
    per occurrence however many slashes come before it."""
    for name, at in found.items():
        if at == _NOT_LOOKED_FOR or 0 <= at < start:
            found[name] = lowered.find(name, start)
    return min((at for at in found.values() if at >= 0), default=-1)


_NOT_LOOKED_FOR = -2
# slashes close together: fewer are looked at one by one, as the few slashes of prose are
_SLASHES_BEFORE_A_SKIP = 32


def _bare_pairs_password(value: str) -> bool:
    """After "login USER /" with no colon nor verb: a symbol in it, or eight characters or more
    of both cases and a digit ("neo4j-Mz2Pq7"; not "Signup2")."""
    return any(char in "!@#$%^&*+=?~" for char in value.rstrip("!?.")) or (
        len(value) >= 8
        and any(char.isdigit() for char in value)
        and value.lower() != value != value.upper()
    )


def find_login_pairs(text: str, lowered: str) -> Iterator[Span]:
    """The password of a user and password given as a pair: `login: admin / S3cretPass`."""
    found = dict.fromkeys(_PAIR_NAMES, _NOT_LOOKED_FOR)
    nameless = 0  # slashes in a row, each near the one before, with no name before them
    previous = -_PAIR_REACH
    slash = lowered.find("/")
    while slash >= 0:
        reach = max(0, slash - _PAIR_REACH)
        reach = max(reach, lowered.rfind("\n", reach, slash) + 1)  # on the slash's line
        window = lowered[reach:slash]
        if "log" not in window and "cred" not in window and "user" not in window:
            nameless = nameless + 1 if slash - previous < _PAIR_REACH else 0
            previous = slash
            if nameless < _SLASHES_BEFORE_A_SKIP:
                slash = lowered.find("/", slash + 1)
                continue
            # none before the next name either: a text of slashes (a path, a rule drawn with
            # them) is passed over at C speed
            name = _first_pair_name(lowered, reach, found)
            if name < 0:
                return
            slash = lowered.find("/", max(slash + 1, name + _SHORTEST_PAIR_NAME))
            continue
        nameless = 0
        head = _pair_head(lowered, reach, slash)
        tail = _PAIR_VALUE.match(lowered, slash + 1) if head is not None else None
        if head is not None and tail is not None and head.spaced == bool(tail["after"]):
            start, value_end = tail.span("value")
            end = end_before_trailing(text, start, value_end)
            value = text[start:end]
            if (
                (is_chosen_password(value) and (not head.bare or _bare_pairs_password(value)))
                or (head.credentials and len(value) >= 4 and not is_placeholder(value))
            ) and (
                _pair_ends(text, value_end, end)
                or (head.given and _GOES_ON.match(lowered, value_end) is not None)
            ):
                yield start, end
        slash = lowered.find("/", slash + 1)


# -------------------------------------------------------------------------- SQL
# CREATE/ALTER USER ... IDENTIFIED [WITH plugin] BY 'x' (MySQL, Oracle: there unquoted too),
# CREATE/ALTER ROLE|USER ... [LOGIN|WITH|ENCRYPTED] PASSWORD 'x' (PostgreSQL, Snowflake, ...),
# SET PASSWORD ... = PASSWORD('x') (MySQL). `IDENTIFIED BY PASSWORD '*6BB4...'` gives a hash.
# (literals that must all occur, the patterns of a statement): each pattern starts with a
# literal, which lets the engine skip ahead; the character before the match is checked after it.
# A statement's patterns are the branches of one alternation, searched for one by one
# (`alternation_matches`): `(?:create|alter)…|grant` tried every a, c and g of the text.
_SQL_PASSWORDS: tuple[tuple[tuple[str, ...], tuple[re.Pattern[str], ...]], ...] = (
    # quoted, in a statement that creates or changes a user or role, or grants (MySQL 5): a
    # sentence says what a thing is "identified by 'name'"
    (
        ("identified",),
        tuple(
            lazy_compile(
                rf"{statement}(?![a-z0-9_])[^;]{{0,300}}?"
                r"\sidentified[ \t]+(?:with[ \t]+[a-z0-9_'\"]{1,64}[ \t]+)?by[ \t]+"
                rf"(?:{QUOTED_VALUES})"
            )
            for statement in (r"create[ \t]+(?:user|role)", r"alter[ \t]+(?:user|role)", "grant")
        ),
    ),
    # unquoted (Oracle) only in the statement: "identified by their email" is prose
    (
        ("identified", "user"),
        (
            lazy_compile(
                r"user(?![a-z0-9_])[^;\n]{0,300}?[ \t]identified[ \t]+by[ \t]+"
                r"(?!password(?![a-z0-9_]))([a-z0-9_#$!@%^&*+\-]{1,128}+)"
            ),
        ),
    ),
    (
        ("password", "user"),
        (
            lazy_compile(
                r"user(?![a-z0-9_])[^;\n]{0,300}?[ \t]password[ \t]+" + rf"(?:{QUOTED_VALUES})"
            ),
        ),
    ),
    (
        ("password", "role"),
        (
            lazy_compile(
                r"role(?![a-z0-9_])[^;\n]{0,300}?[ \t]password[ \t]+" + rf"(?:{QUOTED_VALUES})"
            ),
        ),
    ),
    (
        ("password",),
        (lazy_compile(r"password[ \t]*\([ \t]*" + rf"(?:{QUOTED_VALUES})[ \t]*\)"),),
    ),
)
_CREATE_OR_ALTER = lazy_compile(r"(?:create|alter)[ \t]+\Z")


def find_sql_passwords(text: str, lowered: str) -> Iterator[Span]:
    """Passwords in SQL statements that create or change a user."""
    if "identified" not in lowered and "password" not in lowered:
        return
    statement = "create" in lowered or "alter" in lowered  # CREATE|ALTER USER|ROLE ...
    for literals, patterns in _SQL_PASSWORDS:
        if patterns[0].pattern.startswith(("user", "role")) and not statement:
            continue
        if not all(literal in lowered for literal in literals):
            continue
        for match in alternation_matches(patterns, lowered):
            at = match.start()
            if at and (lowered[at - 1].isalnum() or lowered[at - 1] == "_"):
                continue
            if (  # CREATE|ALTER USER|ROLE
                match.re.pattern.startswith(("user", "role"))
                and _CREATE_OR_ALTER.search(lowered, max(0, at - 16), at) is None
            ):
                continue
            start, end, _ = value_span(match)
            if text[start - 2 : start - 1] == ":":
                continue  # psql's :'variable': the value is set elsewhere
            if given_password(text[start:end]):
                yield start, end


# ----------------------------------------------------------------------- pgpass
# A line of ~/.pgpass: hostname:port:database:username:password, `*` for any of the first four
# and `\:` for a colon inside a field. The whole line is the five fields (or a quoted one, as
# `echo '...' >> ~/.pgpass` writes it): /etc/passwd lines have seven, addresses no port field.
_PGPASS_FIELD = r"(?:[^\s:\\\"']|\\.){1,128}"
_PGPASS_LINE = lazy_compile(
    r"(?:^[ \t]*|[\"'])[a-z0-9_.\-*\[\]]{1,253}:(?:[0-9]{1,5}|\*):"
    rf"{_PGPASS_FIELD}:{_PGPASS_FIELD}:((?:[^\s:\\\"']|\\.){{1,256}})(?=[\"']|[ \t]*$)",
    re.MULTILINE,
)
_PGPASS_PORT = lazy_compile(r":(?:[0-9]{1,5}|\*):")


def find_pgpass_passwords(text: str, lowered: str) -> Iterator[Span]:
    """The password field of a .pgpass line."""
    line_end = -1
    # only the lines holding a port field are matched (a match never crosses a line): the whole
    # pattern tried at every line start and quote of a long text cost more than the rest
    for port in _PGPASS_PORT.finditer(lowered):
        if port.start() < line_end:
            continue  # on a line already matched
        line_start = lowered.rfind("\n", 0, port.start()) + 1
        line_end = lowered.find("\n", port.end())
        if line_end < 0:
            line_end = len(lowered)
        if lowered.count(":", line_start, line_end) < 4:
            continue  # a line of five fields has four colons: a log line's time has two
        for match in _PGPASS_LINE.finditer(lowered, line_start, line_end):
            host = lowered[match.start() : lowered.index(":", match.start())].strip(" \t\"'")
            if host.isdigit():  # a time or a counter (12:30:45:...), not a host name
                continue
            start, end = match.span(1)
            if given_password(text[start:end]):
                yield start, end


# ---------------------------------------------------------------------- markup
# <password>X</password> (Maven's settings.xml, Spring, Jenkins) and .NET's
# <add key="SmtpPassword" value="X" /> (or name=, as <param name="password" value="X"/>): a
# name ending in a credential word gives a literal.
_MARKUP_NAME = (
    r"[a-z0-9_.:\-]{0,40}?(?P<word>pass(?:word|wd|phrase)?|pwd|secret|token|credentials?|"
    r"(?:api|access|secret|private|signing|client|auth|account|app)[_\-.]?key)"
)
_XML_ELEMENT = lazy_compile(rf"<(?P<name>{_MARKUP_NAME})>(?P<value>[^<\n]{{1,256}}+)</(?P=name)>")
_XML_SETTING = lazy_compile(
    rf"(?:key|name)=\"(?P<name>{_MARKUP_NAME})\""
    rf"(?:[ \t]{{1,8}}[a-z\-]{{1,16}}=\"[^\"\n]{{0,64}}\")?"
    rf"[ \t]{{1,8}}value=\"(?P<value>[^\"\n]{{1,256}}+)\""
)
# the name in an attribute and the value as the element's text: Hibernate's and Spring's
# <property name="hibernate.connection.password">X</property>, Java's properties in XML
# <entry key="password">X</entry>, Android's <string name="api_key">X</string>
_XML_NAMED_ELEMENT = lazy_compile(
    rf"<(?P<tag>property|entry|param|parameter|setting|string|item|add)[ \t]+(?:key|name)="
    rf"\"(?P<name>{_MARKUP_NAME})\"[ \t]*>(?P<value>[^<\n]{{1,256}}+)</(?P=tag)>"
)


def find_markup_credentials(text: str, lowered: str) -> Iterator[Span]:
    """The values of credential-named XML elements and key/value settings."""
    if "</" not in lowered and "value=" not in lowered:
        return
    for pattern in (_XML_ELEMENT, _XML_SETTING, _XML_NAMED_ELEMENT):
        for match in pattern.finditer(lowered):
            start, end = match.span("value")
            value = text[start:end].strip()
            word = match["word"]
            if word == "token" or word.endswith("key"):  # these must look generated
                credential = looks_random(value)
            else:  # a password or secret is a password whatever its entropy
                bare = word in ("secret", "credential", "credentials") and match["name"] == word
                credential = is_credential_literal(value, quoted=True, upper_key=False, bare=bare)
            if credential:
                yield start, end


# ---------------------------------------------------------------- YAML blocks
# `password: |` (or >, |-, >+2, ...): the value is the block of lines indented below the key.
_YAML_BLOCK_KEY = lazy_compile(
    r"^(?P<indent>[ \t]*)(?:-[ \t]+)?[\"']?(?:[a-z0-9_.\-]{0,40}?[_.\-])?"
    r"(?P<word>pass(?:word|wd|phrase)?|pwd|secret|token|credentials?|"
    r"(?:api|access|secret|private|signing|client|auth|account|app)[_\-.]?key)"
    r"[\"']?[ \t]*:[ \t]*[|>][1-9+\-]{0,2}[ \t]*(?:#[^\n]*)?\n",
    re.MULTILINE,
)
_YAML_BLOCK_MAX_LINES = 64  # a password or a wrapped token is a line or a few


def find_yaml_block_credentials(text: str, lowered: str) -> Iterator[Span]:
    """The value of a YAML block scalar under a credential's name: `password: |` and the
    lines indented below it."""
    if ": |" not in lowered and ": >" not in lowered:
        return
    for match in _YAML_BLOCK_KEY.finditer(lowered):
        start, end = _yaml_block(text, match.end(), len(match.group("indent")))
        if start >= end:
            continue
        value = text[start:end]
        word = match.group("word")
        if word == "token" or word.endswith("key"):  # these must look generated
            credential = looks_random("".join(value.split()))
        elif "\n" in value:  # many lines: a wrapped value has no spaces, prose has
            lines = value.split()
            credential = len(lines) == value.count("\n") + 1 and mixes_letters_and_others(
                "".join(lines)
            )
        else:  # one line: of several words, a passphrase (not prose such as "Ask ops.")
            bare = word in ("secret", "credential", "credentials")
            credential = is_credential_literal(value, quoted=True, upper_key=False, bare=bare) and (
                len(value.split()) == 1 or is_phrase_value(value)
            )
        if credential:
            yield start, end


def _yaml_block(text: str, at: int, key_indent: int) -> Span:
    """The span of the content of the block starting at `at`: the lines indented deeper than
    its key (blank lines inside it included), without the indentation and the line ends
    around it."""
    start = end = -1
    position = at
    for _ in range(_YAML_BLOCK_MAX_LINES):
        line_end = text.find("\n", position)
        line_end = len(text) if line_end < 0 else line_end
        line = text[position:line_end]
        content = line.lstrip(" \t")
        if content:
            if len(line) - len(content) <= key_indent:
                break
            if start < 0:
                start = line_end - len(content)
            end = position + len(line.rstrip())
        if line_end >= len(text):
            break
        position = line_end + 1
    return (start, end) if start >= 0 else (0, 0)


# ------------------------------------------------------- OpenVPN's auth-user-pass file
# OpenVPN's `auth-user-pass creds.txt` reads a file of two lines, the user's name and then the
# password, with nothing to name either. Pasted below the directive (or printed by `cat` from
# a VPN's directory: `secret_config_lines` finds both), its second line is a password when it
# looks chosen.
_VPN_LINES_AFTER = 4  # lines a comment or the command that prints the file may take
_LONE_WORD = lazy_compile(r"[ \t]*+([^\s#;=:]{1,128}+)[ \t\r]*+\Z")
_PASSWORD_LINE = lazy_compile(r"[ \t]*+([^\s]{4,128}+)[ \t\r]*+\Z")


def second_line_password(text: str, at: int) -> Span | None:
    """The password of a user's line and a password's line that start within a few lines of
    `at`, past comments, blank lines and the command that prints them."""
    lines: list[tuple[int, str]] = []
    while at <= len(text) and len(lines) < _VPN_LINES_AFTER + 2:
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        lines.append((at, text[at:end]))
        at = end + 1
    for index, (_, line) in enumerate(lines[:-1]):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;$>" or stripped.lower().startswith("cat "):
            continue
        user = _LONE_WORD.match(line)
        start, second = lines[index + 1]
        password = _PASSWORD_LINE.match(second)
        if user is None or password is None or not is_chosen_password(password[1]):
            return None
        return start + password.start(1), start + password.end(1)
    return None
