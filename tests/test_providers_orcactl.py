"""`orcactl provider test`: one in-process extraction with the configured provider."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orcactl.commands import provider as provider_command
from orcactl.connect import CommandError
from tests.fake_openai import (
    FakeOpenAI,
    endless_stream,
    junk,
    ok,
    stall_before_headers,
    streamed,
)
from tests.harness import REPO_ROOT
from tests.test_providers_command import wait_gone

pytestmark = pytest.mark.inprocess

KEY_VARIABLE = "ORCA_TEST_PROVIDER_KEY"
ANSWER = '{"category": "project", "fact": "This repository deploys with `make release`."}'
CORPUS = Path(__file__).parent / "corpus" / "secrets.jsonl"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ORCA_HOME", str(tmp_path))
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    return tmp_path


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as running:
        yield running


def use_openai(home: Path, base_url: str, *, idle: float = 5.0) -> None:
    (home / "config.toml").write_text(
        "[extraction]\n"
        'provider = "openai"\n'
        "timeout_s = 10.0\n"
        "[extraction.openai]\n"
        f'base_url = "{base_url}"\n'
        'model = "tiny-test"\n'
        f'api_key_env = "{KEY_VARIABLE}"\n'
        f"idle_timeout_s = {idle}\n"
        "connect_timeout_s = 2.0\n",
        encoding="utf-8",
    )


def orcactl_provider_test(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="orcactl")
    provider_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["provider", "test", *argv])
    status: int = args.run(args)
    return status


def test_default_heuristic_on_the_built_in_sample(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert orcactl_provider_test() == 0
    out = capsys.readouterr().out
    assert "provider: heuristic (fact-classifier-" in out
    assert "parsed facts: 2" in out
    assert "project   This repository deploys with `make release`." in out
    assert "user      The user prefers concise status updates." in out
    assert "time: " in out


def test_openai_prints_raw_output_facts_and_time(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    use_openai(home, server.base_url)
    server.script(streamed(ANSWER))
    assert orcactl_provider_test("remember that this repository deploys with make release") == 0
    out = capsys.readouterr().out
    assert "provider: openai (tiny-test), prompt extract-v1" in out
    assert f"raw output:\n  {ANSWER}" in out
    assert "parsed facts: 1" in out
    sent = server.requests[0].json()
    assert sent["model"] == "tiny-test"
    assert sent["messages"][1]["content"].endswith(
        "user: remember that this repository deploys with make release"
    )


def test_json_report(home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    use_openai(home, server.base_url)
    server.script(streamed("NOTHING"))
    assert orcactl_provider_test("--json", "what time is it?") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["raw_output"] == "NOTHING"
    assert report["facts"] == []
    assert report["error"] is None
    assert report["elapsed_s"] > 0
    assert report["prompt_version"] == "extract-v1"


@pytest.mark.parametrize("as_json", [False, True])
def test_a_fact_holding_a_secret_is_shown_refused_by_its_kind_not_kept(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    # the merge drops such a fact: the test must not list it among the facts orcad keeps, nor
    # print its value again beside the raw output
    use_openai(home, server.base_url)
    token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    secret = json.dumps({"category": "project", "fact": f"The deploy key is {token}"})
    server.script(streamed(f"{ANSWER}\n{secret}"))
    assert orcactl_provider_test(*(["--json"] if as_json else [])) == 0
    out = capsys.readouterr().out
    if as_json:
        report = json.loads(out)
        assert [fact["fact"] for fact in report["facts"]] == [json.loads(ANSWER)["fact"]]
        assert report["refused"] == [{"category": "project", "kinds": "github_token"}]
    else:
        assert "parsed facts: 1\n  project   This repository deploys" in out
        assert (
            "refused as secrets (orcad would not keep them): 1\n  project   (github_token)" in out
        )
        assert out.count("ghp_a1B2") == 1  # in the raw output only


def test_output_the_parser_rejects_is_exit_1(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    use_openai(home, server.base_url)
    server.script(streamed("Here are the facts: none really."))
    assert orcactl_provider_test() == 1
    captured = capsys.readouterr()
    assert "raw output:\n  Here are the facts: none really." in captured.out
    assert "would be a failed attempt" in captured.err


@pytest.mark.parametrize("as_json", [False, True])
def test_output_past_the_limit_is_shown_cut_to_it_saying_so(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    # 20,000 characters in a server's whole (not streamed) answer, which orcad reads up to
    # four times the limit, were printed whole; the é stands astride the limit
    use_openai(home, server.base_url)
    answer = "x" * 16_383 + "é" + "y" * 3_616
    server.script(ok(answer))
    assert orcactl_provider_test(*(["--json"] if as_json else [])) == 1
    captured = capsys.readouterr()
    assert "yy" not in captured.out and "é" not in captured.out
    if as_json:
        report = json.loads(captured.out)
        assert report["raw_output"] == "x" * 16_383  # cut between characters
        assert report["raw_output_cut_from"] == 20_001
        assert "over the 16384-byte limit" in report["error"]
        return
    assert "  " + "x" * 16_383 + "\n" in captured.out
    assert (
        "  [cut: the output is 20001 bytes, over the 16384-byte limit; only its first 16384 "
        "bytes are shown]\n"
    ) in captured.out
    assert "would be a failed attempt" in captured.err


@pytest.mark.parametrize("as_json", [False, True])
def test_an_answer_holding_a_lone_surrogate_is_shown_escaped_with_the_reason(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    use_openai(home, server.base_url)
    body = b'{"choices": [{"message": {"content": "NOTHING \\ud800"}, "finish_reason": "stop"}]}'
    server.script(junk(body, "application/json"))
    # before: printing the raw output raised UnicodeEncodeError, reported as a bad path
    assert orcactl_provider_test(*(["--json"] if as_json else [])) == 1
    captured = capsys.readouterr()
    if as_json:
        report = json.loads(captured.out)
        assert report["raw_output"] == "NOTHING \\ud800"
        assert report["error"] == (
            "the output would be a failed attempt: output is not valid UTF-8 text"
        )
    else:
        assert "raw output:\n  NOTHING \\ud800" in captured.out
        assert "output is not valid UTF-8 text" in captured.err


def test_protocol_junk_is_exit_1_with_reason(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    use_openai(home, server.base_url)
    server.script(junk())
    assert orcactl_provider_test() == 1
    assert "not JSON" in capsys.readouterr().err


def test_unreachable_endpoint_is_a_clear_error(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI() as stopped:
        url = stopped.base_url  # nothing listens there once the server is closed
    use_openai(home, url)
    assert orcactl_provider_test() == 1
    err = capsys.readouterr().err
    assert f"cannot connect to {url}/chat/completions" in err
    assert f"Is the model server running? extraction.openai.base_url is {url}" in err


def test_a_server_silent_past_idle_timeout_is_answered_with_the_key_to_raise(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """The failure said only that the server was silent, not which setting bounds that."""
    use_openai(home, server.base_url, idle=0.5)
    server.script(stall_before_headers(5.0))
    assert orcactl_provider_test() == 1
    err = capsys.readouterr().err
    assert "was silent for more than 0.5 s" in err
    assert "needs a longer extraction.openai.idle_timeout_s (now 0.5 s)" in err


def test_an_answer_not_done_within_the_timeout_is_answered_with_the_key_to_raise(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    use_openai(home, server.base_url, idle=5.0)
    server.script(endless_stream())  # keep-alive comments, never an answer
    assert orcactl_provider_test("--timeout", "1") == 1
    err = capsys.readouterr().err
    assert "no complete answer from" in err
    assert "needs a longer extraction.timeout_s (now 10 s; this test gave it 1 s" in err


def test_a_command_past_the_timeout_is_answered_with_the_key_to_raise(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "slow.sh"
    program.write_text("#!/bin/sh\nexec sleep 30\n", encoding="utf-8")
    program.chmod(0o700)
    (home / "config.toml").write_text(
        f'[extraction]\nprovider = "command"\n[extraction.command]\nargv = ["{program}"]\n',
        encoding="utf-8",
    )
    assert orcactl_provider_test("--timeout", "0.5") == 1
    err = capsys.readouterr().err
    assert "did not finish within 0.5 s; killed" in err
    assert "needs a longer extraction.timeout_s (now 120 s; this test gave it 0.5 s" in err


def test_a_command_that_cannot_run_is_named_with_what_argv_may_hold(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an absolute path is what the config takes too: the hint said "a program on PATH" only
    missing = tmp_path / "no-such-extractor"
    (home / "config.toml").write_text(
        f'[extraction]\nprovider = "command"\n[extraction.command]\nargv = ["{missing}"]\n',
        encoding="utf-8",
    )
    assert orcactl_provider_test() == 1
    err = capsys.readouterr().err
    assert f"cannot run '{missing}'" in err
    assert "its first word must be a program on PATH or the absolute path of one" in err


def test_unset_key_variable_for_a_hosted_endpoint_is_a_clear_error(home: Path) -> None:
    use_openai(home, "https://api.example.com/v1")
    with pytest.raises(CommandError, match=f"environment variable {KEY_VARIABLE}"):
        orcactl_provider_test()


def test_key_variable_reaches_the_authorization_header(
    home: Path, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_VARIABLE, "sk-local-test-key")
    use_openai(home, server.base_url)
    server.script(streamed("NOTHING"))
    assert orcactl_provider_test() == 0
    assert server.requests[0].headers["authorization"] == "Bearer sk-local-test-key"


def run_provider_test(
    home: Path, cwd: Path | None = None, **variables: str
) -> subprocess.CompletedProcess[str]:
    """`orcactl provider test --json` in a process of its own, with `variables` set."""
    env = {**os.environ, "ORCA_HOME": str(home), "PYTHONPATH": str(REPO_ROOT), **variables}
    return subprocess.run(
        [sys.executable, "-m", "orcactl", "provider", "test", "--json"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_key_pasted_over_two_lines_is_refused_without_showing_it(
    home: Path, server: FakeOpenAI
) -> None:
    """No header can carry a line break: the HTTP library's error quotes the whole header, so
    the key was printed with the failure."""
    use_openai(home, server.base_url)
    done = run_provider_test(home, **{KEY_VARIABLE: "sk-pasted\nkey-0123"})
    assert done.returncode == 1
    assert "key-0123" not in done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert f"the API key in {KEY_VARIABLE} holds a control character" in report["error"]
    assert server.requests == []


@pytest.mark.parametrize("tail", ["?api-key=tok-0123", "#tok-0123"])
def test_a_base_url_with_a_query_is_refused_without_showing_it(
    home: Path, server: FakeOpenAI, tail: str
) -> None:
    """The path was added after the query (`/v1?api-key=.../chat/completions`): every request
    went to the base URL itself, and the query, a token as often as not, was shown."""
    use_openai(home, server.base_url + tail)
    server.script(streamed("NOTHING"))
    done = run_provider_test(home)
    assert done.returncode == 1, done.stdout
    assert "tok-0123" not in done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert "extraction.openai.base_url" in error and "has a query or a fragment" in error
    assert server.requests == []


@pytest.mark.parametrize("program", ["./bin/extract", "bin/extract", "~/bin/extract"])
def test_a_command_given_by_a_relative_path_is_a_config_error(
    home: Path, tmp_path: Path, program: str
) -> None:
    """Run from this directory, `./bin/extract` answered; orcad runs it from its own (`/` when
    orcactl starts it), where it is not, and no shell expands `~`."""
    script = tmp_path / "bin" / "extract"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\ncat >/dev/null\necho NOTHING\n")
    script.chmod(0o755)
    (home / "config.toml").write_text(
        f'[extraction]\nprovider = "command"\n[extraction.command]\nargv = ["{program}"]\n',
        encoding="utf-8",
    )
    done = run_provider_test(home, cwd=tmp_path, HOME=str(tmp_path))
    assert done.returncode == 1, done.stdout
    error = json.loads(done.stdout)["error"]
    assert f"key `extraction.command.argv`: its program '{program}'" in error


def test_a_key_pasted_in_place_of_its_variables_name_is_never_shown(home: Path) -> None:
    """It was quoted as the variable that is not set, by provider test, status and the log."""
    pasted = "sk-proj-Abc123XyZ789secretKEY000"
    (home / "config.toml").write_text(
        '[extraction]\nprovider = "openai"\n[extraction.openai]\n'
        f'base_url = "https://api.example.com/v1"\napi_key_env = "{pasted}"\n',
        encoding="utf-8",
    )
    done = run_provider_test(home)
    assert done.returncode == 1, done.stdout
    assert "secretKEY" not in done.stdout + done.stderr
    assert "key `extraction.openai.api_key_env` is not the name of a variable" in done.stdout


def test_a_key_on_the_commands_line_is_not_shown(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line stands as the model; it was printed whole, key included, while
    `orcactl status` and the job's provenance showed it redacted."""
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdef"
    program = tmp_path / "extract.sh"
    program.write_text("#!/bin/sh\ncat > /dev/null\necho NOTHING\n", encoding="utf-8")
    program.chmod(0o700)
    (home / "config.toml").write_text(
        '[extraction]\nprovider = "command"\n[extraction.command]\n'
        f'argv = ["{program}", "--key", "{key}"]\n',
        encoding="utf-8",
    )
    assert orcactl_provider_test() == 0
    out = capsys.readouterr().out
    assert key not in out
    assert f"provider: command ({program} --key [REDACTED:openai_api_key])" in out
    assert orcactl_provider_test("--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == f"{program} --key [REDACTED:openai_api_key]"


def test_sample_text_is_redacted_before_it_is_sent(
    home: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]
    use_openai(home, server.base_url)
    server.default = streamed("NOTHING")
    for chunk_start in range(0, len(records), 40):
        chunk = records[chunk_start : chunk_start + 40]
        text = "\n".join(record["text"] for record in chunk)
        assert orcactl_provider_test(text) == 0
        body = server.requests[-1].body.decode("utf-8")
        leaked = [r["secret"] for r in chunk if r["secret"] in body]
        assert leaked == []
        assert json.dumps("[REDACTED:")[1:-1] in body
    capsys.readouterr()


def test_bad_config_is_a_clear_error(home: Path) -> None:
    (home / "config.toml").write_text('[extraction]\nprovider = "magic"\n', encoding="utf-8")
    with pytest.raises(CommandError, match=r"extraction\.provider"):
        orcactl_provider_test()


def test_with_json_a_config_it_cannot_use_is_still_one_json_report(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --json promises one JSON object: a script reads `error` whatever went wrong
    for config in ('[extraction]\nprovider = "magic"\n', "[extraction\n"):
        (home / "config.toml").write_text(config, encoding="utf-8")
        assert orcactl_provider_test("--json") == 1
        report = json.loads(capsys.readouterr().out)
        assert str(home / "config.toml") in report["error"]
        assert (report["provider"], report["facts"], report["raw_output"]) == (None, None, None)
    use_openai(home, "https://api.example.com/v1")  # a key variable that is not set
    assert orcactl_provider_test("--json") == 1
    assert KEY_VARIABLE in json.loads(capsys.readouterr().out)["error"]


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])  # a UTF-8 or a C locale
def test_stdin_that_is_not_utf8_is_bad_usage(
    home: Path, monkeypatch: pytest.MonkeyPatch, errors: str
) -> None:
    latin1 = io.TextIOWrapper(io.BytesIO(b"caf\xe9 au lait"), encoding="utf-8", errors=errors)
    monkeypatch.setattr(sys, "stdin", latin1)
    with pytest.raises(CommandError, match="not valid UTF-8") as raised:
        orcactl_provider_test("-")
    assert raised.value.status == 2


def test_ctrl_c_during_a_command_extraction_ends_quietly_and_kills_the_command(
    home: Path, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    script = tmp_path / "slow.py"
    script.write_text(
        "import os, sys, time\n"
        f"open({str(started)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    (home / "config.toml").write_text(
        '[extraction]\nprovider = "command"\ntimeout_s = 60.0\n[extraction.command]\n'
        f"argv = {json.dumps([sys.executable, str(script)])}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "ORCA_HOME": str(home), "PYTHONPATH": str(REPO_ROOT)}
    orcactl = subprocess.Popen(
        [sys.executable, "-m", "orcactl", "provider", "test"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (started.exists() and started.read_text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        orcactl.send_signal(signal.SIGINT)
        _, err = orcactl.communicate(timeout=30)
    finally:
        orcactl.kill()
    assert orcactl.returncode == 130  # before: 1, with a KeyboardInterrupt exception group
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert wait_gone([int(started.read_text())]) == []
