"""The approval flow of a memory change (memory.manage, then memory.approve): its fields
checked, the policy's decision with the grants that count, the question a user approves on,
the check that the record is still as the user was shown it, and the grant an approval gives.
The service (orcad.deliberate.service) orders these steps among the others of a change.
"""

from __future__ import annotations

import re

import msgspec
import structlog

from orcad.clock import Clock, format_time
from orcad.control_characters import escape_control_characters, has_visible_character
from orcad.deliberate import policy
from orcad.deliberate.approvals import (
    PendingApprovals,
    PendingChange,
    SessionGrants,
    new_approval_id,
)
from orcad.deliberate.policy import PolicyDecision
from orcad.deliberate.queries import GLOBAL_GRANT_KEY, StoredRecord
from orcad.deliberate.store import DeliberateStore
from orcad.errors import Conflict, InvalidParams
from orcad.limits import APPROVAL_TTL_S, MEMORY_CONTENT_MAX_CHARS
from orcad.secrets import redact
from orcad.session_snapshot import Session
from protocol.types import ApprovalDecision, MemoryManageParams, MemoryManageResult, MemoryRecord

log = structlog.get_logger("orcad.deliberate")

PREVIEW_CHARS = 60
# A prompt offers "this workspace" for every change; on a global change that grant is wider.
GLOBAL_GRANT_NOTE = (
    " Allowing it for the workspace allows every later change to global memory, from any "
    "workspace, without asking."
)


def scope_name(record: StoredRecord) -> str:
    return "global" if record.is_global else "workspace"


def to_wire(record: StoredRecord) -> MemoryRecord:
    return MemoryRecord(
        id=record.id,
        kind=record.kind,
        content=record.content,
        scope="global" if record.is_global else "workspace",
        workspace_root=record.workspace_root,
        created_at=format_time(record.created_at),
        updated_at=format_time(record.updated_at),
    )


# what a one-line quote joins with a space; other separators (\x1c, NEL) are written out
_LINE_BREAKS = re.compile(r"[ \t\n\r\f\v\u2028\u2029]+")


def preview(content: str, *, whole: bool = False) -> str:
    """One line, secrets redacted, controls and bidirectional overrides written out (a summary
    is the question a user approves on): what a summary quotes of the content. Short, unless
    `whole`: the question quotes all of it, since what it leaves out would be stored unseen."""
    line = escape_control_characters(_LINE_BREAKS.sub(" ", redact(content)).strip())
    if whole or len(line) <= PREVIEW_CHARS:
        return line
    return line[: PREVIEW_CHARS - 1] + "…"


# Line breaks and other control characters a directory name may hold: a summary is one line.
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def scope_phrase(is_global: bool, root: str) -> str:
    shown = escape_control_characters(_CONTROL.sub(lambda m: ascii(m.group())[1:-1], root))
    return "global memory" if is_global else f"workspace memory ({shown})"


def validate_change(params: MemoryManageParams) -> PendingChange:
    """The requested change with its fields checked (-32602 naming the field)."""

    def forbid(field: str, why: str) -> None:
        if getattr(params, field) is not None:
            raise InvalidParams(
                f"`{field}` is not accepted for {params.action}: {why}", field=field
            )

    content = None if params.content is None else params.content.strip()
    if content is not None:
        if not content:
            raise InvalidParams("`content` must not be blank", field="content")
        if not has_visible_character(content):
            raise InvalidParams(
                "`content` holds only control or invisible characters", field="content"
            )
        if len(content) > MEMORY_CONTENT_MAX_CHARS:
            raise InvalidParams(
                f"`content` has {len(content)} characters; the limit is {MEMORY_CONTENT_MAX_CHARS}",
                field="content",
            )
    if params.action == "save":
        forbid("id", "a new record gets its id from the daemon")
        for field in ("content", "kind", "is_global"):
            if getattr(params, field) is None:
                raise InvalidParams(f"save requires `{field}`", field=field)
    elif params.action == "update":
        if params.id is None:
            raise InvalidParams("update requires `id`", field="id")
        forbid("is_global", "a record keeps its scope; save a new one and forget this one")
        if content is None and params.kind is None:
            raise InvalidParams("update requires `content` or `kind`", field="content")
    else:
        if params.id is None:
            raise InvalidParams("forget requires `id`", field="id")
        forbid("content", "forget takes only the id")
        forbid("kind", "forget takes only the id")
        forbid("is_global", "forget takes only the id")
    return PendingChange(
        approval_id="",
        session_id=params.session_id,
        epoch=params.epoch,
        action=params.action,
        record_id=params.id,
        content=content,
        kind=params.kind,
        is_global=params.is_global,
        created_at=0.0,
    )


class ApprovalFlow:
    """The approvals of one service: changes waiting for the user, and the grants that skip
    the question (session grants here, workspace and global grants in the store)."""

    def __init__(self, store: DeliberateStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.pending = PendingApprovals()
        self.session_grants = SessionGrants()

    async def decide(self, session: Session, *, is_global: bool | None) -> PolicyDecision:
        """`is_global`: the scope the change touches (None: unknown yet, so no grant counts).

        A grant covers the scope it was given for: a workspace grant that workspace's records,
        the global grant global memory."""
        granted = False
        asks = session.mode == "normal" and session.interactive and not session.auto_approve
        if asks and is_global is not None:
            granted = self.session_grants.covers(
                session.session_id, is_global=is_global, workspace_root=session.workspace_root
            )
            grant_key = GLOBAL_GRANT_KEY if is_global else session.workspace_id
            granted = granted or await self._store.has_workspace_grant(grant_key)
        return policy.decide(
            mode=session.mode,
            interactive=session.interactive,
            auto_approve=session.auto_approve,
            granted=granted,
        )

    def ask(
        self, session: Session, change: PendingChange, target: StoredRecord | None
    ) -> MemoryManageResult:
        now = self._clock.monotonic()  # the wait is timed here, wherever the wall clock is set
        pending = msgspec.structs.replace(
            change,
            approval_id=new_approval_id(),
            created_at=now,
            shown=None if target is None else (target.content, target.kind),
        )
        self.pending.add(pending, now)
        log.info("memory.pending", approval_id=pending.approval_id, action=change.action)
        return MemoryManageResult(
            outcome="pending_approval",
            approval_id=pending.approval_id,
            reason=f"waiting for the user (memory.approve {pending.approval_id}, valid "
            f"{APPROVAL_TTL_S:.0f} s)",
            record=to_wire(target) if target is not None else None,
            summary=f"Approval needed to {describe(session, change, target, whole=True)}."
            + (GLOBAL_GRANT_NOTE if changes_global(change, target) else ""),
        )

    async def grant(self, session: Session, decision: ApprovalDecision, *, is_global: bool) -> None:
        """Keep the grant an approval gives, for the scope the change touches: allow_session
        for the session, allow_workspace for the workspace (for a global change: the global
        grant); allow_once and deny give none."""
        now = self._clock.now()
        if decision == "allow_session":
            self.session_grants.grant(
                session.session_id,
                is_global=is_global,
                workspace_root=session.workspace_root,
                now=now,
            )
        elif decision == "allow_workspace":  # for a global change: the global grant
            if is_global:
                await self._store.add_workspace_grant(GLOBAL_GRANT_KEY, "", now)
            else:
                await self._store.add_workspace_grant(
                    session.workspace_id, session.workspace_root, now
                )


def denied(
    session: Session, change: PendingChange, reason: str, target: StoredRecord | None
) -> MemoryManageResult:
    log.info("memory.denied", action=change.action)
    return MemoryManageResult(
        outcome="denied",
        approval_id=None,
        reason=reason,
        record=to_wire(target) if target is not None else None,
        summary=f"Nothing changed; denied: {describe(session, change, target)} ({reason}).",
    )


def describe(
    session: Session, change: PendingChange, target: StoredRecord | None, *, whole: bool = False
) -> str:
    """The proposed change in words, one line: what and in which scope (`whole`: every word of
    the texts it quotes, for the approval question)."""
    if change.action == "save":
        scope = scope_phrase(bool(change.is_global), session.workspace_root)
        return f'save {scope} ({change.kind}): "{preview(change.content or "", whole=whole)}"'
    assert target is not None
    scope = scope_phrase(target.is_global, target.workspace_root)
    if change.action == "forget":
        return f'forget {scope} {target.id}: "{preview(target.content, whole=whole)}"'
    new_content = change.content if change.content is not None else target.content
    return (
        f"update {scope} {target.id} ({change.kind or target.kind}): "
        f'"{preview(target.content, whole=whole)}" -> "{preview(new_content, whole=whole)}"'
    )


def check_unchanged(change: PendingChange, target: StoredRecord | None) -> None:
    """Conflict when another change rewrote the record after the user was asked: the approval
    was given for the text and kind the summary showed, not for what replaced them."""
    if change.shown is None or target is None or change.shown == (target.content, target.kind):
        return
    raise changed_meanwhile(change, target)


def changed_meanwhile(change: PendingChange, record: StoredRecord) -> Conflict:
    """The refusal of an approved change whose record now holds something else (`record`)."""
    return Conflict(
        f"memory record {record.id} changed after this {change.action} was proposed (it now "
        f'says "{preview(record.content)}"); nothing was changed or granted: propose it '
        "again against the record as it is now"
    )


def changes_global(change: PendingChange, target: StoredRecord | None) -> bool:
    """Whether the change touches global memory (a save's scope, else its target's)."""
    if target is not None:
        return target.is_global
    return bool(change.is_global)
