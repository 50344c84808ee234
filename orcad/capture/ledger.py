"""The automatic-memory ledger: `candidates.jsonl`, the one source of truth for candidates.

File format (UTF-8, one JSON object per line, every line ending in a newline):

    {"format":"orcad.candidates/1","revision":7,"candidates":2,"fingerprint":"<64 hex>",
     "merged_jobs":[{"job_id":"job_…","added":2,"duplicates":1,"rejected":0}, …]}
    {"id":"cand_…","category":"project","fact":"…","key":"…","session_id":"…","turn_id":"…",
     "job_id":"job_…","recorded_at":"2026-…Z","provider":"…","model":"…","prompt_version":"…"}
    …

(each object above is wrapped for reading; in the file it is one line)

The header says how many candidate lines follow and the fingerprint of those lines, so a
truncated, torn or garbled file is told apart from a good one. `fingerprint` is the sha256 hex
of the candidate lines exactly as written here (everything after the header line), so
`tail -n +2 candidates.jsonl | sha256sum` reproduces it; it depends only on the candidates,
never on the revision. `merged_jobs` lists the newest jobs already merged with their counts,
which makes publishing a job twice (after a crash) a no-op. Candidates are stored oldest first.

Pure part: `merge_job_candidates`, `forget`, `encode_ledger`, `decode_ledger`,
`normalize_fact`. I/O part: `read_ledger`, `write_ledger`.
Writers must hold the project's cross-process lock around read, merge/forget and write.
"""

from __future__ import annotations

import errno
import hashlib
import re
import secrets
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import msgspec

from orcad import limits
from orcad.capture.fact_folding import fold_compatibility_forms
from orcad.capture.projects import is_project_id
from orcad.capture.records import newer_format
from orcad.clock import format_time, parse_time, stamp_after
from orcad.durable_files import (
    FileSignature,
    file_signature,
    remove_stale_temps,
    replace_file_atomically,
)
from orcad.errors import Conflict, StorageError
from orcad.regular_files import NotARegularFile, read_regular_file
from orcad.secrets import contains_secret
from protocol.types import Candidate, Category, ExtractedFact, LedgerInfo

LEDGER_FILE = "candidates.jsonl"
LEDGER_FORMAT = "orcad.candidates/1"
CANDIDATE_ID_PREFIX = "cand_"
TRAILING_PUNCTUATION = ".!?;:,\u2026\u3002\uff01\uff1f"  # also ellipsis and CJK full stops
_WHITESPACE_RUN = re.compile(r"\s+")
_CANDIDATE_ID = re.compile(r"cand_[0-9a-f]{32}\Z")


class LedgerCorrupt(StorageError):
    """candidates.jsonl exists but is not a complete ledger; nothing was read from it."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"automatic-memory ledger {path} is damaged ({reason}); move it aside to reset "
            "automatic memory for this project, job files keep the evidence",
            path=str(path),
            reason=reason,
        )
        self.reason = reason


class LedgerFromNewerVersion(LedgerCorrupt):
    """candidates.jsonl names a later format than this orcad's: a newer version wrote it (this
    one was run again after it). Nothing is read or written, as for a damaged ledger, but the
    fix differs: moving the file aside would start the project's memory again for both."""

    def __init__(self, path: Path, written_format: str) -> None:
        StorageError.__init__(
            self,
            f"automatic-memory ledger {path} was written by a newer orcad (format "
            f"{written_format!r}; this one reads {LEDGER_FORMAT!r}); it is not damaged, do not "
            "move it aside: upgrade orcad again to use this project's automatic memory",
            path=str(path),
            reason="newer_format",
        )
        self.reason = "newer_format"


class _NewerFormat(ValueError):
    def __init__(self, written_format: str) -> None:
        super().__init__(f"format {written_format!r} is newer than {LEDGER_FORMAT!r}")
        self.written_format = written_format


class CandidateRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One candidate line; field order is the on-disk order."""

    id: str
    category: Category
    fact: str
    key: str  # normalize_fact(fact) when written (merges compare facts under today's rule)
    session_id: str
    turn_id: str
    job_id: str
    recorded_at: str
    provider: str
    model: str
    prompt_version: str

    def __post_init__(self) -> None:
        # recall orders by it: a ledger holding another string is corrupt (ValueError)
        parse_time(self.recorded_at)


class MergedJob(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    job_id: str
    added: int
    duplicates: int
    rejected: int


class LedgerHeader(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: str
    revision: int
    candidates: int
    fingerprint: str
    merged_jobs: list[MergedJob]


@dataclass(frozen=True)
class Ledger:
    """A ledger in memory. `revision` grows by one on every change; 0 means never written."""

    revision: int = 0
    candidates: tuple[CandidateRecord, ...] = ()
    merged_jobs: tuple[MergedJob, ...] = field(default=())

    @cached_property
    def fingerprint(self) -> str:
        """sha256 hex of the candidate lines as written; what the FTS5 index is keyed by."""
        return hashlib.sha256(_encode_candidates(self.candidates)).hexdigest()

    def find(self, candidate_id: str) -> CandidateRecord | None:
        for candidate in self.candidates:
            if candidate.id == candidate_id:
                return candidate
        return None


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where the facts of one job came from; copied onto every candidate it adds."""

    session_id: str
    turn_id: str
    provider: str
    model: str
    prompt_version: str


@dataclass(frozen=True, slots=True)
class MergeResult:
    added: int
    duplicates: int
    rejected: int
    replayed: bool = False  # the job was merged before; counts are those of the first merge


@dataclass(frozen=True, slots=True)
class ForgetResult:
    revision: int
    removed: bool


# --- pure rules -----------------------------------------------------------------------------


def normalize_fact(text: str) -> str:
    """The exact-duplicate key: NFKC but for superscripts, subscripts, circled characters and
    fractions (fact_folding), case-folded, whitespace collapsed, no trailing punctuation."""
    key = text
    while True:
        folded = fold_compatibility_forms(fold_compatibility_forms(key).casefold())
        collapsed = _WHITESPACE_RUN.sub(" ", folded).strip()
        trimmed = collapsed.rstrip(TRAILING_PUNCTUATION).strip()
        if trimmed == key:
            return key
        key = trimmed


def _current_key(candidate: CandidateRecord) -> str:
    """The candidate's key under today's rule: one written before superscripts and the like
    kept their form ("x2" for "x²") would count a different fact as its duplicate. An ASCII
    fact's key never changed (and recomputing all 128 would triple a merge's time)."""
    return candidate.key if candidate.fact.isascii() else normalize_fact(candidate.fact)


def forgotten_digest(text: str) -> str:
    """What a waiting job keeps of a fact forgotten while it waited: the sha256 of its
    duplicate key, so its publish cannot add the fact back and the text itself is not kept."""
    return _key_digest(normalize_fact(text))


def _key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_candidate_id() -> str:
    return CANDIDATE_ID_PREFIX + secrets.token_hex(16)


def merge_job_candidates(
    ledger: Ledger,
    job_id: str,
    facts: Iterable[ExtractedFact],
    provenance: Provenance,
    now: float,
    *,
    forgotten: Collection[str] = (),
    new_id: Callable[[], str] = new_candidate_id,
) -> tuple[Ledger, MergeResult]:
    """The ledger after merging one job's parsed facts, and what happened to them.

    Facts matching the secret detector are dropped (`rejected`); facts whose normalized text
    is already in the ledger, or earlier in the same job, or was forgotten while the job waited
    (its `forgotten_digest` is in `forgotten`) are dropped (`duplicates`); near
    duplicates are kept with their own provenance. Only the newest 128 candidates are kept.
    They are recorded at `now`, or just after the newest time in the ledger if `now` is not past
    it.
    A job already merged adds nothing and returns the counts of its first merge with
    `replayed=True` and the ledger unchanged (publish after a crash is idempotent).
    """
    for merged in ledger.merged_jobs:
        if merged.job_id == job_id:
            result = MergeResult(merged.added, merged.duplicates, merged.rejected, replayed=True)
            return ledger, result
    known = {_current_key(candidate) for candidate in ledger.candidates}
    # never before a candidate merged earlier, should the wall clock have been set back since:
    # recall takes the newer of two near-duplicates for the correction of the other
    latest = max((parse_time(c.recorded_at) for c in ledger.candidates), default=None)
    recorded_at = format_time(stamp_after(latest, now))
    added: list[CandidateRecord] = []
    duplicates = rejected = 0
    for fact in facts:
        if contains_secret(fact.fact):
            rejected += 1
            continue
        key = normalize_fact(fact.fact)
        if key in known or (forgotten and _key_digest(key) in forgotten):
            duplicates += 1
            continue
        known.add(key)
        added.append(
            CandidateRecord(
                id=new_id(),
                category=fact.category,
                fact=fact.fact,
                key=key,
                session_id=provenance.session_id,
                turn_id=provenance.turn_id,
                job_id=job_id,
                recorded_at=recorded_at,
                provider=provenance.provider,
                model=provenance.model,
                prompt_version=provenance.prompt_version,
            )
        )
    merged_job = MergedJob(
        job_id=job_id, added=len(added), duplicates=duplicates, rejected=rejected
    )
    candidates = (*ledger.candidates, *added)[-limits.LEDGER_MAX_CANDIDATES :]
    merged_jobs = (*ledger.merged_jobs, merged_job)[-limits.COMMITTED_JOBS_KEPT :]
    new_ledger = Ledger(ledger.revision + 1, candidates, merged_jobs)
    return new_ledger, MergeResult(len(added), duplicates, rejected)


def forget(
    ledger: Ledger, candidate_id: str, expected_revision: int
) -> tuple[Ledger, ForgetResult]:
    """The ledger without one candidate (spec: Inspect or Delete; PROTOCOL ledger.forget).

    Idempotent: a candidate already gone gives `removed=False` and the ledger unchanged,
    whatever the revision. A stale `expected_revision` while the candidate exists raises
    Conflict. Write the ledger back only when `removed` is true.
    """
    if ledger.find(candidate_id) is None:
        return ledger, ForgetResult(revision=ledger.revision, removed=False)
    if expected_revision != ledger.revision:
        raise Conflict(
            f"the ledger is at revision {ledger.revision}, not {expected_revision}; "
            "inspect the project again and retry",
            revision=ledger.revision,
        )
    remaining = tuple(c for c in ledger.candidates if c.id != candidate_id)
    new_ledger = Ledger(ledger.revision + 1, remaining, ledger.merged_jobs)
    return new_ledger, ForgetResult(revision=new_ledger.revision, removed=True)


def ledger_info(ledger: Ledger) -> LedgerInfo:
    """The wire view of a ledger for projects.inspect (candidates oldest first)."""
    return LedgerInfo(
        revision=ledger.revision,
        fingerprint=ledger.fingerprint,
        candidates=[
            Candidate(
                id=c.id,
                category=c.category,
                fact=c.fact,
                session_id=c.session_id,
                turn_id=c.turn_id,
                job_id=c.job_id,
                recorded_at=c.recorded_at,
                provider=c.provider,
                model=c.model,
            )
            for c in ledger.candidates
        ],
    )


# --- encoding -------------------------------------------------------------------------------

_candidate_decoder = msgspec.json.Decoder(CandidateRecord)
_header_decoder = msgspec.json.Decoder(LedgerHeader)


def _encode_candidates(candidates: Iterable[CandidateRecord]) -> bytes:
    return b"".join(msgspec.json.encode(candidate) + b"\n" for candidate in candidates)


def encode_ledger(ledger: Ledger) -> bytes:
    """The exact bytes of candidates.jsonl for this ledger."""
    header = LedgerHeader(
        format=LEDGER_FORMAT,
        revision=ledger.revision,
        candidates=len(ledger.candidates),
        fingerprint=ledger.fingerprint,
        merged_jobs=list(ledger.merged_jobs),
    )
    return msgspec.json.encode(header) + b"\n" + _encode_candidates(ledger.candidates)


def decode_ledger(data: bytes) -> Ledger:
    """Parse candidates.jsonl bytes; ValueError with a short reason unless a whole ledger."""
    if not data:
        raise ValueError("file is empty")
    if not data.endswith(b"\n"):
        raise ValueError("last line is cut short")
    lines = data[:-1].split(b"\n")
    written_format = newer_format(lines[0], LEDGER_FORMAT)
    if written_format is not None:
        raise _NewerFormat(written_format)
    try:
        header = _header_decoder.decode(lines[0])
    except msgspec.DecodeError as exc:
        raise ValueError(f"header line is not a ledger header: {exc}") from exc
    if header.format != LEDGER_FORMAT:
        raise ValueError(f"unknown format {header.format[:40]!r}")
    body = lines[1:]
    if len(body) != header.candidates:
        raise ValueError(f"header announces {header.candidates} candidates, found {len(body)}")
    candidates: list[CandidateRecord] = []
    for number, line in enumerate(body, start=2):
        try:
            candidate = _candidate_decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise ValueError(f"line {number} is not a candidate: {exc}") from exc
        if not _CANDIDATE_ID.match(candidate.id):
            raise ValueError(f"line {number} has a malformed candidate id")
        candidates.append(candidate)
    ledger = Ledger(header.revision, tuple(candidates), tuple(header.merged_jobs))
    if ledger.fingerprint != header.fingerprint:
        raise ValueError("candidate lines do not match the header fingerprint")
    return ledger


# --- files ----------------------------------------------------------------------------------


def ledger_path(project_dir: Path) -> Path:
    return project_dir / LEDGER_FILE


def read_ledger(project_dir: Path) -> Ledger:
    """The project's ledger; an empty one (revision 0) when the file does not exist.

    Raises LedgerCorrupt when the file exists but is not a complete ledger (or not a regular
    file: a symbolic link could bring in, and a write replace, a file outside the memory root),
    and StorageError when it cannot be read. Readers need no lock: the file is only ever
    replaced whole.
    """
    path = ledger_path(project_dir)
    try:
        data = read_regular_file(path, follow_symlinks=False)
    except FileNotFoundError:
        return Ledger()
    except NotARegularFile as exc:
        raise LedgerCorrupt(path, "it is not a regular file") from exc
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # what O_NOFOLLOW answers for a link
            raise LedgerCorrupt(path, "it is a symbolic link") from exc
        raise StorageError(f"cannot read {path}: {exc.strerror}", path=str(path)) from exc
    try:
        return decode_ledger(data)
    except _NewerFormat as exc:
        raise LedgerFromNewerVersion(path, exc.written_format) from exc
    except ValueError as exc:
        raise LedgerCorrupt(path, str(exc)) from exc


class HeldFacts:
    """Whether a project's ledger still holds a fact, as a recall snapshot showed it: called
    with the project's id (None when not known), the fact's candidate id and its recorded_at.

    A fact is held while its ledger has it, and also once it has aged out of a full ledger
    (which keeps the newest LEDGER_MAX_CANDIDATES: one recorded no later than the oldest kept
    went to make room, not to be forgotten). A project moved aside or deleted (its directory no
    longer named by its id), a ledger deleted alone, or either made again since, holds none of
    its earlier facts. A ledger that cannot be read holds none: it cannot be vouched for.
    Blocking (it reads each ledger asked about, once); use one for one check."""

    def __init__(self, projects_dir: Path) -> None:
        self._projects_dir = projects_dir
        self._ledgers: dict[str, tuple[frozenset[str], float | None] | None] = {}

    def __call__(self, project_id: str | None, fact_id: str, recorded_at: str) -> bool:
        if project_id is None:
            return False
        if project_id not in self._ledgers:
            self._ledgers[project_id] = self._read(project_id)
        found = self._ledgers[project_id]
        if found is None:
            return False
        ids, aged_out_until = found
        if fact_id in ids:
            return True
        try:
            return aged_out_until is not None and parse_time(recorded_at) <= aged_out_until
        except ValueError:
            return False

    def _read(self, project_id: str) -> tuple[frozenset[str], float | None] | None:
        """The project's candidate ids, and the oldest one's time when the ledger is full."""
        if not is_project_id(project_id):
            return None
        try:
            candidates = read_ledger(self._projects_dir / project_id).candidates
        except (StorageError, OSError):
            return None
        full = len(candidates) >= limits.LEDGER_MAX_CANDIDATES
        oldest = (
            min(parse_time(candidate.recorded_at) for candidate in candidates) if full else None
        )
        return frozenset(candidate.id for candidate in candidates), oldest


LedgerFileState = FileSignature | None  # None when absent


def ledger_file_state(project_dir: Path) -> LedgerFileState:
    """What changes whenever candidates.jsonl is replaced, moved aside or edited."""
    return file_signature(ledger_path(project_dir))


def write_ledger(project_dir: Path, ledger: Ledger) -> None:
    """Replace candidates.jsonl atomically with `ledger` (failpoints `ledger.after_temp_write`,
    `ledger.after_rename`). The caller holds the project lock and then publishes projections.

    Raises StorageError if the file could not be replaced; the old ledger is then intact.
    """
    path = ledger_path(project_dir)
    if path.is_symlink():  # replacing it would silently drop what it stands for
        raise LedgerCorrupt(path, "it is a symbolic link")
    remove_stale_temps(path)
    replace_file_atomically(path, encode_ledger(ledger), failpoints="ledger")
