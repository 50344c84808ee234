"""Secret detection and redaction for text that may be stored or sent.

Pure module: no I/O. Every rule is a literal-anchored regex (or a small scanner) so a
scan is linear in the input; token rules are skipped outright when their trigger literal
is absent from the text's long unbroken runs, so the common no-secret path is one pass to
find those runs plus a few substring searches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

__all__ = ["SecretMatch", "contains_secret", "find_secrets", "redact"]


@dataclass(frozen=True, slots=True)
class SecretMatch:
    rule: str
    start: int
    end: int


Span = tuple[int, int]
# A finder gets the original text and its ASCII-lowered twin (same length) and yields spans.
Finder = Callable[[str, str], Iterator[Span]]

_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _lowered(text: str) -> str:
    lowered = text.lower()
    if len(lowered) != len(text):  # a few code points lower to two; keep offsets aligned
        lowered = text.translate(_ASCII_LOWER)
    return lowered


def _every_match(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The leftmost match at every start, so a rejected match cannot hide one inside it."""
    position = 0
    while (match := pattern.search(text, position)) is not None:
        yield match
        position = match.start() + 1


def _starts_word(text: str, start: int) -> bool:
    return start == 0 or text[start - 1] not in _ALNUM


def _ends_word(text: str, end: int) -> bool:
    return end == len(text) or text[end] not in _ALNUM


def shannon_entropy(value: str) -> float:
    """Bits per character of `value`'s own character distribution."""
    length = len(value)
    if length == 0:
        return 0.0
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / length * math.log2(n / length) for n in counts.values())


def _character_classes(value: str) -> int:
    lower = upper = digit = other = 0
    for char in value:
        if "a" <= char <= "z":
            lower = 1
        elif "A" <= char <= "Z":
            upper = 1
        elif "0" <= char <= "9":
            digit = 1
        else:
            other = 1
    return lower + upper + digit + other


# ---------------------------------------------------------------- token formats
# Each entry: rule name, trigger literals (any must occur in the text), pattern, and
# whether the match must sit on word boundaries. Patterns start with a literal so the
# regex engine can skip ahead, and use single greedy character classes (no nesting).
_TOKEN_RULES: tuple[tuple[str, tuple[str, ...], str, bool], ...] = (
    (
        "aws_access_key_id",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        r"A(?:KIA|SIA|BIA|CCA)[A-Z2-7]{16}+",
        True,
    ),
    ("gcp_api_key", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", True),
    (
        "azure_storage_key",
        ("AccountKey=", "SharedAccessKey="),
        r"(?:Account|SharedAccess)Key=([A-Za-z0-9+/]{40,100}={0,2})",
        False,
    ),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"gh[pousr]_[A-Za-z0-9]{36,251}+(?![A-Za-z0-9_])",
        True,
    ),
    ("github_token", ("github_pat_",), r"github_pat_[A-Za-z0-9_]{50,255}", True),
    (
        "gitlab_token",
        ("glpat-", "gldt-", "glrt-", "glptt-"),
        r"gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_\-]{20,64}+(?![A-Za-z0-9_\-])",
        True,
    ),
    (
        "bitbucket_token",
        ("ATBB", "ATCTT", "ATATT"),
        r"AT(?:BB|CTT|ATT)[A-Za-z0-9_=.\-]{28,255}+(?![A-Za-z0-9_=.\-])",
        True,
    ),
    ("slack_token", ("xox",), r"xox[abeoprs]-[0-9A-Za-z\-]{10,250}+(?![0-9A-Za-z\-])", True),
    ("slack_token", ("xapp-",), r"xapp-[0-9]-[0-9A-Za-z\-]{20,250}+(?![0-9A-Za-z\-])", True),
    (
        "slack_webhook",
        ("hooks.slack.com/",),
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,200}",
        False,
    ),
    (
        "discord_webhook",
        ("/api/webhooks/",),
        r"/api/webhooks/([0-9]{15,21}/[A-Za-z0-9_\-]{60,80})(?![A-Za-z0-9_\-])",
        False,
    ),
    (
        "anthropic_api_key",
        ("sk-ant-",),
        r"sk-ant-[a-z0-9]{2,12}-[A-Za-z0-9_\-]{40,200}+(?![A-Za-z0-9_\-])",
        True,
    ),
    (
        "openai_api_key",
        ("sk-",),
        r"sk-(?<![A-Za-z0-9_\-]sk-)(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]{32,200}+(?![A-Za-z0-9_\-])",
        True,
    ),
    (
        "stripe_secret_key",
        ("sk_live_", "sk_test_"),
        r"sk_(?:live|test)_[A-Za-z0-9]{16,99}+(?![A-Za-z0-9_])",
        True,
    ),
    (
        "stripe_secret_key",
        ("rk_live_", "rk_test_"),
        r"rk_(?:live|test)_[A-Za-z0-9]{16,99}+(?![A-Za-z0-9_])",
        True,
    ),
    ("stripe_secret_key", ("whsec_",), r"whsec_[A-Za-z0-9+/]{32,100}+(?![A-Za-z0-9_])", True),
    ("twilio_api_key", ("SK",), r"SK[0-9a-fA-F]{32}", True),
    ("twilio_account_sid", ("AC",), r"AC[0-9a-f]{32}", True),
    ("sendgrid_api_key", ("SG.",), r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", True),
    ("mailgun_api_key", ("key-",), r"key-[0-9a-f]{32}", True),
    ("npm_token", ("npm_",), r"npm_[A-Za-z0-9]{36}", True),
    ("pypi_token", ("pypi-AgE",), r"pypi-AgE[A-Za-z0-9_\-]{50,400}+(?![A-Za-z0-9_\-])", True),
    ("huggingface_token", ("hf_",), r"hf_[A-Za-z0-9]{34,40}", True),
    (
        "shopify_token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        True,
    ),
    (
        "square_token",
        ("sq0atp-", "sq0csp-"),
        r"sq0(?:atp-[0-9A-Za-z_\-]{22}|csp-[0-9A-Za-z_\-]{43})",
        True,
    ),
    ("square_token", ("EAAA",), r"EAAA[A-Za-z0-9_\-+]{60,1024}+(?![A-Za-z0-9_\-+])", True),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), r"do[opr]_v1_[a-f0-9]{64}", True),
    ("heroku_api_key", ("HRKU-",), r"HRKU-[A-Za-z0-9_\-]{60,70}+(?![A-Za-z0-9_\-])", True),
    ("doppler_token", ("dp.",), r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}", True),
    (
        "jwt",
        ("eyJ",),
        r"eyJ[A-Za-z0-9_\-]{10,8192}+\.[A-Za-z0-9_\-]{10,8192}+\.[A-Za-z0-9_\-]{16,8192}+",
        True,
    ),
)


# Token alphabets with - or _ can also spell ordinary names, so these must not read as words.
_WORDY_RULES = frozenset(
    {
        "openai_api_key",
        "anthropic_api_key",
        "slack_token",
        "gitlab_token",
        "bitbucket_token",
        "pypi_token",
        "heroku_api_key",
        "square_token",
        "jwt",
    }
)


def _token_finder(name: str, triggers: tuple[str, ...], pattern: str, bounded: bool) -> Finder:
    # The start boundary (no letter, digit, - or _ before) is checked right after the first
    # literal, which keeps the fast prefix search and stops rescans inside runs like xoxb-xoxb-.
    if bounded:
        if not pattern[0].isalnum():
            raise ValueError(f"bounded token pattern must start with a literal: {pattern}")
        first = pattern[0]
        pattern = f"{first}(?<![A-Za-z0-9_\\-]{first}){pattern[1:]}"
    compiled = re.compile(pattern)
    wordy = name in _WORDY_RULES
    group = 1 if compiled.groups else 0  # a group marks the secret inside its context

    def find(text: str, lowered: str) -> Iterator[Span]:
        for match in _every_match(compiled, text):
            start, end = match.span(group)
            if bounded and not (_starts_word(text, start) and _ends_word(text, end)):
                continue
            if wordy and _WORD_LIKE.match(text, start, end):
                continue  # kebab-case names such as sk-some-long-flag-name
            yield start, end

    return find


# ----------------------------------------------------------- private key blocks
_KEY_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?)-----")
# A cut-off block (no END line) still loses its base64 body: lines of key material.
_KEY_BODY = re.compile(r"(?:(?:\\[nr]|[ \t\r\n])+[A-Za-z0-9+/=]{16,})*")


def _find_private_keys(text: str, lowered: str) -> Iterator[Span]:
    if "PRIVATE KEY" not in text:
        return
    position = 0
    unterminated: set[str] = set()  # labels with no END after some point never get one later
    while (begin := _KEY_BEGIN.search(text, position)) is not None:
        end_marker = f"-----END {begin.group(1)}-----"
        end_at = -1 if end_marker in unterminated else text.find(end_marker, begin.end())
        if end_at < 0:
            unterminated.add(end_marker)
        if end_at >= 0:
            stop = end_at + len(end_marker)
        else:
            body = _KEY_BODY.match(text, begin.end())
            stop = body.end() if body is not None else begin.end()
        yield begin.start(), stop
        position = stop


# ----------------------------------------------------- credentials inside URLs
_URL_USERINFO = re.compile(r"://([^\s/?#@:\[\]\"'<>]{0,256}):([^\s/?#@\[\]\"'<>]{1,256})@")
_SCHEME_TAIL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,31}\Z")


def _find_url_credentials(text: str, lowered: str) -> Iterator[Span]:
    if "://" not in text:
        return
    for match in _every_match(_URL_USERINFO, text):
        if _SCHEME_TAIL.search(text, max(0, match.start() - 32), match.start()) is None:
            continue
        password = match.group(2)
        if not _is_placeholder(password):
            yield match.span(2)


# ------------------------------------------------- key = value style assignments
# Identifiers whose last part names a credential; plurals and longer words never end here.
_ASSIGNMENT_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("password", "password"),
    ("passwd", "passwd"),
    ("passphrase", "passphrase"),
    ("pwd", "pwd"),
    ("secret", "secret"),
    ("token", "token"),
    ("key", "key"),
    ("credential", "credentials?"),
)
# "key" alone is too common (sort_key, cache key); only these qualifiers make it a credential.
_KEY_QUALIFIER = re.compile(
    r"(?:api|access|secret|private|signing|encryption|master|auth|client|account|app|license)"
    r"[_\-. ]?\Z"
)
_ASSIGNMENT_TAIL = (
    r"[\"']?[ \t]{0,8}(?:=>|:=|==?|:)[ \t]{0,8}"
    r"(?:\"([^\"\n]{1,256}+)\"|'([^'\n]{1,256}+)'|([^\s\"'`,;&=(){}\[\]<>]{1,256}+=*))"
)
_AWS_SECRET = re.compile(
    r"secret_?access_?key[\"']?[ \t]{0,8}(?:=>|:=|=|:)[ \t]{0,8}[\"']?"
    r"([a-z0-9/+]{40})(?![a-z0-9/+=])"
)
_PLACEHOLDER_WORDS = (
    "your",
    "example",
    "changeme",
    "change_me",
    "placeholder",
    "redacted",
    "dummy",
    "xxxx",
    "****",
    "....",
    "todo",
    "fixme",
    "replace",
    "insert",
    "sample",
    "secret",
    "password",
    "token",
    "null",
    "none",
    "undefined",
    "<",
    ">",
    "{{",
    "}}",
    "${",
    "%(",
)
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::|->)[A-Za-z_][A-Za-z0-9_]*)+\Z")
_PROJECT_ID = re.compile(r"(?:mem|job|cand|apr)_[0-9a-f]{32}\Z")
# Names and labels (tls-cert-2024, GITHUB_TOKEN_2, v1.2.3): every part is one kind of thing.
# atomic and possessive, so alternatives are ordered longest form first
_LABEL_PART = r"(?>[a-zA-Z]{1,3}+[0-9]{1,4}+|[A-Z][a-z]++|[a-z]++|[A-Z]++|[0-9]++)"
_WORD_LIKE = re.compile(rf"{_LABEL_PART}(?:[\-_.+]{_LABEL_PART})*\Z")


def _is_placeholder(value: str) -> bool:
    lowered = value.lower()
    if value[0] in "$<{%*[(`" or len(set(value)) <= 2:
        return True
    return any(word in lowered for word in _PLACEHOLDER_WORDS)


def _case_changes(value: str) -> int:
    changes = 0
    previous_upper: bool | None = None
    for char in value:
        if char.isalpha():
            upper = char.isupper()
            if previous_upper is not None and upper != previous_upper:
                changes += 1
            previous_upper = upper
    return changes


def looks_random(value: str) -> bool:
    """True when an assigned value looks like generated key material, not a word or code."""
    length = len(value)
    if length < 8 or _is_placeholder(value) or "://" in value:
        return False
    if _DOTTED_NAME.match(value) or _PROJECT_ID.match(value) or _WORD_LIKE.match(value):
        return False
    if value.startswith(("~/", "./", "../")) or (value[0] == "/" and value.count("/") >= 2):
        return False
    classes = _character_classes(value)
    entropy = shannon_entropy(value)
    if value.replace("_", "").replace("-", "").isalpha():
        # letters only: random strings flip case often, identifiers and words rarely do
        return length >= 16 and entropy >= 3.5 and _case_changes(value) * 4 >= length
    if length < 12:
        return classes >= 3 and entropy >= 2.75
    return classes >= 2 and entropy >= 3.0


def _assignment_finder(keyword: str, pattern: str) -> Finder:
    compiled = re.compile(pattern + _ASSIGNMENT_TAIL)

    def find(text: str, lowered: str) -> Iterator[Span]:
        if keyword not in lowered:
            return
        for match in _every_match(compiled, lowered):
            if keyword == "key" and not _KEY_QUALIFIER.search(
                lowered, max(0, match.start() - 16), match.start()
            ):
                continue
            group = 1 if match.start(1) >= 0 else 2 if match.start(2) >= 0 else 3
            start, end = match.span(group)
            if group == 3 and end < len(text) and text[end] in "([":
                continue  # a call or subscript such as os.environ["X"]
            if looks_random(text[start:end]):
                yield start, end

    return find


def _find_aws_secret(text: str, lowered: str) -> Iterator[Span]:
    if "access" not in lowered:
        return
    for match in _every_match(_AWS_SECRET, lowered):
        start, end = match.span(1)
        if looks_random(text[start:end]):
            yield start, end


# --------------------------------------------------------- authorization headers
_BEARER = re.compile(r"bearer[ \t]{1,8}([a-z0-9\-._~+/]{16,1024}=*)(?![a-z0-9\-._~+/=])")
_BASIC = re.compile(r"authorization\"?[ \t]*[:=][ \t]*\"?basic[ \t]{1,8}([a-z0-9+/]{8,1024}={0,2})")


def _find_authorization(text: str, lowered: str) -> Iterator[Span]:
    if "bearer" in lowered:
        for match in _every_match(_BEARER, lowered):
            start, end = match.span(1)
            value = text[start:end]
            if looks_random(value) or value.count(".") == 2:
                yield start, end
    if "basic" in lowered:
        for match in _every_match(_BASIC, lowered):
            start, end = match.span(1)
            value = text[start:end]
            if not _WORD_LIKE.match(value) and _character_classes(value) >= 2:
                yield start, end


# ------------------------------------------------------------- special formats
_TELEGRAM = re.compile(r":AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])")
_DISCORD_BOT = re.compile(r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}")


def _find_telegram(text: str, lowered: str) -> Iterator[Span]:
    if ":AA" not in text:
        return
    for match in _every_match(_TELEGRAM, text):
        start = match.start()
        digits = start
        while digits > 0 and start - digits < 11 and text[digits - 1].isdigit():
            digits -= 1
        if 8 <= start - digits <= 10 and _starts_word(text, digits):
            yield digits, match.end()


def _find_discord_bot(text: str, lowered: str) -> Iterator[Span]:
    for match in _every_match(_DISCORD_BOT, text):
        start, end = match.span()
        if (
            _starts_word(text, start)
            and _ends_word(text, end)
            and _encodes_snowflake(match.group())
        ):
            yield start, end


# Characters base64 can produce at positions 0..3 of a group encoding three ASCII digits.
_BASE64_OF_DIGITS = ("MNO", "DTjz", "AEIMQUYcgk", "wxyz012345")


def _encodes_snowflake(token: str) -> bool:
    # the first part is the bot's numeric id in base64, so it decodes to ASCII digits
    return all(token[index] in _BASE64_OF_DIGITS[index % 4] for index in range(16))


# ------------------------------------------------------------------ rule table
# Every token format is one unbroken run of these characters, at least this long (the shortest,
# a Slack token, is 15). Prose has few such runs, so the token rules' trigger literals are
# looked for in the runs alone instead of in the whole text: one pass, not fifty scans.
_RUN_CHARACTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.+/="
_MIN_RUN = 15
# Maps run characters to "a" and every other byte to " " (UTF-8 sequences are all >= 0x80).
_RUN_MARKS = bytes(0x61 if byte in _RUN_CHARACTERS else 0x20 for byte in range(256))


def _long_runs(text: str) -> str:
    """Runs of at least _MIN_RUN run characters, space-joined.

    Works on bytes: translating to marks and finding "a" * 15 runs at C speed, where a regex
    pass over prose costs about 14 µs per KiB (half of all redaction)."""
    data = text.encode("utf-8", "surrogatepass")
    marks = data.translate(_RUN_MARKS)
    start = marks.find(b"a" * _MIN_RUN)
    runs: list[bytes] = []
    while start >= 0:  # the first window found after a gap starts its run
        end = marks.find(b" ", start + _MIN_RUN)
        end = len(marks) if end < 0 else end
        runs.append(data[start:end])
        start = marks.find(b"a" * _MIN_RUN, end)
    return b" ".join(runs).decode("ascii")

Gate = Callable[[str], bool]  # given the text's long runs (space-joined), may the rule match?


def _any_trigger(triggers: tuple[str, ...]) -> Gate:
    if len(triggers) == 1:  # most rules; a generator per rule per call costs more than the test
        (only,) = triggers
        return lambda runs: only in runs
    return lambda runs: any(trigger in runs for trigger in triggers)


def _always(runs: str) -> bool:
    return True


_ASSIGNMENT_FINDERS = tuple(
    _assignment_finder(keyword, pattern) for keyword, pattern in _ASSIGNMENT_KEYWORDS
)
_RULES: tuple[tuple[str, Finder, Gate], ...] = (
    ("private_key_block", _find_private_keys, _always),
    *(
        (name, _token_finder(name, triggers, pattern, bounded), _any_trigger(triggers))
        for name, triggers, pattern, bounded in _TOKEN_RULES
    ),
    ("telegram_bot_token", _find_telegram, _always),
    ("discord_bot_token", _find_discord_bot, lambda runs: _DISCORD_BOT.search(runs) is not None),
    ("url_credentials", _find_url_credentials, _always),
    ("aws_secret_access_key", _find_aws_secret, _always),
    ("authorization_header", _find_authorization, _always),
    *(("credential_assignment", finder, _always) for finder in _ASSIGNMENT_FINDERS),
)
_PRIORITY = {name: index for index, (name, _, _) in enumerate(_RULES)}

RULE_NAMES: tuple[str, ...] = tuple(dict.fromkeys(name for name, _, _ in _RULES))


# Every other gate is false without a long run (a test checks it): most text needs no gate.
_ALWAYS_OPEN = tuple((name, finder) for name, finder, gate in _RULES if gate is _always)
# Rules whose every match holds an assignment operator (`=` or `:`): eight full scans of the
# text for their keywords are skipped, for the price of two one-character ones, without one.
_NEED_AN_OPERATOR = frozenset((_find_aws_secret, *_ASSIGNMENT_FINDERS))
_ALWAYS_OPEN_WITHOUT_OPERATOR = tuple(
    (name, finder) for name, finder in _ALWAYS_OPEN if finder not in _NEED_AN_OPERATOR
)


def _open_rules(text: str) -> Iterable[tuple[str, Finder]]:
    """The rules that can match somewhere in `text`."""
    runs = _long_runs(text)
    has_operator = "=" in text or ":" in text
    if not runs:
        return _ALWAYS_OPEN if has_operator else _ALWAYS_OPEN_WITHOUT_OPERATOR
    return [
        (name, finder)
        for name, finder, gate in _RULES
        if gate(runs) and (has_operator or finder not in _NEED_AN_OPERATOR)
    ]


def find_secrets(text: str) -> list[SecretMatch]:
    """Every secret in `text`, sorted by start; overlapping detections are merged."""
    if not text:
        return []
    lowered = _lowered(text)
    candidates = [
        (start, -end, _PRIORITY[name], name)
        for name, finder in _open_rules(text)
        for start, end in finder(text, lowered)
    ]
    if not candidates:
        return []
    candidates.sort()
    merged: list[SecretMatch] = []
    rule, start, end = candidates[0][3], candidates[0][0], -candidates[0][1]
    for next_start, negative_end, _, next_rule in candidates[1:]:
        if next_start < end:  # overlap: redact the union so no fragment survives
            end = max(end, -negative_end)
            continue
        merged.append(SecretMatch(rule, start, end))
        rule, start, end = next_rule, next_start, -negative_end
    merged.append(SecretMatch(rule, start, end))
    return merged


def contains_secret(text: str) -> bool:
    if not text:
        return False
    lowered = _lowered(text)
    return any(next(finder(text, lowered), None) is not None for _, finder in _open_rules(text))


def _replace(text: str, matches: list[SecretMatch]) -> str:
    pieces: list[str] = []
    position = 0
    for match in matches:
        pieces.append(text[position : match.start])
        pieces.append(f"[REDACTED:{match.rule}]")
        position = match.end
    pieces.append(text[position:])
    return "".join(pieces)


# Passes over text that already held secrets; in practice the second finds nothing.
_MAX_REDACTION_PASSES = 16


def redact(text: str) -> str:
    """`text` with each secret replaced by ``[REDACTED:<rule>]``.

    A replacement changes its neighbours' surroundings (a token glued to a key block gains
    a word boundary), so text that held secrets is scanned again until nothing matches.
    """
    matches = find_secrets(text)
    passes = 0
    while matches and passes < _MAX_REDACTION_PASSES:
        text = _replace(text, matches)
        matches = find_secrets(text)
        passes += 1
    return text
