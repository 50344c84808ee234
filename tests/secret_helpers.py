"""What the secret detector's tests share."""

from __future__ import annotations

from orcad.secrets import redact


def gone(text: str, *values: str) -> str:
    """`text` redacted, having checked that none of `values` is left in it."""
    redacted = redact(text)
    for value in values:
        assert value not in redacted, redacted
    return redacted
