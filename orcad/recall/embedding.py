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

import collections
import ctypes
import functools
import hashlib
import itertools
import json
import math
import os
import re
import stat
import threading
import time
import weakref
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt
import structlog

from orcad.deliberate.row_products import Int8Rows, onnxruntime_session, quantize_rows
from orcad.limits import (
    EMBEDDING_ANSWER_BASE_BYTES,
    EMBEDDING_ANSWER_BYTES_PER_TEXT,
    EMBEDDING_BACKGROUND_TIMEOUT_S,
)
from orcad.providers.openai_wire import parse_retry_after
from orcad.query import stem, tokenize
from orcad.recall import bert
from orcad.recall.breaker import EndpointBreaker
from orcad.recall.rank import compound_names, distinctive_terms
from orcad.recall.wordpiece import WordPiece
from orcad.secrets import redact

log = structlog.get_logger("orcad.recall")

Array = npt.NDArray[np.float32]
BUILTIN_DIR = Path(__file__).resolve().parent / "minilm"  # the default model
STATIC_DIR = Path(__file__).resolve().parent / "model"
ONNX_FILE = "model.onnx"
ONNXRUNTIME_TELEMETRY = "ORT_DISABLE_TELEMETRY"  # see no_telemetry
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

# an endpoint's statuses that refuse what was sent, rather than say it cannot answer now
REFUSING_STATUSES = frozenset({400, 413, 422})


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


class StaticEmbedder(RankingSettings):
    """One int8 vector (with a per-row scale) per vocabulary token; a text is their mean."""

    def __init__(self, codes: npt.NDArray[np.int8], scale: Array, vocab: list[str], model_id: str):
        if codes.ndim != 2 or len(codes) != len(vocab) or scale.shape != (len(vocab),):
            raise EmbeddingUnavailable(
                f"static model shapes disagree: {codes.shape} vectors, {scale.shape} scales, "
                f"{len(vocab)} tokens"
            )
        self.codes = codes
        self.scale = scale
        self.tokens = WordPiece(vocab)
        self.model_id = model_id
        self.dims = int(codes.shape[1])
        self.directory: Path | None = None  # where it was loaded from (its GATE_FILE is there)

    def embed(self, texts: Sequence[str]) -> Array:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = self.tokens.encode(readable(text), MAX_TOKENS)
            if ids:
                out[row] = (self.codes[ids] * self.scale[ids, None]).mean(axis=0)
        return normalize_rows(out)


def load_static(directory: Path) -> StaticEmbedder:
    try:
        require_regular_file(directory / "vectors.npz")
        require_regular_file(directory / "MODEL.txt")
        with np.load(directory / "vectors.npz") as data:
            codes, scale = data["codes"], data["scale"].astype(np.float32)
        vocab = read_vocab(directory / "vocab.txt")
        described = (directory / "MODEL.txt").read_text(encoding="utf-8")
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise EmbeddingUnavailable(f"cannot load the static model in {directory}: {exc}") from exc
    model_id = next(
        (line[3:].strip() for line in described.splitlines() if line.startswith("id:")), ""
    )
    if not model_id:
        raise EmbeddingUnavailable(f"{directory / 'MODEL.txt'} names no model id")
    if codes.dtype != np.int8:
        raise EmbeddingUnavailable(f"{directory / 'vectors.npz'}: codes are not int8")
    embedder = StaticEmbedder(codes, scale, vocab, model_id)
    embedder.directory = directory
    apply_settings(embedder, described, directory)
    return embedder


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


_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, Array]:
    """The float tensors of a .safetensors file (8-byte header size, JSON header, raw data)."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    data = memoryview(raw)[8 + size :]
    tensors: dict[str, Array] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(spec["dtype"])
        if dtype is None:
            raise EmbeddingUnavailable(f"{path}: tensor {name} has unsupported dtype")
        start, end = spec["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=dtype).reshape(spec["shape"])
        if dtype in (np.float32, np.float16):
            tensors[name.removeprefix("bert.")] = np.ascontiguousarray(array, dtype=np.float32)
    return tensors


class TransformerEmbedder(RankingSettings):
    """A BERT sentence model (e.g. all-MiniLM-L6-v2) run in numpy, mean-pooled."""

    def __init__(self, weights: dict[str, Array], vocab: list[str], heads: int, model_id: str):
        self.weights = weights
        self.tokens = WordPiece(vocab)
        self.heads = heads
        self.cls = self.tokens.ids.get("[CLS]", 101)
        self.sep = self.tokens.ids.get("[SEP]", 102)
        self.model_id = model_id
        self.dims = int(weights["embeddings.word_embeddings.weight"].shape[1])

    def embed(self, texts: Sequence[str]) -> Array:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = [
                self.cls,
                *self.tokens.encode(readable(text), TRANSFORMER_MAX_TOKENS - 2),
                self.sep,
            ]
            out[row] = bert.forward(self.weights, np.array([ids]), self.heads)[0].mean(axis=0)
        return normalize_rows(out)


def load_transformer(directory: Path) -> TransformerEmbedder:
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        vocab = read_vocab(directory / "vocab.txt")
        weights = read_safetensors(directory / "model.safetensors")
        heads = int(config["num_attention_heads"])
        digest = hashlib.sha256(
            (directory / "config.json").read_bytes() + "\n".join(vocab).encode()
        )
        digest.update(str((directory / "model.safetensors").stat().st_size).encode())
    except (OSError, KeyError, ValueError, TypeError) as exc:
        raise EmbeddingUnavailable(f"cannot load the BERT model in {directory}: {exc}") from exc
    if "embeddings.word_embeddings.weight" not in weights:
        raise EmbeddingUnavailable(f"{directory}: not a BERT model (no word embeddings)")
    model_id = f"bert-{directory.name}-{digest.hexdigest()[:16]}"
    return TransformerEmbedder(weights, vocab, heads, model_id)


# the inputs an ONNX sentence model may declare, each given for one text of n tokens: the
# built-in graph takes ids and positions; exports of Hugging Face models take ids, a mask and
# token types
_ONNX_INPUTS: dict[str, Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]]] = {
    "input_ids": lambda ids: ids,
    "position_ids": lambda ids: np.arange(ids.shape[1], dtype=np.int64)[None],
    "attention_mask": np.ones_like,
    "token_type_ids": np.zeros_like,
}


class OnnxEmbedder(RankingSettings):
    """A BERT-style sentence model as an ONNX graph, run by onnxruntime on one thread, one text
    at a time (no padding): its first output, mean-pooled over the tokens when it is per token.
    """

    def __init__(self, session: Any, vocab: list[str], model_id: str, directory: Path):
        self.session = session
        self.tokens = WordPiece(vocab)
        self.cls = self.tokens.ids.get("[CLS]", 101)
        self.sep = self.tokens.ids.get("[SEP]", 102)
        self.model_id = model_id
        self.directory: Path | None = directory
        self.inputs = [node.name for node in session.get_inputs()]
        self.output = session.get_outputs()[0].name  # the only one computed
        unknown = [name for name in self.inputs if name not in _ONNX_INPUTS]
        if "input_ids" not in self.inputs or unknown:
            raise EmbeddingUnavailable(
                f"{directory / ONNX_FILE}: inputs {self.inputs} are not a sentence model's (it "
                f"must take input_ids, and may take {sorted(set(_ONNX_INPUTS) - {'input_ids'})})"
            )
        probes = [
            self._run([self.cls, self.sep]),
            self._run([self.cls, self.cls, self.cls, self.sep]),
        ]
        widths = {len(probe) for probe in probes}
        finite = all(np.isfinite(probe).all() for probe in probes)
        if len(widths) != 1 or min(widths) < 1 or not finite:
            answered = [probe.shape for probe in probes]
            raise EmbeddingUnavailable(
                f"{directory / ONNX_FILE} is not a sentence model: it answered {answered}"
                f"{'' if finite else ', not finite,'} for texts of 2 and 4 tokens"
            )
        self.dims = widths.pop()

    def _run(self, tokens: list[int]) -> Array:
        ids = np.array([tokens], dtype=np.int64)
        output = self.session.run(
            [self.output], {name: _ONNX_INPUTS[name](ids) for name in self.inputs}
        )
        vector = np.asarray(output[0], dtype=np.float32)
        if vector.ndim == 3:  # per token: mean-pooled
            vector = vector.mean(axis=1)
        if vector.shape[0] != 1 or vector.ndim != 2:
            raise EmbeddingUnavailable(f"the ONNX model answered shape {vector.shape}")
        row: Array = vector[0]
        return row

    def embed(self, texts: Sequence[str]) -> Array:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = self.tokens.encode(readable(text), TRANSFORMER_MAX_TOKENS - 2)
            if tokens:
                out[row] = self._run([self.cls, *tokens, self.sep])
        out[~np.isfinite(out).all(axis=1)] = 0.0  # as for a text without meaning
        return normalize_rows(out)


def no_telemetry() -> None:
    """Keep onnxruntime from collecting telemetry. Its Linux builds otherwise write a device id
    and a queue of events for upload under ~/.cache/Microsoft/DeveloperTools/.onnxruntime as
    soon as the library is imported; it reads this variable then, so it is set before the
    first import (and so for this process's children too). The daemon sets it when it is
    configured (`Embeddings.deferred`, on the main thread), so the loading thread finds it set
    and never changes the environment while other threads may start processes."""
    if os.environ.get(ONNXRUNTIME_TELEMETRY) != "1":
        os.environ[ONNXRUNTIME_TELEMETRY] = "1"


def load_onnx(directory: Path) -> OnnxEmbedder:
    """The ONNX sentence model in `directory` (model.onnx, vocab.txt, and MODEL.txt for its id
    and ranking settings when it has one). EmbeddingUnavailable when onnxruntime is missing or
    the model cannot be run."""
    no_telemetry()
    try:
        import onnxruntime  # type: ignore[import-untyped]  # noqa: F401, PLC0415 (imported here to say why it cannot be)
    except ImportError as exc:
        raise EmbeddingUnavailable(
            f"onnxruntime cannot be imported ({exc}); reinstall orcad, or set "
            '[recall] embedding = "static"'
        ) from exc
    path = directory / ONNX_FILE
    try:
        require_regular_file(path)
        vocab = read_vocab(directory / "vocab.txt")
        described = directory / "MODEL.txt"
        text = ""
        if described.exists():
            require_regular_file(described)
            text = described.read_text(encoding="utf-8")
        model_id = next(
            (line[3:].strip() for line in text.splitlines() if line.startswith("id:")), ""
        )
        if not model_id:  # a model of the user's: its id is its file's digest
            model_id = f"onnx-{directory.name}-{file_digest(path)[:16]}"
        session = onnxruntime_session(str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise EmbeddingUnavailable(f"cannot load the ONNX model in {directory}: {exc}") from exc
    except Exception as exc:  # onnxruntime's own errors (a damaged or foreign graph)
        raise EmbeddingUnavailable(f"onnxruntime cannot load {path}: {exc}") from exc
    try:
        embedder = OnnxEmbedder(session, vocab, model_id, directory)
    except EmbeddingUnavailable:
        raise
    except Exception as exc:
        raise EmbeddingUnavailable(f"onnxruntime cannot run {path}: {exc}") from exc
    apply_settings(embedder, text, directory)
    return embedder


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


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


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc only): loading a model parses
    its file into buffers that are freed, but that glibc would otherwise keep (about 20 MiB
    for the built-in model, its reference vectors included)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


class EndpointEmbedder(RankingSettings):
    """An OpenAI-compatible `/v1/embeddings` server, each call bounded by `timeout_s`. Texts are
    redacted before they are sent (a prompt may hold a pasted secret)."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float):
        if not base_url or not model:
            raise EmbeddingUnavailable(
                '[recall.endpoint] needs base_url and model for embedding = "endpoint"'
            )
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout_s = timeout_s
        self.model_id = f"endpoint-{model}"
        self.dims = 0  # known after the first answer
        # each purpose rests on its own failures: a batch a slow server could not embed in time
        # says nothing about one prompt, nor a failure within recall's deadline about the
        # backfill's longer one
        self.breakers: dict[Purpose, EndpointBreaker] = {
            purpose: EndpointBreaker() for purpose in PURPOSES
        }
        self._client: Any = None  # its DeadlineClient, made at the first call
        self._client_lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, purpose: Purpose = "recall") -> Array:
        """Unit rows for `texts`; EmbeddingRefused when the server refuses them,
        EmbeddingTimedOut past the deadline, else EmbeddingUnavailable when it fails, or failed
        lately and rests (orcad.recall.breaker). The backfill gets at least
        EMBEDDING_BACKGROUND_TIMEOUT_S (recall's deadline is set for one prompt)."""
        if not texts:
            return np.zeros((0, max(self.dims, 1)), dtype=np.float32)
        breaker = self.breakers[purpose]
        admitted = breaker.admit()
        if admitted.resting is not None:
            raise EmbeddingUnavailable(admitted.resting)
        timeout_s = self.timeout_s
        if purpose == "backfill":
            timeout_s = max(timeout_s, EMBEDDING_BACKGROUND_TIMEOUT_S)
        try:
            matrix = self._post(texts, timeout_s)
        except EmbeddingRefused:
            self._answered(purpose)  # the input is at fault, not the server
            raise
        except EmbeddingUnavailable as exc:
            breaker.failed(admitted.round, str(exc), exc.retry_after)
            raise
        except BaseException as exc:  # whatever it was, the trial it may be has an outcome
            breaker.failed(admitted.round, f"embedding endpoint {self.url}: {exc!r}")
            raise
        self._answered(purpose)
        return matrix

    def _answered(self, purpose: Purpose) -> None:
        """The server answered within the deadline of `purpose`: the rests of the purposes
        with that deadline or a longer one are over (an answer within the backfill's says
        nothing about recall's)."""
        ended = ("backfill",) if purpose == "backfill" else PURPOSES
        for each in ended:
            self.breakers[each].succeeded()

    def _http(self) -> Any:
        """The client every call shares (orcad.recall.endpoint_http), and with it its open
        connections: each one made anew (as `httpx.post` does) builds a TLS context first,
        about 30 ms on every recall."""
        # only for an endpoint: httpx would add ~45 ms to every start
        from orcad.recall.endpoint_http import DeadlineClient  # noqa: PLC0415

        with self._client_lock:
            if self._client is None:
                self._client = DeadlineClient()
                # its loop and connections end with it when this embedder goes
                weakref.finalize(self, self._client.close)
            return self._client

    def start(self) -> None:
        """Start the HTTP client's loop (imports included, about 0.2 s), which the first
        request would otherwise wait for."""
        self._http().start()

    def _post(self, texts: Sequence[str], timeout_s: float) -> Array:
        import httpx  # noqa: PLC0415 - as in `_http`

        from orcad.recall.endpoint_http import AnswerTooLarge, DeadlinePassed  # noqa: PLC0415

        client = self._http()
        try:
            answer = client.post_json(
                self.url,
                # leaves the machine: what looks like a secret goes as its placeholder
                {
                    "model": self.model,
                    # redacted whole, then cut: a cut first could leave half a secret
                    "input": [redact(text)[:EMBED_READ_CHARS] for text in texts],
                },
                headers=self.headers,
                deadline_s=timeout_s,
                max_bytes=EMBEDDING_ANSWER_BASE_BYTES
                + len(texts) * EMBEDDING_ANSWER_BYTES_PER_TEXT,
            )
        except (DeadlinePassed, httpx.TimeoutException) as exc:
            message = f"embedding endpoint {self.url}: timed out after {timeout_s:g} s"
            raise EmbeddingTimedOut(message) from exc
        except (AnswerTooLarge, httpx.HTTPError) as exc:
            raise EmbeddingUnavailable(f"embedding endpoint {self.url}: {exc}") from exc
        if answer.status >= 400:
            message = f"embedding endpoint {self.url} answered {answer.status}"
            message += f" {answer.reason}" if answer.reason else ""
            if answer.status in REFUSING_STATUSES:
                raise EmbeddingRefused(message)
            retry_after = parse_retry_after(answer.retry_after, now_epoch=time.time())
            raise EmbeddingUnavailable(message, retry_after=retry_after)
        try:
            items = sorted(json.loads(answer.body)["data"], key=lambda item: item["index"])
            matrix = np.array([item["embedding"] for item in items], dtype=np.float32)
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            raise EmbeddingUnavailable(f"embedding endpoint {self.url}: {exc}") from exc
        if (
            matrix.ndim != 2
            or len(matrix) != len(texts)
            or matrix.shape[1] == 0
            or (self.dims and matrix.shape[1] != self.dims)
        ):
            raise EmbeddingUnavailable(f"embedding endpoint {self.url}: answer of wrong shape")
        self.dims = int(matrix.shape[1])
        # a row holding NaN or inf says nothing: a zero row (cosine 0 with everything), as for
        # a text without tokens, so the others of the batch are kept
        matrix[~np.isfinite(matrix).all(axis=1)] = 0.0
        return normalize_rows(matrix)


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
        endpoint = EndpointEmbedder(base_url, model, os.environ.get(api_key_env), timeout_s)
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


def fit_logistic(features: Array, labels: npt.NDArray[np.float64]) -> tuple[Array, float]:
    """The weights and bias of an L2-penalised logistic regression (penalty UNRELATED_L2 on the
    weights, none on the bias), fitted by Newton's method in float64. The gradient and the
    curvature are summed over blocks of rows: the fit may run in the model's loading thread,
    whose allocator keeps what it once held, so it never copies the features whole.
    EmbeddingUnavailable if it does not converge to finite weights."""
    count, width = features.shape
    penalty = np.full(width + 1, UNRELATED_L2)
    penalty[-1] = 1e-9  # the bias is not shrunk (only kept solvable)
    weights = np.zeros(width + 1)
    for _ in range(FIT_STEPS):
        gradient = penalty * weights
        hessian = np.diag(penalty)
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
    raise EmbeddingUnavailable(
        f"the unrelated-prompt classifier did not converge in {FIT_STEPS} Newton steps"
    )


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
