"""Sessions shared by one agent's processes (`join`) and the idle expiry, on a real SQLite file."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio

from orcad import limits
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.config import Config, parse_config
from orcad.errors import NotFound, StaleSession, StartupError
from orcad.sessions import SessionStore
from protocol.errors import RemoteError
from protocol.types import SessionOpenParams
from tests.deliberate_helpers import SettableClock
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.inprocess


def _store(tmp_path: Path, clock: SettableClock, expiry: float = 60.0) -> SessionStore:
    return SessionStore(tmp_path / "state.sqlite3", clock, expiry)


async def _open(store: SessionStore, tmp_path: Path, *, join: bool) -> tuple[int, bool]:
    params = SessionOpenParams(cwd=str(tmp_path), session_id="ses_agent", join=join)
    joined = await store.join(params)
    if joined is not None:
        return joined.epoch, True
    session = await store.open(params, AutoMemorySwitch(tmp_path / "config.toml", Config()))
    return session.epoch, False


async def test_joining_processes_share_the_epoch_and_a_plain_open_fences_them(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path, SettableClock())
    first, first_joined = await _open(store, tmp_path, join=True)  # nothing open yet: opens
    hook, hook_joined = await _open(store, tmp_path, join=True)
    mcp, mcp_joined = await _open(store, tmp_path, join=True)
    assert (first_joined, hook_joined, mcp_joined) == (False, True, True)
    assert first == hook == mcp == 1
    await store.require("ses_agent", hook)  # nobody fenced anybody
    restarted, restarted_joined = await _open(store, tmp_path, join=False)
    assert (restarted, restarted_joined) == (2, False)
    with pytest.raises(StaleSession):
        await store.require("ses_agent", mcp)
    assert store.open_count == 1
    store.close()


@pytest.mark.parametrize("closed_before", [False, True])
async def test_processes_joining_at_once_a_session_not_open_share_one_epoch(
    tmp_path: Path, closed_before: bool
) -> None:
    store = _store(tmp_path, SettableClock())
    params = SessionOpenParams(cwd=str(tmp_path), session_id="ses_agent", join=True)
    config_file = tmp_path / "config.toml"
    if closed_before:
        first = await store.open(params, AutoMemorySwitch(config_file, Config()))
        await store.close_session("ses_agent", first.epoch)
    answers: list[tuple[int, bool]] = []

    async def join() -> None:  # a hook and the MCP server, say, at the same moment
        session, joined = await store.open_or_join(params, AutoMemorySwitch(config_file, Config()))
        answers.append((session.epoch, joined))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(join)
        nursery.start_soon(join)
    epoch = 2 if closed_before else 1
    assert sorted(answers) == [(epoch, False), (epoch, True)]
    await store.require("ses_agent", epoch)  # neither fenced the other
    assert store.open_count == 1
    store.close()


async def test_join_of_a_closed_session_opens_a_new_epoch(tmp_path: Path) -> None:
    store = _store(tmp_path, SettableClock())
    epoch, _ = await _open(store, tmp_path, join=True)
    await store.close_session("ses_agent", epoch)
    again, joined = await _open(store, tmp_path, join=True)
    assert (again, joined) == (epoch + 1, False)
    store.close()


async def test_a_session_idle_past_the_expiry_stops_counting_and_its_calls_fail(
    tmp_path: Path,
) -> None:
    clock = SettableClock()
    store = _store(tmp_path, clock, expiry=60.0)
    epoch, _ = await _open(store, tmp_path, join=False)
    clock.advance(60.0)  # exactly the expiry: still open
    assert store.open_count == 1
    await store.require("ses_agent", epoch)  # a call resets the idle time
    clock.advance(60.0)
    assert store.open_count == 1
    clock.advance(0.001)
    assert store.open_count == 0
    with pytest.raises(NotFound, match="expired"):
        await store.require("ses_agent", epoch)
    # Joining revives it at the same epoch: going quiet is not being superseded, so a process
    # that still holds the epoch goes on; a plain open still fences it.
    again, joined = await _open(store, tmp_path, join=True)
    assert (again, joined) == (epoch, True)
    assert store.open_count == 1
    await store.require("ses_agent", epoch)
    clock.advance(61.0)
    fresh, joined = await _open(store, tmp_path, join=False)
    assert (fresh, joined) == (epoch + 1, False)
    with pytest.raises(StaleSession):
        await store.require("ses_agent", epoch)
    store.close()


def test_idle_expiry_is_configurable_and_must_be_positive() -> None:
    assert Config().sessions.idle_expiry_s == limits.DEFAULT_SESSION_IDLE_EXPIRY_S == 3600.0
    config, unknown = parse_config("[sessions]\nidle_expiry_s = 120.0\n", "config.toml")
    assert (config.sessions.idle_expiry_s, unknown) == (120.0, [])
    with pytest.raises(StartupError, match=r"sessions\.idle_expiry_s"):
        parse_config("[sessions]\nidle_expiry_s = 0.0\n", "config.toml")


def test_join_is_optional_on_the_wire() -> None:
    decoded = msgspec.json.decode(b'{"cwd": "/tmp"}', type=SessionOpenParams)
    assert decoded.join is False


def test_join_over_the_wire(tmp_path: Path, daemon: DaemonProcess) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    params = {"cwd": str(project), "session_id": "agent-1", "join": True}
    with daemon.client() as client:
        first = client.call("session.open", params)
        second = client.call("session.open", params)
        assert (first.epoch, first.joined, second.epoch, second.joined) == (1, False, 1, True)
        assert second.startup == first.startup
        fresh = client.call("session.open", {**params, "join": False})
        assert (fresh.epoch, fresh.joined) == (2, False)
        with pytest.raises(RemoteError) as stale:
            client.call("session.close", {"session_id": "agent-1", "epoch": 1})
        assert stale.value.kind == "stale_session"
        assert client.call("daemon.status").sessions == 1


@pytest.mark.daemon
def test_sessions_open_before_a_restart_are_counted_open_after_it(
    tmp_path: Path, daemon: DaemonProcess
) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    for session_id in ("agent-1", "agent-2", "agent-3"):
        daemon.call("session.open", {"cwd": str(project), "session_id": session_id})
    daemon.call("session.close", {"session_id": "agent-3", "epoch": 1})
    assert daemon.call("daemon.status").sessions == 2
    daemon.restart()
    deadline = time.monotonic() + 10
    while daemon.call("daemon.status").sessions != 2:  # counted just after the start
        assert time.monotonic() < deadline, daemon.call("daemon.status").sessions
        time.sleep(0.02)
    daemon.call("session.close", {"session_id": "agent-1", "epoch": 1})
    assert daemon.call("daemon.status").sessions == 1


def test_a_joined_process_is_not_fenced_when_another_joins_after_the_expiry(
    tmp_path: Path, orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # An agent left alone past the expiry: its next prompt's hook joins before its MCP server
    # (joined with --session-id) calls again; the server must not find itself fenced.
    # (an expiry of 2 s: a loaded machine's pause between the open and the first call must
    # not expire the session before the test lets it idle)
    orca_env.write_config("[sessions]\nidle_expiry_s = 2.0\n")
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    project = tmp_path / "repo"
    project.mkdir()
    params = {"cwd": str(project), "session_id": "claude-code:agent-1", "join": True}
    with daemon.client() as client:
        server = client.call("session.open", params)
        ids = {"session_id": server.session_id, "epoch": server.epoch}
        client.call("memory.search", {**ids, "limit": 1})
        time.sleep(2.3)
        hook = client.call("session.open", params)
        assert (hook.epoch, hook.joined) == (server.epoch, True)
        client.call("memory.search", {**ids, "limit": 1})  # not stale_session
        assert client.call("daemon.status").sessions == 1


def test_processes_joining_at_once_over_the_wire_are_not_fenced(
    tmp_path: Path, daemon: DaemonProcess
) -> None:
    # A hook and the MCP server of one agent whose session the daemon does not have open (never
    # opened here, closed, or lost): both join at the same moment, on their own connections.
    project = tmp_path / "repo"
    project.mkdir()
    for attempt in range(5):
        params = {"cwd": str(project), "session_id": f"claude-code:s{attempt}", "join": True}
        start = threading.Barrier(2)
        answers: list[Any] = []

        def join(params: dict[str, Any], start: threading.Barrier, answers: list[Any]) -> None:
            with daemon.client() as client:
                start.wait()
                answers.append(client.call("session.open", params))

        threads = [threading.Thread(target=join, args=(params, start, answers)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted((a.epoch, a.joined) for a in answers) == [(1, False), (1, True)]
        ids = {"session_id": params["session_id"], "epoch": 1}
        daemon.call("memory.search", {**ids, "limit": 1})  # not stale_session


def test_a_session_idle_past_the_expiry_across_a_crash_and_restart_is_expired(
    tmp_path: Path, orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    orca_env.write_config("[sessions]\nidle_expiry_s = 2.0\n")  # (see above)
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    project = tmp_path / "repo"
    project.mkdir()
    params = {"cwd": str(project), "session_id": "claude-code:agent-1"}
    opened = daemon.call("session.open", params)
    ids = {"session_id": opened.session_id, "epoch": opened.epoch}
    daemon.call("memory.search", {**ids, "limit": 1})
    called = time.monotonic()
    daemon.kill()
    daemon.start()
    time.sleep(max(0.0, called + 2.5 - time.monotonic()))  # the agent silent past the expiry
    with pytest.raises(RemoteError) as expired:
        daemon.call("memory.search", {**ids, "limit": 1})
    assert expired.value.kind == "not_found"
    assert expired.value.data["session_id"] == opened.session_id
    assert "expired" in str(expired.value)
    joined = daemon.call("session.open", {**params, "join": True})
    assert (joined.epoch, joined.joined) == (opened.epoch, True)  # revived at its epoch
    daemon.call("memory.search", {**ids, "limit": 1})


async def test_a_join_from_another_repository_stays_in_the_workspace_the_session_opened_in(
    tmp_path: Path,
) -> None:
    """The agent's hooks after a `cd` into another repository, and an MCP server started in
    another directory, join the session where it was opened: neither moves it, so neither
    raises the epoch on the other (which would end its grants and pending changes)."""
    store = _store(tmp_path, SettableClock())
    started, elsewhere = tmp_path / "started", tmp_path / "elsewhere"
    for repo in (started, elsewhere):
        (repo / ".git").mkdir(parents=True)
    config_file = tmp_path / "config.toml"
    first, _ = await store.open_or_join(
        SessionOpenParams(cwd=str(started), session_id="ses_agent"),
        AutoMemorySwitch(config_file, Config()),
    )
    moved, joined = await store.open_or_join(
        SessionOpenParams(cwd=str(elsewhere), session_id="ses_agent", join=True),
        AutoMemorySwitch(config_file, Config()),
    )
    assert joined
    assert (moved.epoch, moved.workspace_id) == (first.epoch, first.workspace_id)
    await store.require("ses_agent", first.epoch)
    store.close()
