"""A forget racing a recall that reads its turn's snapshot back from the state database."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.external_worker import publish_as_a_worker
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon


def test_a_snapshot_read_back_while_its_fact_is_forgotten_is_not_recalled_again(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """After a restart a turn's snapshot is only on disk. A continuation reading it while a
    forget drops it (both queued behind the snapshot writer, here held by another process's
    lock on the state database) must not keep the forgotten fact for the turn's next recall."""
    orca_env.write_config("[extraction]\nworkers = 0\n")  # this test publishes itself
    word = "quartz-lemur-17"
    fact = f"The staging cluster is named {word}."
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    project = tmp_path / "project"
    project.mkdir()
    session = daemon.call("session.open", {"cwd": os.path.realpath(project)})
    publish_as_a_worker(daemon, session, "t1", fact)
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    turn = {**ids, "turn_id": "t2", "prompt": "what is the staging cluster named?"}
    assert word in daemon.call("recall", turn).context
    daemon.restart()  # a clean stop writes the snapshot; now it is on disk only
    inspected = daemon.call("projects.inspect", {"cwd": os.path.realpath(project)})
    forget = {
        "project_id": inspected.project.id,
        "candidate_id": inspected.ledger.candidates[0].id,
        "revision": inspected.ledger.revision,
    }
    holder = sqlite3.connect(orca_env.memory_root / "daemon-state.sqlite3", isolation_level=None)
    answers: dict[str, Any] = {}
    callers: list[threading.Thread] = []

    def call(name: str, method: str, params: dict[str, Any]) -> None:
        answers[name] = daemon.call(method, params)

    def start(name: str, method: str, params: dict[str, Any]) -> None:
        caller = threading.Thread(target=call, args=(name, method, params))
        caller.start()
        callers.append(caller)

    try:
        holder.execute("BEGIN IMMEDIATE")  # a backup, say, holds the lock for a moment
        # a new turn's snapshot: the writer waits for the lock, holding its connection
        daemon.call("recall", {**ids, "turn_id": "t3", "prompt": "anything else?"})
        time.sleep(1.0)
        start("continuation", "recall", turn)  # reads the snapshot behind the writer
        time.sleep(0.3)
        start("forget", "ledger.forget", forget)  # its purge waits behind that read
        time.sleep(0.3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    for caller in callers:
        caller.join(timeout=30)
    assert answers["forget"].removed
    assert word not in daemon.call("recall", turn).context
