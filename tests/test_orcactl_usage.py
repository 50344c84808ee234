"""orcactl as a user meets it: bad usage is exit 2 before any request, global options go before
or after the command, --version, ping and the start it triggers, approval off and on a terminal,
and the config file `status` reports."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from orcactl import approval, arguments
from orcactl.connect import EXIT_ERROR, EXIT_NOT_RUNNING, EXIT_USAGE
from orcad import __version__
from orcad.capture.ledger import new_candidate_id
from orcad.limits import STOPPING_HOLDER_WAIT_S
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_deliberate_daemon import run_on_terminal

pytestmark = pytest.mark.daemon


def orcactl(
    orca_env: OrcaEnv,
    *args: str | bytes,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
    cwd: Path | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """orcactl run in a process of its own, run by `prefix` (a shell) when given; its stdin is
    `stdin`, or nothing (never a terminal)."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "orcactl", *args],
        env=env or orca_env.env,
        cwd=cwd,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def records(orca_env: OrcaEnv, ws: Path) -> list[dict[str, str]]:
    listed = orcactl(orca_env, "memory", "list", "--json", "--cwd", str(ws))
    assert listed.returncode == 0, listed.stderr
    result: list[dict[str, str]] = json.loads(listed.stdout)["records"]
    return result


# --- bad usage ------------------------------------------------------------------------------

BAD_USAGE = [
    (["memory", "list", "--limit", "0"], "--limit: 0 is out of range (1 to 20)"),
    (["memory", "search", "x", "--limit", "21"], "--limit: 21 is out of range (1 to 20)"),
    (["memory", "list", "--limit", "many"], "--limit: 'many' is not a whole number"),
    (["memory", "save", "  ", "--kind", "fact", "--global"], "argument TEXT: the text is empty"),
    (["memory", "save", "x" * 4097, "--kind", "fact", "--global"], "at most 4096"),
    # a save names its scope every time: neither is assumed
    (["memory", "save", "a", "--kind", "fact"], "one of the arguments --global --workspace is"),
    (["memory", "save", "a", "--global"], "the following arguments are required: --kind"),
    (["memory", "save", "a", "--kind", "note", "--global"], "invalid choice: 'note'"),
    (["memory", "forget", "mem_" + "A" * 32], "is not a record id"),
    (["memory", "update", "mem_" + "0" * 32, "\n"], "argument TEXT: the text is empty"),
    (["memory", "save", "a", "--kind", "fact", "--global", "--approve", "always"], "--approve"),
    # both given, one decision was silently dropped (whichever came last)
    (
        ["memory", "save", "a", "--kind", "fact", "--global", "--yes", "--approve", "workspace"],
        "argument --approve: not allowed with argument --yes",
    ),
    (["remember", ""], "argument TEXT: the text is empty"),
    # orcad refuses such text with -32602, which was exit 1 after a request
    (["remember", "\x01\x02"], "argument TEXT: the text holds only control or invisible"),
    (["remember", "\u200b\u200b"], "argument TEXT: the text holds only control or invisible"),
    # a Hangul filler and variation selectors are letters and marks, but nobody sees them
    (["remember", "\u3164\ufe0f\ufe0f"], "argument TEXT: the text holds only control or"),
    (
        ["memory", "save", "\ufeff\u2060", "--kind", "fact", "--global"],
        "argument TEXT: the text holds only control or invisible",
    ),
    (["remember", "y" * 2001], "at most 2000"),
    (["recall", "x", "--cwd", "/nonexistent/dir"], "--cwd: /nonexistent/dir does not exist"),
    (["memory", "list", "--cwd", "/etc/hostname"], "--cwd: /etc/hostname is not a directory"),
    (["inspect", "/nonexistent/dir"], "argument PATH: /nonexistent/dir does not exist"),
    (["forget", "cand_" + "0" * 32, "--cwd", "/nonexistent"], "--cwd: /nonexistent does not exist"),
    (["doctor", "--min-free-mb", "-1"], "--min-free-mb: -1 is out of range (at least 0)"),
    (["provider", "test", "--timeout", "0"], "--timeout: 0 is not a positive"),
    (["provider", "test", "--timeout", "nan"], "--timeout: nan is not a positive"),
    (["provider", "test", "--timeout", "inf"], "--timeout: inf is not a positive"),
    (["provider", "test", "   "], "TEXT is empty"),
    (["ping", "--bogus"], "unrecognized arguments: --bogus"),
    # a mistyped project id listed "no jobs" (jobs.list filters on it without a check)
    (["jobs", "--project", "a3bd35dd"], "--project: 'a3bd35dd' is not a project id"),
    (["inspect", "--project", "A" * 64], "--project: " + repr("A" * 64) + " is not a project id"),
    (["forget", "cand_" + "0" * 32, "--project", "x"], "--project: 'x' is not a project id"),
    # such an id is no candidate anywhere: it was reported as already forgotten
    (["forget", "cand_x"], "argument ID: 'cand_x' is not a candidate id"),
    (["forget", "CAND_" + "0" * 32], "is not a candidate id"),
    (
        ["memory", "approve", "apr_" + "0" * 32, "--session-id", "", "--decision", "deny"],
        "--session-id",
    ),
    (["grants", "list", "--session-id", "s" * 257], "--session-id: the id has 257 characters"),
    # orcad refuses it as invalid params (exit 1): a newline in it broke log lines and tables
    (["grants", "list", "--session-id", "s\nt"], "--session-id: the id holds a control character"),
    (["mcp", "--session-id", "s\x1b[2J"], "--session-id: the id holds a control character"),
    # a mistyped workspace listed "no grants" (grants.list filters on it without a check)
    (["grants", "list", "--workspace", "/nonexistent/dir"], "--workspace: /nonexistent/dir does"),
    # a Latin-1 byte (what a terminal in another encoding sends): Python keeps it as a lone
    # surrogate, which no JSON request can carry
    (["remember", "caf\udce9 au lait"], "argument TEXT: the text is not valid UTF-8"),
    (["recall", "caf\udce9"], "argument PROMPT: the text is not valid UTF-8"),
    (["memory", "search", "caf\udce9"], "argument QUERY: the text is not valid UTF-8"),
    (["memory", "save", "caf\udce9", "--kind", "fact", "--global"], "not valid UTF-8"),
    (["provider", "test", "caf\udce9"], "argument TEXT: the text is not valid UTF-8"),
    # an id is sent as it is typed: one that no request can carry is refused the same way
    (["memory", "update", "mem_\udce9", "x"], "argument ID: the text is not valid UTF-8"),
    (["memory", "forget", "mem_\udce9"], "argument ID: the text is not valid UTF-8"),
    (["memory", "approve", "apr_\udce9", "--session-id", "s", "--decision", "deny"], "ID: the"),
    (["grants", "revoke", "workspace:\udce9"], "argument ID: the text is not valid UTF-8"),
    (["jobs", "retry", "job_\udce9"], "argument ID: the text is not valid UTF-8"),
    (["forget", "cand_\udce9"], "argument ID: the text is not valid UTF-8"),
    # orcad refused these as invalid params: exit 1, pointing at its wire method grants.list
    (["grants", "revoke", "nope"], "argument ID: 'nope' is not a grant id"),
    (["grants", "revoke", "workspace:abc"], "argument ID: 'workspace:abc' is not a grant id"),
    (["jobs", "retry", ""], "argument ID: the id is empty"),
    (["jobs", "retry", "nope"], "argument ID: 'nope' is not a job id (job_ and 32 lowercase"),
    (["jobs", "retry", "job_" + "0" * 31], "is not a job id"),
    (["jobs", "retry", "JOB_" + "a" * 32], "is not a job id"),
    # an id of another shape names no record or change: it started orcad to be told not_found
    (["memory", "forget", "nonsense"], "argument ID: 'nonsense' is not a record id (mem_ and 32"),
    (["memory", "update", "mem_" + "0" * 31, "x"], "is not a record id"),
    (["memory", "forget", "MEM_" + "a" * 32], "is not a record id"),
    (["memory", "forget", "apr_" + "a" * 32], "is not a record id"),
    (
        ["memory", "approve", "apr_x", "--session-id", "s", "--decision", "deny"],
        "ID: 'apr_x' is not an approval id (apr_ and 32 lowercase hex digits",
    ),
    # an empty or blank id names no record: it started orcad to be told not_found (exit 1)
    (["memory", "forget", ""], "argument ID: the id is empty (orcactl memory list shows them)"),
    (["memory", "forget", " \t"], "argument ID: the id is empty"),
    (["memory", "update", "  ", "x"], "argument ID: the id is empty"),
    (["memory", "approve", "", "--session-id", "s", "--decision", "deny"], "ID: the id is empty"),
    (["memory", "approve", " ", "--session-id", "s", "--decision", "deny"], "ID: the id is empty"),
    (["jobs", "retry", "  "], "argument ID: the id is empty"),
    # given before `retry`, they were dropped unread and the job retried whatever its project
    (["jobs", "--project", "a" * 64, "retry", "job_" + "0" * 32], "--project only chooses the"),
    (["jobs", "--state", "exhausted", "retry", "job_" + "0" * 32], "--state only chooses the"),
    # both named a project: the path (or --cwd) was silently ignored
    (["inspect", "/tmp", "--project", "a" * 64], "argument --project: not allowed with"),
    (["forget", "cand_" + "0" * 32, "--project", "a" * 64, "--cwd", "/tmp"], "not allowed with"),
    (["no-such-command"], "invalid choice"),
    # every command's actions are named alike in its usage and its errors, as the README does
    (["grants"], "orcactl grants: error: the following arguments are required: ACTION (one"),
    (["memory"], "orcactl memory: error: the following arguments are required: ACTION (one"),
    # without a command or an action, each is listed with what it does, as --help does
    ([], "\ncommands:\n  status     show whether orcad runs"),
    (["service"], "\nactions:\n  install    write the units (or plist) for this user"),
    (["grants"], "\nactions:\n  list    list grants"),
    # no command given: argparse said only that one was required, not which option was wrong
    (["--bogus"], "orcactl: error: unrecognized arguments: --bogus"),
    (["--no-start", "--bogus"], "orcactl: error: unrecognized arguments: --bogus"),
    (["memory", "--bogus"], "orcactl memory: error: unrecognized arguments: --bogus"),
    # the MCP server served every tool call an error instead
    (["mcp", "--cwd", "/nonexistent/dir"], "--cwd: /nonexistent/dir does not exist"),
    (["mcp", "--session-id", "s" * 257], "--session-id: the id has 257 characters"),
    # a file there: every tool call failed to start an orcad with it as its home
    (["mcp", "--home", "/etc/hostname"], "--home: /etc/hostname is not a directory"),
    (["mcp", "--config-dir", "/etc/hostname"], "--config-dir: /etc/hostname is not a directory"),
    # an empty directory (`--cwd "$DIR"` with DIR unset) was taken as the current directory:
    # the command acted on that workspace, a save or a forget included
    (["recall", "x", "--cwd", ""], "--cwd: the directory's path is empty"),
    (["memory", "save", "a", "--kind", "fact", "--workspace", "--yes", "--cwd", ""], "--cwd: the"),
    (["memory", "list", "--cwd="], "--cwd: the directory's path is empty"),
    (["remember", "--project", "a", "--cwd", ""], "--cwd: the directory's path is empty"),
    (["forget", "cand_" + "0" * 32, "--cwd", ""], "--cwd: the directory's path is empty"),
    (["inspect", ""], "argument PATH: the directory's path is empty"),
    (["grants", "list", "--workspace", ""], "--workspace: the directory's path is empty"),
    (["integrate", "codex", "--project", "--cwd", "", "--dry-run"], "--cwd: the directory's"),
    (["mcp", "--cwd", ""], "--cwd: the directory's path is empty"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_USAGE, ids=lambda v: " ".join(v)[:40])
def test_bad_usage_is_exit_2_and_reaches_no_daemon(
    orca_env: OrcaEnv, argv: list[str], message: str
) -> None:
    result = orcactl(orca_env, *argv)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not orca_env.socket.exists()  # nothing was sent: it would have started orcad


@pytest.mark.parametrize(
    "argv",
    [
        ["mcp", "--json", "--bogus"],  # refused by the top-level parser
        ["--json", "mcp", "--cwd", "/nonexistent/dir"],  # by mcp's own
        ["--js", "--socket", "mcp", "mcp", "--bogus"],  # a socket file named mcp
        ["--json", "mcp", "--home", "{file}"],  # after parsing, before serving
    ],
    ids=" ".join,
)
def test_a_usage_error_of_mcp_leaves_its_clients_stdout_empty_even_with_json(
    orca_env: OrcaEnv, tmp_path: Path, argv: list[str]
) -> None:
    # stdout is the MCP client's channel: a failure document there was read as a message
    file = tmp_path / "a-file"
    file.write_text("")
    result = orcactl(orca_env, *(word.format(file=file) for word in argv))
    assert result.returncode == EXIT_USAGE, result.stderr
    assert result.stdout == ""
    assert "error: " in result.stderr and "Traceback" not in result.stderr
    assert not orca_env.socket.exists()
    # another command's usage error still prints its document, also with `mcp` as its text
    other = orcactl(orca_env, "--json", "memory", "save", "mcp", "--bogus")
    assert other.returncode == EXIT_USAGE
    assert json.loads(other.stdout)["error"]["data"] == {"kind": "usage"}


def test_a_candidate_id_the_ledger_writes_is_one_orcactl_takes() -> None:
    for _ in range(20):
        made = new_candidate_id()
        assert arguments.candidate_id(made) == made


def test_a_working_directory_whose_name_is_not_utf8_is_a_clear_error(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    latin1 = tmp_path / os.fsdecode(b"caf\xe9")  # made on a system with another encoding
    latin1.mkdir()
    for argv in (["recall", "x"], ["remember", "x"], ["memory", "list"], ["inspect"]):
        result = orcactl(daemon.orca, *argv, cwd=latin1)
        assert "Traceback" not in result.stderr
        assert result.returncode == 2  # bad usage, refused before any request
        assert "not valid UTF-8" in result.stderr
    as_option = orcactl(daemon.orca, "recall", "x", "--cwd", str(latin1))
    assert as_option.returncode == 2
    assert "--cwd: the directory's path is not valid UTF-8" in as_option.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "x"],
        ["remember", "x"],
        ["memory", "list"],
        ["memory", "save", "x", "--kind", "fact", "--global", "--yes"],
        ["inspect"],
        ["forget", "cand_" + "0" * 32],
        ["integrate", "codex", "--project", "--dry-run"],
        ["recall", "x", "--cwd", "."],  # relative: there is nothing to resolve it against
        ["inspect", "sub"],
        ["integrate", "codex", "--orcactl", "bin/orcactl", "--dry-run"],
        ["mcp"],
    ],
    ids=" ".join,
)
def test_a_current_directory_that_was_removed_is_bad_usage_named_as_such(
    orca_env: OrcaEnv, tmp_path: Path, argv: list[str]
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    in_gone = ["sh", "-c", f'cd {shlex.quote(str(gone))} && rmdir "$PWD" && exec "$@"', "sh"]
    result = orcactl(orca_env, *argv, prefix=in_gone)
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, result.stderr
    assert "current directory no longer exists" in result.stderr
    assert not orca_env.socket.exists()  # refused before any request: nothing was started


def test_a_workspace_whose_git_cannot_be_looked_for_is_bad_usage_not_a_traceback(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # a directory whose path leaves no room for "/.git" within PATH_MAX: the lookup fails
    deep = tmp_path
    while len(str(deep)) < 4088:
        deep = deep / ("d" * min(200, 4092 - len(str(deep)) - 1))
    deep.mkdir(parents=True)
    result = orcactl(orca_env, "grants", "list", "--workspace", str(deep))
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, result.stderr
    assert "--workspace: cannot look for .git in" in result.stderr
    assert not orca_env.socket.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["remember", "-"],
        ["memory", "save", "-", "--kind", "fact", "--global", "--yes"],
        ["provider", "test", "-"],
    ],
    ids=" ".join,
)
def test_a_stdin_that_cannot_be_read_is_bad_usage_named_as_such(
    orca_env: OrcaEnv, tmp_path: Path, argv: list[str]
) -> None:
    # a stdin opened only for writing (`0>file`) fails every read with EBADF
    write_only = ["sh", "-c", f'exec "$@" 0>{shlex.quote(str(tmp_path / "out"))}', "sh"]
    result = orcactl(orca_env, *argv, prefix=write_only)
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, result.stderr
    assert "cannot read the text from stdin" in result.stderr
    assert not orca_env.socket.exists()  # refused before any request: nothing was started


def test_a_value_in_range_is_accepted(daemon: DaemonProcess, tmp_path: Path) -> None:
    for limit in ("1", "20"):
        result = orcactl(daemon.orca, "memory", "list", "--limit", limit, "--cwd", str(tmp_path))
        assert result.returncode == 0, result.stderr
    longest = " " + "x" * 4096 + "\n"  # trimmed, as the daemon trims it
    saved = orcactl(
        daemon.orca, "memory", "save", longest, "--kind", "fact", "--global", "--yes",
        "--cwd", str(tmp_path),
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    remembered = orcactl(daemon.orca, "remember", "y" * 2000, "--cwd", str(tmp_path))
    assert remembered.returncode == 0, remembered.stderr


def test_an_approval_for_a_session_that_is_not_open_leaves_no_project_behind(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # the session was opened (anew, to be closed at once) with automatic memory, which made a
    # project of --cwd: `orcactl projects` listed a directory nothing was ever kept for
    ws = tmp_path / "elsewhere"
    ws.mkdir()
    refused = orcactl(
        daemon.orca,
        "memory",
        "approve",
        "apr_" + "0" * 32,
        "--session-id",
        "no-such-session",
        "--decision",
        "allow_once",
        "--cwd",
        str(ws),
    )
    assert refused.returncode == EXIT_ERROR, refused.stderr
    assert "session no-such-session is not open" in refused.stderr
    listed = orcactl(daemon.orca, "projects", "--json")
    assert listed.returncode == 0, listed.stderr
    seen = [project["last_seen_cwd"] for project in json.loads(listed.stdout)["projects"]]
    assert str(ws) not in seen


def test_json_reports_a_storage_error_as_one_document_with_the_daemons_error(
    daemon: DaemonProcess,
) -> None:
    user_md = daemon.orca.memory_root / "user.md"
    user_md.mkdir(parents=True)  # a directory where the file goes: orcad refuses to write it
    failed = orcactl(daemon.orca, "--no-start", "remember", "tabs, not spaces", "--json")
    assert failed.returncode == 1
    document = json.loads(failed.stdout)
    assert document["ok"] is False
    error = document["error"]
    assert (error["code"], error["data"]["kind"]) == (-32017, "storage")
    assert str(user_md) in error["message"]
    assert failed.stderr == f"orcactl: {error['message']}\n"
    assert user_md.is_dir()


# --- global options, --version ----------------------------------------------------------------


def test_version() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, f"orcactl {__version__} (protocol 1)\n")


@pytest.mark.parametrize("order", [["--json", "--version"], ["--version", "--json"]])
def test_version_with_json_is_json(order: list[str]) -> None:
    # it printed the text line, which a script reading --json output cannot parse
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", *order],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"orcactl": __version__, "protocol": 1}


@pytest.mark.parametrize("where", ["--cwd", "ORCA_SOCKET"])
def test_json_that_names_a_path_not_in_utf8_is_still_json(
    orca_env: OrcaEnv, tmp_path: Path, where: str
) -> None:
    # the path's byte 0xff went into the document raw, which no JSON reader takes
    env = dict(orca_env.env)
    args: list[str | bytes] = ["--json", "--no-start"]
    if where == "--cwd":
        args += ["recall", "--cwd", bytes(tmp_path) + b"/gone\xff", "a prompt"]
    else:
        env = {**env, "ORCA_SOCKET": "/nowhere/s\udcff.sock"}  # as the OS gives it to Python
        args += ["status"]
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", *args],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode in (EXIT_USAGE, EXIT_NOT_RUNNING), result.stderr
    document = json.loads(result.stdout.decode("utf-8"))
    assert "\udcff" in json.dumps(document, ensure_ascii=False)  # the byte, as an escape
    assert b"\\udcff" in result.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is Linux's")
@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_output_that_cannot_be_written_is_said_in_one_line(
    orca_env: OrcaEnv, json_flag: list[str]
) -> None:
    # with --json, a full disk under stdout gave two chained tracebacks
    with Path("/dev/full").open("w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "orcactl", *json_flag, "--no-start", "status"],
            env=orca_env.env,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == EXIT_ERROR
    assert result.stderr.endswith(
        "orcactl: cannot write the output: [Errno 28] No space left on device\n"
    ), result.stderr
    assert "Traceback" not in result.stderr


def test_global_options_work_after_the_command(daemon: DaemonProcess, tmp_path: Path) -> None:
    elsewhere = dict(daemon.orca.env, ORCA_SOCKET=str(tmp_path / "nobody.sock"))
    sock = str(daemon.orca.socket)
    after = orcactl(daemon.orca, "ping", "--no-start", "--socket", sock, "--json", env=elsewhere)
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["pid"] == daemon.proc.pid  # type: ignore[union-attr]
    before = orcactl(daemon.orca, "--json", "--socket", sock, "ping", env=elsewhere)
    assert json.loads(before.stdout)["pid"] == daemon.proc.pid  # type: ignore[union-attr]
    nested = orcactl(
        daemon.orca, "memory", "--socket", sock, "list", "--cwd", str(tmp_path), env=elsewhere
    )
    assert (nested.returncode, nested.stdout) == (0, "no records\n"), nested.stderr
    as_json = orcactl(daemon.orca, "--json", "memory", "list", "--cwd", str(tmp_path))
    assert json.loads(as_json.stdout) == {"records": []}
    # --no-start after the command keeps its meaning: nothing is started on the other socket.
    refused = orcactl(daemon.orca, "ping", "--no-start", env=elsewhere)
    assert refused.returncode == 3 and not (tmp_path / "nobody.sock").exists()
    # An option given before the command stands when the command does not repeat it.
    still = orcactl(daemon.orca, "--no-start", "status", env=elsewhere)
    assert still.returncode == 3


# --- ping and the start it triggers -----------------------------------------------------------


def test_ping_says_it_started_orcad_and_times_only_the_round_trip(orca_env: OrcaEnv) -> None:
    began = time.perf_counter()
    first = orcactl(orca_env, "ping", "--json")
    wall_ms = (time.perf_counter() - began) * 1000
    assert first.returncode == 0, first.stderr
    started = json.loads(first.stdout)
    try:
        assert started["started"] is True
        # The start (a new interpreter, imports, databases) is most of the run; not its timing.
        assert started["round_trip_ms"] < wall_ms / 4
        again = orcactl(orca_env, "ping")
        assert again.returncode == 0, again.stderr
        assert "started" not in again.stdout and f"pid {started['pid']}" in again.stdout
        assert json.loads(orcactl(orca_env, "ping", "--json").stdout)["started"] is False
    finally:
        os.kill(started["pid"], 15)
        deadline = time.monotonic() + 15
        while orca_env.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    shown = orcactl(orca_env, "ping")
    assert "(pid " in shown.stdout, (shown.returncode, shown.stdout, shown.stderr)
    try:
        pid = int(shown.stdout.split("(pid ")[1].split(",")[0])
        assert shown.stdout.startswith(f"orcad was not running; started it (pid {pid}, log ")
    finally:
        os.kill(pid, 15)
        while orca_env.socket.exists() and time.monotonic() < deadline + 15:
            time.sleep(0.05)


def test_of_pings_at_once_only_the_one_whose_start_answers_says_it_started_orcad(
    orca_env: OrcaEnv,
) -> None:
    # each starts an orcad; one wins the memory, the others exit, and their orcactl finds the
    # winner answering: it did not start that one
    pings = [
        subprocess.Popen(
            [sys.executable, "-m", "orcactl", "ping", "--json"],
            env=orca_env.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    answers = [ping.communicate(timeout=60) for ping in pings]
    results = [json.loads(out) for out, _ in answers if out]
    pids = {result["pid"] for result in results}
    try:
        assert [ping.returncode for ping in pings] == [0] * 4, [err for _, err in answers]
        assert len(pids) == 1
        assert [result["started"] for result in results].count(True) == 1
    finally:
        # the other starts give up once they see the winner serve: stopped before them, it
        # would leave its memory to one of them
        deadline = time.monotonic() + STOPPING_HOLDER_WAIT_S + 15
        while _orcads_of(orca_env) - pids and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in pids:
            os.kill(pid, 15)
        while orca_env.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def _orcads_of(orca_env: OrcaEnv) -> set[int]:
    """The processes running with this environment's ORCA_HOME (the orcads started for it)."""
    wanted = f"ORCA_HOME={orca_env.home}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
        except OSError:
            continue  # gone meanwhile
    return found


def test_ctrl_c_while_a_provider_test_runs_ends_it_with_130_and_no_traceback(
    orca_env: OrcaEnv,
) -> None:
    started = orca_env.root / "extracting"
    script = f"touch {shlex.quote(str(started))}; exec sleep 60"
    orca_env.write_config(
        '[extraction]\nprovider = "command"\ntimeout_s = 60\n'
        f"[extraction.command]\nargv = {json.dumps(['sh', '-c', script])}\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "orcactl", "provider", "test", "I prefer tabs"],
        env=orca_env.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not started.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists(), "the provider's command never ran"
    process.send_signal(signal.SIGINT)  # the user's Ctrl-C, in the middle of the extraction
    _out, err = process.communicate(timeout=30)
    assert "Traceback" not in err
    assert process.returncode == 130, err


# --- approval ---------------------------------------------------------------------------------


def approve_as_printed(orca_env: OrcaEnv, asked: subprocess.CompletedProcess[str]) -> list[str]:
    """Run the command a change left waiting printed to approve it; its words."""
    command = asked.stderr.split("To approve it once, run:\n  ", 1)[1].splitlines()[0]
    words = shlex.split(command)
    assert words[0] == "orcactl" and "--yes" in words
    approved = orcactl(orca_env, *words[1:])
    assert approved.returncode == 0, approved.stderr
    return words


def test_off_a_terminal_a_change_waits_and_the_printed_command_approves_it(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    text = "deploys go through 'make release'"
    asked = orcactl(
        daemon.orca, "memory", "save", text, "--kind", "fact", "--workspace", "--cwd", str(ws)
    )
    assert asked.returncode == 4
    assert "needs approval and there is no terminal to ask on" in asked.stderr
    assert "declined" not in asked.stderr and asked.stdout == ""
    assert records(daemon.orca, ws) == []
    assert approve_as_printed(daemon.orca, asked)[-1] == "--yes"
    assert [r["content"] for r in records(daemon.orca, ws)] == [text]


def test_off_a_terminal_json_gives_no_approval_id_that_can_no_longer_be_used(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # it gave the daemon's apr_ id and "waiting for the user (memory.approve ...)", but the
    # approval went with orcactl's session when the command ended
    ws = tmp_path / "ws"
    ws.mkdir()
    text = "deploys go through 'make release'"
    save = ["memory", "save", text, "--kind", "fact", "--workspace", "--cwd", str(ws)]
    asked = orcactl(daemon.orca, "--json", *save)
    assert asked.returncode == 4, asked.stderr
    document = json.loads(asked.stdout)
    assert document["outcome"] == "pending_approval" and document["approval_id"] is None
    assert "nothing changed" in document["reason"]
    assert "apr_" not in asked.stdout
    words = shlex.split(document["approve_with"])
    assert words[0] == "orcactl" and "--yes" in words
    assert orcactl(daemon.orca, *words[1:]).returncode == 0
    assert [r["content"] for r in records(daemon.orca, ws)] == [text]


def test_the_printed_command_approves_text_that_was_read_from_stdin(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    text = "deploys go through 'make release'"
    save = ["memory", "save", "-", "--kind", "fact", "--workspace", "--cwd", str(ws)]
    asked = orcactl(daemon.orca, *save, stdin=text + "\n")
    assert asked.returncode == 4, asked.stderr
    # the text itself: stdin is not there to read it from again
    assert text in approve_as_printed(daemon.orca, asked)
    assert [r["content"] for r in records(daemon.orca, ws)] == [text]


def test_the_printed_command_approves_text_that_looks_like_an_option(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    text = "-O2"  # given after `--`, as argparse needs it
    asked = orcactl(
        daemon.orca, "memory", "save", "--kind", "fact", "--workspace", "--cwd", str(ws), "--", text
    )
    assert asked.returncode == 4, asked.stderr
    approve_as_printed(daemon.orca, asked)
    assert [r["content"] for r in records(daemon.orca, ws)] == [text]


@pytest.mark.parametrize(
    "text",
    [
        "tabs\there, a bell \a and an escape \x1b[31m",
        "a C1 control \x85, an override \u202e and hidden \U000e0041\U000e0042",
    ],
)
def test_the_printed_command_approves_text_holding_control_characters(
    daemon: DaemonProcess, tmp_path: Path, text: str
) -> None:
    # printed raw, the command would act on the terminal; printed escaped inside ordinary
    # quotes, pasting it would save other text: pasted into bash it must save this text
    ws = tmp_path / "ws"
    ws.mkdir()
    asked = orcactl(
        daemon.orca, "memory", "save", text, "--kind", "fact", "--workspace", "--cwd", str(ws)
    )
    assert asked.returncode == 4, asked.stderr
    command = asked.stderr.split("To approve it once, run:\n  ", 1)[1].splitlines()[0]
    assert command.startswith("orcactl ") and command.isprintable()
    program = shlex.join([sys.executable, "-m", "orcactl"])
    approved = subprocess.run(
        ["bash", "-c", program + command.removeprefix("orcactl")],
        env={**daemon.orca.env, "LC_ALL": "C"},  # whatever the shell's locale
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert approved.returncode == 0, approved.stderr
    assert [r["content"] for r in records(daemon.orca, ws)] == [text]


def test_with_stdin_closed_a_change_waits_as_off_a_terminal(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    save = ["memory", "save", "tabs, not spaces", "--kind", "preference", "--workspace"]
    command = shlex.join([sys.executable, "-m", "orcactl", *save, "--cwd", str(ws)])
    asked = subprocess.run(
        ["bash", "-c", f"{command} <&-"],  # started as a job that has no stdin at all
        env=daemon.orca.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in asked.stderr
    assert asked.returncode == 4, asked.stderr
    assert "needs approval and there is no terminal to ask on" in asked.stderr
    assert records(daemon.orca, ws) == []


def test_approve_option_grants_the_workspace(daemon: DaemonProcess, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    save = ["memory", "save", "--kind", "fact", "--workspace", "--cwd", str(ws)]
    granted = orcactl(daemon.orca, *save, "first", "--approve", "workspace")
    assert granted.returncode == 0, granted.stderr
    later = orcactl(daemon.orca, *save, "second")  # no terminal, no --yes: the grant applies
    assert later.returncode == 0, later.stderr
    other = tmp_path / "other"
    other.mkdir()
    assert orcactl(daemon.orca, *save[:-1], str(other), "third").returncode == 4


def test_saving_what_memory_already_says_succeeds_and_changes_nothing(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    save = ["memory", "save", "--kind", "fact", "--workspace", "--yes", "--cwd", str(tmp_path)]
    first = orcactl(daemon.orca, *save, "builds use pnpm")
    assert first.returncode == 0, first.stderr
    again = orcactl(daemon.orca, *save, "  builds use pnpm\n", "--json")
    assert again.returncode == 0, again.stderr  # the memory holds it, as asked
    assert json.loads(again.stdout)["outcome"] == "denied"  # and the daemon says nothing changed
    [record] = records(daemon.orca, tmp_path)
    update = ["memory", "update", record["id"], "builds use pnpm", "--yes", "--cwd", str(tmp_path)]
    unchanged = orcactl(daemon.orca, *update)
    assert unchanged.returncode == 0, unchanged.stderr
    assert "already says that" in unchanged.stdout
    other = orcactl(daemon.orca, *save, "builds use yarn")
    assert other.returncode == 0, other.stderr
    # an update onto another record's text is refused: the record asked for did not get it
    clash = orcactl(daemon.orca, *update[:3], "builds use yarn", *update[4:])
    assert clash.returncode == 1, clash.stdout
    assert [r["content"] for r in records(daemon.orca, tmp_path)].count("builds use pnpm") == 1


@pytest.mark.parametrize(
    ("answer", "status", "decision"),
    [
        (b"o\n", 0, "allow_once"),
        (b"s\n", 0, "allow_session"),
        (b"workspace\n", 0, "allow_workspace"),
        (b"maybe\nn\n", 4, None),
        (b"\n", 4, None),
    ],
)
def test_the_prompt_offers_once_session_workspace_or_no(
    daemon: DaemonProcess, tmp_path: Path, answer: bytes, status: int, decision: str | None
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    save = ["save", "asked on a terminal", "--kind", "fact", "--workspace", "--cwd", str(ws)]
    returned, output = run_on_terminal(daemon.orca, save, answer)
    assert approval.PROMPT in output
    assert returned == status, output
    assert len(records(daemon.orca, ws)) == (1 if status == 0 else 0)
    if answer.startswith(b"maybe"):
        assert approval.RETRY_HINT in output
    approved = [e for e in daemon.log_events() if e.get("event") == "memory.approved"]
    assert [e["decision"] for e in approved] == ([decision] if decision else [])
    later = orcactl(daemon.orca, "memory", *save[:1], "another", *save[2:])
    assert later.returncode == (0 if decision == "allow_workspace" else 4)


def test_answers_map_to_decisions() -> None:
    assert approval.decision_for(" Y ") == "allow_once"
    assert approval.decision_for("S") == "allow_session"
    assert approval.decision_for("w\n") == "allow_workspace"
    assert approval.decision_for("") == "deny"
    assert approval.decision_for("sure") is None


# --- status: the config file ----------------------------------------------------------------


def test_status_shows_the_config_file_as_it_is_now(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    config = orca_env.home / "config.toml"
    stopped = orcactl(orca_env, "status")
    assert f"Config: {config} (missing: defaults apply)" in stopped.stdout
    orca_env.write_config("[extraction]\nworkers = 1\n")
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    process.start()
    shown = orcactl(orca_env, "status")
    assert f"Config: {config} (parses)\n" in shown.stdout, shown.stdout
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)["config_file"]
    assert report == {
        "path": str(config),
        "exists": True,
        "parses": True,
        "error": None,
        "unknown_keys": [],
        "likely_meant": {},
        "changed_since_start": False,
    }
    orca_env.write_config("[extraction]\nworkers = 2\n")
    later = time.time() + 5
    os.utime(config, (later, later))
    assert (
        "changed since orcad started: auto_memory and trusted_projects apply to sessions "
        "opened from now on, other keys once orcad restarts" in orcactl(orca_env, "status").stdout
    )
    orca_env.write_config("[extraction\n")
    broken = orcactl(orca_env, "status")
    assert broken.returncode == 0
    assert f"Config: {config} (NOT valid: " in broken.stdout
    config.unlink()
    # orcad read a file at start and runs with it: "defaults apply" would not be so
    assert f"Config: {config} (missing: removed since orcad started, which runs with it" in (
        orcactl(orca_env, "status").stdout
    )


def test_status_sees_a_config_put_in_place_with_its_old_time_or_removed(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    """Only the modification time was compared with orcad's start: a file copied in with its
    time kept (`cp -p`, a backup restored) showed as in effect, and a file removed showed
    defaults applying, while orcad ran with the file it read at start."""
    config = orca_env.home / "config.toml"
    orca_env.write_config("[extraction]\nworkers = 1\n")
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    process.start()
    kept = orca_env.root / "backup.toml"
    kept.write_text("[extraction]\nworkers = 3\n", encoding="utf-8")
    os.utime(kept, (time.time() - 86400, time.time() - 86400))
    shutil.copy2(kept, config)  # as `cp -p` does
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)["config_file"]
    assert report["changed_since_start"] is True
    assert "changed since orcad started" in orcactl(orca_env, "status").stdout
    config.unlink()
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)["config_file"]
    assert (report["exists"], report["changed_since_start"]) == (False, True)
    shown = orcactl(orca_env, "status").stdout
    assert "(missing: defaults apply)" not in shown
    assert "removed since orcad started" in shown


def test_status_names_a_misspelt_key_written_while_orcad_runs(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    """orcad lists the unknown keys of the file it read at start: a typo made since showed
    as a file that parses, its switch applying to new sessions, with no word of the key."""
    config = orca_env.home / "config.toml"
    orca_env.write_config("auto_memory = true\n")
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    process.start()
    orca_env.write_config("auto_memroy = false\n")
    later = time.time() + 5
    os.utime(config, (later, later))
    shown = orcactl(orca_env, "status").stdout
    # with the key it likely means, as doctor and orcad's log say it (status did not)
    assert (
        f"Config: {config} (parses, with unknown keys nothing reads: auto_memroy; "
        "auto_memroy: did you mean auto_memory?; changed since orcad started" in shown
    ), shown
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)
    assert report["config_file"]["unknown_keys"] == ["auto_memroy"]
    assert report["config_file"]["likely_meant"] == {"auto_memroy": "auto_memory"}
    assert report["unknown_config_keys"] == []  # those of the file orcad read at start


def test_status_of_a_stopped_orcad_says_which_key_a_misspelt_one_likely_means(
    orca_env: OrcaEnv,
) -> None:
    orca_env.write_config("auto_memroy = false\ncolour = 'blue'\n[recall]\nembeding = 'none'\n")
    shown = orcactl(orca_env, "status")
    assert shown.returncode == 3
    assert (
        "(parses, with unknown keys nothing reads: auto_memroy, colour, recall.embeding; "
        "auto_memroy: did you mean auto_memory?; recall.embeding: did you mean "
        "recall.embedding?)\n" in shown.stdout
    ), shown.stdout
    report = json.loads(orcactl(orca_env, "status", "--json").stdout)["config_file"]
    assert report["likely_meant"] == {
        "auto_memroy": "auto_memory",
        "recall.embeding": "recall.embedding",
    }
    assert not orca_env.socket.exists()  # status never starts orcad


def test_status_does_not_ask_for_a_restart_that_an_auto_memory_edit_does_not_need(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # auto_memory is read again at every session open: switching it off while orcad runs
    # takes effect for the next session, so status must not say a restart is needed for it
    config = orca_env.home / "config.toml"
    orca_env.write_config("auto_memory = true\n")
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    process.start()
    orca_env.write_config("auto_memory = false\n")
    later = time.time() + 5
    os.utime(config, (later, later))
    project = tmp_path / "repo"
    project.mkdir()
    opened = process.call("session.open", {"cwd": str(project)})
    assert opened.auto_memory is False  # applied without a restart
    shown = orcactl(orca_env, "status")
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if "Config:" in line)
    assert "restart orcad to apply it" not in line, line
    assert "auto_memory and trusted_projects apply to sessions opened from now on" in line, line
    assert "other keys once orcad restarts" in line, line


def test_status_reports_a_config_path_that_is_not_a_file(orca_env: OrcaEnv) -> None:
    config = orca_env.home / "config.toml"
    config.mkdir()
    shown = orcactl(orca_env, "status")
    assert shown.returncode == 3
    assert f"Config: {config} (NOT valid: {config}: not a regular file; " in shown.stdout, (
        shown.stdout
    )


def test_a_fifo_at_the_config_path_is_reported_without_waiting_for_a_writer(
    orca_env: OrcaEnv,
) -> None:
    config = orca_env.home / "config.toml"
    os.mkfifo(config)  # opening it for reading would wait for a writer that never comes
    shown = orcactl(orca_env, "status", "--json")
    assert shown.returncode == 3
    assert json.loads(shown.stdout)["config_file"]["error"] == f"{config}: not a regular file"
    tested = orcactl(orca_env, "provider", "test")
    assert (tested.returncode, tested.stderr) == (1, f"orcactl: {config}: not a regular file\n")
    doctor = orcactl(orca_env, "--no-start", "doctor", "--json")
    [finding] = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "config"]
    assert finding["status"] == "problem" and "not a regular file" in finding["detail"]


def test_the_socket_option_is_expanded_made_absolute_and_must_be_utf8(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # a shell leaves `~` in `--socket=~/x.sock`: the path was used as `./~/x.sock`
    env = {**orca_env.env, "HOME": str(tmp_path)}
    for args in (
        ("--socket=~/x.sock", "status", "--json"),
        ("status", "--json", "--socket=~/x.sock"),
    ):
        shown = orcactl(orca_env, "--no-start", *args, env=env)
        assert shown.returncode == 3, shown.stderr
        assert json.loads(shown.stdout)["socket"] == str(tmp_path / "x.sock")
    bad = orcactl(orca_env, "--no-start", "--socket", b"/tmp/\xff.sock", "status")
    assert bad.returncode == 2
    assert "--socket: the socket's path is not valid UTF-8" in bad.stderr


def test_a_relative_orca_socket_is_named_in_full(orca_env: OrcaEnv, tmp_path: Path) -> None:
    # "no answer on rel.sock" did not say where it had looked
    env = {**orca_env.env, "ORCA_SOCKET": "rel.sock"}
    shown = orcactl(orca_env, "--no-start", "ping", env=env, cwd=tmp_path)
    assert shown.returncode == 3
    assert f"no answer on {tmp_path / 'rel.sock'}" in shown.stderr
    status = orcactl(orca_env, "--no-start", "status", "--json", env=env, cwd=tmp_path)
    assert json.loads(status.stdout)["socket"] == str(tmp_path / "rel.sock")


@pytest.mark.parametrize("args", [("--socket=", "ping"), ("ping", "--socket", "")])
def test_an_empty_socket_option_is_bad_usage_not_the_current_directory(
    orca_env: OrcaEnv, tmp_path: Path, args: tuple[str, ...]
) -> None:
    # it was made absolute as the current directory: "orcad is not running (no answer on
    # <cwd>)", or without --no-start an orcad started on that directory
    refused = orcactl(orca_env, "--no-start", *args, cwd=tmp_path)
    assert (refused.returncode, refused.stdout) == (2, "")
    assert "--socket: the socket's path is empty" in refused.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("remember", "we use pnpm"),
        ("memory", "save", "we use pnpm", "--kind", "fact", "--workspace", "--yes"),
        ("memory", "forget", "mem_" + "0" * 32, "--yes"),
        ("memory", "approve", "apr_" + "0" * 32, "--session-id", "s", "--decision", "allow_once"),
        ("forget", "cand_" + "0" * 32),
    ],
)
def test_an_extraction_run_changes_no_memory_through_orcactl(
    orca_env: OrcaEnv, tmp_path: Path, command: tuple[str, ...]
) -> None:
    # the extractor agent (claude -p, codex exec) could run `orcactl remember` in its shell,
    # which orcactl mcp already refused to do for it
    env = {**orca_env.env, "ORCA_EXTRACTION": "1"}
    result = orcactl(orca_env, *command, "--cwd", str(tmp_path), env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr == "orcactl: memory is not changed from inside an extraction run\n"
    assert not orca_env.socket.exists()  # no daemon was started to ask


def test_a_socket_whose_directory_is_a_regular_file_names_that_file(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # ORCA_SOCKET under a regular file: the start failed with "[Errno 17] File exists: <file>",
    # which named the file but not what was wrong with it
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    env = {**orca_env.env, "ORCA_SOCKET": str(notes / "orcad.sock")}
    result = orcactl(orca_env, "ping", env=env)
    assert result.returncode == 3, result.stderr
    assert f"refusing to use {notes}: it is not a directory" in result.stderr
    assert "Errno" not in result.stderr
    assert notes.read_text() == "mine"
