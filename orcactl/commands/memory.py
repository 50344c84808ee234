"""`orcactl memory`: search, list, save, update and forget deliberate memory records.

orcactl is an interactive normal-mode client: a change goes through the daemon's approval flow.
On a terminal it shows the pending change and asks y/N; `--yes` approves once; off a terminal
without `--yes` the change is declined (exit 4).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from orcactl.connect import EXIT_DECLINED, EXIT_ERROR, EXIT_OK, CommandError, connect, print_json
from protocol.client import Client
from protocol.errors import RemoteError
from protocol.types import MemoryManageResult, MemoryRecord, MemorySearchResult

KINDS = ("preference", "fact", "workflow", "decision")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = subparsers.add_parser(
        "memory", help="deliberate memory records (search, list, save, update, forget)"
    )
    commands = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help_text)
        parser.add_argument("--json", action="store_true", help="print the daemon's result as JSON")
        parser.add_argument(
            "--cwd", help="workspace directory to act from (default: the current one)"
        )
        return parser

    search = add("search", "search records visible from this workspace (no query: most recent)")
    search.add_argument("query", nargs="?", help="free text; at most 12 terms are used")
    search.add_argument("--limit", type=int, default=8, help="1 to 20 (default 8)")
    search.set_defaults(run=run_search)

    listing = add("list", "list the most recently updated records visible from this workspace")
    listing.add_argument("--limit", type=int, default=20, help="1 to 20 (default 20)")
    listing.set_defaults(run=run_search, query=None)

    save = add("save", "save a record (asks for approval)")
    save.add_argument("text", help="the record's text: one durable fact")
    save.add_argument("--kind", required=True, choices=KINDS, help="what sort of record it is")
    scope = save.add_mutually_exclusive_group(required=True)
    scope.add_argument("--global", dest="is_global", action="store_true", help="visible everywhere")
    scope.add_argument(
        "--workspace", dest="is_global", action="store_false", help="this workspace only"
    )
    save.add_argument("--yes", action="store_true", help="approve the change once without asking")
    save.set_defaults(run=run_manage, action="save")

    update = add("update", "replace a record's text (asks for approval)")
    update.add_argument("id", help="the mem_... id shown by search or list")
    update.add_argument("text", help="the record's new text")
    update.add_argument("--yes", action="store_true", help="approve the change once without asking")
    update.set_defaults(run=run_manage, action="update")

    forget = add("forget", "delete a record (asks for approval)")
    forget.add_argument("id", help="the mem_... id shown by search or list")
    forget.add_argument("--yes", action="store_true", help="approve the change once without asking")
    forget.set_defaults(run=run_manage, action="forget")


class _Session:
    """One normal-mode interactive session for the length of a command."""

    def __init__(self, client: Client, cwd: str) -> None:
        self.client = client
        opened = self.call("session.open", {"cwd": cwd, "mode": "normal", "interactive": True})
        self.ids = {"session_id": opened.session_id, "epoch": opened.epoch}

    def call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return self.client.call(method, params)
        except RemoteError as exc:
            raise CommandError(f"{exc.error.message} ({exc.kind})") from None

    def close(self) -> None:
        try:
            self.client.call("session.close", self.ids)
        except (RemoteError, OSError):
            pass  # the daemon forgets nothing important with an unclosed session


def _cwd(args: argparse.Namespace) -> str:
    return os.path.abspath(args.cwd or os.getcwd())


def render_record(record: MemoryRecord) -> str:
    where = "global" if record.scope == "global" else f"workspace {record.workspace_root}"
    text = "\n".join("    " + line for line in record.content.splitlines() or [""])
    return f"{record.id}  {record.kind}  {where}  updated {record.updated_at}\n{text}"


def run_search(args: argparse.Namespace) -> int:
    with connect(args) as client:
        session = _Session(client, _cwd(args))
        try:
            params: dict[str, Any] = {**session.ids, "limit": args.limit}
            if args.query is not None:
                params["query"] = args.query
            result: MemorySearchResult = session.call("memory.search", params)
        finally:
            session.close()
    if args.json:
        print_json(result)
    elif not result.records:
        print("no records")
    else:
        print("\n".join(render_record(record) for record in result.records))
    return EXIT_OK


def _ask(summary: str) -> bool:
    print(summary)
    print("Apply this change? [y/N] ", end="", flush=True)
    answer = sys.stdin.readline()  # "" at end of input: no
    return answer.strip().lower() in ("y", "yes")


def run_manage(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"action": args.action}
    if args.action == "save":
        params.update(content=args.text, kind=args.kind, is_global=args.is_global)
    else:
        params["id"] = args.id
        if args.action == "update":
            params["content"] = args.text
    declined = False
    with connect(args) as client:
        session = _Session(client, _cwd(args))
        try:
            result: MemoryManageResult = session.call("memory.manage", {**session.ids, **params})
            if result.outcome == "pending_approval" and result.approval_id is not None:
                on_terminal = sys.stdin.isatty() and sys.stdout.isatty()
                if args.yes:
                    approved = True
                elif on_terminal:
                    approved = _ask(result.summary)
                else:
                    approved = False
                    print(
                        f"orcactl: not approved: {result.summary} No terminal to ask on; "
                        "rerun with --yes to approve it once.",
                        file=sys.stderr,
                    )
                declined = not approved
                result = session.call(
                    "memory.approve",
                    {
                        **session.ids,
                        "approval_id": result.approval_id,
                        "decision": "allow_once" if approved else "deny",
                    },
                )
        finally:
            session.close()
    if args.json:
        print_json(result)
    else:
        print(result.summary)
    if result.outcome == "applied":
        return EXIT_OK
    return EXIT_DECLINED if declined else EXIT_ERROR
