"""Secret formats with a shape of their own: provider tokens, private key blocks, URL userinfo,
Authorization headers, bot tokens. Each finder gets the text and its ASCII-lowered twin (same
length) and yields the spans of what it finds.

Pure module: no I/O. Every rule is a literal-anchored regex (or a small scanner), so a scan is
linear in the input.
"""

from __future__ import annotations

import base64
import bisect
import re
from collections.abc import Callable, Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_tokens import WORDY_RULES
from orcad.secret_values import WORD_LIKE, character_classes, is_placeholder, looks_random

Span = tuple[int, int]
# A finder gets the original text and its ASCII-lowered twin (same length) and yields spans.
Finder = Callable[[str, str], Iterator[Span]]


_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def every_match(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The leftmost match at every start, so a rejected match cannot hide one inside it."""
    position = 0
    search = pattern.search  # once: a pattern compiled at its first use is a stand-in
    while (match := search(text, position)) is not None:
        yield match
        position = match.start() + 1


def _starts_word(text: str, start: int) -> bool:
    return start == 0 or text[start - 1] not in _ALNUM


def _ends_word(text: str, end: int) -> bool:
    return end == len(text) or text[end] not in _ALNUM


# ---------------------------------------------------------------- token formats
def token_pattern(pattern: str, bounded: bool) -> str:
    """A token rule's pattern as searched: a bounded one's start boundary (no letter, digit, -
    or _ before) is checked right after the first literal, which keeps the fast prefix search
    and stops rescans inside runs like xoxb-xoxb-."""
    if not bounded:
        return pattern
    if not pattern[0].isalnum():
        raise ValueError(f"bounded token pattern must start with a literal: {pattern}")
    first = pattern[0]
    return f"{first}(?<![A-Za-z0-9_\\-]{first}){pattern[1:]}"


def token_finder(name: str, triggers: tuple[str, ...], pattern: str, bounded: bool) -> Finder:
    compiled = lazy_compile(token_pattern(pattern, bounded))
    wordy = name in WORDY_RULES
    refuted = _REFUTED.get(name)

    def find(text: str, lowered: str) -> Iterator[Span]:
        group = 1 if compiled.groups else 0  # a group marks the secret inside its context
        for match in every_match(compiled, text):
            start, end = match.span(group)
            if bounded and not (_starts_word(text, start) and _ends_word(text, end)):
                continue
            if wordy and WORD_LIKE.match(text, start, end):
                continue  # kebab-case names such as sk-some-long-flag-name
            if is_example_token(text, start, end):
                continue
            if refuted is not None and refuted(text[start:end]):
                continue
            yield start, end

    return find


# cloudflared's tunnel token is base64 of {"a":"<account tag: 32 hex digits>","t":...,"s":...}.
# Base64 of any compact JSON whose first key is "a" (a test's btoa(JSON.stringify({a: "b"})), a
# pagination cursor) starts the same way, with readable text where the account tag would be.
_TUNNEL_ACCOUNT_AT = 6  # bytes of {"a":"
_TUNNEL_HEAD_CHARS = 56  # 42 bytes decoded: the tag and its closing quote
_READABLE = lazy_compile(rb"[\x20-\x7e]+")
_ACCOUNT_TAG = lazy_compile(rb'[0-9a-f]{32}"')


def _other_json_in_base64(value: str) -> bool:
    head = value[:_TUNNEL_HEAD_CHARS]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4])
    except ValueError:  # binascii.Error
        return False
    account = decoded[_TUNNEL_ACCOUNT_AT : _TUNNEL_ACCOUNT_AT + 33]
    return _READABLE.fullmatch(account) is not None and _ACCOUNT_TAG.fullmatch(account) is None


# Formats whose head other text shares, and the check that tells such a match is that text.
_REFUTED: dict[str, Callable[[str], bool]] = {"cloudflare_tunnel_token": _other_json_in_base64}


def is_example_token(text: str, start: int, end: int) -> bool:
    """Documentation's stand-ins: lin_api_XXXXXXXX..., AKIAIOSFODNN7EXAMPLE."""
    tail = text[max(start, end - 16) : end]
    return len(set(tail)) < 5 or "EXAMPLE" in text[start:end].upper()


# ----------------------------------------------------------- private key blocks
_KEY_BEGIN = lazy_compile(r"-----BEGIN ((?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?)-----")
# A cut-off block (no END line) still loses its base64 body: lines of key material, and the
# shorter last line of a key (the rest of its base64) when it stands alone on the next line.
# Line breaks may be escaped, as a JSON string carries them (\n, \r\n), or escaped twice, as
# a JSON string inside another carries them (\\n: a kubectl last-applied-configuration).
# Its header lines go too when the blank line that ends them and key material follow them: an
# encrypted PEM key's Proc-Type and DEK-Info, an armored PGP key's Version or Comment.
# A character of base64; "/" may be escaped, as PHP's json_encode and others write it.
_BASE64 = r"(?:[A-Za-z0-9+/=]|\\/)"
_KEY_BREAK = r"[ \t\r]*+(?:\\++r)?+(?:\n|\\++n)"
_KEY_BODY = lazy_compile(
    r"(?:(?:(?:(?:\\++[nr]|[ \t\r\n])++[A-Z][A-Za-z0-9-]{1,40}+: [^\n\r\\]*+)+"
    rf"(?={_KEY_BREAK}{_KEY_BREAK}))?"
    rf"(?:(?:\\++[nr]|[ \t\r\n])+{_BASE64}{{16,}})+"
    rf"(?:(?:(?:\\++r)?+\\++n|\\++r|[ \t\r]*\n)[ \t]*{_BASE64}{{1,15}}+"
    r"(?=[ \t\r]*(?:\n|\\++[nr]|\\*+[\"'`]|$)))?)?"
)


# The END line of a block whose start was not pasted (the last screenful of a terminal): the
# lines of key material right above it go with it.
_KEY_END = lazy_compile(r"-----END (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?-----")
# Those lines read upwards (matched in the text reversed, from the END line's start): a line
# break, a key's shorter last line (only with key material above it), then lines of key
# material, the top one at the start of the text or of a line or after a quote. A line break is
# a real one or escaped, as a JSON string carries it (\n, \r\n), or escaped twice (\\n); a
# character of base64 that comes after a backslash is part of an escape, not of a line.
_REVERSED_BREAK = r"(?:\n|n\\++(?:r\\++)?)"
_REVERSED_BASE64 = r"(?:/\\|[A-Za-z0-9+/=](?!\\))"
_KEY_LINES_ABOVE = lazy_compile(
    rf"{_REVERSED_BREAK}(?:[ \t\r]*+{_REVERSED_BASE64}{{1,15}}+[ \t]*+{_REVERSED_BREAK})?"
    rf"(?:([ \t\r]*+{_REVERSED_BASE64}{{16,}}+[ \t]*+)(?:{_REVERSED_BREAK}|\Z|(?=[\"'`])))+"
)


# The labels keys are written with (OpenSSL, OpenSSH, GnuPG, PuTTYgen's export, TPM and SM2
# tools): one of them alone is a key's marker. A line with another label before PRIVATE KEY
# ("-----BEGIN HELLO WORLD PRIVATE KEY-----" in prose) is one only with key material after it.
_KEY_LABELS = frozenset(
    f"{kind}PRIVATE KEY"
    for kind in (
        "", "RSA ", "EC ", "DSA ", "ECDSA ", "OPENSSH ", "ENCRYPTED ", "ANY ", "ED25519 ",
        "ED448 ", "X25519 ", "X448 ", "DH ", "SM2 ", "TSS2 ",
    )
) | {"PGP PRIVATE KEY BLOCK"}  # fmt: skip
# Key material: a run of base64 with a digit, "+" or "/" in it, or ending in padding. A run of
# letters alone is a long word (a name in prose, an identifier), never a full line of a key: a
# 64-character line of random base64 has none of those 10 in a million times. A key's shorter
# last line often has none by chance, but often ends in "=", which no word does. The letter of
# an escaped line break (the n of \n in a JSON string) is not part of the run after it.
_KEY_MATERIAL = lazy_compile(rf"(?<!\\){_BASE64}{{16,}}+")
_NOT_ONLY_LETTERS = lazy_compile(r"[0-9+/]|=$")
_RUN_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\\")


class _KeyMaterial:
    """Whether key material lies between two places in one text. Each question is answered by
    looking only there (a marker's own lines, most often a few dozen characters), until what was
    looked at adds up to a quarter of the text: then the whole text's key material is found at
    once and the rest are answered from that. A text that names a marker in prose is not read
    whole for it, and none is read more than about once and a quarter, however many markers
    it has and however far from their END lines."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._left = len(text) // 4 + 4096  # what may still be looked at a question at a time
        self._starts: list[int] | None = None
        self._ends: list[int] = []

    def within(self, start: int, stop: int) -> bool:
        """Whether a run of key material lies wholly between `start` and `stop`."""
        if self._starts is None:
            found = self._look(start, stop)
            if found is not None:
                return found
            self._starts, self._ends = self._find_all()
        index = bisect.bisect_left(self._starts, start)
        return index < len(self._starts) and self._ends[index] <= stop

    def _look(self, start: int, stop: int) -> bool | None:
        """The answer from the text between `start` and `stop` alone; None when that is more
        than may still be looked at, or when a run may go on past `stop`."""
        text = self._text
        # from the start of the characters runs are made of, as the whole text is read from
        begin = start
        while begin > 0 and text[begin - 1] in _RUN_CHARACTERS and start - begin < self._left:
            begin -= 1
        if begin > 0 and text[begin - 1] in _RUN_CHARACTERS:
            return None
        until = min(stop, start + max(self._left - (start - begin), 0))
        for run in _KEY_MATERIAL.finditer(text, begin, until):
            if run.end() == until and until < len(text) and text[until] in _RUN_CHARACTERS:
                break  # a run that may go on past where we looked
            if run.start() >= start and _NOT_ONLY_LETTERS.search(run.group()) is not None:
                self._left -= run.end() - begin
                return True
        else:
            self._left -= until - begin
            return False if until == stop else None
        self._left -= until - begin
        return None

    def _find_all(self) -> tuple[list[int], list[int]]:
        starts, ends = [], []
        for run in _KEY_MATERIAL.finditer(self._text):
            if _NOT_ONLY_LETTERS.search(run.group()) is not None:
                starts.append(run.start())
                ends.append(run.end())
        return starts, ends


# An END line of any label: its label is all up to the next "-", so one a place
_ANY_KEY_END = lazy_compile(r"-----END ((?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY(?: BLOCK)?)-----")


class _EndLines:
    """Each label's END lines in one text, found in one reading of it however many BEGIN lines
    ask (BEGIN lines named in prose, each of another label, before END lines far below)."""

    def __init__(self, text: str) -> None:
        self._at: dict[str, list[int]] | None = None
        self._text = text

    def after(self, label: str, start: int) -> int:
        """Where the first END line of `label` at or after `start` begins; -1 if none does."""
        if self._at is None:
            self._at = {}
            position = 0
            # (searched from the next character: an END line's dashes may begin another)
            while (end := _ANY_KEY_END.search(self._text, position)) is not None:
                self._at.setdefault(end.group(1), []).append(end.start())
                position = end.start() + 1
        places = self._at.get(label, [])
        index = bisect.bisect_left(places, start)
        return places[index] if index < len(places) else -1


def find_private_keys(text: str, lowered: str) -> Iterator[Span]:
    """Key blocks, whole: from a BEGIN line to its END line when key material is between them,
    else each marker with the key material right below the BEGIN line or right above the END
    line (a block cut off, or pasted from its middle). Text around a marker that is not key
    material, or between two markers named in prose, is kept."""
    if "PRIVATE KEY" not in text:
        return
    material = _KeyMaterial(text)
    position = 0
    end_lines = _EndLines(text)
    blocks: list[Span] = []
    while (begin := _KEY_BEGIN.search(text, position)) is not None:
        end_marker = f"-----END {begin.group(1)}-----"
        end_at = end_lines.after(begin.group(1), begin.end())
        if end_at >= 0 and material.within(begin.end(), end_at):
            stop = end_at + len(end_marker)
        else:
            body = _KEY_BODY.match(text, begin.end())
            stop = begin.end()
            if body is not None and material.within(begin.end(), body.end()):
                stop = body.end()
        position = stop
        if stop == begin.end() and begin.group(1) not in _KEY_LABELS:
            continue
        blocks.append((begin.start(), stop))
        yield begin.start(), stop
    if "-----END " not in text:
        return
    block = 0  # the first block that does not end before the END line (both in order)
    floor = 0  # the end of the END line before: no key material above it
    for end in _KEY_END.finditer(text):
        while block < len(blocks) and blocks[block][1] <= end.start():
            block += 1
        if block < len(blocks) and blocks[block][0] <= end.start():
            floor = end.end()
            continue  # the END line of a block found from its BEGIN line
        line = end.start()
        while line > floor and text[line - 1] in " \t":  # (an indented block: YAML, a heredoc)
            line -= 1
        start = _key_lines_above(text, line, floor)
        floor = end.end()
        # the marker alone, named in prose or code, holds no key, nor does a long word above it
        if start < line and material.within(start, line):
            yield start, end.end()


def _key_lines_above(text: str, end_line: int, floor: int) -> int:
    """Where the lines of key material right above an END line (its start at `end_line`)
    start, looking no further up than `floor`."""
    if end_line <= floor or not text.endswith(("\n", "\\n"), floor, end_line):
        return end_line  # no line break right above: the marker is not on a line of its own
    found = _KEY_LINES_ABOVE.match(text[floor:end_line][::-1])  # each character read once
    return end_line if found is None else end_line - found.end(1)


# A whole PEM block encoded once more in base64 (kubeconfig client-key-data, a Kubernetes
# secret's tls.key, a CI variable): "-----BEGIN" encodes to LS0tLS1CRUdJTi, and the decoded
# head says whether the block is a private key (a certificate is not a secret).
ENCODED_PEM_TRIGGER = "LS0tLS1CRUdJTi"
_ENCODED_PEM = lazy_compile(ENCODED_PEM_TRIGGER + r"[A-Za-z0-9+/]{16,}+={0,2}")
_ENCODED_PEM_HEAD_CHARS = 80  # 60 bytes decoded: the longest BEGIN line fits


def find_encoded_private_keys(text: str, lowered: str) -> Iterator[Span]:
    for match in _ENCODED_PEM.finditer(text):
        head = match.group()[:_ENCODED_PEM_HEAD_CHARS]
        try:
            decoded = base64.b64decode(head[: len(head) // 4 * 4])
        except ValueError:  # binascii.Error: padding where it cannot be
            continue
        begin = decoded.split(b"\n", 1)[0]
        if _KEY_BEGIN.match(begin.decode("ascii", "replace")) is not None:
            yield match.span()


# A JWT encoded once more in base64 (a Kubernetes Secret's data, a CI variable): "eyJ" encodes
# to ZXlK, and what it decodes to must be a JWT's three parts (base64 of any other JSON's
# base64 is left).
ENCODED_JWT_TRIGGER = "ZXlK"
_ENCODED_JWT = lazy_compile(ENCODED_JWT_TRIGGER + r"[A-Za-z0-9+/]{60,12000}+={0,2}")
_DECODED_JWT = lazy_compile(
    rb"eyJ[A-Za-z0-9_\-]{10,}+\.[A-Za-z0-9_\-]{10,}+\.[A-Za-z0-9_\-]{16,}+\s?"
)


def find_encoded_jwts(text: str, lowered: str) -> Iterator[Span]:
    for match in _ENCODED_JWT.finditer(text):
        if not (_starts_word(text, match.start()) and _ends_word(text, match.end())):
            continue
        value = match.group().rstrip("=")
        try:
            decoded = base64.b64decode(value + "=" * (-len(value) % 4))
        except ValueError:  # binascii.Error: a length no encoding has
            continue
        if _DECODED_JWT.fullmatch(decoded) is not None:
            yield match.span()


# ----------------------------------------------------- credentials inside URLs
_URL_USERINFO = lazy_compile(
    r"://([^\s/?#@:\[\]\"'<>]{0,256}):"
    # the password runs to the authority's last @: it is pasted with @ # ? / unescaped (but
    # holds no other URL's ://, which keeps a text of scheme markers linear)
    r"((?:[^\s\"'<>:]|:(?!//)){1,256}?)@(?![^\s/?#@\"'<>]*+@)"
)
# A user that is an email address, its "@" left unescaped as mail providers' SMTP settings are
# pasted (`smtp://postmaster@mg.example.com:pw@smtp.mailgun.org:587`): the address's domain,
# then a password holding no "/" (`ssh://git@host.example.com:2222/org/repo.git@v1` is a port
# and a path)
_URL_EMAIL_USERINFO = lazy_compile(
    r"://[^\s/?#@:\[\]\"'<>]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){1,8}:"
    r"([^\s\"'<>:/?#]{1,256}?)@(?![^\s/?#@\"'<>]*+@)"
)
_SCHEME_TAIL = lazy_compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,31}\Z")


def find_url_credentials(text: str, lowered: str) -> Iterator[Span]:
    if "://" not in text:
        return
    for match in every_match(_URL_USERINFO, text):
        if _SCHEME_TAIL.search(text, max(0, match.start() - 32), match.start()) is None:
            continue
        password = match.group(2)
        if not is_placeholder(password):
            yield match.span(2)
    if "@" not in text:
        return
    for match in every_match(_URL_EMAIL_USERINFO, text):
        if _SCHEME_TAIL.search(text, max(0, match.start() - 32), match.start()) is None:
            continue
        password = match.group(1)
        if not password.isdigit() and not is_placeholder(password):
            yield match.span(1)


# A user and password before a host with no scheme, as ssh and scp take a user before one:
# "root:toor1234@192.168.1.20", "ssh admin:Ad!m9Lq3@10.0.0.1". Found from each "@": the word
# before it holds the pair, the host after it is an IPv4 address or a dotted name.
_BARE_USER = lazy_compile(r"[a-z0-9_][a-z0-9_.\-]{0,63}", re.IGNORECASE)
_BARE_USER_MAX = 64
# the pair starts a word, or a setting's value (`MYSQL_DSN=app:pw@tcp(db:3306)/orders`)
_BEFORE_BARE_USER = (" ", "\t", "\n", '"', "'", "`", "(", "=")
_BARE_PASSWORD = lazy_compile(r"[^\s\"'`<>()@/:]{4,128}")
_BARE_PASSWORD_MAX = 128
_BARE_HOST = lazy_compile(
    r"(?:\d{1,3}(?:\.\d{1,3}){3}|[a-z0-9](?:[a-z0-9\-]{0,62})(?:\.[a-z0-9\-]{1,63})+)"
    r"(?![a-z0-9_\-@])",
    re.IGNORECASE,
)
# "icon:logo2@3x.png" names an image at a scale, not a host
_FILE_EXTENSIONS = frozenset(
    ("png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "pdf", "txt", "json", "js", "ts")
)


def _bare_user(text: str, colon: int) -> bool:
    """A user name ends at `colon`, from the start of its word."""
    reach = max(0, colon - _BARE_USER_MAX - 1)
    start = 1 + max(text.rfind(mark, reach, colon) for mark in _BEFORE_BARE_USER)
    if start == 0 and reach > 0:
        return False  # no word starts within reach
    return _BARE_USER.fullmatch(text, start, colon) is not None


def _bare_password(value: str) -> bool:
    """A password there mixes letters with digits or symbols and holds no path nor another
    pair ("sip:alice@voip.example.com", "pkg:npm/lodash@4.17.21" are addresses)."""
    return (
        not value.isalpha()
        and any(char.isalpha() for char in value)
        and not any(char in value for char in ":@/")
        and not is_placeholder(value)
    )


# The address of a Go MySQL driver's DSN, `user:password@tcp(host:3306)/db` (or a socket's,
# `@unix(/run/mysqld/mysqld.sock)`): the protocol names the pair, so any password is one there
_DSN_ADDRESS = lazy_compile(r"(?:tcp6?|unix)\(", re.IGNORECASE)


def find_bare_userinfo(text: str, lowered: str) -> Iterator[Span]:
    """The password of `user:password@host` written without a scheme, or of a Go MySQL DSN.
    Each "@" costs a look back for the colon, in C, before anything else is read."""
    if "@" not in text or ":" not in text:
        return
    at = text.find("@")
    while at >= 0:
        colon = text.rfind(":", max(0, at - _BARE_PASSWORD_MAX - 1), at)
        if (
            colon > 0
            and _BARE_PASSWORD.fullmatch(text, colon + 1, at) is not None
            and _bare_user(text, colon)
        ):
            password = text[colon + 1 : at]
            if _DSN_ADDRESS.match(text, at + 1) is not None:
                if not is_placeholder(password):
                    yield colon + 1, at
            elif (
                (host := _BARE_HOST.match(text, at + 1)) is not None
                and host.group().rpartition(".")[2].lower() not in _FILE_EXTENSIONS
                and _bare_password(password)
            ):
                yield colon + 1, at
        at = text.find("@", at + 1)


# --------------------------------------------------------- authorization headers
# (also a setting named so, YAML's `bearer: <token>` or `BEARER=<token>`)
_BEARER = lazy_compile(
    r"bearer(?:[ \t]{1,8}|[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?)"
    r"([a-z0-9\-._~+/]{16,1024}=*)(?![a-z0-9\-._~+/=])"
)
_BASIC = lazy_compile(
    r"authorization\"?[ \t]*[:=][ \t]*\"?basic[ \t]{1,8}([a-z0-9+/]{8,1024}={0,2})"
)
# Any other scheme (Token, ApiKey, sso-key, ...): the credential after it, when it looks generated
_OTHER_SCHEME = lazy_compile(
    r"authorization\"?[ \t]*[:=][ \t]*\"?(?!bearer|basic)[a-z][a-z0-9\-]{1,24}[ \t]{1,8}"
    r"([a-z0-9\-._~+/:]{16,1024}=*)(?![a-z0-9\-._~+/:=])"
)


def _may_be_jwt(named: str, value: str) -> bool:
    """Whether a value of two dots after `bearer` (`named`, what came before it) may be a JSON
    Web Token: any is after the scheme's space, but one a setting's `:` or `=` gives must start
    as a JWT's JSON header does (`{"`, or `{` and a line break, in base64url): code's `bearer =
    self.config.token` is a path of attributes."""
    if ":" not in named and "=" not in named:
        return True
    return value.startswith(("eyJ", "ewo"))


def find_authorization(text: str, lowered: str) -> Iterator[Span]:
    if "bearer" in lowered:
        for match in every_match(_BEARER, lowered):
            start, end = match.span(1)
            value = text[start:end]
            if looks_random(value) or (
                value.count(".") == 2 and _may_be_jwt(lowered[match.start() : start], value)
            ):
                yield start, end
    if "basic" in lowered:
        for match in every_match(_BASIC, lowered):
            start, end = match.span(1)
            value = text[start:end]
            if not WORD_LIKE.match(value) and character_classes(value) >= 2:
                yield start, end
    if "authorization" in lowered:
        for match in every_match(_OTHER_SCHEME, lowered):
            start, end = match.span(1)
            if looks_random(text[start:end].replace(":", "")):
                yield start, end
        yield from _digest_responses(lowered)


# HTTP Digest authentication's response: a hash of the password, the nonce and the request,
# all but the password in the header beside it, so a weak password is cracked back from it
_DIGEST = lazy_compile(r"authorization\"?[ \t]*[:=][ \t]*\"?digest[ \t]")
_DIGEST_RESPONSE = lazy_compile(r"response=\"?([0-9a-f]{32,64})(?![0-9a-z])")
_DIGEST_REACH = 600  # characters of a Digest header's other fields before its response


def _digest_responses(lowered: str) -> Iterator[Span]:
    at = lowered.find("authorization")
    while at >= 0:
        if _DIGEST.match(lowered, at) is not None:
            line_end = lowered.find("\n", at, at + _DIGEST_REACH)
            response = lowered.find(
                "response=", at, at + _DIGEST_REACH if line_end < 0 else line_end
            )
            found = _DIGEST_RESPONSE.match(lowered, response) if response >= 0 else None
            if found is not None:
                yield found.span(1)
        at = lowered.find("authorization", at + 13)


# ------------------------------------------------------------------ session cookies
# A session cookie logs whoever holds it in: in a Cookie or Set-Cookie header, or curl's -b and
# --cookie ("Copy as cURL" carries them all), a pair whose name names a session or a login and
# whose value looks generated.
_COOKIE_HEADER = lazy_compile(r"cookie[\"']?[ \t]*:")  # also Set-Cookie
_CURL_COOKIE_FLAG = lazy_compile(r"-(?<![a-z0-9_\-]-)(?:b|-cookie)[ \t=]")  # -b is curl's
_COOKIE_LINE_MAX = 8192
# A header's pairs one after another (a browser's Cookie header passes 8 KiB with tracking
# cookies): its window runs on to their end, however far, but never past its line. (A
# quote may open the value, as curl's -b and JSON's "cookie": "..." have it.)
_COOKIE_RUN = lazy_compile(r"[ \t]*+[\"']?(?:[ \t]*+[^;\s=\"',]{1,64}+=[^;\s\"',]{0,4096}+;?)*+")
_COOKIE_PAIR = lazy_compile(r"(?:^|[;\s\"'])([a-z0-9_.\-]{1,64})=([^;\s\"',]{1,4096})")
_SESSION_NAME = lazy_compile(r"sess|sid|auth|token|jwt|login|remember|identity")


def find_session_cookies(text: str, lowered: str) -> Iterator[Span]:
    """Each header's pairs up to its line's end (at most 8 KiB on), every pair scanned once.

    Headers one after another on a line have windows that overlap: scanning each window whole
    took quadratic time. A pair's match does not depend on where the scan starts (a pair starts
    at a separator and holds none), only on where it stops: so the pairs of all the windows
    are found once, and a pair a window's end cuts short is also taken cut, as that window has it.
    """
    windows = _cookie_windows(lowered)
    index = 0
    while index < len(windows):
        group_end = index + 1  # windows that overlap, scanned as one stretch
        while group_end < len(windows) and windows[group_end][0] < windows[group_end - 1][1]:
            group_end += 1
        yield from _cookie_pairs(text, lowered, windows[index:group_end])
        index = group_end


def _cookie_windows(lowered: str) -> list[tuple[int, int]]:
    """Where each cookie header's pairs may be: from its end to its line's end, at most
    _COOKIE_LINE_MAX on unless its pairs run on further. Sorted by start; their ends then
    never decrease."""
    patterns = [_COOKIE_HEADER] if "cookie" in lowered else []
    if "curl" in lowered:
        patterns.append(_CURL_COOKIE_FLAG)
    starts = sorted({match.end() for pattern in patterns for match in pattern.finditer(lowered)})
    windows: list[tuple[int, int]] = []
    newline = -1
    pairs_end = 0  # where the run of pairs last read ends: a later header inside it shares it
    last = len(starts) - 1
    for index, start in enumerate(starts):
        if newline < start:  # the next line end, looked for once per line
            newline = lowered.find("\n", start)
            newline = len(lowered) + _COOKIE_LINE_MAX if newline < 0 else newline
        end = min(newline, start + _COOKIE_LINE_MAX)
        # cut short, and no later header starts before its end (one that does reads the same
        # pairs on from there): do its pairs run on?
        if end < newline and pairs_end <= start and (index == last or starts[index + 1] >= end):
            pairs_end = _COOKIE_RUN.match(lowered, start).end()  # type: ignore[union-attr]
            end = max(end, min(pairs_end, newline))
        elif pairs_end > end:
            end = min(pairs_end, newline)
        windows.append((start, end))
    return windows


def _cookie_pairs(text: str, lowered: str, windows: list[tuple[int, int]]) -> Iterator[Span]:
    """The session values among the pairs of `windows`, which overlap one another."""
    first = last = 0  # the windows holding the current pair's separator
    for pair in _COOKIE_PAIR.finditer(lowered, windows[0][0], windows[-1][1]):
        while windows[first][1] <= pair.start():
            first += 1
        while last + 1 < len(windows) and windows[last + 1][0] <= pair.start():
            last += 1
        if _SESSION_NAME.search(pair[1]) is None:
            continue
        value_start, value_end = pair.span(2)
        for end in dict.fromkeys(_cut_ends(windows, first, last, value_start, value_end)):
            value = text[value_start:end].replace("%3D", "=").replace("%3d", "=")
            if looks_random(value.rstrip("=")):
                yield value_start, end


def _cut_ends(
    windows: list[tuple[int, int]], first: int, last: int, value_start: int, value_end: int
) -> Iterator[int]:
    """Where the windows `first` to `last` end a value: inside it (cut short), or after it."""
    index = first
    while index <= last and windows[index][1] < value_end:
        if windows[index][1] > value_start:
            yield windows[index][1]
        index += 1
    if windows[last][1] >= value_end:
        yield value_end


# ---------------------------------------------------- registry auth (user:password)
# ~/.docker/config.json's "auth" and .npmrc's _auth hold base64 of "user:password".
# (starts with its literal, so the regex engine skips ahead; the name's start is checked after)
_AUTH_VALUE = lazy_compile(
    r"auth[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?([a-z0-9+/]{8,1024}+={0,2})(?![a-z0-9+/=])"
)
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def find_registry_auth(text: str, lowered: str) -> Iterator[Span]:
    if "auth" not in lowered:
        return
    for match in _AUTH_VALUE.finditer(lowered):
        name_start = match.start()
        if name_start > 0 and lowered[name_start - 1] == "_":  # _auth
            name_start -= 1
        if name_start > 0 and lowered[name_start - 1] in _NAME_CHARACTERS:
            continue  # oauth, basic_auth
        start, end = match.span(1)
        if _is_user_and_password(text[start:end]):
            yield start, end


def _is_user_and_password(value: str) -> bool:
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode()
    except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
        return False
    user, colon, password = decoded.partition(":")
    return bool(user and colon and password) and decoded.isprintable() and " " not in decoded


# ------------------------------------------------------------- special formats
_TELEGRAM = lazy_compile(r":AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])")
DISCORD_BOT = lazy_compile(r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}")


def find_telegram(text: str, lowered: str) -> Iterator[Span]:
    if ":AA" not in text:
        return
    for match in every_match(_TELEGRAM, text):
        start = match.start()
        digits = start
        while digits > 0 and start - digits < 11 and text[digits - 1].isdigit():
            digits -= 1
        if 8 <= start - digits <= 10 and (
            _starts_word(text, digits) or text[max(0, digits - 4) : digits] == "/bot"
        ):
            # the Bot API's URLs glue the token to "bot": `https://api.telegram.org/bot<token>/`
            yield digits, match.end()


def find_discord_bot(text: str, lowered: str) -> Iterator[Span]:
    for match in every_match(DISCORD_BOT, text):
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


def anchored_finder(literal: str, head: int, pattern: str) -> Finder:
    compiled = lazy_compile(pattern)

    def find(text: str, lowered: str) -> Iterator[Span]:
        at = text.find(literal, head)
        while at >= 0:
            match = compiled.match(text, at - head)
            if match is not None and not is_example_token(text, *match.span()):
                yield match.span()
            at = text.find(literal, at + 1)

    return find


# Azure AD client secrets hold a `~`, which no long run does, so a token gate cannot open them.
_AZURE_CLIENT_SECRET = lazy_compile(
    r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"
)
_PUTTY_KEY = lazy_compile(
    r"PuTTY-User-Key-File-[23]:[^\n]{0,200}\n(?:[^\n]{0,200}\n){0,80}?Private-MAC: ?[0-9a-f]{40,64}"
)


def find_azure_client_secret(text: str, lowered: str) -> Iterator[Span]:
    # one memchr pass for "~" (rare in prose and code) beats a two-character substring search
    tilde = text.find("~", 4)
    while tilde >= 0:
        if text[tilde - 1] == "Q":
            match = _AZURE_CLIENT_SECRET.match(text, tilde - 5)
            if match is not None:
                yield match.span()
        tilde = text.find("~", tilde + 1)


# An Azure shared access signature: the HMAC-SHA256 (base64, one = of padding, often
# percent-encoded) that makes a storage URL a bearer credential. Its %2B and %2F break the long
# runs a token gate looks in, so it is found from its parameter name.
_AZURE_SAS_SIGNATURE = lazy_compile(
    r"sig=(?<=[?&;]sig=)([A-Za-z0-9+/%]{40,120}(?:%3[Dd]|=))(?![A-Za-z0-9+/%=])"
)


def find_azure_sas_signature(text: str, lowered: str) -> Iterator[Span]:
    if "sig=" not in text:
        return
    for match in _AZURE_SAS_SIGNATURE.finditer(text):
        yield match.span(1)


# A Bitcoin private key in Wallet Import Format, named so ("WIF: 5H…", "wif = L1…"): base58
# of 51 characters after a 5 (or a testnet 9), or 52 after K, L (or c) for a compressed key.
# Alone it is base58 like an address or a hash, so only its name tells it.
_WIF = lazy_compile(
    r"(?i:wif)(?![A-Za-z0-9])[\"']?[ \t]{0,8}(?:[:=]|is)?[ \t]{0,8}[\"'`]?"
    r"((?:[59][1-9A-HJ-NP-Za-km-z]{50}|[KLc][1-9A-HJ-NP-Za-km-z]{51})(?![A-Za-z0-9]))"
)


# the key alone, which is a long run: the rule is asked only of text that holds one
_WIF_RUN = lazy_compile(
    r"(?:[59][1-9A-HJ-NP-Za-km-z]{50}|[KLc][1-9A-HJ-NP-Za-km-z]{51})(?![A-Za-z0-9])"
)


def may_hold_wif(runs: str) -> bool:
    return _WIF_RUN.search(runs) is not None


def find_wif_keys(text: str, lowered: str) -> Iterator[Span]:
    at = lowered.find("wif")
    while at >= 0:
        if _starts_word(lowered, at) and (match := _WIF.match(text, at)) is not None:
            yield match.span(1)
        at = lowered.find("wif", at + 3)


# Twilio's auth token is 32 hex digits, like any digest: it is told by its place, the argument
# after an account SID, `Client('AC…', '<token>')` in Python, `twilio('AC…', '<token>')` in Node.
_TWILIO_PAIR = lazy_compile(
    r"(?<![A-Za-z0-9])AC[0-9a-f]{32}([\"'])[ \t]*,[ \t\r\n]{0,16}[\"']([0-9a-f]{32})[\"']"
)


def find_twilio_auth_tokens(text: str, lowered: str) -> Iterator[Span]:
    at = text.find("AC")
    while at >= 0:
        if (match := _TWILIO_PAIR.match(text, at)) is not None:
            yield match.span(2)
        at = text.find("AC", at + 2)


# Braintree's access token: `access_token$<environment>$<merchant id>$<32 hex>`. A `$` ends a
# long run, so no token gate can open it: one substring search for its head instead.
_BRAINTREE_HEAD = "access_token$"
_BRAINTREE = lazy_compile(
    r"access_token\$(?:production|sandbox|development|qa)\$[a-z0-9]{8,32}\$[a-f0-9]{32}(?![A-Za-z0-9])"
)


def find_braintree_tokens(text: str, lowered: str) -> Iterator[Span]:
    at = text.find(_BRAINTREE_HEAD)
    while at >= 0:
        match = _BRAINTREE.match(text, at)
        if match is not None and _starts_word(text, at):
            yield match.span()
        at = text.find(_BRAINTREE_HEAD, at + 1)


def find_putty_keys(text: str, lowered: str) -> Iterator[Span]:
    for match in _PUTTY_KEY.finditer(text):
        yield match.span()


# OpenShift's OAuth access tokens: sha256~ and 43 characters. The `~` ends a long run, so no
# token gate can open them: one substring search for the head instead.
_OPENSHIFT_HEAD = "sha256~"
_OPENSHIFT_TOKEN = lazy_compile(r"sha256~[A-Za-z0-9_\-]{43}(?![A-Za-z0-9_\-])")


def find_openshift_tokens(text: str, lowered: str) -> Iterator[Span]:
    at = text.find(_OPENSHIFT_HEAD)
    while at >= 0:
        match = _OPENSHIFT_TOKEN.match(text, at)
        if (
            match is not None
            and _starts_word(text, at)
            and not is_example_token(text, at, match.end())
        ):
            yield match.span()
        at = text.find(_OPENSHIFT_HEAD, at + 1)


# A Sentry DSN's key: https://<32 hex>@<host>/<project number>. It lets whoever holds it send
# events to the project (and, in DSNs from before 2019, a second key after a colon, found as a
# URL password). The key alone, between the scheme and the @.
_SENTRY_DSN = lazy_compile(
    r"://([a-f0-9]{32})@[a-z0-9](?:[a-z0-9\-]{0,62})(?:\.[a-z0-9\-]{1,63})*+(?::[0-9]{1,5})?"
    r"/(?:[a-z0-9_\-]{1,64}/)?[0-9]{1,20}(?![A-Za-z0-9_])"
)


def find_sentry_dsns(text: str, lowered: str) -> Iterator[Span]:
    if "://" not in text or "@" not in text:
        return
    for match in _SENTRY_DSN.finditer(lowered):
        if _SCHEME_TAIL.search(
            text, max(0, match.start() - 32), match.start()
        ) is not None and not is_example_token(text, *match.span(1)):
            yield match.span(1)


# A Google Cloud service account's key file names its private key by 40 hex digits,
# `"private_key_id": "8f3a…"`: pasted, it shows which key leaked and the lines around it are
# the key itself; a hex digest under any other name is a commit's or a file's
_KEY_FILE_ID = lazy_compile(
    r"private_key_id[\"']?[ \t]*[:=][ \t]*[\"']?([0-9a-f]{40})(?![A-Za-z0-9_])"
)


def find_key_file_ids(text: str, lowered: str) -> Iterator[Span]:
    if "private_key_id" not in lowered:
        return
    for match in _KEY_FILE_ID.finditer(lowered):
        if match.start() == 0 or not lowered[match.start() - 1].isalnum():
            yield match.span(1)


# A Salesforce session or access token: the org's id (00D and 12 or 15 characters), "!", and
# the session's part. The "!" ends a long run: found from "!AQ", with the org id before it.
_SALESFORCE_TOKEN = lazy_compile(r"00D[A-Za-z0-9]{12}(?:[A-Za-z0-9]{3})?!AQ[A-Za-z0-9_.]{60,400}+")


def find_salesforce_tokens(text: str, lowered: str) -> Iterator[Span]:
    at = text.find("!AQ", 15)
    while at >= 0:
        for head in (15, 18):
            start = at - head
            if start >= 0 and text.startswith("00D", start) and _starts_word(text, start):
                match = _SALESFORCE_TOKEN.match(text, start)
                if (
                    match is not None
                    and _ends_word(text, match.end())
                    and not is_example_token(text, start, match.end())
                ):
                    yield match.span()
                break
        at = text.find("!AQ", at + 1)
