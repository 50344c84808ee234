"""The auto_memory switch as of now: the user's config.toml, then a trusted project's own
`.orca/config.toml` (the project wins), read from disk whenever it is asked for, so that an
edit counts for the next session opened and for the workers at once.

A file that cannot be read or parsed at that moment (a typo, an editor halfway through
writing it) keeps the value it last had whole, as the README says: falling back on the
config orcad started with instead would switch automatic memory back on for a user who had
switched it off since, and capture their turns.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import structlog

from orcad.config import Config, ProjectConfig, parse_config, read_config_text
from orcad.errors import StartupError

log = structlog.get_logger("orcad.config")


def project_config_file(project_root: str) -> Path:
    """A project's own config.toml (read only when the user's config trusts the project)."""
    return Path(project_root) / ".orca" / "config.toml"


class AutoMemorySwitch:
    """The switch, with each file's last good reading. Read from worker threads: each reading
    is replaced whole, in one assignment, so a reader sees one or the other."""

    def __init__(self, config_file: Path, startup: Config) -> None:
        self.config_file = config_file
        self._user = startup  # the user's config as last read whole
        self._projects: dict[str, bool | None] = {}  # a trusted project's own value, likewise
        self._reported: set[tuple[str, ...]] = set()  # (file, its unknown keys) logged

    def read(self, project_root: str) -> bool:
        """Whether automatic memory is on for the project at `project_root` (blocking: reads
        files)."""
        user = self._read_user()
        enabled = user.auto_memory
        # roots as the daemon derives a project's root: links and `..` resolved
        if project_root in {os.path.realpath(root) for root in user.trusted_projects}:
            own = self._read_project(project_root)
            if own is not None:
                enabled = own
        return enabled

    def _read_user(self) -> Config:
        try:
            self._user, _unknown = parse_config(
                read_config_text(self.config_file), str(self.config_file)
            )
        except FileNotFoundError:
            self._user = Config()
        except (OSError, UnicodeDecodeError, StartupError) as exc:
            log.warning("config.unreadable_at_open", path=str(self.config_file), error=str(exc))
        return self._user

    def _read_project(self, project_root: str) -> bool | None:
        path = project_config_file(project_root)
        try:
            project, unknown = parse_config(read_config_text(path), str(path), ProjectConfig)
            self._projects[project_root] = project.auto_memory
            if unknown and (str(path), *unknown) not in self._reported:
                # a typo (`auto_memroy`) would leave the switch as the user's, unsaid: said
                # once for each file and set of keys, not at every session
                self._reported.add((str(path), *unknown))
                log.warning(
                    "config.project_unknown_keys",
                    path=str(path),
                    keys=unknown,
                    known=sorted(field.name for field in msgspec.structs.fields(ProjectConfig)),
                )
        except FileNotFoundError:
            self._projects[project_root] = None
        except (OSError, UnicodeDecodeError, StartupError) as exc:
            log.warning("config.project_unreadable", path=str(path), error=str(exc))
        return self._projects.get(project_root)
