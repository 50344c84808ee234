"""The versioned extractor prompt shared by the chat-completions and command providers.

The text lives in `extractor-prompt.md` next to this module. Any change to that file that could
change what a model extracts must bump PROMPT_VERSION: the version is recorded in every job's
provenance so a ledger entry can be traced to the instructions that produced it.
"""

from __future__ import annotations

import functools
from importlib import resources

PROMPT_VERSION = "extract-v1"
PROMPT_RESOURCE = "extractor-prompt.md"
EXCHANGE_MARKER = "=== EXCHANGE ==="


@functools.cache
def prompt_text() -> str:
    """The instructions, read once from the package (a wheel or a source tree alike)."""
    return (
        resources.files(__package__).joinpath(PROMPT_RESOURCE).read_text(encoding="utf-8").strip()
    )


def render_messages(source: str) -> list[dict[str, str]]:
    """Chat-completions messages: the instructions as system, the redacted exchange as user."""
    return [
        {"role": "system", "content": prompt_text()},
        {"role": "user", "content": f"{EXCHANGE_MARKER}\n{source}"},
    ]


def render_text(source: str) -> str:
    """One plain-text prompt for a command that reads stdin."""
    return f"{prompt_text()}\n\n{EXCHANGE_MARKER}\n{source}\n"
