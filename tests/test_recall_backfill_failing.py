"""The background embedding when every pass fails (a full disk, a damaged table): how long it
waits between passes, and what it logs."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from orcad.limits import RECALL_BACKFILL_FAILING_MAX_S, RECALL_BACKFILL_IDLE_S
from orcad.recall.deliberate import Failing

pytestmark = pytest.mark.pure

FULL = "OperationalError: database or disk is full"
DAMAGED = "DatabaseError: database disk image is malformed"


def test_a_pass_that_keeps_failing_is_logged_once_and_waited_on_longer_each_time() -> None:
    failing = Failing()
    with capture_logs() as logs:
        pauses = []
        for _ in range(12):  # every step of every pass fails alike: the disk stays full
            failing.report([FULL, DAMAGED])
            pauses.append(failing.pause())
    assert [entry["error"] for entry in logs] == [FULL, DAMAGED]
    assert pauses[:3] == [
        2 * RECALL_BACKFILL_IDLE_S,
        4 * RECALL_BACKFILL_IDLE_S,
        8 * RECALL_BACKFILL_IDLE_S,
    ]
    assert pauses == sorted(pauses) and pauses[-1] == RECALL_BACKFILL_FAILING_MAX_S


def test_a_new_error_is_logged_and_a_pass_without_one_starts_over() -> None:
    failing = Failing()
    with capture_logs() as logs:
        failing.report([FULL])
        failing.pause()
        failing.pause()
        failing.report([DAMAGED])  # another cause: said at once
        assert failing.pause() == 8 * RECALL_BACKFILL_IDLE_S
        failing.report([])  # the disk has room again
        assert failing.pause() == RECALL_BACKFILL_IDLE_S
        failing.report([FULL])  # and filled again: said again
    assert [entry["error"] for entry in logs] == [FULL, DAMAGED, FULL]
    assert all(entry["event"] == "recall.backfill_failed" for entry in logs)
