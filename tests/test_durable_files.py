"""Durable file writes on real files: exclusive creation by either route, atomic replacement."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from orcad import durable_files
from orcad.durable_files import (
    create_file_exclusively,
    remove_leftover_temps,
    replace_file_atomically,
    temp_beside,
)
from orcad.errors import StorageError

pytestmark = pytest.mark.inprocess

ROUTES = ["unnamed", "temp"]


@pytest.fixture(params=ROUTES)
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "temp":
        monkeypatch.setattr(durable_files, "_O_TMPFILE", None)  # as on a system without it
    elif durable_files._O_TMPFILE is None or not durable_files._PROC_FD_LINKS:
        pytest.skip("this system has no unnamed files (O_TMPFILE and /proc)")
    return str(request.param)


def test_creates_a_private_file_with_exactly_the_data(tmp_path: Path, route: str) -> None:
    old_umask = os.umask(0o022)  # the daemon runs with 077; the file must be private anyway
    try:
        assert create_file_exclusively(tmp_path / "job.json", b"first\n") is True
    finally:
        os.umask(old_umask)
    path = tmp_path / "job.json"
    assert path.read_bytes() == b"first\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["job.json"]  # no temp file left behind


def test_never_replaces_an_existing_file(tmp_path: Path, route: str) -> None:
    path = tmp_path / "job.json"
    path.write_bytes(b"kept\n")
    assert create_file_exclusively(path, b"other\n") is False
    assert path.read_bytes() == b"kept\n"
    assert sorted(os.listdir(tmp_path)) == ["job.json"]


def test_a_missing_directory_is_a_storage_error(tmp_path: Path, route: str) -> None:
    with pytest.raises(StorageError, match="cannot write"):
        create_file_exclusively(tmp_path / "absent" / "job.json", b"x")


def test_replace_swaps_the_whole_content(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    replace_file_atomically(path, b"one\n")
    replace_file_atomically(path, b"two\n")
    assert path.read_bytes() == b"two\n"
    assert sorted(os.listdir(tmp_path)) == ["ledger"]


# --- temps a crash left behind ------------------------------------------------------------------


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    return ended.pid


def test_leftover_temps_go_and_those_being_written_stay(tmp_path: Path) -> None:
    target = tmp_path / "index.sqlite3"
    other = os.getppid()  # a live process that is not this one
    leftovers = [
        f".index.sqlite3.{dead_pid()}-{'a' * 16}.tmp",  # its writer died
        f".index.sqlite3.{dead_pid()}-{'b' * 16}.tmp-journal",  # and SQLite's side file
        f".index.sqlite3.{'c' * 16}.tmp",  # named before temps named their writer
        f".index.sqlite3.{os.getpid()}-{'d' * 16}.tmp",  # this process is not writing it
        f".index.sqlite3.{other}-{'e' * 16}.tmp",  # another process's, but old
    ]
    for name in leftovers:
        (tmp_path / name).write_bytes(b"forgotten text")
    os.utime(tmp_path / leftovers[-1], (1.0, 1.0))
    young = tmp_path / f".index.sqlite3.{other}-{'f' * 16}.tmp"  # another live writer's
    young.write_bytes(b"being written")
    unrelated = tmp_path / f".auto-memory.md.{dead_pid()}-{'a' * 16}.tmp"
    unrelated.write_bytes(b"another file's")
    with temp_beside(target) as writing:
        writing.write_bytes(b"being written here")
        remove_leftover_temps(tmp_path, "index.sqlite3", max_age_s=600.0)
        assert writing.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [writing.name, young.name, unrelated.name]
    )
    remove_leftover_temps(tmp_path, "index.sqlite3", max_age_s=600.0)
    assert not writing.exists()  # its writer is done with it
    assert young.exists() and unrelated.exists()
