"""Text embeddings for recall: the built-in sentence model, a static one, a local model, or an
endpoint.

`[recall] embedding` chooses: "builtin" (default; all-MiniLM-L6-v2 as an int8 ONNX graph in
orcad/recall/minilm, written by scripts/build_onnx_model.py and run by onnxruntime), "static"
(the static model shipped in orcad/recall/model, distilled from the same model by
scripts/build_static_embedding.py and run in numpy: lighter, and ranks worse), "none" (lexical
recall only), "endpoint" (an OpenAI-compatible `/v1/embeddings` server, with a deadline), or the
path of a local model directory: an ONNX sentence model (model.onnx + vocab.txt), a static model
laid out as the shipped one (vectors.npz + vocab.txt) or a BERT sentence model (config.json,
vocab.txt, model.safetensors; run in numpy, mean-pooled). Nothing is ever downloaded.

Every embedder returns unit-length float32 rows (a zero row for a text with no tokens), so a
dot product is the cosine. Any failure is an `EmbeddingUnavailable`; recall then ranks
lexically.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import structlog

from orcad.c_heap import release_freed_memory
from orcad.config import RecallConfig
from orcad.providers import api_key_problem
from orcad.recall.embedders import (
    DEFAULT_FLOOR,
    DEFAULT_GATE,
    DEFAULT_LEXICAL_WEIGHT,
    Array,
    Embedder,
    EmbeddingUnavailable,
    Purpose,
)
from orcad.recall.endpoint_embedder import EndpointEmbedder
from orcad.recall.local_models import (
    BUILTIN_DIR,
    ONNX_FILE,
    STATIC_DIR,
    OnnxEmbedder,
    load_onnx,
    load_static,
    load_transformer,
    no_telemetry,
)
from orcad.recall.prompt_gate import PromptGates, gate_references, general_words
from orcad.recall.rank import compound_names, distinctive_terms

log = structlog.get_logger("orcad.recall")


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 128 * 1024  # glibc's default, before it starts raising it


def keep_large_buffers_mapped() -> None:
    """Fix glibc's mmap threshold at its default (glibc only). glibc raises the threshold each
    time a mapped block is freed, after which blocks that large come from the heap and stay
    there when freed: one 128-token prompt then left about 13 MiB behind in the recall
    thread's heap, for good. Fixed, a buffer above 128 KiB is unmapped when freed; a prompt
    of a dozen words needs none that large."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):  # not glibc
        pass


def load_embedder(
    setting: str,
    *,
    base_url: str = "",
    model: str = "",
    api_key_env: str = "",
    timeout_s: float = 0.5,
) -> Embedder | None:
    """The embedder `[recall] embedding` names; None for "none". EmbeddingUnavailable when it
    cannot be loaded (recall is then lexical)."""
    if setting == "none":
        return None
    if setting == "builtin":
        return load_onnx(BUILTIN_DIR)
    if setting == "static":
        return load_static(STATIC_DIR)
    if setting == "endpoint":
        # as for extraction: the spaces and line end a variable set from a file may carry are
        # no part of the key, and a key no header can carry is refused here, never quoted
        api_key = os.environ.get(api_key_env, "").strip() or None
        if api_key is not None and (problem := api_key_problem(api_key)) is not None:
            raise EmbeddingUnavailable(
                f"[recall.endpoint] the API key in {api_key_env} {problem}; set the variable again"
            )
        endpoint = EndpointEmbedder(base_url, model, api_key, timeout_s)
        endpoint.start()  # now, in the loading thread, not in the first recall
        return endpoint
    directory = Path(setting).expanduser()
    if not directory.is_dir():
        raise EmbeddingUnavailable(f"embedding model directory {directory} does not exist")
    if (directory / ONNX_FILE).exists():
        return load_onnx(directory)
    if (directory / "vectors.npz").exists():
        return load_static(directory)
    return load_transformer(directory)


# Environment variables by which a user sets the BLAS library's thread count (OpenBLAS, OpenMP
# builds, MKL, Apple's Accelerate, BLIS); when one is set, orcad leaves the count alone
BLAS_ENVIRONMENT = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "BLIS_NUM_THREADS",
)


def limit_blas_threads() -> None:
    """Run numpy's BLAS on one thread in this process, unless the environment sets a count.

    Recall's products are small (a prompt's vector against at most some 10,000 rows): split
    over several threads, each call waits for all of them, and on a machine busy with a build
    one of them is often not running, so recall took two to three times as long (docs/recall.md,
    "Recall cost"); the idle threads also spin between calls, taking the CPU from other
    processes. A whole transformer (a model directory) would gain from more: the environment
    gives it more."""
    if any(os.environ.get(name) for name in BLAS_ENVIRONMENT):
        return
    try:
        # imported here, in the model's loading thread: it takes some milliseconds, which the
        # daemon's start need not wait for
        from threadpoolctl import threadpool_limits  # noqa: PLC0415

        threadpool_limits(1, user_api="blas")
    except Exception as exc:  # recall still works with the library's own thread count
        log.warning("recall.blas_threads_unchanged", error=f"{type(exc).__name__}: {exc}")


class PromptQuery(NamedTuple):
    """A prompt as both parts of recall rank with it: computed once per recall."""

    vector: Array  # its unit embedding
    gates: PromptGates
    names: frozenset[str] = frozenset()  # its compound names (orcad.recall.rank.compound_names)


class Embeddings:
    """The daemon's embedding model (or why there is none), shared by both parts of recall.

    The daemon loads the model in a worker thread once it serves (`deferred`, then
    `load_blocking`), so loading costs no start-up time. Until then `state` is "loading"; the
    model's users (recall and the backfill, in worker threads) wait for the load through
    `embedder`, so a recall made at once ranks as every later one does. `state` and
    `loaded_model_id` never wait: they are read on the event loop.
    """

    def __init__(
        self,
        setting: str,
        embedder: Embedder | None,
        reason: str | None = None,
        *,
        loader: Callable[[], Embedder | None] | None = None,
    ) -> None:
        self.setting = setting
        self._embedder = embedder
        self.reason = reason  # why no model was loaded, or the last failure of a loaded one
        self._loader = loader
        self._load_lock = threading.Lock()
        self._loaded = threading.Event()
        self._references = gate_references(embedder)
        if loader is None:
            self._loaded.set()

    @classmethod
    def deferred(
        cls,
        setting: str,
        *,
        base_url: str = "",
        model: str = "",
        api_key_env: str = "",
        timeout_s: float = 0.5,
        floor: float | None = None,
        lexical_weight: float | None = None,
    ) -> Embeddings:
        """The model `setting` names, loaded by the first `load_blocking` or use."""
        if setting == "none":
            return cls(setting, None)
        no_telemetry()  # now, on the caller's thread, not in the loading one

        def load() -> Embedder | None:
            embedder = load_embedder(
                setting,
                base_url=base_url,
                model=model,
                api_key_env=api_key_env,
                timeout_s=timeout_s,
            )
            if embedder is not None and floor is not None:
                embedder.floor = floor
            if embedder is not None and lexical_weight is not None:
                embedder.lexical_weight = lexical_weight
            return embedder

        return cls(setting, None, loader=load)

    @classmethod
    def configured(cls, config: RecallConfig) -> Embeddings:
        """The model `[recall]` names, loaded by the first `load_blocking` or use."""
        return cls.deferred(
            config.embedding,
            base_url=config.endpoint.base_url,
            model=config.endpoint.model,
            api_key_env=config.endpoint.api_key_env,
            timeout_s=config.endpoint.timeout_s,
        )

    @classmethod
    def load(cls, setting: str, **options: Any) -> Embeddings:
        """The model `setting` names, loaded now (`options` as for `deferred`)."""
        embeddings = cls.deferred(setting, **options)
        embeddings.load_blocking()
        return embeddings

    def load_blocking(self) -> None:
        """Load the model once; a caller during the load waits for it. Never raises: a model
        that cannot be loaded leaves recall lexical, with the reason kept."""
        with self._load_lock:
            if self._loaded.is_set() or self._loader is None:
                return
            try:
                if self.setting != "none":
                    keep_large_buffers_mapped()
                embedder = self._loader()
                if embedder is not None:
                    limit_blas_threads()
                self._references = gate_references(embedder)
                general_words()  # read now, not at the first recall
                self._embedder = embedder
                release_freed_memory()  # what reading the files and the fit left behind
            except EmbeddingUnavailable as exc:
                self.reason = str(exc)
            except Exception as exc:  # a broken model file must never stop the daemon
                self.reason = f"cannot load embedding model {self.setting}: {exc!r}"
            finally:
                self._loaded.set()

    @property
    def embedder(self) -> Embedder | None:
        """The model, or None when there is none; waits for its load (worker threads only)."""
        if not self._loaded.is_set():
            self.load_blocking()
        return self._embedder

    @property
    def model_id(self) -> str | None:
        embedder = self.embedder
        return None if embedder is None else embedder.model_id

    @property
    def int8_products(self) -> bool:
        """Whether stored vectors are multiplied as int8 rows by onnxruntime
        (orcad.deliberate.row_products): only for a model that runs on it, which has loaded it
        already; another keeps float32 rows in numpy."""
        return isinstance(self.embedder, OnnxEmbedder)

    @property
    def loaded_model_id(self) -> str | None:
        """The model's id once it is loaded, without waiting (status, on the event loop)."""
        return None if self._embedder is None else self._embedder.model_id

    @property
    def floor(self) -> float:
        embedder = self.embedder
        return DEFAULT_FLOOR if embedder is None else embedder.floor

    @property
    def gate(self) -> float:
        embedder = self.embedder
        return DEFAULT_GATE if embedder is None else embedder.gate

    def query(self, prompt: str) -> PromptQuery | None:
        """The prompt's vector and gates, or None without a model (or when it fails)."""
        if self.embedder is None:
            return None
        matrix = self.embed([prompt])
        if matrix is None:
            return None
        try:
            gates = self.gates_for(matrix[0], prompt)
        except Exception as exc:  # a broken classifier must not fail the recall
            self.reason = f"the unrelated-prompt classifier failed: {exc!r}"
            embedder = self.embedder
            assert embedder is not None
            # as for a prompt it is sure is unrelated: only a close record is injected
            gate = embedder.gate + embedder.unrelated_weight
            lexical = embedder.lexical_gate
            gates = PromptGates(
                gate, None if lexical is None else lexical + embedder.unrelated_weight
            )
        return PromptQuery(matrix[0], gates, compound_names(prompt))

    def gates_for(self, prompt_vector: Array, prompt: str) -> PromptGates:
        """What the candidates for `prompt` (embedded as `prompt_vector`) must reach for
        anything to be injected.

        The gate (on relevance) is the model's gate, raised (times the unrelated weight) by how
        likely the prompt is to be about nothing a project stores ("explain the CAP theorem",
        "thanks", "rename this variable"), by a classifier trained on UNRELATED_PROMPTS against
        PROJECT_PROMPTS, and lowered (times the project weight) by its closeness to the nearest
        prompt that asks about a project's own setup ("who approves infra changes", "what's
        our staging URL again"). The lexical gate (on coverage) rises with the same
        probability, so "thanks, that worked" does not open it by sharing "work" with a fact.
        A prompt without a vector (no tokens) gets the model's own gates."""
        embedder = self.embedder
        if embedder is None:
            return PromptGates(DEFAULT_GATE, None)
        references = self._references
        if references is None or not prompt_vector.any():
            return PromptGates(embedder.gate, embedder.lexical_gate)
        vectors = prompt_vector[None, :]
        nearest = references.nearest(vectors)
        gate, lexical = embedder.gate, embedder.lexical_gate
        if embedder.unrelated_weight > 0:
            probability = float(references.probability(vectors, [prompt], nearest)[0])
            raised = embedder.unrelated_weight * probability
            gate += raised
            lexical = None if lexical is None else lexical + raised
        if embedder.project_weight > 0:
            gate -= embedder.project_weight * max(0.0, float(nearest[0, 1]))
        return PromptGates(gate, lexical)

    def distinctive(
        self,
        terms: Sequence[str],
        document_frequency: Mapping[str, int],
        names: frozenset[str] = frozenset(),
    ) -> frozenset[str]:
        """The stems of the query `terms`, and the prompt's compound `names`, that open the
        gate by themselves (a store's own names: orcad.recall.rank.distinctive_terms); none
        when the general words cannot be read, for then every word would look like a name."""
        general = general_words()
        if not general:
            return frozenset()
        return distinctive_terms(terms, document_frequency, general, names)

    @property
    def lexical_weight(self) -> float:
        embedder = self.embedder
        return DEFAULT_LEXICAL_WEIGHT if embedder is None else embedder.lexical_weight

    @property
    def state(self) -> str:
        """ready, loading, off or unavailable; never waits."""
        if not self._loaded.is_set():
            return "loading"
        if self._embedder is not None:
            return "ready"
        return "off" if self.setting == "none" else "unavailable"

    def embed(self, texts: Sequence[str], *, purpose: Purpose = "recall") -> Array | None:
        """Unit rows for `texts`, or None when the model fails (the failure is kept;
        `purpose` as for `try_embed`)."""
        try:
            return self.try_embed(texts, purpose=purpose)
        except EmbeddingUnavailable:
            return None

    def try_embed(self, texts: Sequence[str], *, purpose: Purpose = "recall") -> Array:
        """Unit rows for `texts`; EmbeddingRefused when the model refuses them, else
        EmbeddingUnavailable when it fails or there is none (the failure is kept as the
        reason, as by `embed`). `purpose`: who asks (an endpoint's deadline and rest depend on
        it)."""
        embedder = self.embedder
        if embedder is None:
            raise EmbeddingUnavailable(self.reason or "no embedding model")
        try:
            if isinstance(embedder, EndpointEmbedder):
                matrix = embedder.embed(texts, purpose=purpose)
            else:
                matrix = embedder.embed(texts)
        except EmbeddingUnavailable as exc:
            self.reason = str(exc)
            raise
        except Exception as exc:  # recall falls back to lexical whatever the model did
            self.reason = f"embedding failed: {exc!r}"
            raise EmbeddingUnavailable(self.reason) from exc
        if self.reason is not None:
            self.reason = None  # it works again
        return matrix
