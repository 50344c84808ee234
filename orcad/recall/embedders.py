"""What every embedding model of recall is: unit-length float32 rows for texts (a zero row for
a text without tokens, so a dot product is the cosine), the ranking settings its MODEL.txt
gives, and the errors by which it says that it cannot embed (recall then ranks lexically).
"""

from __future__ import annotations

import math
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]


MAX_TOKENS = 256  # a record's first tokens carry its meaning; bounds the work per text
# characters of a text that is not all ASCII read for its tokens, at most: splitting such text
# into words is a loop in Python, and a pasted megabyte of one word would take it all (ASCII
# text is split by a regular expression, which stops at the first MAX_TOKENS words itself);
# also what an endpoint is sent of a text at most (servers embed a text's first tokens)
EMBED_READ_CHARS = 65536
TRANSFORMER_MAX_TOKENS = 128


class EmbeddingUnavailable(Exception):
    """No embedding could be made; the message says why (shown by status and doctor).
    `retry_after`: the seconds an endpoint asked to be left alone (its Retry-After), if any."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class EmbeddingRefused(EmbeddingUnavailable):
    """The model answered that it will not embed this input: an endpoint's 400, 413 or 422
    (llama.cpp's server for a text longer than its batch). The input may be at fault, or the
    request as a whole (a model name the server does not know)."""


class EmbeddingTimedOut(EmbeddingUnavailable):
    """The model took longer than the deadline: the batch may be too large for it."""


# who asks for an embedding: recall (for a prompt, within recall's deadline), a publish (a
# job's facts, within recall's deadline: recall's barrier waits for the job), or the backfill
# (no one waits: a longer deadline); an endpoint rests recall's calls apart from the others
Purpose = Literal["recall", "publish", "backfill"]
PURPOSES: tuple[Purpose, ...] = ("recall", "publish", "backfill")


# for a model without calibrated values: those of all-MiniLM-L6-v2 run whole (docs/recall.md)
DEFAULT_FLOOR = 0.34
DEFAULT_LEXICAL_WEIGHT = 0.0
DEFAULT_GATE = DEFAULT_FLOOR  # a gate at the floor adds nothing to it
DEFAULT_UNRELATED_WEIGHT = 0.0
DEFAULT_PROJECT_WEIGHT = 0.0


class Embedder(Protocol):
    model_id: str
    dims: int
    floor: float  # relevance floor of orcad.recall.rank for this model's cosines
    gate: float  # what the best candidate must reach for anything to be injected
    lexical_weight: float
    # how much a prompt's likeness to UNRELATED_PROMPTS (a probability) raises its gate, and its
    # closeness to PROJECT_PROMPTS lowers it (0: not at all)
    unrelated_weight: float
    project_weight: float
    lexical_gate: float | None  # coverage from which a candidate opens the gate on its words

    def embed(self, texts: Sequence[str]) -> Array: ...


def readable(text: str) -> str:
    """What of `text` is read for its tokens (EMBED_READ_CHARS)."""
    return text if text.isascii() else text[:EMBED_READ_CHARS]


def normalize_rows(matrix: Array) -> Array:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    result: Array = (matrix / norms).astype(np.float32, copy=False)
    return result


def require_regular_file(path: Path) -> None:
    """OSError unless `path` is a regular file (after symbolic links): a model's files are
    read whole, and a FIFO or a device such as /dev/zero would never end, leaving every recall
    waiting for the model to load."""
    if not stat.S_ISREG(path.stat().st_mode):
        raise OSError(f"{path} is not a regular file")


def read_vocab(path: Path) -> list[str]:
    require_regular_file(path)
    words = path.read_text(encoding="utf-8").split("\n")
    if words and words[-1] == "":
        words.pop()
    if not words:
        raise EmbeddingUnavailable(f"{path} is empty")
    return words


class RankingSettings:
    """What a model's MODEL.txt sets for ranking (`apply_settings`), at their defaults until it
    does; see `Embedder`."""

    floor: float = DEFAULT_FLOOR
    gate: float = DEFAULT_GATE
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT
    unrelated_weight: float = DEFAULT_UNRELATED_WEIGHT
    project_weight: float = DEFAULT_PROJECT_WEIGHT
    lexical_gate: float | None = None


def apply_settings(embedder: Embedder, described: str, directory: Path) -> None:
    """The ranking settings a model's MODEL.txt (`described`) gives, onto `embedder`."""
    fields = dict(line.split(":", 1) for line in described.splitlines() if ":" in line)
    embedder.floor = _setting(fields, "floor", DEFAULT_FLOOR, directory)
    # the gate may be negative: a prompt's own adds the unrelated weight times a probability
    embedder.gate = _setting(fields, "gate", embedder.floor, directory, signed=True)
    embedder.lexical_weight = _setting(fields, "lexical_weight", DEFAULT_LEXICAL_WEIGHT, directory)
    embedder.unrelated_weight = _setting(
        fields, "unrelated_weight", DEFAULT_UNRELATED_WEIGHT, directory
    )
    embedder.project_weight = _setting(fields, "project_weight", DEFAULT_PROJECT_WEIGHT, directory)
    if "lexical_gate" in fields:
        embedder.lexical_gate = _setting(fields, "lexical_gate", 0.0, directory)


def _setting(
    fields: dict[str, str], name: str, default: float, directory: Path, *, signed: bool = False
) -> float:
    """A ranking number of MODEL.txt: finite, and not negative unless `signed` (a NaN floor or
    gate would make recall inject nothing, silently)."""
    text = fields.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (value < 0 and not signed):
        wanted = f"{name} must be a number" if signed else f"{name} must be a number of at least 0"
        raise EmbeddingUnavailable(f"{directory / 'MODEL.txt'}: {wanted}, not {text.strip()!r}")
    return value
