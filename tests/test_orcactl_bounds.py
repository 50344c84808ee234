"""orcactl's own bounds at their edges: what `-` reads of stdin, and when orcad.log rotates."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from orcactl.arguments import STDIN_TEXT_MAX_CHARS, text_or_stdin, utf8_text
from orcactl.connect import CommandError, rotate_daemon_log
from orcad.log import DAEMON_LOG_ROTATE_BYTES

pytestmark = pytest.mark.pure


def test_dash_reads_stdin_up_to_its_bound_and_not_one_character_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at_bound = "é" * STDIN_TEXT_MAX_CHARS  # characters, not bytes
    monkeypatch.setattr("sys.stdin", io.StringIO(at_bound))
    assert text_or_stdin("-", utf8_text) == at_bound
    monkeypatch.setattr("sys.stdin", io.StringIO(at_bound + "x"))
    with pytest.raises(CommandError, match=f"more than {STDIN_TEXT_MAX_CHARS} characters"):
        text_or_stdin("-", utf8_text)
    assert text_or_stdin("a fact", utf8_text) == "a fact"  # not '-': stdin is not read


def test_orcad_log_rotates_only_past_its_bound(tmp_path: Path) -> None:
    log = tmp_path / "orcad.log"
    log.write_bytes(b"x" * DAEMON_LOG_ROTATE_BYTES)
    rotate_daemon_log(log)
    assert log.stat().st_size == DAEMON_LOG_ROTATE_BYTES
    assert not (tmp_path / "orcad.log.1").exists()
    with log.open("ab") as grown:
        grown.write(b"x")
    rotate_daemon_log(log)
    assert not log.exists()
    assert (tmp_path / "orcad.log.1").stat().st_size == DAEMON_LOG_ROTATE_BYTES + 1
    rotate_daemon_log(log)  # none there: nothing to do, no error
