"""A session's snapshot: what `session.open` fixed for the session's life (see sessions)."""

from __future__ import annotations

import msgspec

from protocol.types import History, Mode


class Session(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    epoch: int
    cwd: str
    workspace_id: str
    workspace_root: str
    project_id: str
    project_identity: str
    project_root: str
    history: History
    mode: Mode
    interactive: bool
    auto_approve: bool
    bare: bool
    auto_memory: bool
    opened_at: float
    closed: bool = False


_session_decoder = msgspec.json.Decoder(Session)
