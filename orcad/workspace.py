"""Canonical workspace roots: the Git top level when inside a repository, else the directory."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from orcad.limits import CWD_MAX_BYTES


@dataclass(frozen=True, slots=True)
class Workspace:
    id: str  # sha256 of the canonical root; no client can choose it
    root: str


# Of a cwd quoted in an error, at most this many characters: a client may send a huge one.
QUOTED_CWD_MAX_CHARS = 200


def quoted_cwd(cwd: str) -> str:
    """The cwd as an error message quotes it, its start only when it is long."""
    if len(cwd) <= QUOTED_CWD_MAX_CHARS:
        return repr(cwd)
    return f"{cwd[:QUOTED_CWD_MAX_CHARS]!r}... ({len(cwd)} characters)"


def canonical_directory(cwd: str) -> Path:
    """The real path of an absolute, existing directory; ValueError otherwise, also for one
    that cannot be looked up (too long, not searchable): that is the client's cwd, not a bug."""
    path = Path(cwd)
    if not path.is_absolute():
        raise ValueError(f"cwd must be an absolute path, got {quoted_cwd(cwd)}")
    if "\0" in cwd:  # no path holds one; the OS would only say "embedded null byte"
        raise ValueError(f"cwd {quoted_cwd(cwd)} holds a NUL character; no path can")
    size = len(cwd.encode("utf-8", "surrogatepass"))
    if size > CWD_MAX_BYTES:  # before realpath, whose time grows with the square of it
        raise ValueError(
            f"cwd {quoted_cwd(cwd)} cannot be looked up: {os.strerror(errno.ENAMETOOLONG)} "
            f"({size} bytes; a path has at most {CWD_MAX_BYTES})"
        )
    try:
        real = Path(os.path.realpath(path))
        is_directory = real.is_dir()
    except OSError as exc:
        raise ValueError(f"cwd {quoted_cwd(cwd)} cannot be looked up: {exc.strerror}") from exc
    if not is_directory:
        raise ValueError(f"cwd {quoted_cwd(cwd)} is not an existing directory")
    try:
        str(real).encode("utf-8")
    except UnicodeEncodeError:  # a name in bytes that are not UTF-8, reached through a link
        raise ValueError(
            f"cwd {quoted_cwd(cwd)} is the directory {quoted_cwd(str(real))}, whose path holds "
            "bytes that are not UTF-8; orcad keeps paths as text, so it cannot be a workspace "
            "(rename it, or work in a directory whose path is UTF-8)"
        ) from None
    return real


def git_top_level(directory: Path) -> Path | None:
    """The nearest enclosing directory with a `.git` entry (a directory, or a worktree's file).
    ValueError when one cannot be looked for: guessing past it could pick the wrong workspace.

    A `.git` another user put in a directory every user may write in (`/tmp/.git`) is passed
    over, as Git itself refuses it: it would make every directory below one workspace, with the
    project (and so the memory) another user chose by its origin."""
    for candidate in (directory, *directory.parents):
        try:
            if (candidate / ".git").exists() and not planted_git(candidate):
                return candidate
        except OSError as exc:
            shown = quoted_cwd(str(candidate))
            raise ValueError(f"cannot look for .git in {shown}: {exc.strerror}") from exc
    return None


def planted_git(candidate: Path) -> bool:
    """Whether `candidate/.git` belongs to another user while every user may write in
    `candidate`: anyone could have made it there. OSError when either cannot be looked at."""
    if not candidate.stat().st_mode & stat.S_IWOTH:
        return False
    return (candidate / ".git").lstat().st_uid != os.getuid()


def workspace_id(root: Path) -> str:
    return hashlib.sha256(str(root).encode()).hexdigest()


def derive_workspace(cwd: str) -> Workspace:
    directory = canonical_directory(cwd)
    root = git_top_level(directory) or directory
    return Workspace(id=workspace_id(root), root=str(root))
