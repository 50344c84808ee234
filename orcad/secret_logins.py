"""A password given with a login in plain words, no word for password near it: "ssh in as root with
tr0ub4dor&3abc", "log in to grafana as admin using P@ssw0rd!23zz", "log into the router with
admin and R0uter!pass", "use `Winter2024!xq` to log in as admin", and credentials stated as a
user then a password, "staging db creds are admin Hunter2!xyz", "grafana login is admin
Graf4na!Ops" (the user an account's usual name or an address: "the login is returning HTTP401!"
says what a login does).

Pure module: no I/O. Each form is found from a literal, looked for with str.find, and matched
there: " as " before the user, " to " before "log in" and its kin after the value, and " and "
between the user and the value, looked for only after a login verb's start (prose holds fewer
of those). The value counts only when it looks chosen (`is_chosen_password`) and holds a digit
or a symbol a name does not (`!@#$%^&*+=?~`):
"log in as admin with sso", "with okta" or "with the-ssh-key" are ways to log in, not
passwords, and "npm@10" is a package. With no user, "try logging in with tr0mb0ne-Velvet-31",
the value must hold a symbol or a digit inside a word ("log in with YubiKey-5C-NFC" is a way).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_sentences import NOTORIOUS_PASSWORDS, plain_word_password
from orcad.secret_strong_pairs import an_account
from orcad.secret_values import (
    PARTS_OF_A_LOGIN,
    VERSIONED_NAME,
    Span,
    end_before_trailing,
    is_chosen_password,
    is_placeholder,
    is_reference,
    value_ends_clause,
)

# " as USER with|using [the] [password] VALUE", a value quoted or not
_AS_USER_WITH = lazy_compile(
    r" as [ \t]*[^\s]{1,64}[ \t]+(?:with|using)[ \t]+(?:(?:the[ \t]+)?pass(?:word)?[ \t]+)?"
    r"(?P<quote>[`'\"]?)(?P<value>[^\s`'\"]{4,128}+)(?P=quote)"
)
# what comes before " as" on its line for a login: the verb, perhaps where to ("log in to
# grafana", "ssh into the bastion")
_LOGIN_VERB = (
    r"(?<![a-z0-9_\-])(?:log(?:ged|ging)?[ \t-]?(?:in|on)|login|sign(?:ed|ing)?[ \t-]?in|"
    r"ssh(?:[ \t]+in(?:to)?)?|connect(?:ed|ing)?|authenticate[sd]?)"
    # where to, the preposition perhaps run into the verb ("log into grafana"), in two words
    # after "the" or a possessive ("log into the old jenkins")
    r"(?:[ \t]*(?:to|into|onto|on|at)[ \t]+"
    r"(?:(?:the|my|our|your|their)[ \t]+(?:[^\s]{1,32}[ \t]+)?)?[^\s]{1,64})?"
)
_LOGIN_BEFORE = lazy_compile(_LOGIN_VERB + r"[ \t]*\Z")
# "log into the router with admin and R0uter!pass", "the jenkins login: ci-bot and X": a login
# with a user and then, after " and ", its password (matched at each " and " that follows a
# login verb; a value with no digit nor symbol fails here, in C)
_AND_VALUE = lazy_compile(
    r" and[ \t]+(?P<quote>[`'\"]?)(?=[^\s`'\"]*[0-9!@#$%^&*+=?~])"
    r"(?P<value>[^\s`'\"]{4,128}+)(?P=quote)"
)
_LOGIN_USER_BEFORE = lazy_compile(
    _LOGIN_VERB + r"(?:[ \t]*:|[ \t]+(?:with|using|is))[ \t]+[^\s]{1,64}\Z"
)
_LOGIN_REACH = 96  # characters before " as" the verb may start at
# "use|with|try VALUE to log in|sign in|log on|ssh", the value quoted or not (matched at each
# " to ": a search for each of the five phrases cost more than the rest of the module)
_AFTERWARDS = lazy_compile(r" to (?:(?:log(?:[ -]?in| on)|login|sign[ -]?in)(?:to)?|ssh)(?![a-z])")
_USE_VALUE = lazy_compile(
    r"(?<![a-z0-9_\-])(?:use|using|with|try)[ \t]+(?P<quote>[`'\"]?)"
    r"(?P<value>[^\s`'\"]{4,128}+)(?P=quote)\Z"
)
_VALUE_REACH = 160
_SYMBOLS = frozenset("!@#$%^&*+=?~")
# a package at a version ("try npm@10 to log in to the registry")
_PACKAGE = lazy_compile(r"[a-z0-9][\w.\-/]*@(?:\d[\w.\-]*|latest|next)\Z", re.IGNORECASE)


def _password_like(value: str) -> bool:
    return (
        is_chosen_password(value)
        and (any(char.isdigit() for char in value) or any(char in _SYMBOLS for char in value))
        and not is_placeholder(value)
        and not is_reference(value)
        and _PACKAGE.match(value) is None
    )


def _marked_as_password(value: str) -> bool:
    """What a password after "with USER and" holds beyond `_password_like`: a tool's name may
    hold a digit ("with psql and pgadmin4"), so a symbol, or a capital beside its digit."""
    return any(char in _SYMBOLS for char in value) or (
        any(char.isdigit() for char in value) and any(char.isupper() for char in value)
    )


# how each verb of _LOGIN_VERB starts
_VERB_STARTS = ("log", "sign", "ssh", "connect", "auth")


def _ands_after_verbs(lowered: str) -> list[int]:
    """Where " and " stands within reach after a login verb's start: looked for from each
    verb, which prose holds fewer of than " and "."""
    found: set[int] = set()
    for literal in _VERB_STARTS:
        for verb in _places(lowered, literal):
            at = lowered.find(" and ", verb, verb + _LOGIN_REACH)
            while at >= 0:
                found.add(at)
                at = lowered.find(" and ", at + 1, verb + _LOGIN_REACH)
    return sorted(found)


def _login_ending(pattern: re.Pattern[str], lowered: str, start: int, at: int) -> bool:
    """Whether `pattern` (a login verb and what follows it) ends at `at` (from `start` on its
    line): matched only where a verb starts, found with str.rfind (a search tried at each of
    the 96 characters before each " and ", 0.8 s a megabyte of "log into x with a and b1!c")."""
    for literal in _VERB_STARTS:
        place = lowered.rfind(literal, start, at)
        while place >= 0:
            if pattern.match(lowered, place, at) is not None:
                return True
            place = lowered.rfind(literal, start, place)
    return False


def _places(lowered: str, literal: str) -> Iterator[int]:
    """Where `literal` occurs in `lowered`: str.find is three times as fast as a pattern's
    search for its literal start."""
    at = lowered.find(literal)
    while at >= 0:
        yield at
        at = lowered.find(literal, at + 1)


# "try logging in with tr0mb0ne-Velvet-31", "sign in to the portal with Sunf1ower!Gate": a
# login verb (and where to) right before " with " and the value, no user named; the value must
# hold a symbol or a digit inside a word, as a password spelled with digits does ("log in with
# YubiKey-5C-NFC", "with psql-16" are ways and tools)
# (the symbol or the digit inside a word looked ahead for in the same scan: a match tried at
# each " with " in Python cost a twentieth of all redaction; and "with" first, not " with": a
# literal that starts with a blank is found four times as slowly)
_WITH_VALUE = lazy_compile(
    r"with(?<=[ \t]with)[ \t]+(?P<quote>[`'\"]?)"
    r"(?=[^\s`'\"]{0,127}?(?:[!@#$%^&*+=?~]|[A-Za-z][0-9]+[A-Za-z]))"
    r"(?P<value>[^\s`'\"]{6,128}+)(?P=quote)"
)
_LOGIN_ENDS = lazy_compile(_LOGIN_VERB + r"[ \t]*\Z")
_ADDRESS = lazy_compile(r"[^@\s]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+\Z")
# a digit for a letter inside a word in small letters ("tr0mb0ne"), not between two words of
# a name ("Okta2FA", "AzureAD-B2C")
_DIGIT_IN_WORD = lazy_compile(r"[a-z][0-9]+[a-z]")


def _logins_with_values(text: str, lowered: str) -> Iterator[Span]:
    for match in _WITH_VALUE.finditer(text):
        at = match.start() - 1
        value_start, value_end = match.span("value")
        if not match["quote"]:
            value_end = end_before_trailing(text, value_start, value_end)
        value = text[value_start:value_end]
        if _ADDRESS.match(value) is not None:
            continue  # the user: "sign in to the test tenant with qa-bot@acme.test / X"
        if not (
            _marked_as_password(value)
            # a symbol inside it, not only a sentence's end ("try logging in with Firefox128!")
            and (
                any(char in _SYMBOLS for char in value.rstrip("!?."))
                or _DIGIT_IN_WORD.search(value)
            )
            and _password_like(value)
        ):
            continue
        start = max(0, at - _LOGIN_REACH)
        start = max(start, lowered.rfind("\n", start, at) + 1)
        if _login_ending(_LOGIN_ENDS, lowered, start, at):
            yield value_start, value_end


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
    for at in _ands_after_verbs(lowered):
        match = _AND_VALUE.match(lowered, at)
        if match is None:
            continue
        value_start, value_end = match.span("value")
        value_end = end_before_trailing(text, value_start, value_end)
        value = text[value_start:value_end]
        if not _marked_as_password(value):
            continue
        start = max(0, at - _LOGIN_REACH)
        start = max(start, lowered.rfind("\n", start, at) + 1)
        user = lowered[lowered.rfind(" ", start, at) + 1 : at]  # the word before " and "
        if (
            user not in _SAID_OF_A_LOGIN  # "the login is sso and AzureAD2." names no user
            and _login_ending(_LOGIN_USER_BEFORE, lowered, start, at)
            and _password_like(value)
        ):
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
    yield from _logins_with_values(text, lowered)
    yield from _stated_pairs(text, lowered)
    yield from _logins_with_pairs(text, lowered)
    if "unlock" in lowered:
        yield from _unlocked_with(text, lowered)
    if "/" in lowered:
        yield from _given_pairs(text, lowered)


# "staging db creds are admin Hunter2!xyz", "grafana login is admin Graf4na!Ops": credentials
# stated as a user, a blank and a password (a colon may follow the verb: "the creds are: admin
# Xk9#mQ2!pL"), found from "cred" and "login" (literals each)
# ("the dev account on the lims is labtech2 with Sequoia#Rings", "plex admin is jon and
# Plex4Life!": an account or an admin, where it is, then the user and "and" or "with")
_STATED_PAIRS = tuple(
    lazy_compile(
        head + r"(?P<where>[ \t]+(?:on|for|at|in|of)(?:[ \t]+[a-z0-9_.\-]{1,24}+){1,3}?)?"
        r"[ \t]+(?:are|is|were|was)(?:[ \t]+now)?[ \t]*:?[ \t]+"
        r"(?P<user>[a-z][a-z0-9_.\-]{0,31}+(?:@[a-z0-9\-]{1,63}(?:\.[a-z0-9\-]{1,63})+)?)"
        r"(?P<joined>,?[ \t]+(?:and|with)[ \t]+(?:(?:the[ \t]+)?pass(?:word)?[ \t]+)?)?[ \t]*"
        r"(?<=[ \t])(?P<quote>[`'\"]?)(?P<value>[^\s`'\"]{6,128}+)(?P=quote)"
    )
    for head in (r"cred(?:s|entials?)", "login", "account", "acct", "admin")
)
_STATED_PAIR_HEADS = ("cred", "login", "account", "acct", "admin")  # each pattern's literal
# what a login or an account is said to be, which is no user's name
_SAID_OF_A_LOGIN = frozenset(
    ("slow", "down", "broken", "disabled", "locked", "fine", "ok", "okay", "working", "gone",
     "back", "done", "ready", "open", "closed", "shared", "new", "old", "active", "inactive",
     "required", "optional", "missing", "expired", "blocked", "flaky", "weird", "different",
     "separate", "same", "mine", "yours", "ours", "theirs", "his", "hers", "set", "up",
     "there", "here", "now", "still", "also", "just", "only", "not", "never", "always",
     # how one logs in ("the login is sso and AzureAD2.")
     "sso", "saml", "oauth", "oauth2", "oidc", "okta", "google", "github", "gitlab", "ldap",
     "kerberos", "passwordless", "passkey", "passkeys", "magic")
)  # fmt: skip


def _stated_pairs(text: str, lowered: str) -> Iterator[Span]:
    """The password of a user and password stated after "creds are" or "login is": one that
    holds a letter, a digit and a symbol or a capital, the user an account's usual name or an
    address ("the login is returning HTTP401!", "creds are temporary STS&AssumeRole2" say what
    a login or credentials are like)."""
    for head, pattern in zip(_STATED_PAIR_HEADS, _STATED_PAIRS, strict=True):
        if head not in lowered:
            continue  # str's search is faster than the pattern's scan for its literal
        for match in pattern.finditer(lowered):
            at = match.start()
            user = match["user"]
            if at > 0 and lowered[at - 1].isalnum():
                continue
            start, end = match.span("value")
            if not match["quote"]:
                end = end_before_trailing(text, start, end)
            value = text[start:end]
            if match["joined"] is not None or not (an_account(user) or "@" in user):
                # any user's name (an account's too), after "and" or "with", when only a
                # password looks like the value: a symbol inside it, or both cases and a digit
                # ending the clause ("the account is admin and Owner2 role" is no password)
                if (
                    match["joined"] is not None
                    and user not in _SAID_OF_A_LOGIN
                    and not user.endswith(("ed", "ing", "ly"))
                    and _password_like(value)
                    and (
                        any(char in _SYMBOLS for char in value.rstrip("!?."))
                        or (
                            _marked_as_password(value)
                            and _ends_its_clause(text, value, match.end("value"), end)
                        )
                    )
                ):
                    yield start, end
                continue
            if _password_like(value) and (
                _marked_as_password(value)
                # after an account's usual name, letters with digits that end the clause ("the
                # ilo login is Administrator zaq12wsx")
                or (
                    an_account(user)
                    and _not_a_word(value)
                    and value_ends_clause(text, match.end("value"), end)
                )
            ):
                yield start, end


def _ends_its_clause(text: str, value: str, value_end: int, end: int) -> bool:
    """A sentence's mark ends the value, or follows it after blanks ("Plex4Life! , remember")."""
    return (
        value_ends_clause(text, value_end, end)
        or value[-1:] in ("!", ".")
        or text[value_end : value_end + 8].lstrip(" \t")[:1] in (",", ";")
    )


# "log into the pfsense box with admin Penguin_77": a login verb, then " with ", an account's
# usual name or an address, a blank and the password (matched at each "with")
_WITH_USER_VALUE = lazy_compile(
    r"with(?<=[ \t]with)[ \t]+"
    r"(?P<user>[a-z][a-z0-9_.\-]{0,31}+(?:@[a-z0-9\-]{1,63}(?:\.[a-z0-9\-]{1,63})+)?)[ \t]+"
    r"(?P<quote>[`'\"]?)(?P<value>[^\s`'\"]{4,128}+)(?P=quote)"
)


def _not_a_word(value: str) -> bool:
    """A value no word or version is: a symbol inside it, both cases with a digit, or a digit
    inside a word ("zaq12wsx"; not "rights2", "login2", "IAM2", "v2.1")."""
    inner = value.rstrip("!?.")
    return VERSIONED_NAME.match(value.lower()) is None and (
        any(char in _SYMBOLS or char == "_" for char in inner)
        or (value.lower() != value != value.upper() and any(char.isdigit() for char in value))
        or _DIGIT_IN_WORD.search(value) is not None
    )


# a login verb, where to and up to two words more ("log into the pfsense box")
_LOGIN_NEAR = lazy_compile(_LOGIN_VERB + r"(?:[ \t]+[a-z0-9_.\-]{1,32}){0,2}[ \t]*\Z")


def _logins_with_pairs(text: str, lowered: str) -> Iterator[Span]:
    """The password after a login's "with USER", when the user is an account's usual name or
    an address and the password holds a digit or a symbol and ends its clause (not "log in
    with admin rights", "sign in with google account2 first")."""
    for match in _WITH_USER_VALUE.finditer(lowered):
        user = match["user"]
        if not (an_account(user) or "@" in user):
            continue
        start, value_end = match.span("value")
        end = value_end if match["quote"] else end_before_trailing(text, start, value_end)
        value = text[start:end]
        if not (
            _password_like(value)
            and _not_a_word(value)
            and value_ends_clause(text, match.end(), end)
        ):
            continue
        at = match.start() - 1
        line = max(0, at - _LOGIN_REACH)
        line = max(line, lowered.rfind("\n", line, at) + 1)
        if _login_ending(_LOGIN_NEAR, lowered, line, at):
            yield start, end


# "the kiosk tablets unlock with monkey123": what a device or a file unlocks with, a value
# only a password is: a symbol, both cases and a digit, or a word from the top of the leaked
# lists with digits after it
_UNLOCK_WITH = lazy_compile(
    r"unlock(?:s|ed)?(?<![a-z0-9_\-]unlock)(?<![a-z0-9_\-]unlocks)(?<![a-z0-9_\-]unlocked)"
    r"(?:[ \t]+(?:it|them|the[ \t]+[a-z0-9\-]{1,20}))?[ \t]+with[ \t]+"
    r"(?P<quote>[`'\"]?)(?P<value>[^\s`'\"]{6,64}+)(?P=quote)"
)
_KEYS = lazy_compile(r"(?:ctrl|control|alt|option|shift|cmd|command|win|fn|super|meta)\+")
_LETTERS_THEN_DIGITS = lazy_compile(r"(?P<word>[a-z]{4,})[0-9]{2,}\Z")


def _unlocked_with(text: str, lowered: str) -> Iterator[Span]:
    """The password a device or a file unlocks with, ending its clause (not "unlock with
    touchid", "unlock with yubikey5", "unlocks with shamir2of3", "unlock with windows11")."""
    for match in _UNLOCK_WITH.finditer(lowered):
        start, value_end = match.span("value")
        end = value_end if match["quote"] else end_before_trailing(text, start, value_end)
        value = text[start:end]
        if not (_password_like(value) and value_ends_clause(text, match.end(), end)):
            continue
        letters = _LETTERS_THEN_DIGITS.match(value)
        marked = any(char in _SYMBOLS or char == "_" for char in value.rstrip("!?.")) or (
            value.lower() != value != value.upper() and any(char.isdigit() for char in value)
        )
        if (
            _KEYS.match(value.lower()) is None
            and VERSIONED_NAME.match(value.lower()) is None
            and (marked or (letters is not None and letters["word"] in NOTORIOUS_PASSWORDS))
        ):
            yield start, end


# "jenkins creds are admin / qwerty123", "the box takes root / r00tme", "sign in with
# qa@acme.test / Marvin42", "the broker wants user sensor / tulipgarden", "the vm is root/toor":
# a user and a password either side of a slash, given by a verb or a word of credentials right
# before the user. Found from each slash (str.find), the user and the word before it read back
# from there.
# Found from each slash between a user's last character and a password's first (a blank either
# side or none), the password four characters or more with no colon nor further slash (a
# path's): one C scan for a literal, where a pattern opening with the verbs cost a tenth of
# all redaction. The verb or word of credentials and the user are then read back from there.
_VALUE_AHEAD = r"[`'\"]?[^\s/:`'\"]{4,}+(?![^\s`'\"])"
_PAIR_SLASH = lazy_compile(
    r"/(?:(?<=[a-z_.@\-]/)(?="
    + _VALUE_AHEAD
    + r")|(?<=[a-z_.@\-][ \t]/)(?=[ \t]"
    + _VALUE_AHEAD
    + r"))"
)
_PAIR = lazy_compile(
    r"(?<![a-z0-9_\-])(?:is|are|was|were|with|using|takes|take|wants|want|use|as|"
    r"creds?|credentials?|login|logon|acct|account)[ \t]*:?[ \t]+"
    r"(?P<named>(?:user(?:name)?|account|acct)[ \t]+)?"
    r"(?P<user>[a-z][a-z_.\-]{0,31}+(?:@[a-z0-9\-]{1,63}(?:\.[a-z0-9\-]{1,63})+)?)"
    r"(?P<spaced>[ \t])?\Z"
)
_PAIR_REACH = 96
# a word of credentials before the pair on its line ("creds", "login", "acct", "sign in")
_PAIR_CONTEXT = lazy_compile(
    r"(?<![a-z])(?:creds?|credentials?|log[ \t]?ins?|logon|log[ \t]+into|sign[ \t]?in|"
    r"accounts?|acct|user(?:name)?|auth|pass(?:word)?|pw)(?![a-z])"
)
_PAIR_CONTEXT_REACH = 96
# what an account is given besides a password: its role
_ROLES = frozenset(
    ("viewer", "editor", "owner", "member", "reader", "writer", "operator", "developer",
     "maintainer", "reporter", "manager", "moderator", "contributor", "auditor", "analyst",
     "billing", "support", "superuser", "readwrite", "anonymous", "service", "default",
     "public", "private", "internal", "external", "admins", "users", "guests", "staff")
)  # fmt: skip
_PAIR_VALUE = lazy_compile(r"(?P<quote>[`'\"]?)(?P<value>[^\s`'\"/]{4,64}+)(?P=quote)")


def _given_pairs(text: str, lowered: str) -> Iterator[Span]:
    """The password of a user and password pair given in words (see above): when it holds a
    symbol, or a capital beside a digit; letters with digits after an account's usual name, an
    address or `user NAME`; a plain word ("guest / rainbowkitten") or one
    of the leaked lists' ("root/toor") ending its clause after an account's name, an address or
    `user NAME`. With no blanks around the slash (a path's or a platform's shape: "is
    feature/Login2FA", "is linux/amd64"), the user must be an account's or an address, and the
    password hold a symbol before its end, or a word of credentials be on its line,
    or the password be one of the leaked lists' (not another account's name: "root/admin")."""
    for slash in _PAIR_SLASH.finditer(lowered):
        at = slash.start()
        pair = _PAIR.search(lowered, max(0, at - _PAIR_REACH), at)
        if pair is not None:
            span = _given_pair(text, lowered, pair, at)
            if span is not None:
                yield span


def _given_pair(text: str, lowered: str, pair: re.Match[str], at: int) -> Span | None:
    user, spaced = pair["user"], pair["spaced"] is not None
    if user in PARTS_OF_A_LOGIN:  # "the login form / SignupPage2"
        return None
    user_start = pair.start("user")
    found = _PAIR_VALUE.match(text, at + 1 + spaced)
    if found is None:
        return None
    start, value_end = found.span("value")
    end = value_end if found["quote"] else end_before_trailing(text, start, value_end)
    value = text[start:end]
    lowered_value = value.lower()
    if (
        len(value) < 4
        or ":" in value
        or is_placeholder(value)
        or is_reference(value)
        or VERSIONED_NAME.match(lowered_value) is not None
    ):
        return None
    named = an_account(user) or "@" in user or (pair["named"] or "").startswith("user")
    line = lowered.rfind("\n", max(0, user_start - _PAIR_CONTEXT_REACH), user_start) + 1
    context = _PAIR_CONTEXT.search(lowered, line or max(0, user_start - _PAIR_CONTEXT_REACH), at)
    ends = value_ends_clause(text, value_end, end)
    if lowered_value in NOTORIOUS_PASSWORDS:  # an account's name only as its own ("admin/admin")
        other_account = an_account(lowered_value) and lowered_value != user
        return (start, end) if named and ends and not other_account else None
    if value.isalpha():  # a plain word, not a role ("the account is admin / viewer")
        plain = spaced and ends and plain_word_password(value) and len(value) >= 6
        plain = plain and lowered_value not in _ROLES and not an_account(lowered_value)
        return (start, end) if plain and named and context is not None else None
    if not (_password_like(value) and any(char.isalpha() for char in value[:1])):
        return None
    marked = _marked_as_password(value)
    if not spaced:  # a symbol inside it, as a page's name has none: "is admin/Dashboard2024!"
        marked = any(char in _SYMBOLS for char in value.rstrip("!"))
        tight = ("@" in user or an_account(user)) and (marked or context is not None)
        return (start, end) if tight else None
    return (start, end) if marked or named else None
