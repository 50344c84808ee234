"""Credential values a line break cuts: `DB_PASSWORD=\\nXk9#mm2pqLw`, or a terminal wrapping
`-e POSTGRES_PASSWORD=Xk9#mm2` at its last column with `pqLw7` on the next line.

Pure module: no I/O. The token formats are read across a break by `secret_wrapped`; a value
that is no format (a password, an AWS secret key after `=` and spaces) is the assignment's, so
it is read here. A setting whose line ends at its `=` takes the next line's start when that is
one run that mixes letters with digits or symbols and the setting, joined to it, is still found
a credential: `PASSWORD=` followed by the next setting, a comment, a section, a blank line or a
plain word is left alone. A value the detector found ending its line takes the run that starts
the next line when that line is that run alone and no plain word (`fi`, `EOF`), or when the
line before is as long as a terminal's (40 characters or more): the rest of what was cut. A
next line that is a setting of its own, a comment or a section is no value's rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from orcad.lazy_patterns import lazy_compile
from orcad.secret_values import mixes_letters_and_others

Detection = tuple[str, int, int]  # (rule, start, end)
Detector = Callable[[str], Sequence[Detection]]

# The rules whose value may run on past a break: assignments and an AWS secret key's.
_CONTINUED_RULES = frozenset(("credential_assignment", "aws_secret_access_key"))
# A setting's name and its `=` (or `:`) ending a line, a value's character starting the next:
# each pattern opens with its operator and line break, a literal the engine skips ahead to
# (a charset opening them all was tried at every character: 11 ms a megabyte).
_VALUE_START = r"[A-Za-z0-9+/_!@%^&*~.]"
_OPERATORS_AT_LINE_END = tuple(
    lazy_compile(rf"{operator}{newline}(?<=[A-Za-z0-9_ \t]{operator}{newline})(?={_VALUE_START})")
    for operator in ("=", ":")
    for newline in ("\n", "\r\n")  # (every other one: a line break of one character)
)
_NAME_BEFORE = lazy_compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}[ \t]*\Z")
# What starts the next line: a value's characters, not a comment, section, list or quote.
_VALUE_RUN = lazy_compile(_VALUE_START + r"[^\s\"'`]{0,255}+")
# A setting's name alone, and a run base64 could end with its padding: four characters a group.
_NAME = lazy_compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_BASE64_PADDED = lazy_compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)")
_WRAPPED_LINE = 40  # a terminal or an email wraps lines at least this long


def find_cut_values(text: str, found: Sequence[Detection], detect: Detector) -> Iterator[Detection]:
    """The parts of credential values a line break put on the next line: after a setting
    whose line ends at its operator, and after a value `found` ending its line."""
    if "\n" not in text:
        return
    yield from _values_after_operators(text, detect)
    for rule, start, end in found:
        if rule in _CONTINUED_RULES:
            rest = _rest_after_break(text, start, end)
            if rest is not None:
                yield rule, *rest


def _next_line(text: str, end: int) -> int | None:
    """Where the line after a line break at `end` starts, or None without a break there."""
    if text.startswith("\n", end):
        return end + 1
    if text.startswith("\r\n", end):
        return end + 2
    return None


def _is_value_rest(run: str) -> bool:
    """A run is no setting of its own (`DB_USER=admin`, `all:`, `DB_PASSWORD=`). A value may
    end in `=` only as base64's padding: a name with its `=` is a setting left empty."""
    bare = run.rstrip("=")
    if "=" in bare or run.endswith(":"):
        return False
    return bare == run or not _NAME.fullmatch(bare) or _BASE64_PADDED.fullmatch(run) is not None


def _rest_after_break(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The run a break cut from the value at start..end, which ends its line."""
    resumed = _next_line(text, end)
    run = _VALUE_RUN.match(text, resumed) if resumed is not None else None
    if run is None or not _is_value_rest(run.group()):
        return None
    line = text.rfind("\n", 0, start) + 1
    if end - line >= _WRAPPED_LINE:
        return run.span()
    alone = run.end() == len(text) or text[run.end()] in "\r\n"
    if alone and not _is_plain_word(run.group()):
        return run.span()
    return None


def _is_plain_word(run: str) -> bool:
    """Letters in one case: a word or a keyword of its own (`fi`, `done`, `EOF`, `exit`), not
    the rest of a password a short line cut, which `Xk9#mm` then `2pqLw` shows."""
    return run.isalpha() and (run.islower() or run.isupper())


def _values_after_operators(text: str, detect: Detector) -> Iterator[Detection]:
    """A value the break put on the line after its setting's `=`: "DB_PASSWORD=\\nXk9#mm"."""
    patterns = _OPERATORS_AT_LINE_END if "\r" in text else _OPERATORS_AT_LINE_END[::2]
    for operator in (match for pattern in patterns for match in pattern.finditer(text)):
        resumed = operator.end()
        run = _VALUE_RUN.match(text, resumed)
        if run is None or not _is_value_rest(run.group()):
            continue
        if len(run.group()) < 6 or not mixes_letters_and_others(run.group()):
            continue
        line = text.rfind("\n", 0, operator.start()) + 1  # a name is searched for on its line
        name = _NAME_BEFORE.search(text, max(line, operator.start() - 128), operator.start())
        if name is None:
            continue
        setting = text[name.start() : operator.start() + 1]
        joined = setting + run.group()
        for rule, start, end in detect(joined):
            if rule in _CONTINUED_RULES and start <= len(setting) < end:
                yield rule, resumed, resumed + end - len(setting)
