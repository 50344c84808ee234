"""Passwords stated in English words.

Pure module: no I/O. Finds a password a sentence gives ("the root password on the staging box is
Winter2024!", "the admin password is: qwerty", "log in with the password letmein2024", "the wifi
password is 84736251", "my password is correct horse battery staple", "user admin pass hunter2",
"the db password changed, it is now Tr1cky#Pass"), also after an aside in parentheses ("password
(case sensitive!): X"), after "pass phrase" in two words, set apart by commas ("the old
password, tigerLily#22, should be revoked") or after the short name and a blank ("ssh
admin@host, pw Ssh!Comma9") when only a password looks like it, a quoted passphrase with a
number among its words, and lower-case words joined by hyphens with a number that a verb gives
("the password is blue-sky-42", not "aes-256-gcm" or "valid-for-90-days"); a generated value
stated for an API key, token or secret is `secret_stated_keys`'. Leaves alone "password"
followed by a word that names another thing ("the password policy is NIST-800-63b"), commands
named after passwd ("chpasswd reads user:password pairs"), words that describe a password ("the
password is too short", "the password is stored hashed"), a password with other words than an
owner's between it and its verb ("password timeout is 3600"), `pass` alone as a verb, and
anonymous FTP's password. A PIN a sentence states is found here with the patterns of
`secret_pins`; other languages are `secret_foreign_sentences`'.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_pins import PIN_STATEMENT, chosen_pins, lower_case_pins, pin_ends_clause
from orcad.secret_values import (
    CLAUSE_ENDS,
    PROSE_OR_CODE_WORDS,
    STATED_VERB,
    TRAILING,
    Span,
    end_before_trailing,
    is_chosen_password,
    is_label,
    is_placeholder,
    is_reference,
    mixes_letters_and_others,
    value_ends_clause,
)

# "password" followed by these names another thing ("the password policy is NIST-800-63b").
_COMPOUND = (
    r"policy|policies|length|hash|hashes|hashing|field|fields|format|rules?|requirements?|"
    r"strength|complexity|manager|reset|prompt|file|store|storage|validation|validator|expiry|"
    r"expiration|history|change|hint|input|check|scheme|algorithm|salt|rotation|flow|form|page|"
    r"grant|type|owner|protected|less|based|auth|authentication|login|screen|dialog|box"
)
STATED_VALUE = r"[ \t]+[\"'`]?(?P<value>[^\s\"'`()\[\]{}<>]{4,128}+)(?![(\[{<])"
_AFTER_NAME = (
    rf"(?![a-z0-9_\-])(?![ \t]+(?:{_COMPOUND})\b)"
    # an aside in parentheses right after the name ("password (case sensitive!): X",
    # "initial admin password (from /var/lib/…/initialAdminPassword) is X")
    r"(?:[ \t]+\([^()\n]{1,80}+\))?"
    # the words between (an owner's: "for db01.corp.io", a dot inside a word kept)
    r"(?P<words>(?:[ \t]+(?:[^\s.,;:!?=]|\.(?=[^\s.,;:!?=])){1,30}+){0,8}?)"
    # `said`: a verb and a colon ("the password is: X") introduce the value and nothing else,
    # also on the next line ("The password is:" and the value below it); an arrow or a dash
    # set apart by blanks ("password -> X") is an operator as `:` is
    r"(?:(?P<op>[ \t]*(?:[:=]|->|\u2192)|[ \t]+[-\u2013\u2014](?=[ \t]))|"
    rf"{STATED_VERB}(?P<said>[ \t]*:)?)"
    r"(?:[ \t]+|(?(said)[ \t]*\r?\n(?:[ \t]*\r?\n)?[ \t]*|(?!)))"
    + STATED_VALUE.replace(r"[ \t]+", "", 1)
)
# a literal prefix lets the engine skip ahead; the name misspelt by a letter left out or two
# swapped is read as written right ("pasword for the old wiki is letmein2024", "passwrod")
_STATEMENT = lazy_compile(
    r"pas(?:s(?:word|phrase|wd|code|[ \t]phrase|wrod|owrd|wod|ord)|wo?rd|wd)" + _AFTER_NAME
)
# "the pw is X", "pw for the jenkins admin: X": the short name, a whole word (not `npw`)
_SHORT_STATEMENT = lazy_compile(r"pw(?<![a-z0-9_\-./$@]pw)d?" + _AFTER_NAME)
# "log in with the password X", "use password X": a verb or preposition gives the value;
# "user admin pass X": a user named before it (then `pass` alone names it too).
_NAMED_VALUE = lazy_compile(
    r"pass(?P<long>word|phrase|wd|code)?(?![ \t]+(?:" + _COMPOUND + r")\b)" + STATED_VALUE
)
# A password's name, wherever it stands: the value may come before it ("Xk82nd!q is the
# password", "use Qwerty!789 as the password") or after "to" ("I set the password to X").
# (the character before is tested after a match: a look-behind that starts a pattern is tried
# at every character, which cost a sixth of all redaction on mixed text)
_NAME = lazy_compile(rf"(?:pass(?:word|wd|phrase)|pwd?)(?![a-z0-9_\-])(?![ \t]+(?:{_COMPOUND})\b)")
_BEFORE_A_NAME = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-./$@")
# what comes between a value and its name after it: "X is the [root] password", "X as my pw"
# ("get Welcome1 as a temp password", '"OpenSesame!1" - that's the pw for the sftp'; "a" only
# after "as": "OAuth2 is a password alternative" describes)
_BEFORE_NAME = lazy_compile(
    r"[ \t](?:(?:(?:[-\u2013\u2014,][ \t]+)?(?:that|it|this)(?:'s|\u2019s|[ \t]+is)|is|as|was)"
    r"[ \t]+(?:the|my|our|your|his|her|their|its)|as[ \t]+an?)[ \t]+"
    r"(?:[a-z0-9_\-]{1,20}[ \t]+){0,2}\Z"
)
_BEFORE_NAME_REACH = 56
_VALUE_REACH = 130  # how far back a value before its name may start
_QUOTES = "\"'`"
_SET_BEFORE_NAME = lazy_compile(
    r"(?<![a-z0-9_\-])(?:set|sets|setting|change[ds]?|changing|reset|resetting|update[ds]?|"
    r"updating|rotate[ds]?|rotating)[ \t]+(?:(?:the|my|our|your|his|her|their|its)[ \t]+)?"
    r"(?:[a-z0-9_\-]{1,20}[ \t]+){0,2}\Z"
)
_TO_VALUE = lazy_compile(r"[ \t]+to" + STATED_VALUE)
_SET_REACH = 64
_GIVEN_WITH = lazy_compile(
    r"(?<![a-z0-9_])(?:with|using|use|enter|type|try|tried|entered|typed)[ \t]+"
    r"(?:(?:the|a|my|your|our|this|that|its|their)[ \t]+)?(?:[a-z0-9_\-]{1,20}[ \t]+)?\Z"
)
_GIVEN_WITH_REACH = 64
# `user NAME pass VALUE` (as netrc writes `login NAME password VALUE`) before a password's name
_USER_BEFORE = lazy_compile(r"(?<![a-z0-9_\-])user(?:name)?[ \t]+(?P<user>[^\s]{1,64})[ \t]+\Z")
_USER_REACH = 80
# anonymous FTP takes any password, by custom an email address: none is a secret
_ANONYMOUS_USERS = frozenset(("anonymous", "ftp"))
# "wifi password: X": a word of prose names the password; code declares one with these words
# (`private password: Secret`), and these describe a derived value (`hashed password: bcrypt`).
_PROSE_LABEL = lazy_compile(r"(?<![a-z0-9_\-.$@])([a-z]{2,20})[ \t]+\Z")
_NOT_PROSE = frozenset(
    [
        "public",
        "private",
        "protected",
        "readonly",
        "static",
        "final",
        "const",
        "let",
        "var",
        "val",
        "pub",
        "mut",
        "export",
        "declare",
        "internal",
        "override",
        "lateinit",
        "def",
        "fn",
        "func",
        "abstract",
        "required",
        "optional",
        "hashed",
        "salted",
        "encrypted",
        "encoded",
        "hash",
        "stored",
        "cached",
        "masked",
        "expected",
        "old",
    ]
)
# A single word in a clear statement is the password unless it describes one.
DESCRIPTIVE = frozenset(
    [
        "blank",
        "same",
        "above",
        "below",
        "unknown",
        "wrong",
        "invalid",
        "incorrect",
        "correct",
        "valid",
        "secure",
        "insecure",
        "weak",
        "strong",
        "long",
        "short",
        "random",
        "temporary",
        "here",
        "there",
        "known",
        "shown",
        "given",
        "never",
        "always",
        "available",
        "unavailable",
        "visible",
        "bcrypt",
        "scrypt",
        "argon",
        "pbkdf",
        "plaintext",
        "cleartext",
        "plain",
        "unchanged",
        "disabled",
        "enabled",
        "missing",
        "pending",
        "none",
        "prompt",
        "auto",
        "ignore",
        "inherit",
        "unused",
    ]
)
_CAPITALISED_OR_LOWER = lazy_compile(r"[A-Za-z][a-z]*\Z")
# The words at the top of every list of leaked passwords: a verb that gives one of them gives a
# password ("the password is letmein"), where a lone word is otherwise what a password is like
# ("the password is required"); `changeme` and `password` itself are placeholders
NOTORIOUS_PASSWORDS = frozenset(
    (
        "letmein", "qwerty", "qwertyuiop", "asdfgh", "asdfghjkl", "zxcvbnm", "iloveyou",
        "monkey", "dragon", "sunshine", "princess", "football", "baseball", "superman",
        "batman", "starwars", "trustno1", "welcome", "passw0rd", "p@ssw0rd", "p@ssword",
        "abc123", "admin", "toor", "opensesame", "hunter", "shadow", "freedom", "qazwsx",
    )
)  # fmt: skip


def stated_password(value: str) -> bool:
    """A value in a sentence: must look chosen (letters with digits or symbols), not a word.
    A question mark after a word ends a question ("enter their password again?")."""
    return (
        len(value) >= 6
        and mixes_letters_and_others(value.rstrip("?"))
        and not is_label(value)
        and not _described(value)
        and not is_placeholder(value)
        and not is_reference(value)
    )


# how a password is kept, said of it as a label: "Argon2id-hashed", "base64-encoded"
_KEPT_AS = frozenset(
    {"hashed", "encoded", "encrypted", "salted", "protected", "stored", "derived", "signed"}
)


def _described(value: str) -> bool:
    """An algorithm or encoding and how the password is kept by it ("Argon2id-hashed",
    "base64-encoded"): two parts, the second one of _KEPT_AS. A passphrase of more words
    ("Correct-Horse-Battery-Stapled") is not one."""
    parts = _LABEL_SEPARATORS.split(value)
    return len(parts) == 2 and parts[1].lower() in _KEPT_AS


def _clearly_stated(value: str, *, clause_ends: bool) -> bool:
    """A value a sentence plainly gives as the password ("password is: qwerty"): any value of
    four characters or more, unless it is a placeholder, a reference or a word that describes
    the password (stored, required, hashed, bcrypt); a lone word must end the clause."""
    if len(value) < 4 or is_placeholder(value) or is_reference(value):
        return False
    if not value.isalpha():
        return value[0] != "-"
    lowered = value.lower()
    return (
        clause_ends
        and _CAPITALISED_OR_LOWER.match(value) is not None  # not a type: SecretStr, CharArray
        and lowered not in DESCRIPTIVE
        and not lowered.endswith(("ed", "ing"))
    )


# Words a sentence says a password is, which are no password: what it is like, whose it is,
# where it is ("the password is fine", "the password is optional", "the password is yours").
# With `DESCRIPTIVE`, the function words and the describing ends, they keep a lone plain word
# given by a verb a password only when it is none of them (`plain_word_password`).
_SAID_OF_A_PASSWORD = frozenset(
    (
        "fine", "good", "bad", "okay", "great", "nice", "ugly", "new", "old", "secret",
        "private", "public", "safe", "unsafe", "simple", "complex", "obvious", "common",
        "easy", "hard", "sure", "set", "unset", "empty", "right", "gone", "lost", "ready",
        "done", "fixed", "static", "hidden", "broken", "stale", "fresh", "unique", "generic",
        "standard", "custom", "weird", "trivial", "masked", "present", "absent", "shared",
        "global", "local", "current", "latest", "initial", "first", "last", "next", "same",
        "different", "identical", "mandatory", "optional", "obsolete", "outdated", "enough",
        "unchanged", "reused", "leaked", "exposed", "compromised", "expired", "locked",
        "unlocked", "encrypted", "hashed", "salted", "stored", "saved", "cached", "mine",
        "yours", "hers", "ours", "theirs", "ignored", "optional", "needed", "free", "false",
        "true", "null", "undefined", "nothing", "something", "anything", "everything",
        "whatever", "unknown", "dummy", "fake", "real", "actual", "strict", "loose", "lax",
        "cleartext", "plaintext", "hex", "base", "utf", "ascii", "unicode", "numeric",
        "alphanumeric", "lowercase", "uppercase", "mixed", "wrong", "expiring", "due",
        "overdue", "back", "away", "down", "inside", "elsewhere", "somewhere", "nowhere",
        "below", "above", "attached", "included", "visible", "ok", "yes", "no", "please",
        "missing", "pending", "over", "under", "through", "correct", "incorrect", "invalid",
        "valid", "forgotten", "known", "strong", "weak", "random", "long", "short", "separate",
        "accurate", "adequate", "appropriate", "immediate", "deliberate", "intermediate",
        "ultimate", "legitimate", "duplicate", "pure", "mature", "obscure", "insecure", "secure",
        # participles that end in -en, as nouns do ("kitten", "garden")
        "written", "rewritten", "overwritten", "chosen", "stolen", "taken", "spoken", "proven",
        "driven", "frozen", "hidden", "forbidden", "broken", "mistaken", "shaken", "woven",
        "beaten", "bitten", "eaten", "fallen", "gotten", "swollen", "sworn", "torn", "worn",
        "drawn", "grown", "thrown", "blown", "flown", "sewn", "sown", "seen", "been", "done",
    )
)  # fmt: skip


def plain_word_password(value: str) -> bool:
    """A lone word of five to 24 small letters a verb gives for a password, where it ends its
    clause ("the password is bananabread", "the ftp pass is summer"): unless it is a function
    word, a word that says what a password is like, whose or where it is, or a word that ends as
    participles, adverbs and adjectives do ("the password is fine", "is optional", "is useless",
    "is hashed", "is changing", "is mandatory")."""
    return (
        5 <= len(value) <= 24
        and value.isalpha()
        and value.islower()
        and value not in _SAID_OF_A_PASSWORD
        and value not in DESCRIPTIVE
        and value not in PROSE_OR_CODE_WORDS
        and value not in _SENTENCE_WORDS
        and not value.endswith(DESCRIBING_ENDS + _ADJECTIVE_ENDS)
        and "pass" not in value  # mypasswordhere: a stand-in
        and not is_placeholder(value)
    )


# How English words that describe a password end ("the password is unrecoverable"): a long
# word of letters that ends otherwise is rather words run together as one.
DESCRIBING_ENDS = (
    "ed", "ing", "able", "ible", "ly", "tion", "tions", "sion", "ment", "ness", "ive", "ful",
    "less", "ous", "ies", "ity", "ize", "ise", "al", "ic", "ent", "ant", "ary", "ory", "ence",
    "ance", "ist", "ism", "ward", "wards", "worthy", "where", "ever", "self", "proof", "wise",
    "like", "some", "out",
)  # fmt: skip
# and a few more ends of adjectives, said of a lone word only ("is obligatory", "is foolish")
_ADJECTIVE_ENDS = ("ish", "ical", "ular", "ile", "ary", "ory", "ior")


def _joined_words(value: str) -> bool:
    """A password of letters alone, stated in a sentence ("my password is
    correcthorsebatterystaple"): long, in one case (not a type such as PasswordManager),
    and not ending as a describing word does."""
    return (
        len(value) >= 12
        and value.isalpha()
        and _CAPITALISED_OR_LOWER.match(value) is not None
        and not value.lower().endswith(DESCRIBING_ENDS)
        and "pass" not in value.lower()  # mypasswordhere: a stand-in
        and not is_placeholder(value)
    )


# Commands named after passwd ("chpasswd reads user:password pairs"): their name is no password
_PASSWD_COMMANDS = ("ch", "ht", "smb", "g", "k", "yp", "rpc.yp", "ldap", "sasl")


def _passwd_command(lowered: str, keyword: int) -> bool:
    if not lowered.startswith("passwd", keyword):
        return False
    before = keyword
    while before > 0 and (lowered[before - 1].isalpha() or lowered[before - 1] == "."):
        before -= 1
    return lowered[before:keyword] in _PASSWD_COMMANDS


# What a password stated with words between it and its verb belongs to ("the password for
# the guest network is ..."): other words there make it a setting ("password timeout is 3600")
_OWNER_WORDS = frozenset(("for", "on", "of", "to", "at", "in", "from"))


def _stated_digits(value: str, words: str) -> bool:
    """Digits alone, given for the password in a sentence ("the wifi password is 84736251"):
    four or more, the password's own (no word but an owner's between it and the verb)."""
    between = words.split()
    return 4 <= len(value) <= 16 and value.isdigit() and (not between or between[0] in _OWNER_WORDS)


# another thing stated after "and" ("and key alias is upload", "and the user is bob"; not "and
# it is slow", said of the value)
_AND_CLAUSE = lazy_compile(
    r"[ \t]+and[ \t]+(?:the[ \t]+)?(?!(?:it|this|that|they|which)[ \t])"
    r"[a-z]{2,20}(?:[ \t]+[a-z]{2,20})?[ \t]+is(?![a-z])"
)


def _closes_quote(text: str, start: int, end: int) -> bool:
    """The value at `start`:`end` is in quotes of one kind."""
    return start > 0 and text[start - 1] in _QUOTES and text[end : end + 1] == text[start - 1]


def find_stated_passwords(text: str, lowered: str) -> Iterator[Span]:
    """A password stated in words: "the root password on the staging box is Winter2024!",
    "the admin password is: qwerty", "wifi password: correcthorse", "log in with the
    password letmein2024", "the wifi password is 84736251", "my PIN is 4821", "user admin
    pass hunter2"."""
    if "PIN" in text:
        for match in PIN_STATEMENT.finditer(text):
            start, end = match.span(1)
            if value_ends_clause(
                text, end + (text[end : end + 1] in CLAUSE_ENDS), end
            ) or pin_ends_clause(text, end):
                yield start, end
    if "pin" in lowered:
        yield from lower_case_pins(text, lowered)
        yield from chosen_pins(text, lowered)
    has_pw = "pw" in lowered
    if not has_pw and "pas" not in lowered:
        return
    statements = _STATEMENT.finditer(lowered)
    if has_pw:
        statements = itertools.chain(statements, _SHORT_STATEMENT.finditer(lowered))
    for match in statements:
        if _passwd_command(lowered, match.start()):
            continue
        start, value_end = match.span("value")
        end = end_before_trailing(text, start, value_end)
        value = text[start:end]
        if ":" in value and (match["op"] or "").strip() not in ("", ":", "="):
            continue  # "username:password -> deploy:X": a pair, found as one (secret_colon_pairs)
        clause_ends = value_ends_clause(text, value_end, end)
        if not clause_ends and _closes_quote(text, start, value_end):
            # "the password is 'blue-sky-42'.": its clause ends after the closing quote
            after = value_end + 1
            while after < len(text) and text[after] in CLAUSE_ENDS:
                after += 1
            clause_ends = value_ends_clause(text, after, value_end + 1)
        if match["said"] is not None and "\n" in lowered[match.end("said") : start]:
            # a line below "The password is:": only what looks chosen ("auto-generated" and
            # "see-below" are no passwords there)
            if stated_password(value) or _stated_digits(value, ""):
                yield start, end
            continue
        if (
            stated_password(value)
            or (_said_plainly(match, lowered) and _clearly_stated(value, clause_ends=clause_ends))
            or (match.group("op") is None and clause_ends and _joined_words(value))
            or (clause_ends and _stated_digits(value, match.group("words")))
            or (
                match["op"] is None
                and clause_ends
                and _owned(match["words"])
                and (value.lower() in NOTORIOUS_PASSWORDS or plain_word_password(value))
            )
            or (
                match["op"] is None
                # "is android-keystore-Mz7 and key alias is upload": another clause after "and"
                and (clause_ends or _AND_CLAUSE.match(lowered, value_end) is not None)
                and _owned(match["words"])
                and (
                    stated_label(value)
                    or joined_with_a_number(value)
                    or (lowered.startswith("passphrase", match.start()) and _joined_phrase(value))
                )
            )
            or (  # "Passphrase for the GPG key: river-Lantern-42-moss": an owner, then a colon
                (match["op"] or "").strip() == ":"
                and clause_ends
                and match["words"].split()[:1] == ["for"]
                and stated_label(value)
            )
        ):
            yield start, end
        elif (match["op"] is None or _said_plainly(match, lowered)) and _owned(match["words"]):
            phrase_end = _stated_passphrase(text, start) or _quoted_passphrase(text, start)
            if phrase_end:
                yield start, phrase_end
    for match in _NAMED_VALUE.finditer(lowered):
        keyword = match.start()
        if _passwd_command(lowered, keyword):
            continue
        start, end = match.span("value")
        end = end_before_trailing(text, start, end)
        reach = max(0, keyword - _USER_REACH)
        user = (  # the substring test first: this runs for every password's name in a text
            _USER_BEFORE.search(lowered, reach, keyword)
            if "user" in lowered[reach:keyword]
            else None
        )
        if user is not None:  # `user NAME pass VALUE`
            if user["user"].rstrip(TRAILING) not in _ANONYMOUS_USERS and is_chosen_password(
                text[start:end]
            ):
                yield start, end
            continue
        if match["long"] is None:
            continue  # `pass` alone is a verb
        value = text[start:end]
        if _GIVEN_WITH.search(lowered, max(0, keyword - _GIVEN_WITH_REACH), keyword) is None:
            # "the password Xk82nd!q didn't work": no verb gives it, but its form does
            quoted = (
                start > 0 and text[start - 1] in "\"'`" and text[end : end + 1] == text[start - 1]
            )
            if match["long"] in ("word", "wd", "phrase") and _marked_password(value, quoted=quoted):
                yield start, end
            continue
        if stated_password(value):
            yield start, end
        elif match["long"] == "phrase" and (phrase_end := _stated_passphrase(text, start)):
            yield start, phrase_end  # "ssh in with passphrase 'correct horse battery staple'"
    yield from _values_around_names(text, lowered)
    yield from _changed_from(text, lowered)
    if has_pw:
        yield from _after_short_names(text, lowered)
    if ", " in lowered:
        yield from _set_apart(text, lowered)


# "ssh admin@10.0.0.5, pw Ssh!Comma9", "its pwd 'R3porting#M0'": the short name and a blank
# before a value that only a password looks like (`_marked_password`), found from "pw" (a
# literal, where a look-behind first would be tried at every character)
_SHORT_NAMED_VALUE = lazy_compile(
    r"pwd?[ \t]+(?P<quote>[\"'`]?)(?P<value>[^\s\"'`()\[\]{}<>]{6,128}+)(?P=quote)"
)


def _after_short_names(text: str, lowered: str) -> Iterator[Span]:
    for match in _SHORT_NAMED_VALUE.finditer(lowered):
        at = match.start()
        if at > 0 and lowered[at - 1] in _BEFORE_A_NAME:
            continue  # inside a longer name, or `$(pwd)`
        start, end = match.span("value")
        quoted = bool(match["quote"])
        if not quoted:
            end = end_before_trailing(text, start, end)
        if _marked_password(text[start:end], quoted=quoted):
            yield start, end


# "The old password, tigerLily#22, should be revoked": the value set apart by commas right
# after the name, when only a password looks like it
_SET_APART = lazy_compile(
    r"pass(?:word|phrase|wd),[ \t]+(?P<quote>[\"'`]?)(?P<value>[^\s,\"'`()\[\]{}<>]{6,128}+)"
    r"(?P=quote),"
)


def _set_apart(text: str, lowered: str) -> Iterator[Span]:
    for match in _SET_APART.finditer(lowered):
        start, end = match.span("value")
        if _marked_password(text[start:end], quoted=bool(match["quote"])):
            yield start, end


_MARKS = frozenset("!@#$%^&*+=?~")
_EMAIL = lazy_compile(r"[^@\s]+@[^@\s]+\.[a-z]", re.IGNORECASE)


def _marked_password(value: str, *, quoted: bool = False) -> bool:
    """A value right after the word password that only a password looks like: letters, a digit
    and a symbol inside it ("password Xk82nd!q"; not "password Argon2id", "password hunter2",
    an email address). In quotes, a closing "!" is the password's too."""
    inner = value if quoted else value.rstrip("?!.")
    return (
        stated_password(value)
        and any(char in _MARKS for char in inner)
        and any(char.isdigit() for char in inner)
        and _EMAIL.match(value) is None
    )


def _value_before(text: str, lowered: str, keyword: int) -> Span | None:
    """The value a sentence gives before the password's name at `keyword` ("Xk82nd!q is the
    password"), when it looks chosen. The verbs are looked for with str.find first: a search
    of the words before every name cost a fifth of all redaction on mixed text."""
    reach = max(0, keyword - _BEFORE_NAME_REACH)
    if (
        lowered.find(" is ", reach, keyword) < 0
        and lowered.find(" as ", reach, keyword) < 0
        and lowered.find(" was ", reach, keyword) < 0
        and lowered.find("'s ", reach, keyword) < 0
        and lowered.find("\u2019s ", reach, keyword) < 0
    ):
        return None
    between = _BEFORE_NAME.search(lowered, reach, keyword)
    if between is None:
        return None
    end = between.start()
    floor = max(0, end - _VALUE_REACH)
    start = 1 + max(lowered.rfind(mark, floor, end) for mark in (" ", "\t", "\n", "("))
    if start == 0 and floor > 0:
        return None  # no word starts within reach
    if text[start : start + 1] in _QUOTES and text[end - 1 : end] == text[start]:
        start, end = start + 1, end - 1
    end = end_before_trailing(text, start, end)
    if end - start < 4 or not stated_password(text[start:end]):
        return None
    return start, end


def _values_around_names(text: str, lowered: str) -> Iterator[Span]:
    """A password given before its name ("Xk82nd!q is the password", "use Qwerty!789 as the
    password") or after "to" when a verb sets it ("I set the password to Xk82nd!q"): a value
    that looks chosen (letters with digits or symbols)."""
    for name in _NAME.finditer(lowered):
        keyword, after = name.span()
        if keyword > 0 and lowered[keyword - 1] in _BEFORE_A_NAME:
            continue  # inside a longer name
        if before := _value_before(text, lowered, keyword):
            yield before
        to = _TO_VALUE.match(lowered, after)
        if to is not None and _SET_BEFORE_NAME.search(
            lowered, max(0, keyword - _SET_REACH), keyword
        ):
            start, value_end = to.span("value")
            end = end_before_trailing(text, start, value_end)
            value = text[start:end]
            if stated_password(value) or (  # "I changed my password to Zebra-Stripe-3"
                (stated_label(value) or joined_with_a_number(value))
                and value_ends_clause(text, value_end, end)
            ):
                yield start, end


# "the password was changed from Old!Pass1 to New!Pass2": both values, found from "from" (a
# literal searched for at C speed) with the password's name and the verb just before it
_FROM_TO = lazy_compile(
    r"from[ \t]+[\"'`]?(?P<old>[^\s\"'`,;]{4,64}+)[\"'`]?[ \t]+to[ \t]+"
    r"[\"'`]?(?P<new>[^\s\"'`,;]{4,64}+)"
)
_CHANGE_VERB = r"(?:changed|rotated|reset|updated|switched)"
_ITS_NAME = r"(?<![a-z])(?:pass(?:word|wd|phrase)?|pwd|pw)(?![a-z])"
# the name, then the verb ("the password was changed from"), or the verb, then the name ("I
# rotated the db password from")
_CHANGED_BEFORE = lazy_compile(
    rf"(?:{_ITS_NAME}[^.\n]{{0,40}}?{_CHANGE_VERB}|{_CHANGE_VERB}[^.\n]{{0,40}}?"
    rf"{_ITS_NAME})[ \t]+\Z"
)
_CHANGED_REACH = 64


def _changed_from(text: str, lowered: str) -> Iterator[Span]:
    """A password changed from one value to another: both, when they look chosen."""
    at = lowered.find("from ")
    while at >= 0:
        before = lowered[max(0, at - _CHANGED_REACH) : at]
        if ("pass" in before or "pw" in before) and _CHANGED_BEFORE.search(before) is not None:
            match = _FROM_TO.match(lowered, at)
            if match is not None:
                for group in ("old", "new"):
                    start = match.start(group)
                    end = end_before_trailing(text, start, match.end(group))
                    if stated_password(text[start:end]):
                        yield start, end
        at = lowered.find("from ", at + 5)


_LABEL_SEPARATORS = lazy_compile(r"[-_.]")
_VERSION = lazy_compile(r"v?\d+(?:\.\d+)+", re.IGNORECASE)  # "v1.2.3-Beta" is a release


def stated_label(value: str) -> bool:
    """A password shaped as a label, that a verb gives ("the password is Dresden_1945", "is
    blue-Sky-9"): parts joined by - _ or ., with capitals, small letters and a digit, the
    last part no describing word ("Base64-encoded"). Given with a colon, such a value names
    a secret elsewhere (`password: tls-cert-2024`), and is left alone."""
    parts = _LABEL_SEPARATORS.split(value)
    last = parts[-1].lower()
    return (
        len(parts) >= 2
        and any(char.isupper() for char in value)
        and any(char.islower() for char in value)
        and any(char.isdigit() for char in value)
        and not (last.isalpha() and last.endswith(DESCRIBING_ENDS))
        and _VERSION.match(value) is None
        and not is_placeholder(value)
        and not is_reference(value)
    )


# Words of a lower-case value joined by hyphens that name an algorithm, an encoding, a size, a
# duration or a place in a cloud, not a passphrase ("aes-256-gcm", "valid-for-90-days",
# "min-length-12", "us-east-1").
_NOT_PASSPHRASE_PARTS = frozenset(
    (
        "aes", "des", "rsa", "dsa", "sha", "md", "gcm", "cbc", "ctr", "ecb", "cfb", "ofb", "utf",
        "tls", "ssl", "hmac", "pbkdf", "scrypt", "bcrypt", "argon", "chacha", "poly", "ecdsa",
        "curve", "base", "hex", "int", "uint", "bit", "bits", "byte", "bytes", "char", "chars",
        "characters", "digits", "letters", "long", "min", "max", "length", "day", "days",
        "hour", "hours", "week", "weeks", "month", "months", "year", "years", "nist", "rfc",
        "iso", "cert", "creds", "secret", "secrets", "vault", "kv", "key", "keys", "pass",
        "password", "token", "user", "db", "app", "api", "prod", "dev", "test", "staging", "v",
        # a cloud's region, an image's tag, a cluster's parts ("us-east-1", "node-18-alpine")
        "us", "eu", "ap", "east", "west", "north", "south", "central", "node", "alpine", "slim",
        "kube", "system", "replica", "read", "only", "bucket", "region", "zone", "cluster", "pod",
        "image", "latest", "stable", "release", "build", "version",
    )
)  # fmt: skip
_HYPHEN_JOINED = lazy_compile(r"[a-z]{2,12}(?:-(?:[a-z]{2,12}|[0-9]{1,4}))+\Z")


def joined_with_a_number(value: str) -> bool:
    """A passphrase of lower-case words joined by hyphens with a number part, not first, that
    a verb gives ("the password is blue-sky-42"): three parts or more, two of them words, none
    a function word or one of an algorithm's, an encoding's, a size's or a duration's."""
    words = _hyphen_joined_words(value)
    return (
        words is not None
        and len(words) < value.count("-") + 1  # a number part
        and not any(
            part in _NOT_PASSPHRASE_PARTS or part in PROSE_OR_CODE_WORDS or part in DESCRIPTIVE
            for part in words
        )
        and not any(part.endswith(("ed", "ing")) for part in words)
    )


def _hyphen_joined_words(value: str) -> list[str] | None:
    """The words of lower-case words and numbers joined by hyphens, three parts or more, two
    of them words; None for any other value."""
    if _HYPHEN_JOINED.match(value) is None:
        return None
    parts = value.split("-")
    words = [part for part in parts if part.isalpha()]
    return words if len(parts) >= 3 and len(words) >= 2 else None


# What a passphrase's words may be, that a password's may not: its own kind's and a key's
_PASSPHRASE_OWN_PARTS = frozenset(("pass", "key", "keys", "secret", "user", "app", "db", "v"))


def _joined_phrase(value: str) -> bool:
    """A passphrase a verb gives after "passphrase": lower-case words joined by hyphens, three
    parts or more, two of them words, with or without a number ("the passphrase is
    otter-kayak-moss", "the deploy key passphrase is ssh-pass-2024"); none a function word,
    one of an algorithm's, an encoding's, a size's or a duration's (not "aes-256-gcm",
    "valid-for-90-days"), a participle ("key-file-based", "ssh-agent-cached")."""
    words = _hyphen_joined_words(value)
    return words is not None and not any(
        (part in _NOT_PASSPHRASE_PARTS and part not in _PASSPHRASE_OWN_PARTS)
        or part in PROSE_OR_CODE_WORDS
        or part in DESCRIPTIVE
        or part in _SENTENCE_WORDS
        or part.endswith(("ed", "ing", "ly"))
        for part in words
    )


# a word of time between the name and its verb ("the password now is Zebra-Stripe-3")
_WHEN_WORDS = frozenset(("now", "currently", "still"))


def _owned(words: str) -> bool:
    """No words between the password's name and its verb but an owner's ("for the router"),
    or one word of time ("now")."""
    between = words.split()
    return (
        not between
        or between[0] in _OWNER_WORDS
        or (len(between) == 1 and between[0] in _WHEN_WORDS)
    )


# A passphrase a sentence gives: three to eight lower-case words ("my password is correct horse
# battery staple", "the wifi password is purple monkey dishwasher"), or two in quotes ("the
# password is 'open sesame'").
_PASSPHRASE = lazy_compile(
    r"[a-z]{3,24}+(?:[ \t]+[a-z]{3,24}+){1,7}+(?:[ \t]+[0-9]{1,8}+)?(?![^\W\d_])"
)  # a number may end it: "correct horse battery staple 99"
# Words of sentences that say what a password is like or where it is, besides the function words
# (`PROSE_OR_CODE_WORDS`): "the password is too short", "the password is sent in clear text".
_SENTENCE_WORDS = frozenset(
    (
        "too", "very", "so", "also", "still", "only", "just", "now", "then", "quite", "really",
        "pretty", "rather", "already", "always", "never", "often", "here", "there", "like",
        "what", "which", "who", "whom", "whose", "where", "when", "why", "how", "yet", "because",
        "since", "while", "though", "although", "unless", "whether", "either", "neither", "both",
        "more", "most", "less", "least", "much", "many", "few", "other", "another", "such", "own",
        "out", "off", "over", "under", "again", "once", "him", "them", "mine", "yours", "ours",
        "theirs", "get", "got", "make", "made", "put", "send", "sent", "read", "write", "change",
        "reset", "enter", "type", "contain", "contains", "include", "includes", "match",
        "matches", "expire", "expires", "work", "works", "need", "needs", "take", "takes", "keep",
        "keeps", "goes", "come", "comes", "let", "say", "says", "know", "show", "shown", "plus",
        "case", "sensitive", "text", "plain", "clear", "clean", "characters", "chars", "digits",
        "letters", "long", "less", "enough", "least", "default", "empty", "blank", "valid",
        "wrong", "ignored", "never", "hash", "hashes", "salt", "file", "string", "value",
        "field", "user", "users", "account", "server", "system", "database", "config",
        "environment", "variable", "login", "password", "passwords", "secret", "token", "key",
    )
)  # fmt: skip


def _stated_passphrase(text: str, start: int) -> int:
    """Where the passphrase a sentence gives at `start` ends, or 0 if none is: three words or
    more in lower case (two in quotes), to the end of the clause, none of them a function
    word, a word of such sentences or a participle or adverb (stored, hashed, randomly), and
    at most one describing word ("correct horse battery staple", not "short and weak")."""
    phrase = _PASSPHRASE.match(text, start)
    if phrase is None:
        return 0
    end = phrase.end()
    closing = text[end : end + 1]
    quoted = closing != "" and closing in "\"'`" and text[start - 1 : start] == closing
    if len(phrase.group().split()) < 3 - quoted:
        return 0
    after = end + quoted
    mark = text[after : after + 1]
    # in quotes, the words are set apart: the sentence may go on ('"autumn leaves fall" with
    # the spaces')
    if not quoted and not value_ends_clause(
        text, after + (mark != "" and mark in CLAUSE_ENDS), after
    ):
        return 0
    describing = 0
    for word in phrase.group().split():
        if (
            word in PROSE_OR_CODE_WORDS
            or word in _SENTENCE_WORDS
            or word.endswith(("ed", "ing", "ly"))
        ):
            return 0
        describing += word in DESCRIPTIVE or word.endswith(DESCRIBING_ENDS)
    return end if describing <= 1 else 0


# A quoted passphrase with a number among its words: "the pass phrase is 'blue whale jumps over
# 7 fences'": four to ten words, one or more of them a number, three or more words that no
# sentence about a password uses ("'in the vault since 2021'" is no passphrase).
_QUOTED_PHRASE = lazy_compile(r"[a-z]{2,24}+(?:[ \t](?:[a-z]{1,24}+|[0-9]{1,8}+)){3,9}+")


def _quoted_passphrase(text: str, start: int) -> int:
    """Where the quoted passphrase at `start` ends (before its closing quote), or 0."""
    quote = text[start - 1 : start]
    if start == 0 or quote not in _QUOTES:
        return 0
    phrase = _QUOTED_PHRASE.match(text, start)
    if phrase is None or text[phrase.end() : phrase.end() + 1] != quote:
        return 0
    words = phrase.group().split()
    plain = [
        word
        for word in words
        if word.isalpha() and word not in PROSE_OR_CODE_WORDS and word not in _SENTENCE_WORDS
    ]
    has_number = any(word.isdigit() for word in words)
    return phrase.end() if has_number and len(plain) >= 3 else 0


def _said_plainly(match: re.Match[str], lowered: str) -> bool:
    """The statement gives the password and nothing else: "password is: X", "wifi password: X"."""
    if match.group("said") is not None:
        return True
    op = match.group("op")
    return (
        op is not None
        and op.strip() == ":"
        and not match.group("words")
        and _prose_label(lowered, match.start())
    )


def _prose_label(lowered: str, keyword: int) -> bool:
    """A word of prose right before the password's name, on the same line ("wifi password")."""
    label = _PROSE_LABEL.search(lowered, max(0, keyword - 32), keyword)
    return label is not None and label.group(1) not in _NOT_PROSE
