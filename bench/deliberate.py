"""Deliberate-memory benchmark: search growth with the record count, and forget overhead.

    python bench/deliberate.py [--sizes 1000,10000,100000] [--queries 300]

1. Search, in process on real database files: p50/p99 of the planned query (what
   memory.search runs) and of a naive OR of all terms, at each size; the ratio of the largest
   size's planned p50 to the smallest's (target: under 5x).
2. Forget: raw SQLite delete on a database opened like the store's, `memory.manage` forget
   over the socket in a yolo session (no approval), and `daemon.ping` over the same
   connection; target: socket forget within 3x of (raw forget + ping).
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/deliberate.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orcad.deliberate.queries import (
    _INSERT,
    StoredRecord,
    delete_record,
    insert_record,
    new_record_id,
    search_records,
)
from orcad.deliberate.schema import open_database
from orcad.query import derive_query_terms, match_expression

_COMMON_TEXT = "the a to of and in is for on with use uses we our this that it run runs"
COMMON_WORDS = _COMMON_TEXT.split()
VOCABULARY_SIZE = 20_000
SEED = 7


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def make_vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    words = {
        "".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 10)))
        for _ in range(VOCABULARY_SIZE)
    }
    ordered = sorted(words)
    rng.shuffle(ordered)
    weights = [1.0 / (rank + 1) for rank in range(len(ordered))]  # Zipf-like
    return ordered, weights


def make_text(rng: random.Random, words: list[str], weights: list[float]) -> str:
    body = rng.choices(words, weights=weights, k=rng.randint(6, 14))
    body += rng.sample(COMMON_WORDS, k=3)
    rng.shuffle(body)
    return " ".join(body)


def build_database(
    path: Path, size: int, rng: random.Random, vocab: tuple[list[str], list[float]]
) -> list[str]:
    connection = open_database(path)
    texts = []
    rows = []
    for index in range(size):
        text = make_text(rng, *vocab) + f" n{index}"
        texts.append(text)
        workspace = None if index % 5 == 0 else f"ws{index % 4}"
        rows.append((new_record_id(), "fact", text, workspace, "/src/bench", index, index))
    connection.execute("BEGIN")
    connection.executemany(_INSERT, rows)
    connection.execute("COMMIT")
    connection.close()
    return texts


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return (time.perf_counter() - started) * 1000


def naive_search(connection: object, workspace: str, text: str, limit: int) -> list[object]:
    import sqlite3

    assert isinstance(connection, sqlite3.Connection)
    expression = match_expression(derive_query_terms(text))
    return connection.execute(
        "SELECT m.public_id FROM memories_fts JOIN memories AS m ON m.row_id = memories_fts.rowid "
        "WHERE memories_fts MATCH ? AND (m.workspace_id = ? OR m.workspace_id IS NULL) "
        "ORDER BY bm25(memories_fts), m.updated_at DESC LIMIT ?",
        (expression, workspace, limit),
    ).fetchall()


def bench_search(sizes: list[int], queries: int, directory: Path) -> dict[int, float]:
    rng = random.Random(SEED)
    vocab = make_vocabulary(rng)
    planned_p50: dict[int, float] = {}
    print("search (in process, limit 8, 12-term queries from record text plus common words)")
    print(f"{'records':>8} {'planned p50':>12} {'p99':>8} {'naive p50':>10} {'p99':>8}  hits")
    for size in sizes:
        path = directory / f"search-{size}.sqlite3"
        started = time.perf_counter()
        texts = build_database(path, size, rng, vocab)
        build_s = time.perf_counter() - started
        connection = open_database(path)
        query_texts = [
            " ".join(rng.choice(texts).split()[:9]) + " " + make_text(rng, *vocab)
            for _ in range(queries)
        ]
        for text in query_texts[:20]:  # warm the page cache
            search_records(connection, "ws1", text, 8)
        planned, naive, hits = [], [], 0
        for text in query_texts:
            planned.append(timed(lambda t=text, c=connection: search_records(c, "ws1", t, 8)))
            naive.append(timed(lambda t=text, c=connection: naive_search(c, "ws1", t, 8)))
            hits += bool(search_records(connection, "ws1", text, 8))
        connection.close()
        planned_p50[size] = statistics.median(planned)
        print(
            f"{size:>8} {statistics.median(planned):>10.3f}ms {percentile(planned, 0.99):>6.2f}ms "
            f"{statistics.median(naive):>8.3f}ms {percentile(naive, 0.99):>6.2f}ms  "
            f"{hits}/{queries} (built in {build_s:.1f} s)"
        )
    smallest, largest = min(sizes), max(sizes)
    ratio = planned_p50[largest] / planned_p50[smallest]
    print(f"planned p50 at {largest} / at {smallest}: {ratio:.2f}x (target < 5x)")
    return planned_p50


def bench_forget(count: int, directory: Path) -> None:
    from tests.harness import DaemonProcess, OrcaEnv

    raw_path = directory / "raw-forget.sqlite3"
    connection = open_database(raw_path)
    ids = []
    for index in range(count):
        stored = insert_record(
            connection,
            StoredRecord(
                id=new_record_id(),
                kind="fact",
                content=f"raw forget record {index}",
                workspace_id="ws",
                workspace_root="/src",
                created_at=index,
                updated_at=index,
            ),
        )
        ids.append(stored.id)
    raw = [timed(lambda i=record_id: delete_record(connection, i)) for record_id in ids]
    connection.close()

    root = directory / "daemon"
    root.mkdir()
    orca = OrcaEnv(root)
    daemon = DaemonProcess(orca)
    daemon.start()
    try:
        workspace = root / "ws"
        workspace.mkdir()
        with daemon.client() as client:
            opened = client.call("session.open", {"cwd": str(workspace), "mode": "yolo"})
            session = {"session_id": opened.session_id, "epoch": opened.epoch}
            record_ids = [
                client.call(
                    "memory.manage",
                    {
                        **session,
                        "action": "save",
                        "content": f"socket forget record {i}",
                        "kind": "fact",
                        "is_global": False,
                    },
                ).record.id
                for i in range(count)
            ]
            pings = [timed(lambda: client.call("daemon.ping")) for _ in range(count)]
            forgets = [
                timed(
                    lambda i=record_id: client.call(
                        "memory.manage", {**session, "action": "forget", "id": i}
                    )
                )
                for record_id in record_ids
            ]
    finally:
        daemon.stop()
    raw_p50, ping_p50, forget_p50 = (statistics.median(x) for x in (raw, pings, forgets))
    print(f"\nforget ({count} records each; synchronous=FULL, WAL)")
    print(f"  raw SQLite delete           p50 {raw_p50:.3f} ms  p99 {percentile(raw, 0.99):.3f} ms")
    print(
        f"  daemon.ping round trip      p50 {ping_p50:.3f} ms  p99 {percentile(pings, 0.99):.3f} ms"
    )
    print(
        f"  memory.manage forget (yolo) p50 {forget_p50:.3f} ms  "
        f"p99 {percentile(forgets, 0.99):.3f} ms"
    )
    ratio = forget_p50 / (raw_p50 + ping_p50)
    print(f"  forget / (raw + ping): {ratio:.2f}x (target <= 3x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--forgets", type=int, default=300)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        bench_search(sizes, args.queries, Path(directory))
        bench_forget(args.forgets, Path(directory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
