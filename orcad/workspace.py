"""Canonical workspace roots: the Git top level when inside a repository, else the directory."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Workspace:
    id: str  # sha256 of the canonical root; no client can choose it
    root: str


def canonical_directory(cwd: str) -> Path:
    """The real path of an absolute, existing directory; ValueError otherwise."""
    path = Path(cwd)
    if not path.is_absolute():
        raise ValueError(f"cwd must be an absolute path, got {cwd!r}")
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise ValueError(f"cwd {cwd!r} is not an existing directory")
    return real


def git_top_level(directory: Path) -> Path | None:
    """The nearest enclosing directory with a `.git` entry (a directory, or a worktree's file)."""
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def workspace_id(root: Path) -> str:
    return hashlib.sha256(str(root).encode()).hexdigest()


def derive_workspace(cwd: str) -> Workspace:
    directory = canonical_directory(cwd)
    root = git_top_level(directory) or directory
    return Workspace(id=workspace_id(root), root=str(root))
