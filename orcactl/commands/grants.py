"""`orcactl grants list` and `orcactl grants revoke ID`: the approvals that skip the prompt."""

from __future__ import annotations

import argparse

from orcactl.arguments import client_id, existing_directory, grant_id
from orcactl.connect import EXIT_OK, call, print_json
from orcactl.terminal import one_line
from orcad.workspace import derive_workspace
from protocol.types import GrantsListResult, GrantsRevokeResult


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    grants = subparsers.add_parser(
        "grants", help="list or revoke memory-change approvals (session, workspace, global)"
    )
    actions = grants.add_subparsers(dest="grants_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list grants (all, or those for a session/workspace)")
    listing.add_argument(
        "--session-id",
        metavar="ID",
        type=client_id,
        help="only grants that apply to a session",
    )
    listing.add_argument(
        "--workspace",
        metavar="PATH",
        type=workspace_root,
        help="only grants for the workspace PATH is in (and global)",
    )
    listing.add_argument("--json", action="store_true", help="print the result as JSON")
    listing.set_defaults(run=run_list)
    revoke = actions.add_parser("revoke", help="revoke one grant; later changes ask again")
    revoke.add_argument(
        "grant_id", metavar="ID", type=grant_id, help="an id shown by orcactl grants list"
    )
    revoke.add_argument("--json", action="store_true", help="print the result as JSON")
    revoke.set_defaults(run=run_revoke)


def workspace_root(text: str) -> str:
    """argparse type for --workspace: the workspace an existing directory is in, as orcad
    derives it for a session opened there; one it cannot derive is bad usage, named."""
    try:
        return derive_workspace(existing_directory(text)).root
    except ValueError as exc:  # .git could not be looked for (a path too long, no access)
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_list(args: argparse.Namespace) -> int:
    params: dict[str, str] = {}
    if args.session_id:
        params["session_id"] = args.session_id
    if args.workspace:
        params["workspace"] = args.workspace
    result: GrantsListResult = call(args, "grants.list", params)
    if args.json:
        print_json(result)
        return EXIT_OK
    if not result.grants:
        print("no grants: every memory change in normal mode asks")
    for grant in result.grants:
        where = one_line(grant.workspace_root) or "global memory"  # a newline: still one line
        # "session s_1", "workspace", "workspace of session s_1"
        scope: str = grant.scope
        if grant.session_id:
            scope = (
                f"session {grant.session_id}"
                if grant.scope == "session"
                else f"{grant.scope} of session {grant.session_id}"
            )
        print(f"{grant.grant_id}  {scope}  {where}  since {grant.granted_at}")
    return EXIT_OK


def run_revoke(args: argparse.Namespace) -> int:
    result: GrantsRevokeResult = call(args, "grants.revoke", {"grant_id": args.grant_id})
    if args.json:
        print_json(result)
    elif result.revoked:
        print(f"revoked {args.grant_id}; changes in its scope ask again")
    else:
        print(f"{args.grant_id} is not a current grant; nothing changed")
    return EXIT_OK
