"""`orcactl`: the command line for orcad. Human output by default, `--json` everywhere."""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

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
from orcactl.connect import (
    CONNECTION_FAILURES,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandError,
    connection_failure,
    failure_document,
    print_json,
    writes_unicode,
)
from orcactl.entry import INTERRUPTED, asks_for_json, runs_mcp
from orcactl.hooks.runner import extraction_run
from orcactl.terminal import OutputClosed, OutputFailed, SafeWriter
from orcad import __version__
from protocol.types import PROTOCOL_VERSION

COMMAND_GROUPS = [daemon, recall, memory, grants, projects, provider, service, doctor, agents]

EPILOG = """exit status: 0 success; 1 the daemon answered with an error, or the command failed
(doctor or service status found a problem, say); 2 bad usage;
3 orcad is not running (and was not started); 4 a pending change was not approved;
130 Ctrl-C (interrupted). With --json, every failure also prints one JSON document.
Without --no-start, a command that needs the daemon starts it when none answers."""


class UsageError(CommandError):
    """A command line argparse refused, reported as argparse does: its usage, then the error;
    `listing` (the commands or actions, one a line with what each does) goes between them."""

    def __init__(self, usage: str, prog: str, message: str, listing: str = "") -> None:
        super().__init__(message, EXIT_USAGE)
        self.usage = usage
        self.prog = prog
        self.listing = listing


# argparse's message for a required argument (the command, say) that is not given
REQUIRED_MISSING = "the following arguments are required"


class Parser(argparse.ArgumentParser):
    """argparse, whose usage errors are raised rather than exited on, so that main reports
    them as it does every failure (one document on stdout too, with --json); its commands'
    parsers are of this class too."""

    given: list[str] | None = None  # the arguments parsed (--version reads them whole)

    def error(self, message: str) -> NoReturn:
        choices = self._choices_missing(message)
        if choices is None:
            raise UsageError(self.format_usage(), self.prog, message)
        # `orcactl` or `orcactl memory` alone: which commands there are, as git lists its
        # own, since the usage line shows only `COMMAND ...`
        named = f"{message} (one of: {', '.join(choices.choices)})"
        raise UsageError(self.format_usage(), self.prog, named, self._listing(choices))

    def _choices_missing(self, message: str) -> argparse._SubParsersAction[Any] | None:
        """The commands (or a command's actions) when `message` says none was given."""
        for action in self._actions:
            missing = f"{REQUIRED_MISSING}: {action.metavar}"
            if isinstance(action, argparse._SubParsersAction) and message == missing:
                return action
        return None

    def _listing(self, choices: argparse._SubParsersAction[Any]) -> str:
        formatter = self._get_formatter()
        formatter.start_section("commands" if self.prog == "orcactl" else "actions")
        formatter.add_arguments(choices._get_subactions())
        formatter.end_section()
        return formatter.format_help() + "\n"

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """argparse's, but an unknown option on a line that also lacks the command (`orcactl
        --bogus`) is reported as unknown: argparse says only that the command is missing, as
        it checks that first. Which words it does not know, it says itself, parsing the line
        again with nothing required (so `--js` is --json, and `--socket=--x` names a path)."""
        try:
            return super().parse_known_args(args, namespace)
        except UsageError as exc:
            if not str(exc).startswith(REQUIRED_MISSING):
                raise
            unknown = self._unknown_options(args, namespace)
            if not unknown:
                raise
            self.error(f"unrecognized arguments: {' '.join(unknown)}")

    def _unknown_options(
        self, args: Sequence[str] | None, namespace: argparse.Namespace | None
    ) -> list[str]:
        required = [action for action in self._actions if action.required]
        try:
            for action in required:
                action.required = False
            fresh = None if namespace is None else copy.copy(namespace)
            return super().parse_known_args(args, fresh)[1]
        except UsageError:  # another fault in the line: the first message stands
            return []
        finally:
            for action in required:
                action.required = True


class _Version(argparse.Action):
    """--version: the version, and exit; as JSON when --json is given too, before or after it
    (argparse acts on --version where it stands, so the arguments are looked at whole)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        given = getattr(parser, "given", None) or []
        words = given[: given.index("--")] if "--" in given else given
        if "--json" in words:
            print_json({"orcactl": __version__, "protocol": PROTOCOL_VERSION})
        else:
            print(f"orcactl {__version__} (protocol {PROTOCOL_VERSION})")
        parser.exit()


def build_parser() -> Parser:
    parser = Parser(
        prog="orcactl",
        description="Inspect and drive orcad, the memory daemon for coding agents.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="print orcactl's version and exit (as JSON with --json)",
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
    ignored = () if default else parser.get_default("ignored_global_options") or ()
    for flag, keywords in GLOBAL_OPTIONS:
        if flag in known:  # the command defines it itself (--json): keep its help
            if not default:
                known[flag].default = argparse.SUPPRESS
            continue
        if flag == "--json" and not default and _runs_a_command(parser):
            continue  # a command says itself whether it prints JSON (its help test checks)
        extra: dict[str, object] = {} if default else {"default": argparse.SUPPRESS}
        if flag in ignored:
            extra["help"] = argparse.SUPPRESS
        parser.add_argument(flag, **{**keywords, **extra})  # type: ignore[arg-type]


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
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and not writes_unicode(sys.stdout):
        # a terminal in a legacy encoding (Latin-1): what it lacks (status's ●, a stored ☕) is
        # shown as an escape, as on stderr, rather than failing a command that already ran
        reconfigure(errors="backslashreplace")
    sys.stdout = SafeWriter(sys.stdout or open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    sys.stderr = SafeWriter(sys.stderr or open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    args: argparse.Namespace | None = None
    try:
        parser = build_parser()
        parser.given = list(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(argv)
        if getattr(args, "changes_memory", False) and extraction_run():
            # an agent CLI run as orca's extractor must not write the memory it feeds, through
            # a shell any more than through orcactl mcp
            raise CommandError("memory is not changed from inside an extraction run")
        status = args.run(args)
    except CommandError as exc:
        status = report_failure(exc, args, argv)
    except KeyboardInterrupt:
        status = report_interrupt(args, argv)
    except BaseExceptionGroup as group:  # Ctrl-C inside a trio nursery (provider test) is Ctrl-C
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        status = report_interrupt(args, argv)
    except OutputFailed as exc:  # a full disk under `> file`: said on stderr, if it can be
        with contextlib.suppress(OutputClosed):
            print(f"orcactl: {exc}", file=sys.stderr)
        status = EXIT_ERROR
    except OutputClosed:  # nobody reads what orcactl says any more; a broken pipe to orcad
        status = EXIT_ERROR  # is a connection failure, reported below
    except UnicodeEncodeError:  # the working directory, say: its name's bytes are not UTF-8
        not_utf8 = CommandError(
            "a path or text in this request is not valid UTF-8, and orcad's JSON "
            "cannot carry it (is the current directory's name in another encoding?)"
        )
        status = report_failure(not_utf8, args, argv)
    except CONNECTION_FAILURES as exc:  # the daemon died mid-call or spoke another protocol
        status = report_failure(connection_failure(exc), args, argv)
    sys.exit(status)


def report_failure(
    exc: CommandError, args: argparse.Namespace | None, argv: list[str] | None
) -> int:
    """The failure on stderr and, when --json was asked for, as one document on stdout (a
    script reading stdout gets one either way); returns the exit status."""
    with contextlib.suppress(OutputClosed):  # nobody reads it any more: the status stands
        if isinstance(exc, UsageError):
            print(f"{exc.usage}{exc.listing}{exc.prog}: error: {exc}", file=sys.stderr)
        else:
            print(f"orcactl: {exc}", file=sys.stderr)
        if _json_asked(args, sys.argv[1:] if argv is None else argv):
            print_json(failure_document(exc))
    return exc.status


def report_interrupt(args: argparse.Namespace | None, argv: list[str] | None) -> int:
    """Ctrl-C: exit 130, without a word; with --json, the failure document a script reads on
    stdout for every other failure too. Not for `orcactl mcp`, whose stdout is the client's."""
    if getattr(args, "command", None) == "mcp":
        return EXIT_INTERRUPTED
    if not _json_asked(args, sys.argv[1:] if argv is None else argv):
        return EXIT_INTERRUPTED
    return report_failure(CommandError(INTERRUPTED, EXIT_INTERRUPTED), args, argv)


def _json_asked(args: argparse.Namespace | None, argv: list[str]) -> bool:
    """Whether the command line asks for JSON; before parsing succeeded, whether `--json`, or
    an abbreviation of it that argparse would take (`--js`), is one of its options. Never for
    `orcactl mcp`, whose stdout is its client's: its failures are said on stderr only."""
    if args is not None:
        return getattr(args, "command", None) != "mcp" and bool(getattr(args, "json", False))
    return not runs_mcp(argv) and asks_for_json(argv)
