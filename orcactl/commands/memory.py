"""`orcactl memory`: search, list, save, update and forget deliberate memory records.

orcactl is an interactive normal-mode client: a change goes through the daemon's approval flow.
On a terminal it shows the pending change and asks: once, this session, this workspace or no;
`--yes` approves once and `--approve SCOPE` with that scope. Off a terminal without either the
change stays unapproved (exit 4) and the command that approves it is printed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from orcactl import approval
from orcactl.arguments import (
    approval_id,
    bounded_int,
    client_id,
    current_directory,
    existing_directory,
    record_id,
    text_of_at_most,
    text_or_stdin,
    utf8_text,
)
from orcactl.connect import (
    EXIT_DECLINED,
    EXIT_ERROR,
    EXIT_OK,
    CommandError,
    connect,
    print_json,
    remote_failure,
)
from orcactl.terminal import one_line
from orcad.limits import MEMORY_CONTENT_MAX_CHARS, SEARCH_LIMIT_MAX, SEARCH_LIMIT_MIN
from protocol.client import Client
from protocol.errors import RemoteError
from protocol.types import MemoryManageResult, MemoryRecord, MemorySearchResult

KINDS = ("preference", "fact", "workflow", "decision")
LIMIT = bounded_int(SEARCH_LIMIT_MIN, SEARCH_LIMIT_MAX)
CONTENT = text_of_at_most(MEMORY_CONTENT_MAX_CHARS)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = subparsers.add_parser(
        "memory", help="deliberate memory records (search, list, save, update, forget, approve)"
    )
    commands = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    def add(
        name: str,
        help_text: str,
        *,
        cwd_help: str = "workspace directory to act from (default: the current one)",
    ) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, help=help_text)
        parser.add_argument("--json", action="store_true", help="print the daemon's result as JSON")
        parser.add_argument("--cwd", metavar="DIR", type=existing_directory, help=cwd_help)
        return parser

    search = add("search", "search records visible from this workspace (no query: most recent)")
    search.add_argument(
        "query",
        metavar="QUERY",
        nargs="?",
        type=utf8_text,
        help="free text; at most 12 terms are used",
    )
    search.add_argument("--limit", metavar="N", type=LIMIT, default=8, help="1 to 20 (default 8)")
    search.set_defaults(run=run_search)

    listing = add("list", "list the most recently updated records visible from this workspace")
    listing.add_argument(
        "--limit", metavar="N", type=LIMIT, default=20, help="1 to 20 (default 20)"
    )
    listing.set_defaults(run=run_search, query=None)

    save = add("save", "save a record (asks for approval)")
    save.add_argument(
        "text",
        metavar="TEXT",
        type=CONTENT,
        help="the record's text: one durable fact ('-' reads it from stdin)",
    )
    save.add_argument("--kind", required=True, choices=KINDS, help="what sort of record it is")
    scope = save.add_mutually_exclusive_group(required=True)
    scope.add_argument("--global", dest="is_global", action="store_true", help="visible everywhere")
    scope.add_argument(
        "--workspace", dest="is_global", action="store_false", help="this workspace only"
    )
    add_approval_options(save)
    save.set_defaults(run=run_manage, action="save", changes_memory=True)

    update = add("update", "replace a record's text (asks for approval)")
    update.add_argument(
        "id", metavar="ID", type=record_id, help="the mem_... id shown by search or list"
    )
    update.add_argument(
        "text", metavar="TEXT", type=CONTENT, help="the record's new text ('-' reads it from stdin)"
    )
    add_approval_options(update)
    update.set_defaults(run=run_manage, action="update", changes_memory=True)

    forget = add("forget", "delete a record (asks for approval)")
    forget.add_argument(
        "id", metavar="ID", type=record_id, help="the mem_... id shown by search or list"
    )
    add_approval_options(forget)
    forget.set_defaults(run=run_manage, action="forget", changes_memory=True)

    approve = add(
        "approve",
        "decide on a change another client left pending (e.g. orcactl mcp)",
        # the command the client prints carries it; an approval names its own session
        cwd_help="directory to run from (default: the current one); the change is decided in "
        "the workspace of the session that asked, whatever this is",
    )
    approve.add_argument(
        "approval_id", metavar="ID", type=approval_id, help="the apr_... id the client showed"
    )
    approve.add_argument(
        "--session-id",
        required=True,
        type=client_id,
        help="the session that asked (named with the id)",
    )
    approve.add_argument(
        "--decision",
        required=True,
        choices=("allow_once", "allow_session", "allow_workspace", "deny"),
        help="apply once, for the rest of that session, for its workspace, or decline",
    )
    approve.set_defaults(run=run_approve, changes_memory=True)


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
            raise remote_failure(exc) from None

    def close(self) -> None:
        try:
            self.client.call("session.close", self.ids)
        except (RemoteError, OSError):
            pass  # the daemon forgets nothing important with an unclosed session


def _cwd(args: argparse.Namespace) -> str:
    return str(args.cwd or current_directory())


def render_record(record: MemoryRecord) -> str:
    # a workspace path holding a newline stays on the record's line, as in `orcactl projects`
    where = "global" if record.scope == "global" else f"workspace {one_line(record.workspace_root)}"
    text = "\n".join("    " + line for line in record.content.splitlines() or [""])
    return f"{record.id}  {record.kind}  {where}  updated {record.updated_at}\n{text}"


def run_search(args: argparse.Namespace) -> int:
    cwd = _cwd(args)
    with connect(args) as client:
        session = _Session(client, cwd)
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


def add_approval_options(parser: argparse.ArgumentParser) -> None:
    decision = parser.add_mutually_exclusive_group()  # two would leave one of them unheard
    decision.add_argument(
        "--yes",
        dest="approve",
        action="store_const",
        const="once",
        help="approve the change once without asking (same as --approve once)",
    )
    decision.add_argument(
        "--approve",
        choices=tuple(approval.SCOPES),
        help="approve without asking: once, for this session, or for this workspace",
    )


def _decide(args: argparse.Namespace, summary: str) -> str | None:
    """The memory.approve decision, or None when nobody can be asked."""
    if args.approve is not None:
        return approval.SCOPES[args.approve]
    if sys.stdin.isatty() and sys.stdout.isatty():
        return approval.ask(summary, sys.stdin, sys.stdout)
    return None


def run_manage(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"action": args.action}
    if args.action == "save":
        content = text_or_stdin(args.text, CONTENT)
        params.update(content=content, kind=args.kind, is_global=args.is_global)
    else:
        params["id"] = args.id
        if args.action == "update":
            params["content"] = text_or_stdin(args.text, CONTENT)
    declined = unapproved = False
    cwd = _cwd(args)
    with connect(args) as client:
        session = _Session(client, cwd)
        try:
            result: MemoryManageResult = session.call("memory.manage", {**session.ids, **params})
            if result.outcome == "pending_approval" and result.approval_id is not None:
                decision = _decide(args, result.summary)
                if decision is None:  # left pending: it expires unapproved
                    unapproved = True
                else:
                    declined = decision == "deny"
                    result = _send_answer(session, result.approval_id, decision)
        finally:
            session.close()
    command = ""
    if unapproved:
        command = approval.approving_command(args, cwd, params.get("content"))
        print(
            f"orcactl: this change needs approval and there is no terminal to ask on, so "
            f"nothing changed.\n{result.summary}\nTo approve it once, run:\n  "
            f"{command}\n(or use --approve session or "
            "--approve workspace instead of --yes)",
            file=sys.stderr,
        )
    if args.json and unapproved:
        # the approval went with orcactl's session, which ended with the command: what approves
        # the change now is running it again as `approve_with` says
        print_json(
            {
                **msgspec.to_builtins(result),
                "approval_id": None,
                "reason": "needs approval and there was no terminal to ask on: nothing changed",
                "approve_with": command,
            }
        )
    elif args.json:
        print_json(result)
    elif not unapproved:
        print(result.summary)
    if result.outcome == "applied" or approval.already_so(result, params):
        return EXIT_OK
    return EXIT_DECLINED if declined or unapproved else EXIT_ERROR


def _send_answer(session: _Session, approval_id: str, decision: str) -> MemoryManageResult:
    """memory.approve with the answer the terminal gave. The question may have waited longer
    than orcad keeps a silent connection open: the answer then finds it closed, unsent."""
    try:
        answered: MemoryManageResult = session.call(
            "memory.approve", {**session.ids, "approval_id": approval_id, "decision": decision}
        )
    except BrokenPipeError:
        raise CommandError(
            "orcad closed the connection while the question waited for an answer (it closes "
            "one silent for [server] idle_timeout_s), so the answer was not sent and nothing "
            "changed; run the command again"
        ) from None
    return answered


def run_approve(args: argparse.Namespace) -> int:
    """Join the asking session at its epoch (an approval belongs to it) and decide."""
    cwd = _cwd(args)
    with connect(args) as client:
        try:
            # bare: a session that is not open is opened only to be closed at once, and so
            # records no visit to the project at --cwd (it made a project of it in
            # `orcactl projects`); joining one that is open keeps its own settings
            opened = client.call(
                "session.open",
                {"cwd": cwd, "session_id": args.session_id, "join": True, "bare": True},
            )
            if not opened.joined:
                client.call(
                    "session.close", {"session_id": opened.session_id, "epoch": opened.epoch}
                )
                raise CommandError(
                    f"session {args.session_id} is not open; its pending changes are gone"
                )
            result: MemoryManageResult = client.call(
                "memory.approve",
                {
                    "session_id": opened.session_id,
                    "epoch": opened.epoch,
                    "approval_id": args.approval_id,
                    "decision": args.decision,
                },
            )
        except RemoteError as exc:
            raise remote_failure(exc) from None
    if args.json:
        print_json(result)
    else:
        print(result.summary)
    if result.outcome == "applied":
        return EXIT_OK
    return EXIT_DECLINED if args.decision == "deny" else EXIT_ERROR
