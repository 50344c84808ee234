"""The pure parts of deliberate memory: the policy table, the automatic review, approvals."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from orcad import limits
from orcad.deliberate.approvals import (
    PendingApprovals,
    PendingChange,
    SessionGrants,
    is_expired,
    new_approval_id,
    parse_grant_id,
)
from orcad.deliberate.policy import decide
from orcad.deliberate.review import is_transient_note, review_content
from orcad.errors import Busy, InvalidParams, NotFound
from orcad.limits import (
    APPROVAL_TTL_S,
    AUTO_REVIEW_MAX_CHARS,
    PENDING_APPROVALS_CEILING,
    PENDING_APPROVALS_MAX,
    PENDING_APPROVALS_PER_SESSION,
)
from protocol.types import MemorySearchParams

pytestmark = pytest.mark.pure

MODES = ("normal", "plan", "auto", "yolo")


def expected_action(mode: str, interactive: bool, auto_approve: bool, granted: bool) -> str:
    if mode == "plan":
        return "deny"
    if mode == "yolo":
        return "apply"
    if mode == "auto":
        return "review"
    if auto_approve:
        return "apply"
    if not interactive:
        return "deny"
    return "apply" if granted else "ask"


@pytest.mark.parametrize(
    ("mode", "interactive", "auto_approve", "granted"),
    list(itertools.product(MODES, (True, False), (True, False), (True, False))),
)
def test_policy_table(mode: str, interactive: bool, auto_approve: bool, granted: bool) -> None:
    decision = decide(
        mode=mode, interactive=interactive, auto_approve=auto_approve, granted=granted
    )  # type: ignore[arg-type]
    assert decision.action == expected_action(mode, interactive, auto_approve, granted)
    assert (decision.reason is not None) == (decision.action == "deny")


def test_plan_and_headless_denials_say_why() -> None:
    plan = decide(mode="plan", interactive=True, auto_approve=True, granted=True)
    assert plan.reason is not None and "plan mode" in plan.reason
    headless = decide(mode="normal", interactive=False, auto_approve=False, granted=True)
    assert headless.reason is not None and "auto_approve" in headless.reason


@pytest.mark.parametrize(
    "content",
    [
        "I prefer concise status updates",
        "release checks use cargo test --workspace",
        "The project uses trio, never asyncio",
        "Deploys go through the staging cluster first",
    ],
)
def test_review_accepts_durable_facts(content: str) -> None:
    assert review_content(content, duplicate_id=None).accepted


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("deploy key is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "secret"),
        ("password=" + "Xk9#mQ2$vL7pWz4!", "secret"),
        ("x" * (AUTO_REVIEW_MAX_CHARS + 1), "limit"),
        ("Currently working on the parser refactor", "progress"),
        ("I'm fixing the flaky socket test", "progress"),
        ("WIP: migrating the job store", "progress"),
        ("Just finished step 3 of 5", "progress"),
        ("3 of 10 tests passing so far", "progress"),
    ],
)
def test_review_refuses_and_says_why(content: str, why: str) -> None:
    verdict = review_content(content, duplicate_id=None)
    assert not verdict.accepted
    assert verdict.reason is not None and why in verdict.reason


def test_review_size_boundary() -> None:
    assert review_content("y" * AUTO_REVIEW_MAX_CHARS, duplicate_id=None).accepted
    assert not review_content("y" * (AUTO_REVIEW_MAX_CHARS + 1), duplicate_id=None).accepted


def test_review_refuses_exact_duplicates_naming_the_record() -> None:
    verdict = review_content("I prefer tabs", duplicate_id="mem_" + "0" * 32)
    assert not verdict.accepted
    assert verdict.reason is not None and "mem_" + "0" * 32 in verdict.reason


def test_transient_detector_leaves_durable_wording_alone() -> None:
    assert not is_transient_note("Progress bars use the rich library")
    assert not is_transient_note("The session store persists epochs in SQLite")
    assert is_transient_note("At the moment the build is red")


def change(session_id: str = "ses_a", created_at: float = 1000.0) -> PendingChange:
    return PendingChange(
        approval_id=new_approval_id(),
        session_id=session_id,
        epoch=1,
        action="save",
        record_id=None,
        content="I prefer tabs",
        kind="preference",
        is_global=False,
        created_at=created_at,
    )


def test_approval_ids_are_apr_and_32_hex() -> None:
    approval_id = new_approval_id()
    assert approval_id.startswith("apr_") and len(approval_id) == 36
    int(approval_id[4:], 16)
    assert approval_id != new_approval_id()


def test_expiry_boundary() -> None:
    pending = change(created_at=1000.0)
    assert not is_expired(pending, 1000.0 + APPROVAL_TTL_S - 0.001)
    assert is_expired(pending, 1000.0 + APPROVAL_TTL_S)


def test_take_is_single_use_and_bound_to_its_session_epoch() -> None:
    approvals = PendingApprovals()
    pending = change()
    approvals.add(pending, now=1000.0)
    with pytest.raises(NotFound):
        approvals.take(pending.approval_id, "ses_other", 1, now=1001.0)
    with pytest.raises(NotFound):
        approvals.take(pending.approval_id, "ses_a", 2, now=1001.0)
    assert approvals.take(pending.approval_id, "ses_a", 1, now=1001.0) == pending
    with pytest.raises(NotFound):
        approvals.take(pending.approval_id, "ses_a", 1, now=1001.0)


def test_take_after_expiry_fails_and_consumes() -> None:
    approvals = PendingApprovals()
    pending = change()
    approvals.add(pending, now=1000.0)
    with pytest.raises(NotFound, match="expired") as expired:
        approvals.take(pending.approval_id, "ses_a", 1, now=1000.0 + APPROVAL_TTL_S)
    assert len(approvals) == 0
    # the message is read by a terminal's user as well as by a model: no wire method to call
    assert expired.value.message.endswith("it was proposed; propose the change again")


def test_expired_changes_are_dropped_and_a_session_over_its_bound_is_refused() -> None:
    approvals = PendingApprovals()
    approvals.add(change(created_at=0.0), now=0.0)
    approvals.add(change(created_at=APPROVAL_TTL_S), now=APPROVAL_TTL_S)
    assert len(approvals) == 1
    many = [change(created_at=APPROVAL_TTL_S) for _ in range(PENDING_APPROVALS_PER_SESSION - 1)]
    for pending in many:
        approvals.add(pending, now=APPROVAL_TTL_S)
    assert len(approvals) == PENDING_APPROVALS_PER_SESSION
    over = change(created_at=APPROVAL_TTL_S)
    with pytest.raises(Busy, match="this session already has 16 memory changes waiting"):
        approvals.add(over, now=APPROVAL_TTL_S)
    assert len(approvals) == PENDING_APPROVALS_PER_SESSION  # nothing kept, nothing dropped
    with pytest.raises(NotFound):
        approvals.take(over.approval_id, "ses_a", 1, now=APPROVAL_TTL_S)
    assert approvals.take(many[0].approval_id, "ses_a", 1, now=APPROVAL_TTL_S) == many[0]
    approvals.add(over, now=APPROVAL_TTL_S)  # one decided makes room for one
    assert approvals.take(over.approval_id, "ses_a", 1, now=APPROVAL_TTL_S) == over


def test_a_reopened_sessions_older_changes_do_not_count_against_it() -> None:
    approvals = PendingApprovals(max_per_session=1)
    approvals.add(change(), now=1000.0)
    reopened = msgspec.structs.replace(change(), epoch=2)
    approvals.add(reopened, now=1000.0)  # the epoch-1 change can no longer be approved
    assert len(approvals) == 1


def test_session_grants_cover_their_session_and_scope_only() -> None:
    grants = SessionGrants()
    assert not grants.covers("ses_a", is_global=False, workspace_root="/ws")
    grants.grant("ses_a", is_global=False, workspace_root="/ws", now=1.0)
    assert grants.covers("ses_a", is_global=False, workspace_root="/ws")
    assert not grants.covers("ses_a", is_global=True, workspace_root="/ws")
    assert not grants.covers("ses_b", is_global=False, workspace_root="/ws")
    assert [g.session_id for g in grants.all()] == ["ses_a"]
    assert grants.revoke("ses_a", is_global=False)
    assert not grants.revoke("ses_a", is_global=False)
    assert not grants.covers("ses_a", is_global=False, workspace_root="/ws")


def test_a_session_workspace_grant_covers_the_workspace_it_was_given_in() -> None:
    # the same session id reopened in another workspace is asked again there
    grants = SessionGrants()
    grants.grant("ses_a", is_global=False, workspace_root="/a", now=1.0)
    assert not grants.covers("ses_a", is_global=False, workspace_root="/b")
    grants.grant("ses_a", is_global=False, workspace_root="/b", now=2.0)
    assert grants.covers("ses_a", is_global=False, workspace_root="/b")
    assert [g.workspace_root for g in grants.all()] == ["/b"]
    # global memory is one scope wherever the session is
    grants.grant("ses_a", is_global=True, workspace_root="/a", now=3.0)
    assert grants.covers("ses_a", is_global=True, workspace_root="/c")
    grants.drop_session("ses_a")
    assert grants.all() == []


def test_many_sessions_proposing_cannot_push_out_anothers_change() -> None:
    # a client can open as many sessions as it likes: past the ceiling for all sessions a new
    # change is refused, and every change already waiting stays approvable
    approvals = PendingApprovals()
    mine = change(session_id="ses_b", created_at=0.0)
    approvals.add(mine, now=0.0)
    ceiling = PENDING_APPROVALS_CEILING
    flood = [change(session_id=f"ses_{n}", created_at=1.0) for n in range(ceiling)]
    for pending in flood[:-1]:
        approvals.add(pending, now=1.0)
    assert len(approvals) == ceiling
    with pytest.raises(Busy, match="512 memory changes from all sessions are waiting"):
        approvals.add(flood[-1], now=1.0)
    assert len(approvals) == ceiling
    assert approvals.take(mine.approval_id, "ses_b", 1, now=2.0) == mine
    assert approvals.take(flood[0].approval_id, "ses_0", 1, now=2.0) == flood[0]
    approvals.add(flood[-1], now=2.0)


def test_sessions_that_filled_the_bound_do_not_silence_a_session_with_none_waiting() -> None:
    # one client, 16 sessions of 16 changes each: the bound for all sessions is full, yet a
    # session with nothing waiting still asks its user; the full sessions are refused
    approvals = PendingApprovals()
    per_session = PENDING_APPROVALS_PER_SESSION
    for n in range(PENDING_APPROVALS_MAX // per_session):
        for _ in range(per_session - 1):
            approvals.add(change(session_id=f"ses_flood_{n}"), now=1000.0)
    approvals.add(change(session_id="ses_flood_one"), now=1000.0)  # a session holding one
    for _ in range(per_session - 1):
        approvals.add(change(session_id="ses_flood_last"), now=1000.0)
    assert len(approvals) == PENDING_APPROVALS_MAX
    newcomer = change(session_id="ses_user")
    approvals.add(newcomer, now=1000.0)
    with pytest.raises(Busy, match="this session has 1 of them"):
        approvals.add(change(session_id="ses_user"), now=1000.0)
    with pytest.raises(Busy, match="this session has 1 of them"):
        approvals.add(change(session_id="ses_flood_one"), now=1000.0)
    assert len(approvals) == PENDING_APPROVALS_MAX + 1
    assert approvals.take(newcomer.approval_id, "ses_user", 1, now=1001.0) == newcomer


@pytest.mark.parametrize(
    ("grant_id", "parsed"),
    [
        ("global", ("global", "", True)),
        ("workspace:" + "a" * 64, ("workspace", "a" * 64, False)),
        ("session:ses_1:workspace", ("session", "ses_1", False)),
        ("session:my:odd:id:global", ("session", "my:odd:id", True)),
    ],
)
def test_grant_ids_parse(grant_id: str, parsed: tuple[str, str, bool]) -> None:
    assert parse_grant_id(grant_id) == parsed


@pytest.mark.parametrize(
    "grant_id", ["", "Global", "workspace:xyz", "session::global", "session:ses_1:everything", "x"]
)
def test_malformed_grant_ids_are_refused(grant_id: str) -> None:
    with pytest.raises(InvalidParams) as raised:
        parse_grant_id(grant_id)
    assert "grant_id" in str(raised.value)


@pytest.mark.parametrize(
    "module", ["orcad.deliberate.policy", "orcad.deliberate.review", "orcad.deliberate.approvals"]
)
def test_pure_modules_import_neither_trio_nor_sqlite(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "bad = {'trio', 'sqlite3', '_sqlite3'} & set(sys.modules); "
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_numbers_the_deliberate_spec_fixes() -> None:
    # every other test reads these from orcad.limits, so a changed value would pass them all
    assert limits.SEARCH_LIMIT_MIN == 1 and limits.SEARCH_LIMIT_MAX == 20
    assert limits.SEARCH_LIMIT_DEFAULT == 8
    assert limits.QUERY_MAX_TERMS == 12
    assert limits.RECALL_DELIBERATE_MAX_RECORDS == 8
    assert limits.RECALL_DELIBERATE_MAX_CHARS == 4096
    assert limits.MEMORY_CONTENT_MAX_CHARS == 4096  # a record never exceeds recall's budget
    # the wire contract says the same as the daemon, for Python clients and the others alike
    assert MemorySearchParams(session_id="s", epoch=1).limit == limits.SEARCH_LIMIT_DEFAULT
    schema = json.loads((Path(__file__).parent.parent / "protocol" / "schema.json").read_text())
    limit = schema["$defs"]["MemorySearchParams"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (
        limits.SEARCH_LIMIT_MIN,
        limits.SEARCH_LIMIT_MAX,
        limits.SEARCH_LIMIT_DEFAULT,
    )
