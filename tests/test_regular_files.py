"""The reader for files that must be regular, on real files, FIFOs, devices and links."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orcad.regular_files import NotARegularFile, open_regular_file, read_regular_file
from tests.harness import REPO_ROOT

pytestmark = pytest.mark.inprocess


def test_a_regular_file_is_read_whole_or_up_to_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"0123456789")
    assert read_regular_file(path) == b"0123456789"
    assert read_regular_file(path, 4) == b"0123"
    with open_regular_file(path) as file:
        file.seek(-3, os.SEEK_END)
        assert file.read() == b"789"


def test_a_fifo_a_device_and_a_directory_are_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: a blocking open would never return
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(NotARegularFile) as caught:
            read_regular_file(path)
        assert str(caught.value) == f"[Errno {errno.EINVAL}] not a regular file: '{path}'"


def test_a_link_is_followed_unless_told_not_to(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"data")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert read_regular_file(link) == b"data"
    with pytest.raises(OSError) as caught:
        read_regular_file(link, follow_symlinks=False)
    assert caught.value.errno == errno.ELOOP and not isinstance(caught.value, NotARegularFile)
    fifo_link = tmp_path / "fifo-link"
    os.mkfifo(tmp_path / "fifo")
    fifo_link.symlink_to(tmp_path / "fifo")
    with pytest.raises(NotARegularFile):
        read_regular_file(fifo_link)


def test_importing_it_loads_only_the_standard_library() -> None:
    # `orcactl hook` runs on every prompt and reads transcripts through it: no daemon modules
    code = (
        "import sys; before = set(sys.modules); import orcad.regular_files\n"
        "print(sorted(m for m in set(sys.modules) - before"
        " if m.split('.')[0] in ('orcad', 'orcactl', 'protocol', 'msgspec', 'structlog')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "['orcad', 'orcad.regular_files']"
