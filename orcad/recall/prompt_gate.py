"""Whether a prompt is about anything a project stores, which decides whether recall injects
anything at all: a logistic classifier fitted on reference prompts about nothing a project
stores against prompts about a project's own setup raises the bar for a prompt that looks like
the first kind (docs/recall.md, "How recall ranks"); and the words in general use, outside of
which a rare term of the prompt names something of the project's own.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import itertools
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import structlog

from orcad.deliberate.row_products import Int8Rows, quantize_rows
from orcad.query import stem, tokenize
from orcad.recall.embedders import (
    MAX_TOKENS,
    Array,
    Embedder,
    EmbeddingUnavailable,
    read_vocab,
    require_regular_file,
)
from orcad.recall.local_models import BUILTIN_DIR, OnnxEmbedder

log = structlog.get_logger("orcad.recall")


# prompts about nothing a project stores (general knowledge, chat, edits to the code on screen)
# and prompts that ask about a project's own setup: a classifier fitted on the two tells how
# likely a prompt is to be of the first kind, which raises the bar a stored record must clear,
# and closeness to the nearest of the second may lower it (`Embeddings.gates_for`)
UNRELATED_PROMPTS = Path(__file__).resolve().parent / "unrelated_prompts.txt"
PROJECT_PROMPTS = Path(__file__).resolve().parent / "project_prompts.txt"
# the classifier's L2 penalty, the scale of its two nearest-prompt features against the
# prompt's unit vector, and of its words (a prompt's words and word pairs seen in at least
# WORD_MIN_COUNT reference prompts, together of length WORD_SCALE); chosen by the AUC of the
# classifier on the labelled sets' prompts (docs/recall.md, "How recall ranks")
UNRELATED_L2 = 3e-4
NEAREST_SCALE = 3.0
WORD_SCALE = 2.0
WORD_MIN_COUNT = 5
_WORD = re.compile(r"[a-z0-9']+", re.IGNORECASE)
FIT_BLOCK = 256  # rows of the classifier's features at a time in its fit
FIT_STEPS = 50  # Newton steps at most (the built-in model's converges in 8)
# the classifier fitted ahead of time, beside a shipped model (scripts/fit_gate.py); a change to
# how it is fitted or used bumps the version, so that an old file is fitted again
GATE_FILE = "gate.npz"
GATE_FIT_VERSION = 2


def read_prompts(path: Path) -> list[str]:
    """Reference prompts, one per line; blank lines and # comments are skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EmbeddingUnavailable(f"cannot read the reference prompts {path}: {exc}") from exc
    prompts = [line.strip() for line in lines]
    prompts = [line for line in prompts if line and not line.startswith("#")]
    if not prompts:
        raise EmbeddingUnavailable(f"{path} holds no prompts")
    return prompts


def fit_logistic(
    features: Array,
    labels: npt.NDArray[np.float64],
    *,
    penalty: float = UNRELATED_L2,
    name: str = "the unrelated-prompt classifier",
) -> tuple[Array, float]:
    """The weights and bias of an L2-penalised logistic regression (`penalty` on the weights,
    none on the bias), fitted by Newton's method in float64. The gradient and the
    curvature are summed over blocks of rows: the fit may run in the model's loading thread,
    whose allocator keeps what it once held, so it never copies the features whole.
    EmbeddingUnavailable if it does not converge to finite weights."""
    count, width = features.shape
    penalties = np.full(width + 1, penalty)
    penalties[-1] = 1e-9  # the bias is not shrunk (only kept solvable)
    weights = np.zeros(width + 1)
    for _ in range(FIT_STEPS):
        gradient = penalties * weights
        hessian = np.diag(penalties)
        curvature_sum = 0.0
        for start in range(0, count, FIT_BLOCK):
            block = features[start : start + FIT_BLOCK].astype(np.float64)
            logits = block @ weights[:-1] + weights[-1]
            probability = 1.0 / (1.0 + np.exp(-np.clip(logits, -60.0, 60.0)))
            residual = (probability - labels[start : start + FIT_BLOCK]) / count
            curvature = probability * (1.0 - probability) / count
            gradient[:-1] += block.T @ residual
            gradient[-1] += residual.sum()
            weighted = block * curvature[:, None]
            hessian[:-1, :-1] += weighted.T @ block
            hessian[:-1, -1] += weighted.sum(axis=0)
            curvature_sum += float(curvature.sum())
        hessian[-1, :-1] = hessian[:-1, -1]
        hessian[-1, -1] += curvature_sum
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if not np.isfinite(weights).all():
            break
        if np.abs(step).max() < 1e-7:
            return weights[:-1].astype(np.float32), float(weights[-1])
    raise EmbeddingUnavailable(f"{name} did not converge in {FIT_STEPS} Newton steps")


class FittedGate(NamedTuple):
    """A classifier fitted ahead of time (GATE_FILE beside a shipped model), with the digest of
    everything its fit depends on: used only while that digest still matches."""

    weights: Array
    bias: float
    words: list[str]  # the word features, in the order of their weights
    digest: str
    # the reference prompts' vectors, unrelated then project (float16 on disk), when stored:
    # a transformer takes seconds to embed them, which a daemon's start should not wait for
    references: tuple[Array, Array] | None = None


def gate_digest(model_id: str, texts: tuple[Sequence[str], Sequence[str]]) -> str:
    """What a fit of the unrelated-prompt classifier depends on: the model (by id), the
    reference prompts and the fit's constants."""
    inputs = {
        "model": model_id,
        "unrelated": list(texts[0]),
        "project": list(texts[1]),
        "constants": [UNRELATED_L2, NEAREST_SCALE, WORD_SCALE, WORD_MIN_COUNT, GATE_FIT_VERSION],
    }
    return hashlib.sha256(json.dumps(inputs).encode("utf-8")).hexdigest()


def read_fitted_gate(
    path: Path, shapes: tuple[tuple[int, int], tuple[int, int]] | None = None
) -> FittedGate | None:
    """The fitted classifier stored at `path`, or None when there is none or it is unreadable
    (the daemon then fits its own). Its reference vectors are read only when they have
    `shapes` (unrelated, project), checked before they are inflated: a user's model directory
    could hold a small file that inflates to gigabytes."""
    try:
        require_regular_file(path)
        with np.load(path, allow_pickle=False) as data:
            weights = data["weights"].astype(np.float32)
            bias = float(data["bias"])
            words = [str(word) for word in data["words"]]
            digest = str(data["digest"])
            references = None
            names = ("unrelated", "project")
            if shapes is not None and all(
                _stored_shape(data, name) == shape
                for name, shape in zip(names, shapes, strict=True)
            ):
                references = (
                    data["unrelated"].astype(np.float32),
                    data["project"].astype(np.float32),
                )
    except Exception:  # missing, truncated, corrupt (zlib), or not one at all
        return None
    if weights.ndim != 1 or not np.isfinite(weights).all() or not math.isfinite(bias):
        return None
    if len(set(words)) != len(words):
        return None
    if references is not None and not all(
        vectors.ndim == 2 and np.isfinite(vectors).all() for vectors in references
    ):
        references = None  # embedded again, as without them
    return FittedGate(weights, bias, words, digest, references)


def _stored_shape(data: Any, name: str) -> tuple[int, ...] | None:
    """The shape of array `name` of an opened .npz, from its header alone (None: absent, or
    not a plain float16 or float32 array)."""
    if name not in data.files:
        return None
    with data.zip.open(name + ".npy") as member:
        version = np.lib.format.read_magic(member)
        reader = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _fortran, dtype = reader(member)
    if dtype not in (np.dtype(np.float16), np.dtype(np.float32)):
        return None
    return tuple(int(size) for size in shape)


def write_fitted_gate(
    path: Path, references: GateReferences, digest: str, *, with_vectors: bool = False
) -> None:
    """Store `references`' classifier (scripts/fit_gate.py; the build's step, not the daemon's),
    and with `with_vectors` the reference prompts' vectors too."""
    words = sorted(references.vocabulary, key=references.vocabulary.__getitem__)
    arrays: dict[str, Any] = {
        "weights": references.weights,
        "bias": np.float64(references.bias),
        "words": np.array(words, dtype=np.str_),
        "digest": np.str_(digest),
    }
    if with_vectors:
        arrays["unrelated"] = references.unrelated.astype(np.float16)
        arrays["project"] = references.project.astype(np.float16)
    np.savez_compressed(path, **arrays)


def word_features(text: str) -> set[str]:
    """A prompt's lower-cased words and pairs of adjacent words ("what is", "do we"): of its
    first MAX_TOKENS words, as its vector is of its first tokens (a pasted log adds nothing)."""
    found = itertools.islice(_WORD.finditer(text), MAX_TOKENS)
    words = [match.group().lower() for match in found]
    return {*words, *(f"{first} {second}" for first, second in itertools.pairwise(words))}


class GateReferences:
    """The reference prompts and a classifier fitted on them: the probability that a prompt is
    about nothing a project stores, from its vector, its cosines with the nearest prompt of
    each set (each reference prompt's own nearest leaves it out) and its words. The vector
    says what a prompt is about; the words say how it asks ("explain", "what is", "thanks"
    against "do we", "our", "where is the"), which the mean of its token vectors blurs. Each
    part made the classifier hold better on prompts it was not fitted on (docs/recall.md, "How
    recall ranks"). Fitting takes about two seconds; a shipped model comes with it fitted
    (GATE_FILE)."""

    def __init__(
        self,
        unrelated: Array,
        project: Array,
        texts: tuple[Sequence[str], Sequence[str]],
        fitted: FittedGate | None = None,
        *,
        classify: bool = True,
    ) -> None:
        """Fit on the reference prompts, unless `fitted` (already checked against them) or
        not `classify` (only `nearest` is wanted: a model with no unrelated weight)."""
        if (len(texts[0]), len(texts[1])) != (len(unrelated), len(project)):
            raise ValueError("one text per reference vector")
        self._stacked = np.ascontiguousarray(np.concatenate([unrelated, project]))
        self._split = len(unrelated)  # the project prompts' first row
        self._int8: Int8Rows | None = None  # the vectors, once `keep_as_int8`
        if not classify:
            self.vocabulary, self.weights, self.bias = {}, np.zeros(0, np.float32), 0.0
            return
        if fitted is not None and len(fitted.weights) == unrelated.shape[1] + 2 + len(fitted.words):
            self.vocabulary = {feature: column for column, feature in enumerate(fitted.words)}
            self.weights, self.bias = fitted.weights, fitted.bias
            return
        counts = collections.Counter(
            feature for text in (*texts[0], *texts[1]) for feature in word_features(text)
        )
        kept = sorted(feature for feature, count in counts.items() if count >= WORD_MIN_COUNT)
        self.vocabulary = {feature: column for column, feature in enumerate(kept)}
        own = [unrelated @ unrelated.T, project @ project.T]
        for square in own:
            np.fill_diagonal(square, -1.0)  # a prompt is not its own nearest
        nearest = [
            np.stack([own[0].max(axis=1), (unrelated @ project.T).max(axis=1)], axis=1),
            np.stack([(project @ unrelated.T).max(axis=1), own[1].max(axis=1)], axis=1),
        ]
        features = np.concatenate(
            [
                self._features(unrelated, nearest[0], texts[0]),
                self._features(project, nearest[1], texts[1]),
            ]
        )
        labels = np.concatenate([np.ones(len(unrelated)), np.zeros(len(project))])
        self.weights, self.bias = fit_logistic(features, labels)

    @property
    def unrelated(self) -> Array:
        return self._float_rows()[: self._split]

    @property
    def project(self) -> Array:
        return self._float_rows()[self._split :]

    def _float_rows(self) -> Array:
        if self._int8 is not None:
            raise RuntimeError("the reference vectors are kept as int8 rows only")
        return self._stacked

    def keep_as_int8(self) -> None:
        """Keep the reference vectors only as int8 rows multiplied by onnxruntime
        (orcad.deliberate.row_products), for a model that runs on it: 2.6 MiB instead of 5.1
        for the built-in model's, and a faster product. `nearest` and `probability` work as
        before, with cosines within about 0.005; `unrelated` and `project` are gone."""
        if self._int8 is None:
            self._int8 = Int8Rows(*quantize_rows(self._stacked))
            self._stacked = np.zeros((0, self._stacked.shape[1]), dtype=np.float32)

    def _features(self, vectors: Array, nearest: Array, texts: Sequence[str]) -> Array:
        words = np.zeros((len(texts), len(self.vocabulary)), dtype=np.float32)
        for row, text in enumerate(texts):
            columns = [self.vocabulary[f] for f in word_features(text) if f in self.vocabulary]
            if columns:
                words[row, columns] = WORD_SCALE / math.sqrt(len(columns))
        return np.hstack([vectors, NEAREST_SCALE * nearest, words]).astype(np.float32)

    def nearest(self, vectors: Array) -> Array:
        """Each row's cosine with the nearest unrelated and the nearest project prompt."""
        if self._int8 is not None:
            rows = [self._int8.scores(vector, ()) for vector in vectors]
            cosines = np.stack(rows) if rows else np.zeros((0, self._int8.rows), np.float32)
        else:
            cosines = vectors @ self._stacked.T  # one product for both sets
        split = self._split
        return np.stack([cosines[:, :split].max(axis=1), cosines[:, split:].max(axis=1)], axis=1)

    def probability(
        self, vectors: Array, texts: Sequence[str], nearest: Array | None = None
    ) -> Array:
        """P(about nothing a project stores) for each row of `vectors`, the vectors of `texts`
        (`nearest` as `self.nearest(vectors)`, if already known)."""
        if nearest is None:
            nearest = self.nearest(vectors)
        # `_features` @ weights, without the rows of word features (mostly zeros): recall asks
        # this once per prompt
        dims = vectors.shape[1]
        logits = vectors @ self.weights[:dims] + NEAREST_SCALE * (
            nearest @ self.weights[dims : dims + 2]
        )
        words = self.weights[dims + 2 :]
        for row, text in enumerate(texts):
            columns = [self.vocabulary[f] for f in word_features(text) if f in self.vocabulary]
            if columns:
                logits[row] += WORD_SCALE / math.sqrt(len(columns)) * float(words[columns].sum())
        logits += np.float32(self.bias)
        probability: Array = 1.0 / (1.0 + np.exp(-np.clip(logits, -60.0, 60.0)))
        return probability


def gate_references(embedder: Embedder | None) -> GateReferences | None:
    """The reference prompts of a model calibrated with them (a positive weight), else None.
    The classifier comes fitted with a shipped model (its GATE_FILE, with the reference
    vectors for a transformer) when it was fitted for this model and these prompts; otherwise
    it is fitted now (about two seconds, and the embedding of the reference prompts)."""
    if embedder is None or (embedder.unrelated_weight <= 0 and embedder.project_weight <= 0):
        return None
    texts = read_prompts(UNRELATED_PROMPTS), read_prompts(PROJECT_PROMPTS)
    directory = getattr(embedder, "directory", None)
    shapes = (len(texts[0]), embedder.dims), (len(texts[1]), embedder.dims)
    fitted = None
    if isinstance(directory, Path):
        fitted = read_fitted_gate(directory / GATE_FILE, shapes)
    if fitted is not None and fitted.digest != gate_digest(embedder.model_id, texts):
        fitted = None
    if fitted is not None and fitted.references is not None:
        vectors = fitted.references
    else:
        vectors = embedder.embed(texts[0]), embedder.embed(texts[1])
    references = GateReferences(*vectors, texts, fitted, classify=embedder.unrelated_weight > 0)
    if isinstance(embedder, OnnxEmbedder):
        try:
            references.keep_as_int8()
        except Exception as exc:  # onnxruntime refused the product: keep the float32 rows
            log.warning("recall.int8_products_unavailable", error=f"{type(exc).__name__}: {exc}")
    return references


@functools.lru_cache(maxsize=1)
def general_words() -> frozenset[str]:
    """Words in general use, each with its stem: the whole words of the built-in model's
    vocabulary (BERT's, drawn from English books and Wikipedia) and every word of the reference
    prompts about something else (which name the tools everybody uses: git, docker, gradle).
    A prompt's term outside them that few stored texts hold names something of the project's
    own (orcad.recall.rank.distinctive_terms). Empty when the files cannot be read."""
    try:
        vocab = read_vocab(BUILTIN_DIR / "vocab.txt")
        prompts = read_prompts(UNRELATED_PROMPTS)
    except (OSError, EmbeddingUnavailable, UnicodeDecodeError):
        return frozenset()
    words = {word for word in vocab if word.isalpha()}
    words.update(token for prompt in prompts for token in tokenize(prompt))
    return frozenset(words | {stem(word) for word in words})


class PromptGates(NamedTuple):
    """What a prompt's candidates must reach for anything to be injected (orcad.recall.rank)."""

    gate: float  # the best candidate's relevance
    lexical: float | None  # or a candidate's coverage of the prompt's terms (None: never)
