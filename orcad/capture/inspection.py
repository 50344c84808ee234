"""projects.list, projects.inspect and ledger.forget: what is stored per project, and the one
revisioned way to remove an automatic-memory candidate."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
import structlog
import trio

from orcad.capture.jobstore import (
    delete_jobs,
    is_job_id,
    note_forgotten_jobs,
    read_job,
    write_job,
)
from orcad.capture.ledger import (
    TRAILING_PUNCTUATION,
    CandidateRecord,
    Ledger,
    forgotten_digest,
    read_ledger,
    write_ledger,
)
from orcad.capture.ledger import forget as forget_candidate
from orcad.capture.projections import (
    index_state,
    publish_projections,
    refresh_projections,
    remove_crash_leftovers,
)
from orcad.capture.projects import (
    JOBS_DIR,
    ProjectFile,
    file_in_place_of_directories,
    is_project_id,
    read_project_file,
)
from orcad.capture.records import JobRecord
from orcad.capture.service import CaptureService
from orcad.capture.source import bound_again
from orcad.errors import InvalidParams, NotFound, StorageError
from orcad.explicit import PROJECT_MEMORY_FILE, explicit_facts
from orcad.failpoints import failpoint
from orcad.identity import derive_project
from orcad.workspace import derive_workspace
from protocol.types import (
    Candidate,
    IndexInfo,
    IndexState,
    LedgerForgetParams,
    LedgerForgetResult,
    LedgerInfo,
    ProjectInfo,
    ProjectsInspectParams,
    ProjectsInspectResult,
    ProjectsListResult,
    ProjectSummary,
)

log = structlog.get_logger("orcad.capture")

# jobs that may still publish facts: a worker's, one waiting for one, and one a person may retry
WAITING_STATES = frozenset({"pending", "leased", "exhausted"})
FORGOTTEN_MARK = "[forgotten]"  # what stands in a waiting job's source for a forgotten fact


def to_candidate(record: CandidateRecord) -> Candidate:
    return Candidate(
        id=record.id,
        category=record.category,
        fact=record.fact,
        session_id=record.session_id,
        turn_id=record.turn_id,
        job_id=record.job_id,
        recorded_at=record.recorded_at,
        provider=record.provider,
        model=record.model,
    )


def _project_info(
    project_id: str, directory: Path, found: ProjectFile, identity: str
) -> ProjectInfo:
    record = found.record
    return ProjectInfo(
        id=project_id,
        identity=record.project_identity if record is not None else identity,
        last_seen_cwd=record.last_seen_cwd if record is not None else None,
        path=str(directory),
        corrupt=found.problem is not None,
        problem=found.problem,
    )


async def list_projects(capture: CaptureService) -> ProjectsListResult:
    await capture.drop_vanished_everywhere()
    project_ids = sorted(
        set(await trio.to_thread.run_sync(capture.projects.list_project_ids))
        | capture.index.known_projects()
    )

    def read_all() -> list[tuple[str, ProjectFile, int | None, str | None]]:
        rows: list[tuple[str, ProjectFile, int | None, str | None]] = []
        for project_id in project_ids:
            directory = capture.projects.project_dir(project_id)
            in_place = file_in_place_of_directories(directory)
            if in_place is not None and in_place[0] != directory / JOBS_DIR:
                # no file in it can be read: that is the problem, not each file's "Not a
                # directory" (which would send the user to chmod files that are not there)
                _, wrong, what_to_do = in_place
                rows.append((project_id, ProjectFile(problem=f"{wrong}: {what_to_do}"), None, None))
                continue
            found = read_project_file(directory, project_id)
            ledger_problem = None
            try:
                count: int | None = len(read_ledger(directory).candidates)
            except StorageError as exc:
                count, ledger_problem = None, exc.message
            rows.append((project_id, found, count, ledger_problem))
        return rows

    projects = []
    for project_id, found, count, ledger_problem in await trio.to_thread.run_sync(read_all):
        record = found.record
        problem = "; ".join(p for p in (found.problem, ledger_problem) if p) or None
        if ledger_problem is not None:
            capture.problems.report("ledger_corrupt", ledger_problem)
        projects.append(
            ProjectSummary(
                id=project_id,
                identity=record.project_identity if record is not None else "",
                last_seen_cwd=record.last_seen_cwd if record is not None else None,
                candidates=count or 0,
                active_jobs=capture.index.active_jobs(project_id),
                corrupt=problem is not None,
                problem=problem,
            )
        )
    return ProjectsListResult(projects=projects)


def resolve_project(params: ProjectsInspectParams) -> tuple[str, str]:
    """(project id, identity known from the request or "") of an inspect request."""
    if params.project_id is not None:
        if not is_project_id(params.project_id):
            raise InvalidParams(
                "project_id must be 64 lowercase hex digits (see projects.list)",
                field="project_id",
            )
        return params.project_id, ""
    if params.cwd is not None:
        try:
            workspace = derive_workspace(params.cwd)
        except ValueError as exc:
            raise InvalidParams(str(exc), field="cwd") from exc
        project = derive_project(Path(workspace.root))
        return project.id, project.identity
    raise InvalidParams("give project_id or cwd", field="project_id")


async def inspect_project(
    capture: CaptureService, params: ProjectsInspectParams
) -> ProjectsInspectResult:
    # deriving a project from a cwd reads the file system (realpath, Git config)
    project_id, identity = await trio.to_thread.run_sync(resolve_project, params)
    directory = capture.projects.project_dir(project_id)

    def read() -> tuple[ProjectFile, Ledger, IndexState]:
        if not directory.is_dir():
            raise NotFound(
                f"no memory is stored for project {project_id} ({directory} does not exist)"
            )
        found = read_project_file(directory, project_id)
        ledger = read_ledger(directory)
        return found, ledger, index_state(directory, ledger)

    found, ledger, state = await trio.to_thread.run_sync(read)
    explicit = await trio.to_thread.run_sync(
        explicit_facts, directory / PROJECT_MEMORY_FILE, capture.user_memory_file
    )
    if found.problem is not None:
        capture.problems.report("project_metadata_corrupt", found.problem)
    return ProjectsInspectResult(
        project=_project_info(project_id, directory, found, identity),
        ledger=LedgerInfo(
            revision=ledger.revision,
            fingerprint=ledger.fingerprint,
            candidates=[to_candidate(record) for record in ledger.candidates],
        ),
        index=IndexInfo(state=state),
        jobs=capture.job_summaries(project_id),
        explicit=explicit,
    )


async def forget(
    capture: CaptureService,
    params: LedgerForgetParams,
    purge_copies: Callable[[list[str]], Awaitable[object]] | None = None,
    owe_purge: Callable[[], None] | None = None,
) -> LedgerForgetResult:
    """Remove one candidate if the caller saw the current revision (idempotent).

    Unless `keep_evidence`, the committed jobs whose source held the fact (the one that
    produced it, and any other holding its text) are deleted first. Jobs still waiting
    (pending, leased or exhausted) are told the fact's digest, so their publish cannot add it
    back, and unless `keep_evidence` its text is cut out of their sources. Then the ledger is
    written: a crash in between leaves the candidate, and forgetting it again finishes.
    `purge_copies` then drops other copies of the text (recall snapshots); `owe_purge`, called
    before the ledger is written, makes sure that a crash before that purge drops them at the
    next start."""
    if not is_project_id(params.project_id):
        raise InvalidParams(
            "project_id must be 64 lowercase hex digits (see projects.list)", field="project_id"
        )
    directory = capture.projects.project_dir(params.project_id)
    if not await trio.to_thread.run_sync(directory.is_dir):
        raise NotFound(f"no memory is stored for project {params.project_id}")

    def work(
        directory: Path, committed: list[str], waiting: list[str]
    ) -> tuple[LedgerForgetResult, list[JobRecord], list[str], str | None]:
        before = read_ledger(directory)
        candidate = before.find(params.candidate_id)
        ledger, result = forget_candidate(before, params.candidate_id, params.revision)
        problems: list[str] = []
        purged: list[str] = []
        shielded: list[JobRecord] = []
        if result.removed:
            assert candidate is not None
            if not params.keep_evidence:
                purged = purge_evidence(directory, candidate, committed)
            else:  # its job stays, but once retention deletes it the turn could make it anew
                note_forgotten_jobs(directory, producing_job(candidate))
            shielded = shield_waiting_jobs(
                directory, candidate, waiting, scrub=not params.keep_evidence
            )
            if owe_purge is not None and purge_copies is not None:
                owe_purge()
            write_ledger(directory, ledger)
            failpoint("ledger.after_forget_ledger_write")
            problems = publish_projections(directory, ledger)
            failpoint("ledger.after_forget_commit")
        else:  # a forget repeated after a stop may find the derived files still showing it
            problems = refresh_projections(directory, before)
        # a crash's temp files may hold the fact too, also when an earlier forget removed it
        remove_crash_leftovers(directory)
        forgotten = LedgerForgetResult(
            revision=result.revision,
            removed=result.removed,
            purged_jobs=purged,
            waiting_jobs=[job.job_id for job in shielded],
        )
        return forgotten, shielded, problems, candidate.fact if candidate is not None else None

    # the index is read under the project's lock, as publish reads it: a job admitted while
    # this forget waited for the lock is among the waiting ones
    async with capture.projects.lock(params.project_id):
        views = capture.index.views(params.project_id)
        committed = [view.job_id for view in views if view.state == "committed"]
        waiting = [view.job_id for view in views if view.state in WAITING_STATES]
        forgotten = await capture.projects.run_with_lock_held(
            params.project_id, lambda directory: work(directory, committed, waiting)
        )
        result, shielded, problems, fact = forgotten
        capture.index.drop(result.purged_jobs)
        for job in shielded:
            capture.index.put(job)
    for problem in problems:
        capture.problems.report("projection_failed", problem)
    if result.removed and fact is not None and purge_copies is not None:
        await purge_copies([fact])
    log.info(
        "ledger.forgot",
        project_id=params.project_id,
        candidate_id=params.candidate_id,
        removed=result.removed,
        revision=result.revision,
        purged_jobs=len(result.purged_jobs),
        waiting_jobs=len(result.waiting_jobs),
    )
    return result


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


class FactText:
    """Where a forgotten fact's text stands in a job's source: its words in any case, with any
    whitespace between them, with or without the closing punctuation an extractor may have
    added, and not inside a longer word ("use tabs" is not in "use tabsize")."""

    def __init__(self, fact: str) -> None:
        core = fact.strip().rstrip(TRAILING_PUNCTUATION).strip()
        words = core.split()
        start = r"(?<!\w)" if words and re.match(r"\w", words[0]) else ""
        end = r"(?!\w)" if words and re.search(r"\w$", words[-1]) else ""
        body = r"\s+".join(map(re.escape, words))
        self.pattern = re.compile(start + body + end, re.IGNORECASE) if words else None
        # the same on fully case-folded text ("STRASSE" for "Straße"), where offsets shift
        folded = start + re.escape(_folded(core)) + end
        self.folded_pattern = re.compile(folded) if words else None

    def found_in(self, source: str) -> bool:
        if self.pattern is None or self.folded_pattern is None:
            return False
        return bool(self.pattern.search(source) or self.folded_pattern.search(_folded(source)))

    def cut_from(self, source: str) -> str:
        """`source` with every occurrence replaced by FORGOTTEN_MARK. An occurrence that only
        full case folding finds takes the whole source with it: the text must go, and its
        offsets in the original cannot be trusted. So does one left beside others cut
        ("Straße ist gesperrt" and "STRASSE IST GESPERRT" in one source)."""
        if self.pattern is None or self.folded_pattern is None:
            return source
        cut = self.pattern.sub(FORGOTTEN_MARK, source)
        # looked for between the marks only: a fact such as "forgotten" is not in them
        if any(self.folded_pattern.search(_folded(part)) for part in cut.split(FORGOTTEN_MARK)):
            return FORGOTTEN_MARK
        return cut


def shield_waiting_jobs(
    directory: Path, candidate: CandidateRecord, waiting: list[str], *, scrub: bool
) -> list[JobRecord]:
    """Tell every job that may still publish (`waiting`) that the candidate's fact is forgotten,
    and (with `scrub`) cut the fact's text out of its source; the jobs as written.

    Blocking; call with the project lock held, which every lease change also takes, so no
    worker's write can undo this one. A damaged job file is left as found."""
    digest = forgotten_digest(candidate.fact)
    text = FactText(candidate.fact)
    shielded: list[JobRecord] = []
    for job_id in waiting:
        try:
            job = read_job(directory, job_id)
        except (StorageError, NotFound):
            continue
        if job is None or job.state not in WAITING_STATES:
            continue
        # the mark may be longer than the text it stands for: the bound holds all the same
        source = bound_again(text.cut_from(job.source)) if scrub else job.source
        known = job.forgotten_digests()
        told = known if digest in known else [*known, digest]
        if source == job.source and told is known:
            continue  # told and cut before (a forget repeated after a crash)
        changed = msgspec.structs.replace(job, source=source, forgotten=told)
        write_job(directory, changed)
        shielded.append(changed)
    return shielded


def purge_evidence(directory: Path, candidate: CandidateRecord, committed: list[str]) -> list[str]:
    """Delete the committed jobs whose source produced or holds the candidate's fact; their ids.

    Blocking; call with the project lock held. A damaged job file is left as found."""
    text = FactText(candidate.fact)
    purged: list[str] = []
    for job_id in dict.fromkeys([candidate.job_id, *committed]):
        try:
            job = read_job(directory, job_id)
        except (StorageError, NotFound):
            continue
        if job is None or job.state != "committed":
            continue
        if job_id == candidate.job_id or text.found_in(job.source):
            purged.append(job_id)
    # noted first: at no moment is a job gone whose turn, reported again, would make it anew
    note_forgotten_jobs(directory, [*producing_job(candidate), *purged])
    delete_jobs(directory, purged)
    return purged


def producing_job(candidate: CandidateRecord) -> list[str]:
    """The id of the job that produced `candidate`, when it names one."""
    return [candidate.job_id] if is_job_id(candidate.job_id) else []
