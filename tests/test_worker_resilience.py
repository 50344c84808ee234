"""Workers that do not give up or stall: retry back-off, a lock failure that holds one project
only, supervised background tasks. Wall time is a controllable clock; trio time is MockClock."""

from __future__ import annotations

import errno
import itertools
import os
import sqlite3
from pathlib import Path

import filelock
import msgspec
import pytest
import trio
import trio.testing

from orcad import limits
from orcad.app import Daemon, FaultRecordingRouter
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.capture import leases, schedule
from orcad.capture.jobstore import read_job, write_job
from orcad.capture.projects import LOCK_FILE, ensure_directories
from orcad.capture.records import JobRecord, new_job
from orcad.capture.schedule import JobView, PoolState, plan
from orcad.capture.service import CaptureService
from orcad.capture.worker import WorkerPool
from orcad.config import Config, ExtractionConfig, LoadedConfig
from orcad.errors import Conflict, StorageError
from orcad.limits import RESTART_FIRST_DELAY_S, RESTART_MAX_DELAY_S
from orcad.paths import resolve_paths
from orcad.providers import build_provider
from orcad.rpc import Dispatcher
from orcad.supervision import restart_delay, supervised
from protocol.types import StatusParams
from tests.deliberate_helpers import SettableClock

pytestmark = pytest.mark.inprocess

T0 = 1_800_000_000.0
PROJECT_A = "a" * 64
PROJECT_B = "b" * 64


class SteppedClock:
    """Wall-clock seconds that move only when the test says so."""

    def __init__(self, now: float = T0) -> None:
        self.value = now

    def now(self) -> float:
        return self.value

    def monotonic(self) -> float:
        return self.value


# --- back-off (pure) ---------------------------------------------------------------------------


def test_backoff_doubles_per_failure_within_the_jitter_band() -> None:
    for attempts, full in [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0)]:
        assert schedule.retry_backoff(attempts, 2.0, 300.0, 0.0) == full / 2
        assert schedule.retry_backoff(attempts, 2.0, 300.0, 0.999999) == pytest.approx(full, 1e-5)


def test_backoff_is_capped_and_never_overflows() -> None:
    assert schedule.retry_backoff(50, 2.0, 300.0, 0.999999) == pytest.approx(300.0, 1e-5)
    assert schedule.retry_backoff(10_000, 2.0, 300.0, 0.5) == 225.0
    assert schedule.retry_backoff(3, 0.0, 300.0, 0.7) == 0.0  # retry_base_s = 0: at once


def _leased_job(attempts: int = 0) -> JobRecord:
    job = new_job(
        job_id="job_" + "1" * 32,
        project_id=PROJECT_A,
        session_id="s",
        turn_id="t",
        source="user: x",
        source_digest="0" * 64,
        source_bytes=7,
        source_truncated=False,
        now=T0,
    )
    job = msgspec.structs.replace(job, attempts=attempts)
    return leases.claim(job, now=T0, owner="w", lease_s=60.0, max_retries=3)


def _token(job: JobRecord) -> int:
    assert job.lease is not None
    return job.lease.token


def test_a_failed_attempt_waits_the_longer_of_backoff_and_retry_after() -> None:
    job = _leased_job()
    backed_off = leases.fail(
        job, token=_token(job), now=T0, error="e", max_retries=3, backoff_s=4.0
    )
    assert backed_off.not_before_time() == pytest.approx(T0 + 4.0, abs=0.002)
    told = leases.fail(
        job, token=_token(job), now=T0, error="e", max_retries=3, backoff_s=4.0, retry_after=30.0
    )
    assert told.not_before_time() == pytest.approx(T0 + 30.0, abs=0.002)
    last = _leased_job(attempts=3)
    final = leases.fail(last, token=_token(last), now=T0, error="e", max_retries=3, backoff_s=4.0)
    assert (final.state, final.not_before) == ("exhausted", None)


def test_only_an_exhausted_job_is_retried_with_its_attempts_reset() -> None:
    job = _leased_job(attempts=3)
    exhausted = leases.fail(job, token=_token(job), now=T0, error="down", max_retries=3)
    retried = leases.retry(exhausted, now=T0 + 5)
    assert (retried.state, retried.attempts, retried.lease) == ("pending", 0, None)
    assert retried.errors == exhausted.errors  # the history stays
    with pytest.raises(leases.NotRetryable):
        leases.retry(retried, now=T0 + 6)


# --- per-project hold (pure plan) -------------------------------------------------------------


def _view(job_id: str, project_id: str, created: float) -> JobView:
    return JobView(
        job_id=job_id, project_id=project_id, session_id="s", state="pending", created_at=created
    )


def test_a_held_project_waits_while_others_are_planned() -> None:
    jobs = (_view("job_a", PROJECT_A, T0), _view("job_b", PROJECT_B, T0 + 1))
    held = plan(T0 + 5, PoolState(jobs=jobs, held_until={PROJECT_A: T0 + 30}))
    assert [view.job_id for view in held.claim] == ["job_b"]
    assert held.wake_at == T0 + 30
    later = plan(T0 + 30, PoolState(jobs=jobs, held_until={PROJECT_A: T0 + 30}))
    assert [view.job_id for view in later.claim] == ["job_a", "job_b"]


# --- per-project hold (service, real files and a real lock held by someone else) --------------


def _pending_job(projects_dir: Path, project_id: str, job_id: str, created: float) -> None:
    directory = projects_dir / project_id
    ensure_directories(directory)
    job = new_job(
        job_id=job_id,
        project_id=project_id,
        session_id="s",
        turn_id=job_id,
        source="user: we deploy with make",
        source_digest="0" * 64,
        source_bytes=27,
        source_truncated=False,
        now=created,
    )
    write_job(directory, job)


async def test_a_lock_failure_holds_that_project_only_for_reschedule_s(tmp_path: Path) -> None:
    projects_dir = tmp_path / "projects"
    old_umask = os.umask(0o077)
    try:
        _pending_job(projects_dir, PROJECT_A, "job_" + "a" * 32, T0)  # the oldest
        _pending_job(projects_dir, PROJECT_B, "job_" + "b" * 32, T0 + 1)
    finally:
        os.umask(old_umask)
    clock = SteppedClock(T0 + 10)
    errors: list[tuple[str, str]] = []
    service = CaptureService(
        projects_dir=projects_dir,
        auto_memory=AutoMemorySwitch(tmp_path / "config.toml", Config()),
        config=Config(extraction=ExtractionConfig(reschedule_s=30.0)),
        clock=clock,
        record_error=lambda kind, message: errors.append((kind, message)),
        lock_timeout=0.05,
    )
    await service.leases.load()
    other_process = filelock.FileLock(str(projects_dir / PROJECT_A / LOCK_FILE), thread_local=False)
    other_process.acquire()
    try:
        found = await service.leases.claim_pass("w", 60.0)
        # project A's lock is held elsewhere: B's job is taken in the same pass, nobody sleeps
        assert found.job is not None and found.job.project_id == PROJECT_B
        assert [kind for kind, _ in errors] == ["job_store"]
        again = await service.leases.claim_pass("w", 60.0)
        assert again.job is None and again.wake_at == T0 + 10 + 30.0
        clock.value = T0 + 39.9
        assert (await service.leases.claim_pass("w", 60.0)).job is None  # still held
    finally:
        other_process.release()
    clock.value = T0 + 40.0
    found = await service.leases.claim_pass("w", 60.0)
    assert found.job is not None and found.job.job_id == "job_" + "a" * 32
    stored = read_job(projects_dir / PROJECT_A, found.job.job_id)
    assert stored is not None and (stored.state, stored.attempts) == ("leased", 0)


async def test_a_publish_the_projects_lock_holds_up_is_retried_while_its_lease_runs(
    tmp_path: Path,
) -> None:
    """A provider's answer waits for the project's lock while the lease runs, as this daemon
    times it: the wall clock set a day forward meanwhile (the job file's expiry reads as past)
    does not make the worker throw the answer away."""
    projects_dir = tmp_path / "projects"
    job_id = "job_" + "a" * 32
    old_umask = os.umask(0o077)
    try:
        _pending_job(projects_dir, PROJECT_A, job_id, T0)
    finally:
        os.umask(old_umask)
    clock = SettableClock(T0 + 10)
    service = CaptureService(
        projects_dir=projects_dir,
        auto_memory=AutoMemorySwitch(tmp_path / "config.toml", Config()),
        config=Config(),
        clock=clock,
        record_error=lambda kind, message: None,
        lock_timeout=0.05,
    )
    await service.leases.load()
    found = await service.leases.claim_pass("w", 60.0)
    assert found.job is not None and found.job.lease is not None
    pool = WorkerPool(service.leases, build_provider(ExtractionConfig(), {}), workers=0)
    output = '{"category": "project", "fact": "Deploys run make release."}'
    other_process = filelock.FileLock(str(projects_dir / PROJECT_A / LOCK_FILE), thread_local=False)
    other_process.acquire()
    try:
        clock.set_wall(86400.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pool._publish, job_id, found.job.lease.token, output)
            await trio.sleep(0.3)  # a few of its waits for the lock run out meanwhile
            other_process.release()
    finally:
        if other_process.is_locked:
            other_process.release()
    stored = read_job(projects_dir / PROJECT_A, job_id)
    assert stored is not None and stored.state == "committed"


async def test_retries_at_the_same_moment_never_fill_the_backlog_past_its_cap(
    tmp_path: Path,
) -> None:
    projects_dir = tmp_path / "projects"
    old_umask = os.umask(0o077)
    try:
        for number in range(limits.ACTIVE_JOBS_PER_PROJECT - 1):
            _pending_job(projects_dir, PROJECT_A, f"job_{number:032x}", T0 + number)
        exhausted = [f"job_{'e' * 31}{n}" for n in range(2)]
        for job_id in exhausted:
            _pending_job(projects_dir, PROJECT_A, job_id, T0 - 1)
            job = read_job(projects_dir / PROJECT_A, job_id)
            assert job is not None
            write_job(projects_dir / PROJECT_A, msgspec.structs.replace(job, state="exhausted"))
    finally:
        os.umask(old_umask)
    service = CaptureService(
        projects_dir=projects_dir,
        auto_memory=AutoMemorySwitch(tmp_path / "config.toml", Config()),
        config=Config(),
        clock=SteppedClock(T0 + 100),
        record_error=lambda kind, message: None,
    )
    await service.leases.load()
    assert service.index.active_jobs(PROJECT_A) == limits.ACTIVE_JOBS_PER_PROJECT - 1
    outcomes: list[str] = []

    async def retry(job_id: str) -> None:
        try:
            outcomes.append((await service.leases.retry(job_id)).state)
        except Conflict:
            outcomes.append("refused")

    async with trio.open_nursery() as nursery:
        for job_id in exhausted:
            nursery.start_soon(retry, job_id)
    assert sorted(outcomes) == ["pending", "refused"]
    assert service.index.active_jobs(PROJECT_A) == limits.ACTIVE_JOBS_PER_PROJECT


async def test_failed_attempts_back_off_so_a_brief_outage_does_not_exhaust_a_job(
    tmp_path: Path,
) -> None:
    projects_dir = tmp_path / "projects"
    job_id = "job_" + "c" * 32
    old_umask = os.umask(0o077)
    try:
        _pending_job(projects_dir, PROJECT_A, job_id, T0)
    finally:
        os.umask(old_umask)
    clock = SteppedClock(T0)
    service = CaptureService(
        projects_dir=projects_dir,
        auto_memory=AutoMemorySwitch(tmp_path / "config.toml", Config()),
        config=Config(extraction=ExtractionConfig(retry_base_s=2.0, retry_max_s=300.0)),
        clock=clock,
        record_error=lambda kind, message: None,
    )
    await service.leases.load()
    waits = []
    for _ in range(3):  # the provider is down: three failed attempts, each backed off
        found = await service.leases.claim_pass("w", 60.0)
        assert found.job is not None and found.job.lease is not None
        failed = await service.leases.fail(job_id, found.job.lease.token, "connection refused")
        assert failed.state == "pending"
        ready_at = failed.not_before_time()
        assert ready_at is not None
        waits.append(ready_at - clock.value)
        nothing = await service.leases.claim_pass("w", 60.0)
        assert nothing.job is None and nothing.wake_at == ready_at  # no back-to-back retry
        clock.value = ready_at
    for number, wait in enumerate(waits, start=1):
        full = 2.0 * 2 ** (number - 1)
        assert full / 2 - 0.002 <= wait <= full + 0.002, waits
    # 1 s of outage would have used all four attempts back to back; now 7 s and more pass
    assert sum(waits) >= 3.5
    found = await service.leases.claim_pass("w", 60.0)
    assert found.job is not None and found.job.attempts == 3  # the last retry is still there


# --- supervised background tasks ------------------------------------------------------------


def test_restart_delays_double_then_cap_and_start_over_after_a_long_run() -> None:
    delays = [None]
    for _ in range(10):
        delays.append(restart_delay(delays[-1], ran_s=0.1))
    assert delays[1:5] == [RESTART_FIRST_DELAY_S, 2.0, 4.0, 8.0]
    assert delays[-1] == RESTART_MAX_DELAY_S
    assert restart_delay(RESTART_MAX_DELAY_S, ran_s=3600.0) == RESTART_FIRST_DELAY_S


async def test_a_task_that_crashes_after_starting_is_restarted_and_recorded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runs: list[float] = []
    recorded: list[tuple[str, str]] = []

    async def flaky(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        runs.append(trio.current_time())
        task_status.started()
        if len(runs) <= 2:
            raise RuntimeError("boom")
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        await nursery.start(supervised, "flaky", flaky, lambda k, m: recorded.append((k, m)))
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert len(runs) == 3
    assert [round(b - a, 3) for a, b in itertools.pairwise(runs)] == [1.0, 2.0]
    assert [kind for kind, _ in recorded] == ["background_crashed"] * 2
    assert "flaky" in recorded[0][1] and "RuntimeError" in recorded[0][1]


async def test_a_task_that_keeps_crashing_backs_off_to_the_cap_and_does_not_flood_the_errors(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    daemon = _daemon(tmp_path)
    daemon.record_error("memory_db_corrupt", "memory.sqlite3 is damaged")
    runs: list[float] = []

    async def hopeless(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        runs.append(trio.current_time())
        task_status.started()
        raise OSError(errno.EIO, "Input/output error")

    async with trio.open_nursery() as nursery:
        await nursery.start(supervised, "writer", hopeless, daemon.record_error)
        await trio.sleep(3600)
        nursery.cancel_scope.cancel()
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(runs)]
    assert gaps[:7] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, RESTART_MAX_DELAY_S]
    assert set(gaps[6:]) == {RESTART_MAX_DELAY_S}  # capped, and it keeps being restarted
    assert len(runs) > 55
    crashes = [e for e in daemon.recent_errors if e.kind == "background_crashed"]
    assert len(crashes) == 1  # one crash after another is one entry, kept current
    assert "writer" in crashes[0].message and "OSError" in crashes[0].message
    assert [e.kind for e in daemon.recent_errors] == ["memory_db_corrupt", "background_crashed"]
    daemon.sessions.close()


async def test_a_task_that_returns_is_started_again_and_recorded_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    daemon = _daemon(tmp_path)
    runs: list[float] = []

    async def quitter(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        runs.append(trio.current_time())
        task_status.started()

    async with trio.open_nursery() as nursery:
        await nursery.start(supervised, "purger", quitter, daemon.record_error)
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert [round(b - a, 3) for a, b in itertools.pairwise(runs)] == [1.0, 2.0, 4.0]
    [stopped] = daemon.recent_errors
    assert stopped.kind == "background_stopped" and "purger" in stopped.message
    daemon.sessions.close()


async def test_a_task_that_fails_before_starting_is_a_startup_failure() -> None:
    async def broken(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        raise StorageError("cannot list the projects directory")

    recorded: list[tuple[str, str]] = []
    with pytest.raises(StorageError, match="cannot list"):
        await supervised("broken", broken, lambda k, m: recorded.append((k, m)))
    assert recorded == []


# --- the daemon: background tasks and storage faults on any route ------------------------------


def _daemon(tmp_path: Path) -> Daemon:
    env = {
        "ORCA_HOME": str(tmp_path / "home"),
        "ORCA_CONFIG_DIR": str(tmp_path / "config"),
        "ORCA_SOCKET": str(tmp_path / "run" / "orcad.sock"),
        "HOME": str(tmp_path / "user-home"),
    }
    loaded = LoadedConfig(config=Config(), path=None, unknown_keys=[])
    return Daemon(paths=resolve_paths(env), loaded=loaded, clock=SteppedClock())


async def test_the_daemon_restarts_a_crashed_background_task_and_lists_the_crash(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    daemon = _daemon(tmp_path)
    runs: list[float] = []

    async def writer(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        runs.append(trio.current_time())
        await trio.sleep(5)
        raise OSError(errno.EIO, "Input/output error")

    daemon.background.append(writer)
    async with trio.open_nursery() as nursery:
        await daemon.run_background(nursery)
        await trio.sleep(20)
        nursery.cancel_scope.cancel()
    assert len(runs) >= 3  # crashed at 5 s, back at 6 s, crashed at 11 s, back at 13 s ...
    errors = daemon.status(StatusParams()).recent_errors
    assert {error.kind for error in errors} == {"background_crashed"}
    assert "writer" in errors[-1].message and "OSError" in errors[-1].message
    daemon.sessions.close()


def _raised_from(cause: Exception) -> StorageError:
    """A StorageError as the file helpers raise it: no reason of its own, the OS error as cause."""
    error = StorageError(f"cannot write /m/jobs/x.json: {cause}", path="/m/jobs/x.json")
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("failure", "code", "reason"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/m/jobs/x.json"), -32017, "disk_full"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), -32017, "disk_full"),
        (OSError(errno.EROFS, "Read-only file system"), -32017, "read_only"),
        (sqlite3.OperationalError("database or disk is full"), -32017, "disk_full"),
        (sqlite3.DatabaseError("database disk image is malformed"), -32017, "corrupt"),
        (StorageError("cannot write x", reason="disk_full"), -32017, "disk_full"),
        (
            _raised_from(OSError(errno.ENOSPC, "No space left on device", "/m/jobs/x.json")),
            -32017,
            "disk_full",
        ),
        (_raised_from(sqlite3.DatabaseError("file is not a database")), -32017, "corrupt"),
        (OSError(errno.ENOENT, "No such file or directory"), -32603, None),
        (ValueError("a bug"), -32603, None),
    ],
)
async def test_storage_faults_are_storage_errors_on_any_route_and_are_recorded(
    tmp_path: Path, failure: Exception, code: int, reason: str | None
) -> None:
    daemon = _daemon(tmp_path)

    async def failing_close(params: object) -> object:
        raise failure

    daemon.router = FaultRecordingRouter(daemon.record_error)
    daemon.router.add("session.close", failing_close)
    daemon.router.mark_ready()
    request = {"jsonrpc": "2.0", "id": 1, "method": "session.close"}
    request["params"] = {"session_id": "s", "epoch": 1}
    line = await Dispatcher(daemon.router).handle_line(msgspec.json.encode(request))
    assert line is not None
    error = msgspec.json.decode(line)["error"]
    assert error["code"] == code
    recorded = daemon.status(StatusParams()).recent_errors
    if reason is None:
        assert recorded == []
    else:
        assert error["data"]["reason"] == reason
        assert [(e.kind, e.message.split(":")[0]) for e in recorded] == [
            ("storage", "session.close")
        ]
        assert "/m/jobs/x.json" in error["message"] or failure.args[0] != errno.ENOSPC
    daemon.sessions.close()


def test_a_problem_listed_again_moves_to_the_end_instead_of_crowding_others_out(
    tmp_path: Path,
) -> None:
    daemon = _daemon(tmp_path)
    daemon.record_error("storage", "disk full")
    daemon.record_error("ledger_corrupt", "ledger x")
    daemon.record_error("storage", "disk full")
    assert [e.kind for e in daemon.recent_errors] == ["ledger_corrupt", "storage"]
    daemon.sessions.close()


def test_a_secret_quoted_by_an_error_is_not_listed(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path)
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    daemon.record_error("recall", f"deliberate recall failed: ConnectError: bad token {token}")
    daemon.record_error("embedding", "cannot reach https://me:hunter2secret@embed.example/v1")
    listed = " ".join(e.message for e in daemon.status(StatusParams()).recent_errors)
    assert token not in listed and "hunter2secret" not in listed, listed
    assert "deliberate recall failed" in listed and "embed.example" in listed
    daemon.record_error("recall", f"deliberate recall failed: ConnectError: bad token {token}")
    assert len(daemon.recent_errors) == 2  # the same problem again is still one entry
    daemon.sessions.close()
