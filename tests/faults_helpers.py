"""Shared tools for the fault tests: a small real file system, and filling it up."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def can_mount() -> str | None:
    """Why a tmpfs cannot be mounted here (None when it can)."""
    if os.geteuid() != 0:
        return "mounting a small tmpfs needs root"
    if shutil.which("mount") is None:
        return "no mount(8) on this machine"
    return None


@contextlib.contextmanager
def small_filesystem(
    directory: Path, size: str = "4m", inodes: int | None = None
) -> Iterator[Path]:
    """A real tmpfs of `size` (and of at most `inodes` files, when given) mounted on
    `directory` (mode 0700), unmounted afterwards."""
    reason = can_mount()
    if reason is not None:
        pytest.skip(reason)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    limit = "" if inodes is None else f",nr_inodes={inodes}"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700{limit}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def fill_up(directory: Path) -> Path:
    """Write a file in `directory` until the file system has no byte left; its path."""
    path = directory / "filler.bin"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):  # big writes, then the last few bytes
            chunk = b"\0" * size
            while True:
                try:
                    os.write(descriptor, chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    finally:
        os.close(descriptor)
    return path


def use_up_inodes(directory: Path) -> Path:
    """Make empty files in a new directory in `directory` until the file system has no inode
    left (bytes free, but no file can be made); that directory."""
    where = directory / "inode-filler"
    where.mkdir()
    number = 0
    while True:
        try:
            (where / str(number)).touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
            return where
        number += 1
