"""Giving the C heap's free pages back to the system (glibc only; elsewhere nothing happens).

glibc returns freed memory to the system only from the top of a heap: a block still held above
freed ones keeps them resident. The daemon frees a good deal in the middle of its heaps (ledgers
read again, indexes rebuilt, facts embedded, over every project it serves): after 7,000 requests
of bench/soak.py over 20 projects, 9 MiB of such pages. `malloc_trim` hands them back.
"""

from __future__ import annotations

import ctypes

import trio

from orcad import limits


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc only)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


async def keep_releasing_freed_memory(
    interval_s: float | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Background task: `release_freed_memory` every `interval_s` (HEAP_RELEASE_INTERVAL_S as
    it is when the task starts, by default), in a worker thread (it walks every arena, holding
    each one's lock for the while)."""
    interval = limits.HEAP_RELEASE_INTERVAL_S if interval_s is None else interval_s
    task_status.started()
    while True:
        await trio.sleep(interval)
        await trio.to_thread.run_sync(release_freed_memory)
