"""A password jotted down after the word (or "passphrase") with a space alone: "wifi password
Xk9#mm2pq", "password Hunter2!", "wifi passphrase purple-otter-cascade-91".

Pure module: no I/O. The word "password" is followed by a word in much prose and code
("password reset", "password manager", "password SecretStr"), so the value must plainly be a
chosen one, holding a symbol or upper case, lower case and digits, and end its clause:
"password Argon2id hashing", "password v2 flow" and "the password Hunter2! is weak" are no
such note. Small letters with a number of two digits or more inside count too, ten
characters or more ("password xkcd936battery"; not "password pbkdf2sha256").
"""

from __future__ import annotations

from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_sentences import joined_with_a_number, stated_password
from orcad.secret_values import Span, end_before_trailing, value_ends_clause

_WORDS = ("password", "passphrase")  # each a literal searched for at C speed
_SPACED_VALUE = lazy_compile(
    r"pass(?:word|phrase)(?<![a-z0-9_\-.$@]password)"
    r"(?<![a-z0-9_\-.$@]passphrase)[ \t]+[\"'`]?(?P<value>[^\s\"'`()\[\]{}<>]{6,128}+)"
)
# "wifi passphrase purple-otter-cascade-91": after a network's name, lower-case words joined
# by hyphens with a number are the passphrase too (as a verb gives one: `secret_sentences`)
_NETWORK_BEFORE = lazy_compile(r"(?<![a-z0-9_\-.])(?:wi-?fi|wlan|wpa2?|ssid|network)[ \t]+\Z")
# the hashes and ciphers a password is said to be kept with ("password Argon2id")
HASH_SCHEMES = frozenset(
    ("argon2", "argon2i", "argon2d", "argon2id", "pbkdf2", "scrypt", "bcrypt", "yescrypt",
     "sha256", "sha512", "sha-256", "sha-512", "aes256", "aes-256", "md5", "ntlmv2")
)  # fmt: skip
# a symbol, or upper case, lower case and digits all three
_PLAINLY_CHOSEN = lazy_compile(r"[^A-Za-z0-9]|(?=[^A-Z]*[A-Z])(?=[^a-z]*[a-z])[^0-9]*[0-9]")


# "password xkcd936battery": small letters, a number of two digits or more, small letters, as
# a person hides digits inside words; not what describes a password or names a scheme
_DIGITS_INSIDE = lazy_compile(r"[a-z]{3,}[0-9]{2,}[a-z]{3,}[a-z0-9]*\Z")
_SCHEME_PARTS = (
    "char", "digit", "length", "min", "max", "bit", "byte", "day", "hour", "sha", "md5",
    "argon", "pbkdf", "crypt", "aes", "rsa", "utf", "base", "ntlm", "hmac", "des", "round",
)  # fmt: skip


def _digits_inside(value: str) -> bool:
    """Ten characters or more of small letters with a number of two digits or more inside."""
    return (
        len(value) >= 10
        and _DIGITS_INSIDE.match(value) is not None
        and not any(part in value for part in _SCHEME_PARTS)
    )


def find_spaced_passwords(text: str, lowered: str) -> Iterator[Span]:
    """A plainly chosen password after "password" or "passphrase" and a space, ending its
    clause (after a network's name, also words joined by hyphens with a number)."""
    for word in _WORDS:
        yield from _after_word(text, lowered, word)


def _after_word(text: str, lowered: str, word: str) -> Iterator[Span]:
    at = lowered.find(word)
    while at >= 0:
        match = _SPACED_VALUE.match(lowered, at)
        if match is not None:
            start, value_end = match.span("value")
            end = end_before_trailing(text, start, value_end)
            value = text[start:end]
            quoted = text[value_end : value_end + 1] in ('"', "'", "`")
            if value_ends_clause(text, value_end + quoted, end + quoted) and (
                (
                    _PLAINLY_CHOSEN.search(value) is not None
                    and stated_password(value)
                    and value.lower() not in HASH_SCHEMES
                )
                or (
                    joined_with_a_number(value)
                    and _NETWORK_BEFORE.search(lowered, max(0, at - 16), at) is not None
                )
                or _digits_inside(value)
            ):
                yield start, end
        at = lowered.find(word, at + len(word))
