"""`orcactl projects`, `orcactl inspect [PATH]`, `orcactl jobs`, `orcactl jobs retry ID`,
`orcactl forget ID`: what automatic memory holds per project, its extraction jobs, and
revisioned forgetting."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import msgspec

from orcactl.arguments import (
    candidate_id,
    current_directory,
    existing_directory,
    job_id,
    project_id,
)
from orcactl.commands.daemon import next_try
from orcactl.commands.damaged_ledger import (
    MARKDOWN_VIEW,
    PROJECT_FILE,
    damaged_ledger,
    damaged_project,
    file_line,
    job_written_by_newer,
    ledger_fix,
    list_files,
    project_file_fix,
    read_markdown_view,
)
from orcactl.connect import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    call,
    connect,
    print_json,
    remote_failure,
)
from orcactl.terminal import one_line
from protocol.client import Client
from protocol.errors import RemoteError
from protocol.types import (
    DamagedJob,
    ExplicitFactsInfo,
    JobsListResult,
    JobsRetryResult,
    JobSummary,
    LedgerForgetResult,
    ProjectsInspectResult,
    ProjectsListResult,
)

JOB_STATES = ("pending", "leased", "committed", "exhausted", "cancelled")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    projects = subparsers.add_parser(
        "projects", help="list projects with automatic memory (id, identity, candidates, jobs)"
    )
    projects.add_argument("--json", action="store_true", help="print the result as JSON")
    projects.set_defaults(run=run_projects)

    inspect = subparsers.add_parser(
        "inspect",
        help="show a project's ledger, index state, explicit facts and jobs (default: this "
        "directory)",
    )
    # both given, the path was silently ignored: one names the project
    which = inspect.add_mutually_exclusive_group()
    which.add_argument(
        "path",
        metavar="PATH",
        nargs="?",
        type=existing_directory,
        help="a directory inside the project (default: .)",
    )
    which.add_argument(
        "--project", metavar="ID", type=project_id, help="a project id instead of a path"
    )
    inspect.add_argument("--json", action="store_true", help="print the result as JSON")
    inspect.set_defaults(run=run_inspect)

    jobs = subparsers.add_parser("jobs", help="list extraction jobs")
    jobs.add_argument("--state", choices=JOB_STATES, help="only jobs in this state")
    jobs.add_argument("--project", metavar="ID", type=project_id, help="only this project's jobs")
    jobs.add_argument("--json", action="store_true", help="print the result as JSON")
    jobs.set_defaults(run=run_jobs)
    jobs_actions = jobs.add_subparsers(dest="jobs_action", metavar="{retry}")
    retry = jobs_actions.add_parser(
        "retry", help="run an exhausted job again (its attempts start over)"
    )
    retry.add_argument(
        "job_id", metavar="ID", type=job_id, help="a job_... id shown by orcactl jobs"
    )
    retry.add_argument("--json", action="store_true", help="print the result as JSON")
    retry.set_defaults(run=run_jobs_retry)

    forget = subparsers.add_parser(
        "forget",
        help="remove one automatic-memory candidate (checked against the ledger revision)",
    )
    forget.add_argument(
        "candidate_id", metavar="ID", type=candidate_id, help="a cand_... id shown by inspect"
    )
    which_project = forget.add_mutually_exclusive_group()  # both: --cwd was ignored
    which_project.add_argument(
        "--project",
        metavar="ID",
        type=project_id,
        help="the project id (default: this directory's)",
    )
    which_project.add_argument(
        "--cwd",
        metavar="DIR",
        type=existing_directory,
        help="a directory inside the project (default: .)",
    )
    forget.add_argument(
        "--keep-evidence",
        action="store_true",
        help="keep the committed extraction jobs whose source holds the fact (by default they "
        "are deleted with it)",
    )
    forget.add_argument("--json", action="store_true", help="print the result as JSON")
    forget.set_defaults(run=run_forget, changes_memory=True)


def _project_params(project: str | None, path: str | None, instead: str) -> dict[str, Any]:
    if project:
        return {"project_id": project}
    return {"cwd": path or current_directory(instead)}


def run_projects(args: argparse.Namespace) -> int:
    result: ProjectsListResult = call(args, "projects.list", {})
    if args.json:
        print_json(result)
        return EXIT_OK
    if not result.projects:
        print("no projects with automatic memory yet")
        return EXIT_OK
    for project in result.projects:
        # the problem may be the ledger's, project.json's or both: it names the file
        flag = "  [damaged]" if project.corrupt else ""
        print(f"{project.id}{flag}")
        print(f"  identity: {one_line(project.identity) or '(unknown)'}")
        print(f"  last cwd: {one_line(project.last_seen_cwd) or '(unknown)'}")
        print(f"  {project.candidates} candidates, {project.active_jobs} active jobs")
        if project.problem:
            print(f"  problem:  {project.problem}")
    return EXIT_OK


def _job_line(job: JobSummary) -> str:
    error = f"  last error: {job.last_error}" if job.last_error else ""
    when = next_try(job.not_before)  # a failed attempt's back-off or Retry-After
    waits = f"  next try {when}" if when else ""
    return (
        f"{job.job_id}  {job.state:<9}  failed attempts {job.attempts}  turn {job.turn_id}  "
        f"updated {job.updated_at}{waits}{error}"
    )


def _damaged_job_line(damaged: DamagedJob) -> str:
    if job_written_by_newer(damaged.path, damaged.problem):
        # not damaged: moving it out, as for a damaged one, would give the job up
        return (
            f"{damaged.job_id}  NEWER    {damaged.path} (written by a newer orcad; kept as "
            "found and the job is held until it is installed again)"
        )
    return f"{damaged.job_id}  DAMAGED  {damaged.path} (kept as found; the job is held)"


def run_inspect(args: argparse.Namespace) -> int:
    # a removed cwd is refused before a start; inspect takes its directory as PATH
    params = _project_params(args.project, args.path, "name a directory: orcactl inspect PATH")
    with connect(args) as client:
        try:
            result: ProjectsInspectResult = client.call("projects.inspect", params)
            # the index has no job whose file does not parse: jobs.list names those
            listed: JobsListResult = client.call("jobs.list", {"project_id": result.project.id})
        except RemoteError as exc:
            unreadable = damaged_ledger(exc)
            if unreadable is None:
                raise remote_failure(exc) from None
            return _inspect_damaged(args, client, unreadable, exc.error.message)
    # a damaged project.json (the ledger read, so it is the file named) is shown, with its fix,
    # and fails the command, as a damaged ledger does
    damaged = _damaged_project_file(result)
    status = EXIT_OK if damaged is None else EXIT_ERROR
    if args.json:
        report = {**msgspec.to_builtins(result), "damaged_jobs": listed.damaged}
        print_json(report if damaged is None else {**report, "damaged_file": damaged})
        return status
    project, ledger = result.project, result.ledger
    print(f"project   {project.id}" + ("" if damaged is None else "  [damaged]"))
    print(f"identity  {one_line(project.identity) or '(unknown)'}")
    print(f"last cwd  {one_line(project.last_seen_cwd) or '(unknown)'}")
    print(f"directory {one_line(project.path)}")
    if damaged is not None:
        print(f"DAMAGED   {damaged['problem']}")
        print(f"fix       {damaged['fix']}")
    print(f"ledger    revision {ledger.revision}, {len(ledger.candidates)} candidates")
    print(f"index     {result.index.state}")
    for candidate in ledger.candidates:
        print(f"  {candidate.id}  [{candidate.category}] {candidate.fact}")
        print(
            f"      {candidate.recorded_at}  session {candidate.session_id}  turn "
            f"{candidate.turn_id}  via {candidate.provider}"
            + (f"/{candidate.model}" if candidate.model else "")
        )
    _print_explicit(result.explicit)
    _print_jobs(result.jobs, listed.damaged)
    return status


def _print_explicit(explicit: ExplicitFactsInfo | None) -> None:
    """The project's explicit facts (memory.md, as a new session is given them) and where
    user.md is; nothing from an orcad that does not send them."""
    if explicit is None:
        return
    path = one_line(explicit.path)
    if explicit.problem is not None:
        print(f"explicit  {path}: {one_line(explicit.problem)}")
    elif not explicit.text.strip():
        print(f"explicit  none ({path} holds no facts)")
    else:
        cut = ", the newest shown (older ones left out)" if explicit.truncated else ""
        print(f"explicit  {path}{cut}:")
        print("\n".join(f"  | {line}" for line in explicit.text.splitlines()))
    if explicit.user_path is not None:
        user = one_line(explicit.user_path)
        if explicit.user_bytes is None:
            print(f"user      none ({user}: facts every project's sessions are given)")
        else:
            print(
                f"user      {user}: {explicit.user_bytes} bytes of facts every project's "
                "sessions are given (not shown here)"
            )


def _damaged_project_file(result: ProjectsInspectResult) -> dict[str, str] | None:
    """The project's damaged project.json (--json's `damaged_file`), None when it is sound."""
    if not result.project.corrupt:
        return None
    path = Path(result.project.path) / PROJECT_FILE
    problem = result.project.problem or f"{path} is damaged"
    return {"path": str(path), "problem": problem, "fix": project_file_fix(path, problem)}


def _print_jobs(jobs: list[JobSummary], damaged: list[DamagedJob]) -> None:
    print(f"jobs      {len(jobs) + len(damaged)}")
    for job in jobs:
        print(f"  {_job_line(job)}")
    for damaged_job in damaged:
        print(f"  {_damaged_job_line(damaged_job)}")


def _inspect_damaged(args: argparse.Namespace, client: Client, ledger: Path, problem: str) -> int:
    """A project whose ledger orcad cannot read still has its jobs, its files and the Markdown
    view of the ledger as last written: shown with the damaged file and what to do, exit 1."""
    directory = ledger.parent
    try:
        listed: ProjectsListResult = client.call("projects.list", {})
        jobs: JobsListResult = client.call("jobs.list", {"project_id": directory.name})
    except RemoteError as exc:
        raise remote_failure(exc) from None
    summary = next((p for p in listed.projects if p.id == directory.name), None)
    project = damaged_project(directory.name, directory, summary, problem)
    report = {
        "project": project,
        "ledger": None,
        "index": None,
        "damaged_file": {
            "path": str(ledger),
            "problem": problem,
            "fix": ledger_fix(ledger, problem),
        },
        "files": list_files(directory),
        "markdown_view": read_markdown_view(directory / MARKDOWN_VIEW),
    }
    explicit = _explicit_facts(directory)
    if args.json:
        print_json(
            {**report, "explicit": explicit, "jobs": jobs.jobs, "damaged_jobs": jobs.damaged}
        )
    else:
        _print_damaged(report, jobs, explicit)
    return EXIT_ERROR


def _explicit_facts(directory: Path) -> ExplicitFactsInfo:
    """The project's memory.md, read as orcad reads it for projects.inspect (the newest facts
    within what a new session is given, never waiting on a file that is not a regular one), and
    user.md beside the projects directory."""
    from orcad.explicit import PROJECT_MEMORY_FILE, explicit_facts  # noqa: PLC0415

    user_file = directory.parent.parent / "user.md"  # <memory root>/projects/<id>
    return explicit_facts(directory / PROJECT_MEMORY_FILE, user_file, log_fault=False)


def _print_damaged(
    report: dict[str, Any], jobs: JobsListResult, explicit: ExplicitFactsInfo
) -> None:
    project, damaged, view = report["project"], report["damaged_file"], report["markdown_view"]
    print(f"project   {project['id']}  [damaged]")
    print(f"identity  {one_line(project['identity']) or '(unknown)'}")
    print(f"last cwd  {one_line(project['last_seen_cwd']) or '(unknown)'}")
    print(f"directory {one_line(project['path'])}")
    print(f"DAMAGED   {damaged['problem']}")
    print(f"fix       {damaged['fix']}")
    print("files     " + (", ".join(map(file_line, report["files"])) or "(none)"))
    if view["text"] is None:
        print(f"ledger    unreadable; {MARKDOWN_VIEW}: {view['problem']}")
    else:
        note = f" ({view['problem']})" if view["problem"] else ""
        print(f"ledger    unreadable; {MARKDOWN_VIEW}, its facts as last written{note}:")
        print("\n".join(f"  | {line}" for line in view["text"].splitlines()))
    _print_explicit(explicit)
    _print_jobs(jobs.jobs, jobs.damaged)


def run_jobs(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {}
    if args.state:
        params["state"] = args.state
    if args.project:
        params["project_id"] = args.project
    result: JobsListResult = call(args, "jobs.list", params)
    if args.json:
        print_json(result)
        return EXIT_OK
    if not result.jobs and not result.damaged:
        print("no jobs")
    for job in result.jobs:
        print(_job_line(job))
    for damaged in result.damaged:
        print(_damaged_job_line(damaged))
    return EXIT_OK


# the daemon points its clients at the wire method; a user of orcactl runs the command
WIRE_JOBS_HINT = "list jobs with jobs.list"
USER_JOBS_HINT = "list jobs with `orcactl jobs`"


def run_jobs_retry(args: argparse.Namespace) -> int:
    # given before `retry`, they were dropped unread: the job was retried whatever its state
    # or project, which a user who gave them meant to check
    filters = (("--state", args.state), ("--project", args.project))
    given = [option for option, value in filters if value is not None]
    if given:
        verb = "choose" if len(given) > 1 else "chooses"
        raise CommandError(
            f"{' and '.join(given)} only {verb} the jobs `orcactl jobs` lists; "
            "`orcactl jobs retry ID` takes the job's id alone",
            EXIT_USAGE,
        )
    try:
        result: JobsRetryResult = call(args, "jobs.retry", {"job_id": args.job_id})
    except CommandError as exc:
        message = str(exc).replace(WIRE_JOBS_HINT, USER_JOBS_HINT)
        raise CommandError(message, exc.status, error=exc.error) from None
    if args.json:
        print_json(result)
    else:
        print(f"{args.job_id} is {result.state} again; a worker will take it up")
    return EXIT_OK


def run_forget(args: argparse.Namespace) -> int:
    params = _project_params(args.project, args.cwd, "give --cwd DIR")
    with connect(args) as client:
        try:
            inspected: ProjectsInspectResult = client.call("projects.inspect", params)
        except RemoteError as exc:
            if exc.kind != "not_found":
                raise remote_failure(exc) from None
            return _forget_without_memory(args, exc.error.message)
    result: LedgerForgetResult = call(
        args,
        "ledger.forget",
        {
            "project_id": inspected.project.id,
            "candidate_id": args.candidate_id,
            "revision": inspected.ledger.revision,
            "keep_evidence": args.keep_evidence,
        },
    )
    if not result.removed:
        _refuse_if_held_elsewhere(args, inspected.project.id)
    if args.json:
        print_json(result)
    elif result.removed:
        print(f"forgot {args.candidate_id}; ledger revision {result.revision}")
        if result.purged_jobs:
            print(
                f"deleted {len(result.purged_jobs)} committed job(s) whose source held it: "
                + ", ".join(result.purged_jobs)
            )
        elif args.keep_evidence:
            print("kept the jobs whose source holds it (--keep-evidence)")
        if result.waiting_jobs:
            print(
                f"{len(result.waiting_jobs)} job(s) not yet published will not add it back: "
                + ", ".join(result.waiting_jobs)
            )
    else:
        print(
            f"{args.candidate_id} is not in the ledger (already forgotten, or never there); "
            "nothing changed"
        )
    return EXIT_OK


def _forget_without_memory(args: argparse.Namespace, why: str) -> int:
    """The project asked of has no memory stored, so the id is in none of its ledgers: refused,
    naming the project, when another one holds it, else already forgotten (exit 0)."""
    _refuse_if_held_elsewhere(args, None)
    if args.json:
        print_json(LedgerForgetResult(revision=0, removed=False, purged_jobs=[], waiting_jobs=[]))
    else:
        print(f"{args.candidate_id} is in no ledger (already forgotten, or never there): {why}")
    return EXIT_OK


def _refuse_if_held_elsewhere(args: argparse.Namespace, searched: str | None) -> None:
    """A candidate id another project's ledger holds (one copied from `orcactl inspect` of
    that project) is not forgotten: saying "already forgotten" would leave the fact in memory
    while the user believes it gone. A project whose ledger cannot be read is skipped.
    `searched`: the project asked of, None when it has no memory stored (and so no id)."""
    asked = (
        f"project {searched}"
        if searched is not None
        else "the project asked of (it has no memory stored)"
    )
    listed: ProjectsListResult = call(args, "projects.list", {})
    for project in listed.projects:
        if project.id == searched:
            continue
        try:
            other: ProjectsInspectResult = call(
                args, "projects.inspect", {"project_id": project.id}
            )
        except CommandError:  # a damaged ledger: nothing in it can be forgotten now
            continue
        if any(candidate.id == args.candidate_id for candidate in other.ledger.candidates):
            raise CommandError(
                f"{args.candidate_id} is not in {asked} but in project {project.id} "
                f"({project.identity or 'identity unknown'}); nothing changed. To forget it "
                f"there: orcactl forget {args.candidate_id} --project {project.id}"
            )
