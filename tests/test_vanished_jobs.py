"""Job files moved or deleted while orcad runs (a project directory moved aside): against a
real daemon, with an external worker that took a job and never came back."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import RemoteError
from tests.external_worker import fact_output, turn_params
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon


def _start(orca_env: OrcaEnv, factory: list[DaemonProcess]) -> DaemonProcess:
    orca_env.write_config("[extraction]\nworkers = 0\n")  # only the external worker claims
    process = DaemonProcess(orca_env)
    factory.append(process)
    return process.start()


def _held_job(daemon: DaemonProcess, tmp_path: Path, name: str) -> tuple[Any, str]:
    """A session and its job, leased to an external worker that then died."""
    repo = tmp_path / name
    repo.mkdir()
    session = daemon.call("session.open", {"cwd": os.path.realpath(repo)})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "ext", "lease_s": 600.0})
    assert claimed.job.job_id == job_id
    return session, job_id


def test_a_job_whose_project_directory_was_moved_away_is_no_longer_listed(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = _start(orca_env, daemon_factory)
    moved, _moved_job = _held_job(daemon, tmp_path, "moved")
    kept, kept_job = _held_job(daemon, tmp_path, "kept")
    projects = orca_env.memory_root / "projects"
    shutil.move(projects / moved.project.id, tmp_path / "trash")
    assert [job.job_id for job in daemon.call("jobs.list", {}).jobs] == [kept_job]
    listed = [project.id for project in daemon.call("projects.list", {}).projects]
    assert listed == [kept.project.id]
    status = daemon.call("daemon.status")
    assert (status.jobs.leased, status.projects) == (1, 1)
    gone = [error for error in status.recent_errors if error.kind == "job_files_gone"]
    assert len(gone) == 1 and moved.project.id in gone[0].message
    assert "1 job file(s) moved or deleted" in gone[0].message


def test_a_recall_does_not_wait_for_a_job_whose_file_is_gone(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = _start(orca_env, daemon_factory)
    session, _job_id = _held_job(daemon, tmp_path, "repo")
    shutil.rmtree(orca_env.memory_root / "projects" / session.project.id)
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    recalled = daemon.call("recall", {**ids, "turn_id": "t2", "prompt": "which package manager"})
    assert recalled.barrier == "none"  # not "timed_out" after waiting for it in vain
    assert daemon.call("daemon.status").jobs.leased == 0


def test_a_worker_whose_project_directory_was_moved_away_does_not_make_it_again(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # a publish (or a claim of a queued job) made the directory again, empty: a project with no
    # identity was listed, and moving the directory back put it inside the new one
    daemon = _start(orca_env, daemon_factory)
    repo = tmp_path / "repo"
    repo.mkdir()
    session = daemon.call("session.open", {"cwd": os.path.realpath(repo)})
    held = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    claimed = daemon.call("jobs.claim", {"worker": "ext", "lease_s": 600.0})
    assert claimed.job.job_id == held
    daemon.call("turn.completed", turn_params(session, "t2", "We deploy with make."))
    directory = orca_env.memory_root / "projects" / session.project.id
    shutil.move(directory, tmp_path / "aside")
    published = {"job_id": held, "token": claimed.lease.token, "provider": "x", "model": "y"}
    with pytest.raises(RemoteError) as refused:
        daemon.call("jobs.publish", {**published, "output": fact_output("We use pnpm.")})
    assert refused.value.kind == "not_found"
    assert not directory.exists()
    assert "is gone" in refused.value.error.message
    assert daemon.call("jobs.claim", {"worker": "ext", "lease_s": 600.0}).job is None
    assert not directory.exists()
    assert daemon.call("projects.list").projects == []
    shutil.move(tmp_path / "aside", directory)
    assert (directory / "project.json").is_file()


def test_a_damaged_job_file_deleted_or_restored_is_listed_as_it_is_without_a_restart(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = _start(orca_env, daemon_factory)
    repo = tmp_path / "repo"
    repo.mkdir()
    session = daemon.call("session.open", {"cwd": os.path.realpath(repo)})
    jobs_dir = orca_env.memory_root / "projects" / session.project.id / "jobs"
    restored = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    deleted = daemon.call("turn.completed", turn_params(session, "t2", "We use yarn.")).job_id
    backup = (jobs_dir / f"{restored}.json").read_bytes()
    daemon.stop()
    for job_id in (restored, deleted):
        (jobs_dir / f"{job_id}.json").write_bytes(b'{"schema": "orcad.job/1", "job_id"')
    daemon.start()

    def damaged() -> list[str]:
        return sorted(found.job_id for found in daemon.call("jobs.list", {}).damaged)

    assert damaged() == sorted([restored, deleted])
    assert daemon.call("daemon.status").jobs.damaged == 2
    (jobs_dir / f"{deleted}.json").unlink()  # given up, as the advice says
    assert daemon.call("daemon.status").jobs.damaged == 1
    assert damaged() == [restored]
    (jobs_dir / f"{restored}.json").write_bytes(backup)  # restored from a backup
    assert daemon.call("daemon.status").jobs.damaged == 0
    assert damaged() == []
    assert [job.job_id for job in daemon.call("jobs.list", {}).jobs] == [restored]
    claimed = daemon.call("jobs.claim", {"worker": "ext", "lease_s": 60.0})
    assert claimed.job.job_id == restored  # its job is no longer held


def test_a_damaged_job_file_gone_with_its_project_directory_is_no_longer_counted(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    daemon = _start(orca_env, daemon_factory)
    repo = tmp_path / "repo"
    repo.mkdir()
    session = daemon.call("session.open", {"cwd": os.path.realpath(repo)})
    directory = orca_env.memory_root / "projects" / session.project.id
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    daemon.stop()
    (directory / "jobs" / f"{job_id}.json").write_bytes(b'{"schema": "orcad.job/1", "job_id"')
    daemon.start()
    assert daemon.call("daemon.status").jobs.damaged == 1
    shutil.move(directory, tmp_path / "aside")
    # daemon.status alone (`orcactl status`), before anything lists the jobs
    assert daemon.call("daemon.status").jobs.damaged == 0
    assert daemon.call("jobs.list", {}).damaged == []
