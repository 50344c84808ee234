"""Timestamps on disk and on the wire: RFC 3339 UTC with milliseconds, parsed back exactly."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orcad.clock import format_time, parse_time

pytestmark = pytest.mark.pure


def test_format_is_rfc3339_utc_with_milliseconds() -> None:
    assert format_time(0.0) == "1970-01-01T00:00:00.000Z"
    assert format_time(1_796_022_000.1239) == "2026-11-30T07:00:00.123Z"
    assert format_time(1_796_022_000.9999) == "2026-11-30T07:00:00.999Z"  # truncated, not rounded


@given(st.floats(min_value=0, max_value=4_102_444_800, allow_nan=False))
def test_milliseconds_are_truncated_and_parse_back(seconds: float) -> None:
    moment = datetime.fromtimestamp(seconds, UTC)
    expected = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    assert format_time(seconds) == expected
    assert parse_time(expected) == datetime.fromisoformat(expected).timestamp()
