"""Prompt embedding: what recall pays to turn a prompt into a vector, in process.

Times each prompt's embedding alone and with its gates (`Embeddings.query`, what recall runs
once per turn) for the built-in model, against the static model on the same prompts,
interleaved prompt by prompt so that both see the same machine load. Prompts: every labelled
set's (one question each, a median of 13 tokens with [CLS] and [SEP]) and bench/recall.py's
(three or four questions run together, about 40). Prints p50/p99, the tokens per prompt, the
ratio of the p50s and which int8 products this CPU runs: the built-in model's are exact with
VNNI (AVX-512 or AVX) and, by its kernels' design, on ARM, and saturate pairs of products at
16 bits on an x86 CPU without VNNI, so its vectors differ slightly there
(tests/test_recall_embedding.py: INT8_KERNELS_DIFFER).

    .venv/bin/python -m bench.embedding [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import percentile
from bench.eval_recall import LABELLED_SETS, Labelled
from bench.recall import latency_prompts
from orcad.recall.embedders import TRANSFORMER_MAX_TOKENS, readable
from orcad.recall.embedding import Embeddings
from orcad.recall.local_models import OnnxEmbedder

MODELS = ("builtin", "static")
WARM = 30


def int8_products() -> str:
    """Which int8 kernels onnxruntime picks on this CPU, as far as its flags tell."""
    machine = platform.machine().lower()
    if machine in {"arm64", "aarch64"}:
        return "exact (ARM: dot-product kernels; not measured)"
    try:
        flags = set(Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").split())
    except OSError:
        return "unknown (no /proc/cpuinfo)"
    if flags & {"avx512_vnni", "avx_vnni"}:
        return "exact (VNNI)"
    if "avx2" in flags:
        return "saturating (x86 without VNNI)"
    return "unknown"


def tokens(model: Embeddings, prompt: str) -> int:
    embedder = model.embedder
    if not isinstance(embedder, OnnxEmbedder):
        return 0
    return 2 + len(embedder.tokens.encode(readable(prompt), TRANSFORMER_MAX_TOKENS - 2))


def measure(models: dict[str, Embeddings], prompts: list[str], rounds: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {}
    for name in models:
        samples[f"{name}_embed"] = []
        samples[f"{name}_query"] = []
    for number in range(WARM):
        for model in models.values():
            model.query(prompts[number % len(prompts)])
    for _round in range(rounds):
        for prompt in prompts:
            for name, model in models.items():
                started = time.perf_counter()
                model.embed([prompt])
                middle = time.perf_counter()
                model.query(prompt)
                ended = time.perf_counter()
                samples[f"{name}_embed"].append(middle - started)
                samples[f"{name}_query"].append(ended - middle)
    figures: dict[str, Any] = {
        "prompts": len(prompts),
        "tokens_p50": statistics.median(tokens(models["builtin"], prompt) for prompt in prompts),
    }
    for key, values in samples.items():
        figures[key] = (percentile(values, 0.5), percentile(values, 0.99))
    figures["ratio_embed"] = figures["builtin_embed"][0] / figures["static_embed"][0]
    figures["ratio_query"] = figures["builtin_query"][0] / figures["static_query"][0]
    return figures


def run(rounds: int) -> dict[str, Any]:
    models = {name: Embeddings.load(name) for name in MODELS}
    for name, model in models.items():
        if model.state != "ready":
            raise SystemExit(f"the {name} model cannot be loaded: {model.reason}")
    labelled = [
        prompt
        for name in sorted(LABELLED_SETS)
        for _kind, prompt, _wanted in Labelled.named(name).prompts
    ]
    return {
        "int8_products": int8_products(),
        "labelled": measure(models, labelled, rounds),
        "bench": measure(models, latency_prompts(), rounds),
    }


def format_report(report: dict[str, Any]) -> str:
    def ms(pair: tuple[float, float]) -> str:
        return f"p50 {pair[0] * 1e3:6.3f} ms  p99 {pair[1] * 1e3:6.3f} ms"

    lines = [f"int8 products on this CPU: {report['int8_products']}"]
    for kind, title in (("labelled", "labelled prompts"), ("bench", "bench/recall.py's prompts")):
        figures = report[kind]
        lines += [
            f"{title}: {figures['prompts']} prompts, median {figures['tokens_p50']:.0f} tokens",
            f"  built-in, embedding          {ms(figures['builtin_embed'])}",
            f"  built-in, embedding + gates  {ms(figures['builtin_query'])}",
            f"  static, embedding            {ms(figures['static_embed'])}",
            f"  static, embedding + gates    {ms(figures['static_query'])}",
            f"  built-in / static: {figures['ratio_embed']:.1f}x embedding,"
            f" {figures['ratio_query']:.1f}x with the gates (target: built-in embedding p50"
            " <= 5 ms)",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="times each prompt is timed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.rounds)
    print(json.dumps(report) if args.json else format_report(report))


if __name__ == "__main__":
    main()
