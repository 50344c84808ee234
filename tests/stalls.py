"""How long the machine kept this process from running while a child was timed.

A test that bounds how long a child process takes to answer in wall-clock time fails whenever a
loaded machine stops running the two for a moment near the end: the child's own timers fire
late, however right its code. `Stalls` measures those moments from here: a thread asks to sleep
a few milliseconds at a time and adds up how much later than asked it woke. A child kept from
running over the same moments could do nothing in them, so a bound may leave them out; a child
that waits or works too long (what such a bound guards) still shows, since this process is run
meanwhile and counts none of it.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

TICK_S = 0.01
# Lateness below this is the scheduler's ordinary jitter, not a stall: it is never left out.
JITTER_S = 0.02


class Stalls:
    """`with Stalls() as stalls:` ... `stalls.seconds`: the time this process was kept from
    running since the block began (each wake-up later than JITTER_S past its tick counts)."""

    def __init__(self) -> None:
        self._seconds = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    @property
    def seconds(self) -> float:
        with self._lock:
            return self._seconds

    def _watch(self) -> None:
        while True:
            before = time.monotonic()
            if self._stop.wait(TICK_S):
                return
            late = time.monotonic() - before - TICK_S
            if late > JITTER_S:
                with self._lock:
                    self._seconds += late

    def __enter__(self) -> Stalls:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
