"""Passwords given on a command line.

Pure module: no I/O. Finds credential flags (`--password X`, `docker login -p X`, `mysql -pX`,
`curl -u user:X`, `ldapsearch -w X`, ...), passwords given as a plain argument or piped to a
command that reads them (`htpasswd -b FILE USER X`, `echo X | sudo -S ...`, `echo 'user:X' |
chpasswd`, `echo X | passwd --stdin USER`, `net user NAME X`, `wpa_passphrase SSID X`,
`sqlplus USER/X@DB`), and Redis's `requirepass X` and `masterauth X`. Leaves alone a flag that
prose names ("the --password option"), a port mapping on a tool's line (`-p 27017:27017`), a
flag whose other case means something else (`ldapsearch -W` prompts), words of prose where a
command's password would go ("rabbitmqctl add_user admin then ...") and the example passwords
documentation gives, redis.conf's `foobared` and Oracle's `scott/tiger`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_command_inputs import find_passwd_stdin
from orcad.secret_values import (
    QUOTED_VALUES,
    TRAILING,
    Span,
    given_password,
    is_chosen_password,
    is_credential_literal,
    line_start_before,
    looks_random,
    names_a_credential,
    value_span,
)

_VALUE = rf"(?:{QUOTED_VALUES}|([^\s\"'`;&|()<>]{{1,256}}+))"
_LONG_FLAG = lazy_compile(
    r"--(?:[a-z0-9]{1,20}-){0,4}(?:password|passwd|passphrase|pass|pwd|secret)(?:=|[ \t]+)" + _VALUE
)
# (flag that must occur, command that must occur, pattern): the flag is the cheaper test
_TOOL_FLAGS = (
    # registry logins take -p PASSWORD; elsewhere -p is a port or a path
    (
        "-p",
        "login",
        lazy_compile(
            r"login(?![a-z0-9_\-])[^\n|;&]{0,300}?[ \t]-p(?:=|[ \t]+)" + _VALUE,
        ),
    ),
    # mysql reads -pPASSWORD (no space; with a space it prompts)
    ("-p", "mysql", lazy_compile(r"mysql[a-z]{0,6}[^\n|;&]{0,300}?[ \t]-p" + _VALUE)),
    ("-p", "sshpass", lazy_compile(r"sshpass[ \t]+-p[ \t]*" + _VALUE)),
    ("-a", "redis-cli", lazy_compile(r"redis-cli[^\n|;&]{0,300}?[ \t]-a[ \t]+" + _VALUE)),
    # Cassandra's cqlsh and Neo4j's cypher-shell take -p PASSWORD (cqlsh's port follows its
    # host, cypher-shell's address is -a)
    ("-p", "cqlsh", lazy_compile(r"cqlsh[^\n|;&]{0,300}?[ \t]-p(?:=|[ \t]+)" + _VALUE)),
    (
        "-p",
        "cypher-shell",
        lazy_compile(r"cypher-shell[^\n|;&]{0,300}?[ \t]-p(?:=|[ \t]+)" + _VALUE),
    ),
    # neo4j-admin (dbms) set-initial-password PASSWORD
    (
        "set-initial-password",
        "neo4j",
        lazy_compile(r"neo4j[^\n|;&]{0,300}?[ \t]set-initial-password[ \t]+" + _VALUE),
    ),
    # mongo, mongosh, mongodump, ... take -p PASSWORD (their port is --port)
    (
        "-p",
        "mongo",
        lazy_compile(r"mongo[a-z]{0,8}(?![a-z0-9_\-])[^\n|;&]{0,300}?[ \t]-p(?:=|[ \t]+)" + _VALUE),
    ),
    (
        "pass",
        "keytool",
        lazy_compile(
            r"keytool[^\n|;&]{0,300}?[ \t]-(?:src|dest)?(?:store|key)pass(?:=|[ \t]+)" + _VALUE
        ),
    ),
    # zip -P PASSWORD; 7z -pPASSWORD (no space); openssl enc -k PASSWORD
    # (the flag may come first: `zip -P X a.zip`)
    (
        "-p",
        "zip",
        lazy_compile(r"zip(?<![a-z0-9_\-]zip)(?:[ \t][^\n|;&]{0,300}?)?[ \t]-p[ \t]+" + _VALUE),
    ),
    ("-p", "7z", lazy_compile(r"7(?<![a-z0-9_\-]7)za?(?:[ \t][^\n|;&]{0,300}?)?[ \t]-p" + _VALUE)),
    # mosquitto_pub/_sub/_rr -P PASSWORD (their -p is the port: _CASED_FLAGS)
    (
        "-p",
        "mosquitto_",
        lazy_compile(r"mosquitto_(?:pub|sub|rr)[^\n|;&]{0,300}?[ \t]-p[ \t]+" + _VALUE),
    ),
    # MinIO's client: mc alias set NAME URL ACCESS-KEY SECRET-KEY
    (
        "set",
        "mc",
        lazy_compile(
            r"mc(?<![a-z0-9_\-]mc)[ \t]+(?:alias[ \t]+set|config[ \t]+host[ \t]+add)"
            r"(?:[ \t]+[^\s|;&]{1,256}){3}[ \t]+" + _VALUE
        ),
    ),
    ("-k", "openssl", lazy_compile(r"openssl[^\n|;&]{0,300}?[ \t]-k[ \t]+" + _VALUE)),
    # macOS's keychain tool: security unlock-keychain -p X, create-keychain -p X,
    # set-keychain-password -p X; add-generic-password and add-internet-password take -w X
    # (find-generic-password -w prints the password: no value follows it)
    (
        "-p",
        "keychain",
        lazy_compile(
            r"security[ \t]+(?:unlock|create|set)-keychain(?:-password)?(?![a-z0-9_\-])"
            r"[^\n|;&]{0,300}?[ \t]-p[ \t]+" + _VALUE
        ),
    ),
    (
        "-w",
        "security",
        lazy_compile(
            r"security[ \t]+add-(?:generic|internet)-password(?![a-z0-9_\-])"
            r"[^\n|;&]{0,300}?[ \t]-w[ \t]+" + _VALUE
        ),
    ),
    # GitHub's CLI stores a secret given as its body: gh secret set NAME --body X (or -bX)
    (
        "-b",
        "secret",
        lazy_compile(
            r"gh(?<![a-z0-9_\-]gh)[ \t]+secret[ \t]+set[^\n|;&]{0,300}?"
            r"[ \t](?:-b|--body)(?:=|[ \t]*)" + _VALUE
        ),
    ),
    (
        "-u",
        "smbclient",
        lazy_compile(
            r"smbclient[^\n|;&]{0,300}?[ \t]-u[ \t]+[\"']?[^\s%\"']{1,128}%"
            r"([^\s\"']{1,256}+)"
        ),
    ),
    # HTTPie's http and https take -a/--auth USER:PASSWORD as curl takes -u
    (
        "-a",
        "http",
        lazy_compile(
            r"(?<![a-z0-9_\-./:])https?(?=[ \t])[^\n|;&]{0,300}?[ \t](?:-a|--auth)(?:=|[ \t]+)"
            r"[\"']?[^\s:\"']{1,128}:([^\s\"']{1,256}+)"
        ),
    ),
    (
        "-u",
        "curl",
        lazy_compile(
            r"curl[^\n|;&]{0,300}?[ \t](?:-u|--user)(?:=|[ \t]+)[\"']?[^\s:\"']{1,128}:"
            r"([^\s\"']{1,256}+)"
        ),
    ),
)


# Tools whose password flag is told from another option by its case alone (the patterns read
# the lowered text): the flag as it must be written
_CASED_FLAGS = {"mosquitto_": "-P"}


# keytool takes several passwords in one command (-storepass X -keypass Y): the flags after
# the first one found, up to the command's end
_KEYTOOL_MORE = lazy_compile(r"[ \t]-(?:src|dest)?(?:store|key)pass(?:=|[ \t]+)" + _VALUE)
_COMMAND_END = lazy_compile(r"[\n|;&]")


def _more_keytool_passwords(text: str, lowered: str, after: int) -> Iterator[Span]:
    """The pass flags after `after` on keytool's command line. Read up to the next keytool
    too, whose own match reads on, and the command's end is looked for only that far: each
    flag is read once."""
    following = lowered.find("keytool", after)
    limit = len(lowered) if following < 0 else following
    ends = _COMMAND_END.search(lowered, after, limit)
    for match in _KEYTOOL_MORE.finditer(lowered, after, limit if ends is None else ends.start()):
        start, end, _ = value_span(match)
        if given_password(text[start:end]):
            yield start, end


# A word of prose where a command's argument goes, then a plain word: the command is named in
# a sentence ("use wpa_passphrase to generate"), where a passphrase would be chosen.
_NOT_PROSE = (
    r"(?!(?:to|for|with|and|or|then|in|on|is|can|will|the|a|an)[ \t]+[a-z]++(?![^\s;&|)<>#]))"
)
# A shell word: quoted, or unquoted up to a space or an operator.
_WORD = r"(?:\"[^\"\n]{0,256}\"|'[^'\n]{0,256}'|[^\s\"'`;&|()<>]{1,256})"
# htpasswd -b takes the password as its last argument: `htpasswd -b[c|B|...] FILE USER PASS`,
# or `htpasswd -nb USER PASS` (no file). Its flags are read in the text as written, since -B
# (bcrypt) is not -b (batch).
_HTPASSWD = lazy_compile(
    r"htpasswd(?<![a-z0-9_\-]htpasswd)(?P<flags>(?:[ \t]+-[a-z]{1,6}(?:[ \t]+[0-9]{1,2})?){1,4})"
    rf"(?P<arguments>(?:[ \t]+{_WORD}){{1,2}}?)[ \t]+"
    + _VALUE
    + r"(?=[ \t]*(?:$|[\n;&|)<>#]|[0-9]>))"
)
# `echo PASS | sudo -S ...`: sudo reads the password from its standard input (-S, not -s)
_SUDO_STDIN = lazy_compile(
    r"echo(?<![a-z0-9_\-]echo)[ \t]+(?:-[ne]{1,2}[ \t]+)?"
    + _VALUE
    + r"[ \t]*\|[ \t]*sudo(?:[ \t]+-[a-z]{1,8}(?:[ \t]+[a-z0-9_\-]{1,32})??)*?"
    r"[ \t]+-(?P<flag>[a-z]{0,7}s[a-z]{0,7})(?![a-z0-9_\-])"
)


# (command that must occur, pattern whose first groups are the value): commands that take a
# password as a plain argument or read one piped in
_ARGUMENT_PASSWORDS = (
    # `echo 'user:PASS' | chpasswd`, `chpasswd <<< 'user:PASS'`
    (
        "chpasswd",
        lazy_compile(
            r"echo(?<![a-z0-9_\-]echo)[ \t]+(?:-[ne]{1,2}[ \t]+)?[\"']?[a-z0-9_.\-]{1,32}:"
            r"([^\s\"'|;&]{1,256}+)[\"']?[ \t]*\|[ \t]*(?:sudo[ \t]+)?chpasswd"
        ),
    ),
    (
        "chpasswd",
        lazy_compile(r"chpasswd[ \t]*<<<[ \t]*[\"']?[a-z0-9_.\-]{1,32}:([^\s\"'|;&]{1,256}+)"),
    ),
    # Windows: `net user NAME PASS [/add]` (`*` prompts for it)
    (
        "net user",
        lazy_compile(
            # a command: starts its line (after a prompt such as C:\>), follows && ; | or opens
            # inline code
            r"(?:^[ \t]*(?:[a-z]:\\[^>\n]{0,200}>[ \t]*|ps[ \t][^>\n]{0,200}>[ \t]*)?|[;&|`][ \t]*)"
            r"net[ \t]+user[ \t]+[^\s/]{1,64}[ \t]+"
            + _VALUE
            + r"(?=[ \t]+/|[ \t]*(?:$|[\r\n&|`]))",
            re.MULTILINE,
        ),
    ),
    # ... or anywhere in a sentence when one of its options follows a value that is no word
    # ("I ran net user admin X9!k /add"; not "the net user command takes /add")
    (
        "net user",
        lazy_compile(
            r"net(?<![a-z0-9_\-]net)[ \t]+user[ \t]+[^\s/]{1,64}[ \t]+(?=[^\s/]*[^a-z\s/])"
            + _VALUE
            + r"(?=[ \t]+/[a-z])"
        ),
    ),
    (
        "rabbitmqctl",
        lazy_compile(
            r"rabbitmqctl[ \t]+(?:[^\n|;&]{0,100}?[ \t])?(?:add_user|change_password)[ \t]+"
            r"[^\s]{1,64}[ \t]+" + _VALUE
        ),
    ),
    ("mysqladmin", lazy_compile(r"mysqladmin[^\n|;&]{0,300}?[ \t]password[ \t]+" + _VALUE)),
    # `wpa_passphrase SSID PASSPHRASE` (with the SSID alone it reads the passphrase from input);
    # a word of prose where the SSID goes is a sentence about it ("use wpa_passphrase to generate")
    (
        "wpa_passphrase",
        lazy_compile(
            rf"wpa_passphrase[ \t]+{_NOT_PROSE}{_WORD}[ \t]+"
            + _VALUE
            + r"(?=[ \t]*(?:$|[\r\n;&|)<>#]))",
            re.MULTILINE,
        ),
    ),
    # Oracle: `sqlplus USER/PASS@DB` (`sqlplus / as sysdba`, `/nolog` and `USER@DB` prompt).
    # Not a pair of words prose writes with a slash ("sqlplus client/server architecture"),
    # nor Oracle's documented default accounts.
    (
        "sqlplus",
        lazy_compile(
            r"sqlplus(?:[ \t]+-[a-z]{1,12})*[ \t]+[\"']?"
            r"(?!(?:client/server|server/client|read/write|read/only|input/output|in/out"
            r"|on/off|yes/no|true/false|start/stop|and/or|system/manager|sys/change_on_install)"
            r"(?![^\s@\"'/;|&()<>]))[a-z0-9_$#]{1,30}/"
            r"([^\s@\"'/;|&()<>]{1,128}+)(?=[\"']?(?:@|[ \t\r]|$))",
            re.MULTILINE,
        ),
    ),
)
# (command, flag letter as written, pattern): flags whose other case means something else, so
# they are read in the text as written. ldapsearch, ldapadd, ...: -w PASS (-W prompts); SQL
# Server's sqlcmd and bcp: -P PASS (-p prints statistics); ssh-keygen: -N NEW_PASSPHRASE (-n
# names principals).
_CASED_FLAG_PASSWORDS = (
    (
        "ldap",
        "w",
        lazy_compile(r"ldap(?<![a-z0-9_\-]ldap)[a-z]{2,10}[^\n|;&]{0,300}?[ \t]-w[ \t]+" + _VALUE),
    ),
    ("sqlcmd", "P", lazy_compile(r"sqlcmd[^\n|;&]{0,300}?[ \t]-p[ \t]*" + _VALUE)),
    ("mssql-cli", "P", lazy_compile(r"mssql-cli[^\n|;&]{0,300}?[ \t]-p[ \t]+" + _VALUE)),
    (
        "bcp",
        "P",
        lazy_compile(r"bcp(?<![a-z0-9_\-]bcp)[ \t][^\n|;&]{0,300}?[ \t]-p[ \t]*" + _VALUE),
    ),
    ("ssh-keygen", "N", lazy_compile(r"ssh-keygen[^\n|;&]{0,300}?[ \t]-n[ \t]+" + _VALUE)),
    # ipmitool -P PASSWORD (its -p is the port); Net-SNMP's v3 tools take the authentication
    # and privacy passphrases as -A and -X (-a and -x name their protocols), the agent's
    # address last: a value that ends the command is that address
    ("ipmitool", "P", lazy_compile(r"ipmitool[^\n|;&]{0,300}?[ \t]-p[ \t]+" + _VALUE)),
    (
        "snmp",
        "A",
        lazy_compile(r"snmp[a-z]{2,10}[^\n|;&]{0,300}?[ \t]-a[ \t]+" + _VALUE + r"(?=[ \t]+\S)"),
    ),
    (
        "snmp",
        "X",
        lazy_compile(r"snmp[a-z]{2,10}[^\n|;&]{0,300}?[ \t]-x[ \t]+" + _VALUE + r"(?=[ \t]+\S)"),
    ),
)


# Words of prose that follow a command's name where its password would go ("rabbitmqctl
# add_user admin then set_permissions", "bcp out with -P from the vault"): not its value
_PROSE_NOT_A_VALUE = frozenset(
    (
        "then", "from", "with", "and", "the", "for", "into", "onto", "when", "where", "which",
        "while", "after", "before", "again", "first", "here", "there", "this", "that", "your",
        "their", "some", "only", "also", "instead", "later", "below", "above", "next",
    )
)  # fmt: skip


# Oracle's demo account, `scott/tiger`, as its documentation and every tutorial give it
_DEMO_PASSWORDS = frozenset(("tiger",))


def _argument_password(value: str) -> bool:
    word = value.rstrip(TRAILING).lower()
    return given_password(value) and word not in _PROSE_NOT_A_VALUE and word not in _DEMO_PASSWORDS


def _other_case_hidden(text: str, lowered: str, letter: str) -> str:
    """`lowered` with each flag written as `letter` in the other case made no flag."""
    other = "-" + letter.swapcase()
    at = text.find(other)
    if at < 0:
        return lowered
    characters = list(lowered)
    while at >= 0:
        characters[at + 1] = "\0"
        at = text.find(other, at + 2)
    return "".join(characters)


def find_piped_and_batch_passwords(text: str, lowered: str) -> Iterator[Span]:
    """Passwords given as a plain argument: `htpasswd -b FILE USER PASS`, and piped to a
    command that reads them: `echo PASS | sudo -S CMD`, `echo PASS | passwd --stdin USER`."""
    names_passwd = "passwd" in lowered  # htpasswd, chpasswd, passwd --stdin: one search
    if names_passwd:
        yield from find_passwd_stdin(text, lowered)
    if names_passwd and "htpasswd" in lowered:
        for match in _HTPASSWD.finditer(lowered):
            flags = text[match.start("flags") : match.end("flags")]
            if not re.search(r"-[a-zA-Z]*b", flags):
                continue
            arguments = len(text[match.start("arguments") : match.end("arguments")].split())
            if arguments != (1 if re.search(r"-[a-zA-Z]*n", flags) else 2):
                continue
            group = next(g for g in (3, 4, 5) if match.start(g) >= 0)  # after the named two
            start, end = match.span(group)
            if _argument_password(text[start:end]):
                yield start, end
    commands: dict[str, bool] = {}  # whether each occurs, looked for once (chpasswd has two)
    for command, pattern in _ARGUMENT_PASSWORDS:
        if command not in commands:
            commands[command] = (names_passwd or "passwd" not in command) and command in lowered
        if commands[command]:
            for match in pattern.finditer(lowered):
                start, end, _ = value_span(match)
                if _argument_password(text[start:end]):
                    yield start, end
    for command, letter, pattern in _CASED_FLAG_PASSWORDS:
        if command in lowered and f"-{letter}" in text:
            # the flag in the other case is another option (`ipmitool -p 623 … -P X`): hidden
            # from the pattern, which would stop at it and not read on to the flag itself
            for match in pattern.finditer(_other_case_hidden(text, lowered, letter)):
                start, end, _ = value_span(match)
                flag = text.rfind("-", match.start(), start)
                if text[flag + 1] == letter and _argument_password(text[start:end]):
                    yield start, end
    if "sudo" in lowered and "echo" in lowered:
        for match in _SUDO_STDIN.finditer(lowered):
            if "S" not in text[match.start("flag") : match.end("flag")]:
                continue
            start, end, _ = value_span(match)
            if _argument_password(text[start:end]):
                yield start, end


# `echo -n 'user:PASS' | base64`, as a Basic header or a registry's auth is made: the password,
# and the line of base64 the command printed below it (`base64 -d` decodes, its input is none)
_ENCODED_PAIR = lazy_compile(
    r"(?:echo(?<![a-z0-9_\-]echo)|printf(?<![a-z0-9_\-]printf))[ \t]+(?:-[ne]{1,2}[ \t]+)?"
    r"[\"']?[a-z0-9_.@\-]{1,64}:([^\s\"'|;&]{1,256}+)[\"']?[ \t]*\|[ \t]*base64"
    r"(?P<options>(?:[ \t]+-[a-z0-9]{1,4})*)[ \t]*"
    r"(?:\r?\n(?P<printed>[a-z0-9+/]{8,}={0,2})[ \t]*$)?",
    re.MULTILINE,
)


def find_encoded_pairs(text: str, lowered: str) -> Iterator[Span]:
    """The password of `echo -n 'user:PASS' | base64`, and what the command printed."""
    if "base64" not in lowered:
        return
    for match in _ENCODED_PAIR.finditer(lowered):
        if "d" in match["options"]:
            continue
        start, end = match.span(1)
        value = text[start:end]
        # a pair made up to show the command ("hello:world") is words; a password mixes. Guides
        # write the pair as names (client_id:client_secret): an identifier naming a credential
        # is one, though `super-secret-password` with its dashes may be typed as a password
        if "_" in value and value.replace("_", "").isalpha() and names_a_credential(value):
            continue
        if _argument_password(value) and is_chosen_password(value):
            yield start, end
            if match["printed"] is not None:
                yield match.span("printed")


# Redis: `requirepass PASS` / `masterauth PASS` in redis.conf (a directive starts its line),
# `CONFIG SET requirepass PASS`, `redis-server --requirepass PASS`. `foobared` is the
# example redis.conf gives.
_REDIS_PASSWORD = lazy_compile(
    r"(?:^[ \t]*|config[ \t]+set[ \t]+|--)(?:requirepass|masterauth)(?:=|[ \t]+)" + _VALUE,
    re.MULTILINE,
)


# `AUTH [USER] PASS`, the command in capitals as redis-cli users write it, alone on its line or
# after redis-cli's prompt (`127.0.0.1:6379> AUTH x`)
_REDIS_AUTH = lazy_compile(
    r"^(?:[ \t]*|[^\n>]{0,64}> ?)AUTH[ \t]+(?:[A-Za-z0-9_.@\-]{1,64}[ \t]+)?"
    r"(?:\"([^\"\n]{1,256})\"|'([^'\n]{1,256})'|([^\s\"'`]{1,256}))[ \t]*\r?$",
    re.MULTILINE,
)


def find_redis_passwords(text: str, lowered: str) -> Iterator[Span]:
    """`requirepass PASS` and `masterauth PASS`, as a directive, a command or a flag; redis-cli's
    `AUTH PASS`."""
    if "AUTH" in text:
        for match in _REDIS_AUTH.finditer(text):
            start, end, quoted = value_span(match)
            value = text[start:end]
            # unquoted, a word alone is prose ("AUTH tokens rotate")
            if given_password(value) and (quoted or not value.isalpha()):
                yield start, end
    if "requirepass" not in lowered and "masterauth" not in lowered:
        return
    for match in _REDIS_PASSWORD.finditer(lowered):
        start, end, _ = value_span(match)
        value = text[start:end]
        if lowered[match.start() : start].lstrip(" \t")[0] in "rm":  # a directive, not prose:
            line_end = lowered.find("\n", match.end())  # its one argument ends the line
            rest = lowered[match.end() : len(lowered) if line_end < 0 else line_end]
            if rest.strip(" \t\r\"'"):
                continue
        if given_password(value) and value.lower() != "foobared":
            yield start, end


# Oracle: `CONNECT USER/PASS[@DB] [AS SYSDBA]` (or `CONN`) inside SQL*Plus or a script it
# runs, RMAN's `CONNECT TARGET USER/PASS@DB` and Data Guard's broker: a statement that is its
# whole line, perhaps after the tool's prompt; `/ as sysdba` and `USER@DB` prompt for the
# password. Prose that starts a line with "connect" and a pair of words is not one ("Connect
# client/server first", "Connect eth0/eth1 to the bridge").
_ORACLE_PROMPTS = ("sql>", "rman>", "dgmgrl>")
_ORACLE_CONNECT = lazy_compile(
    r"[ \t]*(?:(?:sql|rman|dgmgrl)>[ \t]*)?(?:[0-9]{1,4}\*?[ \t]+)?"
    r"conn(?:ect)?(?:[ \t]+(?:target|auxiliary|catalog))?"
    r"[ \t]+[\"']?"
    r"(?!(?:client/server|server/client|read/write|input/output|in/out|on/off|and/or"
    r"|system/manager|sys/change_on_install)(?![^\s@\"'/;|&()<>]))"
    r"[a-z0-9_$#]{1,30}/(?:\"([^\"\n]{1,128}+)\"|([^\s@\"'/;|&()<>]{1,128}+))[\"']?"
    r"(?P<database>@[^\s;]{1,256}+)?(?P<role>[ \t]+as[ \t]+sys[a-z]{2,8})?[ \t\r;]*(?:\n|\Z)"
)


# A line of SQL*Plus's buffer as `LIST` shows it, its number (and `*` for the current line)
# before the statement: `  2* connect hr/welcome`
_BUFFER_NUMBER = lazy_compile(r"[0-9]{1,4}\*?[ \t]+\Z")
# The tools' own words in the same text: one started, its prompt, its answer to a logon, an
# Oracle error; there a line starting "connect" is a statement, not prose
_ORACLE_SESSION = lazy_compile(
    r"^[ \t]*(?:(?:sqlplus|rman|dgmgrl)\b|(?:sql|rman|dgmgrl)>)|^connected\.[ \t\r]*$"
    r"|\bora-[0-9]{5}\b",
    re.MULTILINE,
)


# Oracle's JDBC URL gives the logon before the host, with no `//`: `jdbc:oracle:thin:USER/PASS@
# host:1521:SID` (or `@//host/service`, the OCI driver's `jdbc:oracle:oci:`)
_ORACLE_JDBC = lazy_compile(
    r"jdbc:oracle:(?:thin|oci8?):[a-z0-9_$#]{1,30}/"
    r"(?:\"([^\"\n]{1,128}+)\"|([^\s@\"'/;]{1,128}+))@"
)


def find_oracle_jdbc_passwords(text: str, lowered: str) -> Iterator[Span]:
    """The password in an Oracle JDBC URL's logon."""
    if "jdbc:oracle:" not in lowered:
        return
    for match in _ORACLE_JDBC.finditer(lowered):
        group = 1 if match.start(1) >= 0 else 2
        start, end = match.span(group)
        if given_password(text[start:end]) and text[start:end].lower() not in _DEMO_PASSWORDS:
            yield start, end


def find_oracle_connects(text: str, lowered: str) -> Iterator[Span]:
    """The password of an Oracle `CONNECT USER/PASS@DB` statement that starts its line."""
    at = lowered.find("conn")
    session: bool | None = None  # whether the text shows the tools at work, once asked
    while at >= 0:
        start = line_start_before(lowered, at, _ORACLE_PROMPTS)
        if start is None:
            window = max(0, at - 8)
            numbered = _BUFFER_NUMBER.search(lowered[window:at])
            if numbered is not None:
                start = line_start_before(lowered, window + numbered.start(), _ORACLE_PROMPTS)
        match = _ORACLE_CONNECT.match(lowered, start) if start is not None else None
        if match is not None:
            group = 1 if match.start(1) >= 0 else 2
            value_start, value_end = match.span(group)
            if session is None:
                session = _ORACLE_SESSION.search(lowered) is not None
            if _connect_password(text[value_start:value_end], lowered, match, session=session):
                yield value_start, value_end
        at = lowered.find("conn", at + 4)


def _connect_password(value: str, lowered: str, match: re.Match[str], *, session: bool) -> bool:
    """A password: any given one that is quoted, follows the tool's prompt, comes before `@DB`
    or `AS SYSDBA`, or is in a text that shows the tools at work (`sqlplus`, `Connected.`,
    `ORA-01017`); without any of these, one that reads as chosen or generated, since prose may
    start a line with "Connect frontend/backend"."""
    if not _argument_password(value):
        return False
    prefix = lowered[match.start() : match.start(1) if match.start(1) >= 0 else match.start(2)]
    marked = (
        session
        or match.start(1) >= 0
        or any(prompt in prefix for prompt in _ORACLE_PROMPTS)
        or match.group("database") is not None
        or match.group("role") is not None
    )
    return marked or is_chosen_password(value) or looks_random(value)


# `docker run -p 27017:27017 mongo` on the line of a tool: a port mapping, not a password
_PORT_MAPPING = lazy_compile(r"(?:[0-9.]+:)?[0-9]{1,5}:[0-9]{1,5}(?:/(?:tcp|udp))?\Z")
# every tool flag above: -p, -a, -u, -k, --user, -storepass, -keypass, -srcstorepass, ...
# (gh's -b or --body, but not the b of a PEM block's -----BEGIN line)
# (each letter tested before what comes before it: a text of dashes is read at one test each)
_SHORT_FLAG = lazy_compile(
    r"-(?:[pauksd](?<![a-z0-9]-[pauksd])|b(?<![a-z0-9\-]-b)|-body(?<![a-z0-9\-]--body))"
)


# The words after a flag that speak of it ("the --password option"): an unquoted one of these
# names the flag, it does not give its value.
_FLAG_NOUNS = frozenset(
    (
        "option", "flag", "argument", "parameter", "switch", "setting", "value",
        "options", "flags", "arguments", "parameters", "switches", "settings", "values",
    )
)  # fmt: skip


def find_credential_flags(text: str, lowered: str) -> Iterator[Span]:
    """Passwords given on a command line: --password X, docker login -p X, mysql -pX, ..."""
    if "--" in lowered and ("pass" in lowered or "secret" in lowered or "pwd" in lowered):
        for match in _LONG_FLAG.finditer(lowered):
            start, end, quoted = value_span(match)
            value = text[start:end]
            if not quoted and lowered[start:end].rstrip(TRAILING) in _FLAG_NOUNS:
                continue
            # a shell argument is a literal, as an environment value is (upper_key); a bare
            # --secret often names a stored secret (`gcloud ... --secret=db-password`)
            bare = lowered[match.start() : start].rstrip("= \t\"'") == "--secret"
            if bare and names_a_credential(value):
                continue
            if value[0] != "-" and is_credential_literal(
                value, quoted=quoted, upper_key=True, bare=False
            ):
                yield start, end
    # one cheap pass instead of a word search per tool taking a short flag
    short_flag = _SHORT_FLAG.search(lowered) is not None
    for flag, command, pattern in _TOOL_FLAGS:
        if (flag[0] == "-" and not short_flag) or flag not in lowered or command not in lowered:
            continue
        for match in pattern.finditer(lowered):
            start, end, quoted = value_span(match)
            cased = _CASED_FLAGS.get(command)
            if cased is not None and not text.startswith(cased, lowered.rfind(flag, 0, start)):
                continue  # the flag in the other case: another option (mosquitto's -p, a port)
            value = text[start:end]
            if given_password(value) and _PORT_MAPPING.match(value) is None:
                yield start, end
            if command == "keytool":  # and the pass flags after it on the command line
                yield from _more_keytool_passwords(text, lowered, match.end())
