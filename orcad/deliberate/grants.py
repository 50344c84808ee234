"""grants.list and grants.revoke: the approvals a user gave that skip later prompts.

Three kinds, each covering the scope of the change it was given for: session grants
(allow_session, in memory, per session and scope), workspace grants (allow_workspace on a
workspace change, persisted per workspace) and the global grant (allow_workspace on a global
change, persisted). Revoking one makes the next change in its scope ask again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from orcad.clock import format_time
from orcad.deliberate.approvals import (
    GLOBAL_GRANT_ID,
    parse_grant_id,
    session_grant_id,
    workspace_grant_id,
)
from orcad.deliberate.queries import GLOBAL_GRANT_KEY
from orcad.sessions import SessionStore
from protocol.types import (
    Grant,
    GrantsListParams,
    GrantsListResult,
    GrantsRevokeParams,
    GrantsRevokeResult,
)

if TYPE_CHECKING:
    from orcad.deliberate.service import DeliberateMemory

log = structlog.get_logger("orcad.deliberate.grants")


class GrantsService:
    def __init__(self, memory: DeliberateMemory, sessions: SessionStore) -> None:
        self._memory = memory
        self._sessions = sessions

    async def list(self, params: GrantsListParams) -> GrantsListResult:
        """Every grant, or those that apply to one session or to one workspace root."""
        session_filter = params.session_id
        root_filter = params.workspace
        workspace_filter: str | None = None
        if session_filter is not None:
            session = await self._sessions._current(session_filter)  # any epoch, closed too
            if session is None:
                return GrantsListResult(grants=[])
            workspace_filter = session.workspace_id
        grants: list[Grant] = []
        for key, root, granted_at in await self._memory.store.list_grants():
            if key == GLOBAL_GRANT_KEY:
                grants.append(
                    Grant(
                        grant_id=GLOBAL_GRANT_ID,
                        scope="global",
                        workspace_root=None,
                        session_id=None,
                        granted_at=format_time(granted_at),
                    )
                )
                continue
            if workspace_filter is not None and key != workspace_filter:
                continue
            if root_filter is not None and root != root_filter:
                continue
            grants.append(
                Grant(
                    grant_id=workspace_grant_id(key),
                    scope="workspace",
                    workspace_root=root,
                    session_id=None,
                    granted_at=format_time(granted_at),
                )
            )
        for grant in self._memory.approvals.session_grants.all():
            if session_filter is not None and grant.session_id != session_filter:
                continue
            if root_filter is not None and grant.workspace_root != root_filter:
                continue
            grants.append(
                Grant(
                    grant_id=session_grant_id(grant.session_id, is_global=grant.is_global),
                    scope="session",
                    workspace_root=None if grant.is_global else grant.workspace_root,
                    session_id=grant.session_id,
                    granted_at=format_time(grant.granted_at),
                )
            )
        return GrantsListResult(grants=grants)

    async def revoke(self, params: GrantsRevokeParams) -> GrantsRevokeResult:
        """Remove one grant; revoked=False when it did not exist (idempotent)."""
        scope, key, is_global = parse_grant_id(params.grant_id)
        if scope == "session":
            revoked = self._memory.approvals.session_grants.revoke(key, is_global=is_global)
        else:
            revoked = await self._memory.store.revoke_grant(
                GLOBAL_GRANT_KEY if scope == "global" else key
            )
        log.info("grants.revoked", scope=scope, revoked=revoked)
        return GrantsRevokeResult(revoked=revoked)
