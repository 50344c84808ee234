"""`orcactl recall PROMPT` and `orcactl remember TEXT`: what an agent injects, and /remember.

Both open a short session for the working directory (as an agent would at startup), make one
call and close the session again.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
from collections.abc import Callable
from typing import Any

from orcactl.arguments import (
    current_directory,
    existing_directory,
    text_of_at_most,
    text_or_stdin,
    utf8_text,
)
from orcactl.connect import EXIT_OK, connect, print_json, remote_failure
from orcad.limits import EXPLICIT_FACT_MAX_CHARS
from protocol.client import Client
from protocol.errors import RemoteError

FACT = text_of_at_most(EXPLICIT_FACT_MAX_CHARS)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    recall = subparsers.add_parser(
        "recall",
        help="show the memory context an agent would inject for PROMPT",
        description="Run one recall for PROMPT in a fresh session opened for --cwd and print "
        "the context block an agent would inject before its model request.",
    )
    recall.add_argument(
        "prompt",
        metavar="PROMPT",
        type=utf8_text,
        help="the user's message for the turn ('-' reads it from stdin)",
    )
    recall.add_argument(
        "--cwd",
        metavar="DIR",
        type=existing_directory,
        help="working directory (default: the current one)",
    )
    recall.add_argument("--json", action="store_true", help="print the whole recall result as JSON")
    recall.set_defaults(run=run_recall)

    remember = subparsers.add_parser(
        "remember",
        help="keep an explicit fact in user.md (or the project's memory.md with --project)",
        description="Append TEXT as an explicit fact. User facts go to user.md and reach every "
        "session; with --project the fact goes to the memory.md of the project at --cwd.",
    )
    remember.add_argument(
        "text",
        metavar="TEXT",
        type=FACT,
        help="the fact to remember ('-' reads it from stdin)",
    )
    remember.add_argument("--project", action="store_true", help="a project fact, not a user fact")
    remember.add_argument(
        "--cwd", metavar="DIR", type=existing_directory, help="working directory (default: current)"
    )
    remember.add_argument("--json", action="store_true", help="print the result as JSON")
    remember.set_defaults(run=run_remember, changes_memory=True)


def _in_session(args: argparse.Namespace, work: Callable[[Client, dict[str, Any]], Any]) -> Any:
    """Open a session for --cwd, run `work(client, session ids)`, close the session."""
    cwd = args.cwd or current_directory()
    with connect(args) as client:
        try:
            opened = client.call("session.open", {"cwd": cwd, "mode": "normal"})
            ids = {"session_id": opened.session_id, "epoch": opened.epoch}
            try:
                return work(client, ids)
            finally:
                # best effort, as in `orcactl memory`: a close on a connection the daemon dropped
                # would hide the failure to report (a broken pipe, which main() prints nothing
                # for), and a session left open only expires
                with contextlib.suppress(RemoteError, OSError):
                    client.call("session.close", ids)
        except RemoteError as exc:
            raise remote_failure(exc) from None


def run_recall(args: argparse.Namespace) -> int:
    turn_id = "orcactl-" + secrets.token_hex(8)
    prompt = text_or_stdin(args.prompt, utf8_text)
    result = _in_session(
        args,
        lambda client, ids: client.call("recall", {**ids, "turn_id": turn_id, "prompt": prompt}),
    )
    if args.json:
        print_json(result)
    elif result.context:
        print(result.context, end="")
    else:
        print("(nothing recalled for this prompt)")
    return EXIT_OK


def run_remember(args: argparse.Namespace) -> int:
    scope = "project" if args.project else "user"
    text = text_or_stdin(args.text, FACT)
    result = _in_session(
        args, lambda client, ids: client.call("remember", {**ids, "text": text, "scope": scope})
    )
    if args.json:
        print_json(result)
    elif result.already_kept:
        print(f"already kept as a {scope} fact in {result.path}; nothing was written")
    else:
        held = f"the file now holds {result.bytes} bytes"
        print(f"remembered as a {scope} fact in {result.path} ({held})")
    return EXIT_OK
