"""Every orcactl command explains itself: help for each command and argument, and --json."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from orcactl.main import UsageError, build_parser

pytestmark = pytest.mark.pure


def _subparsers(
    parser: argparse.ArgumentParser,
) -> Iterator[argparse._SubParsersAction[argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield action


def leaf_commands() -> Iterator[tuple[str, argparse.ArgumentParser, str | None]]:
    """(full name, parser, the help its parent lists for it) for every runnable command."""

    def walk(
        prefix: str, parser: argparse.ArgumentParser, listed: str | None
    ) -> Iterator[tuple[str, argparse.ArgumentParser, str | None]]:
        groups = list(_subparsers(parser))
        if not groups:
            yield prefix, parser, listed
        for group in groups:
            helps = {choice.dest: choice.help for choice in group._choices_actions}
            for name, child in group.choices.items():
                yield from walk(f"{prefix} {name}".strip(), child, helps.get(name))

    yield from walk("", build_parser(), "orcactl")


def test_every_command_is_listed_with_help_and_takes_json() -> None:
    commands = list(leaf_commands())
    assert len(commands) >= 15
    for name, parser, listed in commands:
        assert listed, f"`orcactl {name}` has no help line in its parent's list"
        options = {option for action in parser._actions for option in action.option_strings}
        assert "--json" in options, f"`orcactl {name}` has no --json"


def test_every_argument_has_help() -> None:
    for name, parser, _listed in leaf_commands():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            label = "/".join(action.option_strings) or action.dest
            assert action.help, f"`orcactl {name}` {label} has no help text"


def test_every_positional_argument_is_named_in_capitals_as_the_readme_names_it() -> None:
    # `memory update` showed `id text` and `inspect` `[path]`, and their errors said `argument
    # id:`, where `forget` and `remember` (and the README, for all of them) say `ID` and `TEXT`
    for name, parser, _listed in leaf_commands():
        for action in parser._actions:
            if action.option_strings or action.choices is not None:
                continue
            shown = action.metavar if isinstance(action.metavar, str) else action.dest
            assert shown == shown.upper(), f"`orcactl {name}` shows its argument as {shown}"


def test_the_readme_table_lists_every_command() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## orcactl\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `orcactl ")]
    for name, _parser, _listed in leaf_commands():
        assert any(
            row.startswith(f"| `orcactl {name} ") or row.startswith(f"| `orcactl {name}`")
            for row in rows
        ), f"README's orcactl table lacks `orcactl {name}`"


def test_the_readme_table_names_each_commands_options_and_no_others() -> None:
    # the table's first column is a command's usage: an option added to the command and not to
    # its row, or one the row still names after it was renamed, leaves the contract wrong
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## orcactl\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `orcactl ")]
    everywhere = {"--socket", "--no-start", "--json", "-h", "--help"}  # said once, above it
    for name, parser, _listed in leaf_commands():
        row = next(
            row
            for row in rows
            if row.startswith(f"| `orcactl {name} ") or row.startswith(f"| `orcactl {name}`")
        )
        usage = row.split("` |", 1)[0]
        shown = {
            option
            for action in parser._actions
            if action.help != argparse.SUPPRESS
            for option in action.option_strings
        }
        named = set(re.findall(r"--[a-z][a-z-]*", usage))
        missing, unknown = shown - everywhere - named, named - everywhere - shown
        assert not missing, f"README's `orcactl {name}` lacks {sorted(missing)}"
        assert not unknown, f"README's `orcactl {name}` names {sorted(unknown)}, which it lacks"


def test_every_orcactl_command_the_readme_names_exists() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    commands = {name for name, _parser, _listed in leaf_commands()}
    groups = {name.split()[0] for name in commands}
    named = re.findall(r"`orcactl ([^`]*)`", readme)
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", readme, flags=re.MULTILINE | re.DOTALL):
        named += re.findall(r"^\s*(?:\$ )?orcactl (.*)$", block, flags=re.MULTILINE)
    assert len(named) > 50
    for mention in named:
        words = mention.split()
        if not words or words[0].startswith("-"):
            continue  # a global option: `orcactl --version`
        assert words[0] in groups, f"README names `orcactl {mention}`, which does not exist"
        if words[0] not in commands and len(words) > 1 and words[1][0].isalpha():
            assert f"{words[0]} {words[1]}" in commands, f"README names `orcactl {mention}`"


def test_the_help_lists_every_exit_status_the_readme_gives() -> None:
    # Ctrl-C's 130 was in the README's list and missing from `orcactl --help`
    epilog = build_parser().format_help().split("exit status:", 1)[1]
    for status, meaning in [
        ("0", "success"),
        ("1", "the daemon answered with an error"),
        ("2", "bad usage"),
        ("3", "orcad is not running"),
        ("4", "a pending change was not approved"),
        ("130", "Ctrl-C"),
    ]:
        assert re.search(rf"\b{status} {re.escape(meaning)}", " ".join(epilog.split())), status


# What each command needs besides options, to parse
_POSITIONALS = {
    "integrate": ["codex"],
    "memory approve": ["apr_" + "0" * 32, "--session-id", "s1", "--decision", "deny"],
    "recall": ["a prompt"],
}
_VALUES = {"--socket": "/tmp/orca-test.sock", "--cwd": "/"}


@pytest.mark.parametrize(
    ("command", "hidden", "shown"),
    [
        ("provider test", ["--socket", "--no-start"], []),
        ("integrate", ["--no-start"], ["--socket"]),
        ("status", ["--no-start"], ["--socket"]),
        ("doctor", ["--no-start"], ["--socket"]),
        ("service install", ["--no-start"], ["--socket"]),
        # the command orcactl mcp prints for the user carries --cwd, as the README shows it
        ("memory approve", [], ["--socket", "--no-start", "--cwd"]),
        ("recall", [], ["--socket", "--no-start", "--cwd"]),
    ],
)
def test_a_command_shows_only_the_options_that_change_it(
    command: str, hidden: list[str], shown: list[str]
) -> None:
    # `orcactl provider test --socket X` asks no daemon: its help must not offer the option
    parser = next(parser for name, parser, _listed in leaf_commands() if name == command)
    text = parser.format_help()
    for option in hidden:
        assert option not in text, f"`orcactl {command} --help` offers {option}"
    for option in shown:
        assert option in text, f"`orcactl {command} --help` lacks {option}"
    argv = command.split() + _POSITIONALS.get(command, [])
    for option in [*hidden, *shown]:  # each still accepted, as a global option is anywhere
        argv += [option, _VALUES[option]] if option in _VALUES else [option]
    build_parser().parse_args(argv)


def test_integrate_help_says_where_the_paths_it_writes_come_from() -> None:
    # it said the entries get "(--socket, --home, --config-dir)", and a user then ran
    # `orcactl integrate codex --home DIR`, which integrate does not take
    parser = next(parser for name, parser, _listed in leaf_commands() if name == "integrate")
    text = " ".join(parser.format_help().split())
    for source in ("$ORCA_SOCKET", "$ORCA_HOME", "$ORCA_CONFIG_DIR"):
        assert source in text, source
    assert "takes no --home or --config-dir" in text
    assert "ORCA_HOME=DIR orcactl integrate AGENT" in text
    with pytest.raises(UsageError, match="unrecognized arguments: --home"):  # as it says
        build_parser().parse_args(["integrate", "codex", "--home", "/tmp"])


@pytest.mark.parametrize(
    ("argv", "actions"),
    [
        (["memory"], "search, list, save, update, forget, approve"),
        (["grants"], "list, revoke"),
        (["service"], "install, uninstall, status"),
        (["provider"], "test"),
    ],
)
def test_a_command_without_its_action_names_the_actions(argv: list[str], actions: str) -> None:
    # it said only "the following arguments are required: ACTION"
    with pytest.raises(UsageError) as refused:
        build_parser().parse_args(argv)
    assert str(refused.value).endswith(f"required: ACTION (one of: {actions})")


def test_a_command_whose_help_names_its_actions_names_every_one() -> None:
    # `memory` said "(search, list, save, update, forget)": approve was left out
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for choice in commands._get_subactions():
        group = commands.choices[choice.dest]
        named = re.search(r"\(([a-z]+(?:, [a-z]+)+)\)", choice.help or "")
        actions = [a for a in group._actions if isinstance(a, argparse._SubParsersAction)]
        words = named.group(1).split(", ") if named else []
        if actions and set(words) & set(actions[0].choices):  # a list of its actions
            assert words == list(actions[0].choices), choice.help
