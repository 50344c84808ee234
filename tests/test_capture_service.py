"""The capture service in process (real files under tmp_path): the barrier recall uses."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import trio
import trio.testing

from orcad import limits, sqlite_worker
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.capture import admission, inspection, leases, schedule
from orcad.capture.jobstore import job_path
from orcad.capture.problems import ErrorRecorder
from orcad.capture.records import Provenance
from orcad.capture.schedule import JobView
from orcad.capture.service import CaptureService
from orcad.capture.source import build_source
from orcad.clock import SystemClock
from orcad.config import Config, ExtractionConfig
from orcad.errors import NotFound
from orcad.identity import ProjectIdentity, derive_project
from orcad.session_snapshot import Session
from protocol.errors import RemoteError
from protocol.types import ProjectsInspectParams
from tests.deliberate_helpers import InProcessDaemon, SettableClock
from tests.test_recall_daemon import add_facts

pytestmark = pytest.mark.inprocess

PROVENANCE = Provenance(provider="test", model="", prompt_version="v")
PROJECT_ID = "a" * 64


def make_service(
    tmp_path: Path, max_retries: int = 3, record_error: ErrorRecorder | None = None
) -> CaptureService:
    return CaptureService(
        projects_dir=tmp_path / "projects",
        auto_memory=AutoMemorySwitch(tmp_path / "config.toml", Config()),
        config=Config(extraction=ExtractionConfig(max_retries=max_retries)),
        clock=SystemClock(),
        record_error=record_error or (lambda kind, message: None),
    )


def session(tmp_path: Path, session_id: str) -> Session:
    return Session(
        session_id=session_id,
        epoch=1,
        cwd=str(tmp_path),
        workspace_id="w",
        workspace_root=str(tmp_path),
        project_id=PROJECT_ID,
        project_identity=str(tmp_path),
        project_root=str(tmp_path),
        history="persistent",
        mode="normal",
        interactive=True,
        auto_approve=False,
        bare=False,
        auto_memory=True,
        opened_at=0.0,
    )


def project_dir(tmp_path: Path) -> Path:
    return tmp_path / "projects" / PROJECT_ID


async def admit(service: CaptureService, owner: Session, turn_id: str) -> str:
    source = build_source([("user", f"message of {turn_id}")])
    assert source is not None
    admission = await service.admissions.admit(owner, turn_id, source)
    assert admission.job_id is not None
    return admission.job_id


async def finish(service: CaptureService, job_id: str) -> None:
    job = await service.leases.claim_job(job_id, "w", 60.0)
    assert job is not None and job.lease is not None
    await service.leases.publish(job_id, job.lease.token, "NOTHING", PROVENANCE)


async def test_no_queued_job_means_none(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    assert await service.wait_session_jobs("ses_1", PROJECT_ID, 5.0) == "none"
    job_id = await admit(service, session(tmp_path, "ses_1"), "t1")
    await finish(service, job_id)
    assert (
        await service.wait_session_jobs("ses_1", PROJECT_ID, 5.0) == "none"
    )  # committed: not queued


async def test_clear_once_every_job_queued_at_the_call_is_finished(tmp_path: Path) -> None:
    service = make_service(tmp_path, max_retries=0)
    mine = session(tmp_path, "ses_1")
    first = await admit(service, mine, "t1")
    second = await admit(service, mine, "t2")
    other = await admit(service, session(tmp_path, "ses_2"), "t1")
    results: list[str] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            results.append(await service.wait_session_jobs("ses_1", PROJECT_ID, 30.0))

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        later = await admit(service, mine, "t3")  # admitted after the call: not waited for
        await finish(service, first)
        assert results == []
        job = await service.leases.claim_job(second, "w", 60.0)
        assert job is not None and job.lease is not None
        await service.leases.fail(second, job.lease.token, "boom")  # exhausted is finished too
    assert results == ["clear"]
    assert {view.job_id: view.state for view in service.index.views()}[later] == "pending"
    assert {view.job_id: view.state for view in service.index.views()}[other] == "pending"


async def test_a_job_admitted_while_the_barrier_looks_at_the_files_is_not_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the barrier first looks in a thread for job files gone; a turn admitted meanwhile came
    # after the call, and was waited for until the whole bound (a flaky test showed it)
    service = make_service(tmp_path)
    mine = session(tmp_path, "ses_1")
    first = await admit(service, mine, "t1")
    admitted: list[str] = []
    looked = trio.Event()
    look = service.drop_vanished

    async def look_while_a_turn_is_admitted(views: list[JobView], project_ids: list[str]) -> None:
        admitted.append(await admit(service, mine, "t2"))
        await look(views, project_ids)
        looked.set()

    monkeypatch.setattr(service, "drop_vanished", look_while_a_turn_is_admitted)
    results: list[str] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            results.append(await service.wait_session_jobs("ses_1", PROJECT_ID, 30.0))

        nursery.start_soon(wait)
        await looked.wait()
        await finish(service, first)
    assert results == ["clear"]
    assert {view.job_id: view.state for view in service.index.views()}[admitted[0]] == "pending"


async def test_the_newest_exhausted_jobs_are_kept_and_the_one_past_the_limit_is_deleted(
    tmp_path: Path,
) -> None:
    # a provider down for weeks exhausts every turn's job: their files (each turn's text) were
    # kept for good
    service = make_service(tmp_path, max_retries=0)
    owner = session(tmp_path, "ses_1")
    committed = await admit(service, owner, "done")
    await finish(service, committed)
    exhausted = []
    for number in range(limits.ENDED_JOBS_KEPT + 1):
        job_id = await admit(service, owner, f"t{number}")
        job = await service.leases.claim_job(job_id, "w", 60.0)
        assert job is not None and job.lease is not None
        await service.leases.fail(job_id, job.lease.token, "provider down")
        exhausted.append(job_id)
        if number == limits.ENDED_JOBS_KEPT - 1:  # at the limit: every one kept
            assert all(job_path(project_dir(tmp_path), kept).exists() for kept in exhausted)
    states = {view.job_id: view.state for view in service.index.views()}
    assert exhausted[0] not in states
    assert not job_path(project_dir(tmp_path), exhausted[0]).exists()
    assert [states[job_id] for job_id in exhausted[1:]] == ["exhausted"] * limits.ENDED_JOBS_KEPT
    assert all(job_path(project_dir(tmp_path), kept).exists() for kept in exhausted[1:])
    assert states[committed] == "committed"  # committed ones have their own count


async def test_times_out_while_work_is_backlogged(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    service = make_service(tmp_path)
    await admit(service, session(tmp_path, "ses_1"), "t1")
    before = trio.current_time()
    assert await service.wait_session_jobs("ses_1", PROJECT_ID, 5.0) == "timed_out"
    assert trio.current_time() - before == 5.0


async def test_the_barrier_reads_the_auto_memory_switch_again_only_once_its_files_changed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a recall asks at every turn while its session has a job queued: reading project.json
    # and both config files (in a thread) each time was on every turn's path
    reads: list[str] = []
    read = AutoMemorySwitch.read

    def recording_read(switch: AutoMemorySwitch, root: str) -> bool:
        reads.append(root)
        return read(switch, root)

    monkeypatch.setattr(AutoMemorySwitch, "read", recording_read)
    service = make_service(tmp_path)
    await admit(service, session(tmp_path, "ses_1"), "t1")
    user_config = tmp_path / "config.toml"
    user_config.write_text(f"auto_memory = false\ntrusted_projects = [{str(tmp_path)!r}]\n")
    for _turn in range(3):  # the queued job may not run: not waited for
        assert await service.wait_session_jobs("ses_1", PROJECT_ID, 5.0) == "none"
    assert reads == [str(tmp_path)]
    user_config.write_text(f"auto_memory = true\ntrusted_projects = [{str(tmp_path)!r}]\n")
    assert await service.wait_session_jobs("ses_1", PROJECT_ID, 5.0) == "timed_out"  # at once
    (tmp_path / ".orca").mkdir()
    (tmp_path / ".orca" / "config.toml").write_text("auto_memory = false\n")  # the project's
    assert await service.wait_session_jobs("ses_1", PROJECT_ID, 5.0) == "none"
    assert await service.wait_session_jobs("ses_1", PROJECT_ID, 5.0) == "none"
    assert reads == [str(tmp_path)] * 3


async def test_inspect_by_cwd_derives_the_project_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deriving a project from a directory reads the file system (Git config): not on the loop."""
    service = make_service(tmp_path)
    loop_thread = threading.current_thread()
    threads: list[threading.Thread] = []

    def recording_derive_project(root: Path) -> ProjectIdentity:
        threads.append(threading.current_thread())
        return derive_project(root)

    monkeypatch.setattr(inspection, "derive_project", recording_derive_project)
    workdir = tmp_path / "repo"
    workdir.mkdir()
    with pytest.raises(NotFound):  # nothing stored for it yet
        await inspection.inspect_project(service, ProjectsInspectParams(cwd=str(workdir)))
    assert len(threads) == 1 and threads[0] is not loop_thread


async def test_a_job_file_removed_behind_the_daemon_is_skipped_and_forgotten(
    tmp_path: Path,
) -> None:
    """A claim pass must not fail (a worker would die of it) when a queued job's file is gone,
    e.g. the project directory was moved away; the job leaves the index."""
    service = make_service(tmp_path)
    mine = session(tmp_path, "ses_1")
    gone = await admit(service, mine, "t1")
    kept = await admit(service, mine, "t2")
    (service.projects.project_dir(mine.project_id) / "jobs" / f"{gone}.json").unlink()
    found = await service.leases.claim_pass("w", 60.0)
    assert found.job is not None and found.job.job_id == kept
    assert [view.job_id for view in service.index.views()] == [kept]
    assert service.index.job_counts().leased == 1 and service.index.job_counts().pending == 0


async def test_a_job_file_orcad_removes_under_the_lock_is_not_taken_for_one_moved_away(
    tmp_path: Path,
) -> None:
    # retention and ledger.forget remove committed job files, then drop them from the index,
    # under the project's lock: a listing meanwhile must not report them as moved or deleted
    recorded: list[str] = []
    service = make_service(tmp_path, record_error=lambda kind, message: recorded.append(kind))
    job_id = await admit(service, session(tmp_path, "ses_1"), "t1")
    await finish(service, job_id)
    async with trio.open_nursery() as nursery, service.projects.lock(PROJECT_ID):
        job_path(service.projects.project_dir(PROJECT_ID), job_id).unlink()
        nursery.start_soon(service.drop_vanished_everywhere)  # a jobs.list meanwhile
        await trio.testing.wait_all_tasks_blocked()
        await trio.testing.wait_all_threads_completed()
        await trio.testing.wait_all_tasks_blocked()
        service.index.drop([job_id])
    assert recorded == []
    assert job_id not in service.index


async def test_counts_kept_on_every_change_match_a_recount(tmp_path: Path) -> None:
    service = make_service(tmp_path, max_retries=0)
    owner = session(tmp_path, "ses_counts")
    jobs = [await admit(service, owner, f"turn-{n}") for n in range(5)]
    await finish(service, jobs[0])
    failing = await service.leases.claim_job(jobs[1], "w", 60.0)
    assert failing is not None and failing.lease is not None
    await service.leases.fail(
        jobs[1], failing.lease.token, "provider broke"
    )  # no retries: exhausted
    leased = await service.leases.claim_job(jobs[2], "w", 60.0)
    assert leased is not None

    def recount(state: str) -> int:
        return sum(1 for view in service.index.views() if view.state == state)

    counts = service.index.job_counts()
    assert (counts.pending, counts.leased, counts.committed, counts.exhausted) == (2, 1, 1, 1)
    assert counts.pending == recount("pending") and counts.exhausted == recount("exhausted")
    assert service.index.active_jobs(owner.project_id) == 3  # pending and leased; not exhausted
    await service.leases.load()  # re-indexing from the files changes nothing
    assert service.index.job_counts() == counts
    assert service.index.active_jobs(owner.project_id) == 3


async def test_a_forget_whose_snapshot_purge_must_wait_is_applied_and_purged_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_worker, "SQLITE_BUSY_TIMEOUT_MS", 50)  # a lock fails fast
    orca = InProcessDaemon(tmp_path, SettableClock())
    try:
        workdir = tmp_path / "ws"
        await trio.Path(workdir).mkdir()
        opened = await orca.call("session.open", {"cwd": str(workdir)})
        project_id = opened["project"]["id"]
        add_facts(orca.paths.projects_dir / project_id, ["The staging cluster is quartz-lemur-17."])
        session = {"session_id": opened["session_id"], "epoch": opened["epoch"]}
        turn = {**session, "turn_id": "t1", "prompt": "which staging cluster is it?"}
        assert "quartz-lemur-17" in (await orca.call("recall", turn))["context"]
        await orca.features.recall.snapshots.flush()
        inspected = await orca.call("projects.inspect", {"project_id": project_id})
        forget = {
            "project_id": project_id,
            "candidate_id": inspected["ledger"]["candidates"][0]["id"],
            "revision": inspected["ledger"]["revision"],
        }
        holder = sqlite3.connect(orca.paths.state_db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the state database's lock
        try:
            result = await orca.call("ledger.forget", forget)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert result["removed"]  # it was: the answer says so, not -32603
        assert "quartz-lemur-17" not in (await orca.call("recall", turn))["context"]
        await orca.features.recall.snapshots.flush()  # what the writer does next
        assert b"quartz-lemur-17" not in orca.paths.state_db.read_bytes()
    finally:
        await orca.aclose()


async def test_a_lease_still_runs_when_the_wall_clock_is_set_forward(tmp_path: Path) -> None:
    """A worker that holds a lease for a minute publishes within that minute, though the wall
    clock was set a day forward meanwhile: its answer is not thrown away, nor its attempt
    counted as failed."""
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock)
    try:
        job_id = await _admitted_turn(orca, tmp_path / "ws")
        claimed = await orca.call("jobs.claim", {"worker": "w", "lease_s": 60})
        clock.set_wall(86400.0)
        clock.advance(30.0)
        assert (await orca.call("jobs.claim", {"worker": "other", "lease_s": 60}))["job"] is None
        output = '{"category": "project", "fact": "Deploys run make release."}'
        token = claimed["lease"]["token"]
        publish = {"job_id": job_id, "token": token, "output": output, "provider": "p"}
        assert (await orca.call("jobs.publish", {**publish, "model": ""}))["added"] == 1
    finally:
        await orca.aclose()


async def test_the_job_committed_last_is_kept_when_the_wall_clock_was_set_back(
    tmp_path: Path,
) -> None:
    """Retention keeps the newest committed job files: the one committed after the wall clock
    went back is the newest, not the first to go."""
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock)
    output = '{"category": "project", "fact": "Deploys run make release."}'
    try:
        job_ids = []
        for n in range(limits.COMMITTED_JOBS_KEPT + 1):
            if n == limits.COMMITTED_JOBS_KEPT:
                clock.set_wall(-86400.0)  # NTP, a user or a resumed machine sets it back
            job_ids.append(await _admitted_turn(orca, tmp_path / "ws", f"t{n}"))
            claimed = await orca.call("jobs.claim", {"worker": "w", "lease_s": 60})
            token = claimed["lease"]["token"]
            publish = {"job_id": job_ids[-1], "token": token, "output": output}
            await orca.call("jobs.publish", {**publish, "provider": "p", "model": ""})
            clock.advance(1.0)
        kept = {job["job_id"] for job in (await orca.call("jobs.list", {}))["jobs"]}
        assert kept == set(job_ids[1:])
    finally:
        await orca.aclose()


@pytest.mark.parametrize("wall_step", [-86400.0, 86400.0])
async def test_the_barrier_waits_for_an_external_worker_about_whatever_the_wall_clock_does(
    tmp_path: Path, wall_step: float
) -> None:
    """With no built-in workers, a recall waits for its session's queued job while an external
    worker asked for one within lease_s and its back-off is over, also when the wall clock was
    set back or forward since."""
    clock = SettableClock()
    config = Config(extraction=ExtractionConfig(workers=0, lease_s=60.0))
    orca = InProcessDaemon(tmp_path, clock, config)
    capture = orca.features.capture
    try:
        job_id = await _admitted_turn(orca, tmp_path / "ws")
        claimed = await orca.call("jobs.claim", {"worker": "w", "lease_s": 60})
        token = claimed["lease"]["token"]
        await orca.call("jobs.fail", {"job_id": job_id, "token": token, "error": "x"})
        clock.set_wall(wall_step)  # NTP, a user or a resumed machine sets the clock
        clock.advance(limits.DEFAULT_RETRY_BASE_S)  # the back-off (1 to 2 s) is over
        project_id = capture.index.project_of(job_id)
        waited = await capture.wait_session_jobs("ses_a", project_id, 0.2)
        assert waited == "timed_out"  # it was waited for, not skipped ("none")
        clock.advance(60.0)  # no jobs.claim for lease_s: no external worker about now
        assert await capture.wait_session_jobs("ses_a", project_id, 0.2) == "none"
    finally:
        await orca.aclose()


async def _admitted_turn(orca: InProcessDaemon, workdir: Path, turn_id: str = "t1") -> str:
    await trio.Path(workdir).mkdir(exist_ok=True)
    opened = await orca.call("session.open", {"cwd": str(workdir), "session_id": "ses_a"})
    turn = {
        "session_id": opened["session_id"],
        "epoch": opened["epoch"],
        "turn_id": turn_id,
        "outcome": "succeeded",
        "verifier": "passed",
        "transcript_committed": True,
        "messages": [
            {"role": "user", "content": "We deploy with make release."},
            {"role": "assistant", "content": "Understood."},
        ],
    }
    job_id: str = (await orca.call("turn.completed", turn))["job_id"]
    return job_id


@pytest.mark.parametrize("wait", ["lease", "back_off"])
async def test_a_wait_ends_on_time_when_the_wall_clock_is_set_back(
    tmp_path: Path, wait: str
) -> None:
    """A lease whose worker died, or a back-off after a failed attempt, ends when it was set
    to, not a day later, when the wall clock was set back a day meanwhile; the worker that
    held the lease is fenced."""
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock)
    try:
        job_id = await _admitted_turn(orca, tmp_path / "ws")
        claimed = await orca.call("jobs.claim", {"worker": "gone", "lease_s": 60})
        token = claimed["lease"]["token"]
        before, after = 59.5, 60.5  # the lease's end
        if wait == "back_off":
            await orca.call("jobs.fail", {"job_id": job_id, "token": token, "error": "x"})
            # the first back-off is half to all of the base, by its jitter
            before, after = limits.DEFAULT_RETRY_BASE_S / 2 - 0.1, limits.DEFAULT_RETRY_BASE_S
        clock.set_wall(-86400.0)  # NTP, a user or a resumed machine sets the clock back a day
        clock.advance(before)
        assert (await orca.call("jobs.claim", {"worker": "w", "lease_s": 60}))["job"] is None
        clock.advance(after - before)
        again = await orca.call("jobs.claim", {"worker": "w", "lease_s": 60})
        assert again["job"] is not None and again["job"]["job_id"] == job_id
        assert again["lease"]["token"] > token
        stale = {"job_id": job_id, "token": token, "output": "", "provider": "p", "model": ""}
        with pytest.raises(RemoteError) as caught:
            await orca.call("jobs.publish", stale)
        assert caught.value.error.code == -32011
        fresh = {**stale, "token": again["lease"]["token"]}
        fresh["output"] = '{"category": "project", "fact": "Deploys run make release."}'
        assert (await orca.call("jobs.publish", fresh))["added"] == 1
    finally:
        await orca.aclose()


@pytest.mark.parametrize("wait", ["lease", "back_off"])
async def test_a_wait_over_stays_over_when_the_wall_clock_is_set_back_later(
    tmp_path: Path, wait: str
) -> None:
    """A lease that ran out, or a back-off that is over, is not revived by the wall clock set
    back afterwards, though a claim pass over other projects came in between: the job is
    claimable at once, and the worker whose lease ran out is fenced."""
    clock = SettableClock()
    orca = InProcessDaemon(tmp_path, clock, Config(extraction=ExtractionConfig(workers=0)))
    try:
        job_id = await _admitted_turn(orca, tmp_path / "ws")
        claimed = await orca.call("jobs.claim", {"worker": "gone", "lease_s": 60})
        token = claimed["lease"]["token"]
        if wait == "back_off":
            await orca.call("jobs.fail", {"job_id": job_id, "token": token, "error": "x"})
        clock.advance(61.0)  # over on both clocks
        elsewhere = {"worker": "w", "lease_s": 60, "project_id": "0" * 64}
        assert (await orca.call("jobs.claim", elsewhere))["job"] is None
        clock.set_wall(-86400.0)  # NTP, a user or a resumed machine sets the clock back a day
        if wait == "lease":
            renew = {"job_id": job_id, "token": token, "lease_s": 60}
            with pytest.raises(RemoteError) as caught:
                await orca.call("jobs.renew", renew)
            assert caught.value.error.code == -32011
        again = await orca.call("jobs.claim", {"worker": "w", "lease_s": 60})
        assert again["job"] is not None and again["job"]["job_id"] == job_id
    finally:
        await orca.aclose()


async def _left_waiting(
    tmp_path: Path, clock: SettableClock, config: Config, wait: str
) -> tuple[str, int]:
    """An orcad, since stopped, that left a job waiting: on a 60 s lease of a worker gone
    (`wait` "lease"), or on the back-off after that worker's failure ("back_off"). The job's
    id and the lease's token."""
    before = InProcessDaemon(tmp_path, clock, config)
    try:
        job_id = await _admitted_turn(before, tmp_path / "ws")
        claimed = await before.call("jobs.claim", {"worker": "gone", "lease_s": 60})
        token = claimed["lease"]["token"]
        if wait == "back_off":
            await before.call("jobs.fail", {"job_id": job_id, "token": token, "error": "x"})
    finally:
        await before.aclose()
    return job_id, token


@pytest.mark.parametrize("wait", ["lease", "back_off"])
async def test_a_wait_found_at_a_start_ends_on_time_when_the_wall_clock_is_set_back_later(
    tmp_path: Path, wait: str
) -> None:
    """A lease an external worker took from the orcad before, or a back-off that orcad set,
    ends when it was due though the wall clock was set back a day after the start that found
    it: the job is not held for that day, and the worker whose lease ran out is fenced."""
    clock = SettableClock()
    config = Config(extraction=ExtractionConfig(workers=0))
    job_id, token = await _left_waiting(tmp_path, clock, config, wait)
    orca = InProcessDaemon(tmp_path, clock, config)
    try:
        await orca.features.capture.leases.load()  # as a start does
        clock.set_wall(-86400.0)  # NTP, a user or a resumed machine sets the clock back a day
        clock.advance(61.0)
        if wait == "lease":
            renew = {"job_id": job_id, "token": token, "lease_s": 60}
            with pytest.raises(RemoteError) as caught:
                await orca.call("jobs.renew", renew)
            assert caught.value.error.code == -32011
        again = await orca.call("jobs.claim", {"worker": "w", "lease_s": 60})
        assert again["job"] is not None and again["job"]["job_id"] == job_id
        assert again["lease"]["token"] > token
    finally:
        await orca.aclose()


@pytest.mark.parametrize("wait", ["lease", "back_off"])
async def test_a_wait_found_at_a_start_lasts_no_longer_than_set_when_the_clock_went_back_between(
    tmp_path: Path, wait: str
) -> None:
    """A lease or a back-off written while the wall clock ran a day ahead, then set right while
    no orcad ran, ends when it was due, not a day later: the orcad started since takes it for
    no longer than it was set for."""
    clock = SettableClock()
    config = Config(extraction=ExtractionConfig(workers=0))
    clock.set_wall(86400.0)  # a day ahead: a resumed machine, a wrong hardware clock
    job_id, token = await _left_waiting(tmp_path, clock, config, wait)
    clock.set_wall(-86400.0)  # set right before the next start
    orca = InProcessDaemon(tmp_path, clock, config)
    try:
        await orca.features.capture.leases.load()  # as a start does
        clock.advance(61.0)
        again = await orca.call("jobs.claim", {"worker": "w", "lease_s": 60})
        assert again["job"] is not None and again["job"]["job_id"] == job_id
        assert again["lease"]["token"] > token
        stale = {"job_id": job_id, "token": token, "output": "", "provider": "p", "model": ""}
        with pytest.raises(RemoteError) as caught:
            await orca.call("jobs.publish", stale)
        assert caught.value.error.code == -32011
    finally:
        await orca.aclose()


async def test_the_job_exhausted_last_is_kept_when_the_wall_clock_was_set_back(
    tmp_path: Path,
) -> None:
    """Retention keeps the newest exhausted job files, for `orcactl jobs retry`: the one that
    gave up after the wall clock went back is the newest, not the first to go."""
    clock = SettableClock()
    config = Config(extraction=ExtractionConfig(workers=0, max_retries=0))
    orca = InProcessDaemon(tmp_path, clock, config)
    try:
        job_ids = []
        for n in range(limits.ENDED_JOBS_KEPT + 1):
            if n == limits.ENDED_JOBS_KEPT:
                clock.set_wall(-86400.0)  # NTP, a user or a resumed machine sets it back
            job_ids.append(await _admitted_turn(orca, tmp_path / "ws", f"t{n}"))
            claimed = await orca.call("jobs.claim", {"worker": "w", "lease_s": 60})
            token = claimed["lease"]["token"]
            failed = {"job_id": job_ids[-1], "token": token, "error": "provider down"}
            assert (await orca.call("jobs.fail", failed))["state"] == "exhausted"
            clock.advance(1.0)
        kept = {job["job_id"] for job in (await orca.call("jobs.list", {}))["jobs"]}
        assert kept == set(job_ids[1:])
    finally:
        await orca.aclose()


@pytest.mark.parametrize(
    ("messages", "inline"),
    [
        ([("user", "we use pnpm")], True),
        ([("user", "x" * 9000)], False),  # long: redacted in a thread
        ([("user", "")] * 63 + [("user", "we use pnpm")], True),  # 64: the most inline
        ([("user", "")] * 64 + [("user", "we use pnpm")], False),  # many, each its own steps
    ],
    ids=["short", "long", "64 messages", "65 messages"],
)
async def test_a_turns_source_is_built_off_the_event_loop_unless_it_is_small(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    messages: list[tuple[str, str]],
    inline: bool,
) -> None:
    threads: list[threading.Thread] = []

    def recording(messages: list[tuple[str, str]]) -> object:
        threads.append(threading.current_thread())
        return build_source(messages)

    monkeypatch.setattr(admission, "build_source", recording)
    built = await make_service(tmp_path).admissions.build_source(messages)
    assert built is not None
    assert (threads == [threading.main_thread()]) == inline


async def test_a_job_an_orcad_died_running_is_claimed_by_the_builtin_workers_alone(
    tmp_path: Path,
) -> None:
    """A job with a recovery counted runs with no other built-in lease beside it: claimed once
    none is held, nothing claimed while it runs, and nothing younger started while it waits."""
    clock = SettableClock()

    def start() -> CaptureService:
        return CaptureService(
            projects_dir=tmp_path / "projects",
            auto_memory=AutoMemorySwitch(tmp_path / "config.toml", Config()),
            config=Config(),
            clock=clock,
            record_error=lambda kind, message: None,
        )

    before = start()
    mine = session(tmp_path, "ses_1")
    made: list[str] = []
    for number in range(4):  # oldest first, a second apart
        made.append(await admit(before, mine, f"t{number}"))
        clock.advance(1.0)
    plain, dead_a, dead_b, young = made
    for number, job_id in enumerate((dead_a, dead_b)):  # an orcad died holding these two
        assert await before.leases.claim_job(job_id, leases.builtin_owner("gone", number), 60.0)
    service = start()
    await service.leases.load()  # as a start does: both back to pending, one recovery each
    views = {view.job_id: view for view in service.index.views()}
    assert [views[j].recoveries for j in (plain, dead_a, dead_b, young)] == [0, 1, 1, 0]
    held = schedule.BuiltinLeases()

    async def builtin_pass(number: int) -> str | None:
        owner = leases.builtin_owner(service.leases.instance, number)
        found = await service.leases.claim_pass(owner, 60.0, running=held.ids(), builtin=held)
        return None if found.job is None else found.job.job_id

    assert await builtin_pass(0) == plain
    # the next in order runs alone: it waits for `plain`, and `young` does not start before it
    assert await builtin_pass(1) is None
    held.let_go(plain)
    claimed: list[str | None] = []

    async def worker(number: int) -> None:
        claimed.append(await builtin_pass(number))

    async with trio.open_nursery() as nursery:  # two workers at once: only one may start it
        nursery.start_soon(worker, 1)
        nursery.start_soon(worker, 2)
    assert sorted(claimed, key=str) == [None, dead_a]  # ("None" sorts first)
    assert await builtin_pass(3) is None  # nothing beside it while it runs
    # an external worker (jobs.claim) is not held back: its run cannot take orcad down
    external = await service.leases.claim_pass("ext", 60.0)
    assert external.job is not None and external.job.job_id == dead_b
    held.let_go(dead_a)
    assert await builtin_pass(3) == young
    assert held.ids() == {young}
