"""The one async interface every extraction provider implements."""

from __future__ import annotations

from typing import Protocol


class ProviderError(Exception):
    """A failed provider call: counts as a failed attempt.

    `retry_after` is the server's requested back-off in seconds (429/503 Retry-After), if any;
    the worker honours it within the retry policy.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class Provider(Protocol):
    name: str  # "heuristic" | "openai" | "command"
    prompt_version: str  # the extractor prompt's version, recorded in provenance

    @property
    def model(self) -> str:
        """The model name recorded in provenance ("" where none applies)."""
        ...

    async def extract(self, source: str, *, deadline: float) -> str:
        """Return the raw extractor output for one redacted, bounded source.

        `deadline` is an absolute `trio.current_time()` value; the call must give up by then and
        raise ProviderError. Cancellation (trio.Cancelled) must propagate untouched.
        """
        ...
