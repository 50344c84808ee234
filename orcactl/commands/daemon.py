"""`orcactl status` and `orcactl ping`."""

from __future__ import annotations

import argparse
import time

from orcactl.connect import (
    EXIT_NOT_RUNNING,
    EXIT_OK,
    CommandError,
    call,
    connect,
    daemon_log_path,
    open_client,
    print_json,
    remote_failure,
    socket_path,
)
from protocol.errors import RemoteError
from protocol.types import PingResult, StatusResult


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = subparsers.add_parser(
        "status", help="show whether orcad runs and what it is doing (exit 3 when not running)"
    )
    status.add_argument(
        "--json", action="store_true", help="print the daemon.status result as JSON"
    )
    status.set_defaults(run=run_status)

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


def render_status(status: StatusResult) -> str:
    jobs = status.jobs
    lines = [
        f"\N{BLACK CIRCLE} orcad {status.version} - memory daemon for coding agents",
        f"     Active: active (running) since {status.started_at}; {_uptime(status.uptime_s)} ago",
        f"   Main PID: {status.pid}",
        f"     Socket: {status.socket}",
        f"     Memory: {status.memory_root}",
        f" Deliberate: {status.deliberate_db}",
        f"     Config: {status.config_path or '(defaults; no config.toml)'}",
        f"   Provider: {status.provider or 'heuristic'}",
        f"    Workers: {status.workers.busy} busy / {status.workers.configured} configured",
        f"       Jobs: {jobs.pending} pending, {jobs.leased} leased, {jobs.committed} committed, "
        f"{jobs.exhausted} exhausted, {jobs.cancelled} cancelled",
        f"   Sessions: {status.sessions} open",
        f"   Projects: {status.projects}",
    ]
    if status.unknown_config_keys:
        lines.append(f"    Warning: unknown config keys: {', '.join(status.unknown_config_keys)}")
    if status.recent_errors:
        lines.append("")
        lines.append("Recent errors:")
        lines.extend(f"  {e.at} {e.kind}: {e.message}" for e in status.recent_errors)
    return "\n".join(lines)


def run_status(args: argparse.Namespace) -> int:
    try:
        status: StatusResult = call(args, "daemon.status", start=False)
    except CommandError as exc:
        if exc.status != EXIT_NOT_RUNNING:
            raise
        if args.json:
            print_json({"running": False, "socket": socket_path(args)})
        else:
            print(
                f"\N{WHITE CIRCLE} orcad - memory daemon for coding agents\n"
                f"     Active: inactive (not running)\n     Socket: {socket_path(args)}"
            )
        return EXIT_NOT_RUNNING
    if args.json:
        print_json(status)
    else:
        print(render_status(status))
    return EXIT_OK


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
