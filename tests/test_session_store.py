"""The session store against a real SQLite file: epochs under concurrent open and close."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from orcad.clock import SystemClock
from orcad.config import Config
from orcad.errors import NotFound, StaleSession
from orcad.sessions import SessionStore
from protocol.types import SessionOpenParams

pytestmark = pytest.mark.inprocess


async def test_a_close_overtaken_by_a_reopen_leaves_the_new_epoch_open(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "state.sqlite3", SystemClock())
    opened = SessionOpenParams(cwd=str(tmp_path), session_id="ses_race")
    config_file = tmp_path / "config.toml"
    first = await store.open(opened, config_file, Config())
    hold, holding = threading.Event(), threading.Event()

    def occupy_the_database(_connection: object) -> None:
        holding.set()
        hold.wait(10)

    outcomes: dict[str, object] = {}

    async def reopen() -> None:
        outcomes["reopen"] = await store.open(opened, config_file, Config())

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
            config_file,
            Config(),
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
        await store.open(SessionOpenParams(cwd=str(tmp_path)), config_file, Config())
        for _ in range(2)
    ]
    await store.close_session(opened[1].session_id, opened[1].epoch)
    store.close()
    restarted = SessionStore(tmp_path / "state.sqlite3", SystemClock())  # the daemon restarted
    assert restarted.open_count == 0  # nobody has called yet
    await restarted.require(opened[0].session_id, opened[0].epoch)  # its agent goes on
    assert restarted.open_count == 1
    await restarted.close_session(opened[0].session_id, opened[0].epoch)
    assert restarted.open_count == 0
    restarted.close()
