"""A forget landing while recall rebuilds a project's index without the project lock."""

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


def test_an_index_rebuilt_from_the_ledger_a_forget_replaced_leaves_no_copy_of_the_fact(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    """Recall rebuilds an index it cannot use from the ledger it read, without the project's
    lock. A forget that writes the ledger and the index meanwhile must not have that rebuild,
    renamed into place after it, bring the forgotten fact back into index.sqlite3."""
    # this test publishes itself; recall ranks by the index alone, so that its one search is
    # the rebuild below
    orca_env.write_config('[extraction]\nworkers = 0\n\n[recall]\nembedding = "none"\n')
    word = "zorblax-heron-5"
    fact = f"The build host is named {word}."
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    project = tmp_path / "project"
    project.mkdir()
    session = daemon.call("session.open", {"cwd": os.path.realpath(project)})
    publish_as_a_worker(daemon, session, "t1", fact)
    inspected = daemon.call("projects.inspect", {"cwd": os.path.realpath(project)})
    forget = {
        "project_id": inspected.project.id,
        "candidate_id": inspected.ledger.candidates[0].id,
        "revision": inspected.ledger.revision,
    }
    index = orca_env.memory_root / "projects" / inspected.project.id / "index.sqlite3"
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    answers: dict[str, Any] = {}
    callers: list[threading.Thread] = []

    def call(name: str, method: str, params: dict[str, Any]) -> None:
        answers[name] = daemon.call(method, params)

    def start(name: str, method: str, params: dict[str, Any]) -> None:
        caller = threading.Thread(target=call, args=(name, method, params))
        caller.start()
        callers.append(caller)

    # another process holds the index (a backup of it, say): recall cannot read it, rebuilds
    # it from the ledger it read, and waits on the lock for the vectors to carry over
    holder = sqlite3.connect(index, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        # a prompt the fact does not answer: this recall holds none of it, so is not taken again
        start("recall", "recall", {**ids, "turn_id": "t2", "prompt": "how are the migrations run?"})
        time.sleep(0.5)
        start("forget", "ledger.forget", forget)  # writes the ledger and an index of its own
        callers[-1].join(timeout=30)
        assert answers["forget"].removed
        callers[0].join(timeout=30)
        time.sleep(1.0)  # a recall answered before its search ended: the rebuild goes on
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    directory = index.parent
    holding = [
        path.name
        for path in directory.rglob("*")
        if path.is_file() and word.encode() in path.read_bytes()
    ]
    assert holding == []
    assert (
        word not in daemon.call("recall", {**ids, "turn_id": "t3", "prompt": "build host?"}).context
    )
