"""orcactl when the daemon misbehaves or the socket is unusable: a clear message, never a traceback.

A real Unix socket server on tmp_path stands in for a daemon that dies mid-call (closes or resets
the connection after reading the request) or answers with something that is not protocol 1.
"""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orcactl import connect
from orcactl.connect import EXIT_ERROR, EXIT_NOT_RUNNING, EXIT_USAGE
from orcactl.main import main

pytestmark = pytest.mark.inprocess

BEHAVIOURS = (
    "close",
    "reset",
    "junk",
    "wrong_shape",
    "dies_after_open",
    "gone_after_open",
    "silent",
)
# A session.open answer: the daemon then dies on the command's own request.
OPENED = {
    "session_id": "orcactl:1",
    "epoch": 1,
    "project": {"id": "p", "identity": "/w", "root": "/w"},
    "workspace": {"id": "w", "root": "/w"},
    "auto_memory": True,
    "startup": {"user": "", "project": "", "truncated": False},
}


def _serve(listener: socket.socket, behaviour: str) -> None:
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return  # the listener was closed: the test is over
        with connection:
            request = connection.recv(65536)
            if behaviour == "gone_after_open" and b'"session.open"' in request:
                # it stops reading before it answers: the command's own request then fails to
                # send (a broken pipe on the socket, not on orcactl's stdout)
                connection.shutdown(socket.SHUT_RD)
                answer = {"jsonrpc": "2.0", "id": json.loads(request)["id"], "result": OPENED}
                connection.sendall(json.dumps(answer).encode() + b"\n")
            if behaviour == "dies_after_open" and b'"session.open"' in request:
                answer = {"jsonrpc": "2.0", "id": json.loads(request)["id"], "result": OPENED}
                connection.sendall(json.dumps(answer).encode() + b"\n")
                connection.recv(65536)  # the command's request: the daemon dies on it
            if behaviour == "reset":  # linger 0: close sends RST, as when the process is killed
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif behaviour == "junk":
                connection.sendall(b"this is not json\n")
            elif behaviour == "silent":  # stopped (SIGSTOP) or stuck: reads, never answers
                connection.recv(65536)  # until the client gives up and closes
            elif behaviour == "wrong_shape":
                connection.sendall(b'{"jsonrpc": "2.0", "id": 1, "result": {"unexpected": 1}}\n')


@pytest.fixture(params=BEHAVIOURS)
def broken_daemon(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "broken.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    thread = threading.Thread(target=_serve, args=(listener, request.param), daemon=True)
    thread.start()
    yield path
    listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    thread.join(timeout=10)


def run_orcactl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    code = exited.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["ping"],
        ["status"],
        ["memory", "list"],
        ["recall", "hello"],
        ["remember", "tabs, not spaces"],
        ["projects"],
        ["jobs"],
    ],
)
def test_a_daemon_that_fails_mid_call_gives_a_message_and_exit_1(
    broken_daemon: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connect, "CALL_TIMEOUT_S", 0.5)  # the silent one: not 30 s per command
    argv = ["--socket", str(broken_daemon), "--no-start", *command]
    if command[0] in ("memory", "recall", "remember"):
        argv += ["--cwd", str(tmp_path)]
    status, err = run_orcactl(capsys, *argv)
    assert status == EXIT_ERROR
    assert err.startswith("orcactl: ") and "orcad" in err
    assert "Traceback" not in err


def test_a_socket_path_too_long_for_the_os_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ("s" * 200 + ".sock")
    status, err = run_orcactl(capsys, "--socket", str(path), "--no-start", "ping")
    assert status == EXIT_NOT_RUNNING  # none can listen there: not running, as status says
    assert err.startswith(f"orcactl: no orcad can listen on {path}: its path is ")


def test_a_daemon_that_never_answers_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    thread = threading.Thread(target=_serve, args=(listener, "silent"), daemon=True)
    thread.start()
    monkeypatch.setattr(connect, "CALL_TIMEOUT_S", 0.5)
    try:
        status, err = run_orcactl(capsys, "--socket", str(path), "--no-start", "ping")
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=10)
    assert status == EXIT_ERROR
    assert err.startswith("orcactl: orcad did not answer within 0.5 s: it may be stopped or stuck")


# --- --json: one document on stdout for a failure too ---------------------------------------

# Every command whose --json prints a result and that needs the daemon (status and doctor
# print a report of their own when it is not running).
NEEDS_THE_DAEMON = [
    ["ping"],
    ["recall", "hello"],
    ["remember", "tabs, not spaces"],
    ["memory", "search", "tabs"],
    ["memory", "list"],
    ["memory", "save", "tabs", "--kind", "fact", "--global", "--yes"],
    ["memory", "update", "mem_" + "0" * 32, "tabs", "--yes"],
    ["memory", "forget", "mem_" + "0" * 32, "--yes"],
    ["memory", "approve", "apr_" + "0" * 32, "--session-id", "s", "--decision", "deny"],
    ["projects"],
    ["inspect"],
    ["jobs"],
    ["jobs", "retry", "job_" + "0" * 32],
    ["forget", "cand_" + "0" * 32],
    ["grants", "list"],
    ["grants", "revoke", "global"],
]


def json_failure(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    """orcactl run in-process: its exit status, the one JSON document on stdout, stderr."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    assert isinstance(exited.value.code, int)
    document = json.loads(out)  # one document, and nothing else
    assert isinstance(document, dict)
    return exited.value.code, document, err


@pytest.mark.parametrize("command", NEEDS_THE_DAEMON, ids=" ".join)
def test_json_reports_a_daemon_that_is_not_running_as_one_document(
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "none.sock"
    status, document, err = json_failure(
        capsys, "--socket", str(missing), "--no-start", *command, "--json"
    )
    assert status == EXIT_NOT_RUNNING
    message = f"orcad is not running (no answer on {missing})"
    assert document == {
        "ok": False,
        "error": {"code": None, "message": message, "data": {"kind": "not_running"}},
    }
    assert err == f"orcactl: {message}\n"  # the human message stays on stderr


def test_json_reports_a_daemon_answering_garbage_as_one_document(
    broken_daemon: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connect, "CALL_TIMEOUT_S", 0.5)  # the silent one
    status, document, err = json_failure(
        capsys, "--socket", str(broken_daemon), "--no-start", "--json", "projects"
    )
    assert status == EXIT_ERROR
    assert document["ok"] is False and document["error"]["code"] is None
    assert document["error"]["data"] == {"kind": "failed"}
    assert err == f"orcactl: {document['error']['message']}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "search", "--limit", "0", "--json"],  # refused by argparse
        ["--json", "nosuch"],
        ["remember", "-", "--json"],  # refused after parsing: stdin holds no text
        ["provider", "test", "-", "--json"],
        ["jobs", "--js", "--state", "bogus"],  # argparse takes --js for --json
        ["memory", "search", "--limit", "0", "--jso"],
    ],
    ids=" ".join,
)
def test_json_reports_bad_usage_as_one_document(
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    status, document, err = json_failure(
        capsys, "--socket", str(tmp_path / "none.sock"), "--no-start", *argv
    )
    assert status == EXIT_USAGE
    assert document["ok"] is False and document["error"]["data"] == {"kind": "usage"}
    assert document["error"]["message"] in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "unknown"),
    [
        (["--bogus", "--json"], "--bogus"),
        (["--js", "--bogus", "--other"], "--bogus --other"),  # argparse takes --js for --json
        (["--bogus", "--jso"], "--bogus"),
        (["--json", "memory", "--bogus"], "--bogus"),  # a group lacking its action
        (["--json", "recall", "--bogus"], "--bogus"),  # a command lacking its PROMPT
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_an_unknown_option_without_a_command_is_named_not_a_missing_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], unknown: str
) -> None:
    # argparse checks for the command first: `orcactl --bogus` said only that COMMAND was
    # required, never which option was wrong
    status, document, err = json_failure(capsys, "--socket", str(tmp_path / "none.sock"), *argv)
    assert status == EXIT_USAGE
    assert document["error"]["data"] == {"kind": "usage"}
    assert document["error"]["message"] == f"unrecognized arguments: {unknown}"
    assert f"error: unrecognized arguments: {unknown}\n" in err
    assert "required" not in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--json"],
        ["--socket=--bogus", "--json"],  # a socket path that looks like an option is a path
        ["--socket", "/tmp/x.sock", "--js"],
    ],
    ids=" ".join,
)
def test_a_line_without_a_command_lists_the_commands(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # it said only "the following arguments are required: COMMAND", not which there are
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    assert exited.value.code == EXIT_USAGE
    assert "error: the following arguments are required: COMMAND (one of: status, ping," in err
    assert "\ncommands:\n  status " in err  # one a line, with what each does, as --help has
    assert "\n  integrate  connect an agent" in err
    assert "unrecognized" not in err
    if argv:  # each of them asks for JSON
        message = json.loads(out)["error"]["message"]
        assert message.startswith("the following arguments are required: COMMAND (one of: ")
        assert "memory, grants" in message and message.endswith("mcp, integrate)")


def test_a_json_word_after_the_options_end_is_text_not_the_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--socket", str(tmp_path / "none.sock"), "--no-start", "remember", "--", "--json"])
    assert exited.value.code == EXIT_NOT_RUNNING
    assert capsys.readouterr().out == ""  # no JSON was asked for
