"""The job state table: the allowed transitions, and every other one raises."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest

from orcad.capture.states import (
    ACTIVE_STATES,
    ALL_STATES,
    TERMINAL_STATES,
    TRANSITIONS,
    InvalidTransition,
    JobEvent,
    JobState,
    next_state,
)
from protocol.types import JobState as WireJobState

pytestmark = pytest.mark.pure

EXPECTED: dict[tuple[str, str], str] = {
    ("pending", "claim"): "leased",
    ("leased", "take_over"): "leased",
    ("leased", "renew"): "leased",
    ("leased", "publish"): "committed",
    ("leased", "fail"): "pending",
    ("leased", "fail_final"): "exhausted",
    ("leased", "expire_final"): "exhausted",
    ("leased", "release"): "pending",
    ("leased", "recover"): "pending",
    ("leased", "recover_final"): "exhausted",
    ("pending", "cancel"): "cancelled",
    ("leased", "cancel"): "cancelled",
    ("exhausted", "retry"): "pending",
}


def test_states_are_the_wire_states() -> None:
    assert set(ALL_STATES) == set(get_args(WireJobState))


def test_the_table_is_exactly_the_documented_one() -> None:
    assert dict(TRANSITIONS) == EXPECTED


@pytest.mark.parametrize(
    ("state", "event"), list(itertools.product(get_args(JobState), get_args(JobEvent)))
)
def test_every_pair_outside_the_table_raises(state: JobState, event: JobEvent) -> None:
    if (state, event) in EXPECTED:
        assert next_state(state, event) == EXPECTED[(state, event)]
    else:
        with pytest.raises(InvalidTransition):
            next_state(state, event)


def test_terminal_states_have_no_way_out_but_a_requested_retry() -> None:
    ways_out = [pair for pair in TRANSITIONS if pair[0] in TERMINAL_STATES]
    assert ways_out == [("exhausted", "retry")]  # jobs.retry only; no worker event leaves one


def test_only_pending_and_leased_count_against_the_backlog() -> None:
    assert {"pending", "leased"} == ACTIVE_STATES
    assert {"committed", "exhausted", "cancelled"} == TERMINAL_STATES
    assert "exhausted" not in ACTIVE_STATES  # spec: exhausted jobs no longer consume capacity
