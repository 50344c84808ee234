"""The `orcactl` executable. `orcactl hook ...` runs on every prompt of an agent, so it goes
straight to the hook runner, which imports only the standard library; everything else loads
the full command line."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.umask(0o077)  # every file and directory orcactl creates is private to the user
    argv = sys.argv[1:]
    if argv[:1] == ["hook"]:
        from orcactl.hooks.runner import run  # noqa: PLC0415

        sys.exit(run(argv[1:]))
    from orcactl.main import main as full_main  # noqa: PLC0415

    full_main()
