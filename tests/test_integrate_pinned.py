"""ORCA_HOME and ORCA_CONFIG_DIR as `orcactl integrate` saw them, carried into the hooks and the
MCP server it registers: the agents start both with their own environment, and an orcad one of
them starts when none runs must serve that memory, not the default one on the same socket."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from orcactl.agent_configs import Pinned, _hook_event, hook_command
from orcactl.hooks.wire import serving_elsewhere
from protocol.client import Client, DaemonUnavailable
from tests.harness import DaemonProcess, OrcaEnv
from tests.hook_helpers import ORCACTL, ClaudeTranscript
from tests.test_integrate import _commands, _home, _integrate

pytestmark = [pytest.mark.daemon, pytest.mark.slow]


def _agent_environment(orca: OrcaEnv) -> dict[str, str]:
    """What an agent started from another shell (a desktop launcher) gives its hooks and MCP
    servers: a HOME and a PATH, none of the ORCA_* or XDG_* variables integrate ran with."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(_home(orca)),
        "PYTHONPATH": orca.env["PYTHONPATH"],
    }


@pytest.fixture
def stopped_afterwards(orca_env: OrcaEnv) -> Iterator[None]:
    """Stops whatever orcad a hook or MCP server started on the test's socket."""
    yield
    try:
        with Client(str(orca_env.socket), timeout=5) as client:
            pid = client.call("daemon.ping").pid
    except DaemonUnavailable:  # nothing answers: nothing to stop
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while orca_env.socket.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _default_home(orca: OrcaEnv) -> Path:
    """Where an orcad started without ORCA_HOME would keep its memory."""
    return _home(orca) / ".orca"


def test_integrate_writes_the_home_and_config_dir_absolute_into_every_hook_and_the_server(
    orca_env: OrcaEnv,
) -> None:
    codex_home = orca_env.root / "codex-home"
    codex_home.mkdir()
    env = {
        "CODEX_HOME": str(codex_home),
        "ORCA_HOME": "homes/orca",  # relative: to where integrate runs
        "ORCA_CONFIG_DIR": "~/deliberate",
    }
    for agent in ("claude-code", "codex"):
        done = _integrate(orca_env, agent, env=env, cwd=orca_env.root)
        assert done.returncode == 0, done.stderr
    home = orca_env.root / "homes" / "orca"
    config_dir = _home(orca_env) / "deliberate"
    claude = json.loads((_home(orca_env) / ".claude.json").read_text())["mcpServers"]["orca"]
    codex = tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["orca"]
    for args in (claude["args"], codex["args"]):
        assert args[args.index("--home") + 1] == str(home)
        assert args[args.index("--config-dir") + 1] == str(config_dir)
    settings = json.loads((_home(orca_env) / ".claude" / "settings.json").read_text())
    hooks = json.loads((codex_home / "hooks.json").read_text())
    for written in (settings, hooks):
        for event in written["hooks"]:
            [command] = _commands(written, event)
            words = shlex.split(command)
            assert words[words.index("--home") + 1] == str(home)
            assert words[words.index("--config-dir") + 1] == str(config_dir)
    # and taken out again by --remove, as orca's own
    for agent in ("claude-code", "codex"):
        removed = _integrate(orca_env, agent, "--remove", env=env, cwd=orca_env.root)
        assert removed.returncode == 0, removed.stderr
    # (files integrate made, left empty, are deleted)
    assert not (_home(orca_env) / ".claude" / "settings.json").exists()
    assert not (codex_home / "hooks.json").exists()


def test_without_orca_home_set_integrate_pins_nothing_but_the_socket(orca_env: OrcaEnv) -> None:
    env = {k: v for k, v in orca_env.env.items() if k not in ("ORCA_HOME", "ORCA_CONFIG_DIR")}
    done = subprocess.run(
        [ORCACTL, "integrate", "claude-code"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    settings = json.loads((_home(orca_env) / ".claude" / "settings.json").read_text())
    for event in settings["hooks"]:
        assert _commands(settings, event) == [
            f"{ORCACTL} hook claude-code {event} --socket {orca_env.socket}"
        ]


def test_a_written_hook_starts_orcad_over_the_memory_integrate_was_given(
    orca_env: OrcaEnv, tmp_path: Path, stopped_afterwards: None
) -> None:
    assert _integrate(orca_env, "claude-code").returncode == 0
    settings = json.loads((_home(orca_env) / ".claude" / "settings.json").read_text())
    [command] = _commands(settings, "SessionStart")
    project = tmp_path / "repo"
    project.mkdir()
    log = ClaudeTranscript(
        tmp_path / "transcript.jsonl", "0b7c5a52-1111-4c1e-9a7e-5f1d2e3c4b5a", str(project)
    )
    started = subprocess.run(  # as Claude Code runs a hook: the command, through a shell
        ["/bin/sh", "-c", command],
        input=json.dumps(log.payload("SessionStart", source="startup")),
        capture_output=True,
        text=True,
        env=_agent_environment(orca_env),
        cwd=project,
        timeout=60,
    )
    assert started.returncode == 0, started.stderr
    assert started.stderr == ""
    assert (orca_env.memory_root / "orcad.pid").exists()  # the orcad it started holds this home
    assert (orca_env.home / "orcad.log").exists()
    assert not _default_home(orca_env).exists()


async def _save_through_mcp(
    orca: OrcaEnv, entry: dict[str, Any], tmp_path: Path, env: dict[str, str], content: str
) -> None:
    """Start the MCP server `integrate` registered (`entry`) as an agent would, with `env`, by
    the MCP SDK's stdio client, and save one workspace record through it."""
    project = tmp_path / "repo"
    project.mkdir()
    params = StdioServerParameters(
        command=entry["command"],
        args=[*entry["args"], "--cwd", str(project), "--mode", "auto"],
        env=env,
    )
    with open(orca.root / "mcp-stderr.log", "a") as errlog:  # noqa: ASYNC230  (a local file)
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            saved = await session.call_tool(
                "memory_manage",
                {"action": "save", "content": content, "kind": "workflow", "is_global": False},
            )
            assert not saved.is_error, saved.content


async def test_the_written_mcp_server_starts_orcad_over_the_memory_integrate_was_given(
    orca_env: OrcaEnv, tmp_path: Path, stopped_afterwards: None
) -> None:
    assert _integrate(orca_env, "claude-code").returncode == 0
    entry = json.loads((_home(orca_env) / ".claude.json").read_text())["mcpServers"]["orca"]
    await _save_through_mcp(
        orca_env, entry, tmp_path, _agent_environment(orca_env), "We deploy with make ship"
    )
    assert (orca_env.memory_root / "orcad.pid").exists()
    assert orca_env.deliberate_db.exists()  # the record went to the given config dir
    assert not _default_home(orca_env).exists()
    assert not (_home(orca_env) / ".config" / "orcacode").exists()


@pytest.mark.parametrize(
    "command",
    [
        "orcactl hook codex Stop --home /h",
        "orcactl hook codex Stop --config-dir /c --socket /s --home /h",
        "'/opt/orca tools/orcactl' hook codex Stop --socket /s --home '/my home'",
        "orcactl hook codex Stop --socket=/s --home=/h",  # as one might write them by hand
    ],
)
def test_a_hook_with_pinned_paths_is_recognised_as_orcas(command: str) -> None:
    assert _hook_event(command, "codex") == "Stop"


@pytest.mark.parametrize(
    "command",
    [
        "orcactl hook codex Stop --home",  # a dangling option
        "orcactl hook codex Stop --home /h --home /i",  # given twice
        "orcactl hook codex Stop --home /h --verbose /x",  # another option: the user's
        "orcactl hook codex Stop --home /h; audit.sh",
        "orcactl hook codex Stop --home=/h --home /i",
        "orcactl hook codex Stop --verbose=1",
    ],
)
def test_a_hook_command_of_another_shape_is_the_users(command: str) -> None:
    assert _hook_event(command, "codex") is None


def test_hook_command_quotes_each_pinned_path() -> None:
    command = hook_command(
        "/opt/orca tools/orcactl", "codex", "Stop", Pinned("/run/o.sock", "/my home", None)
    )
    assert shlex.split(command) == [
        "/opt/orca tools/orcactl",
        "hook",
        "codex",
        "Stop",
        "--socket",
        "/run/o.sock",
        "--home",
        "/my home",
    ]
    assert _hook_event(command, "codex") == "Stop"


def _doctor_findings(
    orca: OrcaEnv, env: dict[str, str], check: str, holding: str
) -> list[dict[str, object]]:
    """doctor's findings of `check` whose detail holds `holding`, run with `env` over the
    test's environment."""
    run = subprocess.run(
        [ORCACTL, "--no-start", "doctor", "--json"],
        capture_output=True,
        text=True,
        env={**orca.env, **env},
        timeout=60,
    )
    findings = json.loads(run.stdout)["findings"]
    return [f for f in findings if f["check"] == check and holding in str(f["detail"])]


def _agent_findings(orca: OrcaEnv, env: dict[str, str]) -> list[dict[str, object]]:
    return _doctor_findings(orca, env, "agents", "claude-code")


@pytest.mark.parametrize("variable", ["ORCA_HOME", "ORCA_CONFIG_DIR"])
def test_doctor_names_hooks_registered_for_another_memory(orca_env: OrcaEnv, variable: str) -> None:
    assert _integrate(orca_env, "claude-code").returncode == 0
    [same] = _agent_findings(orca_env, {})
    assert same["status"] == "ok", same
    other = orca_env.root / "other"
    [moved] = _agent_findings(orca_env, {variable: str(other)})
    option = "--home" if variable == "ORCA_HOME" else "--config-dir"
    pinned = orca_env.home if variable == "ORCA_HOME" else orca_env.config_dir
    assert moved["status"] == "problem"
    assert moved["detail"] == (
        f"claude-code: registered for another memory: {option} {pinned}, where {variable} "
        f"here gives {other}"
    )
    assert moved["fix"] == "run `orcactl integrate claude-code`"


def test_doctor_names_hooks_that_pin_no_home_when_this_environment_sets_one(
    orca_env: OrcaEnv,
) -> None:
    # as every registration made before --home was written looks: its hooks would start orcad
    # over the default memory, not this environment's
    unset = {k: v for k, v in orca_env.env.items() if k not in ("ORCA_HOME", "ORCA_CONFIG_DIR")}
    done = subprocess.run(
        [ORCACTL, "integrate", "claude-code"], capture_output=True, text=True, env=unset, timeout=60
    )
    assert done.returncode == 0, done.stderr
    [found] = _agent_findings(orca_env, {})
    assert found["status"] == "problem"
    assert found["detail"] == (
        f"claude-code: registered for another memory: no --home, so an orcad it starts uses "
        f"{_default_home(orca_env)}, where ORCA_HOME here gives {orca_env.home}"
    )


def test_doctor_takes_a_symlinked_spelling_of_the_pinned_home_for_the_same(
    orca_env: OrcaEnv,
) -> None:
    assert _integrate(orca_env, "claude-code").returncode == 0
    link = orca_env.root / "link-to-home"
    link.symlink_to(orca_env.home)
    [same] = _agent_findings(orca_env, {"ORCA_HOME": f"{link}/"})
    assert same["status"] == "ok", same


def test_doctor_names_a_running_orcad_that_serves_another_memory(
    orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # the socket is shared: an orcad started with another ORCA_HOME answers every command here
    [same] = _doctor_findings(orca_env, {}, "daemon", "serves")
    assert same["status"] == "ok", same
    other = orca_env.root / "other"
    [moved] = _doctor_findings(orca_env, {"ORCA_HOME": str(other)}, "daemon", "serves")
    assert moved["status"] == "problem"
    assert moved["detail"] == (
        f"orcad pid {daemon.proc.pid} serves {orca_env.memory_root}, but ORCA_HOME here gives "
        f"{other / 'memory'}"
    )
    assert f"kill {daemon.proc.pid}" in str(moved["fix"])


def test_status_warns_of_a_running_orcad_that_serves_another_memory(
    orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # `orcactl remember` here wrote into the other memory with exit 0, and only doctor said so
    def status(env: dict[str, str], *json_flag: str) -> str:
        run = subprocess.run(
            [ORCACTL, "--no-start", "status", *json_flag],
            capture_output=True,
            text=True,
            env={**orca_env.env, **env},
            timeout=60,
            check=True,
        )
        return run.stdout

    assert json.loads(status({}, "--json"))["memory_elsewhere"] is None
    assert "Warning: this orcad serves" not in status({})
    other = orca_env.root / "other"
    moved = {"ORCA_CONFIG_DIR": str(other)}
    assert json.loads(status(moved, "--json"))["memory_elsewhere"] == {
        "variable": "ORCA_CONFIG_DIR",
        "served": str(orca_env.deliberate_db),
        "here": str(other / "memory.sqlite3"),
    }
    assert (
        f"Warning: this orcad serves {orca_env.deliberate_db}, but ORCA_CONFIG_DIR here gives "
        f"{other / 'memory.sqlite3'}"
    ) in status(moved)


def _integrated_without_a_socket(orca: OrcaEnv) -> dict[str, str]:
    """integrate run where ORCA_SOCKET is unset (the usual case: the socket is the runtime
    directory's), and the environment of an agent that gives its MCP server and hooks another
    runtime directory than the one orcad serves in (Codex passes no XDG_RUNTIME_DIR)."""
    env = {k: v for k, v in orca.env.items() if k != "ORCA_SOCKET"}
    done = subprocess.run(
        [ORCACTL, "integrate", "claude-code"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    elsewhere = orca.root / "another-runtime"
    elsewhere.mkdir(mode=0o700)
    return {**_agent_environment(orca), "XDG_RUNTIME_DIR": str(elsewhere)}


async def test_an_mcp_server_with_another_runtime_directory_reaches_the_orcad_of_its_memory(
    orca_env: OrcaEnv, daemon: DaemonProcess, tmp_path: Path
) -> None:
    # the real codex started `orcactl mcp` so: it looked for orcad on another socket, started
    # one, which exited at once naming the one serving this memory, and every tool call failed
    agent_env = _integrated_without_a_socket(orca_env)
    entry = json.loads((_home(orca_env) / ".claude.json").read_text())["mcpServers"]["orca"]
    assert "--socket" not in entry["args"]
    await _save_through_mcp(orca_env, entry, tmp_path, agent_env, "We ship with make ship")
    with contextlib.closing(sqlite3.connect(orca_env.deliberate_db)) as db:
        kept = db.execute("SELECT content FROM memories").fetchall()
    assert kept == [("We ship with make ship",)]
    assert not (orca_env.root / "another-runtime" / "orca").exists()  # no second orcad tried
    assert json.loads((orca_env.memory_root / "orcad.pid").read_text())["socket"] == str(
        orca_env.socket
    )


def test_a_hook_with_another_runtime_directory_reaches_the_orcad_of_its_memory(
    orca_env: OrcaEnv, daemon: DaemonProcess, tmp_path: Path
) -> None:
    agent_env = _integrated_without_a_socket(orca_env)
    settings = json.loads((_home(orca_env) / ".claude" / "settings.json").read_text())
    [command] = _commands(settings, "SessionStart")
    project = tmp_path / "repo"
    project.mkdir()
    log = ClaudeTranscript(
        tmp_path / "transcript.jsonl", "0b7c5a52-2222-4c1e-9a7e-5f1d2e3c4b5a", str(project)
    )
    started = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(log.payload("SessionStart", source="startup")),
        capture_output=True,
        text=True,
        env=agent_env,
        cwd=project,
        timeout=60,
    )
    assert (started.returncode, started.stderr) == (0, "")
    assert any(e.get("event") == "session.opened" for e in daemon.log_events())
    assert not (orca_env.root / "another-runtime" / "orca").exists()


def _listening(directory: Path) -> tuple[socket.socket, str]:
    directory.mkdir(mode=0o700, exist_ok=True)
    path = str(directory / "orcad.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    return listener, path


def _pid_file(orca: OrcaEnv, content: bytes | str) -> None:
    orca.memory_root.mkdir(parents=True, exist_ok=True)
    path = orca.memory_root / "orcad.pid"
    path.unlink(missing_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage",
        b'{"pid": 1}',
        b'{"pid": 1, "socket": "relative.sock"}',
        b"[1, 2]",
        b"[" * 60_000,  # deeper than the JSON reader goes
    ],
)
def test_a_pid_file_that_names_no_socket_sends_no_client_elsewhere(
    orca_env: OrcaEnv, content: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pid_file(orca_env, content)
    monkeypatch.setenv("ORCA_HOME", str(orca_env.home))
    assert serving_elsewhere("/run/orca/orcad.sock") is None


def test_only_a_live_orcad_of_this_user_in_a_private_directory_is_reached(
    orca_env: OrcaEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCA_HOME", str(orca_env.home))
    listener, path = _listening(tmp_path / "runtime")
    with listener:
        _pid_file(orca_env, json.dumps({"pid": os.getpid(), "socket": path}))
        assert serving_elsewhere("/elsewhere.sock") == path
        assert serving_elsewhere(path) is None  # the one already tried
        # a pid file left by an orcad that is gone (a crash, a power cut)
        gone = subprocess.Popen(["true"])
        gone.wait()
        _pid_file(orca_env, json.dumps({"pid": gone.pid, "socket": path}))
        assert serving_elsewhere("/elsewhere.sock") is None
        # a directory others may write to: the socket there may be anyone's
        _pid_file(orca_env, json.dumps({"pid": os.getpid(), "socket": path}))
        (tmp_path / "runtime").chmod(0o777)
        assert serving_elsewhere("/elsewhere.sock") is None


def test_a_fifo_at_the_pid_file_does_not_block_a_client(
    orca_env: OrcaEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    orca_env.memory_root.mkdir(parents=True, exist_ok=True)
    os.mkfifo(orca_env.memory_root / "orcad.pid")
    monkeypatch.setenv("ORCA_HOME", str(orca_env.home))
    started = time.monotonic()
    assert serving_elsewhere("/elsewhere.sock") is None
    assert time.monotonic() - started < 1


def test_the_peer_of_a_connection_to_this_users_orcad_is_this_user() -> None:
    from orcactl.hooks.wire import peer_is_this_user

    first, second = socket.socketpair(socket.AF_UNIX)
    with first, second:
        assert peer_is_this_user(first.fileno())


@pytest.mark.skipif(os.getuid() != 0, reason="listening as another user needs root")
def test_a_listener_of_another_user_is_told_apart_on_the_connection() -> None:
    # a socket's path can be swapped between its checks and the connect: the connection's own
    # peer decides (SO_PEERCRED gives the credentials the listener had when it listened)
    from orcactl.hooks.wire import peer_is_this_user

    shared = Path(tempfile.mkdtemp(prefix="orca-peer-"))  # where the other user can reach
    shared.chmod(0o777)
    path = shared / "orcad.sock"
    script = (
        "import os, socket, sys, time\n"
        "os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\n"
        "print('ready', flush=True); c, _ = s.accept(); time.sleep(5)\n"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdout.readline() == "ready\n"
        probe = socket.socket(socket.AF_UNIX)
        probe.connect(str(path))
        with probe:
            assert not peer_is_this_user(probe.fileno())
    finally:
        other.kill()
        other.communicate()
        shutil.rmtree(shared)
