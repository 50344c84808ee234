"""The runtime directory rules, including platformdirs' fallback under /tmp, and the XDG
variables orcad ignores."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from orcactl.hooks.wire import socket_path
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


def test_a_relative_xdg_runtime_dir_is_ignored_by_orcad_and_the_hooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the XDG Base Directory specification calls a relative one invalid: the socket was
    # ./relative/orca/orcad.sock, a different daemon for each directory a client ran in
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ORCA_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    default = resolve_paths({"HOME": str(tmp_path)})
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative")
    paths = resolve_paths({"HOME": str(tmp_path), "XDG_RUNTIME_DIR": "relative"})
    assert paths.runtime_dir.is_absolute()
    assert (paths.runtime_dir, paths.socket) == (default.runtime_dir, default.socket)
    assert socket_path() == str(default.socket)


def test_a_relative_xdg_config_home_is_ignored(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)}
    relative = resolve_paths({**env, "XDG_CONFIG_HOME": "relative"})
    assert relative.deliberate_db == tmp_path / ".config" / "orcacode" / "memory.sqlite3"
    absolute = resolve_paths({**env, "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert absolute.deliberate_db == tmp_path / "cfg" / "orcacode" / "memory.sqlite3"


def test_a_socket_directory_another_start_makes_meanwhile_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two orcads started at once with ORCA_SOCKET (as orcactl starts it) both find its
    directory missing; the one that makes it second failed with "File exists". The other
    start's mkdir is played by making the directory right after the check."""
    runtime = tmp_path / "run" / "orca"
    paths = resolve_paths({"HOME": str(tmp_path), "ORCA_SOCKET": str(runtime / "orcad.sock")})
    assert paths.socket_from_env and paths.runtime_dir == runtime
    real_exists = Path.exists

    def exists_then_made(self: Path) -> bool:
        found = real_exists(self)
        if self == runtime and not found:
            runtime.mkdir(mode=0o700, parents=True)  # the other start, between check and mkdir
        return found

    monkeypatch.setattr(Path, "exists", exists_then_made)
    prepare_runtime_dir(paths)
    assert runtime.is_dir()
