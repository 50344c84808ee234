"""`orcactl status` and `orcactl ping`."""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path
from typing import Any

import msgspec

from orcactl.arguments import ignores_global_options
from orcactl.commands.doctor_daemon import served_elsewhere
from orcactl.commands.doctor_faults import EXTRACTION_FIX
from orcactl.commands.doctor_files import likely_meant_keys, spelling_hints
from orcactl.connect import (
    EXIT_NOT_RUNNING,
    EXIT_OK,
    CommandError,
    call,
    connect,
    daemon_log_path,
    no_answer_on,
    open_client,
    print_json,
    remote_failure,
    socket_path,
)
from orcactl.hooks.failures import recent_failures, status_lines
from orcad.clock import parse_time
from orcad.config import load_config
from orcad.errors import StartupError
from orcad.paths import SHORTER_SOCKET, resolve_paths, socket_path_problem
from orcad.runtime import check_home_directory
from protocol.errors import RemoteError
from protocol.types import EmbeddingStatus, PingResult, StatusResult


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = subparsers.add_parser(
        "status", help="show whether orcad runs and what it is doing (exit 3 when not running)"
    )
    status.add_argument(
        "--json", action="store_true", help="print the daemon.status result as JSON"
    )
    status.set_defaults(run=run_status)
    ignores_global_options(status, "--no-start")  # status never starts orcad

    ping = subparsers.add_parser("ping", help="round-trip one request to the daemon")
    ping.add_argument("--json", action="store_true", help="print the result as JSON")
    ping.set_defaults(run=run_ping)


def _uptime(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    parts = [f"{days}d"] if days else []
    if hours or days:
        parts.append(f"{hours}h")
    if minutes or hours or days:
        parts.append(f"{minutes}min")
    parts.append(f"{secs}s")
    return " ".join(parts)


def next_try(at: str | None) -> str:
    """When a job waiting to be tried again is: "2026-12-07T12:00:00.000Z (in 1min 5s)", or
    "" when nothing holds it back (no time, or one already passed: it runs once a worker is
    free)."""
    if at is None:
        return ""
    try:
        left = parse_time(at) - time.time()
    except ValueError:  # not a time orcad writes: shown as it is
        return at
    return f"{at} (in {_uptime(left + 0.999)})" if left > 0 else ""


def config_report(
    path: Path, started_at: str | None, started_with_file: bool | None = None
) -> dict[str, Any]:
    """The config file as it is now: whether it exists and parses, and (for a running daemon,
    `started_with_file` saying whether it read one at start) whether it changed after the
    daemon read it at start."""
    report: dict[str, Any] = {"path": str(path), "exists": _config_exists(path), "parses": None}
    report["error"] = None
    report["unknown_keys"] = None  # of the file as it is now, when it parses
    report["likely_meant"] = None  # those of them close to a known key, with that key
    report["changed_since_start"] = None
    if started_at is not None and started_with_file is not None:
        # removed since (orcad still runs with what it read), or made since: changed whatever
        # the times say
        report["changed_since_start"] = report["exists"] != started_with_file or None
    if not report["exists"]:
        try:
            check_home_directory(path.parent)  # a file at ORCA_HOME: no config can be there
        except StartupError as exc:
            report["error"] = str(exc)
        return report
    try:
        report["unknown_keys"] = load_config(path).unknown_keys
        report["likely_meant"] = likely_meant_keys(report["unknown_keys"])
        report["parses"] = True
    except StartupError as exc:
        report.update(parses=False, error=str(exc))
    if started_at is not None and report["changed_since_start"] is None:
        with contextlib.suppress(OSError):
            info = path.stat()
            # the inode's change time too: a file put in place with its old modification time
            # (`cp -p`, `rsync -a`, a backup restored, `touch -d`) is new to orcad all the same
            changed = max(info.st_mtime, info.st_ctime)
            report["changed_since_start"] = changed > parse_time(started_at)
    return report


def _config_exists(path: Path) -> bool:
    """Whether there is a config file orcad would read: a link that loops, or a path the system
    cannot look up, is there and cannot be read, which keeps orcad from starting. Path.exists
    called it missing, with defaults applying. So is a link to nowhere, which orcad refuses."""
    try:
        path.stat()
    except FileNotFoundError:
        return path.is_symlink()
    except NotADirectoryError:
        return False
    except OSError:
        return True
    return True


def describe_config(report: dict[str, Any]) -> str:
    path = report["path"]
    if not report["exists"]:
        if report["error"]:
            return f"{path} (cannot be read: {report['error']})"
        if report["changed_since_start"]:
            return (
                f"{path} (missing: removed since orcad started, which runs with it as it was; "
                "defaults apply to auto_memory and trusted_projects for sessions opened from "
                "now on, to other keys once orcad restarts)"
            )
        return f"{path} (missing: defaults apply)"
    if not report["parses"]:
        return f"{path} (NOT valid: {report['error']}; orcad will not start with it)"
    parses = "parses"
    if report["unknown_keys"]:
        # a misspelt key added while orcad runs (`auto_memroy = false`) is read by nothing,
        # and orcad's own list of unknown keys is of the file it read at start
        parses += f", with unknown keys nothing reads: {', '.join(report['unknown_keys'])}"
        if hints := spelling_hints(report["unknown_keys"]):
            parses += f"; {hints}"
    if report["changed_since_start"]:
        # orcad reads auto_memory and trusted_projects again at each session open; it takes
        # every other key once, at start
        return (
            f"{path} ({parses}; changed since orcad started: auto_memory and trusted_projects "
            "apply to sessions opened from now on, other keys once orcad restarts)"
        )
    return f"{path} ({parses})"


def _status_config(status: StatusResult) -> dict[str, Any]:
    path = Path(status.config_path) if status.config_path else None
    # orcad reads <ORCA_HOME>/config.toml; its memory root is <ORCA_HOME>/memory
    return config_report(
        path or Path(status.memory_root).parent / "config.toml",
        status.started_at,
        started_with_file=path is not None,
    )


def describe_embedding(embedding: EmbeddingStatus) -> str:
    """Recall's model and the backfill's progress, or why recall is lexical only."""
    if embedding.state == "off":
        return 'off (recall is lexical: [recall] embedding = "none")'
    if embedding.state == "unavailable":
        return f"UNAVAILABLE, recall is lexical: {embedding.reason}"
    if embedding.state == "loading":
        return f"loading ({embedding.setting}; a recall meanwhile waits for it)"
    text = f"{embedding.model}; {embedding.embedded} records embedded"
    if embedding.pending:
        text += f", {embedding.pending} pending (embedding in the background)"
    if embedding.facts_pending:
        text += f"; {embedding.facts_pending} automatic facts pending (embedding in the background)"
    if embedding.corrections_pending:
        text += (
            f"; {embedding.corrections_pending} records not yet paired with their corrections "
            "(in the background)"
        )
    if embedding.reason:
        text += f"; last failure: {embedding.reason}"
    return text


def describe_provider(status: StatusResult) -> str:
    """The extraction provider, with the model its facts record (the offline one: its rules
    alone, or with the fact classifier)."""
    provider = status.provider or "heuristic"
    model = status.provider_model
    if model is None:  # no built-in worker runs (workers = 0), or an older orcad
        return provider
    if provider == "heuristic":
        with_what = (
            f"rules and {model}"
            if model
            else "rules only (recall's model is not the built-in one, or not loaded)"
        )
        return f"{provider} ({with_what})"
    return f"{provider} ({model})" if model else provider


def describe_workers(status: StatusResult) -> str:
    """The workers line: busy of configured, or that none runs, and why, when the provider
    could not be built (busy 0 of 1 looked like an idle worker)."""
    workers = status.workers
    if status.extraction_problem is None:
        return f"    Workers: {workers.busy} busy / {workers.configured} configured"
    return (
        f"    Workers: NONE RUNNING ({workers.configured} configured): extraction is stopped, "
        f"the provider cannot be built: {status.extraction_problem}\n"
        f"        Fix: {EXTRACTION_FIX}"
    )


def render_status(status: StatusResult, config: dict[str, Any]) -> str:
    jobs = status.jobs
    lines = [
        f"\N{BLACK CIRCLE} orcad {status.version} - memory daemon for coding agents",
        f"     Active: active (running) since {status.started_at}; {_uptime(status.uptime_s)} ago",
        f"   Main PID: {status.pid}",
        f"     Socket: {status.socket}",
        f"     Memory: {status.memory_root}",
        f" Deliberate: {status.deliberate_db}",
        f"     Config: {describe_config(config)}",
        f"   Provider: {describe_provider(status)}",
        describe_workers(status),
        f"       Jobs: {jobs.pending} pending, {jobs.leased} leased, {jobs.committed} committed, "
        f"{jobs.exhausted} exhausted, {jobs.cancelled} cancelled"
        + (f", {jobs.damaged} DAMAGED (orcactl jobs)" if jobs.damaged else "")
        + (f"; next try of a failed job {when}" if (when := next_try(jobs.next_try_at)) else ""),
        f"   Sessions: {status.sessions} open",
        f"   Projects: {status.projects}",
    ]
    if status.embedding is not None:
        lines.append(f"  Embedding: {describe_embedding(status.embedding)}")
    if status.unknown_config_keys:
        lines.append(f"    Warning: unknown config keys: {', '.join(status.unknown_config_keys)}")
    if status.recent_errors:
        lines.append("")
        lines.append("Recent errors:")
        lines.extend(f"  {e.at} {e.kind}: {e.message}" for e in status.recent_errors)
    return "\n".join(lines)


def run_status(args: argparse.Namespace) -> int:
    problem = socket_path_problem(socket_path(args))
    if problem is not None:  # no orcad can be listening there
        _print_not_running(args, f"{problem}; {SHORTER_SOCKET}", say_why=True)
        return EXIT_NOT_RUNNING
    try:
        status: StatusResult = call(args, "daemon.status", start=False)
    except CommandError as exc:
        if exc.status != EXIT_NOT_RUNNING:
            raise
        # that nothing answers goes without saying; anything else (a socket another user
        # serves) is the reason the daemon counts as not running, and the report says it
        reason = str(exc)
        _print_not_running(args, reason, say_why=reason != no_answer_on(socket_path(args)))
        return EXIT_NOT_RUNNING
    config = _status_config(status)
    hooks = recent_failures()
    elsewhere = served_elsewhere(status, resolve_paths())
    if args.json:
        report = {"running": True, **msgspec.to_builtins(status), "config_file": config}
        # an orcad from before the field: it says nothing, as it did
        report["extraction_problem"] = status.extraction_problem
        report["extraction_fix"] = EXTRACTION_FIX if status.extraction_problem else None
        mismatch = None
        if elsewhere is not None:
            mismatch = dict(zip(("variable", "served", "here"), elsewhere, strict=True))
        print_json({**report, "memory_elsewhere": mismatch, "agent_hook_problems": hooks})
    else:
        lines = [render_status(status, config)]
        if elsewhere is not None:
            variable, theirs, ours = elsewhere
            lines.append(
                f"    Warning: this orcad serves {theirs}, but {variable} here gives {ours}: "
                "commands here read and write its memory (orcactl doctor says what to do)"
            )
        print("\n".join([*lines, *status_lines(hooks)]))
    return EXIT_OK


def _print_not_running(args: argparse.Namespace, reason: str, *, say_why: bool) -> None:
    """The report of a daemon that does not answer, with why (in the human report only when
    `say_why`: that none answers on the socket goes without saying)."""
    socket = socket_path(args)
    config = config_report(resolve_paths().config_file, None)
    hooks = recent_failures()
    if args.json:
        report = {"running": False, "reason": reason, "socket": socket, "config_file": config}
        print_json({**report, "agent_hook_problems": hooks})
        return
    lines = [
        "\N{WHITE CIRCLE} orcad - memory daemon for coding agents",
        "     Active: inactive (not running)",
        f"     Socket: {socket}",
        f"     Config: {describe_config(config)}",
    ]
    if say_why:
        lines.insert(2, f"    Problem: {reason}")
    print("\n".join([*lines, *status_lines(hooks)]))


def run_ping(args: argparse.Namespace) -> int:
    began = time.perf_counter()
    client, started = open_client(args)
    if started is not None:  # time a connection to the running daemon, not its start
        client.close()
        began = time.perf_counter()
        client = connect(args, start=False)
    with client:
        try:
            result: PingResult = client.call("daemon.ping")
        except RemoteError as exc:
            raise remote_failure(exc) from None
    elapsed_ms = (time.perf_counter() - began) * 1000
    if args.json:
        print_json(
            {
                "protocol": result.protocol,
                "version": result.version,
                "pid": result.pid,
                "round_trip_ms": round(elapsed_ms, 3),
                "started": started is not None,
            }
        )
        return EXIT_OK
    if started is not None:
        print(f"orcad was not running; started it (pid {result.pid}, log {daemon_log_path()})")
    print(
        f"orcad {result.version} (pid {result.pid}, protocol {result.protocol}) "
        f"answered in {elapsed_ms:.2f} ms"
    )
    return EXIT_OK
