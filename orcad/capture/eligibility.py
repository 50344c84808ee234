"""Which completed turns may become extraction jobs (spec: What Is Captured).

Pure: the caller gathers the session snapshot and the report into `TurnFacts`; `ineligible_reason`
answers with the first rule the turn breaks, in a fixed order, or None. `no_content` and
`backlog_full` are decided later, once the source is built and the project's jobs are counted.
"""

from __future__ import annotations

from typing import Literal

import msgspec

IneligibleReason = Literal[
    "auto_memory_disabled",
    "history_disabled",
    "bare",
    "not_root",
    "subagent",
    "failed",
    "cancelled",
    "verifier_failed",
    "transcript_not_committed",
    "no_content",
    "backlog_full",
]


class TurnFacts(msgspec.Struct, frozen=True, kw_only=True):
    bare: bool  # session snapshot
    auto_memory: bool  # session snapshot, taken at session.open
    history: Literal["persistent", "disabled"]  # session snapshot
    root: bool
    subagent: bool
    outcome: Literal["succeeded", "failed", "cancelled"]
    verifier: Literal["passed", "failed", "none"]
    transcript_committed: bool


def ineligible_reason(turn: TurnFacts) -> IneligibleReason | None:
    """The first capture rule this turn breaks, or None when it may be captured.

    Session-wide switches come first (they say why nothing from this session is captured), then
    what kind of turn it is, then how it ended, then whether its record is durable.
    """
    if turn.bare:
        return "bare"  # a bare session has auto memory off regardless of config
    if not turn.auto_memory:
        return "auto_memory_disabled"
    if turn.history != "persistent":
        return "history_disabled"
    if turn.subagent:
        return "subagent"
    if not turn.root:
        return "not_root"
    if turn.outcome == "failed":
        return "failed"
    if turn.outcome == "cancelled":
        return "cancelled"
    if turn.verifier == "failed":
        return "verifier_failed"
    if not turn.transcript_committed:
        return "transcript_not_committed"
    return None
