"""Pending memory changes waiting for memory.approve, and the grants that skip the prompt.

Pending approvals live in memory only: each belongs to one session epoch (a reopened session
may have another mode or workspace than the one the user was asked about), expires `APPROVAL_TTL_S`
after it was created, and is removed by the first memory.approve that names it (single use).
None is ever pushed out to make room: beyond a bound per session and one for all, a new one is
refused instead; past the bound for all, a session with none waiting may still propose one (up
to a ceiling), so a client that filled the bound with many sessions does not silence the others.
An update or forget keeps the record as the user was shown it: approved, it applies only to
that record as it still is.
Session grants are in memory, and end when their session closes or expires;
workspace and global grants are persisted by the store, in the deliberate database next to the
records they guard, so they survive restarts and go away with that database. A grant covers the
scope of the change it was given for: a workspace's records, or global memory.
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict

import msgspec

from orcad.errors import Busy, InvalidParams, NotFound, quoted
from orcad.limits import (
    APPROVAL_TTL_S,
    PENDING_APPROVALS_CEILING,
    PENDING_APPROVALS_MAX,
    PENDING_APPROVALS_PER_SESSION,
)
from protocol.types import GrantScope, ManageAction, RecordKind

APPROVAL_ID_PREFIX = "apr_"


class PendingChange(msgspec.Struct, frozen=True, kw_only=True):
    approval_id: str
    session_id: str
    epoch: int  # the proposing session's epoch: a reopen voids its pending changes
    action: ManageAction
    record_id: str | None  # update and forget
    content: str | None  # save and update
    kind: RecordKind | None
    is_global: bool | None  # save
    created_at: float  # Clock.monotonic(): a wall clock set back would keep it valid longer
    # update and forget: the record's text and kind as the summary quoted them to the user
    shown: tuple[str, RecordKind] | None = None

    def expires_at(self) -> float:
        return self.created_at + APPROVAL_TTL_S


def is_expired(change: PendingChange, now: float) -> bool:
    """Expired from `created_at + APPROVAL_TTL_S` on (the boundary itself is expired)."""
    return now >= change.expires_at()


def new_approval_id() -> str:
    return APPROVAL_ID_PREFIX + secrets.token_hex(16)


class PendingApprovals:
    """Pending changes by approval id, oldest first. Touched only from the event loop."""

    def __init__(
        self,
        max_pending: int = PENDING_APPROVALS_MAX,
        max_per_session: int = PENDING_APPROVALS_PER_SESSION,
        ceiling: int = PENDING_APPROVALS_CEILING,
    ) -> None:
        self._pending: OrderedDict[str, PendingChange] = OrderedDict()
        self._max_pending = max_pending
        self._max_per_session = max_per_session
        self._ceiling = ceiling

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, change: PendingChange, now: float) -> None:
        """Keep `change`, or refuse it with Busy (nothing kept) when its session already has
        `max_per_session` waiting, or all sessions together `max_pending` while it has some
        waiting, or `ceiling` in any case: no change waiting for its user is ever pushed out by
        another, so a client opening many sessions cannot make another session's approval fail,
        and a session with nothing waiting can still ask until the ceiling."""
        self.drop_expired(now)
        self._drop_older_epochs(change.session_id, change.epoch)
        mine = sum(
            1 for pending in self._pending.values() if pending.session_id == change.session_id
        )
        if mine >= self._max_per_session:
            raise Busy(
                f"this session already has {mine} memory changes waiting for the user; decide "
                f"them with memory.approve or let them expire ({APPROVAL_TTL_S:.0f} s after "
                "each was proposed), then propose the change again; nothing was changed"
            )
        if mine and len(self._pending) >= self._max_pending:
            raise Busy(
                f"{len(self._pending)} memory changes from all sessions are waiting for their "
                f"users and this session has {mine} of them; past {self._max_pending} only a "
                "session with none waiting may propose one: decide this session's with "
                f"memory.approve or let them expire ({APPROVAL_TTL_S:.0f} s after each was "
                "proposed), then propose the change again; nothing was changed"
            )
        if len(self._pending) >= self._ceiling:
            raise Busy(
                f"{len(self._pending)} memory changes from all sessions are waiting for their "
                f"users, the most orcad keeps; propose the change again once some are "
                f"decided or expired ({APPROVAL_TTL_S:.0f} s after each was proposed); nothing "
                "was changed"
            )
        self._pending[change.approval_id] = change

    def _drop_older_epochs(self, session_id: str, epoch: int) -> None:
        """The session's changes from before a reopen: no call can approve them any more."""
        for approval_id in [
            a for a, p in self._pending.items() if p.session_id == session_id and p.epoch < epoch
        ]:
            del self._pending[approval_id]

    def drop_session(self, session_id: str) -> None:
        """A closed session's changes can no longer be approved."""
        for approval_id in [a for a, p in self._pending.items() if p.session_id == session_id]:
            del self._pending[approval_id]

    def drop_expired(self, now: float) -> None:
        for approval_id in [a for a, change in self._pending.items() if is_expired(change, now)]:
            del self._pending[approval_id]

    def take(self, approval_id: str, session_id: str, epoch: int, now: float) -> PendingChange:
        """Remove and return the session's pending change; NotFound if unknown, used or expired."""
        change = self._pending.get(approval_id)
        if change is None or change.session_id != session_id or change.epoch != epoch:
            raise NotFound(
                f"no pending memory change {quoted(approval_id)} for this session (unknown, "
                "already decided, or expired); propose the change again"
            )
        del self._pending[approval_id]
        if is_expired(change, now):
            raise NotFound(
                f"pending memory change {approval_id} expired {APPROVAL_TTL_S:.0f} s after it was "
                "proposed; propose the change again"
            )
        return change

    def put_back(self, change: PendingChange) -> None:
        """Keep again a change `take` gave that could not be applied (the database could not
        be written: a full disk, a lock), so that the same memory.approve works once the cause
        is gone; it still expires when it would have."""
        self._pending[change.approval_id] = change


class SessionGrant(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    is_global: bool  # covers the session's global changes, else its workspace changes
    workspace_root: str
    granted_at: float


class SessionGrants:
    """allow_session grants, by session id and by the scope approved, until the session closes
    (a reopen in the same workspace keeps them). A workspace grant covers the workspace it was
    given in: the same session id reopened elsewhere is asked again."""

    def __init__(self) -> None:
        self._grants: dict[tuple[str, bool], SessionGrant] = {}

    def grant(self, session_id: str, *, is_global: bool, workspace_root: str, now: float) -> None:
        held = self._grants.get((session_id, is_global))
        if held is not None and (is_global or held.workspace_root == workspace_root):
            return
        self._grants[session_id, is_global] = SessionGrant(
            session_id=session_id,
            is_global=is_global,
            workspace_root=workspace_root,
            granted_at=now,
        )

    def covers(self, session_id: str, *, is_global: bool, workspace_root: str) -> bool:
        held = self._grants.get((session_id, is_global))
        return held is not None and (is_global or held.workspace_root == workspace_root)

    def drop_session(self, session_id: str) -> None:
        for key in [key for key in self._grants if key[0] == session_id]:
            del self._grants[key]

    def revoke(self, session_id: str, *, is_global: bool) -> bool:
        return self._grants.pop((session_id, is_global), None) is not None

    def all(self) -> list[SessionGrant]:
        return sorted(self._grants.values(), key=lambda g: (g.granted_at, g.session_id))


# Grant ids: "global", "workspace:<workspace id>", "session:<session id>:<workspace|global>".
GLOBAL_GRANT_ID = "global"
_WORKSPACE_ID = re.compile(r"[0-9a-f]{64}\Z")


def workspace_grant_id(workspace_id: str) -> str:
    return f"workspace:{workspace_id}"


def session_grant_id(session_id: str, *, is_global: bool) -> str:
    return f"session:{session_id}:{'global' if is_global else 'workspace'}"


def parse_grant_id(grant_id: str) -> tuple[GrantScope, str, bool]:
    """(scope, session or workspace id, is_global) of a grant id; InvalidParams if malformed."""
    if grant_id == GLOBAL_GRANT_ID:
        return "global", "", True
    kind, _, rest = grant_id.partition(":")
    if kind == "workspace" and _WORKSPACE_ID.match(rest):
        return "workspace", rest, False
    session_id, _, scope = rest.rpartition(":")  # a client may choose a session id with colons
    if kind == "session" and session_id and scope in ("workspace", "global"):
        return "session", session_id, scope == "global"
    raise InvalidParams(
        f"`grant_id` {quoted(grant_id)} is not a grant id; grants.list shows them "
        "(global, workspace:<id>, session:<id>:<workspace|global>)",
        field="grant_id",
    )
