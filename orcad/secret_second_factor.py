"""Second factors: a TOTP seed and the recovery codes that stand in for one.

Pure module: no I/O. A seed is base32 in one case (`JBSWY3DPEHPK3PXP`) after a word that
names a second factor (TOTP, 2FA, MFA, OTP, authenticator, two-factor, 2-step) on its line;
it holds a digit, as nearly every seed does and an ordinary word-run does not; so does one shown in
groups of four, `JBSW Y3DP EHPK 3PXP`, holding a letter too, also one a line break cuts.
Recovery and backup codes are the codes after those words (GitHub's `a1b2c-d3e4f`, Google's
`1234 5678`, a BitLocker recovery key), listed on the line or the lines below, also after
what they are for and a colon ("backup codes for the google admin account: 4829 1736"), each
holding a digit: "enable 2FA in settings", "recovery codes are shown once" and "error code:
ABCD-1234" stay storable.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from orcad.lazy_patterns import alternation_matches, lazy_compile
from orcad.secret_values import Span

# ------------------------------------------------------------------------------ seeds
# A seed is one unbroken run, so the rule opens only on a text whose long runs (the token
# rules' gate, `secret_gates._long_runs`) hold one with a digit: the words that name a second
# factor are then looked for before each seed alone, not in the whole text.
_SEED_RUN = lazy_compile(r"(?<![^ =])(?:[A-Z2-7]{16,}|[a-z2-7]{16,})=*(?![^ ])")
_SEED = lazy_compile(
    r"(?<![A-Za-z0-9+/_\-])(?:[A-Z2-7]{16,128}+|[a-z2-7]{16,128}+)=*(?![A-Za-z0-9+/_\-])"
)
# Where a seed can start: a run of 16 base32 characters of one case, at its start. Found on
# bytes, one a character (a character outside ASCII is `?`, never a seed's), marked by two
# translations and found by `bytes.find` at C speed, where a search for the pattern tried every
# letter of a long text.
_UPPER_BASE32 = bytes(
    0x61 if chr(b) in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" else 0x20 for b in range(256)
)
_LOWER_BASE32 = bytes(
    0x61 if chr(b) in "abcdefghijklmnopqrstuvwxyz234567" else 0x20 for b in range(256)
)
_SEED_LENGTH = 16
# (each starts with its word, the character before it checked after: searched for one by one,
# `alternation_matches`, each skips ahead to its word in C)
_SEED_WORDS = tuple(
    lazy_compile(rf"{word}(?<![a-z0-9]{word})(?![a-z0-9])")
    for word in ("totp", "hotp", "otp", "2fa", "mfa", "authenticator", "two[-_ ]factor", "2-step")
)
_SEED_WORD = lazy_compile(
    r"(?<![a-z0-9])(?:[th]?otp|2fa|mfa|authenticator|two[-_ ]factor|2-step)(?![a-z0-9])"
)
_SEED_REACH = 64  # "TOTP secret for the admin account: JBSW…" starts this far at most
_DIGIT = lazy_compile(r"[0-9]")


def may_hold_seed(runs: str) -> bool:
    """Whether the text's long runs hold one shaped as a seed: base32 in one case, a digit."""
    return any(_DIGIT.search(run.group()) is not None for run in _SEED_RUN.finditer(runs))


def find_totp_seeds(text: str, lowered: str) -> Iterator[Span]:
    """A base32 seed after a word that names a second factor, on its line, or named as one
    right after it ("… as the totp secret")."""
    for match in _seeds(text):
        start = match.start()
        line = lowered.rfind("\n", max(0, start - _SEED_REACH), start) + 1
        reach = max(line, start - _SEED_REACH)
        if _DIGIT.search(match.group()) is not None and (
            _SEED_WORD.search(lowered, reach, start) is not None
            or _NAMED_AFTER.match(lowered, match.end()) is not None
        ):
            yield match.span()


def _seeds(text: str) -> Iterator[re.Match[str]]:
    """What `_SEED.finditer(text)` finds, matched only where a run of one case can start one."""
    data = text.encode("ascii", "replace")
    starts: set[int] = set()
    run = b"a" * _SEED_LENGTH
    for table in (_UPPER_BASE32, _LOWER_BASE32):
        marks = data.translate(table)
        at = marks.find(run)
        while at >= 0:  # found from a gap (or the start): the start of its run
            starts.add(at)
            gap = marks.find(b" ", at + _SEED_LENGTH)
            at = -1 if gap < 0 else marks.find(run, gap)
    matched = 0
    for start in sorted(starts):
        match = _SEED.match(text, start) if start >= matched else None
        if match is not None:
            matched = match.end()
            yield match


# "put JBSWY3DPEHPK3PXP as the totp secret", "MFRG… is our 2fa seed": the seed's name after it
_NAMED_AFTER = lazy_compile(
    r"[ \t]+(?:as|is|was|for)[ \t]+(?:(?:the|a|my|our|your|its|their)[ \t]+)?"
    r"(?:[a-z0-9_\-]{1,20}[ \t]+)?(?:[th]?otp|2fa|mfa|authenticator|two[-_ ]factor)"
    r"[ \t]+(?:secret|seed|key)(?![a-z])"
)


# A seed an app shows in groups of four ("JBSW Y3DP EHPK 3PXP", Google's lower-case
# "jbsw y3dp ehpk 3pxp"): four groups or more in one case, holding a letter and a digit, that
# start on the line of the word naming a second factor, within _SEED_REACH of it, and may go
# on over the lines below, as a narrow terminal or a note breaks them ("JBSW Y3DP" then "EHPK
# 3PXP"). It has no long run to open a gate, so the words that name it are looked for first
# (compiled literals: 0.5 ms a megabyte each where `in` takes 0.8), and the seed is then
# matched from each word: tried at the 65 places after it, not searched for over the text.
_GROUPED_SEED_AFTER_WORD = lazy_compile(
    r"[^\n]{0,64}?(?<![A-Za-z0-9+/_\-])(?P<seed>"
    r"[A-Z2-7]{4}(?:(?:[ \t]|[ \t]*\r?\n[ \t]*)[A-Z2-7]{4}){3,31}"
    r"|[a-z2-7]{4}(?:(?:[ \t]|[ \t]*\r?\n[ \t]*)[a-z2-7]{4}){3,31})"
    r"(?![A-Za-z0-9+/_\-])"
)
_SEED_LITERALS = tuple(
    lazy_compile(word) for word in ("otp", "2fa", "mfa", "authenticator", "factor", "2-step")
)
_LETTER = lazy_compile(r"[A-Za-z]")


def find_grouped_seeds(text: str, lowered: str) -> Iterator[Span]:
    """A seed written in groups of four after TOTP, OTP, 2FA, MFA, authenticator, two-factor
    or 2-step, starting on the word's line."""
    if not any(literal.search(lowered) is not None for literal in _SEED_LITERALS):
        return
    searched = 0  # a seed already read is not read again from a later word
    for word in alternation_matches(_SEED_WORDS, lowered):
        if word.start() < searched:
            continue
        match = _GROUPED_SEED_AFTER_WORD.match(text, word.end())
        if match is None:
            continue
        seed = match.group("seed")
        if _DIGIT.search(seed) is not None and _LETTER.search(seed) is not None:
            searched = match.end()
            yield match.span("seed")


# --------------------------------------------------------------------- recovery codes
# "code" is found at memchr speed and the words before it read there: one scan of the text
# for "recovery code", "backup code", "backup verification code" and "scratch code".
_CODE_NAMED = lazy_compile(r"(?<![a-z])(?:recovery|backup|backup verification|scratch) \Z")
_RECOVERY_KEY = "recovery key"
# What comes between the words and the first code: what they are for before a colon ("backup
# codes for the google admin account:"), a remark in brackets, a verb, a colon (and a blank
# line after it), a fence that opens a block of code ("recovery codes:", "```").
# ("here's a backup code in case: 4X7K-9QPM-…", "backup codes, just in case:": an aside too)
_LEAD = lazy_compile(
    r"s?(?:,?[ \t]+(?:for|of|on|in|if|just|to)"
    r"(?P<owner>(?:[ \t]+[a-z0-9_.@\-]{1,32}+){1,5}?)(?=[ \t]*:))?"
    r"(?:[ \t]*\([^)\n]{1,32}\))?[ \t]*(?:(?:are|is|was|were)(?![a-z]))?"
    r"(?:[ \t]*:(?:[ \t]*\r?\n(?=[ \t]*\r?\n))?)?"  # after a colon, a blank line
    r"(?:[ \t]*\r?\n[ \t]*(?:```|~~~)[a-z]*[ \t]*(?=\r?\n))?"
)
# Between two codes: spaces, commas, one line break (a blank line ends the list) and a list's
# bullet or number.
_SEPARATOR = r"(?:[ \t,;]|\r?\n(?![ \t]*\r?\n))*(?:and[ \t]+)?(?:(?:[-*•]|[0-9]{1,2}[.)])[ \t]+)?"
_CODE = lazy_compile(
    _SEPARATOR + r"(?P<code>[0-9]{6}(?:-[0-9]{6}){7}"  # a BitLocker recovery key
    # GitHub's two groups, or more as password managers give one (Bitwarden's four)
    r"|[A-Za-z0-9]{4,6}(?:-[A-Za-z0-9]{4,6}){1,7}+|[0-9]{4} [0-9]{4}|[A-Za-z0-9]{6,12})"
    r"(?![A-Za-z0-9_\-/@]|\.[A-Za-z0-9])"
)


# what codes are for when they are no one's: the examples of documentation and tests
_EXAMPLES = frozenset(("example", "examples", "test", "tests", "testing", "demo", "sample", "docs"))


def _is_code(code: str) -> bool:
    """A recovery code holds a digit; a run without a dash or space is all digits or mixes
    two letters and two digits or more (not "sha256", "generated", "v2")."""
    digits = sum(char.isdigit() for char in code)
    if not digits:
        return False
    if "-" in code or " " in code or code.isdigit():
        return True
    return len(code) >= 8 and digits >= 2 and len(code) - digits >= 2


def _shape(code: str) -> tuple[int, ...]:
    return tuple(len(group) for group in code.split("-"))


def _listed_codes(text: str, position: int) -> Iterator[Span]:
    """The codes listed from `position`, up to the first thing that is none. Codes drawn at
    random hold no digit now and then (one of GitHub's ten in about twenty lists): among
    codes of their shape with dashes, such a code is one too."""
    shapes: set[tuple[int, ...]] = set()
    held: list[Span] = []  # codes without a digit, until one of their shape holds one
    while True:
        match = _CODE.match(text, position)
        if match is None:
            return
        code = match["code"]
        if _is_code(code):
            if "-" in code:
                shapes.add(_shape(code))
            if held and _shape(code) != _shape(text[held[0][0] : held[0][1]]):
                return
            yield from held
            held = []
            yield match.span("code")
        elif "-" in code and code.replace("-", "").isalnum() and len(code) >= 9:
            if _shape(code) not in shapes:
                held.append(match.span("code"))
                if len(held) > 1:
                    return
            else:
                yield match.span("code")
        else:
            return
        position = match.end()


def find_recovery_codes(text: str, lowered: str) -> Iterator[Span]:
    """The codes listed after "recovery codes", "backup codes", "scratch codes" or "recovery
    key", on their line or the lines below."""
    searched = 0  # a list already read is not read again from a word inside it
    for word_end in sorted((*_code_ends(lowered), *_recovery_key_ends(lowered))):
        if word_end < searched:
            continue
        lead = _LEAD.match(lowered, word_end)
        if lead is not None and _EXAMPLES.intersection((lead["owner"] or "").split()):
            continue  # "backup codes for testing: 1234 5678 are rejected by the validator"
        for span in _listed_codes(text, lead.end() if lead is not None else word_end):
            searched = span[1]
            yield span


def _code_ends(lowered: str) -> Iterator[int]:
    """Where each "code" that names a recovery or backup code ends."""
    at = lowered.find("code")
    while at >= 0:
        if lowered[at - 1 : at] == " " and _CODE_NAMED.search(lowered, max(0, at - 24), at):
            yield at + 4
        at = lowered.find("code", at + 4)


def _recovery_key_ends(lowered: str) -> Iterator[int]:
    at = lowered.find(_RECOVERY_KEY)
    while at >= 0:
        if not lowered[at - 1 : at].isalpha():
            yield at + len(_RECOVERY_KEY)
        at = lowered.find(_RECOVERY_KEY, at + len(_RECOVERY_KEY))
