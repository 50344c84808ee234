"""Named crash points for crash tests.

A process started with `ORCAD_FAILPOINT=<name>` (several names may be separated by commas)
exits abruptly with status 77 when it reaches `failpoint("<name>")`: no cleanup, no flush,
no `finally` blocks, as close to a power cut as a test can get without a kernel.
Outside tests the variable is unset and a failpoint costs one environment lookup.
"""

from __future__ import annotations

import os

FAILPOINT_ENV = "ORCAD_FAILPOINT"
FAILPOINT_EXIT_STATUS = 77


def armed_failpoints() -> frozenset[str]:
    """The failpoint names this process would stop at."""
    value = os.environ.get(FAILPOINT_ENV, "")
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def failpoint(name: str) -> None:
    """Exit the process at once with status 77 if `name` is armed."""
    if FAILPOINT_ENV in os.environ and name in armed_failpoints():
        os._exit(FAILPOINT_EXIT_STATUS)
