"""`orcactl mcp` driven by the MCP SDK's own client over stdio, against a real daemon."""

from __future__ import annotations

import argparse
import json
import shlex
import socket
import struct
import subprocess
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.mcpserver.exceptions import ToolError

from orcactl.mcp_server import DaemonSession
from protocol.client import Client, DaemonUnavailable
from tests.harness import DaemonProcess, OrcaEnv
from tests.hook_helpers import ORCACTL, ClaudeTranscript, run_hook

# slow: each test starts the server process (the SDK imports slowly)
pytestmark = [pytest.mark.daemon, pytest.mark.slow]

Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "repo"
    project.mkdir(exist_ok=True)
    return project


@asynccontextmanager
async def mcp_session(
    orca: OrcaEnv,
    cwd: Path,
    *args: str,
    elicit: Elicit | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=ORCACTL, args=["mcp", "--cwd", str(cwd), *args], env={**orca.env, **(env or {})}
    )
    with open(orca.root / "mcp-stderr.log", "a") as errlog:  # noqa: ASYNC230  (a local file)
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, elicitation_callback=elicit) as session,
        ):
            await session.initialize()
            yield session


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def _approve_as_printed(text: str, env: dict[str, str], *extra: str) -> None:
    """Run, as a user would in a shell with `env`, the approval command a tool answer printed
    (a shell word each, as `shlex` splits them)."""
    command = shlex.split(text[text.index("orcactl memory approve") :])
    approved = await trio.run_process(
        [ORCACTL, *command[1:], *extra],
        capture_stdout=True,
        capture_stderr=True,
        env=env,
        check=False,
    )
    assert approved.returncode == 0, approved.stderr


def _records(daemon: DaemonProcess, cwd: Path) -> list[Any]:
    with daemon.client() as client:
        opened = client.call("session.open", {"cwd": str(cwd)})
        ids = {"session_id": opened.session_id, "epoch": opened.epoch}
        return list(client.call("memory.search", {**ids, "limit": 20}).records)


def _answer(decision: str | None) -> Elicit:
    async def elicit(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert "Allow this memory change?" in params.message
        if decision is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": decision})

    return elicit


async def test_tools_and_their_schemas(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    async with mcp_session(orca_env, _project(tmp_path)) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"memory_search", "memory_manage", "remember", "recall"}
    search = tools["memory_search"]
    assert search.annotations is not None and search.annotations.read_only_hint is True
    assert tools["memory_manage"].annotations.read_only_hint is False  # type: ignore[union-attr]
    assert set(search.input_schema["properties"]) == {"query", "limit"}
    manage = tools["memory_manage"].input_schema
    assert set(manage["properties"]) == {"action", "id", "content", "kind", "is_global"}
    assert manage["required"] == ["action"]
    for name in ("memory_manage", "remember"):
        assert "secrets" in (tools[name].description or "")  # the write rule travels with it


async def test_every_tool_happy_path_in_auto_mode(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    project = _project(tmp_path)
    async with mcp_session(orca_env, project, "--mode", "auto") as session:
        saved = await session.call_tool(
            "memory_manage",
            {
                "action": "save",
                "content": "Release checks use make release-check",
                "kind": "workflow",
                "is_global": False,
            },
        )
        assert not saved.is_error, _text(saved)
        found = await session.call_tool("memory_search", {"query": "release checks"})
        records = json.loads(_text(found))
        assert [r["content"] for r in records] == ["Release checks use make release-check"]
        listed = await session.call_tool("memory_search", {})
        assert "make release-check" in _text(listed)
        kept = await session.call_tool(
            "remember", {"text": "The API is versioned under /v2", "scope": "project"}
        )
        assert not kept.is_error and "project fact" in _text(kept)
        recalled = await session.call_tool("recall", {"prompt": "how do I run the release checks?"})
        assert "make release-check" in _text(recalled)
        forgot = await session.call_tool(
            "memory_manage", {"action": "forget", "id": records[0]["id"]}
        )
        assert not forgot.is_error, _text(forgot)
    assert _records(daemon, project) == []


@pytest.mark.parametrize(
    ("decision", "applied"),
    [("allow_once", True), ("allow_workspace", True), (None, False)],
)
async def test_normal_mode_asks_the_user_through_elicitation(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess, decision: str | None, applied: bool
) -> None:
    project = _project(tmp_path)
    async with mcp_session(orca_env, project, elicit=_answer(decision)) as session:
        result = await session.call_tool(
            "memory_manage",
            {
                "action": "save",
                "content": "I prefer small pull requests",
                "kind": "preference",
                "is_global": True,
            },
        )
        assert result.is_error is (not applied), _text(result)
        if decision == "allow_workspace":  # later changes in this workspace need no prompt
            again = await session.call_tool(
                "memory_manage",
                {
                    "action": "save",
                    "content": "We tag releases as vX.Y.Z",
                    "kind": "workflow",
                    "is_global": False,
                },
            )
            assert not again.is_error, _text(again)
    contents = sorted(r.content for r in _records(daemon, project))
    expected = {"allow_once": ["I prefer small pull requests"], None: []}
    if decision == "allow_workspace":
        assert contents == ["I prefer small pull requests", "We tag releases as vX.Y.Z"]
    else:
        assert contents == expected[decision]


async def test_the_prompt_for_a_global_change_says_what_a_workspace_grant_covers(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    asked: list[str] = []

    async def grant_workspace(_context: Any, params: types.ElicitRequestParams) -> Any:
        schema = getattr(params, "requested_schema", {})
        asked.append(params.message + json.dumps(schema))
        return types.ElicitResult(action="accept", content={"decision": "allow_workspace"})

    here, elsewhere = _project(tmp_path), tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with mcp_session(orca_env, here, elicit=grant_workspace) as session:
        saved = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": "I prefer rebase", "kind": "fact", "is_global": True},
        )
        assert not saved.is_error, _text(saved)
    # what the answer granted: global changes from another workspace apply without asking
    with daemon.client() as client:
        opened = client.call("session.open", {"cwd": str(elsewhere)})
        ids = {"session_id": opened.session_id, "epoch": opened.epoch}
        [record] = client.call("memory.search", {**ids}).records
        forgot = client.call("memory.manage", {**ids, "action": "forget", "id": record.id})
        assert forgot.outcome == "applied"
    [prompt] = asked
    assert "in this workspace" not in prompt and "any workspace" in prompt, prompt


@pytest.mark.parametrize(
    "reply",
    [
        types.ElicitResult(action="accept", content={"decision": "allow_everything"}),
        types.ErrorData(code=-32603, message="the client could not show the question"),
    ],
)
async def test_an_approval_question_that_fails_leaves_the_change_pending_for_orcactl(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess, reply: Any
) -> None:
    async def elicit(_context: Any, _params: types.ElicitRequestParams) -> Any:
        return reply

    project = _project(tmp_path)
    async with mcp_session(orca_env, project, elicit=elicit) as session:
        result = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": "We use pnpm", "kind": "fact", "is_global": False},
        )
    text = _text(result)
    assert not result.is_error and "Pending approval" in text and "orcactl memory approve" in text
    assert _records(daemon, project) == []
    assert "Traceback" not in (orca_env.root / "mcp-stderr.log").read_text()


async def test_without_elicitation_the_change_waits_for_orcactl(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    project = _project(tmp_path)
    async with mcp_session(orca_env, project) as session:
        result = await session.call_tool(
            "memory_manage",
            {
                "action": "save",
                "content": "Deploys go through ArgoCD",
                "kind": "fact",
                "is_global": False,
            },
        )
        text = _text(result)
        assert not result.is_error and "Pending approval" in text
        assert _records(daemon, project) == []
        await _approve_as_printed(text, orca_env.env)
    assert [r.content for r in _records(daemon, project)] == ["Deploys go through ArgoCD"]


async def test_plan_mode_denies_secrets_are_refused_and_bad_arguments_are_tool_errors(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    project = _project(tmp_path)
    async with mcp_session(orca_env, project, "--mode", "plan") as session:
        denied = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": "We use pnpm", "kind": "fact", "is_global": False},
        )
        assert denied.is_error and "not changed" in _text(denied)
        listed = await session.call_tool("memory_search", {})  # reading is fine in plan mode
        assert not listed.is_error
    async with mcp_session(orca_env, project, "--mode", "yolo") as session:
        secret = await session.call_tool(
            "memory_manage",
            {
                "action": "save",
                "content": "the CI token is ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R",
                "kind": "fact",
                "is_global": False,
            },
        )
        assert secret.is_error and "Traceback" not in _text(secret)
        missing = await session.call_tool("memory_manage", {"action": "save", "content": "x y z"})
        assert missing.is_error and "save requires `kind`" in _text(missing)
        wrong = await session.call_tool("memory_search", {"limit": 99})
        assert wrong.is_error
        unknown = await session.call_tool(
            "memory_manage", {"action": "forget", "id": "mem_" + "0" * 32}
        )
        assert unknown.is_error and "Traceback" not in _text(unknown)
    assert _records(daemon, project) == []


def test_the_server_exits_cleanly_when_stdin_closes(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    completed = subprocess.run(
        [ORCACTL, "mcp", "--cwd", str(_project(tmp_path))],
        input=json.dumps(initialize) + "\n",
        capture_output=True,
        text=True,
        env=orca_env.env,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.splitlines()[0])["id"] == 1
    assert "Traceback" not in completed.stderr


async def test_a_server_that_exits_after_orcad_stopped_does_not_start_it_again(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # closing its session at exit is housekeeping: a daemon the user stopped stays stopped
    async with mcp_session(orca_env, _project(tmp_path)) as session:
        assert not (await session.call_tool("memory_search", {})).is_error
        await trio.to_thread.run_sync(daemon.stop)
    with pytest.raises(DaemonUnavailable):
        Client(str(orca_env.socket), timeout=5).close()
    assert not (orca_env.home / "orcad.log").exists()  # where orcactl logs a daemon it starts


async def test_hooks_and_the_mcp_server_of_one_session_side_by_side(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    project = _project(tmp_path)
    session_id = "5d41402a-bc4b-4a76-b971-9d911017c592"
    log = ClaudeTranscript(tmp_path / "t" / f"{session_id}.jsonl", session_id, str(project))
    common = {
        "session_id": session_id,
        "transcript_path": str(log.path),
        "cwd": str(project),
        "permission_mode": "bypassPermissions",
    }
    assert (
        run_hook(
            orca_env,
            "claude-code",
            "SessionStart",
            {**common, "hook_event_name": "SessionStart", "source": "startup"},
        ).status
        == 0
    )
    # The joined session keeps the mode the agent opened it with (bypassPermissions: yolo).
    joined = ("--session-id", f"claude-code:{session_id}")
    async with mcp_session(orca_env, project, *joined) as session:
        for number in range(3):
            prompt = f"Remember that we use tool number {number} for builds."
            submit = run_hook(
                orca_env,
                "claude-code",
                "UserPromptSubmit",
                {**common, "hook_event_name": "UserPromptSubmit", "prompt": prompt},
            )
            assert submit.status == 0 and submit.stderr == ""
            saved = await session.call_tool(
                "memory_manage",
                {
                    "action": "save",
                    "content": f"Builds use tool {number}",
                    "kind": "fact",
                    "is_global": False,
                },
            )
            assert not saved.is_error, _text(saved)
            log.user(prompt)
            log.text("Noted.")
            stop = run_hook(
                orca_env,
                "claude-code",
                "Stop",
                {**common, "hook_event_name": "Stop", "stop_hook_active": False},
            )
            assert stop.status == 0 and stop.stderr == ""
    assert not (orca_env.memory_root / "agent-hooks.jsonl").exists()  # no stale_session anywhere
    assert len(_records(daemon, project)) == 3


async def test_search_results_carry_controls_and_bidi_overrides_only_as_json_escapes(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # JSON escapes C0 controls but leaves C1 ones (0x9b is a terminal's CSI) and U+202E raw;
    # the agent shows tool results to the user
    content = "Deploy to \u202estaging\u202c only \x9b2J \x1b[2J"
    async with mcp_session(orca_env, _project(tmp_path), "--mode", "yolo") as session:
        saved = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": content, "kind": "fact", "is_global": False},
        )
        assert not saved.is_error, _text(saved)
        found = _text(await session.call_tool("memory_search", {"query": "deploy staging"}))
    assert not any(ch in found for ch in "\x1b\x9b\u202e\u202c"), found
    assert [record["content"] for record in json.loads(found)] == [content]


async def test_a_joined_server_that_started_before_the_agents_session_is_not_fenced_by_it(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # an agent starts its MCP servers and runs its SessionStart hook side by side: the server
    # may join (so open) the session first, and the hook's startup open then raises the epoch
    project = _project(tmp_path)
    session_id = "9f86d081-884c-4d63-9a2f-0b6e6a7f1b2c"
    startup = {
        "session_id": session_id,
        "transcript_path": str(tmp_path / "t" / f"{session_id}.jsonl"),
        "cwd": str(project),
        "permission_mode": "bypassPermissions",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    joined = ("--session-id", f"claude-code:{session_id}")
    async with mcp_session(orca_env, project, *joined) as session:
        assert not (await session.call_tool("memory_search", {})).is_error
        assert run_hook(orca_env, "claude-code", "SessionStart", startup).status == 0
        found = await session.call_tool("memory_search", {})
        assert not found.is_error, _text(found)
        saved = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": "We use pnpm", "kind": "fact", "is_global": False},
        )
        assert not saved.is_error, _text(saved)  # the agent's session, in its mode (yolo)
    assert [r.content for r in _records(daemon, project)] == ["We use pnpm"]


async def test_a_restarted_daemon_is_reached_again_without_a_tool_error(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    project = _project(tmp_path)
    async with mcp_session(orca_env, project, "--mode", "auto") as session:
        saved = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": "We use pnpm", "kind": "fact", "is_global": False},
        )
        assert not saved.is_error, _text(saved)
        await trio.to_thread.run_sync(daemon.restart)  # an upgrade, a crash and restart
        found = await session.call_tool("memory_search", {"query": "pnpm"})
        assert not found.is_error, _text(found)
        assert "We use pnpm" in _text(found)
        kept = await session.call_tool("remember", {"text": "The API lives under /v2"})
        assert not kept.is_error, _text(kept)
        await trio.to_thread.run_sync(daemon.restart)
        forgot = await session.call_tool(
            "memory_manage", {"action": "forget", "id": json.loads(_text(found))[0]["id"]}
        )
        assert not forgot.is_error, _text(forgot)
    assert _records(daemon, project) == []


async def test_the_approval_command_survives_a_directory_with_spaces_and_quotes(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    project = tmp_path / "my project's repo"
    project.mkdir()
    async with mcp_session(orca_env, project) as session:
        result = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": "We use pnpm", "kind": "fact", "is_global": False},
        )
        text = _text(result)
        assert "Pending approval" in text, text
        await _approve_as_printed(text, orca_env.env)
    assert [r.content for r in _records(daemon, project)] == ["We use pnpm"]


async def test_the_approval_command_reaches_the_daemon_the_server_was_given(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # integrate registers `orcactl mcp --socket PATH` when ORCA_SOCKET was set; the shell the
    # user approves from need not have it set
    project = _project(tmp_path)
    shell = {k: v for k, v in orca_env.env.items() if k != "ORCA_SOCKET"}
    params = StdioServerParameters(
        command=ORCACTL,
        args=["mcp", "--cwd", str(project), "--socket", str(orca_env.socket)],
        env=shell,
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": "We use pnpm", "kind": "fact", "is_global": False},
        )
        text = _text(result)
        assert "Pending approval" in text, text
        await _approve_as_printed(text, shell, "--no-start")
    assert [r.content for r in _records(daemon, project)] == ["We use pnpm"]


async def test_arguments_over_orcads_request_bound_get_a_clear_answer(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    project = _project(tmp_path)
    huge = "we deploy through ArgoCD " * 400_000  # 10 MB: orcad takes at most 8 MiB a request
    async with mcp_session(orca_env, project, "--mode", "yolo") as session:
        saved = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": huge, "kind": "fact", "is_global": False},
        )
        assert saved.is_error and "characters" in _text(saved), _text(saved)
        kept = await session.call_tool("remember", {"text": huge})
        assert kept.is_error and "characters" in _text(kept), _text(kept)
        recalled = await session.call_tool("recall", {"prompt": huge})
        assert not recalled.is_error, _text(recalled)
        found = await session.call_tool("memory_search", {"query": huge})
        assert not found.is_error, _text(found)
    assert _records(daemon, project) == []


async def test_an_extraction_run_cannot_change_memory_through_the_server(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    project = _project(tmp_path)
    guard = {"ORCA_EXTRACTION": "1"}  # set by the command provider for the agent CLI it runs
    async with mcp_session(orca_env, project, "--mode", "yolo", env=guard) as session:
        saved = await session.call_tool(
            "memory_manage",
            {"action": "save", "content": "We use pnpm", "kind": "fact", "is_global": False},
        )
        assert saved.is_error and "extraction" in _text(saved), _text(saved)
        kept = await session.call_tool("remember", {"text": "We use pnpm", "scope": "user"})
        assert kept.is_error and "extraction" in _text(kept), _text(kept)
        assert not (await session.call_tool("memory_search", {})).is_error  # reading is fine
    assert _records(daemon, project) == []
    with daemon.client() as client:
        opened = client.call("session.open", {"cwd": str(project)})
        assert "pnpm" not in opened.startup.user


@pytest.mark.parametrize(
    ("method", "said"),
    [("remember", "whether the change was made is not known"), ("memory.search", "in time")],
)
def test_a_change_orcad_did_not_answer_in_time_is_not_reported_as_failed(
    tmp_path: Path, method: str, said: str
) -> None:
    # the request may have reached a busy orcad, which makes the change once it catches up: a
    # model told "failed" would make it a second time
    args = argparse.Namespace(cwd=str(tmp_path), session_id=None, mode="normal", no_start=True)
    session = DaemonSession(args)

    def times_out(method: str, params: dict[str, Any]) -> Any:
        raise TimeoutError("timed out")

    session._call = times_out  # type: ignore[method-assign]
    with pytest.raises(ToolError, match=said):
        session.call_blocking(method, {"text": "We use yarn", "scope": "project", "query": "x"})


def _dies_on_each_request(listener: socket.socket, how: str, received: list[bytes]) -> None:
    """A daemon that reads a request and dies before answering it (closes, or resets)."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return  # the listener was closed: the test is over
        with connection:
            received.append(connection.recv(65536))
            if how == "reset":  # linger 0: close sends RST, as when the process is killed
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.mark.parametrize("how", ["close", "reset"])
@pytest.mark.parametrize(
    ("method", "said"),
    [
        ("remember", "whether the change was made is not known"),
        ("memory.manage", "whether the change was made is not known"),
        ("memory.approve", "whether the change was made is not known"),
        ("memory.search", "cannot reach orcad"),
    ],
)
def test_a_change_orcad_died_on_is_not_reported_as_failed(
    tmp_path: Path, how: str, method: str, said: str
) -> None:
    # the request reached orcad, which may have made the change before it died: a model told
    # "cannot reach orcad" would make it a second time
    path = tmp_path / "dying.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    received: list[bytes] = []
    thread = threading.Thread(target=_dies_on_each_request, args=(listener, how, received))
    thread.start()
    args = argparse.Namespace(
        cwd=str(tmp_path), session_id=None, mode="normal", no_start=True, socket=str(path)
    )
    session = DaemonSession(args)
    session.ids = {"session_id": "mcp:1", "epoch": 1}  # opened earlier
    try:
        with pytest.raises(ToolError, match=said):
            session.call_blocking(method, {"text": "We use yarn", "scope": "project"})
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=10)
    assert len(received) == (2 if method == "memory.search" else 1)  # a change is not repeated


def test_only_the_error_that_says_the_session_is_gone_opens_it_again(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # orcad's not_found also names unknown records and approvals, whose messages may well
    # contain "session": those are the tool's answer, not a reason to open the session again
    args = argparse.Namespace(
        cwd=str(_project(tmp_path)),
        session_id=None,
        mode="normal",
        no_start=True,
        socket=str(orca_env.socket),
    )
    opens: list[int] = []

    class Counted(DaemonSession):
        def _open(self, client: Any) -> dict[str, Any]:
            opens.append(1)
            return super()._open(client)

    session = Counted(args)
    session.call_blocking("memory.search", {"limit": 1})
    assert len(opens) == 1
    for method, params in (
        ("memory.approve", {"approval_id": "apr_session", "decision": "deny"}),
        ("memory.manage", {"action": "forget", "id": "mem_session"}),
    ):
        with pytest.raises(ToolError, match="not_found"):
            session.call_blocking(method, params)
    assert len(opens) == 1
    assert session.ids is not None
    daemon.call("session.close", session.ids)  # closed (or expired) meanwhile: opened again
    session.call_blocking("memory.search", {"limit": 1})
    assert len(opens) == 2
