"""Whether Codex reads a project's `.codex/` files (its config.toml and hooks.json).

Codex (0.171) loads a project's `.codex/` only when the user trusts the project: a
`[projects."<path>"] trust_level = "trusted"` entry in the user's config.toml (merged over the
system's `/etc/codex/config.toml`). For the `.codex/` of a directory it looks the path up as
an exact string, first the directory's own path with symlinks resolved (then as given), then
the project root's, then the repository's root for trust: the directory holding the nearest
`.git`, or the main checkout of a linked worktree. The first entry found decides; no other
parent's entry counts, nor a spelling through a symlink (Codex runs in the resolved directory).
Without one, or with `untrusted`, the files are read but disabled: orca's MCP server and hooks
there are never started.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from orcactl.agent_configs import Unparseable, toml_read
from orcad.regular_files import read_regular_file

SYSTEM_CONFIG = Path("/etc/codex/config.toml")
TRUSTED = "trusted"
UNTRUSTED = "untrusted"


@dataclass(frozen=True)
class ProjectTrust:
    level: str | None  # the trust_level of the entry that decided, None without one
    key: str  # that entry's path, or the one Codex asks to be trusted
    user_config: Path
    # the config.toml whose entry decided: the user's, or the system's when the user's has
    # none for that path (None without one)
    decided_by: Path | None = None

    @property
    def trusted(self) -> bool:
        return self.level == TRUSTED

    def reason(self) -> str:
        """Why Codex does not read the project's files (for an untrusted project)."""
        if self.level is None:
            return f"{self.user_config} does not trust {self.key}"
        source = self.decided_by or self.user_config
        if self.level == UNTRUSTED:
            return f"{source} marks {self.key} untrusted"
        return (
            f"{source} gives {self.key} trust_level = {json.dumps(self.level)}, which "
            "Codex does not accept (it then refuses to start)"
        )

    def fix(self) -> str:
        if self.level is None:
            return (
                f"add to {self.user_config} the table `[projects.{toml_string(self.key)}]` with "
                f"`trust_level = {json.dumps(TRUSTED)}`, or start Codex in the project and "
                'answer "Yes, continue" when it asks whether you trust it'
            )
        if self.decided_by not in (None, self.user_config):
            # the user's config.toml is read over the system's, entry by entry
            return (
                f"add to {self.user_config} the table `[projects.{toml_string(self.key)}]` with "
                f"`trust_level = {json.dumps(TRUSTED)}`: it overrides the entry in "
                f"{self.decided_by}"
            )
        return (
            f'set trust_level = "trusted" under [projects.{toml_string(self.key)}] in '
            f"{self.user_config}"
        )


def toml_string(text: str) -> str:
    """`text` as a TOML basic string, in ASCII: a character outside the Basic Multilingual
    Plane as `\\U` and eight hex digits (JSON's pair of `\\u` escapes is no TOML)."""
    escaped = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    pieces = []
    for char in text:
        code = ord(char)
        if char in escaped:
            pieces.append(escaped[char])
        elif code < 0x20 or 0x7F <= code <= 0xFFFF:
            pieces.append(f"\\u{code:04x}")
        elif code > 0xFFFF:
            pieces.append(f"\\U{code:08x}")
        else:
            pieces.append(char)
    return '"' + "".join(pieces) + '"'


def _lossy(path: str) -> str:
    """A path as Codex spells it in config.toml: bytes that are not UTF-8 as U+FFFD."""
    return os.fsencode(path).decode("utf-8", "replace")


def _keys(path: Path) -> list[str]:
    """The spellings Codex looks a directory up by: symlinks resolved, then as given."""
    given = _lossy(str(path))
    real = _lossy(os.path.realpath(path))
    return [real] if real == given else [real, given]


def trust_root(directory: Path) -> Path | None:
    """The root Codex judges a repository's trust by: the directory holding the nearest `.git`
    at or above `directory`, or, when that `.git` is a linked worktree's file
    (`gitdir: <repo>/.git/worktrees/<name>`), the main checkout. None outside a repository,
    and for a `.git` file pointing anywhere else."""
    for candidate in (directory, *directory.parents):
        dot_git = candidate / ".git"
        if not os.path.exists(dot_git):
            continue
        if dot_git.is_dir():
            return candidate
        try:  # (a FIFO there is never waited on)
            text = read_regular_file(dot_git, 64 * 1024).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        pointer = text.strip()
        if not pointer.startswith("gitdir:") or not pointer[len("gitdir:") :].strip():
            return None
        git_dir = Path(os.path.normpath(candidate / pointer[len("gitdir:") :].strip()))
        if git_dir.parent.name != "worktrees":
            return None
        return git_dir.parent.parent.parent
    return None


def _levels(text: str, path: Path) -> dict[str, str]:
    """The trust level of each `[projects."<path>"]` entry a config.toml sets."""
    projects = toml_read(text, path).get("projects")
    levels: dict[str, str] = {}
    for key, entry in (projects if isinstance(projects, dict) else {}).items():
        level = entry.get("trust_level") if isinstance(entry, dict) else None
        if level is not None:
            levels[key] = level if isinstance(level, str) else json.dumps(level, default=str)
    return levels


def project_trust(project: Path, user_config: Path, user_text: str) -> ProjectTrust:
    """Whether Codex started in `project` (a root as orcad takes it: the Git top level, else
    the directory) reads `project/.codex/`, from the user's config.toml `user_text` (at
    `user_config`) over the system's. Raises agent_configs.Unparseable for a user config.toml
    that does not parse."""
    levels: dict[str, tuple[str, Path]] = {}  # path -> its trust level, and the file setting it
    try:
        system_text = read_regular_file(SYSTEM_CONFIG).decode("utf-8")
        system_levels = _levels(system_text, SYSTEM_CONFIG)
        levels.update((key, (level, SYSTEM_CONFIG)) for key, level in system_levels.items())
    except (OSError, UnicodeDecodeError, Unparseable):  # none, or Codex's own error to report
        pass
    levels.update(
        (key, (level, user_config)) for key, level in _levels(user_text, user_config).items()
    )
    root = trust_root(project)
    for directory in (project, root) if root is not None else (project,):
        for key in _keys(directory):
            if key in levels:
                level, decided_by = levels[key]
                return ProjectTrust(level, key, user_config, decided_by)
    asked = _keys(root if root is not None else project)[0]
    return ProjectTrust(None, asked, user_config)
