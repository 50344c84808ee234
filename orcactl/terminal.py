"""Keep stored text from driving the terminal: memory content is user and model text, and an
escape sequence inside a fact must print as text, not move the cursor or retitle the window."""

from __future__ import annotations

import contextlib
import os
from typing import TextIO

from orcad.control_characters import escape_control_characters, escape_to_one_line


def neutralize(text: str) -> str:
    """C0 controls but newline and tab, DEL and C1 controls as `\\xNN`; bidirectional formatting
    characters (which reorder what the reader sees) and tag characters (text no reader sees) as
    `\\uNNNN` and `\\UNNNNNNNN`, as everywhere else a stored text is shown."""
    return escape_control_characters(text)


def one_line(text: str | None) -> str:
    """`text` escaped as `neutralize` does, and its line ends too: a path or an identity that
    holds a newline stays on its own line of a listing. None and "" give ""."""
    return escape_to_one_line(text) if text else ""


class OutputClosed(Exception):
    """Whoever read orcactl's output went away (`orcactl jobs | head -1`): a broken pipe on
    stdout or stderr, told apart from one on the daemon's socket, which is a failure to report."""


class OutputFailed(OutputClosed):
    """Writing orcactl's output failed otherwise (a full disk under `> file`, `> /dev/full`):
    said in one line on stderr, if that can be written."""


class SafeWriter:
    """A text stream that writes everything through `neutralize`."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(neutralize(text))
        except OSError as exc:
            raise self._closed(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise self._closed(exc) from None

    def _closed(self, exc: OSError) -> OutputClosed:
        """What a failed write means; what the stream still holds then goes to /dev/null, so
        that flushing it at exit fails no more (Python would say so, with exit status 120)."""
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        if isinstance(exc, BrokenPipeError):
            return OutputClosed()
        return OutputFailed(f"cannot write the output: {exc}")

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return self._stream.encoding
