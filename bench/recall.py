"""Recall latency and throughput, next to floors measured in the same run on the same data.

One real orcad on a throwaway home. The project ledger is full (128 candidates, FTS5 index
published); the deliberate database is grown to 1k, 10k and 100k records (the evaluation facts
plus generated records in this, other and global workspaces). For each size:

- in one interleaved loop, so that all figures see the same machine load: recall p50/p99
  through the socket, every call a new turn, prompts long enough to give the full 12 query
  terms; the same turn asked again (its snapshot: the payload without any search);
  `daemon.ping` on the same connection; and in process, on the same files, recall's own work
  (the prompt embedded with the same model, the automatic search, the deliberate search with
  term planning and ranking, the caps and the rendered block: the objects the daemon's recall
  thread uses) and the naive plan (all 12 terms OR-ed, ranked by bm25);
- hit@6 of the deliberate part on the evaluation prompts, through the daemon and with the
  naive plan, so that planning is seen not to lose quality;
- recall requests/s with 64 sessions on 64 connections at once, and the errors seen.

    .venv/bin/python -m bench.recall [--sizes 1000,10000,100000] [--requests 400] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import percentile, rss_mib
from bench.eval_data import FACTS
from bench.eval_data import PROMPTS as LABELLED
from bench.eval_recall import Labelled, load_automatic
from orcad.clock import SystemClock
from orcad.deliberate.queries import (
    DuplicateRecord,
    StoredRecord,
    insert_record,
    new_record_id,
    search_by_match,
)
from orcad.deliberate.schema import open_database
from orcad.deliberate.service import DeliberateMemory
from orcad.deliberate.store import DeliberateStore
from orcad.log import configure_logging
from orcad.query import derive_query_terms, distinct_terms, match_expression
from orcad.recall.automatic import ProjectMemorySearch
from orcad.recall.deliberate import DeliberateRecall
from orcad.recall.embedding import Embeddings
from orcad.recall.render import render_context
from orcad.recall.select import cap_automatic, cap_deliberate, to_entry
from orcad.recall.service import AUTOMATIC_FETCH, DELIBERATE_FETCH
from orcad.session_snapshot import Session
from orcad.sessions import SessionStore
from protocol.trio_client import open_client
from tests.harness import DaemonProcess, OrcaEnv

FETCH = 16  # what recall asks the deliberate search for (twice the record cap)
PROMPTS = [(prompt, wanted) for _kind, prompt, wanted in LABELLED if wanted]


def score(ranked: list[list[str]], expected: list[list[str]]) -> dict[str, float]:
    """hit@6 and MRR of rankings against the ids that answer each prompt."""
    hits = reciprocal = 0.0
    for ranking, wanted in zip(ranked, expected, strict=True):
        ranks = [position for position, item in enumerate(ranking, 1) if item in wanted]
        hits += bool(ranks and ranks[0] <= 6)
        reciprocal += 1.0 / ranks[0] if ranks else 0.0
    return {"hit@6": round(hits / len(expected), 3), "mrr": round(reciprocal / len(expected), 3)}


def wait_for_backfill(
    daemon: DaemonProcess, timeout: float = 600.0, *, session: Any = None
) -> None:
    """Measure the steady state: every record embedded by the model in use, and every fact of
    `session`'s project (an opened session; its first recall notes the project for the
    backfill: facts written into the ledger directly have no vector)."""
    if session is not None:
        ids = {"session_id": session.session_id, "epoch": session.epoch}
        prompt = "a first recall notes the project for the backfill"
        daemon.call("recall", {**ids, "turn_id": f"note-{time.time()}", "prompt": prompt})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        embedding = daemon.call("daemon.status", {}).embedding
        if embedding is None or embedding.state in ("off", "unavailable"):
            return
        waiting = embedding.pending or embedding.facts_pending or embedding.corrections_pending
        if embedding.state == "ready" and not waiting:
            return  # (the pairing of corrections also holds the store's thread while it runs)
        time.sleep(0.2)


# Words developers write in memory records; drawn with a Zipf-like skew, so a few of them
# appear in a large share of records, as "test", "use" or "run" do in real notes.
DOMAIN_WORDS = """
test tests run use build deploy release project service api code file files config database
data user users team check checks script make docker image branch commit review merge ci job
jobs server client error errors log logs cache queue worker task update version package module
function class type types local staging production env environment setting settings path port
key keys table tables query index migration schema model models route routes request response
token auth login session page component style format lint docs note notes always never prefer
should must need first after before when only new old default main fix bug issue ticket time
""".split()  # noqa: SIM905 - a word list reads better as text
FILLERS = "the a to for with in on of and is are be by from".split()  # noqa: SIM905


def pseudo_word(rng: random.Random) -> str:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "dor", "len"]
    return "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))


def generated_record(rng: random.Random, rare: list[str]) -> str:
    words = [
        DOMAIN_WORDS[min(int(rng.paretovariate(1.1)) - 1, len(DOMAIN_WORDS) - 1)]
        for _ in range(rng.randint(5, 9))
    ]
    words += [rng.choice(rare) for _ in range(rng.randint(2, 4))]
    words += [rng.choice(FILLERS) for _ in range(rng.randint(2, 5))]
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def latency_prompts() -> list[str]:
    """Runs of evaluation prompts: long user messages that give the full 12 terms."""
    texts = [prompt for prompt, _wanted in PROMPTS]
    prompts = [" ".join(texts[i : i + 4]) for i in range(len(texts) - 3)]
    return [p for p in prompts if len(derive_query_terms(p)) == 12]


class Populator:
    """Grows the deliberate database with the store's own insert (daemon stopped)."""

    def __init__(self, database: Path, workspace_id: str, workspace_root: str) -> None:
        self.database = database
        self.workspace_id = workspace_id
        self.workspace_root = workspace_root
        self.count = 0
        self.rng = random.Random(20261130)
        self.rare = [pseudo_word(self.rng) for _ in range(20000)]
        self.eval_records: dict[str, str] = {}  # record id -> fact id

    def grow_to(self, size: int) -> None:
        connection = open_database(self.database)
        connection.execute("PRAGMA synchronous = OFF")  # bulk load; the bench owns this copy
        now = time.time()
        try:
            if not self.eval_records:
                for fact_id, _category, kind, text in FACTS:
                    record = self._record(kind, text, self.workspace_id, now - 86400)
                    insert_record(connection, record)
                    self.eval_records[record.id] = fact_id
                    self.count += 1
            while self.count < size:
                draw = self.rng.random()
                workspace = self.workspace_id if draw < 0.5 else None if draw < 0.75 else "other-ws"
                content = generated_record(self.rng, self.rare)
                age = self.rng.uniform(0, 365 * 86400)
                try:
                    insert_record(connection, self._record("fact", content, workspace, now - age))
                except DuplicateRecord:
                    continue
                self.count += 1
        finally:
            connection.close()

    def _record(self, kind: str, content: str, workspace: str | None, at: float) -> StoredRecord:
        return StoredRecord(
            id=new_record_id(),
            kind=kind,
            content=content,  # type: ignore[arg-type]
            workspace_id=workspace,
            workspace_root=self.workspace_root,
            created_at=at,
            updated_at=at,
        )


def p50_p99(values: list[float]) -> tuple[float, float]:
    return percentile(values, 0.5), percentile(values, 0.99)


def timed(work: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return samples


class InProcessRecall:
    """What the daemon's recall thread does for a turn, in this process on the same files:
    embed the prompt, search the project's automatic memory and the deliberate records, cap
    both parts and render the block (orcad.recall.service._search_and_compose)."""

    def __init__(
        self, root: Path, database: Path, project_dir: Path, session: Session, embedding: str
    ) -> None:
        self.embeddings = Embeddings.load(embedding)
        self.session = session
        self.store = DeliberateStore(database)
        self.store.open_blocking()
        sessions = SessionStore(root / "bench-sessions.sqlite3", SystemClock())
        self.clock = SystemClock()
        memory = DeliberateMemory(self.store, self.clock, sessions)
        self.automatic = ProjectMemorySearch(
            lambda _project: project_dir, embeddings=self.embeddings
        )
        self.deliberate = DeliberateRecall(memory, self.embeddings)

    def recall(self, prompt: str) -> str:
        terms = distinct_terms(prompt)
        query = self.embeddings.query(prompt)
        automatic = self.automatic.search_blocking(
            self.session.project_id, terms, AUTOMATIC_FETCH, query
        )
        deliberate = self.deliberate.search_blocking(
            self.session, prompt, terms, DELIBERATE_FETCH, query
        )
        now = self.clock.now()
        return render_context(
            cap_automatic(to_entry(record, now) for record in automatic),
            cap_deliberate(deliberate, now),
            now,
        )

    def close(self) -> None:
        self.automatic.close()
        self.store.close()


def bench_session(opened: Any, cwd: str) -> Session:
    """The daemon's session as recall's searches read it (workspace, project, not bare)."""
    return Session(
        session_id=opened.session_id,
        epoch=opened.epoch,
        cwd=cwd,
        workspace_id=opened.workspace.id,
        workspace_root=opened.workspace.root,
        project_id=opened.project.id,
        project_identity="",
        project_root=cwd,
        history="persistent",
        mode="normal",
        interactive=False,
        auto_approve=False,
        bare=False,
        auto_memory=True,
        opened_at=time.time(),
    )


def measure(
    daemon: DaemonProcess,
    cwd: str,
    *,
    in_process: InProcessRecall,
    database: Path,
    workspace_id: str,
    prompts: list[str],
    requests: int,
) -> dict[str, Any]:
    """One loop, interleaved, so that every figure sees the same machine load:
    ping, recall of a new turn, recall of that turn again (its snapshot: the same payload
    with no search), recall's work in process, the naive plan in process."""
    samples: dict[str, list[float]] = {
        "ping": [],
        "recall": [],
        "snapshot": [],
        "planned": [],
        "naive": [],
    }
    connection = open_database(database)
    try:
        with daemon.client() as client:
            opened = client.call("session.open", {"cwd": cwd, "mode": "normal"})
            ids = {"session_id": opened.session_id, "epoch": opened.epoch}
            for number in range(requests + 50):  # the first 50 warm caches and connections
                prompt = prompts[number % len(prompts)]
                terms = derive_query_terms(prompt)
                recall = {**ids, "turn_id": f"b-{number}", "prompt": prompt}
                steps: list[tuple[str, Callable[[], Any]]] = [
                    ("ping", lambda: client.call("daemon.ping")),
                    ("recall", lambda: client.call("recall", recall)),  # noqa: B023
                    ("snapshot", lambda: client.call("recall", recall)),  # noqa: B023
                    ("planned", lambda: in_process.recall(prompt)),  # noqa: B023
                    ("naive", lambda: _naive_search(connection, workspace_id, terms)),  # noqa: B023
                ]
                for name, work in steps:
                    started = time.perf_counter()
                    work()
                    if number >= 50:
                        samples[name].append(time.perf_counter() - started)
    finally:
        connection.close()
    return {name: p50_p99(values) for name, values in samples.items()}


def _naive_search(connection: sqlite3.Connection, workspace_id: str, terms: list[str]) -> list[str]:
    records = search_by_match(connection, workspace_id, match_expression(terms), FETCH)
    return [record.id for record in records]


def quality(
    daemon: DaemonProcess, cwd: str, database: Path, workspace_id: str, eval_records: dict[str, str]
) -> dict[str, Any]:
    expected = [wanted for _prompt, wanted in PROMPTS]
    through_daemon = []
    with daemon.client() as client:
        opened = client.call("session.open", {"cwd": cwd, "mode": "normal"})
        ids = {"session_id": opened.session_id, "epoch": opened.epoch}
        for number, (prompt, _wanted) in enumerate(PROMPTS):
            result = client.call("recall", {**ids, "turn_id": f"q-{number}", "prompt": prompt})
            through_daemon.append([eval_records.get(r.id, r.id) for r in result.deliberate])
    connection = open_database(database)
    try:
        naive = [
            [
                eval_records.get(i, i)
                for i in _naive_search(connection, workspace_id, derive_query_terms(prompt))
            ]
            for prompt, _wanted in PROMPTS
        ]
    finally:
        connection.close()
    return {"recall": score(through_daemon, expected), "naive": score(naive, expected)}


async def concurrent_load(
    socket: str, cwd: str, prompts: list[str], sessions: int, per_session: int
) -> dict[str, Any]:
    errors: list[str] = []
    done = 0

    async def one_session(number: int) -> None:
        nonlocal done
        try:
            async with open_client(socket) as client:
                opened = await client.call("session.open", {"cwd": cwd, "mode": "normal"})
                ids = {"session_id": opened.session_id, "epoch": opened.epoch}
                for turn in range(per_session):
                    prompt = prompts[(number + turn) % len(prompts)]
                    await client.call("recall", {**ids, "turn_id": f"c-{turn}", "prompt": prompt})
                    done += 1
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for number in range(sessions):
            nursery.start_soon(one_session, number)
    elapsed = time.perf_counter() - started
    return {"sessions": sessions, "recalls": done, "per_s": done / elapsed, "errors": errors}


def run(
    sizes: list[int],
    requests: int,
    sessions: int,
    per_session: int,
    progress: Callable[[str], None],
    *,
    embedding: str = "builtin",
) -> dict[str, Any]:
    prompts = latency_prompts()
    report: dict[str, Any] = {"sizes": [], "prompts": len(prompts)}
    with tempfile.TemporaryDirectory(prefix="orcad-bench-recall-") as temp:
        root = Path(temp)
        orca = OrcaEnv(root)
        orca.write_config(f'[extraction]\nworkers = 0\n[recall]\nembedding = "{embedding}"\n')
        workdir = root / "repo"
        workdir.mkdir()
        cwd = str(workdir)
        daemon = DaemonProcess(orca).start()
        try:  # a daemon is never left running when the bench fails
            opened = daemon.call("session.open", {"cwd": cwd})
            project_dir = orca.memory_root / "projects" / opened.project.id
            load_automatic(project_dir, time.time(), Labelled.named())
            populator = Populator(orca.deliberate_db, opened.workspace.id, opened.workspace.root)
        finally:
            daemon.stop()
        for size in sizes:
            progress(f"growing the deliberate database to {size} records")
            populator.grow_to(size)
            daemon.start()
            try:
                wait_for_backfill(daemon, session=opened)
                progress(f"measuring at {size} records")
                in_process = InProcessRecall(
                    root, orca.deliberate_db, project_dir, bench_session(opened, cwd), embedding
                )
                try:
                    figures = measure(
                        daemon,
                        cwd,
                        in_process=in_process,
                        database=orca.deliberate_db,
                        workspace_id=opened.workspace.id,
                        prompts=prompts,
                        requests=requests,
                    )
                finally:
                    in_process.close()
                found = quality(
                    daemon, cwd, orca.deliberate_db, opened.workspace.id, populator.eval_records
                )
                load = trio.run(
                    concurrent_load, str(orca.socket), cwd, prompts, sessions, per_session
                )
                assert daemon.proc is not None
                entry = {
                    "records": populator.count,
                    "ping": figures["ping"],
                    "recall": figures["recall"],
                    "recall_snapshot": figures["snapshot"],
                    "in_process_planned": figures["planned"],
                    "in_process_naive": figures["naive"],
                    "floor": figures["ping"][0] + figures["planned"][0],
                    "hit@6": found,
                    "load": load,
                    "rss_mib": rss_mib(daemon.proc.pid),
                }
                entry["recall_over_floor"] = entry["recall"][0] / entry["floor"]
                entry["recall_over_naive"] = entry["recall"][0] / entry["in_process_naive"][0]
                report["sizes"].append(entry)
                progress(format_entry(entry))
            finally:
                daemon.stop()
    return report


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.3f} ms"


def format_entry(entry: dict[str, Any]) -> str:
    load = entry["load"]
    found = entry["hit@6"]
    return "\n".join(
        [
            f"{entry['records']:>7} deliberate records, ledger of 128:",
            f"  recall          p50 {ms(entry['recall'][0])}  p99 {ms(entry['recall'][1])}",
            f"  same turn again p50 {ms(entry['recall_snapshot'][0])}"
            f"  p99 {ms(entry['recall_snapshot'][1])}  (snapshot: payload without search)",
            f"  daemon.ping     p50 {ms(entry['ping'][0])}  p99 {ms(entry['ping'][1])}",
            f"  in-process, recall's work   p50 {ms(entry['in_process_planned'][0])}"
            f"  p99 {ms(entry['in_process_planned'][1])}",
            f"  in-process, naive 12 terms  p50 {ms(entry['in_process_naive'][0])}"
            f"  p99 {ms(entry['in_process_naive'][1])}",
            f"  recall p50 / (ping + in-process work) = {entry['recall_over_floor']:.2f}"
            f"   (target <= 1.5)",
            f"  recall p50 / naive in-process        = {entry['recall_over_naive']:.2f}"
            f"   (target at 100k <= 0.25)",
            f"  deliberate hit@6 on the evaluation prompts: recall {found['recall']['hit@6']:.3f}"
            f" (MRR {found['recall']['mrr']:.3f}), naive plan {found['naive']['hit@6']:.3f}"
            f" (MRR {found['naive']['mrr']:.3f})",
            f"  {load['sessions']} concurrent sessions: {load['recalls']} recalls,"
            f" {load['per_s']:.0f} recalls/s, {len(load['errors'])} errors",
            f"  daemon RSS {entry['rss_mib']:.1f} MiB",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--requests", type=int, default=400, help="timed recalls per size")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--per-session", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--embedding",
        default="builtin",
        help='[recall] embedding for the daemon ("none": lexical, as before)',
    )
    args = parser.parse_args(argv)
    configure_logging(sys.stderr, level=logging.WARNING)  # in-process ledger writes stay quiet
    sizes = [int(size) for size in args.sizes.split(",")]
    report = run(
        sizes,
        args.requests,
        args.sessions,
        args.per_session,
        lambda line: print(line, file=sys.stderr, flush=True),
        embedding=args.embedding,
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"recall benchmark ({report['prompts']} distinct 12-term prompts)")
        for entry in report["sizes"]:
            print(format_entry(entry))


if __name__ == "__main__":
    main()
