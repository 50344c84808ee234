"""`orcactl`: the command line for orcad. Human output by default, `--json` everywhere."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator

from orcactl.arguments import socket_file
from orcactl.commands import (
    agents,
    daemon,
    doctor,
    grants,
    memory,
    projects,
    provider,
    recall,
    service,
)
from orcactl.connect import CONNECTION_FAILURES, EXIT_ERROR, CommandError, connection_failure
from orcactl.terminal import OutputClosed, SafeWriter
from orcad import __version__
from protocol.types import PROTOCOL_VERSION

COMMAND_GROUPS = [daemon, recall, memory, grants, projects, provider, service, doctor, agents]

EPILOG = """exit status: 0 success; 1 the daemon answered with an error, or the command failed
(doctor or service status found a problem, say); 2 bad usage;
3 orcad is not running (and was not started); 4 a pending change was not approved.
Without --no-start, a command that needs the daemon starts it when none answers."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orcactl",
        description="Inspect and drive orcad, the memory daemon for coding agents.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"orcactl {__version__} (protocol {PROTOCOL_VERSION})",
        help="print orcactl's version and exit",
    )
    add_global_options(parser, default=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in COMMAND_GROUPS:
        group.register(subparsers)
    for command in _command_parsers(parser):
        add_global_options(command, default=False)
    return parser


# Options accepted before or after the command: (flags, add_argument keywords).
GLOBAL_OPTIONS: list[tuple[str, dict[str, object]]] = [
    (
        "--socket",
        {
            "metavar": "PATH",
            "type": socket_file,
            "help": "daemon socket (default: $ORCA_SOCKET or the runtime dir)",
        },
    ),
    (
        "--no-start",
        {"action": "store_true", "help": "never start orcad; fail with exit 3 instead"},
    ),
    ("--json", {"action": "store_true", "help": "print the result as JSON"}),
]


def add_global_options(parser: argparse.ArgumentParser, *, default: bool) -> None:
    """The global options, on the top-level parser (with their defaults) or on a command's
    parser; there they default to nothing, so an option given before the command stands."""
    known = {flag: action for action in parser._actions for flag in action.option_strings}
    for flag, keywords in GLOBAL_OPTIONS:
        if flag in known:  # the command defines it itself (--json): keep its help
            if not default:
                known[flag].default = argparse.SUPPRESS
            continue
        if flag == "--json" and not default and _runs_a_command(parser):
            continue  # a command says itself whether it prints JSON (its help test checks)
        extra: dict[str, object] = {} if default else {"default": argparse.SUPPRESS}
        parser.add_argument(flag, **keywords, **extra)  # type: ignore[arg-type]


def _runs_a_command(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def _command_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser below the top level, group and leaf, however deep."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield child
                yield from _command_parsers(child)


def main(argv: list[str] | None = None) -> None:
    # started with a standard stream closed, Python gives None: what is written there is lost,
    # and a closed stdin is no terminal to ask on (it reads as an empty one). The writers go in
    # before parsing, since a usage error repeats the arguments it did not understand.
    sys.stdin = sys.stdin or open(os.devnull, encoding="utf-8")  # noqa: SIM115
    sys.stdout = SafeWriter(sys.stdout or open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    sys.stderr = SafeWriter(sys.stderr or open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    try:
        args = build_parser().parse_args(argv)
        status = args.run(args)
    except CommandError as exc:
        print(f"orcactl: {exc}", file=sys.stderr)
        status = exc.status
    except KeyboardInterrupt:
        status = 130
    except BaseExceptionGroup as group:  # Ctrl-C inside a trio nursery (provider test) is Ctrl-C
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        status = 130
    except OutputClosed:  # nobody reads what orcactl says any more; a broken pipe to orcad
        status = EXIT_ERROR  # is a connection failure, reported below
    except UnicodeEncodeError:  # the working directory, say: its name's bytes are not UTF-8
        print(
            "orcactl: a path or text in this request is not valid UTF-8, and orcad's JSON "
            "cannot carry it (is the current directory's name in another encoding?)",
            file=sys.stderr,
        )
        status = EXIT_ERROR
    except CONNECTION_FAILURES as exc:  # the daemon died mid-call or spoke another protocol
        failure = connection_failure(exc)
        print(f"orcactl: {failure}", file=sys.stderr)
        status = failure.status
    sys.exit(status)
