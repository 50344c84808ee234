"""Generated values stated in English words for an API key, token or secret.

Pure module: no I/O. "the api key is 3f9a...", "the token is kT9v...": the value such a
sentence gives is a credential when it looks generated, as it must be after such a name in an
assignment; "Mistral key: UpZu...": a key named by a capitalized word (its vendor) when its
value has an API key's shape (letters and digits, both cases and a digit), or by a known
vendor's name in lower case ("mistral key: 7xYq..."); "the staging db
secret is Hunter2!xyz": a secret stated with a verb or a colon when it looks chosen as a
password (letters, a digit and a symbol inside it). Left alone: what a secret is like or where
("the secret is caching", "the secret is in vault"), a stored secret's name ("the secret is
`db-creds`"), a version, an address. Passwords stated in words are `secret_sentences`'.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import (
    STATED_VERB,
    Span,
    end_before_trailing,
    is_placeholder,
    is_reference,
    looks_random,
    value_ends_clause,
)

# "the api key is 3f9a...", "the token is kT9v...": a value a sentence gives for a key, token or
# secret is one when it looks generated, as it must be after such a name in an assignment; and
# "datadog api key 4f9c2e7b...", "token kT9v...": right after the name, no verb nor colon
# between, when it is longer (`adjacent`; no invisible character in it: a token cut by one is
# read by the rules of its format). One scan of the text per name.
_KEY_STATEMENT_TAIL = (
    r"(?![a-z0-9_\-])(?:"
    r"(?:[ \t]+[^\s.,;:!?=]{1,30}+){0,8}?"
    rf"(?:[ \t]*:|{STATED_VERB}[ \t]*:?)"
    r"[ \t]+[\"'`]?(?P<value>[^\s\"'`()\[\]{}<>]{16,256}+)"
    r"|[ \t]+[\"'`]?(?P<adjacent>[^\s\"'`()\[\]{}<>\u200b-\u200f\u2060-\u2064\ufeff]{12,256}+)"
    r")(?![(\[{<])"
)
# shorter ones, 10 characters or more stated (12 right after the name), when nothing but a
# generator writes them (`short_generated`): "the jupyter token is Hk2vL9xQ7mRz", "auth token
# W4tcNb8Yk1Hd"
SHORT_MIN = 10
SHORT_ADJACENT_MIN = 12
# one pattern per name: a literal prefix lets the engine skip ahead (an alternation does not);
# a secret's stated value may be as short as a password's (`_chosen_secret`)
_KEY_STATEMENTS = tuple(
    (name, lazy_compile(name + _KEY_STATEMENT_TAIL.replace("{16,", f"{{{shortest},", 1)))
    for name, shortest in (("token", SHORT_MIN), ("secret", 6), ("key", SHORT_MIN))
)
STATED_MIN = 16
# "the staging db secret is Hunter2!xyz": a secret someone chose, stated with a verb or a colon,
# is one when it looks like a password: letters, a digit and a symbol inside it (a final "!"
# may end the sentence: "the secret is Python3!"). A stored secret's name (`db-creds`), a
# version (`Node@18`), an address, an exponent (`x^2`) are not.
_SECRET_SYMBOLS = frozenset("!#$%*?@^~")  # not "&", which joins names: "Redis7&Lua"
# (nor a method, `Math#atan2`, nor a name at a host, `kv-v2@vault`)
_NOT_CHOSEN = lazy_compile(
    r"[#@^][0-9]|@[A-Za-z0-9\-]+\.[A-Za-z]|[!=]=|&|[A-Za-z0-9]#[a-z]|@[a-z]+\Z"
)
ADJACENT_MIN = 24
# "key" alone is too common (primary key, cache key): only these qualifiers make it a credential.
_KEY_QUALIFIER = lazy_compile(
    r"(?:api|access|secret|private|signing|encryption|master|auth|client|account|app|license|"
    r"subscription)"
    r"[_\-. ]?\Z"
)
# "Mistral key: UpZu...", "the Cohere key is Qm7R...": a key named by its vendor, a capitalized
# word right before it, is a credential when its value has an API key's shape: letters and
# digits alone, both cases and a digit (not a hash's hex, nor an identifier's words). The
# capitalized words that name a data structure's, a keyboard's or a public key are no vendor.
_VENDOR = lazy_compile(r"(?<![A-Za-z0-9_\-.])[A-Z][A-Za-z0-9]{1,23} \Z")
_VENDOR_LOOKBACK = 26
_NOT_VENDORS = frozenset(
    [
        "public",
        "primary",
        "foreign",
        "sort",
        "partition",
        "cache",
        "host",
        "ssh",
        "gpg",
        "pgp",
        "deploy",
        "object",
        "row",
        "hash",
        "composite",
        "unique",
        "index",
        "lookup",
        "map",
        "registry",
        "routing",
        "shard",
        "idempotency",
        "translation",
        "music",
        "musical",
        "song",
        "hot",
        "shortcut",
        "keyboard",
        "room",
        "door",
        "house",
        "car",
        "config",
        "dictionary",
        "json",
        "yaml",
        "the",
        "a",
        "an",
        "my",
        "our",
        "your",
        "this",
        "that",
        "which",
        "each",
        "new",
        "old",
        "example",
        "sample",
        "test",
        "dummy",
        "fake",
        "placeholder",
        "redis",
        "memcached",
        "s3",
        "bucket",
        "storage",
        "table",
        "column",
        "field",
        "item",
        "record",
        "entry",
        "react",
        "list",
        "group",
        "tag",
        "label",
        "sorting",
        "ordering",
        "grouping",
        "hmac",
        "jwks",
        "kms",
    ]
)
_VENDOR_VALUE = lazy_compile(r"[A-Za-z0-9]{20,128}")
# "mistral key: 7xYq…": typed in lower case, a vendor is told from a structure's key (`sort
# key: createdAtDesc2`) by its name: the API vendors whose keys have no prefix of their own
_LOWER_VENDOR = lazy_compile(r"(?<![a-z0-9_\-.])([a-z][a-z0-9]{1,23}) \Z")
_LOWER_CASE_VENDORS = frozenset(
    (
        "mistral", "cohere", "perplexity", "deepseek", "voyage", "jina", "fireworks",
        "ai21", "deepgram", "assemblyai", "elevenlabs", "gemini", "pinecone", "weaviate",
        "qdrant", "algolia", "mapbox", "datadog", "mailgun", "mailchimp", "mailjet", "twilio",
        "sendgrid", "postmark", "brevo", "cloudflare", "linode", "vultr", "hetzner", "heroku",
        "newrelic", "pagerduty", "opsgenie", "airtable", "asana", "trello", "figma",
        "serpapi", "tavily", "firecrawl", "browserless",
    )
)  # fmt: skip


def find_stated_keys(text: str, lowered: str) -> Iterator[Span]:
    """A generated value stated for an API key, token or secret in words."""
    for name, pattern in _KEY_STATEMENTS:
        if name not in lowered:
            continue
        for match in pattern.finditer(lowered):
            at = match.start()
            vendor = False
            if name == "key" and not _KEY_QUALIFIER.search(lowered, max(0, at - 16), at):
                vendor = _named_by_vendor(text, at)
                if not vendor:
                    continue
            group = "value" if match["value"] is not None else "adjacent"
            start, end = match.span(group)
            end = end_before_trailing(text, start, end)
            if vendor and not _vendor_value(text[start:end]):
                continue
            shortest = STATED_MIN if group == "value" else ADJACENT_MIN
            value = text[start:end]
            short = SHORT_MIN if group == "value" else SHORT_ADJACENT_MIN
            if (
                (end - start >= shortest and looks_random(value))
                or (end - start >= short and short_generated(value))
            ) or (
                name == "secret"
                and group == "value"
                and (_chosen_secret(value) or _generated_with_a_word(value))
                and _said_of_the_secret(lowered[at + len(name) : start])
                and value_ends_clause(text, _past_quote(text, match.end(group)), end)
            ):
                yield start, end


def short_generated(value: str) -> bool:
    """A short value only a generator writes: letters and digits alone, two capitals, two
    small letters and two digits or more, case changing at least four times, and not made of
    words (an identifier's, "OAuth2BearerToken", "ExpiresIn3600")."""
    if not value.isalnum() or not value.isascii():
        return False
    upper = sum(char.isupper() for char in value)
    lower = sum(char.islower() for char in value)
    digits = sum(char.isdigit() for char in value)
    changes = sum(
        1
        for before, after in itertools.pairwise(value)
        if before.isupper() != after.isupper() or before.isdigit() != after.isdigit()
    )
    return (
        upper >= 2
        and lower >= 2
        and digits >= 2
        and changes >= 6
        and sum(map(len, _IDENTIFIER_WORD.findall(value))) * 2 < len(value)
        and not is_placeholder(value)
    )


def _named_by_vendor(text: str, at: int) -> bool:
    """Whether the word before "key" at `at` is a capitalized one that may name a vendor, or a
    known vendor's name in lower case."""
    word = _VENDOR.search(text, max(0, at - _VENDOR_LOOKBACK), at)
    if word is not None:
        return word.group().strip().lower() not in _NOT_VENDORS
    word = _LOWER_VENDOR.search(text, max(0, at - _VENDOR_LOOKBACK), at)
    return word is not None and word.group(1) in _LOWER_CASE_VENDORS


# a word of an identifier: a capital or none, then three small letters or more
_IDENTIFIER_WORD = lazy_compile(r"[A-Z]?[a-z]{3,}")


def _vendor_value(value: str) -> bool:
    """An API key's shape: letters and digits in both cases with a digit, not made of words
    (half its characters or more in words is an identifier: the names of flags, messages and
    handlers, "enableCheckoutRedesign2024", "submitFormOnEnterPress2")."""
    return (
        _VENDOR_VALUE.fullmatch(value) is not None
        and not value.isupper()
        and not value.islower()
        and any(char.isdigit() for char in value)
        and sum(map(len, _IDENTIFIER_WORD.findall(value))) * 2 < len(value)
    )


# what may come between "secret" and its value: the verb or a colon, after an owner's words
# ("the secret for the webhook is"); other words make it a trick or a log line ("the secret to
# fast builds is", "the secret sauce is", "Secret rotation failed for 3 items:")
_OWNER_WORDS = frozenset(("for", "of", "on", "at", "in"))
_STATING = frozenset(
    (":", "is", "was", "are", "becomes", "became", "reads", "changed", "reset", "set", ",",
     "'s", "\u2019s")
)  # fmt: skip


def _said_of_the_secret(between: str) -> bool:
    words = between.replace(":", " : ").split()
    return not words or words[0] in _OWNER_WORDS or words[0] in _STATING


def _past_quote(text: str, end: int) -> int:
    """Where a value's clause may end: after its closing quote, if it has one."""
    return end + 1 if text[end : end + 1] in ("'", '"', "`") else end


# a generator's letters and digits joined to a word ("the radius shared secret is
# Zq8vR2mX_radius"): one part of 8 characters or more only a generator writes
_JOINERS = lazy_compile(r"[_\-.]")
_GENERATED_PART_MIN = 8


def _generated_with_a_word(value: str) -> bool:
    return _JOINERS.search(value) is not None and any(
        len(part) >= _GENERATED_PART_MIN and short_generated(part) for part in _JOINERS.split(value)
    )


def _chosen_secret(value: str) -> bool:
    """A secret stated in words that looks chosen as a password (see `_SECRET_SYMBOLS`)."""
    inner = value.rstrip("!?.")
    return (
        6 <= len(value) <= 64
        and value[0].isalnum()
        and any(char.isalpha() for char in inner)
        and any(char.isdigit() for char in inner)
        and not _SECRET_SYMBOLS.isdisjoint(inner)
        and _NOT_CHOSEN.search(value) is None
        and not is_placeholder(value)
        and not is_reference(value)
    )
