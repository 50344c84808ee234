"""The job state machine: every state and every allowed transition, in one table.

    pending  --claim-------------> leased      a worker takes the job (new fencing token)
    leased   --take_over---------> leased      an expired lease is claimed by another worker
    leased   --renew-------------> leased      the holder extends its lease
    leased   --publish-----------> committed   the holder's facts are in the ledger
    leased   --fail--------------> pending     a failed attempt with retries left
    leased   --fail_final--------> exhausted   a failed attempt with no retries left
    leased   --expire_final------> exhausted   an expired lease was the last allowed attempt
    leased   --release-----------> pending     cancellation: no attempt is used
    leased   --recover-----------> pending     the daemon that held it is gone (restart)
    leased   --recover_final-----> exhausted   ... for the RECOVERIES_MAX-th time
    pending  --cancel------------> cancelled   reserved: no protocol-1 method cancels a job
    leased   --cancel------------> cancelled
    exhausted --retry------------> pending     a person asked for another round (jobs.retry)

committed, exhausted and cancelled are terminal for workers; only a person's jobs.retry brings
an exhausted job back. Pure module.
"""

from __future__ import annotations

from typing import Literal

JobState = Literal["pending", "leased", "committed", "exhausted", "cancelled"]
JobEvent = Literal[
    "claim",
    "take_over",
    "renew",
    "publish",
    "fail",
    "fail_final",
    "expire_final",
    "release",
    "recover",
    "recover_final",
    "cancel",
    "retry",
]

ALL_STATES: tuple[JobState, ...] = ("pending", "leased", "committed", "exhausted", "cancelled")
ACTIVE_STATES: frozenset[JobState] = frozenset({"pending", "leased"})  # count against the backlog
TERMINAL_STATES: frozenset[JobState] = frozenset({"committed", "exhausted", "cancelled"})
ENDED_STATES: frozenset[JobState] = frozenset({"exhausted", "cancelled"})  # ended, uncommitted

TRANSITIONS: dict[tuple[JobState, JobEvent], JobState] = {
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


class InvalidTransition(ValueError):
    """A job was asked to move along an edge the table does not have (a bug, never input)."""

    def __init__(self, state: str, event: str) -> None:
        super().__init__(f"job state {state!r} has no transition {event!r}")
        self.state = state
        self.event = event


def next_state(state: JobState, event: JobEvent) -> JobState:
    """The state after `event`; InvalidTransition for any edge not in TRANSITIONS."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise InvalidTransition(state, event) from None


def is_active(state: JobState) -> bool:
    return state in ACTIVE_STATES
