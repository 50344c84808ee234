"""Project identity: which per-project memory directory a working directory belongs to.

Placeholder until Git-origin identity lands: the identity is the canonical workspace root.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ProjectIdentity:
    id: str  # sha256 of `identity`; the project's directory name
    identity: str
    root: str


def derive_project(root: Path) -> ProjectIdentity:
    identity = str(root)
    return ProjectIdentity(
        id=hashlib.sha256(identity.encode()).hexdigest(), identity=identity, root=str(root)
    )
