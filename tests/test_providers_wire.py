"""The sans-I/O chat-completions pieces: SSE decoding, answer assembly, Retry-After, reasons."""

from __future__ import annotations

import email.utils
import itertools
import json
import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orcad.providers.openai_wire import (
    EVENT_LINE_MAX_BYTES,
    EventStreamDecoder,
    StreamedAnswer,
    WireError,
    completion_content,
    error_reason,
    parse_retry_after,
)

pytestmark = pytest.mark.pure


def event(content: str | None = None, finish_reason: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def assemble(body: bytes, splits: list[int]) -> str:
    decoder, answer = EventStreamDecoder(), StreamedAnswer()
    cuts = sorted({0, len(body), *(s % (len(body) + 1) for s in splits)})
    for start, end in itertools.pairwise(cuts):
        for payload in decoder.feed(body[start:end]):
            answer.feed_event(payload)
    for payload in decoder.feed_end():
        answer.feed_event(payload)
    return answer.text()


@given(
    pieces=st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=20),
    splits=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
    line_end=st.sampled_from([b"\n", b"\r\n", b"\r"]),  # the three the SSE format allows
    bom=st.booleans(),  # a stream may start with a byte order mark, which is not data
)
def test_any_split_of_any_stream_reassembles_the_content(
    pieces: list[str], splits: list[int], line_end: bytes, bom: bool
) -> None:
    body = b"".join(event(p) for p in pieces) + event(finish_reason="stop") + b"data: [DONE]\n\n"
    body = (b"\xef\xbb\xbf" if bom else b"") + body.replace(b"\n", line_end)
    assert assemble(body, splits) == "".join(pieces)


def test_comments_and_other_fields_are_ignored() -> None:
    body = b": keep-alive\n\nevent: message\nid: 7\n" + event("hi")[:-1] + b"retry: 10\n\n"
    body += event(finish_reason="stop")
    assert assemble(body, []) == "hi"


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
def test_multi_line_data_is_joined_with_newlines_wherever_the_body_is_cut(
    line_end: bytes,
) -> None:
    # a CRLF cut between its CR and LF ends one line, not two: a blank line between the data
    # lines would end the event early, in two halves
    body = b'data: {"a":\ndata: 1}\n\n'.replace(b"\n", line_end)
    for cut in range(len(body) + 1):
        decoder = EventStreamDecoder()
        events = decoder.feed(body[:cut]) + decoder.feed(body[cut:]) + decoder.feed_end()
        assert events == ['{"a":\n1}'], cut


def test_usage_only_chunks_are_accepted() -> None:
    answer = StreamedAnswer()
    answer.feed_event('{"choices": [], "usage": {"total_tokens": 3}}')
    answer.feed_event("[DONE]")
    assert answer.text() == ""


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"error": {"message": "out of memory"}}', "out of memory"),
        ('{"id": 1}', "no choices"),
        ('{"choices": ["x"]}', "malformed choice"),
    ],
)
def test_events_outside_the_protocol_are_errors(payload: str, message: str) -> None:
    with pytest.raises(WireError, match=message):
        StreamedAnswer().feed_event(payload)


def test_answer_past_the_byte_limit_is_an_error() -> None:
    answer = StreamedAnswer(max_bytes=10)
    answer.feed_event(json.dumps({"choices": [{"delta": {"content": "é" * 5}}]}))
    with pytest.raises(WireError, match="grew past 10 bytes"):
        answer.feed_event(json.dumps({"choices": [{"delta": {"content": "x"}}]}))


def test_endless_line_is_an_error() -> None:
    with pytest.raises(WireError, match="line longer than"):
        EventStreamDecoder().feed(b"data: " + b"x" * 70_000)


def test_a_long_line_sent_a_byte_at_a_time_costs_what_its_bytes_do() -> None:
    """Each piece is looked at, not the whole line held so far (which made this 8 s of the
    daemon's event loop), and the line is still read whole and bounded."""
    decoder, answer = EventStreamDecoder(), StreamedAnswer()
    # CPU time: what the work costs, not how long a loaded machine paused it
    started = time.process_time()
    for byte in (b": " + b"x" * (EVENT_LINE_MAX_BYTES - 3)).decode():
        assert decoder.feed(byte.encode()) == []
    for payload in decoder.feed(b"\n" + event("NOTHING", "stop")):
        answer.feed_event(payload)
    assert time.process_time() - started < 1.0
    assert answer.text() == "NOTHING"
    with pytest.raises(WireError, match="line longer"):
        for _ in range(EVENT_LINE_MAX_BYTES + 1):
            decoder.feed(b"y")


def test_endless_event_of_short_lines_is_an_error() -> None:
    decoder = EventStreamDecoder()
    line = b"data: " + b"x" * 1000 + b"\n"  # no blank line ever completes the event
    with pytest.raises(WireError, match="event larger than"):
        for _ in range(100):
            decoder.feed(line)


def test_invalid_utf8_is_an_error() -> None:
    with pytest.raises(WireError, match="not UTF-8"):
        EventStreamDecoder().feed(b"data: \xff\xfe\n")


def test_incomplete_stream_is_an_error() -> None:
    answer = StreamedAnswer()
    answer.feed_event(json.dumps({"choices": [{"delta": {"content": "half"}}]}))
    with pytest.raises(WireError, match="before the answer was complete"):
        answer.text()


@pytest.mark.parametrize(
    ("value", "expected"),
    [("7", 7.0), (" 1.5 ", 1.5), ("-3", 0.0), ("", None), (None, None), ("soon", None)],
)
def test_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now_epoch=1_000_000.0) == expected


def test_retry_after_http_date() -> None:
    now = 1_800_000_000.0
    assert parse_retry_after(email.utils.formatdate(now + 90, usegmt=True), now_epoch=now) == 90.0
    assert parse_retry_after(email.utils.formatdate(now - 90, usegmt=True), now_epoch=now) == 0.0


def test_error_reason_forms() -> None:
    assert error_reason(b'{"error": {"message": "no such model"}}') == "no such model"
    assert error_reason(b'{"error": "overloaded"}') == "overloaded"
    assert error_reason(b'{"detail": "Not Found"}') == "Not Found"
    assert error_reason(b"<h1>502\n\tBad</h1>") == "<h1>502 Bad</h1>"
    assert error_reason(b'{"error": {"message": "key sk-abc is bad"}}', secrets=("sk-abc",)) == (
        "key [key] is bad"
    )
    assert len(error_reason(b"x" * 5000)) == 200


TOKEN = "ghp_" + "Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA9eK2"


def test_error_reason_redacts_before_it_cuts() -> None:
    body = json.dumps({"error": {"message": "x" * 185 + " " + TOKEN}}).encode()
    reason = error_reason(body)
    assert reason == "x" * 185 + " …"  # before: the token's first 13 characters were kept
    marker_at_the_cut = json.dumps({"error": {"message": "x" * 190 + " " + TOKEN}}).encode()
    assert error_reason(marker_at_the_cut) == "x" * 190 + " …"  # no half marker either


def test_error_reason_masks_the_key_before_it_cuts() -> None:
    key = "local-server-key-8f3a9c2e7b1d4f6a"  # a format the detector does not know
    body = json.dumps({"error": {"message": "x" * 190 + " " + key}}).encode()
    assert error_reason(body, secrets=(key,)) == "x" * 190 + " [key]"


def test_error_reason_of_a_cut_body_drops_the_word_the_cut_went_through() -> None:
    assert error_reason(b"bad credentials " + TOKEN[:20].encode(), whole=False) == (
        "bad credentials"
    )
    cut_json = b'{"error": {"message": "bad credentials ' + TOKEN[:20].encode()
    assert error_reason(cut_json, whole=False) == "bad credentials"
    assert error_reason(b"bad credentials", whole=True) == "bad credentials"


@pytest.mark.parametrize("stream", [True, False])
def test_an_error_reported_inside_an_answer_is_masked_before_it_is_cut(stream: bool) -> None:
    key = "local-server-key-8f3a9c2e7b1d4f6a"
    error_object = json.dumps({"error": {"message": "x" * 190 + " " + key}})
    with pytest.raises(WireError) as caught:
        if stream:
            StreamedAnswer(secrets=(key,)).feed_event(error_object)
        else:
            completion_content(error_object.encode(), secrets=(key,))
    assert str(caught.value).endswith("x" * 190 + " [key]")


def test_completion_content() -> None:
    body = {"choices": [{"message": {"content": "NOTHING"}, "finish_reason": "stop"}]}
    assert completion_content(json.dumps(body).encode()) == "NOTHING"
    body["choices"][0]["finish_reason"] = "length"
    with pytest.raises(WireError, match="cut off"):
        completion_content(json.dumps(body).encode())
    with pytest.raises(WireError, match="no message content"):
        completion_content(b'{"choices": [{"message": {}}]}')


@pytest.mark.parametrize("module", ["orcad.providers.openai_wire", "orcad.providers.heuristic"])
def test_pure_modules_pull_in_no_trio_and_no_sqlite(module: str) -> None:
    watched = ("trio", "sqlite3", "httpx")
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m in {watched!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
