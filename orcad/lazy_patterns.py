"""Regular expressions compiled when they are first used.

Pure module: no I/O. The secret detector holds about six hundred patterns, and compiling them
took some 60 ms of every start before orcad answered its first request. Most of them (a vendor's
token format, one command's password flag) sit behind a literal that ordinary text never holds,
so a daemon may serve for days without needing them. `lazy_compile` returns a stand-in that
compiles its pattern at the first call of one of its methods (or the first read of an attribute
other than `pattern`) and from then on holds the compiled pattern's bound methods itself: a
search through it costs what a search through the compiled pattern does.

Two threads using one for the first time at once may both compile it; each gets the same
answers, and the second's methods replace the first's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, AnyStr, cast

# what the first use copies from the compiled pattern onto the stand-in
_COPIED = (
    "search",
    "match",
    "fullmatch",
    "finditer",
    "findall",
    "sub",
    "subn",
    "split",
    "scanner",
    "flags",
    "groups",
    "groupindex",
)

# every stand-in made, for compile_all
_CREATED: list[_LazyPattern] = []


class _LazyPattern:
    def __init__(self, source: str | bytes, flags: int) -> None:
        self.pattern = source
        self._flags = flags
        _CREATED.append(self)

    def __getattr__(self, name: str) -> Any:
        # only reached for what the instance does not hold yet, so only before the first use
        # (and for names a compiled pattern lacks, which raise as they would on one)
        if name.startswith("__"):
            raise AttributeError(name)
        compiled = re.compile(self.pattern, self._flags)
        for copied in _COPIED:
            setattr(self, copied, getattr(compiled, copied))
        return getattr(compiled, name)

    def __copy__(self) -> _LazyPattern:
        return self  # as a compiled pattern's copy is: it never changes

    def __deepcopy__(self, memo: object) -> _LazyPattern:
        return self

    def __repr__(self) -> str:
        return f"lazy_compile({self.pattern!r}, {self._flags})"


def compile_all() -> int:
    """Compile every pattern made so far (a test's check that each one is valid); how many."""
    for pattern in _CREATED:
        pattern.groups  # noqa: B018 (the read compiles it)
    return len(_CREATED)


def lazy_compile(source: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """`re.compile(source, flags)`, done when the pattern is first used. A bad pattern raises
    then, not here: every pattern of the project is compiled by its tests."""
    return cast("re.Pattern[AnyStr]", _LazyPattern(source, flags))


def alternation_matches(patterns: Sequence[re.Pattern[str]], text: str) -> Iterator[re.Match[str]]:
    """The matches `finditer` finds of the alternation `(?:P1|P2|...)rest` when given its
    branches each with the rest, `P1rest`, `P2rest`, ... (none matching empty, none adding a
    group), searched for one by one. A branch that starts with a literal skips ahead to it in
    C, where the alternation tries every position of the text. At a place where two match,
    the first wins, as it does in the alternation."""
    found = [pattern.search(text) for pattern in patterns]
    position = 0
    while True:
        first: re.Match[str] | None = None
        for index, previous in enumerate(found):
            match = previous
            if match is not None and match.start() < position:  # overlapped: look again
                match = found[index] = patterns[index].search(text, position)
            if match is not None and (first is None or match.start() < first.start()):
                first = match
        if first is None:
            return
        yield first
        position = first.end()
