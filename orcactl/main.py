"""`orcactl`: the command line for orcad. Human output by default, `--json` everywhere."""

from __future__ import annotations

import argparse
import sys

from orcactl.commands import daemon, doctor, memory, projects, provider, recall, service
from orcactl.connect import CONNECTION_FAILURES, EXIT_ERROR, CommandError, connection_failure
from orcactl.terminal import SafeWriter

COMMAND_GROUPS = [daemon, recall, memory, projects, provider, service, doctor]

EPILOG = """exit status: 0 success; 1 the daemon answered with an error; 2 bad usage;
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
        "--socket", metavar="PATH", help="daemon socket (default: $ORCA_SOCKET or the runtime dir)"
    )
    parser.add_argument(
        "--no-start", action="store_true", help="never start orcad; fail with exit 3 instead"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in COMMAND_GROUPS:
        group.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    sys.stdout = SafeWriter(sys.stdout)
    sys.stderr = SafeWriter(sys.stderr)
    try:
        status = args.run(args)
    except CommandError as exc:
        print(f"orcactl: {exc}", file=sys.stderr)
        status = exc.status
    except KeyboardInterrupt:
        status = 130
    except BrokenPipeError:
        status = EXIT_ERROR
    except CONNECTION_FAILURES as exc:  # the daemon died mid-call or spoke another protocol
        failure = connection_failure(exc)
        print(f"orcactl: {failure}", file=sys.stderr)
        status = failure.status
    sys.exit(status)
