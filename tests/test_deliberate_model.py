"""The deliberate store driven by random sequences of saves, updates, forgets, searches, vector
backfills and purges over a real memory.sqlite3, checked after every step against a plain model
of the records it should hold (hypothesis' rule-based state machines).

The full-text index is checked against an oracle: a fresh FTS5 table with the same tokenizer
holding only the records the model says are live, with the same row numbers, so that its
vocabulary, its matches and its bm25 ranks must be those of the store's index exactly.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from orcad.clock import stamp_after
from orcad.control_characters import has_visible_character
from orcad.deliberate import vectors
from orcad.deliberate.corrections import LOOKED_AT, link_unchecked, link_written
from orcad.deliberate.queries import (
    DuplicateRecord,
    StoredRecord,
    forget_visible_record,
    insert_record,
    new_record_id,
    planned_match,
    purge_deleted_text,
    recent_records,
    record_total,
    search_records,
    update_record,
    visible_record,
)
from orcad.deliberate.schema import open_database
from orcad.limits import MEMORY_CONTENT_MAX_CHARS
from orcad.query import FTS5_TOKENIZE, derive_query_terms, tokenize
from orcad.recall.rank import corrects
from protocol.errors import RemoteError
from protocol.types import RecordKind
from tests.deliberate_helpers import InProcessDaemon, SettableClock

pytestmark = pytest.mark.inprocess

WORKSPACES = ("ws1", "ws2", "ws3")
KINDS: tuple[RecordKind, ...] = ("preference", "fact", "workflow", "decision")
MODEL = "test-model"
DIMS = 8

# words that share stems ("deploy", "deploys", "deploying"), diacritics the tokenizer folds,
# scripts it keeps whole, numbers (corrections differ by them) and FTS5 syntax
WORDS = (
    "deploy",
    "deploys",
    "deploying",
    "line",
    "length",
    "staging",
    "server",
    "café",
    "cafe",
    "naïve",
    "日本語",
    "🚀",
    "AND",
    "OR",
    'quote"d',
    "json-rpc",
    "100",
    "120",
    "the",
    "of",
    "release",
    "checks",
    "cargo",
    "nightly",
    "build",
)
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
many_words = st.lists(st.sampled_from(WORDS), min_size=12, max_size=30).map(" ".join)
odd_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40
)
long_text = st.builds(
    lambda word, n: (word + " ") * n,
    st.sampled_from(WORDS),
    st.integers(1, MEMORY_CONTENT_MAX_CHARS // 4),
).map(lambda t: t.strip()[:MEMORY_CONTENT_MAX_CHARS])
contents = st.one_of(words, words, words, odd_text, long_text)


@dataclass
class Held:
    row_id: int
    kind: RecordKind
    content: str
    workspace_id: str | None
    updated_at: float
    written: int = 0  # when its content was last set, in the model's order of writes


def embed(text: str) -> np.ndarray:
    """A vector determined by the text alone, so a stored vector tells which text it was for."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return np.frombuffer(digest[: DIMS * 4], dtype=np.uint32).astype(np.float32) / 2**32


_words = sqlite3.connect(":memory:", check_same_thread=False)
_words.execute("CREATE VIRTUAL TABLE w USING fts5(x, tokenize = 'unicode61 remove_diacritics 2')")
_words.execute("CREATE VIRTUAL TABLE w_words USING fts5vocab(w, 'instance')")


def tokenized_alike(text: str) -> bool:
    """Whether orcad.query reads the same words in `text` as the full-text index does."""
    with _words:
        _words.execute("INSERT INTO w (rowid, x) VALUES (1, ?)", (text,))
        indexed = [t for (t,) in _words.execute("SELECT term FROM w_words ORDER BY offset")]
        _words.execute("DELETE FROM w")
    return indexed == tokenize(text)


def visible_from(workspace: str, held: Held) -> bool:
    return held.workspace_id is None or held.workspace_id == workspace


class DeliberateModel(RuleBasedStateMachine):
    records = Bundle("records")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="deliberate-model-"))
        self.path = self.dir / "memory.sqlite3"
        self.connection = open_database(self.path)
        vectors.ensure_schema(self.connection)
        link_unchecked(self.connection, 0)  # the corrections' tables, as recall makes them
        self.model: dict[str, Held] = {}
        self.now = 1_800_000_000.0
        self.gone: list[str] = []  # texts no record holds any more, since the last purge
        self.backfill: list[tuple[int, str]] = []  # read by the backfill, not yet written
        self.writes = 0
        self.matrix: list[vectors.VectorMatrix | None] = [None]  # recall's, kept between calls

    def teardown(self) -> None:
        self.connection.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # the model's clock: a write is stamped after the newest stored time (queries)

    def _stamp(self) -> float:
        latest = max((h.updated_at for h in self.model.values()), default=None)
        return stamp_after(latest, self.now)

    def _row_id(self, public_id: str) -> int:
        row = self.connection.execute(
            "SELECT row_id FROM memories WHERE public_id = ?", (public_id,)
        ).fetchone()
        return int(row[0])

    def _duplicate(self, workspace_id: str | None, content: str, other_than: str = "") -> bool:
        return any(
            h.workspace_id == workspace_id and h.content == content and public_id != other_than
            for public_id, h in self.model.items()
        )

    def _went(self, content: str) -> None:
        self.gone.append(content)

    @rule(seconds=st.sampled_from([0.0, 0.0005, 1.0, -5.0, 3600.0]))
    def clock_moves(self, seconds: float) -> None:
        self.now += seconds

    @rule(
        target=records,
        workspace=st.sampled_from((*WORKSPACES, None)),
        kind=st.sampled_from(KINDS),
        content=contents,
    )
    def save(self, workspace: str | None, kind: RecordKind, content: str) -> str:
        stamp = self._stamp()
        record = StoredRecord(
            id=new_record_id(),
            kind=kind,
            content=content,
            workspace_id=workspace,
            workspace_root="/src/" + (workspace or "global"),
            created_at=self.now,
            updated_at=self.now,
        )
        if self._duplicate(workspace, content):
            with pytest.raises(DuplicateRecord):
                insert_record(self.connection, record)
            return record.id  # never stored: every later call must find nothing by it
        stored = insert_record(self.connection, record)
        link_written(self.connection, stored.id)
        assert stored.updated_at == stamp
        self.writes += 1
        self.model[stored.id] = Held(
            self._row_id(stored.id), kind, content, workspace, stamp, self.writes
        )
        return stored.id

    @rule(
        target=records,
        public_id=records,
        workspace=st.sampled_from((*WORKSPACES, None)),
        change=st.sampled_from(["add", "number", "same"]),
    )
    def save_near_duplicate(self, public_id: str, workspace: str | None, change: str) -> str:
        held = self.model.get(public_id)
        base = held.content if held else "line length of 100"
        content = {
            "add": base + " since the style change",
            "number": base.replace("100", "120") if "100" in base else base + " 120",
            "same": base,
        }[change]
        return self.save(workspace, "fact", content[:MEMORY_CONTENT_MAX_CHARS])

    @rule(
        public_id=records,
        content=st.one_of(st.none(), contents),
        kind=st.one_of(st.none(), st.sampled_from(KINDS)),
    )
    def update(self, public_id: str, content: str | None, kind: RecordKind | None) -> None:
        if content is None and kind is None:
            kind = "fact"
        held = self.model.get(public_id)
        if (
            held is not None
            and content is not None
            and self._duplicate(held.workspace_id, content, other_than=public_id)
        ):
            with pytest.raises(DuplicateRecord):
                update_record(self.connection, public_id, content, kind, self.now)
            return
        stamp = self._stamp()
        updated = update_record(self.connection, public_id, content, kind, self.now)
        if held is None:
            assert updated is None
            return
        if content is not None:
            link_written(self.connection, public_id)
        assert updated is not None
        if content is not None and content != held.content:
            self._went(held.content)
        if content is not None:
            self.writes += 1
            held.written = self.writes
        held.content = held.content if content is None else content
        held.kind = held.kind if kind is None else kind
        held.updated_at = stamp
        assert (updated.content, updated.kind, updated.updated_at) == (
            held.content,
            held.kind,
            held.updated_at,
        )

    @rule(public_id=consumes(records), workspace=st.sampled_from(WORKSPACES))
    def forget(self, public_id: str, workspace: str) -> None:
        held = self.model.get(public_id)
        forgotten = forget_visible_record(self.connection, workspace, public_id)
        if held is None or not visible_from(workspace, held):
            assert forgotten is None
            return
        assert forgotten is not None and forgotten.content == held.content
        del self.model[public_id]
        self._went(held.content)

    @rule(public_id=records, workspace=st.sampled_from(WORKSPACES))
    def forget_from_elsewhere_is_refused(self, public_id: str, workspace: str) -> None:
        held = self.model.get(public_id)
        if held is None or visible_from(workspace, held):
            return
        assert forget_visible_record(self.connection, workspace, public_id) is None

    @rule(
        workspace=st.sampled_from(WORKSPACES),
        query=st.one_of(words, many_words, odd_text),
        limit=st.integers(1, 20),
    )
    def search(self, workspace: str, query: str, limit: int) -> None:
        found = search_records(self.connection, workspace, query, limit)
        expression = planned_match(self.connection, query)
        assert [r.id for r in found] == self._oracle_search(workspace, expression, limit)
        for record in found:
            held = self.model[record.id]
            assert visible_from(workspace, held)
            assert (record.content, record.kind) == (held.content, held.kind)

    @rule(workspace=st.sampled_from(WORKSPACES), limit=st.integers(1, 20))
    def recent(self, workspace: str, limit: int) -> None:
        found = recent_records(self.connection, workspace, limit)
        expected = sorted(
            ((i, h) for i, h in self.model.items() if visible_from(workspace, h)),
            key=lambda item: (item[1].updated_at, item[1].row_id),
            reverse=True,
        )[:limit]
        assert [r.id for r in found] == [i for i, _h in expected]

    @rule(
        workspace=st.sampled_from(WORKSPACES),
        query=st.one_of(words, many_words),
        limit=st.integers(1, 8),
    )
    def recall(self, workspace: str, query: str, limit: int) -> None:
        result = vectors.hybrid_search(
            self.connection,
            workspace,
            derive_query_terms(query, 64),
            embed(query),
            MODEL,
            limit,
            self.matrix,
        )
        ids = [found.record.id for found in result.found]
        assert len(ids) == len(set(ids))
        for found in result.found:
            held = self.model[found.record.id]
            assert visible_from(workspace, held)
            assert (found.record.content, found.record.kind) == (held.content, held.kind)

    @rule(limit=st.integers(1, 5))
    def backfill_reads(self, limit: int) -> None:
        self.backfill += vectors.pending(self.connection, MODEL, limit, DIMS)

    @precondition(lambda self: self.backfill)
    @rule()
    def backfill_writes(self) -> None:
        rows, self.backfill = self.backfill, []
        stored = vectors.store_vectors(
            self.connection, MODEL, rows, np.stack([embed(content) for _row, content in rows])
        )
        live = {(h.row_id, h.content) for h in self.model.values()}
        assert stored == sum(row in live for row in rows)

    @rule()
    def purge(self) -> None:
        assert purge_deleted_text(self.connection)
        live = [h.content.casefold() for h in self.model.values()]
        files = b"".join(
            p.read_bytes() for p in self.dir.iterdir() if p.name.startswith(self.path.name)
        )
        for text in self.gone:
            if len(text.encode()) < 12 or any(text.casefold() in other for other in live):
                continue  # too short to tell from other bytes, or still held by a live record
            assert text.encode() not in files, f"forgotten text remains on disk: {text!r}"
        self.gone = []

    @rule()
    def reopen(self) -> None:
        self.connection.close()
        self.connection = open_database(self.path)
        self.matrix = [None]

    # invariants, after every step

    def _oracle(self) -> sqlite3.Connection:
        oracle = sqlite3.connect(":memory:")
        oracle.execute(
            "CREATE TABLE m (row_id INTEGER PRIMARY KEY, public_id TEXT, workspace_id TEXT, "
            "updated_at REAL, content TEXT)"
        )
        oracle.execute(
            "CREATE VIRTUAL TABLE m_fts USING fts5(content, content = 'm', "
            f"content_rowid = 'row_id', tokenize = '{FTS5_TOKENIZE}')"
        )
        oracle.execute("CREATE VIRTUAL TABLE m_vocab USING fts5vocab(m_fts, 'row')")
        for public_id, h in sorted(self.model.items(), key=lambda item: item[1].row_id):
            oracle.execute(
                "INSERT INTO m VALUES (?, ?, ?, ?, ?)",
                (h.row_id, public_id, h.workspace_id, h.updated_at, h.content),
            )
            oracle.execute(
                "INSERT INTO m_fts (rowid, content) VALUES (?, ?)", (h.row_id, h.content)
            )
        return oracle

    def _oracle_search(self, workspace: str, expression: str, limit: int) -> list[str]:
        if not expression:
            return []
        oracle = self._oracle()
        try:
            rows = oracle.execute(
                "SELECT m.public_id FROM m_fts JOIN m ON m.row_id = m_fts.rowid "
                "WHERE m_fts MATCH ? AND (m.workspace_id = ? OR m.workspace_id IS NULL) "
                "ORDER BY bm25(m_fts), m.updated_at DESC, m.row_id DESC LIMIT ?",
                (expression, workspace, limit),
            ).fetchall()
        finally:
            oracle.close()
        return [str(public_id) for (public_id,) in rows]

    @invariant()
    def every_record_is_found_where_visible(self) -> None:
        for public_id, held in self.model.items():
            for workspace in WORKSPACES:
                found = visible_record(self.connection, workspace, public_id)
                if not visible_from(workspace, held):
                    assert found is None
                    continue
                assert found is not None
                assert (found.content, found.kind, found.workspace_id, found.updated_at) == (
                    held.content,
                    held.kind,
                    held.workspace_id,
                    held.updated_at,
                )

    @invariant()
    def rows_counts_and_index_match_the_model(self) -> None:
        c = self.connection
        rows = {int(r): str(p) for r, p in c.execute("SELECT row_id, public_id FROM memories")}
        assert rows == {h.row_id: i for i, h in self.model.items()}
        assert record_total(c) == len(self.model)
        sizes = {int(r) for (r,) in c.execute("SELECT id FROM memories_fts_docsize")}
        assert sizes == set(rows)
        oracle = self._oracle()
        try:
            want = sorted(oracle.execute("SELECT term, doc, cnt FROM m_vocab").fetchall())
        finally:
            oracle.close()
        have = sorted(c.execute("SELECT term, doc, cnt FROM memories_vocab").fetchall())
        assert have == want
        assert c.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")

    @invariant()
    def vectors_and_corrections_follow_live_rows(self) -> None:
        c = self.connection
        by_row = {h.row_id: h for h in self.model.values()}
        for row_id, model, blob in c.execute("SELECT row_id, model, vector FROM memory_vectors"):
            assert model == MODEL
            held = by_row.get(int(row_id))
            assert held is not None, f"a vector outlived row {row_id}"
            assert blob == embed(held.content).astype(vectors.VECTOR_DTYPE).tobytes(), (
                f"row {row_id}'s vector was made from another text than its own"
            )
        for older, newer in c.execute("SELECT older, newer FROM memory_corrections"):
            assert int(older) in by_row and int(newer) in by_row
            old, new = by_row[int(older)], by_row[int(newer)]
            assert corrects(new.content, old.content)
            assert None in (old.workspace_id, new.workspace_id) or (
                old.workspace_id == new.workspace_id
            )
        checked = {int(r) for (r,) in c.execute("SELECT row_id FROM memory_corrections_checked")}
        assert checked == set(by_row)
        if len(by_row) > LOOKED_AT or not all(tokenized_alike(h.content) for h in by_row.values()):
            # each record is paired among its best matches only; and a record is looked for by
            # the terms orcad.query reads in it, which miss a word FTS5 reads otherwise (one
            # touching a character Unicode assigned after SQLite's tables: "00\u2b4d")
            return
        pairs = {(int(a), int(b)) for a, b in c.execute("SELECT * FROM memory_corrections")}
        expected = {
            (old.row_id, new.row_id)
            for old in by_row.values()
            for new in by_row.values()
            if new.written > old.written
            and (
                None in (old.workspace_id, new.workspace_id) or old.workspace_id == new.workspace_id
            )
            and corrects(new.content, old.content)
        }
        assert pairs == expected

    @invariant()
    def database_is_intact(self) -> None:
        assert self.connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


DeliberateModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
test_deliberate_store_against_model = DeliberateModel.TestCase


# --- the same through memory.manage and memory.search (yolo sessions, in process) -------------

Op = tuple[str, ...]
service_contents = st.one_of(
    words,
    words.map(lambda t: f"  {t}\n"),  # stored trimmed: the same record as without the spaces
    st.sampled_from(["", "   ", "\u200b", "\x00", "x" * (MEMORY_CONTENT_MAX_CHARS + 1)]),
    st.just(" " + "y" * MEMORY_CONTENT_MAX_CHARS + " "),  # at the limit once trimmed
    odd_text,
)
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("save"),
            st.integers(0, 2),
            service_contents,
            st.sampled_from(KINDS),
            st.booleans(),
        ),
        st.tuples(
            st.just("update"),
            st.integers(0, 2),
            st.integers(0, 30),
            st.one_of(st.none(), service_contents),
            st.one_of(st.none(), st.sampled_from(KINDS)),
        ),
        st.tuples(st.just("forget"), st.integers(0, 2), st.integers(0, 30)),
        st.tuples(
            st.just("search"),
            st.integers(0, 2),
            st.one_of(st.none(), st.just(" "), words, odd_text),
            st.integers(0, 21),
        ),
    ),
    max_size=25,
)


def every_file(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def checked_content(content: str) -> str | None:
    """The content as memory.manage stores it, None where it must be refused (-32602)."""
    kept = content.strip()
    if not kept or not has_visible_character(kept) or len(kept) > MEMORY_CONTENT_MAX_CHARS:
        return None
    return kept


@given(ops=operations)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_memory_service_against_model(
    ops: list[Op], tmp_path_factory: pytest.TempPathFactory
) -> None:
    trio.run(_service_scenario, ops, tmp_path_factory.mktemp("service"))


async def _service_scenario(ops: list[Op], root: Path) -> None:
    orca = InProcessDaemon(root, SettableClock())
    try:
        sessions = [await orca.open(root / f"ws{n}", mode="yolo") for n in range(3)]
        workspaces = [(root / f"ws{n}").resolve() for n in range(3)]
        # id -> (content, kind, workspace number or None for global)
        held: dict[str, tuple[str, str, int | None]] = {}
        ids: list[str] = []  # every id handed out, forgotten ones too
        gone: list[str] = []  # texts forgotten or replaced by an update

        def visible(n: int, record_id: str) -> bool:
            return record_id in held and held[record_id][2] in (None, n)

        for op in ops:
            orca.clock.advance(1.0)
            if op[0] == "save":
                _, n, content, kind, is_global = op
                params = {"action": "save", "content": content, "kind": kind}
                kept = checked_content(str(content))
                scope = None if is_global else int(n)
                if kept is None:
                    with pytest.raises(RemoteError) as caught:
                        await orca.call(
                            "memory.manage", {**sessions[n], **params, "is_global": is_global}
                        )
                    assert caught.value.code == -32602
                    continue
                result = await orca.call(
                    "memory.manage", {**sessions[n], **params, "is_global": is_global}
                )
                same = [i for i, h in held.items() if h[0] == kept and h[2] == scope]
                if same:
                    assert result["outcome"] == "denied" and result["record"]["id"] == same[0]
                    continue
                assert result["outcome"] == "applied", result
                record = result["record"]
                assert record["content"] == kept and record["kind"] == kind
                assert record["scope"] == ("global" if is_global else "workspace")
                assert record["workspace_root"] == str(workspaces[n])
                held[record["id"]] = (kept, str(kind), scope)
                ids.append(record["id"])
            elif op[0] == "update":
                _, n, pick, content, kind = op
                record_id = ids[pick % len(ids)] if ids else "mem_" + "0" * 32
                params = {"action": "update", "id": record_id}
                if content is not None:
                    params["content"] = content
                if kind is not None:
                    params["kind"] = kind
                kept = None if content is None else checked_content(str(content))
                if (content is None and kind is None) or (content is not None and kept is None):
                    with pytest.raises(RemoteError) as caught:
                        await orca.call("memory.manage", {**sessions[n], **params})
                    assert caught.value.code == -32602
                    continue
                if not visible(n, record_id):
                    with pytest.raises(RemoteError) as caught:
                        await orca.call("memory.manage", {**sessions[n], **params})
                    assert caught.value.code == -32014
                    continue
                result = await orca.call("memory.manage", {**sessions[n], **params})
                old_content, old_kind, scope = held[record_id]
                new_content = old_content if kept is None else kept
                new_kind = old_kind if kind is None else str(kind)
                others = [i for i, h in held.items() if h[0] == new_content and h[2] == scope]
                if any(i != record_id for i in others):
                    assert result["outcome"] == "denied"
                    assert result["record"]["id"] in others and result["record"]["id"] != record_id
                    continue
                if (new_content, new_kind) == (old_content, old_kind):
                    assert result["outcome"] == "denied", result
                    continue
                assert result["outcome"] == "applied", result
                assert (result["record"]["content"], result["record"]["kind"]) == (
                    new_content,
                    new_kind,
                )
                held[record_id] = (new_content, new_kind, scope)
                gone.append(old_content)
            elif op[0] == "forget":
                _, n, pick = op
                record_id = ids[pick % len(ids)] if ids else "mem_" + "0" * 32
                params = {"action": "forget", "id": record_id}
                if not visible(n, record_id):
                    with pytest.raises(RemoteError) as caught:
                        await orca.call("memory.manage", {**sessions[n], **params})
                    assert caught.value.code == -32014
                    continue
                result = await orca.call("memory.manage", {**sessions[n], **params})
                assert result["outcome"] == "applied"
                assert result["record"]["content"] == held.pop(record_id)[0]
                gone.append(result["record"]["content"])
            else:
                _, n, query, limit = op
                params = {"limit": limit} if query is None else {"query": query, "limit": limit}
                if not 1 <= int(limit) <= 20:
                    with pytest.raises(RemoteError) as caught:
                        await orca.call("memory.search", {**sessions[n], **params})
                    assert caught.value.code == -32602
                    continue
                found = (await orca.call("memory.search", {**sessions[n], **params}))["records"]
                assert len(found) <= int(limit)
                for record in found:
                    assert visible(n, record["id"])
                    assert record["content"] == held[record["id"]][0]
                if query is None or not str(query).strip():
                    expected = [i for i in reversed(ids) if visible(n, i)]
                    # most recently updated first: updates reorder, so compare as sets
                    if len(expected) <= int(limit):
                        assert {r["id"] for r in found} == set(expected)
            # after every step: each record is found by its id where it is visible
            for n, session in enumerate(sessions):
                listed = (await orca.call("memory.search", {**session, "limit": 20}))["records"]
                mine = {i for i in held if visible(n, i)}
                if len(mine) <= 20:
                    assert {r["id"] for r in listed} == mine
        await orca.features.deliberate.purge_now()
        live = [h[0].casefold() for h in held.values()]
        files = await trio.to_thread.run_sync(every_file, root)
        for text in gone:
            if len(text.encode()) < 12 or any(text.casefold() in other for other in live):
                continue
            assert text.encode() not in files, f"forgotten text remains on disk: {text!r}"
    finally:
        await orca.aclose()
