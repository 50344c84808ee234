"""PINs: stated in a sentence, or set by a name that holds one.

Pure module: no I/O. Holds the patterns of a PIN stated in a sentence, "my PIN is 4821",
"Card PIN: 7302", "the pin for the card is 0917", "pin: 55731", which
`secret_sentences.find_stated_passwords` applies, and finds a PIN set by name: `PIN=4821`,
`SIM_PIN: 4821`, `user_pin = 123456`, `pin_code: "0917"`, a smartcard's ("the YubiKey PIV pin
is 91827364"), and a code that opens a door, a gate or a safe, "the door code is 4821", "Door
code for the server room is 4417#", "garage keypad code 6093", "the lockbox combination is
3-7-1-9" (not "error code 6093", "zip code 90210", "exit code 137"). Leaves alone a pin in
lower case that is a part, a GPIO line or a version pin ("pin 12 of the header", "pin
numpy<2") rather than someone's or something's, and a name that only ends in pin, a GPIO
line's (`LED_PIN = 13`).
"""

from __future__ import annotations

from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import (
    CLAUSE_ENDS,
    STATED_VERB,
    VERSIONED_NAME,
    Span,
    end_before_trailing,
    is_label,
    is_placeholder,
    is_reference,
    mixes_letters_and_others,
)

# A PIN, written so (a pin is a part, a GPIO line): "my PIN is 4821", "Card PIN: 7302"
PIN_STATEMENT = lazy_compile(
    r"PIN(?<![A-Za-z0-9_\-.$@]PIN)(?:[ \t]+(?:code|number))?"  # the literal first: skips ahead
    # what it is the PIN of: "my PIN for the vpn token is 583920"
    r"(?:[ \t]+(?:for|of|on)(?:[ \t]+[A-Za-z0-9_\-]{1,24}+){1,4}?(?=[ \t]+(?:is|was)[ \t]))?"
    rf"(?:[ \t]*:|{STATED_VERB}[ \t]*:?)[ \t]+([0-9]{{4,12}}+)(?![0-9])"
)


# A pin in lower case is as often a part, a GPIO line or a version pin ("pin 12 of the header",
# "pin numpy<2"): one is a PIN when it is someone's or something's ("my pin is 4821", "the card
# pin: 7302", "the pin for the card is 0917", "sim pin 0000", after a space alone too), or a
# line starts with it ("pin: 55731"), or "the pin" is stated so with no part or circuit word
# before it ("the pin is 4821": a part's pins are numbered in ones, twos and threes).
_LOWER_PIN_STATEMENT = lazy_compile(
    r"pin(?<![a-z0-9_\-.$@]pin)(?![a-z0-9_\-])(?:[ \t]+(?:code|number))?"
    r"(?P<words>(?:[ \t]+[a-z]{1,20}+){0,5}?)"
    rf"(?:(?P<op>[ \t]*:)|{STATED_VERB}[ \t]*:?|(?P<spaced>))"
    r"[ \t]+(?P<value>[0-9]{4,12}+)(?![0-9])"
)
_PIN_OWNER = lazy_compile(
    r"(?<![a-z0-9_\-])(?:(?:my|your|our|his|her|their)(?:[ \t]+[a-z]{2,12}){0,2}|card|debit|credit|"
    r"bank|atm|sim|phone|door|alarm|voicemail|lock|safe|keypad|wps|bluetooth|pairing|unlock|"
    r"default|garage|gate|piv|yubikey|smartcard|smart[ \t]card|"
    r"tablet|laptop|bitlocker|device|screen|computer|ipad|iphone|android|kindle|console)[ \t]+\Z"
)
_THE_PIN = lazy_compile(r"(?<![a-z0-9_\-])the[ \t]+\Z")
_THE_REACH = 12  # "the" and the spaces after it
_PART_WORDS = lazy_compile(
    r"gpio|header|board|chip|connector|arduino|raspberry|pinout|wire|led|pwm|uart|i2c|spi|pcb|"
    r"socket|relay|sensor|resistor|pull|volt|ohm|bcm|mcu|jumper|sheet|diagram|schematic"
)
_PIN_OWNER_WORDS = frozenset(("for", "to"))
# where a pin is set, which also names a part's pin ("the pin on the header is 2048"): an owner
# when no part or circuit word is on its line up to the verb ("the pin on the new routers is")
_PIN_PLACE_WORDS = frozenset(("on", "of", "at", "in"))
_LINE_START = lazy_compile(r"(?:^|\n)[ \t]*(?:[-*>][ \t]+)?\Z")
_OWNER_REACH = 40


def lower_case_pins(text: str, lowered: str) -> Iterator[Span]:
    for match in _LOWER_PIN_STATEMENT.finditer(lowered):
        at = match.start()
        spaced = match["spaced"] is not None
        if text[at : at + 3] not in ("pin", "Pin") and not (spaced and text[at : at + 3] == "PIN"):
            continue  # PIN in capitals stated so is the other rule's
        words = match["words"].split()
        if spaced and words:
            continue
        start, end = match.span("value")
        owned = _owned(lowered, at, words, colon=match["op"] is not None, spaced=spaced)
        if (owned or (not spaced and _the_pin(lowered, at, start, int(lowered[start:end])))) and (
            pin_ends_clause(text, end)
        ):
            yield start, end


# "the kids' tablet pin is jellybean77", "the bitlocker PIN on the demo laptop is Gh0st!Ship": a
# device's PIN may hold letters (BitLocker's enhanced PIN, a phone's passcode); such a value is
# one when the pin is owned as above, a verb gives it, and it mixes letters with digits
_CHOSEN_PIN = lazy_compile(
    r"pin(?![a-z0-9_\-])(?:[ \t]+(?:code|number))?(?P<words>(?:[ \t]+[a-z]{1,20}+){0,5}?)"
    + STATED_VERB
    + r"[ \t]+[\"'`]?(?P<value>[^\s\"'`()\[\]{}<>]{6,64}+)"
)
_DOTTED_NUMBER = lazy_compile(r"[0-9]\.[0-9]")
_PIN_NAME_BEFORE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-.$@")


def chosen_pins(text: str, lowered: str) -> Iterator[Span]:
    for match in _CHOSEN_PIN.finditer(lowered):
        at = match.start()
        if at > 0 and lowered[at - 1] in _PIN_NAME_BEFORE:
            continue
        start, end = match.span("value")
        end = end_before_trailing(text, start, end)
        value = text[start:end]
        if not (
            any(char.isalpha() for char in value)
            and any(char.isdigit() for char in value)
            and mixes_letters_and_others(value)
            and not is_label(value)
            and not is_placeholder(value)
            and not is_reference(value)
            and VERSIONED_NAME.match(value.lower()) is None
            and _DOTTED_NUMBER.search(value) is None
        ):
            continue  # a version a package is pinned to: "the pin for the build is numpy2.1"
        line = lowered.rfind("\n", max(0, at - 2 * _OWNER_REACH), at) + 1
        if _PART_WORDS.search(lowered, max(line, at - 2 * _OWNER_REACH), start) is not None:
            continue  # "the data pin on the sensor board is gpio17"
        words = match["words"].split()
        if _owned(lowered, at, words, colon=False, spaced=False) and pin_ends_clause(text, end):
            yield start, end


def _owned(lowered: str, at: int, words: list[str], *, colon: bool, spaced: bool) -> bool:
    """The pin at `at` is someone's or something's: an owner before it or after "for"; or a
    line starts with it and a colon follows."""
    if words and words[0] in _PIN_PLACE_WORDS:
        line = lowered.rfind("\n", max(0, at - 2 * _OWNER_REACH), at) + 1
        verb = lowered.find(words[-1], at) + len(words[-1])
        return _PART_WORDS.search(lowered, max(line, at - 2 * _OWNER_REACH), verb) is None
    if words:
        return words[0] in _PIN_OWNER_WORDS
    before = max(0, at - _OWNER_REACH)
    return _PIN_OWNER.search(lowered, before, at) is not None or (
        colon and not spaced and _LINE_START.search(lowered, before, at) is not None
    )


def _the_pin(lowered: str, at: int, stated: int, value: int) -> bool:
    """The pin at `at` is "the pin", stated ("the pin is 4821") at `stated`, with no part or
    circuit word on its line before its number ("the pin on the relay board is 3300"), and its
    number is no size or count (a power of two: 2048, 4096)."""
    if _THE_PIN.search(lowered, max(0, at - _THE_REACH), at) is None:
        return False
    reach = max(0, at - 2 * _OWNER_REACH)
    line = lowered.rfind("\n", reach, at) + 1
    return _PART_WORDS.search(lowered, max(line, reach), stated) is None and (
        value == 0 or value & (value - 1) != 0
    )


# A PIN set by name: `PIN=4821`, `SIM_PIN: 4821`, `user_pin = 123456` (a PKCS#11 token's),
# `pin_code: "0917"`. A name that only ends in pin is a GPIO line's (LED_PIN = 13, gpio_pin):
# the name is pin alone, or its owner or "code" or "number" qualifies it.
# Searched for only where "pin" is (the name's end), then the owner before it: a pattern that
# opened with the owners' alternation was tried at every character of every text, and "pin" is
# in "typing", "mapping" and "shipping", so that search cost 0.7x of all redaction.
_PIN_SETTING = lazy_compile(
    r"pin(?P<code>[_\-.]?(?:code|number))?(?P<name_quote>[\"']?)[ \t]{0,8}(?P<op>=|:)[ \t]{0,8}"
    r"(?P<quote>[\"']?)(?P<value>[0-9]{4,12}+)(?P=quote)(?![0-9a-z_\-:/]|\.[0-9])"
)
_PIN_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-.$@")
_PIN_NAME_OWNER = lazy_compile(
    r"(?<![a-z0-9_\-.$@])(?:sim|card|atm|bank|debit|credit|user|admin|default|door|alarm|"
    r"voicemail|unlock|wps|bluetooth|pairing|smartcard|security|so)[_\-.]?\Z"
)
_PIN_NAME_OWNER_MAX = len("smartcard_")


def find_pin_settings(text: str, lowered: str) -> Iterator[Span]:
    """The digits of a PIN set by a name that holds one."""
    at = lowered.find("pin")
    while at != -1:
        match = _PIN_SETTING.match(lowered, at)
        if match is not None:
            starts_name = at == 0 or lowered[at - 1] not in _PIN_NAME_CHARACTERS
            owned = not starts_name and _PIN_NAME_OWNER.search(
                lowered, max(0, at - _PIN_NAME_OWNER_MAX), at
            )
            # a name that only ends in pin is a GPIO line's (LED_PIN = 13); "pin: 55731" and
            # "PIN: 7302" are the sentences' (`find_stated_passwords`)
            if (starts_name or owned) and (
                match["op"] == "=" or owned or match["code"] or match["name_quote"]
            ):
                yield match.span("value")
        at = lowered.find("pin", at + 3)


# "the door code is 4821", "gate code: 4821#", "the safe combination is 12-34-56": a code that
# opens a door, a gate, an alarm or a safe is a PIN by another name; "code" alone is an error's,
# an exit's or a postcode's. Found from each "code", "combo" or "combination" (the literal "co"
# first, for the engine to skip ahead to), the owner looked for before it.
# ("garage keypad code 6093": right after the name and a space too, when it ends its clause;
# "the lockbox combination is 3-7-1-9": a dial's numbers may be single digits)
_ACCESS_CODE = lazy_compile(
    r"co(?:de|mbo|mbination)(?![a-z0-9_\-])(?P<words>(?:[ \t]+[a-z]{1,20}+){0,4}?)"
    rf"(?:[ \t]*:|{STATED_VERB}[ \t]*:?|(?P<spaced>))[ \t]+"
    r"(?P<value>[0-9]{1,12}+(?:-[0-9]{1,6}+){0,5}[#*]?)(?![0-9a-z_\-])"
)
_ACCESS_OWNER = lazy_compile(
    r"(?<![a-z0-9_\-])(?:door|front[ \t]+door|gate|alarm|garage|keypad|lockbox|lock[ \t]+box|"
    r"key[ \t]?safe|safe|padlock|locker|entry|entrance|intercom|building[ \t]+entry|"
    r"access|lock|smart[ \t]+lock|master|disarm|arming|alarm[ \t]+panel)"
    r"(?:[ \t]+(?:lock|pin|entry|master|disarm|arming))?[ \t]+\Z"
)
_ACCESS_OWNER_REACH = 24
_ACCESS_OWNER_WORDS = frozenset(("for", "to", "on", "at"))
_DATE = lazy_compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def find_access_codes(text: str, lowered: str) -> Iterator[Span]:
    """The digits of a code that opens a door, a gate, an alarm or a safe: "the door code is
    4821", "gate code: 4821#", "the safe combination is 12-34-56"."""
    if "code" not in lowered and "comb" not in lowered:
        return
    for match in _ACCESS_CODE.finditer(lowered):
        at = match.start()
        words = match["words"].split()
        if words and (words[0] not in _ACCESS_OWNER_WORDS or match["spaced"] is not None):
            continue
        if _ACCESS_OWNER.search(lowered, max(0, at - _ACCESS_OWNER_REACH), at) is None:
            continue
        start, end = match.span("value")
        digits = sum(char.isdigit() for char in lowered[start:end])
        if digits < 4 or _DATE.match(lowered, start):
            continue
        if match["spaced"] is not None:
            # right after the name with no verb: as a note's last words ("garage keypad code
            # 6093") or before a condition ("front door code 8842 if you get there first"), on
            # a line that names no example: "access code 4821 in the OAuth flow", "alarm code
            # 1002 for low battery", "keypad code 0000 on first boot" name an example or a state
            if _number_ends_sentence(text, end) and not _names_an_example(lowered, end):
                yield start, end
        elif pin_ends_clause(text, end):
            yield start, end


def _number_ends_sentence(text: str, end: int) -> bool:
    """Digits end their line or the text, a sentence's mark and a space (or the end) follow, or
    a condition does ("if you get there first")."""
    after = text[end : end + 2]
    if after[:1] in ".;!":
        after = after[1:]
    if not after.strip(" \t") or after[:1] in "\r\n":
        return True
    following = _NEXT_WORD.match(text, end)
    return following is not None and following[1].lower() in _CONDITIONS


_CONDITIONS = frozenset(("if", "when", "unless", "until", "but", "so"))
_EXAMPLE_WORDS = lazy_compile(r"(?<![a-z])(?:demo|example|sample|test|fixture|readme|docs)")


_EXAMPLE_REACH = 120  # a bounded look, so that a long line of codes is read once, not again each


def _names_an_example(lowered: str, end: int) -> bool:
    """The rest of the line, as far as _EXAMPLE_REACH, names an example, a demo or a test ("if
    you use the demo kit")."""
    reach = min(len(lowered), end + _EXAMPLE_REACH)
    line_end = lowered.find("\n", end, reach)
    return _EXAMPLE_WORDS.search(lowered, end, reach if line_end < 0 else line_end) is not None


def pin_ends_clause(text: str, end: int) -> bool:
    """Digits end their clause: the line or the text ends, a punctuation mark followed by a
    space does (not a version's dot: "4821.5"), or a word that starts another clause follows
    ("my pin is 4821 if you need it", "the sim PIN is 48213957 actually no wait", not "4821
    characters long"), or an aside in parentheses ("the door code is 4417 (new as of monday)")."""
    after = text[end : end + 2]
    if after[:1] in CLAUSE_ENDS:
        after = after[1:]
    if not after.strip(" \t") or after[:1] in "\r\n" or after.lstrip(" \t")[:1] == "(":
        return True
    following = _NEXT_WORD.match(text, end)
    return following is not None and following[1].lower() in _CLAUSE_STARTS


_NEXT_WORD = lazy_compile(r"[ \t]+([A-Za-z]{2,8})(?![A-Za-z])")
_CLAUSE_STARTS = frozenset(
    ("if", "until", "unless", "and", "but", "so", "when", "since", "while", "for", "in", "on",
     "lol", "btw", "fyi", "pls", "please", "thanks", "thx",  # a chat's asides
     "actually", "iirc", "afaik", "wait", "anyway", "though")
)  # fmt: skip
