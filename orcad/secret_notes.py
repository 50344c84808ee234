"""Passwords jotted down as short notes, with no word `password` to name them.

Pure module: no I/O. A developer pasting access into a chat writes it tersely: "the wifi key is
BlueMango$42", "WLAN: HomeNet_5G / key: Bananenbrot77", "jenkins: admin / Jenk1ns!2024", "jenkins
login admin pw Jenk1ns!2024", "pass for jenkins: Jenk1ns!2024". Each of these names is as often
something else ("the cache key is user_id", "ratio: 3 / 4", "login admin page", "pass for now: we
skip it"), so a value is found only when it looks like a password someone chose (`secret_values`):
letters with digits or symbols, not a label (v1.2.3, arm64), a placeholder or a reference.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_sentences import (
    STATED_VALUE,
    plain_word_password,
    stated_label,
    stated_password,
)
from orcad.secret_stated_keys import short_generated
from orcad.secret_values import (
    STATED_VERB,
    VERSIONED_NAME,
    Span,
    end_before_trailing,
    looks_random,
    value_ends_clause,
)

# A name, then owner words ("for the lab"), then a colon or a verb ("is", "was changed to").
_NOTE_TAIL = (
    r"(?P<words>(?:[ \t]+[^\s.,;:!?=]{1,30}+){0,6}?)"
    rf"(?:(?P<op>[ \t]*:)|{STATED_VERB}[ \t]*:?)" + STATED_VALUE
)


def _chosen(value: str) -> bool:
    """A password someone chose, not a measurement (12.5ms), a version (v2.0-rc1) or a word
    or label that ends an exclamation ("Awesome!", "Bad-Ugly!")."""
    return (
        stated_password(value)
        and stated_password(value.rstrip("!?"))
        and sum(char.isalpha() for char in value) >= 3
    )


def _joined(lowered: str, at: int) -> bool:
    """The name at `at` is the end of a longer name or word (bypass, --pass, a.pass, $pass)."""
    return at > 0 and (lowered[at - 1].isalnum() or lowered[at - 1] in "_-./$@")


def _owned_by(words: str, owners: frozenset[str]) -> bool:
    """No words between the name and its verb, or ones that say whose it is ("for the lab")."""
    between = words.split()
    return not between or between[0] in owners


# ------------------------------------------------------------------ network keys
# "the wifi key is X": a key of a network is the password its owner chose, where "key" alone
# (cache key, primary key) is a name; the value is checked there after the literal `key`.
# A key that opens an archive, a backup, a vault or a disk ("the zip key is X", "the
# encryption key for the backup is X", Vault's unseal key, BitLocker's recovery key) is as
# much a chosen password, but such keys are also named by algorithm, size or resource
# ("AES-256", "alias/backup-key"): its value must be chosen with care (mixed case or a
# symbol), or look generated, and be no path.
_NETWORK_KEY = lazy_compile(r"key(?![a-z0-9_\-])" + _NOTE_TAIL)
_NETWORK = lazy_compile(
    r"(?<![a-z0-9_\-])(?:wi-?fi|wireless|wlan|wpa[23]?|network|hotspot|router|ssid)[ \t]+\Z"
)
_STORE = lazy_compile(
    r"(?<![a-z0-9_\-])(?:zip|7-?zip|7z|rar|archive|backup|vault|disk|drive|luks|bitlocker|"
    r"veracrypt|encryption|decryption|keepass|unseal|recovery)[ \t]+\Z"
)
_NETWORK_REACH = 16
# "WLAN: HomeNet_5G / key: Bananenbrot77": a line that names a network and its SSID, then the key
# after a slash, a bar or a comma
_NETWORK_LINE = lazy_compile(
    r"(?:^|\n)[ \t]*(?:wi-?fi|wlan|wireless|ssid|hotspot)[ \t]*:[ \t]*[^\s/|,]{1,32}+"
    r"[ \t]*[/|,][ \t]*\Z"
)
_NETWORK_LINE_REACH = 64
_KEY_OWNERS = frozenset(("for", "on", "of", "at", "in"))
# how a network authenticates, which its line may give where a key would be ("key: 802.1X-EAP")
_NETWORK_AUTH = lazy_compile(r"802\.1x|eap|wpa|wep|noauth|enterprise|radius", re.IGNORECASE)


def _chosen_network_key(value: str) -> bool:
    return _chosen(value) and _NETWORK_AUTH.search(value) is None


def _store_key(value: str) -> bool:
    """A store's key someone chose ("Arch1ve!22") or generated, not a cipher or a path."""
    return "/" not in value and _chosen(value) and (_strong(value) or looks_random(value))


def _find_network_keys(text: str, lowered: str) -> Iterator[Span]:
    """A network's key: "the wifi key is BlueMango$42", "wifi key: Hx7!pqLm"; and a store's:
    "the zip key is Arch1ve!22", "backup encryption key: Tr0ub4dor&3"."""
    for match in _NETWORK_KEY.finditer(lowered):
        at = match.start()
        reach = max(0, at - _NETWORK_REACH)
        if _NETWORK.search(lowered, reach, at) is not None:
            accepted = _chosen
        elif _STORE.search(lowered, reach, at) is not None:
            accepted = _store_key
        elif _NETWORK_LINE.search(lowered, max(0, at - _NETWORK_LINE_REACH), at) is not None:
            accepted = _chosen_network_key
        else:
            continue
        if not _owned_by(match["words"], _KEY_OWNERS):
            continue
        start, value_end = match.span("value")
        end = end_before_trailing(text, start, value_end)
        if accepted(text[start:end]):
            yield start, end


# --------------------------------------------------------------- service pairs
# "jenkins: admin / Jenk1ns!2024": a service's name and a colon, then a user and a password on
# either side of a spaced slash, to the end of the clause. A path, a MIME type or an image
# (`image: bitnami/redis:7.2`) has no spaces around its slash. Found from each slash a blank
# comes before: the head is on the slash's line before it, the value what follows it.
# The head (a name of 1-31 characters, `[ \t]*:[ \t]+`, a user, blanks) is matched on its line
# read backwards from the slash, once, in C: searched forwards, it was tried at each of the 128
# characters before every spaced slash (0.8 s for a megabyte of "login: a / "). The name's
# start is checked after it, where the window's edge cut the line.
_SERVICE_REACH = 128  # longer than any head
_SERVICE_HEAD_BACKWARDS = lazy_compile(
    r"[ \t]+[a-z0-9_.@+\-]{0,63}[a-z][ \t]+:[ \t]*[a-z0-9_.\-]{0,30}[a-z](?![a-z0-9_.\-])"
)
_SERVICE_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_PAIR_VALUE = lazy_compile(r"[ \t]+([^\s\"'`/]{4,128}+)")
# a slash a blank comes before: the engine skips ahead to each slash and looks behind it in C,
# so the slashes of paths and URLs cost no Python each
_SPACED_SLASH = lazy_compile(r"/(?<=[ \t]/)")
_SYMBOLS_OF_LABELS = frozenset("-_.")


def _strong(value: str) -> bool:
    """Chosen with care: mixed case or a symbol no name holds ("right-2col" is a name)."""
    mixed_case = any(char.isupper() for char in value) and any(char.islower() for char in value)
    symbol = any(not char.isalnum() and char not in _SYMBOLS_OF_LABELS for char in value)
    return _chosen(value) and (mixed_case or symbol)


def _has_service_head(lowered: str, start: int, slash: int) -> bool:
    """A service's name, a colon and a user end at `slash`, from `start` on its line."""
    head = _SERVICE_HEAD_BACKWARDS.match(lowered[start:slash][::-1])
    if head is None:
        return False
    name = slash - head.end()
    return name == 0 or lowered[name - 1] not in _SERVICE_NAME_CHARACTERS


def _find_service_pairs(text: str, lowered: str) -> Iterator[Span]:
    """A service's pair: "jenkins: admin / Jenk1ns!2024", "- staging db: postgres / Pg$tag1ng"."""
    for spaced in _SPACED_SLASH.finditer(lowered):
        slash = spaced.start()
        reach = max(0, slash - _SERVICE_REACH)
        line = lowered.rfind("\n", reach, slash) + 1 or reach
        value = _PAIR_VALUE.match(lowered, slash + 1)
        if value is not None and _has_service_head(lowered, line, slash):
            start, value_end = value.span(1)
            end = end_before_trailing(text, start, value_end)
            if value_ends_clause(text, value_end, end) and _strong(text[start:end]):
                yield start, end


# "nexus: admin/Nexus@2024": with no spaces, a user and a password look like a path, a route,
# a branch or an image (`ci: build/test`, `branch: feature/login-2024`, `image: redis:7.2`),
# so the password must end its clause after the only slash, and hold a letter, a digit and a
# symbol no path, URL or version holds (or mixed case after an account's usual name). Found
# from each colon a user and a slash follow, the engine skipping ahead to each colon.
_TIGHT_PAIR = lazy_compile(
    r":[ \t]+(?P<user>[a-z][a-z0-9_.\-]{0,31}+)/(?P<value>[^\s\"'`/:=?]{4,128}+)(?![/:=?])"
)
_TIGHT_HEAD = lazy_compile(r"(?<![a-z0-9_.\-])[a-z][a-z0-9_.\-]{0,30}[ \t]*\Z")
_TIGHT_HEAD_REACH = 32
_TIGHT_SYMBOLS = frozenset("!@$%^&*+~")
# (an action's or an image's version or commit after an @: `uses: actions/checkout@v4`,
# `@11bd71901bbe5b1630ceea73d27597364c9af683`)
_NOT_A_PASSWORD = lazy_compile(
    r"@v?[0-9]+\.|@[a-z0-9\-]+\.[a-z]{2,}|\.[a-z]{1,4}\Z|@v[0-9]{1,4}\Z|@[0-9a-f]{40}\Z"
)
_ACCOUNTS = frozenset(
    ("admin", "administrator", "root", "sa", "postgres", "user", "guest", "test", "demo", "pi")
)


def _find_tight_pairs(text: str, lowered: str) -> Iterator[Span]:
    """A service's pair with no spaces around its slash: "nexus: admin/Nexus@2024"."""
    for match in _TIGHT_PAIR.finditer(lowered):
        start, value_end = match.span("value")
        end = end_before_trailing(text, start, value_end)
        if not value_ends_clause(text, value_end, end):
            continue
        colon = match.start()
        reach = max(0, colon - _TIGHT_HEAD_REACH)
        line = lowered.rfind("\n", reach, colon) + 1 or reach
        if _TIGHT_HEAD.search(lowered, line, colon) and _tight_password(
            text[start:end], match["user"]
        ):
            yield start, end


def _tight_password(password: str, user: str) -> bool:
    """A letter, a digit and a symbol no path, URL or version holds, or mixed case after an
    account's usual name ("admin/Admin123"); no version, file name or email after an @."""
    if _NOT_A_PASSWORD.search(password.lower()) or not any(c.isdigit() for c in password):
        return False
    if not _chosen(password):
        return False
    mixed_case = password.lower() != password and password.upper() != password
    symbol = any(char in _TIGHT_SYMBOLS for char in password)
    return symbol or (mixed_case and user in _ACCOUNTS)


# ------------------------------------------------------------------ login pw
# "jenkins login admin pw Jenk1ns!2024", "user admin pw X": a login's user then a password's
# short name and the password, as netrc writes `login NAME password VALUE`. Found from the
# password's name (`_find_passes`), the login looked for on the stretch of text before it.
_GIVEN = lazy_compile(r"[ \t]*:?" + STATED_VALUE)
_LOGIN_BEFORE = lazy_compile(
    r"(?<![a-z0-9_\-])(?:login|logon|user(?:name)?)(?:[ \t]+(?:is|as))?[ \t]*:?[ \t]+"
    r"(?P<user>[^\s,/:]{1,64}+)(?:[ \t]*[,/]|[ \t]+and)?[ \t]+\Z"
)
_LOGIN_REACH = 96
# anonymous FTP takes any password, by custom an email address: none is a secret
_ANONYMOUS_USERS = frozenset(("anonymous", "ftp"))


def _login_password(text: str, lowered: str, at: int, name_end: int) -> Span | None:
    """The password given after the name at `at`, if a login's user comes right before it."""
    given = _GIVEN.match(lowered, name_end)
    if given is None:
        return None
    login = _LOGIN_BEFORE.search(lowered, max(0, at - _LOGIN_REACH), at)
    if login is None or login["user"] in _ANONYMOUS_USERS:
        return None
    start, value_end = given.span("value")
    end = end_before_trailing(text, start, value_end)
    value = text[start:end]
    if _chosen(value) or (  # "the user is monitor and pw duckduckgoose,"
        value_ends_clause(text, value_end, end) and plain_word_password(value)
    ):
        return start, end
    return None


# ------------------------------------------------------------------- pass for
# "pass for jenkins: X", "the pass is X": `pass` alone is mostly a verb or a compiler's pass,
# so it names a password only for something ("for jenkins"), or right before its verb when
# the value ends the clause ("the jenkins pass is X."). One scan finds pass, passwd, pw and
# pwd for both shapes (a login's "login admin pw X" too), the engine skipping ahead to each
# `p`; the character before the name is checked after.
# (a blank after the name, alone or after a colon, lets only a note or a login's value go on)
_PASSWORD_NAME = lazy_compile(
    r"(?P<name>p(?:(?P<pw>wd?)|ass(?P<wd>wd)?))(?![a-z0-9_\-])(?=[ \t]*:?[ \t])"
    r"(?:" + _NOTE_TAIL + ")?"
)
_PASS_OWNERS = frozenset(("for",))
_PASS_PLACES = frozenset(("on", "of", "at", "in"))


def _find_passes(text: str, lowered: str) -> Iterator[Span]:
    """A pass for something, "pass for jenkins: Jenk1ns!2024", "the pass for the vpn is
    Vpn$ecure9", and the password of a login's pw, "login admin pw Jenk1ns!2024", "login
    jdoe pwd X", "login admin pass Gr4fana!"."""
    for match in _PASSWORD_NAME.finditer(lowered):
        at = match.start()
        if _joined(lowered, at):
            continue
        span = None
        # "pw for root: X" and "passwd is X" are a statement's; `pass` alone is a note's
        if match["value"] is not None and match["pw"] is None and match["wd"] is None:
            span = _pass_for(text, match)
        if span is None:
            span = _login_password(text, lowered, at, match.end("name"))
        if span is None and match["value"] is None:
            span = _pass_then_value(text, match)
        if span is not None:
            yield span


# What a `pass` a credential is for, one of the two words before it: "the ftp pass is X",
# "the grafana admin pass is X", "the admin panel pass is X" (not "the first pass", "the lint
# pass", "a boarding pass")
_PASS_OF = frozenset(
    ("admin", "root", "ftp", "sftp", "wifi", "wi-fi", "wlan", "db", "database", "mysql",
     "postgres", "keystore", "ssh", "vpn", "user", "account", "acct", "login", "router", "email",
     "mail", "smtp", "sudo", "guest", "sa", "rdp", "vnc", "ldap", "redis", "git", "svn")
)  # fmt: skip
_WORDS_BEFORE = lazy_compile(r"(?:([a-z][a-z0-9\-]{0,19})[ \t]+)?([a-z][a-z0-9\-]{0,19})[ \t]+\Z")
_DIGITS_IN_A_WORD = lazy_compile(r"[a-z][0-9]+[a-z]")


def _pass_of_a_login(lowered: str, at: int) -> bool:
    """One of the two words before the `pass` at `at` names what logs in with it."""
    words = _WORDS_BEFORE.search(lowered, max(0, at - 42), at)
    return words is not None and (words[1] in _PASS_OF or words[2] in _PASS_OF)


# "prod db pass Kx9pL2mQ7vRz": a login's `pass`, a blank and a value only a generator writes
# (`short_generated`: not "the admin pass OAuth2Flow"), ending its clause
_VALUE_AFTER = lazy_compile(r"[ \t]+(?P<value>[^\s\"'`()\[\]{}<>]{8,64}+)")


def _pass_then_value(text: str, match: re.Match[str]) -> Span | None:
    given = _VALUE_AFTER.match(text, match.end("name"))
    if given is None or not _pass_of_a_login(match.string, match.start()):
        return None
    start, value_end = given.span("value")
    end = end_before_trailing(text, start, value_end)
    value = text[start:end]
    if value_ends_clause(text, value_end, end) and (
        short_generated(value) or _generated_or_a_label(value, match)
    ):
        return start, end
    return None


def _generated_or_a_label(value: str, match: re.Match[str]) -> bool:
    """A label of capitals, small letters and a digit ("nexus admin pw Nexus_Admin_9", "account
    pass Tesla_Kz4"), where only a generator's value stood; after `pw` a generator's too."""
    return stated_label(value) or (match["pw"] is not None and short_generated(value))


def _pass_for(text: str, match: re.Match[str]) -> Span | None:
    """The password a note gives for `pass` alone, said for something or right before a verb.
    After a word of a login ("the ftp pass is X") a verb gives any password: letters and
    digits, or a plain word (`plain_word_password`) that ends the clause, too."""
    words = match["words"]
    start, value_end = match.span("value")
    end = end_before_trailing(text, start, value_end)
    value = text[start:end]
    ends = value_ends_clause(text, value_end, end)
    if not _owned_by(words, _PASS_OWNERS):
        # a login's pass where it is ("the mysql root pass on the game server is Tq9-wolf-Lantern")
        if (
            _owned_by(words, _PASS_PLACES)
            and match["op"] is None
            and _pass_of_a_login(match.string, match.start())
            and (_chosen(value) or (ends and stated_label(value)))
        ):
            return start, end
        return None
    if (
        match["op"] is None
        and _pass_of_a_login(match.string, match.start())  # (the match is of the lowered text)
        and _login_pass_value(value, ends=ends)
    ):
        return start, end
    if not words and (match["op"] is not None or not ends):
        return None  # `pass: X` is an assignment's; "this pass is X-only here" is prose
    return (start, end) if _chosen(value) else None


def _login_pass_value(value: str, *, ends: bool) -> bool:
    """A value a verb gives for a login's `pass`: letters with digits or a plain word ending
    the clause, or letters with a digit inside a word ("pa55word") wherever it stands."""
    if not (value.isalnum() and len(value) >= 5 and not value.isdigit()):
        return False
    if ends and ((value.isalpha() and plain_word_password(value)) or _mixed(value)):
        return True
    return _DIGITS_IN_A_WORD.search(value.lower()) is not None and _mixed(value)


def _mixed(value: str) -> bool:
    """Letters with digits, starting with a letter, no version ("rex2019", "pa55word"; not
    "sha256", "v2")."""
    return (
        value[0].isalpha()
        and any(char.isdigit() for char in value)
        and sum(char.isalpha() for char in value) >= 3
        and VERSIONED_NAME.match(value.lower()) is None
    )


def find_noted_passwords(text: str, lowered: str) -> Iterator[Span]:
    """A password jotted down as a note, in any of the four shapes."""
    yield from _find_network_keys(text, lowered)
    yield from _find_passes(text, lowered)
    yield from _find_service_pairs(text, lowered)
    yield from _find_tight_pairs(text, lowered)
