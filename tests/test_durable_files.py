"""Durable file writes on real files: exclusive creation by either route, atomic replacement."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from orcad import durable_files
from orcad.durable_files import create_file_exclusively, replace_file_atomically
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
