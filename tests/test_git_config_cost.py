"""A repository's `.git/config` is read at every session's open, and an unpacked archive may
hold any: a megabyte of one value continued over one-character lines costs a session's open
a fraction of a second, not the half minute joining it line by line took."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orcad.limits import GIT_FILE_MAX_BYTES
from tests.harness import DaemonProcess

pytestmark = pytest.mark.daemon


def test_an_origin_continued_over_a_megabyte_of_lines_opens_at_once(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    repo = tmp_path / "unpacked"
    (repo / ".git").mkdir(parents=True)
    head = '[remote "origin"]\n\turl = git@github.com:owner/\\\n'
    lines = "r\\\n" * ((GIT_FILE_MAX_BYTES - len(head) - 16) // 3)  # all of it is read
    (repo / ".git" / "config").write_text(head + lines + "repo.git\n")
    started = time.monotonic()
    opened = daemon.call("session.open", {"cwd": str(repo)})
    took = time.monotonic() - started
    assert took < 2.5, took  # 5 s and more when each line copied the value again
    assert opened.project.identity == "github.com/owner/" + "r" * (len(lines) // 3) + "repo"
