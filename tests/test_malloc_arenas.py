"""orcad's C heap keeps to two arenas however many worker threads have run (glibc only)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

pytestmark = pytest.mark.inprocess

# Eight threads alive at once, each holding blocks from the C heap (over pymalloc's 512 bytes),
# then glibc's own account of its arenas (`malloc_info`: one <heap> element per arena).
THREADS = """
import ctypes, os, sys, tempfile, threading
{setup}
barrier = threading.Barrier(8)
held = []
def work():
    held.append([bytes(4096) for _ in range(64)])
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile() as out:
    stream = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(stream))
    libc.fclose(ctypes.c_void_p(stream))
    print(open(out.name).read().count("<heap nr="))
"""


def _glibc() -> bool:
    try:
        ctypes.CDLL("libc.so.6").malloc_info  # noqa: B018
    except (OSError, AttributeError):
        return False
    return True


def arenas(setup: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", THREADS.format(setup=setup)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(done.stdout)


@pytest.mark.skipif(not _glibc(), reason="glibc's arenas")
def test_eight_worker_threads_share_two_arenas() -> None:
    assert arenas("") > 2  # what glibc does unbounded (up to eight arenas per core)
    assert arenas("from orcad.main import limit_malloc_arenas; limit_malloc_arenas()") == 2
