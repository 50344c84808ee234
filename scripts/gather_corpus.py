"""Gather the training corpus of the built-in static embedding: short English texts about
software, one per line (scripts/build_static_embedding.py --corpus).

Sources, each optional, each sampled with a fixed seed, in this order (the whole is then
deduplicated and shuffled):
- `--summaries FILE` (repeatable, with `--take N` each): tab-separated package indexes with a
  header line and the one-line summary in the column whose header starts with "summary" (the
  shipped model used indexes of PyPI's and npm's package summaries: 150,000 and 50,000 texts;
  the npm one started some summaries with a bracketed annotation of the index's own, dropped
  with `--drop-prefix`);
- Debian package descriptions (`apt-cache dumpavail`), split into sentences (80,000);
- the first paragraph of docstrings of the Python files under `--docstrings DIR` (60,000).

A text is kept when it is ASCII, 25 to 300 characters long and mostly letters.

    python scripts/gather_corpus.py --summaries pypi.tsv --take 150000 --drop-prefix '' \\
        --summaries npm.tsv --take 50000 --drop-prefix 'REGEX' \\
        --docstrings .venv/lib/python3.11/site-packages --out corpus.txt
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import re
import subprocess
import sys
from pathlib import Path

DEBIAN_TEXTS = 80_000
DOCSTRING_TEXTS = 60_000


def clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def usable(text: str) -> bool:
    return (
        25 <= len(text) <= 300
        and sum(c.isalpha() for c in text) > 0.6 * len(text)
        and text.isascii()
    )


def summaries(path: Path, drop_prefix: str | None) -> list[str]:
    """The usable summaries of a package index (the column whose header starts "summary")."""
    rows = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        header = next(lines, "").rstrip("\n").split("\t")
        column = next((i for i, name in enumerate(header) if name.startswith("summary")), None)
        if column is None:
            raise SystemExit(f"{path}: no column whose header starts with 'summary'")
        for line in lines:
            fields = line.rstrip("\n").split("\t")
            if len(fields) <= column:
                continue
            summary = fields[column]
            if drop_prefix:
                summary = re.sub(drop_prefix, "", summary)
            if usable(summary := clean(summary)):
                rows.append(summary)
    return rows


def debian_sentences() -> list[str]:
    listing = subprocess.run(
        ["apt-cache", "dumpavail"], capture_output=True, text=True, errors="replace", check=False
    ).stdout
    rows = []
    for match in re.finditer(r"^Description(?:-en)?: (.*(?:\n .*)*)", listing, re.M):
        body = clean(match.group(1).replace("\n .\n", " \n").replace("\n", " "))
        rows.extend(s for s in re.split(r"(?<=[.!?])\s+", body) if usable(s))
    return list(dict.fromkeys(rows))


def docstrings(root: Path) -> list[str]:
    rows = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            try:
                tree = ast.parse(Path(folder, name).read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(
                    node, (ast.FunctionDef, ast.ClassDef, ast.Module, ast.AsyncFunctionDef)
                ):
                    text = ast.get_docstring(node)
                    if text and usable(paragraph := clean(text.split("\n\n")[0])):
                        rows.append(paragraph)
    return list(dict.fromkeys(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summaries", type=Path, action="append", default=[])
    parser.add_argument("--take", type=int, action="append", default=[])
    parser.add_argument(
        "--drop-prefix",
        action="append",
        default=[],
        help="after each --summaries: a regular expression for a note of the index's own at "
        "the start of a summary, dropped before the text is judged ('' for none)",
    )
    parser.add_argument("--no-debian", action="store_true")
    parser.add_argument("--docstrings", type=Path, default=None)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if len(args.take) != len(args.summaries):
        parser.error("give one --take N after each --summaries FILE")
    drops = args.drop_prefix + [""] * (len(args.summaries) - len(args.drop_prefix))
    random.seed(7)
    texts: list[str] = []
    sources = [
        (lambda p=p, d=d: summaries(p, d), n, p.name)
        for p, n, d in zip(args.summaries, args.take, drops, strict=True)
    ]
    if not args.no_debian:
        sources.append((debian_sentences, DEBIAN_TEXTS, "Debian descriptions"))
    if args.docstrings is not None:
        sources.append((lambda: docstrings(args.docstrings), DOCSTRING_TEXTS, "docstrings"))
    for gather, take, name in sources:
        rows = gather()
        random.shuffle(rows)
        texts += rows[:take]
        print(f"{name}: {len(rows)} usable, {min(take, len(rows))} taken", file=sys.stderr)
    texts = list(dict.fromkeys(texts))
    random.shuffle(texts)
    args.out.write_text("\n".join(texts) + "\n", encoding="utf-8")
    print(f"wrote {len(texts)} texts to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
