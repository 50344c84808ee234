"""Explicit facts as the daemon serves them: `remember` (user.md or the project's memory.md)
and the startup context a session is given (both files, bounded). The file format and its
atomic writes are orcad.explicit's.
"""

from __future__ import annotations

from pathlib import Path

import trio

from orcad.capture.project_access import ProjectAccess
from orcad.deliberate import policy
from orcad.deliberate.review import review_content
from orcad.errors import Disabled
from orcad.explicit import (
    PROJECT_MEMORY_FILE,
    append_fact,
    fact_kept,
    facts_file_fault,
    format_fact,
    read_bounded,
    remember_fact,
    startup_fault,
)
from orcad.host import Host
from orcad.limits import STARTUP_PROJECT_MAX_BYTES, STARTUP_USER_MAX_BYTES
from orcad.recall.service import disabled_for_bare
from orcad.session_snapshot import Session
from protocol.types import RememberParams, RememberResult, Startup


def remember_refusal(session: Session, text: str, *, asked: bool) -> str | None:
    """Why the session's mode refuses an explicit fact, as it refuses a memory change: plan
    mode and a headless normal session change no memory, and auto mode's review applies. In an
    interactive normal session the client must have asked its user (`asked`: orcactl's own
    command is the user's; the MCP server asks before it calls)."""
    decision = policy.decide(
        mode=session.mode,
        interactive=session.interactive,
        auto_approve=session.auto_approve,
        granted=False,
    )
    if decision.action == "deny":
        return decision.reason or "denied"
    if decision.action == "ask" and not asked:
        return "in normal mode a fact is kept once the user agrees, and the user was not asked"
    if decision.action == "review":
        verdict = review_content(text, duplicate_id=None)
        if not verdict.accepted:
            return f"the automatic review refused it: {verdict.reason}"
    return None


class ExplicitFacts:
    """`remember` and the startup context: user.md and each project's memory.md."""

    def __init__(self, host: Host, projects: ProjectAccess) -> None:
        self._host = host
        self._projects = projects

    def project_file(self, project_id: str) -> Path:
        return self._projects.project_dir(project_id) / PROJECT_MEMORY_FILE

    async def remember(self, params: RememberParams) -> RememberResult:
        session = await self._host.sessions.require(params.session_id, params.epoch)
        disabled_for_bare(session, "remember")
        if params.check:  # whether it is kept already, before its user is asked: a read
            path = (
                self._host.paths.user_memory_file
                if params.scope == "user"
                else self.project_file(session.project_id)
            )
            size, already = await trio.to_thread.run_sync(fact_kept, path, params.text)
            return RememberResult(path=str(path), bytes=size, already_kept=already)
        refused = remember_refusal(session, params.text, asked=params.asked)
        if refused is not None:
            raise Disabled(f"remember: {refused}; nothing was written")
        if params.scope == "user":
            path = self._host.paths.user_memory_file
            size, already = await trio.to_thread.run_sync(remember_fact, path, params.text)
        else:
            # memory.md is written under the project's lock, like the ledger beside it
            line = format_fact(params.text)
            path = self.project_file(session.project_id)
            size, already = await self._projects.run_locked(
                session.project_id, lambda directory: append_fact(path, line)
            )
            # with automatic memory off nothing else names the directory this fact is in
            # (spec, Storage: project.json identifies the hashed directory)
            await self._projects.restore_project_file(session)
        return RememberResult(path=str(path), bytes=size, already_kept=already)

    async def read_startup(self, session: Session) -> Startup:
        user_file = self._host.paths.user_memory_file
        project_file = self.project_file(session.project_id)

        faults: list[tuple[str, str]] = []

        def read() -> Startup:
            user, user_cut = read_bounded(
                user_file,
                STARTUP_USER_MAX_BYTES,
                lambda exc: faults.append(facts_file_fault(user_file, exc)),
            )
            project, project_cut = read_bounded(
                project_file,
                STARTUP_PROJECT_MAX_BYTES,
                lambda exc: faults.append(facts_file_fault(project_file, exc)),
            )
            return Startup(user=user, project=project, truncated=user_cut or project_cut)

        startup = await trio.to_thread.run_sync(read)
        # the session starts without them rather than not at all (recall and the rest of its
        # memory do not need them), and the fault is listed for daemon.status (doctor judges
        # the file as it is now)
        for wrong, what_to_do in faults:
            self._host.record_error("storage", startup_fault(wrong, what_to_do))
        return startup
