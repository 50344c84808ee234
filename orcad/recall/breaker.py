"""When an embedding endpoint stops answering, stop asking it for a while.

Recall embeds the prompt (and any record written since the backfill's last pass) through the
endpoint within its deadline, and falls back to lexical ranking when that fails. A server that is
down answers at once, but one that hangs (a remote host gone from the network, a server stuck
loading a model) costs the whole deadline on every call: up to three calls per recall, on every
prompt. After a failure the endpoint is left alone for a rest that doubles with each failure in
a row, from EMBEDDING_COOLDOWN_S up to EMBEDDING_COOLDOWN_MAX_S (a server's Retry-After may ask
for longer, within that cap); then one caller tries it while the others still skip it, and its
first answer (an embedding, or a refusal: a server that refuses is up) ends the rest.

Calls that were already waiting when a rest began fail too, later: they belong to an earlier
round (`admit` tells each call its round), so they neither lengthen the rest nor end a trial.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from orcad.limits import EMBEDDING_COOLDOWN_MAX_S, EMBEDDING_COOLDOWN_S


class Admission(NamedTuple):
    """Whether a call may go to the endpoint now, and the round it belongs to."""

    round: int
    resting: str | None  # why it must not be made, or None when it may


class EndpointBreaker:
    """Shared by the threads that call one endpoint for one purpose (recall's, a publish's or
    the backfill's: orcad.recall.endpoint_embedder.EndpointEmbedder)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self._round = 0  # one more at each rest
        self._failures = 0  # in a row
        self._resting_until = 0.0  # monotonic
        self._trying = False  # a caller is trying the endpoint after its rest
        self._last_error = ""

    def admit(self) -> Admission:
        """Whether the endpoint may be called now. After a rest only one caller is let
        through, until `succeeded` or `failed` says how its call went."""
        with self._lock:
            if not self._failures:
                return Admission(self._round, None)
            now = self._monotonic()
            if now < self._resting_until:
                return Admission(
                    self._round,
                    f"{self._last_error} (failed {self._failures} time(s) in a row; "
                    f"asked again in {self._resting_until - now:.1f} s)",
                )
            if self._trying:
                return Admission(self._round, f"{self._last_error} (being asked again now)")
            self._trying = True
            return Admission(self._round, None)

    def succeeded(self) -> None:
        """The endpoint answered (with vectors, or by refusing what was sent)."""
        with self._lock:
            self._failures = 0
            self._trying = False

    def failed(self, round_: int, error: str, retry_after: float | None = None) -> None:
        """A call of `round_` got no useful answer: rest the endpoint, longer after each failure
        in a row, and at least `retry_after` seconds if the server asked for that (within the
        cap). A call of an earlier round changes nothing: a rest began since it was made."""
        with self._lock:
            if round_ != self._round:
                return
            self._round += 1
            self._failures += 1
            rest = min(EMBEDDING_COOLDOWN_MAX_S, EMBEDDING_COOLDOWN_S * 2 ** (self._failures - 1))
            if retry_after is not None:
                rest = min(EMBEDDING_COOLDOWN_MAX_S, max(rest, retry_after))
            self._resting_until = self._monotonic() + rest
            self._trying = False
            self._last_error = error
