"""Who may change deliberate memory without asking: one pure decision per mutation.

The table (deliberate spec, Inspect and manage records): plan mode denies; normal mode applies
when a grant covers the scope the change touches, or auto_approve is set, else asks an interactive
user and denies a headless one; auto mode sends the change through the automatic review; yolo
applies. Secrets and exact duplicates are refused before this decision, in every mode.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from protocol.types import Mode

Action = Literal["apply", "ask", "deny", "review"]


class PolicyDecision(msgspec.Struct, frozen=True, kw_only=True):
    action: Action
    reason: str | None = None


PLAN_MODE_DENIAL = "plan mode is read-only: memory changes are denied"
HEADLESS_DENIAL = (
    "headless normal mode denies memory changes; open the session with auto_approve "
    "or interactive to allow them"
)


def decide(*, mode: Mode, interactive: bool, auto_approve: bool, granted: bool) -> PolicyDecision:
    """What to do with one memory change; `granted` = a grant covers the change's scope (a
    workspace grant covers that workspace's records, only the global grant covers global ones).

    Grants come from an interactive user's approvals, so they count in interactive normal mode
    only; a headless session needs auto_approve.
    """
    if mode == "plan":
        return PolicyDecision(action="deny", reason=PLAN_MODE_DENIAL)
    if mode == "yolo":
        return PolicyDecision(action="apply")
    if mode == "auto":
        return PolicyDecision(action="review")
    if auto_approve:
        return PolicyDecision(action="apply")
    if not interactive:
        return PolicyDecision(action="deny", reason=HEADLESS_DENIAL)
    if granted:
        return PolicyDecision(action="apply")
    return PolicyDecision(action="ask")
