"""The `orcactl` executable. `orcactl hook ...` runs on every prompt of an agent, so it goes
straight to the hook runner, which imports only the standard library; everything else loads
the full command line."""

from __future__ import annotations

import json
import os
import signal
import sys

# orcactl.main.GLOBAL_OPTIONS, which may come before a command (the hook runner takes them
# too), and the other long options there, which an abbreviation must not match: argparse
# takes any unique prefix.
GLOBAL_OPTIONS = ("--socket", "--no-start", "--json")
# the hook's own options that name a path, taken before `hook` as well as after it
HOOK_PATH_OPTIONS = ("--home", "--config-dir")
VALUE_OPTIONS = ("--socket", *HOOK_PATH_OPTIONS)
TOP_LEVEL_OPTIONS = (*GLOBAL_OPTIONS, *HOOK_PATH_OPTIONS, "--help", "--version")
EXIT_INTERRUPTED = 130  # what a shell reports for SIGINT; never 2, the agents' "block"
INTERRUPTED = "interrupted (Ctrl-C)"  # what orcactl says of it, with --json


def _global_option(item: str) -> str | None:
    """The global option `item` names, in full or abbreviated as argparse takes it."""
    name = item.partition("=")[0]
    if len(name) < 3 or not name.startswith("--"):
        return None
    matches = [option for option in TOP_LEVEL_OPTIONS if option.startswith(name)]
    if len(matches) == 1 and matches[0] in (*GLOBAL_OPTIONS, *HOOK_PATH_OPTIONS):
        return matches[0]
    return None


def hook_arguments(argv: list[str]) -> list[str] | None:
    """The hook runner's arguments when `argv` is `[GLOBAL OPTIONS] hook ...`, else None. A
    hook never goes through argparse, whose usage errors exit 2: the agents' "block"."""
    leading: list[str] = []
    index = 0
    while index < len(argv):
        item = argv[index]
        if item == "hook":
            return leading + argv[index + 1 :]
        option = _global_option(item)
        if option is None:
            return _hook_after_unknown(leading, argv[index:])
        _name, equals, value = item.partition("=")
        if option in VALUE_OPTIONS and not equals and _value_missing(argv[index + 1 :]):
            # the hook runner then says `--socket needs a PATH`, as for one at the end
            return [*leading, *argv[index + 2 :], option]
        leading.append(option + equals + value)
        if option in VALUE_OPTIONS and not equals:
            leading += argv[index + 1 : index + 2]
            index += 1
        index += 1
    return None


def _hook_after_unknown(leading: list[str], rest: list[str]) -> list[str] | None:
    """For `orcactl --bogus hook codex Stop`: the hook runner's arguments, the unknown options
    among them (it says so and exits 1), when only options come before `hook`; else None
    (`orcactl memory search hook` is a search)."""
    for at, item in enumerate(rest):
        if item in ("-h", "--help", "--version"):
            return None  # orcactl's own help or version, as asked
        if not item.startswith("-"):
            return leading + rest[:at] + rest[at + 1 :] if item == "hook" else None
    return None


def _value_missing(after: list[str]) -> bool:
    """Whether `--socket` (or `--home`, `--config-dir`) followed by `after` lacks its path
    because `hook` comes next, as the command (`orcactl --socket hook codex Stop`): taken as
    the path, it would leave `codex` as the command, a usage error argparse exits 2 for.
    `--socket hook hook ...` names a socket file called hook."""
    return after[:1] == ["hook"] and after[1:2] != ["hook"]


def serves_mcp(argv: list[str]) -> list[str] | None:
    """The options of `argv` when it is `[GLOBAL OPTIONS] mcp ...` (the MCP server, whose first
    answers may come before its slow imports: orcactl.mcp_handshake), those before `mcp` and
    those after it; else None. Only the options orcactl itself takes before a command count,
    written in full: anything else may be a usage error, and is left to argparse."""
    index = 0
    while index < len(argv):
        item = argv[index]
        if item == "mcp":
            return argv[:index] + argv[index + 1 :]
        name = item.partition("=")[0]
        if name not in GLOBAL_OPTIONS:
            return None
        if name == "--socket" and "=" not in item:
            index += 1
        index += 1
    return None


def _interrupted(_signum: int, _frame: object) -> None:
    """Ctrl-C ends a hook, or any command still importing, at once and quietly, as SIGTERM
    does: no traceback, no answer."""
    os._exit(EXIT_INTERRUPTED)


def asks_for_json(argv: list[str]) -> bool:
    """Whether `--json`, or an abbreviation of it that argparse would take (`--js`), is one of
    the options of `argv` (a word after `--` is text, not an option)."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    return any(len(word) >= len("--j") and "--json".startswith(word) for word in options)


def runs_mcp(argv: list[str]) -> bool:
    """Whether the command `argv` names is `mcp`: its first word that is neither an option nor
    the path an option before it takes (`--socket PATH`, or an abbreviation such as `--sock`)."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return argv[index + 1 : index + 2] == ["mcp"]
        if not word.startswith("-"):
            return word == "mcp"
        takes_path = "=" not in word and any(option.startswith(word) for option in VALUE_OPTIONS)
        index += 2 if takes_path and len(word) >= len("--s") else 1
    return False


def _interrupted_with_json(_signum: int, _frame: object) -> None:
    """Ctrl-C while a command asked to print JSON is still importing: the failure document
    orcactl.main prints for it later (a script reading stdout gets one either way), then at
    once exit 130, as `_interrupted`."""
    document = {
        "ok": False,
        "error": {"code": None, "message": INTERRUPTED, "data": {"kind": "interrupted"}},
    }
    for descriptor, text in (
        (2, f"orcactl: {INTERRUPTED}\n"),
        (1, json.dumps(document, indent=2) + "\n"),
    ):
        try:
            os.write(descriptor, text.encode())
        except OSError:  # nobody reads it any more: the status stands
            pass
    os._exit(EXIT_INTERRUPTED)


def _hold_standard_descriptors() -> None:
    """Open /dev/null on each of descriptors 0, 1 and 2 the process was started without (an
    agent that closed a hook's stdout, `orcactl ... >&-`), so that the next socket or file
    opened does not take that number: a socket on 1 received what was meant for stdout.
    Python has left sys.stdout (or stdin, stderr) None for it, so nothing is written there."""
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != descriptor:
                os.dup2(opened, descriptor)
                os.close(opened)


def main() -> None:
    # First of all, before the arguments are looked at and the imports that take a while:
    # Ctrl-C in them was a KeyboardInterrupt traceback. An agent that ignores SIGINT keeps that.
    quiet = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if quiet:
        signal.signal(signal.SIGINT, _interrupted)
    _hold_standard_descriptors()
    os.umask(0o077)  # every file and directory orcactl creates is private to the user
    hook_argv = hook_arguments(sys.argv[1:])
    if hook_argv is not None:
        from orcactl.hooks.runner import run  # noqa: PLC0415

        sys.exit(run(hook_argv))
    mcp_options = serves_mcp(sys.argv[1:])
    if mcp_options is not None:
        from orcactl.mcp_handshake import answer_early  # noqa: PLC0415

        answer_early(mcp_options)
    elif quiet and asks_for_json(sys.argv[1:]) and "mcp" not in sys.argv[1:]:
        # not for the MCP server (`--js mcp` too): its stdout is the client's
        signal.signal(signal.SIGINT, _interrupted_with_json)
    from orcactl.main import main as full_main  # noqa: PLC0415

    if quiet:  # the command's own Ctrl-C handling from here (orcactl.main: exit 130)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    full_main()
