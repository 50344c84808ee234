"""Gates of the secret detector's rules: whether a rule can match a text at all.

Pure module: no I/O. Token rules are skipped outright when their trigger literal is absent
from the text's long unbroken runs (`_long_runs`), so the common no-secret path is one pass to
find those runs plus a few substring searches.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from orcad.lazy_patterns import lazy_compile
from orcad.secret_formats import token_pattern

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


class _TriggerGate:
    """Open when one of `triggers` is among the runs, and, with a `pattern`, the pattern is
    found in them too. `_open_rules` looks every rule's triggers up at once instead of calling
    each gate (a call per rule was a third of redacting code without secrets)."""

    __slots__ = ("pattern", "triggers")

    def __init__(self, triggers: tuple[str, ...], pattern: re.Pattern[str] | None = None) -> None:
        self.triggers = triggers
        self.pattern = pattern

    def __call__(self, runs: str) -> bool:
        pattern = self.pattern
        return any(trigger in runs for trigger in self.triggers) and (
            pattern is None
            # a pattern with a group holds context outside its secret: the trigger decides
            or pattern.groups > 0
            or pattern.search(runs) is not None
        )


def _any_trigger(triggers: tuple[str, ...]) -> Gate:
    return _TriggerGate(triggers)


# Below this length a trigger (re_, pat, SK) is in most code's runs: the gate then looks for
# the rule's whole pattern in the runs, which a match lies within when made of run characters.
_SHORT_TRIGGER = 5


def _token_gate(triggers: tuple[str, ...], pattern: str, bounded: bool) -> Gate:
    if min(map(len, triggers)) >= _SHORT_TRIGGER or ":" in pattern or "~" in pattern:
        return _any_trigger(triggers)
    # as the finder searches it: a bounded pattern's start boundary holds in the runs too, and
    # without it a run of triggers (eyJeyJ...) was read up to 8 KiB on from each: 15 s for 2 MiB
    return _TriggerGate(triggers, lazy_compile(token_pattern(pattern, bounded)))


def _always(runs: str) -> bool:
    return True
