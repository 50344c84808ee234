"""Time, injectable so that rules about time are tested without sleeping.

`now` is the wall clock: for what is shown or stored. It can be set back or forward at any
moment (NTP, a user, a virtual machine resumed with an old clock), so a wait kept only in this
process (a deadline, a time to live) is measured on `monotonic`, which never goes back.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never set back: for durations within a process."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return _monotonic()


def _boot_time() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


# Linux's CLOCK_MONOTONIC stops while the machine is suspended; CLOCK_BOOTTIME goes on and is
# never set back either, so a time to live also runs out over a laptop's sleep.
_monotonic = _boot_time if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic


def format_time(seconds: float) -> str:
    """RFC 3339 UTC with milliseconds: 2026-11-30T07:00:00.123Z."""
    # isoformat truncates to milliseconds, as strftime of the parts did, at a third of the cost
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def stamp_after(latest: float | None, now: float) -> float:
    """`now`, or the next millisecond after `latest` (the newest time already stored) when `now`
    is not past it: what is written after the wall clock was set back still reads as newer."""
    if latest is None or now > latest:
        return now
    return (math.floor(latest * 1000.0) + 1) / 1000.0


def parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
