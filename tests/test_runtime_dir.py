"""The runtime directory rules, including platformdirs' fallback under /tmp."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orcad.errors import StartupError
from orcad.paths import Paths, resolve_paths
from orcad.runtime import prepare_runtime_dir

pytestmark = pytest.mark.inprocess


@pytest.fixture
def tmp_parent() -> Iterator[Path]:
    """A directory directly under /tmp, as platformdirs' fallback (/tmp/runtime-<uid>) is."""
    parent = Path(tempfile.mkdtemp(prefix="orcad-runtime-", dir="/tmp"))
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def fallback_paths(parent: Path) -> Paths:
    env = {"HOME": "/nonexistent", "XDG_RUNTIME_DIR": str(parent)}
    return resolve_paths(env)


def test_fallback_under_tmp_is_created_private(tmp_parent: Path) -> None:
    tmp_parent.chmod(0o700)
    paths = fallback_paths(tmp_parent)
    prepare_runtime_dir(paths)
    assert stat.S_IMODE(paths.runtime_dir.stat().st_mode) == 0o700


def test_fallback_parent_open_to_others_is_refused(tmp_parent: Path) -> None:
    tmp_parent.chmod(0o777)  # anyone could have planted names in it
    with pytest.raises(StartupError, match="lets others in"):
        prepare_runtime_dir(fallback_paths(tmp_parent))


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a directory owned by another uid")
def test_fallback_parent_owned_by_another_user_is_refused(tmp_parent: Path) -> None:
    tmp_parent.chmod(0o700)
    os.chown(tmp_parent, 65534, 65534)
    with pytest.raises(StartupError, match="owned by uid 65534"):
        prepare_runtime_dir(fallback_paths(tmp_parent))


def test_fallback_parent_that_is_a_symlink_is_refused(tmp_parent: Path) -> None:
    target = tmp_parent / "real"
    target.mkdir(mode=0o700)
    link = Path(tempfile.mktemp(prefix="orcad-link-", dir="/tmp"))  # noqa: S306 - replaced at once
    link.symlink_to(target)
    try:
        with pytest.raises(StartupError, match="symbolic link"):
            prepare_runtime_dir(fallback_paths(link))
    finally:
        link.unlink()


def test_own_runtime_dir_with_loose_mode_is_tightened(tmp_path: Path) -> None:
    paths = resolve_paths({"HOME": "/nonexistent", "XDG_RUNTIME_DIR": str(tmp_path)})
    paths.runtime_dir.mkdir(mode=0o755)
    paths.runtime_dir.chmod(0o755)
    prepare_runtime_dir(paths)
    assert stat.S_IMODE(paths.runtime_dir.stat().st_mode) == 0o700
