"""The session store against a real SQLite file: epochs under concurrent open and close."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing
from structlog.testing import capture_logs

from orcad import limits
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.clock import SystemClock, format_time
from orcad.config import Config
from orcad.errors import NotFound, StaleSession
from orcad.session_snapshot import Session
from orcad.sessions import SessionStore
from protocol.errors import RemoteError
from protocol.types import SessionOpenParams
from tests.deliberate_helpers import InProcessDaemon, SettableClock
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.inprocess


async def test_a_close_overtaken_by_a_reopen_leaves_the_new_epoch_open(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state.sqlite3", SystemClock())
    opened = SessionOpenParams(cwd=str(tmp_path), session_id="ses_race")
    config_file = tmp_path / "config.toml"
    first = await store.open(opened, AutoMemorySwitch(config_file, Config()))
    hold, holding = threading.Event(), threading.Event()

    def occupy_the_database(_connection: object) -> None:
        holding.set()
        hold.wait(10)

    outcomes: dict[str, object] = {}

    async def reopen() -> None:
        outcomes["reopen"] = await store.open(opened, AutoMemorySwitch(config_file, Config()))

    async def close_first() -> None:
        try:
            await store.close_session("ses_race", first.epoch)
        except StaleSession as exc:
            outcomes["close"] = exc

    def queued() -> int:
        return store._db.statistics().tasks_waiting

    async with trio.open_nursery() as nursery:
        nursery.start_soon(store._db.run, occupy_the_database)
        await trio.to_thread.run_sync(holding.wait)
        nursery.start_soon(reopen)  # its epoch write queues first...
        while queued() < 1:  # its identity lookup runs in a thread first
            await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(close_first)  # ...then the close of the old epoch
        while queued() < 2:
            await trio.testing.wait_all_tasks_blocked()
        hold.set()
    second = outcomes["reopen"]
    assert second.epoch == first.epoch + 1
    assert (await store.require("ses_race", second.epoch)).closed is False
    assert isinstance(outcomes["close"], StaleSession)
    store.close()
    reloaded = SessionStore(tmp_path / "state.sqlite3", SystemClock())
    assert (await reloaded.require("ses_race", second.epoch)).closed is False
    with pytest.raises(StaleSession):
        await reloaded.require("ses_race", first.epoch)
    reloaded.close()


async def test_snapshots_beyond_the_cache_bound_are_read_back_from_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("orcad.sessions.SESSION_CACHE_MAX", 2)
    store = SessionStore(tmp_path / "state.sqlite3", SystemClock())
    config_file = tmp_path / "config.toml"
    opened = [
        await store.open(
            SessionOpenParams(cwd=str(tmp_path), session_id=f"ses_{n}", mode="plan"),
            AutoMemorySwitch(config_file, Config()),
        )
        for n in range(3)
    ]
    assert len(store._cache) == 2
    assert store.open_count == 3
    again = await store.require("ses_0", opened[0].epoch)  # evicted, read from the file
    assert again == opened[0]
    await store.close_session("ses_1", opened[1].epoch)
    assert store.open_count == 2
    with pytest.raises(NotFound, match="closed"):
        await store.require("ses_1", opened[1].epoch)
    store.close()


async def test_a_session_still_in_use_after_a_restart_counts_as_open(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state.sqlite3", SystemClock())
    config_file = tmp_path / "config.toml"
    opened = [
        await store.open(
            SessionOpenParams(cwd=str(tmp_path)), AutoMemorySwitch(config_file, Config())
        )
        for _ in range(2)
    ]
    await store.close_session(opened[1].session_id, opened[1].epoch)
    store.close()
    restarted = SessionStore(tmp_path / "state.sqlite3", SystemClock())  # the daemon restarted
    assert restarted.open_count == 0  # until its rows are counted, as the daemon's start does
    assert await restarted.count_open_rows() == 1  # the one not closed, before any call
    assert restarted.open_count == 1
    await restarted.require(opened[0].session_id, opened[0].epoch)  # its agent goes on
    assert restarted.open_count == 1
    assert await restarted.count_open_rows() == 0  # counted once
    await restarted.close_session(opened[0].session_id, opened[0].epoch)
    assert restarted.open_count == 0
    restarted.close()


async def test_rows_counted_at_a_start_leave_out_idle_closed_damaged_and_ending_sessions(
    tmp_path: Path,
) -> None:
    clock = SettableClock()
    path = tmp_path / "state.sqlite3"
    store = SessionStore(path, clock)
    switch = AutoMemorySwitch(tmp_path / "config.toml", Config())
    idle = await store.open(SessionOpenParams(cwd=str(tmp_path), session_id="ses_idle"), switch)
    clock.advance(store.idle_expiry_s / 2)
    kept = [
        await store.open(SessionOpenParams(cwd=str(tmp_path), session_id=f"ses_{n}"), switch)
        for n in range(3)
    ]
    store.close()
    clock.advance(store.idle_expiry_s / 2 + 1)  # "ses_idle" is past the expiry, the rest not
    with sqlite3.connect(path) as connection:  # a row whose snapshot no longer decodes
        connection.execute("UPDATE sessions SET snapshot = '{' WHERE session_id = 'ses_2'")
    connection.close()
    restarted = SessionStore(path, clock)
    # a session closed while the rows are read is not counted as open after it
    read = restarted._run
    closing = kept[1]

    async def read_then_close(work):  # type: ignore[no-untyped-def]
        restarted._run = read  # type: ignore[method-assign]
        rows = await read(work)
        await restarted.close_session(closing.session_id, closing.epoch)
        return rows

    restarted._run = read_then_close  # type: ignore[method-assign]
    assert await restarted.count_open_rows() == 1  # ses_0: ses_1 closed, ses_2 undecodable
    assert restarted.open_count == 1
    with pytest.raises(NotFound, match="expired"):
        await restarted.require("ses_idle", idle.epoch)
    assert (await restarted.require("ses_0", kept[0].epoch)).session_id == "ses_0"
    restarted.close()


async def test_a_session_idle_past_the_expiry_before_a_restart_is_expired_after_it(
    tmp_path: Path,
) -> None:
    clock = SettableClock()
    path = tmp_path / "state.sqlite3"
    store = SessionStore(path, clock)
    params = SessionOpenParams(cwd=str(tmp_path), session_id="ses_idle")
    opened = await store.open(params, AutoMemorySwitch(tmp_path / "config.toml", Config()))
    store.close()  # the daemon stops...
    clock.advance(store.idle_expiry_s + 1)  # ...and starts again, the session's agent silent
    restarted = SessionStore(path, clock)
    with capture_logs() as logs, pytest.raises(NotFound, match="expired") as refused:
        await restarted.require("ses_idle", opened.epoch)
    assert refused.value.data == {"session_id": "ses_idle"}
    assert [e["session_id"] for e in logs if e["event"] == "session.expired"] == ["ses_idle"]
    assert restarted.open_count == 0
    ended: list[str] = []
    restarted.on_ended.append(ended.append)
    joined = await restarted.join(msgspec.structs.replace(params, join=True))
    assert joined is not None and joined.epoch == opened.epoch  # revived, as without a restart
    assert ended == ["ses_idle"]
    assert (await restarted.require("ses_idle", opened.epoch)).closed is False
    restarted.close()


def _last_use(path: Path) -> dict[str, float]:
    connection = sqlite3.connect(path)
    try:
        return dict(connection.execute("SELECT session_id, last_used FROM sessions").fetchall())
    finally:
        connection.close()


async def test_the_last_use_is_stored_once_it_trails_by_the_interval_and_at_a_clean_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SettableClock()
    path = tmp_path / "state.sqlite3"
    store = SessionStore(path, clock)
    params = SessionOpenParams(cwd=str(tmp_path), session_id="ses_busy")
    session = await store.open(params, AutoMemorySwitch(tmp_path / "config.toml", Config()))
    opened_at = clock.value
    written = trio.Event()
    store_last_use = store.store_last_use

    async def observed_store_last_use() -> None:
        await store_last_use()
        written.set()

    monkeypatch.setattr(store, "store_last_use", observed_store_last_use)
    async with trio.open_nursery() as nursery:
        await nursery.start(store.run_last_use_writer)
        clock.advance(limits.SESSION_LAST_USE_WRITE_S / 2)
        await store.require("ses_busy", session.epoch)
        await trio.testing.wait_all_tasks_blocked()
        assert not written.is_set()  # the stored time trails by less than the interval
        assert _last_use(path) == {"ses_busy": opened_at}
        clock.advance(limits.SESSION_LAST_USE_WRITE_S / 2)
        await store.require("ses_busy", session.epoch)
        await written.wait()
        nursery.cancel_scope.cancel()
    assert _last_use(path) == {"ses_busy": clock.value}
    clock.advance(1)
    await store.require("ses_busy", session.epoch)  # a crash now would lose only this second
    assert _last_use(path) == {"ses_busy": clock.value - 1}
    await store.aclose()  # a clean stop stores it
    assert _last_use(path) == {"ses_busy": clock.value}
    clock.advance(store.idle_expiry_s)  # idle for exactly the expiry: still open
    restarted = SessionStore(path, clock)
    assert (await restarted.require("ses_busy", session.epoch)).closed is False
    clock.advance(store.idle_expiry_s + 1)
    with pytest.raises(NotFound, match="expired"):
        await restarted.require("ses_busy", session.epoch)
    restarted.close()


@pytest.mark.parametrize("wall_step", [-86400.0, 86400.0])
async def test_the_idle_expiry_counts_the_time_without_a_call_whatever_the_wall_clock_does(
    tmp_path: Path, wall_step: float
) -> None:
    clock = SettableClock()
    store = SessionStore(tmp_path / "state.sqlite3", clock)
    switch = AutoMemorySwitch(tmp_path / "config.toml", Config())
    opened = await store.open(SessionOpenParams(cwd=str(tmp_path), session_id="ses_a"), switch)
    called = await store.open(SessionOpenParams(cwd=str(tmp_path), session_id="ses_b"), switch)
    clock.advance(60)
    await store.require("ses_b", called.epoch)
    clock.set_wall(wall_step)  # NTP, a user or a resumed machine sets the clock
    clock.advance(store.idle_expiry_s - 60)  # "ses_a" idle for exactly the expiry: still open
    assert (await store.require("ses_a", opened.epoch)).closed is False
    clock.advance(61)  # "ses_b" idle for a second past it
    assert store.expire_idle() == ["ses_b"]
    with pytest.raises(NotFound, match="expired"):
        await store.require("ses_b", called.epoch)
    assert (await store.require("ses_a", opened.epoch)).closed is False
    assert store.open_count == 1
    store.close()


async def test_an_upgrade_from_a_version_that_stored_the_last_use_hourly_expires_no_session_in_use(
    tmp_path: Path,
) -> None:
    # that version stored a session's last call at open, close and by the hourly sweep only,
    # and counted every session as fresh after a restart: a session called a minute before
    # the upgrade may have a stored time over an hour old
    clock = SettableClock()
    path = tmp_path / "state.sqlite3"
    store = SessionStore(path, clock)
    config_file = tmp_path / "config.toml"
    ids = ("ses_busy", "ses_gone", "ses_closed")
    opened = {
        session_id: await store.open(
            SessionOpenParams(cwd=str(tmp_path), session_id=session_id),
            AutoMemorySwitch(config_file, Config()),
        )
        for session_id in ids
    }
    await store.close_session("ses_closed", opened["ses_closed"].epoch)
    store.close()
    connection = sqlite3.connect(path)
    with connection:  # as that version left it: no user_version, and times well behind
        connection.execute("PRAGMA user_version = 0")
        stored = {
            "ses_busy": clock.value - 60,  # its last sweep; called until the upgrade
            "ses_gone": clock.value - 3 * store.idle_expiry_s - limits.SESSION_SWEEP_INTERVAL_S,
            "ses_closed": clock.value - 60,
        }
        for session_id, last_used in stored.items():
            connection.execute(
                "UPDATE sessions SET last_used = ? WHERE session_id = ?", (last_used, session_id)
            )
    connection.close()
    clock.advance(store.idle_expiry_s)  # the upgrade: over an hour since the busy one's sweep
    upgraded = SessionStore(path, clock)
    assert (await upgraded.require("ses_busy", opened["ses_busy"].epoch)).closed is False
    with pytest.raises(NotFound, match="expired"):  # idle long before the upgrade
        await upgraded.require("ses_gone", opened["ses_gone"].epoch)
    await upgraded.aclose()
    assert _last_use(path) == {
        "ses_busy": clock.value,
        "ses_gone": stored["ses_gone"],
        "ses_closed": stored["ses_closed"],
    }
    clock.advance(store.idle_expiry_s + 1)  # converted once: from now on its stored time holds
    restarted = SessionStore(path, clock)
    with pytest.raises(NotFound, match="expired"):
        await restarted.require("ses_busy", opened["ses_busy"].epoch)
    restarted.close()


def _rows(path: Path) -> dict[str, int]:
    connection = sqlite3.connect(path)
    try:
        return dict(connection.execute("SELECT session_id, epoch FROM sessions").fetchall())
    finally:
        connection.close()


async def test_rows_of_sessions_ended_long_ago_are_pruned_and_their_ids_stay_fenced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("orcad.limits.SESSION_SWEEP_MAX_ROWS", 7)
    clock = SettableClock()
    path = tmp_path / "state.sqlite3"
    store = SessionStore(path, clock)
    config_file = tmp_path / "config.toml"

    async def open_session(session_id: str) -> Session:
        params = SessionOpenParams(cwd=str(tmp_path), session_id=session_id)
        return await store.open(params, AutoMemorySwitch(config_file, Config()))

    ended: dict[str, Session] = {}
    for n in range(10):
        first = await open_session(f"ses_old{n}")
        ended[first.session_id] = await open_session(first.session_id)  # reopened: epoch 2
        if n % 2:
            await store.close_session(first.session_id, ended[first.session_id].epoch)
        # the others just expire
    in_use = await open_session("ses_in_use")  # opened as long ago, called all along
    start = clock.value
    while clock.value < start + store.retention_s + 1:
        clock.value += store.idle_expiry_s / 2
        await store.require("ses_in_use", in_use.epoch)
        if clock.value == start + store.retention_s / 2:
            assert await store.sweep() == []  # nothing is that old yet
    assert len(await store.sweep()) == 7  # bounded per pass
    assert len(_rows(path)) == 4
    store.close()
    store = SessionStore(path, clock)  # the daemon restarted: its last call is on file
    assert len(await store.sweep()) == 3
    assert _rows(path) == {"ses_in_use": in_use.epoch}
    assert (await store.require("ses_in_use", in_use.epoch)).closed is False

    old = ended["ses_old3"]
    with pytest.raises(NotFound):  # its row is gone: not accepted, whatever the epoch
        await store.require("ses_old3", old.epoch)
    reopened = await open_session("ses_old3")
    assert reopened.epoch > old.epoch
    assert (await store.require("ses_old3", reopened.epoch)).closed is False
    with pytest.raises(StaleSession):
        await store.require("ses_old3", old.epoch)
    store.close()
    restarted = SessionStore(path, clock)
    with pytest.raises(StaleSession):
        await restarted.require("ses_old3", old.epoch)
    assert (await restarted.require("ses_old3", reopened.epoch)).epoch == reopened.epoch
    restarted.close()


async def test_a_start_prunes_only_rows_idle_long_before_the_latest_call_on_file(
    tmp_path: Path,
) -> None:
    clock = SettableClock()
    path = tmp_path / "state.sqlite3"
    store = SessionStore(path, clock)
    switch = AutoMemorySwitch(tmp_path / "config.toml", Config())
    for session_id in ("ses_a", "ses_b"):
        opened = await store.open(
            SessionOpenParams(cwd=str(tmp_path), session_id=session_id), switch
        )
        await store.close_session(session_id, opened.epoch)
    store.close()
    # orcad was not running for longer than the retention: nothing is pruned at the start,
    # whatever was in use then gets the interval before the first sweep to make a call
    clock.advance(store.retention_s + 3600)
    store = SessionStore(path, clock)
    assert await store.sweep_at_start() == []
    assert set(_rows(path)) == {"ses_a", "ses_b"}
    # a later call, and the daemon that stored it stopped within the interval: the rows idle
    # for the retention before that call go at the next start
    await store.open(SessionOpenParams(cwd=str(tmp_path), session_id="ses_c"), switch)
    store.close()
    clock.advance(60)
    store = SessionStore(path, clock)
    assert sorted(await store.sweep_at_start()) == ["ses_a", "ses_b"]
    assert set(_rows(path)) == {"ses_c"}
    store.close()


def _age_rows(path: Path, idle_s: dict[str, float]) -> None:
    """Make each session's stored last call `idle_s` seconds old, as that much time would."""
    now = time.time()
    connection = sqlite3.connect(path)
    try:
        with connection:
            connection.executemany(
                "UPDATE sessions SET last_used = ? WHERE session_id = ?",
                [(now - idle, session_id) for session_id, idle in idle_s.items()],
            )
    finally:
        connection.close()


def test_a_daemon_restarted_within_the_sweep_interval_still_prunes_old_rows(
    tmp_path: Path, orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    # orcad restarted more often than its hourly sweep runs kept every session row for good
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    cwd = tmp_path / "repo"
    cwd.mkdir()
    epochs = {}
    for session_id in ("agent-old-1", "agent-old-2", "agent-recent"):
        opened = daemon.call("session.open", {"cwd": str(cwd), "session_id": session_id})
        daemon.call("session.close", {"session_id": session_id, "epoch": opened.epoch})
        epochs[session_id] = opened.epoch
    daemon.stop()
    state = orca_env.memory_root / "daemon-state.sqlite3"
    retention = limits.SESSION_ROW_RETENTION_S
    _age_rows(state, {"agent-old-1": retention + 7200, "agent-old-2": retention + 3600})
    daemon.start()
    deadline = time.monotonic() + 10
    while set(_rows(state)) != {"agent-recent"}:
        assert time.monotonic() < deadline, _rows(state)
        time.sleep(0.05)
    # the pruned ids stay fenced: an old epoch is refused, an open goes above it
    with pytest.raises(RemoteError) as refused:
        daemon.call("memory.search", {"session_id": "agent-old-1", "epoch": epochs["agent-old-1"]})
    assert refused.value.kind == "not_found"
    again = daemon.call("session.open", {"cwd": str(cwd), "session_id": "agent-old-1"})
    assert again.epoch > epochs["agent-old-1"]
    with pytest.raises(RemoteError) as stale:
        daemon.call("memory.search", {"session_id": "agent-old-1", "epoch": epochs["agent-old-1"]})
    assert stale.value.kind == "stale_session"


async def test_a_state_database_without_last_use_times_keeps_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    clock = SettableClock()
    opened_at = clock.value
    connection = sqlite3.connect(path)  # as a daemon before last_used was stored wrote it
    connection.executescript(
        "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, "
        "snapshot TEXT NOT NULL);"
    )
    store = SessionStore(tmp_path / "new.sqlite3", clock)
    session = await store.open(
        SessionOpenParams(cwd=str(tmp_path), session_id="ses_kept"),
        AutoMemorySwitch(tmp_path / "c.toml", Config()),
    )
    store.close()
    encoded = msgspec.json.encode(session).decode()
    with connection:
        connection.execute("INSERT INTO sessions VALUES ('ses_kept', 4, ?)", (encoded,))
    connection.close()
    store = SessionStore(path, clock)
    clock.value = opened_at + store.retention_s - 1
    assert await store.sweep() == []
    assert _rows(path) == {"ses_kept": 4}
    clock.value = opened_at + store.retention_s + 1
    assert await store.sweep() == ["ses_kept"]
    reopened = await store.open(
        SessionOpenParams(cwd=str(tmp_path), session_id="ses_kept"),
        AutoMemorySwitch(tmp_path / "c.toml", Config()),
    )
    assert reopened.epoch == 5
    store.close()


async def test_a_row_an_older_version_added_to_a_newer_database_is_pruned_in_time(
    tmp_path: Path,
) -> None:
    # an older orcad run over a state database this one wrote (a downgrade) adds its sessions
    # without their last call; back on this version they were never pruned
    path = tmp_path / "state.sqlite3"
    clock = SettableClock()
    opened_at = clock.value
    switch = AutoMemorySwitch(tmp_path / "c.toml", Config())
    store = SessionStore(path, clock)
    session = await store.open(SessionOpenParams(cwd=str(tmp_path), session_id="ses_old"), switch)
    await store.close_session("ses_old", session.epoch)
    store.close()
    encoded = msgspec.json.encode(session).decode()
    connection = sqlite3.connect(path)
    with connection:  # what the older version writes: no last_used
        connection.execute("DELETE FROM sessions WHERE session_id = 'ses_old'")
        connection.execute(
            "INSERT INTO sessions (session_id, epoch, snapshot) VALUES ('ses_old', 3, ?)",
            (encoded,),
        )
    connection.close()
    store = SessionStore(path, clock)
    clock.value = opened_at + store.retention_s - 1
    assert await store.sweep() == []
    assert _rows(path) == {"ses_old": 3}
    clock.value = opened_at + store.retention_s + 1
    assert await store.sweep() == ["ses_old"]
    reopened = await store.open(SessionOpenParams(cwd=str(tmp_path), session_id="ses_old"), switch)
    assert reopened.epoch == 4
    store.close()


async def test_the_daemon_sweeps_session_rows_periodically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock)
    sessions = orca.daemon.sessions
    try:
        opened = await orca.open(tmp_path / "ws")
        await orca.call("session.close", opened)
        clock.advance(sessions.retention_s + 1)
        swept: list[list[str]] = []
        done = trio.Event()
        sweep = sessions.sweep

        async def observed_sweep() -> list[str]:
            swept.append(await sweep())
            done.set()
            return swept[-1]

        monkeypatch.setattr(sessions, "sweep", observed_sweep)
        (sweeper,) = [t for t in orca.daemon.background if t == sessions.run_sweeper]
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            await nursery.start(sweeper)
            await done.wait()
            nursery.cancel_scope.cancel()
        assert trio.current_time() - started >= limits.SESSION_SWEEP_INTERVAL_S
        assert swept == [[opened["session_id"]]]
        assert _rows(orca.paths.state_db) == {}
    finally:
        await orca.aclose()


async def test_a_sweep_that_deletes_as_many_rows_as_it_may_is_followed_soon_by_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    # each `orcactl memory list` opens a session: a script running more of them an hour than
    # a pass deletes kept more rows each hour than the hourly sweep took away
    monkeypatch.setattr("orcad.limits.SESSION_SWEEP_MAX_ROWS", 3)
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock)
    sessions = orca.daemon.sessions
    try:
        for _ in range(7):
            opened = await orca.open(tmp_path / "ws")
            await orca.call("session.close", opened)
        clock.advance(sessions.retention_s + 1)
        swept: list[int] = []
        done = trio.Event()
        sweep = sessions.sweep

        async def observed_sweep() -> list[str]:
            swept.append(len(await sweep()))
            if swept[-1] < 3:
                done.set()
            return [""] * swept[-1]

        monkeypatch.setattr(sessions, "sweep", observed_sweep)
        (sweeper,) = [t for t in orca.daemon.background if t == sessions.run_sweeper]
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            await nursery.start(sweeper)
            await done.wait()
            nursery.cancel_scope.cancel()
        assert swept == [3, 3, 1]
        took = trio.current_time() - started
        assert took == limits.SESSION_SWEEP_INTERVAL_S + 2 * limits.SESSION_SWEEP_CATCH_UP_S
        assert _rows(orca.paths.state_db) == {}
    finally:
        await orca.aclose()


@pytest.mark.parametrize("wall_step", [-86400.0, 86400.0])
async def test_the_uptime_counts_the_time_run_whatever_the_wall_clock_does(
    tmp_path: Path, wall_step: float
) -> None:
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock)
    try:
        clock.advance(5.0)
        clock.set_wall(wall_step)  # NTP, a user or a resumed machine sets the clock
        status = await orca.call("daemon.status", {})
        assert status["uptime_s"] == 5.0
        assert status["started_at"] == format_time(1_800_000_000.0)
    finally:
        await orca.aclose()
