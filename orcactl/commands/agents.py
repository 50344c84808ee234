"""`orcactl hook`, `orcactl mcp` and `orcactl integrate`: what connects a coding agent to orcad.

`orcactl hook ...`, global options before it or not, never reaches this parser from the
`orcactl` executable (orcactl.entry sends it straight to the hook runner, for speed and because
argparse's usage errors exit 2); it is registered here for `--help` and for `orcactl.main`.
"""

from __future__ import annotations

import argparse

from orcactl.arguments import (
    client_id,
    directory_path,
    executable_file,
    existing_directory,
    ignores_global_options,
)

AGENTS = ("claude-code", "codex")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hook = subparsers.add_parser(
        "hook",
        help="run one agent lifecycle hook (reads the agent's hook JSON on stdin)",
        description="Translate one Claude Code or Codex hook into orcad calls and answer in "
        "the agent's own output format. Never exits 2 (the agents' 'block').",
    )
    hook.add_argument("agent", choices=AGENTS, help="the agent whose hook this is")
    hook.add_argument(
        "event",
        metavar="EVENT",
        help="SessionStart, UserPromptSubmit, Stop, SessionEnd (Claude Code), ...",
    )
    add_path_options(hook)
    hook.add_argument(
        "--json", action="store_true", help="(always: a hook answers in the agent's JSON format)"
    )
    hook.set_defaults(run=run_hook)

    mcp = subparsers.add_parser(
        "mcp",
        help="stdio MCP server with the memory tools (for an agent's MCP configuration)",
        description="Serve memory_search, memory_manage, remember and recall over MCP on "
        "stdin/stdout. MCP clients start servers with a small environment: pass --cwd, "
        "--socket, --home and --config-dir when the defaults would be wrong.",
    )
    mcp.add_argument(
        "--cwd",
        metavar="DIR",
        type=existing_directory,
        help="workspace directory (default: the current one)",
    )
    mcp.add_argument(
        "--mode",
        choices=("normal", "plan", "auto", "yolo"),
        default="normal",
        help="approval mode for memory changes (default: normal, ask the user)",
    )
    mcp.add_argument(
        "--session-id",
        metavar="ID",
        type=client_id,
        help="join this orcad session instead of opening one of its own",
    )
    add_path_options(mcp)
    mcp.add_argument("--json", action="store_true", help="(always: MCP messages are JSON)")
    mcp.set_defaults(run=run_mcp)

    integrate = subparsers.add_parser(
        "integrate",
        help="connect an agent: register orca's hooks and MCP server in its configuration",
        description="Write orca's hooks and MCP server into the agent's own configuration "
        "files (user-level, or the project's with --project), keeping everything else. Each "
        "changed file is backed up first; a file that does not parse is reported and nothing "
        "is changed. Running it again changes nothing. Where orcad is goes into every entry, "
        "absolute, as options of the hook and MCP server commands, so that an orcad a hook "
        "starts serves this memory: the socket from --socket, else $ORCA_SOCKET; orcad's home "
        "from $ORCA_HOME and its configuration directory from $ORCA_CONFIG_DIR; one not set "
        "is left out (the default then). integrate itself takes no --home or --config-dir: "
        "for another memory, set the variables when you run it (ORCA_HOME=DIR orcactl "
        "integrate AGENT).",
    )
    integrate.add_argument("agent", choices=AGENTS, help="the agent to connect")
    integrate.add_argument(
        "--project",
        action="store_true",
        help="the project's configuration files, at the root of the project --cwd is in (its Git "
        "top level, as orcad takes a workspace's root, else --cwd itself)",
    )
    integrate.add_argument(
        "--cwd",
        metavar="DIR",
        type=existing_directory,
        help="a directory in the project (default: current)",
    )
    integrate.add_argument("--dry-run", action="store_true", help="print the diffs, change nothing")
    integrate.add_argument("--remove", action="store_true", help="take orca out again")
    integrate.add_argument(
        "--no-trust",
        action="store_true",
        help="Codex: leave orca's hooks for you to trust in Codex (/hooks); by default "
        "integrate records Codex's trust in the hooks it writes (user-level only), since Codex "
        "runs no hook it does not trust",
    )
    integrate.add_argument(
        "--extractor",
        action="store_true",
        help="also make the agent's own CLI (claude -p, codex exec) orca's extraction provider",
    )
    integrate.add_argument(
        "--orcactl",
        metavar="PATH",
        type=executable_file,
        help="the orcactl the agent runs (default: this one)",
    )
    integrate.add_argument("--json", action="store_true", help="print what changed as JSON")
    integrate.set_defaults(run=run_integrate)
    ignores_global_options(integrate, "--no-start")  # only configuration files are written


def add_path_options(parser: argparse.ArgumentParser) -> None:
    """--home and --config-dir, which `orcactl integrate` writes into the agent's hooks and MCP
    server: the agent starts them with its own environment, where ORCA_HOME may be unset."""
    parser.add_argument(
        "--home",
        metavar="DIR",
        type=directory_path,
        help="orcad's home, for this command and an orcad it starts (default: $ORCA_HOME "
        "or ~/.orca)",
    )
    parser.add_argument(
        "--config-dir",
        metavar="DIR",
        type=directory_path,
        help="the deliberate memory's directory, likewise (default: $ORCA_CONFIG_DIR or "
        "the user's configuration directory)",
    )


def run_hook(args: argparse.Namespace) -> int:
    from orcactl.hooks.runner import run  # noqa: PLC0415

    argv = [args.agent, args.event]
    if getattr(args, "socket", None):
        argv += ["--socket", args.socket]
    if args.home:
        argv += ["--home", args.home]
    if args.config_dir:
        argv += ["--config-dir", args.config_dir]
    if getattr(args, "no_start", False):
        argv.append("--no-start")
    return run(argv)


def run_mcp(args: argparse.Namespace) -> int:
    from orcactl.hooks.runner import pin_paths  # noqa: PLC0415
    from orcactl.mcp_server import run  # noqa: PLC0415  (the MCP SDK is slow to import)

    pin_paths(args.home, args.config_dir)
    return run(args)


def run_integrate(args: argparse.Namespace) -> int:
    from orcactl.integrate import run_integrate as integrate  # noqa: PLC0415

    return integrate(args)
