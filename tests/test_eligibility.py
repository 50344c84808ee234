"""Which completed turns become extraction jobs (spec: What Is Captured), as a table."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from orcad.capture.eligibility import TurnFacts, ineligible_reason

pytestmark = pytest.mark.pure

ELIGIBLE: dict[str, Any] = {
    "bare": False,
    "auto_memory": True,
    "history": "persistent",
    "root": True,
    "subagent": False,
    "outcome": "succeeded",
    "verifier": "passed",
    "transcript_committed": True,
}


def turn(**changes: Any) -> TurnFacts:
    return TurnFacts(**{**ELIGIBLE, **changes})


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({}, None),
        ({"verifier": "none"}, None),  # no verifier configured: success is enough
        ({"auto_memory": False}, "auto_memory_disabled"),
        ({"history": "disabled"}, "history_disabled"),
        ({"bare": True}, "bare"),
        ({"root": False}, "not_root"),
        ({"subagent": True}, "subagent"),
        ({"outcome": "failed"}, "failed"),
        ({"outcome": "cancelled"}, "cancelled"),
        ({"verifier": "failed"}, "verifier_failed"),
        ({"transcript_committed": False}, "transcript_not_committed"),
    ],
)
def test_each_rule_alone_decides(changes: dict[str, Any], reason: str | None) -> None:
    assert ineligible_reason(turn(**changes)) == reason


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        # a bare session reports `bare`, although its snapshot also has auto memory off
        ({"bare": True, "auto_memory": False, "outcome": "failed"}, "bare"),
        ({"auto_memory": False, "history": "disabled"}, "auto_memory_disabled"),
        ({"history": "disabled", "subagent": True}, "history_disabled"),
        # a subagent turn is usually also not a root turn; the more specific reason wins
        ({"subagent": True, "root": False}, "subagent"),
        ({"root": False, "outcome": "failed"}, "not_root"),
        ({"outcome": "cancelled", "verifier": "failed"}, "cancelled"),
        ({"verifier": "failed", "transcript_committed": False}, "verifier_failed"),
    ],
)
def test_session_switches_first_then_turn_kind_then_ending_then_durability(
    changes: dict[str, Any], reason: str
) -> None:
    assert ineligible_reason(turn(**changes)) == reason


def test_every_combination_is_eligible_only_when_all_four_conditions_hold() -> None:
    for bare, auto, history, root, sub, outcome, verifier, committed in itertools.product(
        (False, True),
        (False, True),
        ("persistent", "disabled"),
        (False, True),
        (False, True),
        ("succeeded", "failed", "cancelled"),
        ("passed", "failed", "none"),
        (False, True),
    ):
        facts = TurnFacts(
            bare=bare,
            auto_memory=auto,
            history=history,  # type: ignore[arg-type]
            root=root,
            subagent=sub,
            outcome=outcome,  # type: ignore[arg-type]
            verifier=verifier,  # type: ignore[arg-type]
            transcript_committed=committed,
        )
        expected = (
            not bare
            and auto
            and history == "persistent"
            and root
            and not sub
            and outcome == "succeeded"
            and verifier != "failed"
            and committed
        )
        assert (ineligible_reason(facts) is None) == expected, facts
