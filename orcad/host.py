"""What a feature may use of the daemon that hosts it.

Features (deliberate memory, capture, recall) are installed by the composition root
(`orcad.app.install_features`), each given this host and, explicitly and typed, the other
features' parts it needs. A feature never imports `orcad.app`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.clock import Clock
from orcad.config import Config
from orcad.paths import Paths
from orcad.rpc import Router
from orcad.session_snapshot import Session
from orcad.sessions import SessionStore

SessionHook = Callable[[Session], Awaitable[None]]
BackgroundTask = Callable[..., Awaitable[None]]  # started with nursery.start(task)
Closer = Callable[[], Awaitable[None]]
ErrorRecorder = Callable[[str, str], None]


class Host(Protocol):
    @property
    def router(self) -> Router: ...

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def paths(self) -> Paths: ...

    @property
    def config(self) -> Config: ...

    @property
    def auto_memory_switch(self) -> AutoMemorySwitch: ...

    def record_error(self, kind: str, message: str) -> None:
        """A problem for daemon.status (and doctor); the caller logs it."""
        ...

    def run_in_background(self, task: BackgroundTask) -> None:
        """Start `task` once the features are installed, supervised (restarted if it fails)."""
        ...

    def close_at_exit(self, closer: Closer) -> None:
        """Await `closer()` at shutdown, in the reverse order of registration."""
        ...

    def on_session_opened(self, hook: SessionHook) -> None:
        """Await `hook(session)` after each session.open that opened (not joined) a session."""
        ...

    def share_state_db(self, drop_connection: Callable[[], None]) -> None:
        """A user of the state database (`paths.state_db`): `drop_connection()` (blocking) is
        called before a damaged file is moved aside."""
        ...

    def recover_state_db(self, reported: str) -> None:
        """Blocking: SQLite reported the state database damaged; check it, replace it if so."""
        ...
