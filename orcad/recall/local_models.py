"""The embedding models that run in the daemon's own process: the built-in sentence model (an
int8 ONNX graph run by onnxruntime), the static model (one vector per token, in numpy) and a
BERT model directory (run in numpy), each read from files that must be regular files.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from orcad.deliberate.row_products import onnxruntime_session
from orcad.recall import bert
from orcad.recall.embedders import (
    MAX_TOKENS,
    TRANSFORMER_MAX_TOKENS,
    Array,
    EmbeddingUnavailable,
    RankingSettings,
    apply_settings,
    normalize_rows,
    read_vocab,
    readable,
    require_regular_file,
)
from orcad.recall.wordpiece import WordPiece

BUILTIN_DIR = Path(__file__).resolve().parent / "minilm"  # the default model
STATIC_DIR = Path(__file__).resolve().parent / "model"
ONNX_FILE = "model.onnx"
ONNXRUNTIME_TELEMETRY = "ORT_DISABLE_TELEMETRY"  # see no_telemetry
# Address space onnxruntime needs, beyond what the daemon has mapped, to be imported and to load
# the built-in model. Under an address space limit (`ulimit -v`, LimitAS=) that leaves less, the
# import fails, or, when an allocation fails inside onnxruntime's own start-up, the whole process
# is aborted (an exception unwound through a C frame with no memory to load libgcc_s, a double
# free). On Linux x86-64 the import alone needed 60 MiB, and in the daemon, whose other threads
# map memory meanwhile, loading failed with up to 119 MiB to spare.
ONNX_ADDRESS_SPACE_BYTES = 160 * 1024 * 1024
# what onnxruntime's import says when it ran out of address space
_OUT_OF_MEMORY = ("bad_alloc", "failed to map segment", "Cannot allocate memory")


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
        require_regular_file(directory / "config.json")
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        vocab = read_vocab(directory / "vocab.txt")
        require_regular_file(directory / "model.safetensors")
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
    short = address_space_short_of(ONNX_ADDRESS_SPACE_BYTES)
    if short is not None:
        raise EmbeddingUnavailable(short)
    try:
        import onnxruntime  # type: ignore[import-untyped]  # noqa: F401, PLC0415 (imported here to say why it cannot be)
    except (ImportError, MemoryError) as exc:
        if isinstance(exc, MemoryError) or any(sign in str(exc) for sign in _OUT_OF_MEMORY):
            raise EmbeddingUnavailable(
                f"onnxruntime cannot be imported: out of memory ({exc}); {_ROOM_FOR_THE_MODEL}"
            ) from exc
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


_ROOM_FOR_THE_MODEL = (
    "raise orcad's address space limit (ulimit -v, LimitAS=) or its memory, or set "
    '[recall] embedding = "static"'
)


def address_space_short_of(needed: int) -> str | None:
    """Why `needed` more bytes cannot be mapped under this process's address space limit
    (RLIMIT_AS), or None when they can, when there is no limit, or when what is mapped cannot
    be read (no /proc)."""
    try:
        import resource  # noqa: PLC0415  (not on Windows)

        limit, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, AttributeError, OSError, ValueError):
        return None
    if limit == resource.RLIM_INFINITY or limit < 0:
        return None
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
    if limit - mapped >= needed:
        return None
    mib = 1024 * 1024
    return (
        f"orcad's address space limit ({limit // mib} MiB, of which {mapped // mib} MiB are in "
        f"use) leaves too little room to load onnxruntime and the model (about {needed // mib} "
        f"MiB); {_ROOM_FOR_THE_MODEL}"
    )


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
