"""How `orcactl hook` is started and ended, in real processes: the options before the command,
signals, and the environment. Whatever comes, a hook never exits 2 (the agents' "block")."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import filelock
import pytest

from orcactl import entry
from orcactl.hooks import runner
from orcactl.main import GLOBAL_OPTIONS
from tests.harness import REPO_ROOT, DaemonProcess, OrcaEnv
from tests.hook_helpers import ORCACTL, TERMINAL_ESCAPES, error_with_escapes, peer_answering
from tests.stalls import Stalls

pytestmark = pytest.mark.daemon

# C0 controls but tab and newline, DEL and C1 controls: what must never reach a terminal raw
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _orcactl(orca: OrcaEnv, *args: str, stdin: str = "{}", **env: str) -> tuple[int, str, str]:
    completed = subprocess.run(
        [ORCACTL, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**orca.env, **env},
        timeout=60,
    )
    return completed.returncode, completed.stdout, completed.stderr


def test_the_scan_before_the_hook_knows_every_global_option() -> None:
    assert set(entry.GLOBAL_OPTIONS) == {flag for flag, _keywords in GLOBAL_OPTIONS}


@pytest.mark.parametrize(
    "leading",
    [
        ("--no-start",),
        ("--json",),
        ("--socket", "/nonexistent/orcad.sock"),
        ("--socket=/nonexistent/orcad.sock", "--no-start"),
        ("--no-st", "--js"),  # abbreviated, as argparse takes them
        ("--no-start=yes",),  # a flag given a value
        ("--bogus",),  # no option of orcactl's: argparse exited 2
        ("-v", "--no-start"),
        ("--home", "/nonexistent/home"),  # the hook's own, before it
        ("--config-dir=/nonexistent/config", "--ho", "/nonexistent/home"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ("hook", "claude", "Stop"),  # no such agent
        ("hook", "claude-code", "Stop", "--bogus"),
        ("hook", "claude-code"),
    ],
)
def test_global_options_before_a_hook_never_make_it_exit_2(
    orca_env: OrcaEnv, leading: tuple[str, ...], command: tuple[str, ...]
) -> None:
    status, stdout, stderr = _orcactl(orca_env, *leading, *command)
    assert (status, stdout) == (1, "")
    assert len(stderr.splitlines()) == 1 and stderr.startswith("orcactl hook: "), stderr


@pytest.mark.parametrize(
    "command",
    [
        ("--socket", "hook", "codex", "Stop"),
        ("--no-start", "--sock", "hook", "claude-code", "UserPromptSubmit"),
        ("--socket", "hook"),
    ],
)
def test_a_socket_missing_its_path_before_the_hook_is_named_and_never_exits_2(
    orca_env: OrcaEnv, command: tuple[str, ...]
) -> None:
    # `hook` is the command there, not the socket's path (a hook command never eaten as it)
    status, stdout, stderr = _orcactl(orca_env, *command)
    assert (status, stdout, stderr) == (1, "", "orcactl hook: --socket needs a PATH\n")


@pytest.mark.parametrize("option", ["--home", "--config-dir"])
def test_a_home_or_config_dir_missing_before_the_hook_is_named_and_never_exits_2(
    orca_env: OrcaEnv, option: str
) -> None:
    status, stdout, stderr = _orcactl(orca_env, option, "hook", "codex", "Stop")
    assert (status, stdout, stderr) == (1, "", f"orcactl hook: {option} needs a DIR\n")


@pytest.mark.parametrize(
    ("option", "value"), [("--socket", "PATH"), ("--home", "DIR"), ("--config-dir", "DIR")]
)
@pytest.mark.parametrize(
    ("command", "said"),
    [
        (("hook", "codex", "Stop", "{option}", ""), '{option} needs a {value}, and "" gives none'),
        (("hook", "codex", "Stop", "{option}", "--no-start"), "{option} needs a {value}"),
        (("{option}", "--no-start", "hook", "codex", "Stop"), "{option} needs a {value}"),
    ],
    ids=["empty", "an-option-after-it", "an-option-after-it-before-the-hook"],
)
def test_a_path_option_given_nothing_or_another_option_is_named_and_never_exits_2(
    orca_env: OrcaEnv, option: str, value: str, command: tuple[str, ...], said: str
) -> None:
    # neither may stand for the default (an orcad started over the default memory), nor the
    # option after it be taken for a path (`--no-start` ignored)
    words = [word.format(option=option) for word in command]
    status, stdout, stderr = _orcactl(orca_env, *words, stdin="{}")
    assert (status, stdout) == (1, "")
    assert stderr == f"orcactl hook: {said.format(option=option, value=value)}\n"
    assert not (orca_env.home / "orcad.log").exists()  # no orcad was started


def test_a_relative_home_in_a_removed_directory_is_named_and_never_exits_2(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    completed = subprocess.Popen(
        [ORCACTL, "hook", "codex", "Stop", "--home", "memory"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=orca_env.env,
        cwd=gone,
        preexec_fn=lambda: os.rmdir(gone),  # noqa: PLW1509  (in the hook's directory, removed)
    )
    stdout, stderr = completed.communicate("{}", timeout=60)
    assert (completed.returncode, stdout) == (1, "")
    assert stderr == "orcactl hook: --home memory is relative and the current directory is gone\n"


@pytest.mark.parametrize(("option", "value"), [("--home", "DIR"), ("--config-dir", "DIR")])
@pytest.mark.parametrize("empty", [True, False], ids=["empty", "missing"])
def test_a_home_or_config_dir_without_a_value_is_named_and_never_exits_2(
    orca_env: OrcaEnv, option: str, value: str, empty: bool
) -> None:
    given = (f"{option}=",) if empty else (option,)
    status, stdout, stderr = _orcactl(orca_env, "hook", "codex", "Stop", *given, stdin="{}")
    assert (status, stdout) == (1, "")
    said = (
        f"{option} needs a {value}, and {option}= gives none"
        if empty
        else f"{option} needs a {value}"
    )
    assert stderr == f"orcactl hook: {said}\n"


@pytest.mark.parametrize(
    "command",
    [("hook", "--socket=", "codex", "Stop"), ("hook", "claude-code", "Stop", "--socket=")],
)
def test_an_empty_socket_for_a_hook_is_named_not_taken_for_the_default(
    orca_env: OrcaEnv, daemon: DaemonProcess, command: tuple[str, ...]
) -> None:
    # the default socket has a daemon behind it: an empty value used to reach it silently
    status, stdout, stderr = _orcactl(
        orca_env, *command, stdin="{}", ORCA_SOCKET=str(daemon.orca.socket)
    )
    assert (status, stdout) == (1, "")
    assert stderr == "orcactl hook: --socket needs a PATH, and --socket= gives none\n"


@pytest.mark.parametrize(
    ("command", "took", "meant"),
    [
        (("hook", "--socket", "codex", "Stop"), "codex", "agent"),
        (("hook", "claude-code", "--socket", "Stop"), "Stop", "event"),
        (("hook", "--home", "codex", "Stop"), "codex", "agent"),
        (("hook", "claude-code", "--config-dir", "Stop"), "Stop", "event"),
    ],
)
def test_a_socket_option_that_took_the_agent_or_event_is_named_and_never_exits_2(
    orca_env: OrcaEnv, command: tuple[str, ...], took: str, meant: str
) -> None:
    status, stdout, stderr = _orcactl(orca_env, *command, stdin="{}")
    assert (status, stdout) == (1, "")
    option = next(word for word in command if word.startswith("--"))
    what = "PATH" if option == "--socket" else "DIR"
    assert stderr.startswith(
        f"orcactl hook: {option} took {took!r} as its {what}, leaving the hook without its {meant}"
    )
    assert len(stderr.splitlines()) == 1


@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_a_socket_given_before_or_after_the_hook_is_the_one_it_reaches(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess, before: bool
) -> None:
    # `~` expanded as for every orcactl command; the environment names a socket nobody serves
    socket = "~/" + str(Path("..") / daemon.orca.socket.relative_to(orca_env.root))
    options = (f"--socket={socket}", "--no-start")
    hook = ("hook", "claude-code", "SessionStart")
    payload = f'{{"session_id": "s1", "cwd": "{tmp_path}", "source": "startup"}}'
    status, _stdout, stderr = _orcactl(
        orca_env,
        *((*options, *hook) if before else (*hook, *options)),
        stdin=payload,
        ORCA_SOCKET=str(tmp_path / "nobody.sock"),
    )
    assert (status, stderr) == (0, "")
    assert daemon.call("daemon.status").sessions == 1


@pytest.mark.parametrize("ignored", [False, True], ids=["default", "ignored-by-the-agent"])
def test_ctrl_c_ends_a_hook_quietly_with_130_unless_the_agent_ignores_it(
    tmp_path: Path, orca_env: OrcaEnv, ignored: bool
) -> None:
    # a peer that takes the request and never answers holds the hook mid-call
    path = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(1)
        command = [ORCACTL, "--socket", str(path), "hook", "claude-code", "UserPromptSubmit"]
        if ignored:  # a shell that ignores SIGINT passes that on to what it runs
            command = ["sh", "-c", 'trap "" INT; exec "$0" "$@"', *command]
        hook = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=orca_env.env,
        )
        assert hook.stdin is not None
        hook.stdin.write(f'{{"session_id": "s1", "cwd": "{tmp_path}", "prompt": "hi"}}'.encode())
        hook.stdin.close()
        hook.stdin = None
        connection, _ = server.accept()
        with connection, connection.makefile("rb") as requests:
            assert b"session.open" in requests.readline()  # the hook is inside its call
            hook.send_signal(signal.SIGINT)
            stdout, stderr = hook.communicate(timeout=30)
    assert b"Traceback" not in stderr and b"KeyboardInterrupt" not in stderr, stderr
    if ignored:  # the hook went on until its time was spent (UserPromptSubmit: 8 s)
        assert (hook.returncode, stdout) == (0, b"")
        assert stderr.startswith(b"orcactl hook: orca memory skipped:"), stderr
    else:
        assert (hook.returncode, stdout, stderr) == (130, b"", b"")


def test_input_over_the_bound_the_readme_states_is_refused_unread(orca_env: OrcaEnv) -> None:
    bound = f"{runner.INPUT_MAX_BYTES >> 20} MiB"
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### When something goes wrong\n", 1)[1].split("\n#", 1)[0]
    assert f"is over {bound}" in " ".join(section.split())
    prompt = "x" * runner.INPUT_MAX_BYTES  # valid JSON, one prompt too long to be read whole
    stdin = f'{{"session_id": "s1", "cwd": "/", "prompt": "{prompt}"}}'
    status, stdout, stderr = _orcactl(
        orca_env, "hook", "claude-code", "UserPromptSubmit", "--no-start", stdin=stdin
    )
    assert (status, stdout, stderr) == (1, "", f"orcactl hook: hook input over {bound}\n")


def test_a_number_too_long_to_read_is_named_without_pythons_advice(orca_env: OrcaEnv) -> None:
    stdin = f'{{"session_id": "s1", "cwd": "/", "prompt": "hi", "n": {"7" * 5000}}}'
    status, stdout, stderr = _orcactl(
        orca_env, "hook", "claude-code", "UserPromptSubmit", "--no-start", stdin=stdin
    )
    limit = sys.get_int_max_str_digits()
    assert (status, stdout) == (1, "")
    assert stderr == f"orcactl hook: hook input holds a number of over {limit} digits\n"


@pytest.mark.parametrize("value", ["0", "", "yes"])
def test_orca_extraction_other_than_1_leaves_a_hook_at_work(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess, value: str
) -> None:
    # README: a hook with ORCA_EXTRACTION=1 does nothing; the command provider sets just that
    payload = f'{{"session_id": "s1", "cwd": "{tmp_path}", "source": "startup"}}'
    status, _stdout, stderr = _orcactl(
        orca_env, "hook", "claude-code", "SessionStart", stdin=payload, ORCA_EXTRACTION=value
    )
    assert (status, stderr) == (0, "")
    assert daemon.call("daemon.status").sessions == 1


def _context_with_escapes(request: dict[str, Any]) -> dict[str, Any]:
    result = {"session_id": "s1", "epoch": 1, "context": f"Recalled: {TERMINAL_ESCAPES}\tend"}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def _prompt_answered_by(
    tmp_path: Path, orca_env: OrcaEnv, agent: str, answer: Callable[[dict[str, Any]], Any]
) -> tuple[int, str, str]:
    """The agent's UserPromptSubmit hook run against a peer on its socket that is not orcad and
    answers each request with `answer(request)`: its exit status, stdout and stderr."""
    payload = json.dumps(
        {"session_id": "s1", "turn_id": "t1", "cwd": str(tmp_path), "prompt": "hi"}
    )
    hook = ("--socket", str(tmp_path / "peer.sock"), "hook", agent, "UserPromptSubmit")
    with peer_answering(tmp_path / "peer.sock", answer):
        return _orcactl(orca_env, *hook, "--no-start", stdin=payload)


def _error_of_several_lines(request: dict[str, Any]) -> dict[str, Any]:
    message = (
        "refused\norcactl hook: all memories deleted\r\n\tsee\u2028orcactl hook: a\u2029b\x85c"
    )
    error = {"code": -32000, "message": message, "data": {"kind": "x"}}
    return {"jsonrpc": "2.0", "id": request["id"], "error": error}


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_peer_error_of_several_lines_is_still_one_line_on_stderr(
    tmp_path: Path, orca_env: OrcaEnv, agent: str
) -> None:
    # a newline in what the socket answered would let it write lines of its own into the
    # agent's log, looking like orcactl's
    status, _stdout, stderr = _prompt_answered_by(
        tmp_path, orca_env, agent, _error_of_several_lines
    )
    assert status == 0
    assert len(stderr.splitlines()) == 1 and stderr.endswith("\n"), repr(stderr)
    assert stderr == (
        "orcactl hook: orca memory skipped: refused\\x0aorcactl hook: all memories deleted"
        "\\x0d\\x0a\tsee\\u2028orcactl hook: a\\u2029b\\x85c (x)\n"
    ), repr(stderr)


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_peer_that_answers_terminal_escapes_gets_them_escaped_not_echoed(
    tmp_path: Path, orca_env: OrcaEnv, agent: str
) -> None:
    # whatever listens on the socket (not orcad) had its ESC sequences written raw to stderr,
    # which an agent may show on the user's terminal
    status, stdout, stderr = _prompt_answered_by(tmp_path, orca_env, agent, error_with_escapes)
    assert status == 0
    assert not RAW_CONTROLS.search(stderr), repr(stderr)
    assert stderr.startswith(
        "orcactl hook: orca memory skipped: \\x1b]0;owned\\x07\\x1b[2J\\x9b31m"
    )
    status, stdout, stderr = _prompt_answered_by(tmp_path, orca_env, agent, _context_with_escapes)
    assert (status, stderr) == (0, "")
    context = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    assert context == "Recalled: \\x1b]0;owned\\x07\\x1b[2J\\x9b31m\tend"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is Linux's")
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_an_answer_the_hook_cannot_write_is_a_recorded_problem(
    tmp_path: Path, orca_env: OrcaEnv, agent: str
) -> None:
    # the recalled context was lost with exit 0, no line and no record
    payload = json.dumps(
        {"session_id": "s1", "turn_id": "t1", "cwd": str(tmp_path), "prompt": "hi"}
    )
    hook = ("--socket", str(tmp_path / "peer.sock"), "hook", agent, "UserPromptSubmit")
    with (
        peer_answering(tmp_path / "peer.sock", _context_with_escapes),
        Path("/dev/full").open("w") as full,
    ):
        completed = subprocess.run(
            [ORCACTL, *hook, "--no-start"],
            input=payload,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=orca_env.env,
            timeout=60,
            check=False,
        )
    assert completed.returncode == 0  # a hook never breaks the agent
    assert completed.stderr.startswith("orcactl hook: orca memory lost: cannot write the answer")
    assert len(completed.stderr.splitlines()) == 1 and "Traceback" not in completed.stderr
    failures = (orca_env.memory_root / "agent-hooks.jsonl").read_text().splitlines()
    assert json.loads(failures[-1])["kind"] == "output"


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_an_input_for_another_event_is_refused_as_bad_input(
    tmp_path: Path, orca_env: OrcaEnv, agent: str
) -> None:
    # a Stop input given to the UserPromptSubmit hook (registered under the wrong event) was
    # read as a prompt without one: exit 0, no line
    payload = json.dumps(
        {
            "session_id": "s1",
            "turn_id": "t1",
            "cwd": str(tmp_path),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
    )
    status, _stdout, stderr = _orcactl(
        orca_env, "hook", agent, "UserPromptSubmit", "--no-start", stdin=payload
    )
    assert (status, stderr) == (
        1,
        "orcactl hook: the hook input is for Stop, not UserPromptSubmit\n",
    )
    failures = (orca_env.memory_root / "agent-hooks.jsonl").read_text().splitlines()
    assert json.loads(failures[-1])["kind"] == "bad_input"
    # Stop and SubagentStop are handled alike: one may stand for the other
    sub = json.loads(payload) | {"hook_event_name": "SubagentStop"}
    status, _stdout, stderr = _orcactl(
        orca_env, "hook", agent, "Stop", "--no-start", stdin=json.dumps(sub)
    )
    assert "is for" not in stderr


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
@pytest.mark.parametrize("prompt", [None, 42, ["hi"]], ids=["null", "number", "list"])
def test_a_prompt_that_is_not_a_string_is_bad_input(
    tmp_path: Path, orca_env: OrcaEnv, agent: str, prompt: object
) -> None:
    # both agents document `prompt` as a string; null was read as no prompt at all, and the
    # hook opened a session and recalled for an empty one
    payload = {
        "session_id": "s1",
        "turn_id": "t1",
        "transcript_path": None,
        "cwd": str(tmp_path),
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }
    status, stdout, stderr = _orcactl(
        orca_env, "hook", agent, "UserPromptSubmit", "--no-start", stdin=json.dumps(payload)
    )
    assert (status, stdout) == (1, "{}\n" if agent == "codex" else "")  # Codex's empty answer
    assert stderr == "orcactl hook: the hook input's 'prompt' is not a string\n"
    failures = (orca_env.memory_root / "agent-hooks.jsonl").read_text().splitlines()
    assert json.loads(failures[-1])["kind"] == "bad_input"
    # a prompt left out is still an empty one (no daemon here: the hook says it cannot reach it)
    del payload["prompt"]
    status, _stdout, stderr = _orcactl(
        orca_env, "hook", agent, "UserPromptSubmit", "--no-start", stdin=json.dumps(payload)
    )
    assert "'prompt'" not in stderr


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_hook_started_with_stdout_closed_says_its_answer_is_lost(
    tmp_path: Path, orca_env: OrcaEnv, agent: str
) -> None:
    # started with descriptor 1 closed, the hook lost its context without a word, and the
    # socket it opened took descriptor 1, where the watchdog writes its empty answer
    payload = json.dumps(
        {"session_id": "s1", "turn_id": "t1", "cwd": str(tmp_path), "prompt": "hi"}
    )
    hook = ("--socket", str(tmp_path / "peer.sock"), "hook", agent, "UserPromptSubmit")
    with peer_answering(tmp_path / "peer.sock", _context_with_escapes):
        completed = subprocess.run(
            [ORCACTL, *hook, "--no-start"],
            input=payload,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=orca_env.env,
            timeout=60,
            check=False,
            preexec_fn=lambda: os.close(1),
        )
    assert completed.returncode == 0  # a hook never breaks the agent
    assert completed.stderr == (
        "orcactl hook: orca memory lost: cannot write the answer: the hook was started with "
        "stdout closed\n"
    )
    failures = (orca_env.memory_root / "agent-hooks.jsonl").read_text().splitlines()
    assert json.loads(failures[-1])["kind"] == "output"


def test_every_standard_descriptor_orcactl_was_started_without_is_held_on_dev_null(
    tmp_path: Path,
) -> None:
    script = (
        "import os, socket\n"
        "from orcactl import entry\n"
        "entry._hold_standard_descriptors()\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "print(s.fileno(), os.readlink('/proc/self/fd/0'), os.readlink('/proc/self/fd/1'),"
        " file=open(os.environ['OUT'], 'w'))\n"
    )
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "OUT": str(out)},
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=True,
        preexec_fn=lambda: (os.close(0), os.close(1)),
    )
    number, stdin, stdout = out.read_text().split()
    assert int(number) > 2 and stdin == stdout == os.devnull


@pytest.mark.parametrize("command", [("hook", "codex", "UserPromptSubmit"), ("ping",)])
def test_one_start_of_orcad_at_a_time_and_the_others_use_it(
    tmp_path: Path, orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], command: tuple[str]
) -> None:
    # hooks of several sessions that found no daemon at once each started an orcad: all but
    # one exited, and on two cores each hook took about its whole budget. While another start
    # holds the lock, an orcactl starts none of its own, and then uses the daemon started.
    orca_env.home.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(
        {
            "session_id": "s1",
            "turn_id": "t1",
            "transcript_path": None,
            "cwd": str(tmp_path),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "hi",
        }
    )
    (tmp_path / "input.json").write_text(payload)
    lock = filelock.FileLock(str(orca_env.home / "orcad.start.lock"))
    with lock, (tmp_path / "input.json").open() as stdin:  # another is starting orcad
        waiting = subprocess.Popen(
            [ORCACTL, *command],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=orca_env.env,
            text=True,
        )
        time.sleep(1.5)  # time enough to import, find no daemon and start one
        assert _orcads_on(orca_env.socket) == []
        started = DaemonProcess(orca_env)
        daemon_factory.append(started)
        started.start()
    stdout, stderr = waiting.communicate(timeout=60)
    assert (waiting.returncode, stderr) == (0, ""), stdout
    assert _orcads_on(orca_env.socket) == [started.proc.pid]


def test_clients_that_find_no_home_yet_start_one_orcad(tmp_path: Path) -> None:
    # A new machine: no ORCA_HOME, nor its parent, nor the socket's directory. The orcactls of
    # an agent's start (hooks, the MCP server) all find no daemon at once; they took the start
    # lock only where a home existed, so several started an orcad each and all but one exited
    # ("already running" in orcad.log), on two cores a second or more for every client.
    started_at_once = 8
    for attempt in range(2):
        (tmp_path / f"a{attempt}").mkdir()
        orca = OrcaEnv(
            tmp_path / f"a{attempt}",
            extra_env={
                "ORCA_HOME": str(tmp_path / f"a{attempt}" / "new" / "orca"),
                "ORCA_SOCKET": str(tmp_path / f"a{attempt}" / "run2" / "orcad.sock"),
            },
        )
        runs = _at_once([ORCACTL, "ping"], orca.env, started_at_once)
        serving = _orcads_on(orca.socket)
        try:
            assert [(run.returncode, run.stderr) for run in runs] == [(0, "")] * started_at_once
            # ping is answered before the features are in and `daemon.ready` is logged; any
            # other request waits for them
            projects = subprocess.run(
                [ORCACTL, "projects"], capture_output=True, text=True, env=orca.env, timeout=60
            )
            assert (projects.returncode, projects.stderr) == (0, "")
            log = (tmp_path / f"a{attempt}" / "new" / "orca" / "orcad.log").read_text()
            assert "daemon.startup_failed" not in log
            assert log.count('"daemon.ready"') == 1
            assert len(serving) == 1
        finally:
            for pid in serving:
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while _orcads_on(orca.socket) and time.monotonic() < deadline:
                time.sleep(0.05)


def _at_once(
    command: list[str], env: dict[str, str], count: int
) -> list[subprocess.CompletedProcess[str]]:
    """`count` runs of `command` started at the same moment (a barrier), once all are done."""
    barrier = threading.Barrier(count)
    runs: list[subprocess.CompletedProcess[str]] = []

    def run() -> None:
        barrier.wait()
        runs.append(subprocess.run(command, capture_output=True, text=True, env=env, timeout=60))

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return runs


def _orcads_on(socket_path: Path) -> list[int]:
    """The pids of the orcad processes started for `socket_path` (by their environment)."""
    found = []
    wanted = f"ORCA_SOCKET={socket_path}".encode()
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        try:
            command = (process / "cmdline").read_bytes().split(b"\0")
            environment = (process / "environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or another user's
            continue
        if command[1:3] == [b"-m", b"orcad"] and wanted in environment:
            found.append(int(process.name))
    return found


@pytest.mark.parametrize("asked", ["--version", "--help", "-h"])
def test_orcactls_own_help_or_version_before_hook_is_not_taken_for_a_hook(
    orca_env: OrcaEnv, asked: str
) -> None:
    status, stdout, stderr = _orcactl(orca_env, asked, "hook", "codex", "Stop")
    assert (status, stderr) == (0, "")
    assert stdout.startswith("orcactl ") or "usage: orcactl" in stdout, stdout


def test_a_hook_out_of_time_while_recording_its_problem_answers_within_the_agents_timeout(
    tmp_path: Path, orca_env: OrcaEnv
) -> None:
    # Codex ends SessionEnd after 3 s and the hook gives itself 2.5. On a socket that never
    # answers, the call times out first, and the problem is recorded under the log's lock, which
    # another hook holds. The watchdog then came in the middle of that record and waited a
    # second of its own for the lock this very process was waiting on: Codex got its answer after
    # 3.5 s, past its timeout, with two lines. (Under load it could also fire while that record
    # imported the lock's module, and the error it met there came out as a traceback, exit 1.)
    silent = tmp_path / "silent.sock"
    orca_env.memory_root.mkdir(parents=True, exist_ok=True)
    held = filelock.FileLock(str(orca_env.memory_root / "agent-hooks.jsonl.lock"))
    payload = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "transcript_path": None})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener, held, Stalls() as stalls:
        listener.bind(str(silent))
        listener.listen()
        started = time.monotonic()
        status, stdout, stderr = _orcactl(
            orca_env, "--socket", str(silent), "hook", "codex", "SessionEnd", stdin=payload
        )
        took = time.monotonic() - started - stalls.seconds  # not what a loaded machine held
    assert (status, stdout) == (0, "{}\n")
    assert took < 3.0, f"the hook answered after {took:.2f} s"
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr


def test_a_hook_started_with_its_alarm_blocked_still_ends_within_its_budget(
    tmp_path: Path, orca_env: OrcaEnv
) -> None:
    # A signal mask is inherited: a hook started by a thread of the agent's that blocks SIGALRM
    # never got its watchdog's alarm, and a peer that sends a byte at a time, never a line, held
    # it for good (a Codex SessionEnd, budget 2.5 s, was still running after 20 s).
    path = tmp_path / "trickle.sock"
    stop = threading.Event()

    def trickle(server: socket.socket) -> None:
        connection, _ = server.accept()
        with connection:
            while not stop.wait(0.3):
                try:
                    connection.sendall(b" ")
                except OSError:
                    return

    payload = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "transcript_path": None})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server, Stalls() as stalls:
        server.bind(str(path))
        server.listen(1)
        thread = threading.Thread(target=trickle, args=(server,), daemon=True)
        thread.start()
        started = time.monotonic()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
        try:  # the hook inherits this thread's mask
            process = subprocess.Popen(
                [ORCACTL, "--socket", str(path), "hook", "codex", "SessionEnd", "--no-start"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=orca_env.env,
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        try:
            stdout, stderr = process.communicate(payload.encode(), timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise AssertionError("the hook ran on past its budget") from None
        finally:
            stop.set()
        took = time.monotonic() - started - stalls.seconds  # not what a loaded machine held
    assert (process.returncode, stdout) == (0, b"{}\n")
    assert took < 3.0, f"the hook answered after {took:.2f} s"
    assert stderr.decode().endswith("gave up after its 2.5 s budget\n"), stderr


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the process's age is Linux's")
@pytest.mark.parametrize("held_s", [1.0, 1.4])  # 1.4: past the time for its input, all waiting
def test_a_hook_slow_to_start_still_answers_within_the_agents_timeout(
    tmp_path: Path, orca_env: OrcaEnv, held_s: float
) -> None:
    # The agent's timeout runs from the moment it starts the hook; the hook's budget ran from the
    # moment its imports were done. On two busy cores (fifty hooks at once) Python took a second
    # and more to get there, and a Codex SessionEnd (budget 2.5 s, ended by Codex at 3 s) on a
    # socket that never answers gave up after 3.5 s. Held stopped as it starts:
    silent = tmp_path / "silent.sock"
    payload = json.dumps({"session_id": "s1", "cwd": str(tmp_path), "transcript_path": None})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener, Stalls() as stalls:
        listener.bind(str(silent))
        listener.listen()
        started = time.monotonic()
        process = subprocess.Popen(
            [ORCACTL, "--socket", str(silent), "hook", "codex", "SessionEnd", "--no-start"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=orca_env.env,
        )
        process.send_signal(signal.SIGSTOP)
        time.sleep(held_s)
        process.send_signal(signal.SIGCONT)
        stdout, stderr = process.communicate(payload.encode(), timeout=20)
        # the hook's own stop above counts; what a loaded machine held both of us does not
        took = time.monotonic() - started - stalls.seconds
    assert (process.returncode, stdout) == (0, b"{}\n")
    assert took < 3.0, f"the hook answered after {took:.2f} s"
    assert len(stderr.splitlines()) == 1 and b"Traceback" not in stderr, stderr


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_an_input_without_cwd_from_a_removed_directory_is_named_as_such(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess, agent: str
) -> None:
    # the hook falls back on its own directory; that one removed, it said only
    # "[Errno 2] No such file or directory", recorded as a connection problem
    gone = tmp_path / "gone"
    gone.mkdir()
    payload = json.dumps({"session_id": "s1", "turn_id": "t1", "prompt": "hi"})
    process = subprocess.Popen(
        [ORCACTL, "hook", agent, "UserPromptSubmit", "--no-start"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=orca_env.env,
        cwd=gone,
    )
    gone.rmdir()
    _stdout, stderr = process.communicate(payload.encode(), timeout=30)
    assert process.returncode == 1  # not the event's hook input: a non-blocking error
    assert stderr.decode() == (
        "orcactl hook: the hook input has no 'cwd', and the hook's own directory is gone\n"
    )
