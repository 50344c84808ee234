"""A user and a password pasted as a pair, the password of every character class:
"root/Toor!Lab99 on all lab VMs", "Administrator / Il0Rack3!HP", "admin:pfS3nse!Fw",
"admin | P0rtainer!Ui2025", "Log in with `admin` / `Step!ByStep3`", "pg@corp.io with Pg4dm1n!Web".

Pure module: no I/O. A slash, a colon or a bar joins many things that are no credential (paths,
URLs, ratios, dates, `key:value` in code and CSS, image tags, git refs), so the value must say
it is a password: upper case, lower case, a digit and a symbol (`!#$%&*?@^~`; not base64's `+`,
`=`), starting with a letter or a digit, the symbol not only a sentence's end ("r/Python3!"), no
file's name with a line or an anchor after it (`app.tsx#L42`). And the user must be an account's
usual name (admin, root, readonly, jenkins, `svc_…`; after a colon only the usual few, since
`nginx:1.25&Alpine3` is an image) or a word on its line or the two above must say credentials
are given ("creds for staging:", "login", "ssh", "account"): the shape alone is also a wiki
page's, a menu's or a tag's ("wiki/Home#Section-2", "Sales / Marketing&Ops2",
"milestone:Q3&Release2"). The user is a plain name or an email address set apart by blanks, a
quote or its line's start; a colon joins them tight (`guest:Gu3st!Rabbit`, not `title:
Hello!World2`) and never after a scheme, registry or setting's name; a bar never in a table's
row; "with" only after an email address (an account's, or announced, or with a symbol only a
password holds: not "ping jane@acme.io with Q3&Q4Plan"). A password whose only symbol is a final
"!" counts after an account's usual name (admin, root, postgres, ...) when it ends its line or
clause ("admin/Winter2024!") and after a user at an address and "with" ("ssh root@10.0.0.5 with
Winter2024!"): eight letters and digits or more in both cases with a digit. A value of every
class given with "use" or "try" for something one logs in to counts too ("use Hunter2!xyz for
the staging db"). Left alone: an issue or version after `#` or `@` (`Feature#42-Login`,
`MyLib@2.0.1`, "use Node@18"), an exponent (`x^2`), an operator (`Total!=Max2`), `!important`, a
git remote or branch folder (`origin/…`, `fix/…`), "r/Python3!", "use Python3! for scripts",
"replace foo with Bar!Baz2".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_colon_pairs import NAMESPACES
from orcad.secret_values import Span, is_placeholder, is_reference

# The joins, each found by its own pattern that starts with it (a literal the engine skips
# ahead to; one pattern for the three, a character class first, cost three times as much),
# followed by a value that starts with a letter or a digit and holds a symbol in its first 64
# characters, a capital and a digit (`user:b1cd@host` is passed over in C). A colon joins
# tight, a slash or a bar with blanks or not.
_VALUE_AHEAD = (
    r"[`'\"]?(?=[^\s/:|]{0,63}?[A-Z])(?=[^\s/:|]{0,63}?[0-9])"  # a capital and a digit in it
    r"(?:[A-Za-z0-9][^\s/:|]{0,62}?[!#$%&*?@^~][^\s/:|]{0,62}?[A-Za-z0-9]"
    r"|[A-Za-z0-9]{8,63}!))"  # or an account's password that only a "!" ends (`_EXCLAIMED`)
)
_JOINS = tuple(
    lazy_compile(pattern + _VALUE_AHEAD)
    for pattern in (
        r"/(?<=[\w`'\"\t ]/)(?=[ \t]{0,3}",
        r"\|(?<=[\w`'\"\t ]\|)(?=[ \t]{0,3}",
        r":(?<=[\w`'\"]:)(?=",
    )
)
# "pg@corp.io with Pg4dm1n!Web": found from the address's "@" (rarer than " with "), the
# value's symbol looked ahead for in the same scan
_EMAIL_WITH = lazy_compile(
    r"@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})+ with "
    r"(?=[`'\"]?[A-Za-z0-9][^\s]{0,62}?[!#$%&*?@^~])"
)
# "use Hunter2!xyz for the staging db", "try Tr1cky#Pass": a value of every character class
# given with a verb, found from the verb (a literal each) with the value's symbol, inside it,
# looked ahead for in the same scan; the verb a whole word (not "because", "misuse"). Not
# "with" alone: "replace foo with Bar!Baz2" is an edit (after a user, `secret_logins`).
_GIVEN_WITH = tuple(
    lazy_compile(
        verb + r"[ \t]+(?=[`'\"]?[A-Za-z0-9][^\s]{0,62}?[!#$%&*?@^~][^\s]{0,62}?[A-Za-z0-9])"
    )
    for verb in ("use", "try")
)
# what a value given with "use" or "try" is for, when it is a password: something one logs in to
# ("use Hunter2!xyz for the staging db", "try X to log in"); "use Java17&Gradle8 for the
# module", "use Math#atan2 instead", "try pageSize=50&sortBy=name" give no login
_FOR_A_LOGIN = lazy_compile(
    r"[`'\"]?[ \t]+(?:(?:for|on|as)[ \t]+(?:[a-z0-9_.\-]{1,24}[ \t]+){0,3}?"
    r"(?:(?:db|database|server|account|vpn|wi-?fi|box|host|portal|panel|console|router|vm"
    r"|nas|machine|dashboard)(?:e?s)?|admin|ssh|sudo|root|password|staging|prod|production"
    r"|login)(?![a-z])"
    r"|to[ \t]+(?:log|sign)[ \t]?in)"
)
_LOCAL_PART = lazy_compile(r"[A-Za-z0-9_.+\-]{1,64}\Z")
_VALUE = lazy_compile(
    r"[ \t]{0,3}(?P<quote>[`'\"]?)(?P<value>[A-Za-z0-9][A-Za-z0-9!#$%&*?@^~+=._\-]{5,63}+)"
    r"(?P=quote)(?=[\s,;)]|\Z)"
)
# The user is the run of characters before the join, its blanks and its quotes: found by looking
# back for the blank, bracket or line start before it (a regex search back over a window cost
# a tenth of a millisecond a join).
_USER = lazy_compile(
    r"(?P<quote>[`'\"]?)(?P<user>[A-Za-z][A-Za-z0-9_\-]{0,31}"
    r"|[A-Za-z0-9_.+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})+)(?P=quote)"
)
_BEFORE_USER = " \t\n(>"
_LONGEST_USER = 140
_SENTENCE_ENDS = ".!?"
# what in a value says it is something else: an issue or a version (`#42`, `@2.0`), an email
# address's domain, an operator, CSS's `!important`, and an Oracle connect string's service
# after a password of four characters or more (`scott/Tiger123@orcl`: `secret_commands`')
# (and a file's name with a line or an anchor after it: `app.tsx#L42`, `Setup.md#Step-2`,
# `Notes2024.md`; a query's parameters: `Users?Page=2`)
_NOT_A_PASSWORD = lazy_compile(
    r"[#@^][0-9]|@[A-Za-z0-9\-]+\.[A-Za-z]|[!=]=|&&|!important|[^@]{4}@[A-Za-z][A-Za-z0-9_.\-]*\Z"
    r"|#L[0-9]|\.[A-Za-z][A-Za-z0-9]{0,4}(?:[#?]|\Z)|[?&][A-Za-z]+="
)
# a git remote or a branch folder before the slash: `origin/Feature…`, `fix/…`
_REF_FOLDERS = frozenset(
    ("origin", "upstream", "remotes", "refs", "heads", "tags", "feature", "features", "fix",
     "bugfix", "hotfix", "release", "releases", "chore", "docs", "r", "u")
)  # fmt: skip


# A password whose only symbol is a final "!" ("root:Toor2024Lab!"): a sentence ends so as often
# ("r/Python3!", "see admin/Dashboard2024!"), so it counts only after an account's usual name,
# ending its line or clause (`_ends_pair`) and set apart as a pair or said to be a login
# (`_logged_in`), or after a user at an address and "with" (see `find_strong_pairs`): eight
# letters and digits or more, upper case, lower case and a digit, then the "!".
_EXCLAIMED = lazy_compile(r"(?=[^A-Z]*[A-Z])(?=[^a-z]*[a-z])(?=[^0-9]*[0-9])[A-Za-z0-9]{8,63}!")
_ACCOUNTS = frozenset(
    ("admin", "administrator", "root", "user", "guest", "sa", "postgres", "ubuntu", "pi",
     "ec2-user", "deploy", "test", "operator", "sysadmin", "superuser", "vagrant", "centos",
     "oracle", "elastic")
)  # fmt: skip
# More names accounts are given, which a pair needs no other word for: a path's folder, a menu
# or a tag says "wiki/Home#Section-2", "Sales / Marketing&Ops2", "milestone:Q3&Release2", whose
# shape is a password's too. Any other user needs a word on its line or the two above that
# says credentials are given (`_ANNOUNCED`): "creds for staging:" then "admin / X".
_MORE_ACCOUNTS = _ACCOUNTS | frozenset(
    ("readonly", "ro", "rw", "developer", "jenkins", "ftp", "ftpuser", "backup", "dba", "mysql",
     "mongo", "mongodb", "rabbitmq", "nagios", "zabbix", "kubeadmin", "www-data", "debian",
     "opc", "azureuser", "minecraft")
)  # fmt: skip
_ACCOUNT_PARTS = ("admin", "root", "svc_", "svc-", "service_", "_user", "-user", "-bot", "_bot")
_ANNOUNCED = lazy_compile(
    r"(?<![a-z])(?:creds?|credentials?|log[ \t]?ins?|logons?|sign[ \t]?in|passwords?|passwd|pwd"
    r"|pw|accounts?|username|auth|ssh|rdp|vpn|sudo|ilo|idrac|ipmi)(?![a-z])"
)
_ANNOUNCED_LINES = 3  # its own and the two above
_ANNOUNCED_REACH = 300
_PASSWORD_SYMBOL = lazy_compile(r"[!#$%*^~@]")  # not `&` or `?`, which join words in prose
_EVERY_CLASS = lazy_compile(
    r"(?=[^A-Z]*[A-Z])(?=[^a-z]*[a-z])(?=[^0-9]*[0-9])(?=[^!#$%&*?@^~]*[!#$%&*?@^~])"
)


@functools.lru_cache(maxsize=1024)  # a text that repeats a pair is judged once per value
def _strong(value: str) -> bool:
    """Upper case, lower case, a digit and a symbol not only at the end."""
    return (
        _EVERY_CLASS.match(value.rstrip(_SENTENCE_ENDS)) is not None
        and _NOT_A_PASSWORD.search(value) is None
        and not is_placeholder(value)
        and not is_reference(value)
    )


def _value_after(text: str, at: int, *, exclaimed: bool = False) -> Span | None:
    """The value at `at` when it has every character class, or (`exclaimed`) when only a final
    "!" is its symbol (`_EXCLAIMED`)."""
    match = _VALUE.match(text, at)
    if match is None:
        return None
    start, end = match.span("value")
    whole = end
    if not match["quote"]:  # a sentence's end after it is no part of it
        while end > start and text[end - 1] in _SENTENCE_ENDS:
            end -= 1
    if _strong(text[start:end]):
        return start, end
    while whole > start and text[whole - 1] in ".?":
        whole -= 1
    if (
        exclaimed
        and _EXCLAIMED.fullmatch(text, start, whole)
        and not is_placeholder(text[start:whole])
    ):
        return start, whole
    return None


def _ends_pair(text: str, end: int) -> bool:
    """A pair whose password a "!" ends ends its line or clause there: words after it ("admin/
    Winter2024! is what we tried first") read it as an exclamation."""
    rest = text[end : end + 2].lstrip("`'\"")
    return rest[:1] in ("", "\r", "\n", ",", ";", ")")


def _in_a_table_row(text: str, at: int) -> bool:
    """The line of `at` starts with a bar, looked for within _ANNOUNCED_REACH before it."""
    lowest = max(0, at - _ANNOUNCED_REACH)
    start = text.rfind("\n", lowest, at) + 1 or lowest
    return text[start:at].lstrip().startswith("|")


def an_account(name: str) -> bool:
    """An account's usual name: admin, root, readonly, jenkins, `svc_...`, `pgadmin`."""
    return name in _MORE_ACCOUNTS or any(part in name for part in _ACCOUNT_PARTS)


# A password whose only symbol is a final "!" is said so far more often of a page or an option
# ("see admin/Dashboard2024!", "ssh pi@host with X11Forwarding!"): it counts only where a word
# on its line or the two above says a password or a login is given.
_LOGGED_IN = lazy_compile(
    r"(?<![a-z])(?:creds?|credentials?|log[ \t]?ins?|logons?|sign[ \t]?in|passwords?|passwd"
    r"|pwd|pw|accounts?)(?![a-z])"
)


_SHELL_LOGIN = lazy_compile(r"[ \t>$#]*(?:ssh|sftp|scp|mosh)[ \t]")
_NUMBERED = lazy_compile(r"[A-Za-z][0-9]{2,}!\Z")


def _starts_a_shell_login(lowered: str, at: int) -> bool:
    """The line of `at` starts with ssh, sftp, scp or mosh, within _ANNOUNCED_REACH before it
    (a bounded look back: a long line of pairs is not read again for each)."""
    start = lowered.rfind("\n", max(0, at - _ANNOUNCED_REACH), at) + 1
    if start == 0 and at > _ANNOUNCED_REACH:
        return False
    return _SHELL_LOGIN.match(lowered, start) is not None


def _logged_in(lowered: str, at: int) -> bool:
    return _announced(lowered, at, _LOGGED_IN)


def _announced(lowered: str, at: int, words: re.Pattern[str] | None = None) -> bool:
    """A word saying credentials are given on the line of `at` or the two above, before it."""
    start = at
    for _ in range(_ANNOUNCED_LINES):
        start = lowered.rfind("\n", max(0, at - _ANNOUNCED_REACH), max(0, start - 1)) + 1
        if start <= max(0, at - _ANNOUNCED_REACH):
            start = max(0, at - _ANNOUNCED_REACH)
            break
    return (words or _ANNOUNCED).search(lowered, start, at) is not None


def _user_before(text: str, at: int) -> tuple[re.Match[str] | None, bool]:
    """The user's name ending before `at` (and blanks), and whether blanks set them apart."""
    end = at
    while end > 0 and at - end < 3 and text[end - 1] in " \t":
        end -= 1
    lowest = max(0, end - _LONGEST_USER)
    start = max(text.rfind(char, lowest, end) for char in _BEFORE_USER) + 1
    if start == 0 and lowest > 0:
        return None, False  # longer than a name
    return _USER.fullmatch(text, start, end), end < at


def find_strong_pairs(text: str, lowered: str) -> Iterator[Span]:
    """The password of a user and password pair whose password has every character class."""
    for join in (join for pattern in _JOINS for join in pattern.finditer(text)):
        at = join.start()
        user, blanks = _user_before(text, at)
        if user is None:
            continue
        name = user["user"].lower()
        separator = text[at]
        if separator == ":" and (blanks or name in NAMESPACES):
            continue  # `title: Hello!World2`, `docker:…`: a setting or a namespace
        if separator == "/" and name in _REF_FOLDERS:
            continue
        if separator == "|" and _in_a_table_row(text, user.start()):
            continue  # a table's row: `secret_tables` reads it by its header
        # (after a colon, only the usual accounts: `nginx:1.25&Alpine3` is an image's tag)
        account = name in _ACCOUNTS if separator == ":" else an_account(name)
        if not account and not _announced(lowered, user.start()):
            continue  # "wiki/Home#Section-2", "Sales / Marketing&Ops2": no pair is given
        span = _value_after(text, at + 1, exclaimed=name in _ACCOUNTS)
        if span is not None and (
            _strong(text[span[0] : span[1]])
            or (
                _ends_pair(text, span[1])
                # set apart as a pair is ("root:Toor2024Lab!", "admin / Summer2023!"), not as
                # a page's path ("see admin/Dashboard2024!"), or said to be a login's
                and (separator == ":" or blanks or at + 1 < span[0] or _logged_in(lowered, at))
            )
        ):
            yield span
    for email in _EMAIL_WITH.finditer(text):
        at = email.start()
        before = text.rfind(" ", max(0, at - _LONGEST_USER), at) + 1
        local = _LOCAL_PART.match(text, before, at)
        if local is None:
            continue
        span = _value_after(text, email.end(), exclaimed=True)
        if span is None:
            continue
        if not _strong(text[span[0] : span[1]]):  # only a final "!": a login said so, or
            # "ssh root@10.0.0.5 with Winter2024!": an account's, a number before the "!" (not
            # "ssh pi@host with X11Forwarding!", "with KeepAlive2!")
            if _logged_in(lowered, before) or (
                an_account(local.group().lower())
                and _starts_a_shell_login(lowered, before)
                and _NUMBERED.search(text, span[0], span[1]) is not None
            ):
                yield span
        # an account, a word that announces credentials, or a symbol only a password holds:
        # not "ping jane@acme.io with Q3&Q4Plan", "reach me at jane@acme.io with Questions?2"
        elif (
            local.group().lower() in _ACCOUNTS
            or _announced(lowered, before)
            or _PASSWORD_SYMBOL.search(text, span[0], span[1] - 1) is not None
        ):
            yield span
    for pattern in _GIVEN_WITH:
        for given in pattern.finditer(lowered):
            at = given.start()
            if at > 0 and (lowered[at - 1].isalnum() or lowered[at - 1] in "_-."):
                continue  # inside a longer word
            span = _value_after(text, given.end())
            if span is not None and _FOR_A_LOGIN.match(lowered, span[1]) is not None:
                yield span
