"""Where every file lives, from the environment (ORCA_HOME, ORCA_CONFIG_DIR, ORCA_SOCKET,
XDG_RUNTIME_DIR, XDG_CONFIG_HOME) and platformdirs. Computing paths touches no file.

A relative XDG_* value is ignored, as the XDG Base Directory specification requires (and as
systemd and platformdirs do): the default applies, wherever the process was started."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP = "orca"
DELIBERATE_APP = "orcacode"


@dataclass(frozen=True, slots=True)
class Paths:
    home: Path  # $ORCA_HOME or ~/.orca
    memory_root: Path  # <home>/memory
    config_file: Path  # <home>/config.toml
    deliberate_db: Path
    runtime_dir: Path  # holds the socket and the socket's lock
    socket: Path
    lock_file: Path  # the socket's lock: one daemon per socket path
    socket_from_env: bool  # ORCA_SOCKET chose the socket (its directory is the caller's)

    @property
    def projects_dir(self) -> Path:
        return self.memory_root / "projects"

    @property
    def user_memory_file(self) -> Path:
        return self.memory_root / "user.md"

    @property
    def instance_lock(self) -> Path:
        """One daemon per memory root, whatever socket it serves."""
        return self.memory_root / "orcad.lock"

    @property
    def instance_file(self) -> Path:
        """Who holds the memory root: the daemon's pid and socket, for the next one to name."""
        return self.memory_root / "orcad.pid"

    @property
    def state_db(self) -> Path:
        """Daemon state that survives restarts (session epochs, approval grants)."""
        return self.memory_root / "daemon-state.sqlite3"


def _home_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def expand_home(value: str, env: Mapping[str, str]) -> str:
    """`value` with a leading `~` or `~/` made the home directory, as a shell would have made
    it: one quoted (`export ORCA_HOME="~/.orca"`), or set by a systemd unit, a .env file or an
    agent's config, arrives unexpanded, and a path that starts with `~` was taken for one
    relative to the current directory (`./~/.orca`), so each directory orcad was started from
    had a memory of its own. `orcactl service` and `integrate` already expanded it."""
    if value == "~" or value.startswith("~/"):
        return str(_home_dir(env)) + value[1:]
    return value


def launchd_log_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the launchd agent `orcactl service install` writes sends orcad's output."""
    return _home_dir(os.environ if env is None else env) / "Library" / "Logs" / "orcad.log"


def xdg_directory(env: Mapping[str, str], name: str) -> Path | None:
    """$name when it is an absolute path; unset, empty or relative (invalid by the XDG Base
    Directory specification, which says to ignore it) gives None, for the default."""
    value = env.get(name, "")
    return Path(value) if os.path.isabs(value) else None


# The longest path a Unix socket's address holds: sun_path less its closing NUL (108 bytes on
# Linux, 104 on macOS and the BSDs). No orcad can listen on a longer one.
MACOS_SOCKET_PATH_MAX_BYTES = 103
SOCKET_PATH_MAX_BYTES = 107 if sys.platform.startswith("linux") else MACOS_SOCKET_PATH_MAX_BYTES


def socket_path_problem(path: str, limit: int = SOCKET_PATH_MAX_BYTES) -> str | None:
    """Why no orcad can listen on `path`, when its path is too long for a Unix socket (a long
    XDG_RUNTIME_DIR or ORCA_SOCKET) on this system, or on the one `limit` is of; None when it
    fits. Binding or connecting there fails before any system call, with words that name
    neither the path's length nor its limit."""
    size = len(os.fsencode(path))
    if size <= limit:
        return None
    return (
        f"no orcad can listen on {path}: its path is {size} bytes, and a Unix socket's path may "
        f"have at most {limit}"
    )


# How to choose another socket, said after socket_path_problem's words.
SHORTER_SOCKET = "set ORCA_SOCKET (or give --socket) to a shorter path"


def resolve_paths(env: Mapping[str, str] | None = None) -> Paths:
    env = os.environ if env is None else env
    home = (
        Path(expand_home(env["ORCA_HOME"], env))
        if env.get("ORCA_HOME")
        else _home_dir(env) / ".orca"
    )
    if env.get("ORCA_CONFIG_DIR"):
        deliberate_dir = Path(expand_home(env["ORCA_CONFIG_DIR"], env))
    elif config_home := xdg_directory(env, "XDG_CONFIG_HOME"):
        deliberate_dir = config_home / DELIBERATE_APP
    else:
        deliberate_dir = _home_dir(env) / ".config" / DELIBERATE_APP
    if env.get("ORCA_SOCKET"):
        socket = Path(expand_home(env["ORCA_SOCKET"], env))
        runtime_dir = socket.parent
        from_env = True
    else:
        runtime_dir = runtime_dir_for(env)
        socket = runtime_dir / "orcad.sock"
        from_env = False
    # Named from the socket alone, so a daemon started by orcactl (which passes ORCA_SOCKET)
    # and one started directly on the same socket use the same lock file.
    lock_name = socket.stem if socket.suffix != ".lock" else socket.name
    lock_file = socket.with_name(lock_name + ".lock")
    return Paths(
        home=home,
        memory_root=home / "memory",
        config_file=home / "config.toml",
        deliberate_db=deliberate_dir / "memory.sqlite3",
        runtime_dir=runtime_dir,
        socket=socket,
        lock_file=lock_file,
        socket_from_env=from_env,
    )


def runtime_dir_for(env: Mapping[str, str]) -> Path:
    if runtime_home := xdg_directory(env, "XDG_RUNTIME_DIR"):
        return runtime_home / APP
    with warnings.catch_warnings():
        # platformdirs warns when it falls back to /tmp; the daemon checks that directory strictly.
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir(APP))
