"""Doctor's checks of the projects: each project's files and index, and its extraction jobs
(exhausted, stuck or damaged), through the running daemon or, without one, from the files."""

from __future__ import annotations

import os
import time
from pathlib import Path

from orcactl.commands.doctor_daemon import offered
from orcactl.commands.doctor_faults import (
    Finding,
    damaged_job_fix,
    judge_damaged_jobs,
    judge_damaged_project,
)
from orcad.clock import parse_time
from orcad.config import Config
from orcad.errors import StorageError
from orcad.limits import DOCTOR_STUCK_AFTER_MIN_S
from orcad.paths import Paths
from protocol.client import Client
from protocol.errors import RemoteError
from protocol.types import JobSummary

STUCK_LEASES = 10  # ...or this many lease periods, when leases are long


def stuck_after_s(config: Config) -> float:
    return max(DOCTOR_STUCK_AFTER_MIN_S, STUCK_LEASES * config.extraction.lease_s)


def judge_jobs(jobs: list[JobSummary], now: float, stuck_after: float) -> list[Finding]:
    found = []
    for job in jobs:
        if job.state == "exhausted":
            reason = f": {job.last_error}" if job.last_error else ""
            found.append(
                Finding(
                    "jobs",
                    "problem",
                    f"job {job.job_id} (project {job.project_id}) gave up after {job.attempts} "
                    f"attempts{reason}",
                    "fix the provider (see the provider check), then run the job again: "
                    f"orcactl jobs retry {job.job_id} (until then it is kept for inspection: "
                    "orcactl jobs --state exhausted)",
                )
            )
        elif job.state in ("pending", "leased") and now - parse_time(job.updated_at) > stuck_after:
            idle_min = (now - parse_time(job.updated_at)) / 60
            found.append(
                Finding(
                    "jobs",
                    "problem",
                    f"job {job.job_id} (project {job.project_id}) has been {job.state} "
                    f"with no progress for {idle_min:.0f} min",
                    "check that workers run (orcactl status) and the provider answers; "
                    "restarting orcad returns abandoned leases to the queue",
                )
            )
    return found


def judge_index(project: str, state: str, revision: int, where: Path | str) -> Finding:
    if state == "current":
        return Finding("index", "ok", f"project {project}: index current")
    if state == "missing" and revision == 0:  # nothing published yet: nothing to index
        return Finding("index", "ok", f"project {project}: no facts yet, so no index yet")
    fixes = {
        "stale": "it is rebuilt at the next capture or recall; restarting orcad rebuilds it now",
        "missing": "it is rebuilt at the next capture or recall; restarting orcad rebuilds it now",
        "corrupt": f"remove {where}/index.sqlite3; orcad rebuilds it from candidates.jsonl",
    }
    return Finding(
        "index",
        "problem",
        f"project {project}: index is {state}",
        fixes.get(state, "restart orcad"),
    )


def check_projects_live(
    client: Client, config: Config, projects_dir: Path | None = None
) -> list[Finding]:
    from orcad.capture import projects  # noqa: PLC0415 - filelock
    from orcad.capture.projects import file_in_place_of_directories  # noqa: PLC0415

    if projects_dir is not None and projects.projects_dir_wrong(projects_dir) is not None:
        return [not_a_projects_dir(projects_dir)]
    found: list[Finding] = []
    listed, skipped = offered(client, "projects.list", {})
    if skipped is not None:
        found.append(Finding("index", "skipped", skipped.detail))
    else:
        for project in listed.projects:
            directory = (projects_dir or Path("projects")) / project.id
            in_place = None if projects_dir is None else file_in_place_of_directories(directory)
            if in_place is not None and in_place[0] == directory:  # the memory check's to name
                continue
            if project.corrupt:
                problem = getattr(project, "problem", None)
                found.append(judge_damaged_project(project.id, directory, problem))
                continue
            try:
                inspected, skipped = offered(client, "projects.inspect", {"project_id": project.id})
            except RemoteError as exc:  # damaged after it was listed, or unreadable
                found.append(judge_damaged_project(project.id, directory, str(exc)))
                continue
            if skipped is not None:
                found.append(Finding("index", "skipped", skipped.detail))
                break
            found.append(
                judge_index(
                    project.id,
                    inspected.index.state,
                    inspected.ledger.revision,
                    inspected.project.path,
                )
            )
        if not listed.projects:
            found.append(Finding("index", "ok", "no projects yet"))
    jobs, skipped = offered(client, "jobs.list", {})
    if skipped is not None:
        found.append(Finding("jobs", "skipped", skipped.detail))
    else:
        damaged = judge_damaged_jobs(getattr(jobs, "damaged", []))
        found.extend(
            judge_jobs(jobs.jobs, time.time(), stuck_after_s(config)) + damaged
            or [Finding("jobs", "ok", "no exhausted, stuck or damaged jobs")]
        )
    return found


def not_a_projects_dir(projects_dir: Path) -> Finding:
    """The index check when no directory stands at projects/: the memory check names it."""
    return Finding(
        "index", "skipped", f"not checked: {projects_dir} is no directory (see the memory check)"
    )


def check_projects_offline(paths: Paths, config: Config) -> list[Finding]:
    """The daemon is not running: read the project files (replaced whole, so safe to read)."""
    from orcad.capture import jobstore, ledger, projections, projects  # noqa: PLC0415
    from orcad.capture.records import summary_of  # noqa: PLC0415

    if projects.projects_dir_wrong(paths.projects_dir) is not None:
        return [not_a_projects_dir(paths.projects_dir)]
    found: list[Finding] = []
    jobs: list[JobSummary] = []
    ids = projects.list_project_ids(paths.projects_dir)
    for project_id in ids:
        directory = paths.projects_dir / project_id
        described = projects.read_project_file(directory, project_id)
        if described.problem is not None:
            found.append(judge_damaged_project(project_id, directory, described.problem))
        try:
            current = ledger.read_ledger(directory)
        except StorageError as exc:
            found.append(judge_damaged_project(project_id, directory, str(exc)))
            continue
        found.append(
            judge_index(
                project_id, projections.index_state(directory, current), current.revision, directory
            )
        )
        jobs_dir = directory / projects.JOBS_DIR
        names = sorted(os.listdir(jobs_dir)) if jobs_dir.is_dir() else []
        for name in names:
            job_id = name.removesuffix(".json")
            if not (name.endswith(".json") and jobstore.is_job_id(job_id)):
                continue
            try:
                record = jobstore.read_job(directory, job_id)
            except StorageError as exc:
                found.append(
                    Finding(
                        "jobs",
                        "problem",
                        f"job {job_id} (project {project_id}): {exc.message}",
                        damaged_job_fix(jobs_dir / name, exc.message),
                    )
                )
                continue
            if record is not None:
                jobs.append(summary_of(record))
    if not ids:
        found.append(Finding("index", "ok", "no projects yet"))
    found.extend(
        judge_jobs(jobs, time.time(), stuck_after_s(config))
        or [Finding("jobs", "ok", "no exhausted, stuck or damaged jobs")]
    )
    return found
