"""Patterns compiled at their first use: the same answers as compiled ones, every pattern of the
secret detector and of the offline extractor valid, and none of them compiled by importing it."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orcad.lazy_patterns import alternation_matches, lazy_compile

pytestmark = pytest.mark.pure

_SOURCE = r"(?P<key>[a-z]+)=(?P<value>\d+)"
_TEXT = "a=1, bb=22; ccc=x, dddd=4444"


def test_a_lazy_pattern_answers_as_the_compiled_one() -> None:
    lazy = lazy_compile(_SOURCE, re.IGNORECASE)
    compiled = re.compile(_SOURCE, re.IGNORECASE)
    assert lazy.pattern == _SOURCE
    assert lazy.search(_TEXT, 3).span() == compiled.search(_TEXT, 3).span()  # type: ignore[union-attr]
    assert lazy.match(_TEXT) is not None
    assert lazy.match(_TEXT, 1) is None
    assert lazy.fullmatch("Q=9") is not None
    assert [m.span() for m in lazy.finditer(_TEXT)] == [m.span() for m in compiled.finditer(_TEXT)]
    assert lazy.findall(_TEXT) == compiled.findall(_TEXT)
    assert lazy.sub(r"\g<key>=?", _TEXT) == compiled.sub(r"\g<key>=?", _TEXT)
    assert lazy.subn("", _TEXT) == compiled.subn("", _TEXT)
    assert lazy.split(_TEXT) == compiled.split(_TEXT)
    assert (lazy.flags, lazy.groups, lazy.groupindex) == (
        compiled.flags,
        compiled.groups,
        compiled.groupindex,
    )
    with pytest.raises(AttributeError):
        lazy.no_such_method  # noqa: B018


def test_copies_made_before_and_after_the_first_use_answer_alike() -> None:
    lazy = lazy_compile(_SOURCE)
    copies = [copy.copy(lazy), copy.deepcopy(lazy)]
    lazy.search(_TEXT)
    copies += [copy.copy(lazy), copy.deepcopy(lazy)]
    assert [c.findall(_TEXT) for c in copies] == [re.findall(_SOURCE, _TEXT)] * 4


def test_a_bad_pattern_raises_when_it_is_first_used() -> None:
    lazy = lazy_compile(r"(unclosed")
    with pytest.raises(re.error):
        lazy.search("unclosed")


def test_threads_using_a_pattern_for_the_first_time_at_once_get_the_same_answers() -> None:
    lazy = lazy_compile(_SOURCE)
    expected = re.compile(_SOURCE).findall(_TEXT * 50)
    start = threading.Barrier(8)
    answers: list[object] = []

    def use() -> None:
        start.wait()
        answers.append(lazy.findall(_TEXT * 50))

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [expected] * 8


def test_the_secret_detector_compiles_no_pattern_at_import_and_every_one_is_valid() -> None:
    # in a new interpreter: this one's tests have used the detector (and made a bad pattern)
    script = (
        "import orcad.secrets, orcad.lazy_patterns as lazy\n"
        "made = lazy._CREATED\n"
        "print(len(made), sum('search' in vars(p) for p in made), lazy.compile_all())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    made, compiled_at_import, compiled = map(int, out.split())
    assert made > 500
    assert compiled_at_import == 0
    assert compiled == made  # compile_all raises re.error on a bad one, failing the script


def test_the_offline_extractor_compiles_no_pattern_at_import_and_every_one_is_valid() -> None:
    # orcad imports it while its features are installed, before it serves their requests: its
    # patterns compiled then were some 35 ms of CPU of every start
    script = (
        "import orcad.providers.heuristic, orcad.lazy_patterns as lazy\n"
        "made = lazy._CREATED\n"
        "print(len(made), sum('search' in vars(p) for p in made), lazy.compile_all())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    made, compiled_at_import, compiled = map(int, out.split())
    assert made >= 70
    assert compiled_at_import == 0
    assert compiled == made


# An alternation whose branches overlap and tie: `alternation_matches` must pick as `finditer`.
_BRANCHES = (r"ab[a-z]*", "a", r"b+", r"(?<![a-z])c")
_REST = r"(?:=(\d+))?"


@given(st.text(alphabet="abc=1 \n", max_size=40))
@settings(max_examples=400, deadline=None)
def test_branches_searched_alone_find_what_the_alternation_finds(text: str) -> None:
    alternation = re.compile(f"(?:{'|'.join(_BRANCHES)}){_REST}")
    branches = [lazy_compile(branch + _REST) for branch in _BRANCHES]
    found = [(m.span(), m.groups()) for m in alternation_matches(branches, text)]
    assert found == [(m.span(), m.groups()) for m in alternation.finditer(text)]
