"""The command provider with real subprocesses: output, failures, timeouts, no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from orcad import limits
from orcad.config import CommandConfig, ExtractionConfig
from orcad.providers import ProviderConfigError, build_provider, command_launcher, prompt
from orcad.providers.base import ProviderError
from orcad.providers.command import STDERR_TAIL_CHARS, CommandProvider
from tests.harness import process_gone

pytestmark = pytest.mark.inprocess

SOURCE = "user: I prefer concise status updates"
ANSWER = '{"category": "user", "fact": "The user prefers concise status updates."}'


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def wait_gone(pids: list[int], timeout: float = 5.0) -> list[int]:
    """The pids still alive after `timeout` (the kernel delivers SIGKILL asynchronously)."""
    deadline = time.monotonic() + timeout
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if not process_gone(pid)]
        if alive:
            time.sleep(0.02)
    return alive


async def test_prompt_goes_to_stdin_and_stdout_is_the_answer(tmp_path: Path) -> None:
    seen = tmp_path / "stdin.txt"
    code = (
        "import sys, pathlib; data = sys.stdin.read(); "
        f"pathlib.Path({str(seen)!r}).write_text(data); print({ANSWER!r})"
    )
    provider = build_provider(
        ExtractionConfig(provider="command", command=CommandConfig(argv=python(code))), {}
    )
    output = await provider.extract(SOURCE, deadline=trio.current_time() + 20)
    assert output == ANSWER + "\n"
    assert seen.read_text() == prompt.render_text(SOURCE)
    assert provider.name == "command"


async def test_non_zero_exit_records_the_end_of_stderr() -> None:
    code = (
        "import sys; sys.stdin.read(); "
        "sys.stderr.write('noise line\\n' * 500 + 'model not found: tiny\\n'); sys.exit(3)"
    )
    with pytest.raises(ProviderError) as caught:
        await CommandProvider(python(code)).extract(SOURCE, deadline=trio.current_time() + 20)
    message = caught.value.message
    assert "exited with status 3" in message
    assert message.endswith("model not found: tiny")
    assert len(message) < 700


async def test_non_zero_exit_without_stderr_records_the_end_of_stdout() -> None:
    """`claude -p` not logged in exits 1 with "Not logged in · Please run /login" on stdout and
    nothing on stderr: the failure said only "(no stderr)", in `orcactl provider test`, the
    job's errors and recent errors alike, and no one could tell why extraction failed."""
    code = (
        "import sys; sys.stdin.read(); "
        f"print('noise ' * 300 + 'Not logged in · Please run /login {TOKEN}'); sys.exit(1)"
    )
    with pytest.raises(ProviderError) as caught:
        await CommandProvider(python(code)).extract(SOURCE, deadline=trio.current_time() + 20)
    message = caught.value.message
    assert "exited with status 1: nothing on stderr; its stdout ends: " in message
    assert "Not logged in · Please run /login" in message
    assert TOKEN not in message and len(message) < 700  # redacted and bounded as stderr is
    silent = "import sys; sys.stdin.read(); sys.exit(2)"
    with pytest.raises(ProviderError, match=r"exited with status 2: \(no stderr\)$"):
        await CommandProvider(python(silent)).extract(SOURCE, deadline=trio.current_time() + 20)


TOKEN = "ghp_" + "Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA9eK2"


async def stderr_message(stderr: str) -> str:
    code = f"import sys; sys.stdin.read(); sys.stderr.write({stderr!r}); sys.exit(1)"
    with pytest.raises(ProviderError) as caught:
        await CommandProvider(python(code)).extract(SOURCE, deadline=trio.current_time() + 20)
    return caught.value.message


async def test_a_secret_in_stderr_is_redacted_before_the_end_is_kept() -> None:
    message = await stderr_message(f"Error: bad credentials {TOKEN} " + "y" * 461)
    assert "Qm8v" not in message  # before: all but the token's first 10 characters were kept
    assert message.endswith("[REDACTED:github_token] " + "y" * 461)


async def test_the_end_of_stderr_keeps_no_half_marker() -> None:
    message = await stderr_message(f"{TOKEN} " + "y" * (STDERR_TAIL_CHARS - 10))
    assert message.endswith(": … " + "y" * (STDERR_TAIL_CHARS - 10))


async def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    code = (
        "import os, subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}'); "
        "time.sleep(60)"
    )
    with pytest.raises(ProviderError, match="did not finish within"):
        await CommandProvider(python(code)).extract(SOURCE, deadline=trio.current_time() + 2.0)
    leader, grandchild = map(int, pids.read_text().split())
    assert wait_gone([leader, grandchild]) == []


async def test_helper_holding_stdout_after_the_leader_exits_is_killed_too(tmp_path: Path) -> None:
    # the command answered and exited: its answer stands, though a helper it started still
    # holds the pipes open, and the helper goes with its group
    pids = tmp_path / "pids"
    code = (
        "import subprocess, sys; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pids)!r}, 'w').write(str(child.pid)); print('NOTHING')"
    )
    started = trio.current_time()
    answer = await CommandProvider(python(code)).extract(SOURCE, deadline=started + 30.0)
    assert answer == "NOTHING\n"
    assert wait_gone([int(pids.read_text())]) == []
    # and a helper that fails the command still leaves its end of stderr with the failure
    failing = (
        "import subprocess, sys; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print('bad model name', file=sys.stderr); sys.exit(3)"
    )
    with pytest.raises(ProviderError, match="exited with status 3: bad model name"):
        await CommandProvider(python(failing)).extract(SOURCE, deadline=trio.current_time() + 30)


async def test_cancellation_kills_the_group_and_propagates(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    code = f"import os, time; open({str(pids)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    with trio.move_on_after(1.5) as scope:
        await CommandProvider(python(code)).extract(SOURCE, deadline=trio.current_time() + 30)
    assert scope.cancelled_caught
    assert wait_gone([int(pids.read_text())]) == []


async def test_a_command_killed_by_a_signal_is_reported_so() -> None:
    # the launcher between orcad and the command dies of the same signal
    with pytest.raises(ProviderError, match="'sh' was killed by signal 15"):
        await CommandProvider(["sh", "-c", "kill -TERM $$"]).extract(
            SOURCE, deadline=trio.current_time() + 20
        )


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
async def test_a_signal_to_the_whole_group_is_the_command_s_to_answer(name: str) -> None:
    # a service manager stopping everything signals the launcher too: the command's answer to
    # it is what counts (a launcher that did not ignore them would end with a KeyboardInterrupt
    # at SIGINT, killed at SIGHUP)
    code = (
        "import os, signal, sys; sys.stdin.read(); "
        f"signal.signal(signal.{name}, lambda *_: (print('NOTHING'), sys.exit(0))); "
        f"os.killpg(0, signal.{name}); signal.pause()"
    )
    output = await CommandProvider(python(code)).extract(SOURCE, deadline=trio.current_time() + 20)
    assert output == "NOTHING\n"


async def test_the_command_starts_with_no_signal_ignored() -> None:
    # an ignored signal stays ignored across exec: SIGPIPE and SIGXFSZ (ignored by Python),
    # SIGTERM (by the launcher) and glibc's internal 32 and 33 (by its posix_spawn) must not be
    output = await CommandProvider(["grep", "SigIgn", "/proc/self/status"]).extract(
        SOURCE, deadline=trio.current_time() + 20
    )
    ignored = int(output.split()[1], 16)
    for number in (signal.SIGPIPE, signal.SIGTERM, signal.SIGXFSZ, 32, 33):
        assert not ignored & (1 << (number - 1)), number


# Stands in for orcad: it starts the launcher as orcad does (a new session) and waits to be
# killed. "-c" runs the launcher with no pidfd_open, as on macOS or where a sandbox refuses it.
STAND_IN = """import os, subprocess, sys
launcher, watch, command = sys.argv[1], sys.argv[2], sys.argv[3:]
run = [launcher]
if watch == "parent pid":
    run = ["-c", "import os, runpy, sys; del os.pidfd_open; sys.argv[0] = %r; "
           "runpy.run_path(sys.argv[0], run_name='__main__')" % launcher]
subprocess.Popen([sys.executable, "-I", "-S", *run, str(os.getpid()), *command],
                 start_new_session=True, stdin=subprocess.DEVNULL)
os.read(0, 1)
"""
# The command, and a helper of it that ignores SIGTERM; the helper writes both pids.
HELPER = """import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(f"{os.getppid()} {os.getpid()}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


@pytest.mark.parametrize("watch", ["pidfd", "parent pid"])
def test_the_group_ends_when_orcad_dies(tmp_path: Path, watch: str) -> None:
    pids_file = tmp_path / "pids"
    command = [
        sys.executable,
        "-c",
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {HELPER!r}, {str(pids_file)!r}]); "
        "time.sleep(600)",
    ]
    launcher = command_launcher.__file__
    with subprocess.Popen(
        [sys.executable, "-c", STAND_IN, launcher, watch, *command], stdin=subprocess.PIPE
    ) as stand_in:
        deadline = time.monotonic() + 20
        while not pids_file.exists():
            assert time.monotonic() < deadline and stand_in.poll() is None
            time.sleep(0.02)
        pids = [int(pid) for pid in pids_file.read_text().split()]
        try:
            stand_in.kill()
            stand_in.wait()
            started = time.monotonic()
            assert wait_gone(pids, timeout=5.0) == []
            # the command at SIGTERM, its helper at the SIGKILL GRACE_S later
            assert time.monotonic() - started >= command_launcher.GRACE_S - 0.1
        finally:
            for pid in pids:
                if not process_gone(pid):
                    os.kill(pid, signal.SIGKILL)


def test_the_launcher_runs_nothing_once_orcad_is_gone(tmp_path: Path) -> None:
    # started too late: its parent is not the orcad it was told to watch
    marker = tmp_path / "ran"
    launched = subprocess.run(
        [sys.executable, "-I", "-S", command_launcher.__file__, "1", "touch", str(marker)],
        check=False,
    )
    assert launched.returncode == command_launcher.CANNOT_RUN_STATUS
    assert not marker.exists()


async def test_missing_executable_is_a_failed_attempt(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-llm")
    with pytest.raises(ProviderError, match="cannot run"):
        await CommandProvider([missing]).extract(SOURCE, deadline=trio.current_time() + 5)


async def test_output_past_the_limit_is_refused_and_the_command_killed() -> None:
    code = "import sys, time; sys.stdout.write('x' * 100000); sys.stdout.flush(); time.sleep(60)"
    with pytest.raises(ProviderError, match=f"more than {limits.EXTRACTOR_OUTPUT_MAX_BYTES}"):
        await CommandProvider(python(code)).extract(SOURCE, deadline=trio.current_time() + 20)


async def test_output_that_is_not_utf8_fails() -> None:
    code = "import sys; sys.stdin.read(); sys.stdout.buffer.write(b'\\xff\\xfe')"
    with pytest.raises(ProviderError, match="not UTF-8"):
        await CommandProvider(python(code)).extract(SOURCE, deadline=trio.current_time() + 20)


async def test_command_that_ignores_its_input_still_answers() -> None:
    code = "import os; os.close(0); print('NOTHING')"
    big_source = "user: " + "word " * (limits.SOURCE_MAX_BYTES // 5)
    output = await CommandProvider(python(code)).extract(
        big_source, deadline=trio.current_time() + 20
    )
    assert output.strip() == "NOTHING"


@pytest.mark.parametrize("argv", [["llm\x00"], ["llm", "-m", "tiny\x00model"]])
def test_a_command_line_holding_a_nul_is_a_config_error(argv: list[str]) -> None:
    # before: ValueError (embedded null byte) from every attempt, then the job exhausted
    config = ExtractionConfig(provider="command", command=CommandConfig(argv=argv))
    with pytest.raises(ProviderConfigError, match=r"extraction\.command\.argv"):
        build_provider(config, {})


def test_model_is_the_command_line() -> None:
    assert CommandProvider(["llm", "-m", "tiny"]).model == "llm -m tiny"
