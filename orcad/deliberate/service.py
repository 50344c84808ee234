"""Deliberate memory's service: memory.search, memory.manage and memory.approve. Recall reads
the same store through orcad.recall.deliberate.

Order of checks for a change: session (bare -> -32016), params (-32602 with the field), target
visibility (-32014), secret and exact-duplicate refusals (every mode), then the policy
(plan/normal/auto/yolo) and, in auto mode, the automatic review. The approval flow's own
steps (the fields' check, the policy with its grants, the question, the grant an approval
gives) are in orcad.deliberate.approval_flow.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable

import msgspec
import structlog
import trio

from orcad.clock import Clock
from orcad.deliberate.approval_flow import (
    ApprovalFlow,
    changed_meanwhile,
    changes_global,
    check_unchanged,
    denied,
    preview,
    scope_name,
    scope_phrase,
    to_wire,
    validate_change,
)
from orcad.deliberate.approvals import PendingChange
from orcad.deliberate.queries import (
    DuplicateRecord,
    RecordChanged,
    StoredRecord,
    is_record_id,
    new_record_id,
)
from orcad.deliberate.review import review_content
from orcad.deliberate.store import DeliberateStore
from orcad.errors import Disabled, NotFound, StorageError, quoted
from orcad.failpoints import failpoint
from orcad.limits import DELIBERATE_PURGE_DELAY_S
from orcad.secrets import secret_kinds
from orcad.session_snapshot import Session
from orcad.sessions import SessionStore
from protocol.types import (
    ApprovalDecision,
    MemoryApproveParams,
    MemoryManageParams,
    MemoryManageResult,
    MemorySearchParams,
    MemorySearchResult,
    SessionParams,
)

log = structlog.get_logger("orcad.deliberate")

SENSITIVE_CONTENT_DENIAL = "the content looks like a secret ({kinds}); nothing was stored"


class DeliberateMemory:
    """The service behind memory.*."""

    def __init__(self, store: DeliberateStore, clock: Clock, sessions: SessionStore) -> None:
        self.store = store
        self._clock = clock
        self._sessions = sessions
        self.approvals = ApprovalFlow(store, clock)
        sessions.on_ended.append(self._session_ended)
        # Removes other copies of forgotten text (recall snapshots holding the text, or the
        # record by id: it may be shown cut); set by install.
        self.purge_copies: Callable[[list[str], list[str]], Awaitable[object]] | None = None
        self._copies_left: list[tuple[list[str], list[str]]] = []  # purges to try again
        self._remains_left = False  # deleted text may remain in the database's pages or WAL
        self._wal_left = False  # a reader kept the purge from emptying the WAL
        self._purge_wanted = trio.Event()

    def _session_ended(self, session_id: str) -> None:
        """A closed or expired session's grants and pending changes end with it."""
        self.approvals.session_grants.drop_session(session_id)
        self.approvals.pending.drop_session(session_id)

    async def run_purger(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Background task: after forgets, and updates that change a record's text, purge the
        database of the old text's remains (FTS segments, free pages, WAL), and retry the
        purges of other copies that could not be made at once. Purging costs time
        in proportion to the index, so it runs off the request path, once for the changes of
        the last DELIBERATE_PURGE_DELAY_S; startup purges what a crash left, and closing purges
        what is pending."""
        task_status.started()
        while True:
            await self._purge_wanted.wait()
            await trio.sleep(DELIBERATE_PURGE_DELAY_S)
            await self.purge_now()

    async def purge_now(self) -> None:
        if not self._purge_wanted.is_set():
            return
        self._purge_wanted = trio.Event()
        left, self._copies_left = self._copies_left, []
        for texts, ids in left:
            await self._drop_copies(texts, ids)
        if not self._remains_left and not self._wal_left:
            return  # only copies were left: the index needs no merging again
        remains, self._remains_left = self._remains_left, False
        try:
            emptied = await (self.store.purge_deleted() if remains else self.store.truncate_wal())
        except StorageError as exc:
            log.warning("memory.purge_failed", error=str(exc))
            self._remains_left = remains
            self._purge_wanted.set()  # tried again after the next delay
            return
        if not emptied and not self._wal_left:
            log.warning("memory.checkpoint_busy")  # another connection reads: tried again
        self._wal_left = not emptied
        if not emptied:
            self._purge_wanted.set()

    async def _drop_copies(self, texts: list[str], ids: list[str]) -> None:
        """Drop the other copies of text that left memory. The change is made by then, so a
        purge that fails (the state database locked by another process, or failing) does not
        fail the request: it is tried again by the purger (see run_purger)."""
        if self.purge_copies is None:
            return
        try:
            await self.purge_copies(texts, ids)
        except (StorageError, sqlite3.Error, OSError) as exc:
            log.warning("memory.copies_purge_failed", error=str(exc))
            self._copies_left.append((texts, ids))
            self._purge_wanted.set()

    async def _session(self, params: SessionParams) -> Session:
        session = await self._sessions.require(params.session_id, params.epoch)
        if session.bare:
            raise Disabled("memory tools are disabled in a bare session")
        return session

    # --- search ------------------------------------------------------------------------------

    async def search(self, params: MemorySearchParams) -> MemorySearchResult:
        session = await self._session(params)
        if params.query is None or not params.query.strip():
            records = await self.store.recent(session.workspace_id, params.limit)
        else:
            records = await self.store.search(session.workspace_id, params.query, params.limit)
        return MemorySearchResult(records=[to_wire(record) for record in records])

    # --- manage ------------------------------------------------------------------------------

    async def manage(self, params: MemoryManageParams) -> MemoryManageResult:
        session = await self._session(params)
        change = validate_change(params)
        if change.action == "forget":
            # A forget the policy lets through whatever its scope needs no prior read.
            decision = await self.approvals.decide(session, is_global=None)
            if decision.action in ("apply", "review"):  # the review always accepts a forget
                return await self._apply(session, change)
        target = await self._target(session, change)
        refusal = await self._refusal(session, change, target)
        if refusal is not None:
            return refusal
        decision = await self.approvals.decide(session, is_global=changes_global(change, target))
        if decision.action == "deny":
            return denied(session, change, decision.reason or "denied", target)
        # a kind-only update writes no text: what the record says was accepted when it was saved
        if decision.action == "review" and change.content is not None:
            verdict = review_content(
                change.content,
                duplicate_id=None,  # duplicates were refused above, in every mode
            )
            if not verdict.accepted:
                return denied(session, change, verdict.reason or "review refused", target)
        if decision.action == "ask":
            if not self._sessions.is_open_at(session.session_id, session.epoch):
                # closed while this call read memory: its pending changes went with it, and one
                # added now could never be approved (yet count against the bounds until its TTL)
                raise NotFound(
                    f"session {session.session_id} was closed while this change was proposed; "
                    "nothing is pending and nothing was changed",
                    session_id=session.session_id,
                )
            return self.approvals.ask(session, change, target)
        return await self._apply(session, change, target)

    async def approve(self, params: MemoryApproveParams) -> MemoryManageResult:
        session = await self._session(params)
        change = self.approvals.pending.take(
            params.approval_id, session.session_id, session.epoch, self._clock.monotonic()
        )
        try:
            decided = await self._decide(session, change, params.decision)
        except StorageError:  # nothing was written: the user's answer stands for a retry...
            if self._sessions.is_open_at(session.session_id, session.epoch):
                self.approvals.pending.put_back(change)  # ...unless its session ended meanwhile
            raise
        if isinstance(decided, MemoryManageResult):
            return decided
        result, is_global = decided
        decision = params.decision
        if decision == "allow_session" and not self._sessions.is_open_at(
            session.session_id, session.epoch
        ):
            # The session ended while the change was written (its grants went with it): a
            # grant given now would outlive it and skip the question once it is opened again.
            log.info("memory.session_grant_skipped", approval_id=change.approval_id)
            decision = "allow_once"
        try:
            await self.approvals.grant(session, decision, is_global=is_global)
        except StorageError as exc:  # the change is made: said so, with the grant that is not
            log.warning("memory.grant_failed", approval_id=change.approval_id, error=exc.message)
            return msgspec.structs.replace(
                result,
                summary=f"{result.summary} The grant could not be kept ({exc.message}):"
                " later changes will be asked about again.",
            )
        return result

    async def _decide(
        self, session: Session, change: PendingChange, decision: ApprovalDecision
    ) -> MemoryManageResult | tuple[MemoryManageResult, bool]:
        """Carry out the user's decision on `change`: the answer alone when nothing is to be
        granted (declined, or refused), else the answer and whether the change was global."""
        if decision == "deny":
            target = await self._target_or_none(session, change)
            log.info("memory.declined", approval_id=change.approval_id, action=change.action)
            return denied(session, change, "declined by the user", target)
        # Memory may have changed while the user decided: check again before applying (and the
        # write checks once more, as it is made, against a change made in between)
        target = await self._target(session, change)
        check_unchanged(change, target)
        is_global = changes_global(change, target)
        log.info(
            "memory.approved",
            approval_id=change.approval_id,
            decision=decision,
            scope="global" if is_global else "workspace",
        )
        refusal = await self._refusal(session, change, target)
        if refusal is not None:  # nothing to apply (an identical record exists): nor to grant
            return refusal
        result = await self._apply(session, change)
        if result.outcome != "applied":  # an identical record was written meanwhile, found as
            return result  # this write was made: nothing changed, so nothing is granted
        return result, is_global

    # --- steps -------------------------------------------------------------------------------

    async def _target(self, session: Session, change: PendingChange) -> StoredRecord | None:
        if change.action == "save":
            return None
        record_id = change.record_id or ""
        record = None
        if is_record_id(record_id):  # anything else cannot be a record: not found, no query
            record = await self.store.visible(session.workspace_id, record_id)
        if record is None:
            raise NotFound(f"no memory record {quoted(record_id)} is visible from this workspace")
        return record

    async def _target_or_none(self, session: Session, change: PendingChange) -> StoredRecord | None:
        try:
            return await self._target(session, change)
        except NotFound:
            return None

    async def _refusal(
        self, session: Session, change: PendingChange, target: StoredRecord | None
    ) -> MemoryManageResult | None:
        """Secrets and exact duplicates are refused whatever the mode."""
        if change.content is None:
            if change.action == "update" and target is not None and change.kind == target.kind:
                return self._unchanged(target)
            return None
        kinds = secret_kinds(change.content)
        if kinds:
            log.info("memory.denied", action=change.action, reason="secret", kinds=kinds)
            denial = SENSITIVE_CONTENT_DENIAL.format(kinds=kinds)
            return denied(session, change, denial, target)
        if target is not None:
            scope_workspace = target.workspace_id
        else:
            scope_workspace = None if change.is_global else session.workspace_id
        existing = await self.store.same_content(scope_workspace, change.content)
        if existing is None:
            return None
        if target is not None and existing.id == target.id:
            if change.kind is None or change.kind == target.kind:
                return self._unchanged(target)
            return None
        return self._duplicate(existing)

    async def _apply(
        self, session: Session, change: PendingChange, known_target: StoredRecord | None = None
    ) -> MemoryManageResult:
        """Carry the change out; `known_target` was read in this same request (no re-read)."""
        now = self._clock.now()
        if change.action == "save":
            assert change.content is not None and change.kind is not None
            record = StoredRecord(
                id=new_record_id(),
                kind=change.kind,
                content=change.content,
                workspace_id=None if change.is_global else session.workspace_id,
                workspace_root=session.workspace_root,
                created_at=now,
                updated_at=now,
            )
            try:
                record = await self.store.insert(record)  # as stored: its time may be later
            except DuplicateRecord:
                existing = await self.store.same_content(record.workspace_id, record.content)
                if existing is None:
                    raise
                return self._duplicate(existing)
            verb = "Saved"
        elif change.action == "forget":
            record_id = change.record_id or ""
            forgotten = None
            if is_record_id(record_id):
                try:
                    forgotten = await self.store.forget_visible(
                        session.workspace_id, record_id, expected=change.shown
                    )
                except RecordChanged as exc:
                    raise changed_meanwhile(change, exc.record) from exc
                failpoint("memory.after_change_commit")
            if forgotten is None:
                raise NotFound(
                    f"no memory record {quoted(record_id)} is visible from this workspace"
                )
            record, verb = forgotten, "Forgot"
            self._remains_left = True
            self._purge_wanted.set()  # the database's remains, soon (see run_purger)
            await self._drop_copies([forgotten.content], [forgotten.id])
        else:
            target = known_target or await self._target(session, change)
            assert target is not None
            try:  # only what the change names is written: another session may have changed
                # the rest since the target was read
                updated = await self.store.update(
                    target.id, change.content, change.kind, now, expected=change.shown
                )
                failpoint("memory.after_change_commit")
            except RecordChanged as exc:
                raise changed_meanwhile(change, exc.record) from exc
            except DuplicateRecord:
                assert change.content is not None
                existing = await self.store.same_content(target.workspace_id, change.content)
                if existing is None:
                    raise
                return self._duplicate(existing)
            if updated is None:
                raise NotFound(f"memory record {target.id} was forgotten meanwhile")
            record = updated
            verb = "Updated"
            if record.content != target.content:  # the old text goes as a forgotten record's does
                self._remains_left = True
                self._purge_wanted.set()
                await self._drop_copies([target.content], [target.id])
        log.info(
            "memory.applied", action=change.action, record_id=record.id, scope=scope_name(record)
        )
        return MemoryManageResult(
            outcome="applied",
            approval_id=None,
            reason=None,
            record=to_wire(record),
            summary=f"{verb} {scope_phrase(record.is_global, record.workspace_root)} "
            f'{record.id} ({record.kind}): "{preview(record.content)}".',
        )

    def _duplicate(self, existing: StoredRecord) -> MemoryManageResult:
        scope = scope_phrase(existing.is_global, existing.workspace_root)
        return MemoryManageResult(
            outcome="denied",
            approval_id=None,
            reason=f"an identical {scope_name(existing)} record already exists ({existing.id})",
            record=to_wire(existing),
            summary=f"Nothing changed: identical {scope} {existing.id} already exists.",
        )

    def _unchanged(self, target: StoredRecord) -> MemoryManageResult:
        return MemoryManageResult(
            outcome="denied",
            approval_id=None,
            reason=f"the update would not change {target.id}",
            record=to_wire(target),
            summary=f"Nothing changed: {scope_name(target)} memory {target.id} already says that.",
        )
