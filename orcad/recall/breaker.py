"""When an embedding endpoint stops answering, stop asking it for a while.

Recall embeds the prompt (and any record written since the backfill's last pass) through the
endpoint within its deadline, and falls back to lexical ranking when that fails. A server that is
down answers at once, but one that hangs (a remote host gone from the network, a server stuck
loading a model) costs the whole deadline on every call: up to three calls per recall, on every
prompt. After a failure the endpoint is left alone for a cool-down that doubles with each failure
in a row (EMBEDDING_COOLDOWN_S up to EMBEDDING_COOLDOWN_MAX_S, or longer when the server asks with
Retry-After); then one caller tries it while the others still skip it, and its first answer
(an embedding, or a refusal: a server that refuses is up) closes the breaker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from orcad.limits import EMBEDDING_COOLDOWN_MAX_S, EMBEDDING_COOLDOWN_S


class EndpointBreaker:
    """Shared by every thread that calls one endpoint: recall's and the backfill's."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self._failures = 0  # in a row
        self._resting_until = 0.0  # monotonic
        self._trying = False  # a caller is trying the endpoint after its rest
        self._last_error = ""

    def resting(self) -> str | None:
        """Why the endpoint must not be called now, or None when it may be. After a rest only
        one caller is let through, until `succeeded` or `failed` says how its call went."""
        with self._lock:
            if not self._failures:
                return None
            now = self._monotonic()
            if now < self._resting_until:
                return (
                    f"{self._last_error} (failed {self._failures} time(s) in a row; "
                    f"asked again in {self._resting_until - now:.1f} s)"
                )
            if self._trying:
                return f"{self._last_error} (being asked again now)"
            self._trying = True
            return None

    def succeeded(self) -> None:
        """The endpoint answered (with vectors, or by refusing what was sent)."""
        with self._lock:
            self._failures = 0
            self._trying = False

    def failed(self, error: str, retry_after: float | None = None) -> None:
        """The endpoint did not answer usefully: rest it, longer after each failure in a row,
        and at least `retry_after` seconds if the server asked for that (within the cap)."""
        with self._lock:
            self._failures += 1
            rest = min(EMBEDDING_COOLDOWN_MAX_S, EMBEDDING_COOLDOWN_S * 2 ** (self._failures - 1))
            if retry_after is not None:
                rest = min(EMBEDDING_COOLDOWN_MAX_S, max(rest, retry_after))
            self._resting_until = self._monotonic() + rest
            self._trying = False
            self._last_error = error
