"""The NDJSON framer, with no sockets."""

from __future__ import annotations

import itertools
import json
import random
import time
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.framing import FramingClosed, LineFramer, LineTooLong, json_nesting_exceeds

pytestmark = pytest.mark.pure

LARGEST_LINE = 8 * 1024 * 1024  # server.max_message_bytes by default

lines_strategy = st.lists(
    st.binary(min_size=1, max_size=200)
    .map(lambda b: b.replace(b"\n", b"x").replace(b"\r", b"y"))
    .filter(lambda b: b.strip() != b""),
    max_size=20,
)


def feed_in_chunks(framer: LineFramer, stream: bytes, cuts: list[int]) -> list[bytes | LineTooLong]:
    events: list[bytes | LineTooLong] = []
    positions = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for start, end in itertools.pairwise(positions):
        events.extend(framer.feed(stream[start:end]))
    return events


@given(lines=lines_strategy, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_any_chunking_yields_the_same_lines(lines: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    assert feed_in_chunks(LineFramer(1024), stream, cuts) == lines


@given(
    data=st.binary(max_size=4096),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=20),
)
def test_arbitrary_bytes_only_ever_yield_lines_or_too_long(data: bytes, cuts: list[int]) -> None:
    framer = LineFramer(256)
    events = feed_in_chunks(framer, data, cuts)
    for event in events:
        assert isinstance(event, (bytes, LineTooLong))
        if isinstance(event, bytes):
            assert b"\n" not in event
            assert len(event) <= 256
    assert sum(isinstance(e, LineTooLong) for e in events) <= 1


def test_line_exactly_at_the_limit_passes_and_one_more_byte_breaks() -> None:
    framer = LineFramer(10)
    assert framer.feed(b"a" * 10 + b"\n") == [b"a" * 10]
    framer = LineFramer(10)
    assert framer.feed(b"a" * 11 + b"\n") == [LineTooLong(10)]


def test_oversized_partial_line_is_detected_before_its_newline() -> None:
    framer = LineFramer(10)
    assert framer.feed(b"a" * 5) == []
    assert framer.feed(b"a" * 6) == [LineTooLong(10)]
    with pytest.raises(FramingClosed):
        framer.feed(b"\n")


def test_lines_before_an_oversized_one_are_delivered() -> None:
    framer = LineFramer(10)
    assert framer.feed(b"ok\n" + b"b" * 20) == [b"ok", LineTooLong(10)]


def test_crlf_and_blank_lines() -> None:
    framer = LineFramer(100)
    assert framer.feed(b'{"a":1}\r\n\n  \n{"b":2}\n') == [b'{"a":1}', b'{"b":2}']
    assert framer.pending_bytes == 0


def _reference_depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_reference_depth(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_reference_depth(item) for item in value.values()), default=0)
    return 0


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\k'), children, max_size=3)
    ),
    max_leaves=40,
)


@given(_json_values, st.integers(min_value=0, max_value=12))
def test_json_nesting_matches_the_decoded_depth(value: object, limit: int) -> None:
    line = json.dumps(value).encode()
    assert json_nesting_exceeds(line, limit) == (_reference_depth(value) > limit)


def test_json_nesting_limit_boundary_and_brackets_inside_strings() -> None:
    assert not json_nesting_exceeds(b"[" * 64 + b"]" * 64, 64)
    assert json_nesting_exceeds(b"[" * 65 + b"]" * 65, 64)
    assert json_nesting_exceeds(b"[" * 100_000, 64)  # unterminated: still refused
    assert not json_nesting_exceeds(b'["' + b"[" * 1000 + b'"]', 64)
    assert not json_nesting_exceeds(b"[]" * 10_000, 1)  # many, but shallow


@pytest.mark.parametrize(
    "unit", [b'"[",', b'{"role":"user","content":"hi"},', b"[],", b"[" * 9 + b"]" * 9 + b","]
)
def test_json_nesting_of_a_largest_line_costs_little_memory_and_time(unit: bytes) -> None:
    # 8 MiB of many strings, objects or short arrays: the check once held a copy of each piece
    # between strings (355 MiB for `"[",`) and took half a second of the event loop
    line = b"[" + unit * (LARGEST_LINE // len(unit)) + b"[]]"
    # CPU time: what the work costs, not how long a loaded machine paused it
    started = time.process_time()
    assert not json_nesting_exceeds(line, 64)
    assert time.process_time() - started < 1.0
    tracemalloc.start()
    try:
        json_nesting_exceeds(line, 64)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(line)


def test_json_nesting_takes_linear_time_when_every_quote_opens_a_string() -> None:
    # `"\"\"\"...` never closes: each of its quotes starts a string that runs to the end.
    line = b"[" * 65 + b'"' + b'\\"' * 20_000  # 40 KB: seconds when quadratic
    # CPU time: what the work costs, not how long a loaded machine paused it
    started = time.process_time()
    assert json_nesting_exceeds(line, 64)  # the brackets before the string still count
    assert time.process_time() - started < 1.0
    assert not json_nesting_exceeds(b'["' + b'\\"' * 1000 + b"[" * 1000, 64)  # all in a string
    assert not json_nesting_exceeds(b'["a\\' + b"[" * 1000, 64)
    assert json_nesting_exceeds(b'[["a\\\\"]' + b"[" * 1000 + b'"b"', 64)  # an escaped backslash


def _scanned_depth(line: bytes) -> int:
    """The deepest nesting of JSON text, read byte by byte: the reference the check is held to."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in line:
        if in_string:
            if escaped:
                escaped = False
            elif byte == ord("\\"):
                escaped = True
            elif byte == ord('"'):
                in_string = False
        elif byte == ord('"'):
            in_string = True
        elif byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


# strings made of what the check treats specially: quotes, backslashes (escaped ones before a
# quote), brackets, and text that is not ASCII (written as it is or as \u escapes)
_tricky_text = st.text(
    alphabet=st.sampled_from(['"', "\\", "[", "]", "{", "}", "a", "é", "\u202e", "😀", "\t", "\n"])
)
_tricky_values = st.recursive(
    st.none() | st.integers() | _tricky_text,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(_tricky_text, children, max_size=3)
    ),
    max_leaves=60,
)


@given(
    _tricky_values,
    st.integers(min_value=0, max_value=12),
    st.booleans(),
    st.sampled_from([None, 0, 1]),
)
def test_json_nesting_agrees_with_a_byte_by_byte_scan(
    value: object, limit: int, ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent).replace("\n", " ")
    line = text.encode()
    assert json_nesting_exceeds(line, limit) == (_scanned_depth(line) > limit)


def _random_walk_line(seed: int, steps: int, ceiling: int) -> bytes:
    """A valid JSON line of `steps` moves that goes as deep as `ceiling`, with strings holding
    escaped quotes, backslashes and brackets between them."""
    rng = random.Random(seed)
    parts = ["["]
    stack = ["["]  # the outermost array stays open to the end
    needs_comma = False
    strings = ['"\\\\"', '"\\"["', '"[[{"', '"\\\\\\"]"', '"é]"', '"x"']
    for _ in range(steps):
        move = rng.random()
        full = stack[-1] == "{" and needs_comma  # an object here holds one member
        if full or (stack[-1] == "[" and len(stack) > 1 and 0.45 <= move < 0.8):
            parts.append("]" if stack.pop() == "[" else "}")
            needs_comma = True
        elif len(stack) < ceiling and move < 0.45:
            parts.append("," if needs_comma else "")
            opener = rng.choice("[{")
            parts.append("[" if opener == "[" else "{" + rng.choice(strings) + ":")
            stack.append(opener)
            needs_comma = False
        else:
            parts.append(("," if needs_comma else "") + rng.choice(strings))
            needs_comma = True
    if stack[-1] == "{" and not needs_comma:
        parts.append("1")
    parts.extend("]" if opener == "[" else "}" for opener in reversed(stack))
    return "".join(parts).encode()


@pytest.mark.parametrize("seed", range(6))
def test_json_nesting_of_long_random_lines_agrees_with_a_byte_by_byte_scan(seed: int) -> None:
    # long enough that the rounds of removing innermost pairs stop early and the rest is
    # walked in more than one chunk
    line = _random_walk_line(seed, 150_000, 60 + seed)
    depth = _scanned_depth(line)
    for limit in (depth - 1, depth, 64):
        assert json_nesting_exceeds(line, limit) == (depth > limit)
