"""`orcactl doctor`: find what is wrong with this user's orcad, and say how to fix each thing.

Permission checks read the files themselves; what only the daemon knows (projects, jobs, recent
errors) comes over the socket when it runs, and from the project files when it does not. A method
the running daemon does not offer makes its check "skipped", never a failure.

The checks come in groups, each in a module of its own: the daemon (doctor_daemon), files and
directories (doctor_files), the provider and embedding models (doctor_models), the projects
and their jobs (doctor_projects), faults inside the stored data (doctor_faults), and the
agents (orcactl.integrate); this module runs them in order and prints what they found.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict
from pathlib import Path

from orcactl.arguments import bounded_int, ignores_global_options
from orcactl.commands.doctor_daemon import (
    check_daemon_errors,
    check_daemon_memory,
    check_runtime_and_socket,
)
from orcactl.commands.doctor_faults import Finding, check_databases, guarded
from orcactl.commands.doctor_files import (
    check_config,
    check_disk,
    check_storage,
    disks_with_room,
)
from orcactl.commands.doctor_models import (
    check_embedding_offline,
    check_provider,
    judge_embedding,
)
from orcactl.commands.doctor_projects import check_projects_live, check_projects_offline
from orcactl.connect import EXIT_ERROR, EXIT_OK, print_json, socket_path
from orcactl.integrate import agent_findings
from orcad.config import Config
from orcad.errors import StartupError
from orcad.paths import resolve_paths
from orcad.runtime import check_home_directory

DEFAULT_MIN_FREE_MB = 200


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
    ignores_global_options(doctor, "--no-start")  # doctor never starts orcad


NOT_CHECKED = "not checked: the config file is not valid (see the config check)"


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
    configured: list[Config | None] = [Config()]

    def config_check() -> list[Finding]:
        findings, configured[0] = check_config(paths)
        return findings

    if home_ok:
        found.extend(guarded("config", config_check))
    # a config that does not parse names no provider or model: the defaults' would be judged
    # instead ("heuristic extraction needs no provider" for a file that asks for an endpoint)
    unread = configured[0] is None
    config = configured[0] or Config()
    if unread:
        found.append(Finding("provider", "skipped", NOT_CHECKED))
    else:
        found.extend(guarded("provider", lambda: [check_provider(config)]))
    found.extend(guarded("databases", lambda: check_databases(paths, client is not None)))
    try:
        if client is not None:
            live = client
            found.extend(guarded("daemon", lambda: check_daemon_memory(live, paths)))
            found.extend(
                guarded(
                    "daemon",
                    lambda: check_daemon_errors(live, disks_with_room(paths, args.min_free_mb)),
                )
            )
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
        if client is None and unread:
            found.append(Finding("embedding", "skipped", NOT_CHECKED))
        elif client is None:
            found.extend(guarded("embedding", lambda: [check_embedding_offline(config)]))
    finally:
        if client is not None:
            client.close()
    found.extend(guarded("disk", lambda: check_disk(paths, args.min_free_mb)))
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
