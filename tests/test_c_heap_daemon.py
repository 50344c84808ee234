"""A running orcad starts its background task that gives the C heap's freed pages back."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

# orcad as `python -m orcad` runs it, with the release every 0.05 s instead of every 30 s, each
# one noted as a line in the file named by the first argument once it has returned.
NOTING_RELEASES = """\
import sys
import orcad.c_heap, orcad.entry, orcad.limits
orcad.limits.HEAP_RELEASE_INTERVAL_S = 0.05
release = orcad.c_heap.release_freed_memory
noted = sys.argv.pop(1)
def release_and_note():
    release()
    with open(noted, "a") as out:
        out.write("released\\n")
orcad.c_heap.release_freed_memory = release_and_note
orcad.entry.main()
"""


class NotingDaemon(DaemonProcess):
    def __init__(self, orca: OrcaEnv, noted: Path) -> None:
        super().__init__(orca)
        self.noted = noted

    def spawn(self) -> subprocess.Popen[bytes]:
        with open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", NOTING_RELEASES, str(self.noted)],
                env=self.orca.env,
                cwd=self.orca.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        return self.proc


def releases(noted: Path) -> int:
    try:
        return noted.read_text().count("released\n")
    except FileNotFoundError:
        return 0


def test_a_running_daemon_keeps_releasing_freed_memory(
    orca_env: OrcaEnv, tmp_path: Path, daemon_factory: list[DaemonProcess]
) -> None:
    noted = tmp_path / "releases"
    daemon = NotingDaemon(orca_env, noted)
    daemon_factory.append(daemon)
    daemon.start()
    deadline = time.monotonic() + 20
    while releases(noted) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert releases(noted) >= 3, daemon.stderr()  # again and again, not once
    assert daemon.call("daemon.ping") is not None  # serving all the while
    assert daemon.stop(signal.SIGTERM) == 0
