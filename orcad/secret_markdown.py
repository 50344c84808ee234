"""Markdown's marks, and full-width forms, looked through by the secret detector. Pure: no I/O.

Agents and people write settings in Markdown: `**Password**: `Xk9mm2pqLw77``, `- `DB_PASSWORD`:
X`, `__token__ = X`. A reader sees a password given there, yet no assignment rule matches a name
wrapped in emphasis or a value in backticks. Nor does one match a colon or a token typed in
full-width forms (U+FF1A for the colon, U+FF47 U+FF48 U+FF50 U+FF3F for `ghp_`), which an input
method writes and which read as the ASCII ones. The detector therefore also reads the text
without emphasis marks and backticks, with full-width forms as their ASCII letters, and maps
what it finds there back onto the text as given (as it does for characters no reader sees,
`secret_invisible`).
"""

from __future__ import annotations

from orcad.lazy_patterns import lazy_compile
from orcad.secret_invisible import VisibleText

# Emphasis and code marks: runs of `*` and backticks anywhere, and runs of `_` that open or
# close a word (`__token__`, `_password_`) but not those inside a name (DB_PASSWORD, a_b).
_MARKS = lazy_compile(r"[*`]+|(?<![0-9A-Za-z])_+(?=[^\s_])|(?<=[^\s_])_+(?![0-9A-Za-z])")
# full-width forms of ASCII (U+FF01 to U+FF5E) and the ideographic space: one character each
_FULL_WIDTH = lazy_compile("[\uff01-\uff5e\u3000]")
_AS_ASCII = {code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
# A line read again holds a word a credential is named by and a mark (a `_` doubled, or at
# a word's edge beside a letter, not Python's `_private`), or a full-width form. Most text holds
# marks (code's `*`), few lines both. The words are searched for one by one (`str.find` is
# many times faster than a regular expression of them all).
_CREDENTIAL_WORDS = (
    *("pass", "pwd", "secret", "token", "key", "credential", "mnemonic", "auth"),
    *("kennwort", "contrase", "senha", "parol"),
)
_WORDS_OUTSIDE_ASCII = (  # password in Russian, Chinese (both scripts), Japanese, Korean
    "\u043f\u0430\u0440\u043e\u043b\u044c",
    *("\u5bc6\u7801", "\u5bc6\u78bc", "\u30d1\u30b9\u30ef\u30fc\u30c9", "\ube44\ubc00\ubc88\ud638"),
)
# (the `_` first, what is either side of it checked after: the engine skips ahead to each `_`)
_EDGE_UNDERSCORE = lazy_compile(
    r"_(?:(?<![0-9A-Za-z_]_)(?=[A-Za-z])|(?<=[A-Za-z]_)(?![0-9A-Za-z_]))"
)
_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def marked_lines(text: str) -> VisibleText | None:
    """The lines of `text` that may name a credential in Markdown or in full-width forms, each
    read as `plain_text` reads it, joined by line breaks, with each character's place in
    `text` (a line break's is the place of the character before it); None when there is none
    (the usual case)."""
    ascii_only = text.isascii()
    wide = not ascii_only and _FULL_WIDTH.search(text) is not None
    if not wide and "*" not in text and "`" not in text and "_" not in text:
        return None  # no line can hold a mark nor a full-width form: none is read again
    lowered = text.lower()
    if len(lowered) != len(text):  # a few code points lower to two: keep the places
        lowered = text.translate(_ASCII_LOWER)
    hits: list[int] = []
    for word in _CREDENTIAL_WORDS if ascii_only else _CREDENTIAL_WORDS + _WORDS_OUTSIDE_ASCII:
        at = lowered.find(word)
        while at >= 0:
            hits.append(at)
            at = lowered.find(word, at + len(word))
    if wide:
        hits.extend(form.start() for form in _FULL_WIDTH.finditer(text))
    pieces: list[str] = []
    positions: list[int] = []
    end = -1  # where the last line read ends (its line break): each line is found once, and
    # looked back along only as far as that (a long line of settings is not read back to its
    # start for each one)
    for at in sorted(hits):
        if at <= end:
            continue
        start = text.rfind("\n", end + 1, at) + 1 or end + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        line = text[start:end]
        if not (
            "*" in line
            or "`" in line
            or "__" in line
            or ("_" in line and _EDGE_UNDERSCORE.search(line) is not None)
            or (wide and _FULL_WIDTH.search(line) is not None)
        ):
            continue
        plain = plain_text(line)
        if plain is None:
            continue
        if pieces:
            pieces.append("\n")
            positions.append(positions[-1])
        pieces.append(plain.text)
        positions.extend(start + place for place in plain.positions)
    return VisibleText("".join(pieces), positions) if pieces else None


def plain_text(text: str) -> VisibleText | None:
    """`text` without Markdown's emphasis and code marks and with full-width forms as ASCII,
    with where each of its characters was; None when that changes nothing."""
    positions: list[int] = []
    pieces: list[str] = []
    kept_from = 0
    for mark in _MARKS.finditer(text):
        positions.extend(range(kept_from, mark.start()))
        pieces.append(text[kept_from : mark.start()])
        kept_from = mark.end()
    if not pieces and _FULL_WIDTH.search(text) is None:
        return None
    positions.extend(range(kept_from, len(text)))
    pieces.append(text[kept_from:])
    return VisibleText("".join(pieces).translate(_AS_ASCII), positions)
