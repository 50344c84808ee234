"""`orcactl doctor`: find what is wrong with this user's orcad, and say how to fix each thing.

Permission checks read the files themselves; what only the daemon knows (projects, jobs, recent
errors) comes over the socket when it runs, and from the project files when it does not. A method
the running daemon does not offer makes its check "skipped", never a failure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import time
import urllib.error
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

import msgspec

from orcactl.arguments import bounded_int
from orcactl.commands.doctor_faults import (
    Finding,
    check_databases,
    guarded,
    judge_daemon_errors,
    judge_damaged_jobs,
    judge_damaged_project,
)
from orcactl.connect import EXIT_ERROR, EXIT_OK, print_json, socket_path
from orcactl.integrate import agent_findings
from orcad.clock import parse_time
from orcad.config import Config, load_config
from orcad.errors import StartupError, StorageError
from orcad.limits import (
    DOCTOR_DAEMON_TIMEOUT_S,
    DOCTOR_PROVIDER_TIMEOUT_S,
    DOCTOR_STUCK_AFTER_MIN_S,
)
from orcad.paths import Paths, resolve_paths
from orcad.runtime import check_home_directory
from protocol.client import Client, DaemonUnavailable, ProtocolViolation
from protocol.errors import ErrorCode, RemoteError
from protocol.types import EmbeddingStatus, JobSummary

DEFAULT_MIN_FREE_MB = 200
STUCK_LEASES = 10  # ...or this many lease periods, when leases are long
FILE_SCAN_LIMIT = 10000  # entries looked at under the memory root


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = subparsers.add_parser(
        "doctor", help="check the socket, permissions, config, provider, indexes, jobs and disk"
    )
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON")
    doctor.add_argument(
        "--min-free-mb",
        type=bounded_int(0),
        default=DEFAULT_MIN_FREE_MB,
        metavar="MB",
        help=f"report a problem below this much free disk space (default {DEFAULT_MIN_FREE_MB})",
    )
    doctor.set_defaults(run=run_doctor)


# --- pure judgments -------------------------------------------------------------------------


def judge_private(check: str, path: Path, info: os.stat_result, uid: int) -> list[Finding]:
    """A path must be ours and closed to group and others."""
    kind = "directory" if stat.S_ISDIR(info.st_mode) else "file"
    mode = stat.S_IMODE(info.st_mode)
    found = []
    if info.st_uid != uid:
        found.append(
            Finding(
                check,
                "problem",
                f"{path} is owned by uid {info.st_uid}, not you ({uid})",
                f"chown {uid} {path}  (or remove it and let orcad recreate it)",
            )
        )
    if mode & 0o077:
        wanted = "700" if kind == "directory" else "600"
        found.append(
            Finding(
                check,
                "problem",
                f"{kind} {path} has mode {mode:04o}; others can read it",
                f"chmod {wanted} {path}",
            )
        )
    return found


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
                    "fix the provider (see the provider check), then forget or re-run the turn; "
                    "exhausted jobs are kept for inspection: orcactl jobs",
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


def judge_disk(path: Path, free_bytes: int, minimum_mb: int) -> Finding:
    free_mb = free_bytes // (1024 * 1024)
    if free_mb < minimum_mb:
        return Finding(
            "disk",
            "problem",
            f"only {free_mb} MiB free on the disk holding {path}",
            "free some space: orcad cannot commit jobs or approvals on a full disk",
        )
    return Finding("disk", "ok", f"{free_mb} MiB free on the disk holding {path}")


def judge_index(project: str, state: str, revision: int, where: Path | str) -> Finding:
    if state == "current" or (state == "missing" and revision == 0):
        return Finding("index", "ok", f"project {project}: index {state}")
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


# --- gathering ------------------------------------------------------------------------------


def check_runtime_and_socket(
    paths: Paths, sock: Path, uid: int
) -> tuple[list[Finding], Client | None]:
    found: list[Finding] = []
    runtime = sock.parent
    try:
        info = runtime.lstat()
    except FileNotFoundError:
        found.append(
            Finding("runtime dir", "ok", f"{runtime} does not exist yet (created at start)")
        )
        return found, None
    if stat.S_ISLNK(info.st_mode):
        found.append(
            Finding(
                "runtime dir",
                "problem",
                f"{runtime} is a symbolic link; orcad refuses it",
                f"rm {runtime}  (orcad creates a real directory)",
            )
        )
        return found, None
    judged = judge_private("runtime dir", runtime, info, uid)
    found.extend(judged or [Finding("runtime dir", "ok", f"{runtime} is yours, mode 0700")])
    try:
        sock_info = sock.lstat()
    except FileNotFoundError:
        found.append(
            Finding("socket", "ok", f"orcad is not running; clients start it on demand ({sock})")
        )
        return found, None
    try:
        client = Client(str(sock), timeout=DOCTOR_DAEMON_TIMEOUT_S)
        pid = client.call("daemon.ping").pid
    except (DaemonUnavailable, OSError) as exc:
        found.append(
            Finding(
                "socket",
                "problem",
                f"{sock} exists but nothing answers ({exc})",
                f"restart orcad (systemctl --user restart orcad), or remove {sock} "
                "if no orcad runs",
            )
        )
        return found, None
    except (ProtocolViolation, msgspec.MsgspecError, RemoteError) as exc:
        # orcad answers daemon.ping with its pid, never an error: an error is another server
        client.close()
        found.append(
            Finding(
                "socket",
                "problem",
                f"{sock} answers, but not orcad protocol 1 ({exc})",
                f"stop whatever listens on {sock}, or point ORCA_SOCKET elsewhere",
            )
        )
        return found, None
    judged = judge_private("socket", sock, sock_info, uid)
    found.extend(
        judged or [Finding("socket", "ok", f"orcad pid {pid} answers on {sock} (mode 0600)")]
    )
    return found, client


def check_storage(paths: Paths, uid: int) -> list[Finding]:
    found: list[Finding] = []
    roots = [(paths.memory_root, "memory"), (paths.deliberate_db.parent, "database")]
    for root, check in roots:
        if not root.exists():
            found.append(Finding(check, "ok", f"{root} does not exist yet"))
            continue
        problems: list[Finding] = []
        for path in _walk(root, only_named=check == "database", db=paths.deliberate_db):
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if not stat.S_ISLNK(info.st_mode):
                problems.extend(judge_private(check, path, info, uid))
        found.extend(problems or [Finding(check, "ok", f"{root}: private to you")])
    return found


def _walk(root: Path, *, only_named: bool, db: Path) -> list[Path]:
    if only_named:  # the deliberate database's directory may hold the user's other files
        return [root] + [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
    paths = [root]
    for directory, dirnames, filenames in os.walk(root):
        paths.extend(Path(directory) / name for name in dirnames + filenames)
        if len(paths) > FILE_SCAN_LIMIT:
            break
    return paths[:FILE_SCAN_LIMIT]


def check_config(paths: Paths) -> tuple[list[Finding], Config]:
    try:
        loaded = load_config(paths.config_file)
    except StartupError as exc:
        return [Finding("config", "problem", str(exc), f"edit {paths.config_file}")], Config()
    if loaded.path is None:
        return [Finding("config", "ok", f"no {paths.config_file}; defaults apply")], loaded.config
    if loaded.unknown_keys:
        keys = ", ".join(loaded.unknown_keys)
        return [
            Finding(
                "config",
                "problem",
                f"{loaded.path}: unknown keys: {keys} (ignored)",
                "remove them or correct their spelling (see the README's configuration keys)",
            )
        ], loaded.config
    return [Finding("config", "ok", f"{loaded.path} parses; every key is known")], loaded.config


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """urllib copies the Authorization header to wherever a redirect points: never follow one."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_REDIRECTS = urllib.request.build_opener(_RefuseRedirects)


def check_provider(config: Config) -> Finding:
    extraction = config.extraction
    if extraction.provider == "heuristic":
        return Finding("provider", "ok", "heuristic extraction needs no provider")
    if extraction.provider == "command":
        program = extraction.command.argv[0]
        if shutil.which(program) is None:
            return Finding(
                "provider",
                "problem",
                f"extraction.command.argv[0] {program!r} is not found on PATH",
                "install it, or give its absolute path in [extraction.command] argv",
            )
        return Finding("provider", "ok", f"command {program!r} resolves to {shutil.which(program)}")
    openai = extraction.openai
    url = openai.base_url.rstrip("/") + "/models"
    request = urllib.request.Request(url, method="GET")  # noqa: S310 - the configured endpoint
    key = os.environ.get(openai.api_key_env)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with _NO_REDIRECTS.open(request, timeout=DOCTOR_PROVIDER_TIMEOUT_S) as response:
            return Finding("provider", "ok", f"{url} answered {response.status}")
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:  # orcad does not follow redirects either
            return Finding(
                "provider",
                "problem",
                f"{url} answered {exc.code}, a redirect to {exc.headers.get('Location')!r}",
                "set extraction.openai.base_url to the final address",
            )
        if exc.code in (401, 403):
            return Finding(
                "provider",
                "problem",
                f"{url} refused the API key ({exc.code})",
                f"set {openai.api_key_env} to a valid key in orcad's environment",
            )
        return Finding(
            "provider",
            "problem",
            f"{url} answered {exc.code}",
            "check extraction.openai.base_url (it should end in /v1 for most servers)",
        )
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return Finding(
            "provider",
            "problem",
            f"{url} is unreachable: {reason}",
            "start the model server, or correct extraction.openai.base_url",
        )


def _offered(client: Client, method: str, params: dict[str, Any]) -> tuple[Any, Finding | None]:
    """Call `method`; a -32601 answer becomes a 'skipped' finding instead of a failure."""
    try:
        return client.call(method, params), None
    except RemoteError as exc:
        if exc.code == ErrorCode.METHOD_NOT_FOUND:
            return None, Finding(
                method.partition(".")[0], "skipped", f"the daemon does not offer {method}"
            )
        raise


def check_projects_live(
    client: Client, config: Config, projects_dir: Path | None = None
) -> list[Finding]:
    found: list[Finding] = []
    listed, skipped = _offered(client, "projects.list", {})
    if skipped is not None:
        found.append(Finding("index", "skipped", skipped.detail))
    else:
        for project in listed.projects:
            directory = (projects_dir or Path("projects")) / project.id
            if project.corrupt:
                problem = getattr(project, "problem", None)
                found.append(judge_damaged_project(project.id, directory, problem))
                continue
            try:
                inspected, skipped = _offered(
                    client, "projects.inspect", {"project_id": project.id}
                )
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
    jobs, skipped = _offered(client, "jobs.list", {})
    if skipped is not None:
        found.append(Finding("jobs", "skipped", skipped.detail))
    else:
        damaged = judge_damaged_jobs(getattr(jobs, "damaged", []))
        found.extend(
            judge_jobs(jobs.jobs, time.time(), stuck_after_s(config)) + damaged
            or [Finding("jobs", "ok", "no exhausted, stuck or damaged jobs")]
        )
    return found


def check_daemon_errors(client: Client) -> list[Finding]:
    """Storage faults and crashes the running daemon recorded (daemon.status recent_errors)."""
    return judge_daemon_errors(client.call("daemon.status").recent_errors)


def judge_embedding(embedding: EmbeddingStatus | None) -> Finding:
    """Recall's embedding model as the running daemon reports it."""
    if embedding is None:
        return Finding("embedding", "skipped", "the daemon does not report one")
    if embedding.state == "off":
        return Finding("embedding", "skipped", 'recall is lexical ([recall] embedding = "none")')
    if embedding.state == "unavailable":
        return Finding(
            "embedding",
            "problem",
            f"recall is lexical only: {embedding.reason}",
            embedding_fix(embedding.setting, embedding.reason or "") + ", then restart orcad",
        )
    if embedding.state == "loading":
        return Finding("embedding", "ok", f"{embedding.setting}: loading, just after start")
    detail = f"{embedding.model}: {embedding.embedded} records embedded"
    if embedding.pending:
        detail += f", {embedding.pending} pending (embedding in the background)"
    if embedding.reason:
        return Finding("embedding", "problem", f"{detail}; last failure: {embedding.reason}")
    return Finding("embedding", "ok", detail)


def embedding_fix(setting: str, reason: str) -> str:
    """What to do when the model `setting` names cannot be loaded, for `reason`."""
    if setting == "builtin" or "onnxruntime cannot be imported" in reason:
        # the package's files damaged, or onnxruntime missing: "builtin" needs it too
        return 'reinstall orcad, or set [recall] embedding = "static" in config.toml'
    return 'fix [recall] embedding in config.toml, or set it to "builtin"'


def check_embedding_offline(config: Config) -> Finding:
    """Whether the configured embedding model loads, without a daemon."""
    from orcad.recall.embedders import EmbeddingUnavailable  # noqa: PLC0415 - numpy
    from orcad.recall.embedding import load_embedder  # noqa: PLC0415 - numpy

    setting = config.recall.embedding
    if setting == "none":
        return Finding("embedding", "skipped", 'recall is lexical ([recall] embedding = "none")')
    if setting == "endpoint":
        return Finding("embedding", "skipped", "an endpoint is checked by the running daemon")
    try:
        embedder = load_embedder(setting)
    except EmbeddingUnavailable as exc:
        return Finding(
            "embedding",
            "problem",
            f"{exc}; recall would be lexical only",
            embedding_fix(setting, str(exc)),
        )
    return Finding("embedding", "ok", f"{getattr(embedder, 'model_id', setting)} loads")


def check_projects_offline(paths: Paths, config: Config) -> list[Finding]:
    """The daemon is not running: read the project files (replaced whole, so safe to read)."""
    from orcad.capture import jobstore, ledger, projections, projects  # noqa: PLC0415
    from orcad.capture.records import summary_of  # noqa: PLC0415

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
                        f"restore {jobs_dir / name} from a backup, or move it out of jobs/ to "
                        "give the job up",
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


def check_disk(paths: Paths, minimum_mb: int) -> Finding:
    where = paths.memory_root
    while not where.exists() and where != where.parent:
        where = where.parent
    return judge_disk(paths.memory_root, shutil.disk_usage(where).free, minimum_mb)


def diagnose(args: argparse.Namespace) -> list[Finding]:
    paths = resolve_paths()
    uid = os.getuid()
    found, client = check_runtime_and_socket(paths, Path(socket_path(args)), uid)
    try:
        check_home_directory(paths.home)
        home_ok = True
    except StartupError as exc:  # the memory, config and index checks would only echo it
        found.append(Finding("home", "problem", str(exc)))
        home_ok = False
    if home_ok:
        found.extend(guarded("memory", lambda: check_storage(paths, uid)))
    configured = [Config()]

    def config_check() -> list[Finding]:
        findings, configured[0] = check_config(paths)
        return findings

    if home_ok:
        found.extend(guarded("config", config_check))
    config = configured[0]
    found.extend(guarded("provider", lambda: [check_provider(config)]))
    found.extend(guarded("databases", lambda: check_databases(paths, client is not None)))
    try:
        if client is not None:
            live = client
            found.extend(guarded("daemon", lambda: check_daemon_errors(live)))
            found.extend(
                guarded(
                    "embedding",
                    lambda: [judge_embedding(live.call("daemon.status").embedding)],
                )
            )
            found.extend(
                guarded("index", lambda: check_projects_live(live, config, paths.projects_dir))
            )
        elif home_ok:
            found.extend(guarded("index", lambda: check_projects_offline(paths, config)))
        if client is None:
            found.extend(guarded("embedding", lambda: [check_embedding_offline(config)]))
    finally:
        if client is not None:
            client.close()
    found.extend(guarded("disk", lambda: [check_disk(paths, args.min_free_mb)]))
    found.extend(guarded("agents", agent_findings))
    return found


def render(findings: list[Finding]) -> str:
    marks = {"ok": "ok  ", "problem": "FAIL", "skipped": "skip"}
    lines = []
    for finding in findings:
        lines.append(f"[{marks[finding.status]}] {finding.check}: {finding.detail}")
        if finding.fix:
            lines.append(f"       fix: {finding.fix}")
    problems = sum(finding.status == "problem" for finding in findings)
    lines.append("")
    lines.append(f"{problems} problem(s) found." if problems else "No problems found.")
    return "\n".join(lines)


def run_doctor(args: argparse.Namespace) -> int:
    findings = diagnose(args)
    healthy = not any(finding.status == "problem" for finding in findings)
    if args.json:
        print_json({"ok": healthy, "findings": [asdict(finding) for finding in findings]})
    else:
        print(render(findings))
    return EXIT_OK if healthy else EXIT_ERROR
