"""run_sync_now: a worker thread the caller waits for, bounded by a limiter, not abandoned."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from orcad.threads import run_sync_now

pytestmark = pytest.mark.inprocess


async def test_returns_the_result_and_raises_the_exception() -> None:
    limiter = trio.CapacityLimiter(2)
    assert await run_sync_now(threading.get_ident, limiter) != threading.get_ident()

    def fail() -> None:
        raise ValueError("from the thread")

    with pytest.raises(ValueError, match="from the thread"):
        await run_sync_now(fail, limiter)
    assert limiter.borrowed_tokens == 0


async def test_at_most_the_limiters_tokens_run_at_once() -> None:
    limiter = trio.CapacityLimiter(2)
    running = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()
    two_running = threading.Event()

    def work() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            if running == 2:
                two_running.set()
        release.wait(10)
        with lock:
            running -= 1

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(run_sync_now, work, limiter)
        await trio.to_thread.run_sync(two_running.wait, 10)
        await trio.testing.wait_all_tasks_blocked()
        assert limiter.statistics().tasks_waiting == 3
        release.set()
    assert most == 2
    assert limiter.borrowed_tokens == 0


async def test_a_cancelled_caller_waits_for_the_thread_then_is_cancelled() -> None:
    limiter = trio.CapacityLimiter(1)
    started = threading.Event()
    release = threading.Event()
    finished: list[bool] = []
    returned: list[bool] = []

    def work() -> None:
        started.set()
        release.wait(10)
        finished.append(True)

    async def caller(scope: trio.CancelScope) -> None:
        with scope:
            await run_sync_now(work, limiter)
            returned.append(finished == [True])  # back only once the thread has ended
            await trio.lowlevel.checkpoint()  # where the cancellation is delivered
            raise AssertionError("the cancellation was lost")

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(caller, scope)
        await trio.to_thread.run_sync(started.wait, 10)
        scope.cancel()
        await trio.sleep(0.05)
        assert finished == [] and returned == []  # the caller still waits for the thread
        release.set()
    assert returned == [True]
    assert scope.cancelled_caught
    assert limiter.borrowed_tokens == 0
