"""Every method's params and result of protocol 1, as frozen msgspec Structs (the README's
"The protocol" says what was added to it).

Params reject unknown fields (the daemon answers -32602 naming the field); results accept
unknown fields so that a daemon may add optional fields without breaking older clients.
New fields always get defaults; a field's type never changes.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

PROTOCOL_VERSION = 1

Timestamp = str  # RFC 3339 UTC, e.g. 2026-11-30T07:00:00.123Z
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
# The names a client gives (a session, a turn, a worker, a provider and its model) key
# sessions, jobs and snapshots, are kept with every fact and shown in recalled context: an
# agent's id, a digest or a model's name fits many times over, a transcript pasted there does not.
# They are written into log lines and orcactl's tables too, where a control character (C0, DEL,
# C1: a newline, an escape) breaks the line or acts on the terminal; no agent names its sessions
# or turns with one. The end is a lookahead: `$` also matches before a final newline in Python's
# regular expressions, and `\Z` is unknown to JSON Schema's.
CLIENT_ID_MAX_CHARS = 256
NO_CONTROL_CHARACTERS = r"^[^\x00-\x1f\x7f-\x9f]*(?![\s\S])"
ClientId = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=CLIENT_ID_MAX_CHARS, pattern=NO_CONTROL_CHARACTERS),
]
# an existing session's id, as session.open gave it (orcad chooses one when the client does not)
SessionId = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=CLIENT_ID_MAX_CHARS, pattern=NO_CONTROL_CHARACTERS),
]
Epoch = Annotated[int, msgspec.Meta(ge=1)]
Token = Annotated[int, msgspec.Meta(ge=1)]
Revision = Annotated[int, msgspec.Meta(ge=0)]
LeaseSeconds = Annotated[float, msgspec.Meta(gt=0, le=86400)]
SearchLimit = Annotated[int, msgspec.Meta(ge=1, le=20)]

History = Literal["persistent", "disabled"]
Mode = Literal["normal", "plan", "auto", "yolo"]
Role = Literal["user", "assistant", "system", "tool"]
Outcome = Literal["succeeded", "failed", "cancelled"]
Verifier = Literal["passed", "failed", "none"]
Barrier = Literal["clear", "timed_out", "none"]
Category = Literal["user", "feedback", "project", "reference"]
RememberScope = Literal["user", "project"]
RecordKind = Literal["preference", "fact", "workflow", "decision"]
RecordScope = Literal["workspace", "global"]
ManageAction = Literal["save", "update", "forget"]
ManageOutcome = Literal["applied", "pending_approval", "denied"]
ApprovalDecision = Literal["allow_once", "allow_session", "allow_workspace", "deny"]
JobState = Literal["pending", "leased", "committed", "exhausted", "cancelled"]
IndexState = Literal["current", "stale", "missing", "corrupt"]


class Params(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every method's params."""


class Result(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every method's result."""


class SessionParams(Params, frozen=True, kw_only=True):
    session_id: SessionId
    epoch: Epoch


class Empty(Result, frozen=True, kw_only=True):
    pass


# --- daemon -------------------------------------------------------------------------------


class PingParams(Params, frozen=True, kw_only=True):
    pass


class PingResult(Result, frozen=True, kw_only=True):
    protocol: int
    version: str
    pid: int


class StatusParams(Params, frozen=True, kw_only=True):
    pass


class WorkersStatus(Result, frozen=True, kw_only=True):
    configured: int
    busy: int


class JobCounts(Result, frozen=True, kw_only=True):
    pending: int = 0
    leased: int = 0
    committed: int = 0
    exhausted: int = 0
    cancelled: int = 0
    damaged: int = 0  # job files that no longer parse, kept as found (see jobs.list `damaged`)
    # pending jobs waiting to be tried again after a failed attempt (a back-off, a provider's
    # Retry-After) that has not run out yet, and the earliest time one of them may be (its
    # `not_before`); a job whose wait is over is simply pending
    waiting_retry: int = 0
    next_try_at: Timestamp | None = None


class RecentError(Result, frozen=True, kw_only=True):
    at: Timestamp
    kind: str
    message: str


class EmbeddingStatus(Result, frozen=True, kw_only=True):
    """Recall's embedding model: "ready", "loading" (the daemon loads it in the background just
    after it starts; a recall meanwhile waits for it), "off" (configured none) or "unavailable"
    (why in `reason`; recall is lexical). `embedded`/`pending`: deliberate records with and
    without a vector of this model (the background backfill's progress); `facts_pending`:
    automatic facts without one yet in the projects recall keeps (the 64 recalled last) and in
    the other projects on disk, counted once after a start (they rank on their words until the
    backfill has embedded them); `corrections_pending`: deliberate records not yet looked at
    for the records they correct (written before orcad kept such pairs: the background pass
    pairs them); `model` is null until the model is loaded."""

    state: Literal["ready", "loading", "off", "unavailable"]
    setting: str
    model: str | None = None
    reason: str | None = None
    embedded: int = 0
    pending: int = 0
    facts_pending: int = 0
    corrections_pending: int = 0


class StatusResult(Result, frozen=True, kw_only=True):
    version: str
    pid: int
    started_at: Timestamp
    uptime_s: float
    socket: str
    memory_root: str
    deliberate_db: str
    workers: WorkersStatus
    jobs: JobCounts
    sessions: int
    projects: int
    recent_errors: list[RecentError]
    config_path: str | None = None
    unknown_config_keys: list[str] = []
    provider: str | None = None
    # the model the built-in workers' provider records in provenance: the language model of
    # `openai`, the offline provider's fact classifier ("" for its rules alone), None when no
    # built-in worker runs
    provider_model: str | None = None
    # why extraction is not running though `workers.configured` asks for built-in workers: the
    # provider could not be built (the message names the key and what to do; orcad reads it
    # again only when it restarts). Captured turns wait as pending jobs meanwhile. None when
    # the workers run (or none is configured)
    extraction_problem: str | None = None
    embedding: EmbeddingStatus | None = None


# --- session ------------------------------------------------------------------------------


class SessionOpenParams(Params, frozen=True, kw_only=True):
    cwd: NonEmpty
    session_id: ClientId | None = None
    history: History = "persistent"
    mode: Mode = "normal"
    interactive: bool = True
    auto_approve: bool = False
    bare: bool = False
    # Attach to the session at its current epoch when it is open (another process of the same
    # agent session); otherwise open it as usual. Without join an open fences earlier holders.
    join: bool = False


class ProjectRef(Result, frozen=True, kw_only=True):
    id: str
    identity: str
    root: str


class WorkspaceRef(Result, frozen=True, kw_only=True):
    id: str
    root: str


class Startup(Result, frozen=True, kw_only=True):
    user: str
    project: str
    truncated: bool


class SessionOpenResult(Result, frozen=True, kw_only=True):
    session_id: str
    epoch: int
    project: ProjectRef
    workspace: WorkspaceRef
    auto_memory: bool
    startup: Startup
    joined: bool = False  # true when `join` attached to the open session at its epoch
    # The session's own settings: for a join, those it was opened with, whatever this open
    # asked for. A client that asks the user before a memory change reads them here.
    mode: Mode = "normal"
    interactive: bool = True
    auto_approve: bool = False


class SessionCloseParams(SessionParams, frozen=True, kw_only=True):
    pass


# --- automatic memory ---------------------------------------------------------------------


class Message(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    role: Role
    content: str


class TurnCompletedParams(SessionParams, frozen=True, kw_only=True):
    turn_id: ClientId
    root: bool = True
    subagent: bool = False
    outcome: Outcome
    verifier: Verifier
    transcript_committed: bool
    messages: list[Message]


class TurnCompletedResult(Result, frozen=True, kw_only=True):
    eligible: bool
    reason: str | None
    job_id: str | None
    duplicate: bool


class RecallParams(SessionParams, frozen=True, kw_only=True):
    turn_id: ClientId
    prompt: str


class AutomaticEntry(Result, frozen=True, kw_only=True):
    id: str
    category: Category
    text: str
    age_s: float
    session_id: str
    turn_id: str
    recorded_at: Timestamp


class DeliberateEntry(Result, frozen=True, kw_only=True):
    id: str
    kind: RecordKind
    content: str
    scope: RecordScope
    updated_at: Timestamp


class RecallResult(Result, frozen=True, kw_only=True):
    snapshot_id: str
    barrier: Barrier
    automatic: list[AutomaticEntry]
    deliberate: list[DeliberateEntry]
    context: str
    bytes: int


class RememberParams(SessionParams, frozen=True, kw_only=True):
    text: NonEmpty
    scope: RememberScope
    # whether the client's user agreed to this fact: in an interactive normal session orcad
    # keeps it only then (orcactl's own command is the user's; an MCP server asks first)
    asked: bool = True
    # only whether the file holds the fact already (`already_kept`), writing nothing: a client
    # that asks its user first need not ask about a fact that is kept
    check: bool = False


class RememberResult(Result, frozen=True, kw_only=True):
    """`bytes`: the file's size; `already_kept`: the file held the fact already, as its own list
    item, so nothing was written."""

    path: str
    bytes: int
    already_kept: bool = False


# --- deliberate memory --------------------------------------------------------------------


class MemorySearchParams(SessionParams, frozen=True, kw_only=True):
    query: str | None = None
    limit: SearchLimit = 8


class MemoryRecord(Result, frozen=True, kw_only=True):
    id: str
    kind: RecordKind
    content: str
    scope: RecordScope
    workspace_root: str | None
    created_at: Timestamp
    updated_at: Timestamp


class MemorySearchResult(Result, frozen=True, kw_only=True):
    records: list[MemoryRecord]


class MemoryManageParams(SessionParams, frozen=True, kw_only=True):
    action: ManageAction
    id: str | None = None
    content: str | None = None
    kind: RecordKind | None = None
    is_global: bool | None = None


class MemoryManageResult(Result, frozen=True, kw_only=True):
    outcome: ManageOutcome
    approval_id: str | None
    reason: str | None
    record: MemoryRecord | None
    summary: str


class MemoryApproveParams(SessionParams, frozen=True, kw_only=True):
    approval_id: NonEmpty
    decision: ApprovalDecision


# --- extraction workers -------------------------------------------------------------------


class JobsListParams(Params, frozen=True, kw_only=True):
    project_id: str | None = None
    state: JobState | None = None


class JobSummary(Result, frozen=True, kw_only=True):
    job_id: str
    project_id: str
    session_id: str
    turn_id: str
    state: JobState
    attempts: int
    created_at: Timestamp
    updated_at: Timestamp
    last_error: str | None
    # a pending job waiting to be tried again after a failed attempt (a back-off, a provider's
    # Retry-After): not claimed before this time, as the workers time it; None when nothing
    # holds it back, also once that wait is over (the job is then simply pending)
    not_before: Timestamp | None = None


class DamagedJob(Result, frozen=True, kw_only=True):
    """A job file that does not parse: kept as found, its job held until it is repaired."""

    job_id: str
    project_id: str
    path: str
    problem: str


class JobsListResult(Result, frozen=True, kw_only=True):
    jobs: list[JobSummary]
    damaged: list[DamagedJob] = []


class JobsClaimParams(Params, frozen=True, kw_only=True):
    worker: ClientId
    project_id: str | None = None
    lease_s: LeaseSeconds | None = None


class ClaimedJob(Result, frozen=True, kw_only=True):
    job_id: str
    project_id: str
    session_id: str
    turn_id: str
    source: str
    attempt: int


class Lease(Result, frozen=True, kw_only=True):
    token: int
    expires_at: Timestamp


class JobsClaimResult(Result, frozen=True, kw_only=True):
    job: ClaimedJob | None
    lease: Lease | None


class JobsRenewParams(Params, frozen=True, kw_only=True):
    job_id: NonEmpty
    token: Token
    lease_s: LeaseSeconds | None = None


class JobsRenewResult(Result, frozen=True, kw_only=True):
    expires_at: Timestamp


class JobsPublishParams(Params, frozen=True, kw_only=True):
    job_id: NonEmpty
    token: Token
    output: str
    provider: ClientId
    model: Annotated[
        str, msgspec.Meta(max_length=CLIENT_ID_MAX_CHARS, pattern=NO_CONTROL_CHARACTERS)
    ]


class JobsPublishResult(Result, frozen=True, kw_only=True):
    state: Literal["committed"]
    added: int
    duplicates: int
    rejected: int


class JobsFailParams(Params, frozen=True, kw_only=True):
    job_id: NonEmpty
    token: Token
    error: str


class JobsFailResult(Result, frozen=True, kw_only=True):
    state: JobState
    attempts: int


class JobsReleaseParams(Params, frozen=True, kw_only=True):
    job_id: NonEmpty
    token: Token


class JobsReleaseResult(Result, frozen=True, kw_only=True):
    state: JobState


class JobsRetryParams(Params, frozen=True, kw_only=True):
    job_id: NonEmpty


class JobsRetryResult(Result, frozen=True, kw_only=True):
    state: JobState


# --- inspection ---------------------------------------------------------------------------


class ProjectsListParams(Params, frozen=True, kw_only=True):
    pass


class ProjectSummary(Result, frozen=True, kw_only=True):
    id: str
    identity: str
    last_seen_cwd: str | None
    candidates: int
    active_jobs: int
    corrupt: bool = False  # project.json or candidates.jsonl does not parse
    problem: str | None = None  # what is damaged, and where


class ProjectsListResult(Result, frozen=True, kw_only=True):
    projects: list[ProjectSummary]


class ProjectsInspectParams(Params, frozen=True, kw_only=True):
    project_id: str | None = None
    cwd: str | None = None


class ProjectInfo(Result, frozen=True, kw_only=True):
    id: str
    identity: str
    last_seen_cwd: str | None
    path: str
    corrupt: bool = False
    problem: str | None = None


class Candidate(Result, frozen=True, kw_only=True):
    id: str
    category: Category
    fact: str
    session_id: str
    turn_id: str
    job_id: str
    recorded_at: Timestamp
    provider: str
    model: str


class LedgerInfo(Result, frozen=True, kw_only=True):
    revision: int
    fingerprint: str
    candidates: list[Candidate]


class IndexInfo(Result, frozen=True, kw_only=True):
    state: IndexState


class ExplicitFactsInfo(Result, frozen=True, kw_only=True):
    """A project's explicit facts (`remember` with scope "project": its memory.md) as a new
    session is given them: `text`, the newest whole facts within 8,192 bytes, `truncated` when
    older ones were left out, `problem` when the file could not be read (not a regular file,
    unreadable; `text` is then empty). `user_path`: user.md, the facts every project's sessions
    are given, not shown here; `user_bytes` its size, null when there is none (or it is
    no regular file, which gives a session no facts)."""

    path: str
    text: str
    truncated: bool = False
    problem: str | None = None
    user_path: str | None = None
    user_bytes: int | None = None


class ProjectsInspectResult(Result, frozen=True, kw_only=True):
    project: ProjectInfo
    ledger: LedgerInfo
    index: IndexInfo
    jobs: list[JobSummary]
    explicit: ExplicitFactsInfo | None = None  # null from an orcad that did not show them


class LedgerForgetParams(Params, frozen=True, kw_only=True):
    project_id: NonEmpty
    candidate_id: NonEmpty
    revision: Revision
    keep_evidence: bool = False  # keep the committed jobs whose sources hold the fact


class LedgerForgetResult(Result, frozen=True, kw_only=True):
    revision: int
    removed: bool
    purged_jobs: list[str] = []  # committed jobs deleted because their source held the fact
    # jobs still waiting (pending, leased, exhausted): their publish cannot add the fact back,
    # and (unless keep_evidence) its text is cut out of their sources
    waiting_jobs: list[str] = []


# --- approval grants ------------------------------------------------------------------------

GrantScope = Literal["session", "workspace", "global"]


class GrantsListParams(Params, frozen=True, kw_only=True):
    session_id: SessionId | None = None  # only grants that apply to this session
    workspace: NonEmpty | None = None  # only grants for this workspace root (and global)


class Grant(Result, frozen=True, kw_only=True):
    grant_id: str
    scope: GrantScope
    workspace_root: str | None  # workspace grants
    session_id: str | None  # session grants
    granted_at: Timestamp | None  # persisted grants


class GrantsListResult(Result, frozen=True, kw_only=True):
    grants: list[Grant]


class GrantsRevokeParams(Params, frozen=True, kw_only=True):
    grant_id: NonEmpty


class GrantsRevokeResult(Result, frozen=True, kw_only=True):
    revoked: bool


# --- extractor output (one line of what a provider returns) --------------------------------


class ExtractedFact(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    category: Category
    fact: str


# The method table: the single place that names every method with its params and result.
METHODS: dict[str, tuple[type[Params], type[Result]]] = {
    "daemon.ping": (PingParams, PingResult),
    "daemon.status": (StatusParams, StatusResult),
    "session.open": (SessionOpenParams, SessionOpenResult),
    "session.close": (SessionCloseParams, Empty),
    "turn.completed": (TurnCompletedParams, TurnCompletedResult),
    "recall": (RecallParams, RecallResult),
    "remember": (RememberParams, RememberResult),
    "memory.search": (MemorySearchParams, MemorySearchResult),
    "memory.manage": (MemoryManageParams, MemoryManageResult),
    "memory.approve": (MemoryApproveParams, MemoryManageResult),
    "jobs.list": (JobsListParams, JobsListResult),
    "jobs.claim": (JobsClaimParams, JobsClaimResult),
    "jobs.renew": (JobsRenewParams, JobsRenewResult),
    "jobs.publish": (JobsPublishParams, JobsPublishResult),
    "jobs.fail": (JobsFailParams, JobsFailResult),
    "jobs.release": (JobsReleaseParams, JobsReleaseResult),
    "jobs.retry": (JobsRetryParams, JobsRetryResult),
    "projects.list": (ProjectsListParams, ProjectsListResult),
    "projects.inspect": (ProjectsInspectParams, ProjectsInspectResult),
    "ledger.forget": (LedgerForgetParams, LedgerForgetResult),
    "grants.list": (GrantsListParams, GrantsListResult),
    "grants.revoke": (GrantsRevokeParams, GrantsRevokeResult),
}
