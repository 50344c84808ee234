"""The daemon gives the C heap's freed pages back to the system while it runs (glibc only)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

pytestmark = pytest.mark.inprocess

# 64 MiB of 4 KiB blocks, all freed but the last, which keeps them in the middle of the heap;
# then the resident set, polled until it falls by 48 MiB or the seconds given pass, with the
# daemon's background task running beside it (or not).
FREED_BELOW_A_HELD_BLOCK = """
import ctypes, functools, sys, time
import trio
from orcad.c_heap import keep_releasing_freed_memory
from orcad.main import limit_malloc_arenas
limit_malloc_arenas()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]

def resident_mib():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) // 1024

async def main():
    blocks = [libc.malloc(4096) for _ in range(16384)]
    for block in blocks:
        ctypes.memset(block, 1, 4096)
    for block in blocks[:-1]:
        libc.free(block)
    held = resident_mib()
    async with trio.open_nursery() as nursery:
        if sys.argv[1] == "with":
            await nursery.start(functools.partial(keep_releasing_freed_memory, 0.05))
        deadline = time.monotonic() + float(sys.argv[2])
        while resident_mib() > held - 48 and time.monotonic() < deadline:
            await trio.sleep(0.05)
        print(held - resident_mib())
        nursery.cancel_scope.cancel()

trio.run(main)
"""


def _glibc() -> bool:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return False
    return True


def released_mib(task: str, seconds: float) -> int:
    done = subprocess.run(
        [sys.executable, "-c", FREED_BELOW_A_HELD_BLOCK, task, str(seconds)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(done.stdout)


@pytest.mark.skipif(not _glibc(), reason="glibc's malloc_trim")
def test_pages_freed_below_a_held_block_go_back_to_the_system() -> None:
    assert released_mib("without", 2) < 48  # what glibc does on its own: keeps them
    assert released_mib("with", 20) >= 48
