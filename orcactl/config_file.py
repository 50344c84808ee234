"""The user's config.toml as orcactl reads it: with orcad's load_config, but a path that is not
a regular file (a FIFO, a device, a directory) is reported, never opened; reading a FIFO waits
for a writer that may never come, and `status`, `doctor` or `provider test` would wait with it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from orcad.config import LoadedConfig, load_config
from orcad.errors import StartupError


def load_user_config(path: Path) -> LoadedConfig:
    try:
        mode: int | None = os.stat(path).st_mode
    except OSError:
        mode = None  # missing (defaults apply) or unreadable: load_config says which
    if mode is not None and not stat.S_ISREG(mode):
        raise StartupError(f"{path}: not a regular file")
    return load_config(path)
