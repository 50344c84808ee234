"""Wall-clock time, injectable so that rules about time are tested without sleeping."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


def format_time(seconds: float) -> str:
    """RFC 3339 UTC with milliseconds: 2026-11-30T07:00:00.123Z."""
    # isoformat truncates to milliseconds, as strftime of the parts did, at a third of the cost
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
