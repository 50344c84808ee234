"""memory.search / memory.manage / memory.approve through the real dispatcher, in process.

Real SQLite files under tmp_path; the clock is injected so approval expiry needs no sleeping.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio

from orcad import sqlite_worker
from orcad.capture import projections
from orcad.capture.ledger import ledger_path
from orcad.capture.projections import read_index_vectors
from orcad.deliberate.queries import insert_record
from orcad.deliberate.schema import open_database
from orcad.deliberate.vectors import text_digest
from orcad.errors import StorageError
from orcad.limits import (
    APPROVAL_TTL_S,
    AUTO_REVIEW_MAX_CHARS,
    MEMORY_CONTENT_MAX_CHARS,
    QUERY_MAX_TERMS,
    RECALL_LINK_BATCH,
    SEARCH_LIMIT_DEFAULT,
)
from orcad.query import distinct_terms
from orcad.recall import deliberate as recall_deliberate
from orcad.recall import project_cache
from orcad.recall.automatic import ProjectMemorySearch
from orcad.recall.deliberate import Backfill, DeliberateRecall, RefusedTexts
from orcad.recall.embedders import EmbeddingRefused, EmbeddingTimedOut, RankingSettings
from orcad.recall.embedding import Embeddings
from protocol.errors import RemoteError
from protocol.types import DeliberateEntry
from tests.deliberate_helpers import InProcessDaemon, SettableClock, numbered_record
from tests.test_recall_daemon import add_facts

pytestmark = pytest.mark.inprocess

GITHUB_TOKEN = "ghp_" + "Zq8Lm2Np4Rt6Vx9Bc1Df3Gh5Jk7Mn0Pq2St4"


@pytest.fixture
def clock() -> SettableClock:
    return SettableClock()


@pytest.fixture
async def orca(tmp_path: Path, clock: SettableClock) -> AsyncIterator[InProcessDaemon]:
    daemon = InProcessDaemon(tmp_path, clock)
    yield daemon
    await daemon.aclose()


async def save(
    orca: InProcessDaemon,
    session: dict[str, Any],
    content: str,
    *,
    kind: str = "fact",
    is_global: bool = False,
) -> dict[str, Any]:
    return await orca.call(
        "memory.manage",
        {**session, "action": "save", "content": content, "kind": kind, "is_global": is_global},
    )


async def search(
    orca: InProcessDaemon, session: dict[str, Any], **params: Any
) -> list[dict[str, Any]]:
    result = await orca.call("memory.search", {**session, **params})
    records: list[dict[str, Any]] = result["records"]
    return records


async def error_of(orca: InProcessDaemon, method: str, params: dict[str, Any]) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        await orca.call(method, params)
    return caught.value


# --- saving, scopes, summaries ----------------------------------------------------------------


async def test_save_update_forget_applied_in_yolo_with_one_line_summaries(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    saved = await save(orca, session, "release checks use cargo test --workspace", kind="workflow")
    assert saved["outcome"] == "applied"
    record = saved["record"]
    assert record["id"].startswith("mem_") and len(record["id"]) == 36
    int(record["id"][4:], 16)
    assert record["id"][4:] == record["id"][4:].lower()
    assert record["scope"] == "workspace"
    assert record["workspace_root"] == str((tmp_path / "ws").resolve())
    assert record["kind"] == "workflow"
    assert "Saved workspace memory" in saved["summary"] and record["id"] in saved["summary"]

    updated = await orca.call(
        "memory.manage",
        {**session, "action": "update", "id": record["id"], "content": "release checks: make ci"},
    )
    assert updated["outcome"] == "applied"
    assert updated["record"]["content"] == "release checks: make ci"
    assert updated["record"]["created_at"] == record["created_at"]
    assert "Updated workspace memory" in updated["summary"]

    forgotten = await orca.call(
        "memory.manage", {**session, "action": "forget", "id": record["id"]}
    )
    assert forgotten["outcome"] == "applied"
    assert "Forgot workspace memory" in forgotten["summary"]
    assert await search(orca, session) == []
    for result in (saved, updated, forgotten):
        assert "\n" not in result["summary"]


async def test_global_records_keep_their_originating_root(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "a", mode="yolo")
    saved = await save(
        orca, session, "I prefer concise status updates", kind="preference", is_global=True
    )
    assert saved["record"]["scope"] == "global"
    assert saved["record"]["workspace_root"] == str((tmp_path / "a").resolve())
    assert "global memory" in saved["summary"]


async def test_scope_isolation_both_ways(orca: InProcessDaemon, tmp_path: Path) -> None:
    a = await orca.open(tmp_path / "a", mode="yolo")
    b = await orca.open(tmp_path / "b", mode="yolo")
    in_a = (await save(orca, a, "alpha deploys with helm"))["record"]
    in_b = (await save(orca, b, "beta deploys with helm"))["record"]
    shared = (await save(orca, a, "everyone deploys with helm", is_global=True))["record"]

    assert {r["id"] for r in await search(orca, a, query="deploys helm")} == {
        in_a["id"],
        shared["id"],
    }
    assert {r["id"] for r in await search(orca, b, query="deploys helm")} == {
        in_b["id"],
        shared["id"],
    }
    assert {r["id"] for r in await search(orca, a)} == {in_a["id"], shared["id"]}
    assert {r["id"] for r in await search(orca, b)} == {in_b["id"], shared["id"]}

    for session, foreign in ((a, in_b), (b, in_a)):
        for action in ("update", "forget"):
            params = {**session, "action": action, "id": foreign["id"]}
            if action == "update":
                params["content"] = "taken over"
            error = await error_of(orca, "memory.manage", params)
            assert error.error.code == -32014 and error.kind == "not_found"
    # A global record can be changed from any workspace.
    forgotten = await orca.call("memory.manage", {**b, "action": "forget", "id": shared["id"]})
    assert forgotten["outcome"] == "applied"
    assert {r["id"] for r in await search(orca, a)} == {in_a["id"]}


async def test_every_way_into_a_workspace_sees_its_records_and_no_other_way_does(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    # the workspace is the canonical root (Git top level, else the directory, links resolved)
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(repo)
    saved = (await save(orca, await orca.open(repo / "src" / "deep", mode="yolo"), "uv runs it"))[
        "record"
    ]
    assert saved["workspace_root"] == str(repo.resolve())
    for way_in in (repo, repo / "src", tmp_path / "alias", tmp_path / "alias" / "src" / "deep"):
        session = await orca.open(way_in, mode="yolo")
        assert [r["id"] for r in await search(orca, session, query="uv")] == [saved["id"]]
    for elsewhere in (tmp_path, tmp_path / "sibling"):
        assert await search(orca, await orca.open(elsewhere, mode="yolo"), query="uv") == []


@pytest.mark.parametrize("field", ["workspace_id", "workspace", "workspace_root", "project_id"])
async def test_a_client_cannot_name_the_workspace_its_memory_is_read_or_written_in(
    orca: InProcessDaemon, tmp_path: Path, field: str
) -> None:
    mine = await orca.open(tmp_path / "mine", mode="yolo")
    theirs = await orca.open(tmp_path / "theirs", mode="yolo")
    hidden = (await save(orca, theirs, "their staging host is lynx"))["record"]
    elsewhere = str((tmp_path / "theirs").resolve())
    for method, params in (
        ("memory.search", {"query": "staging lynx"}),
        ("memory.manage", {"action": "forget", "id": hidden["id"]}),
        ("memory.manage", {"action": "save", "content": "x y", "kind": "fact", "is_global": False}),
    ):
        error = await error_of(orca, method, {**mine, **params, field: elsewhere})
        assert error.error.code == -32602 and error.error.data["field"] == field
    error = await error_of(orca, "session.open", {"cwd": str(tmp_path / "mine"), field: elsewhere})
    assert error.error.code == -32602 and error.error.data["field"] == field
    assert [r["id"] for r in await search(orca, theirs)] == [hidden["id"]]
    assert await search(orca, mine) == []


async def test_a_global_record_changed_from_another_workspace_keeps_its_scope_and_origin(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    a = await orca.open(tmp_path / "a", mode="yolo")
    b = await orca.open(tmp_path / "b", mode="yolo")
    shared = (await save(orca, a, "I prefer concise status updates", is_global=True))["record"]
    updated = await orca.call(
        "memory.manage",
        {**b, "action": "update", "id": shared["id"], "content": "I prefer terse status updates"},
    )
    assert updated["outcome"] == "applied" and "global memory" in updated["summary"]
    for session in (a, b):
        [record] = await search(orca, session, query="status updates")
        assert record["id"] == shared["id"] and record["scope"] == "global"
        assert record["content"] == "I prefer terse status updates"
        assert record["workspace_root"] == str((tmp_path / "a").resolve())


async def test_only_the_lowercase_id_names_a_record(orca: InProcessDaemon, tmp_path: Path) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, session, "release checks use make ci"))["record"]
    hex_part = record["id"][4:]
    assert hex_part != hex_part.upper()  # 128 random bits: some letter among them
    for spelling in ("mem_" + hex_part.upper(), "MEM_" + hex_part, record["id"].upper()):
        for action, extra in (("forget", {}), ("update", {"content": "release checks: make"})):
            params = {**session, "action": action, "id": spelling, **extra}
            error = await error_of(orca, "memory.manage", params)
            assert error.error.code == -32014, spelling
    [kept] = await search(orca, session)
    assert kept["id"] == record["id"] and kept["content"] == "release checks use make ci"


@pytest.mark.parametrize("bad_id", ["", "mem_", "mem_" + "0" * 32, "mem_" + "G" * 32, "1", "apr_x"])
async def test_update_and_forget_of_unknown_or_malformed_ids_are_not_found(
    orca: InProcessDaemon, tmp_path: Path, bad_id: str
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    error = await error_of(orca, "memory.manage", {**session, "action": "forget", "id": bad_id})
    assert error.error.code == -32014


# --- params -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"action": "save", "kind": "fact", "is_global": False}, "content"),
        ({"action": "save", "content": "x y", "is_global": False}, "kind"),
        ({"action": "save", "content": "x y", "kind": "fact"}, "is_global"),
        ({"action": "save", "content": "   ", "kind": "fact", "is_global": False}, "content"),
        ({"action": "save", "content": "x", "kind": "opinion", "is_global": False}, "kind"),
        (
            {"action": "save", "content": "x", "kind": "fact", "is_global": False, "id": "mem_1"},
            "id",
        ),
        ({"action": "update", "content": "x"}, "id"),
        ({"action": "update", "id": "mem_" + "0" * 32}, "content"),
        (
            {"action": "update", "id": "mem_" + "0" * 32, "content": "x", "is_global": True},
            "is_global",
        ),
        ({"action": "forget"}, "id"),
        ({"action": "forget", "id": "mem_" + "0" * 32, "content": "x"}, "content"),
        ({"action": "erase", "id": "mem_" + "0" * 32}, "action"),
        ({"action": "forget", "id": "mem_" + "0" * 32, "scope": "global"}, "scope"),
    ],
)
async def test_bad_manage_params_name_the_field(
    orca: InProcessDaemon, tmp_path: Path, params: dict[str, Any], field: str
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    error = await error_of(orca, "memory.manage", {**session, **params})
    assert error.error.code == -32602
    assert error.error.data["field"] == field


async def test_content_length_boundary(orca: InProcessDaemon, tmp_path: Path) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    assert (await save(orca, session, "a" * MEMORY_CONTENT_MAX_CHARS))["outcome"] == "applied"
    error = await error_of(
        orca,
        "memory.manage",
        {
            **session,
            "action": "save",
            "content": "b" * (MEMORY_CONTENT_MAX_CHARS + 1),
            "kind": "fact",
            "is_global": False,
        },
    )
    assert error.error.data["field"] == "content"
    # an update is held to the same bound, and a refused one leaves the record as it was
    [record] = await search(orca, session)
    for size, outcome in ((MEMORY_CONTENT_MAX_CHARS + 1, None), (MEMORY_CONTENT_MAX_CHARS, "c")):
        params = {**session, "action": "update", "id": record["id"], "content": "c" * size}
        if outcome is None:
            error = await error_of(orca, "memory.manage", params)
            assert error.error.code == -32602 and error.error.data["field"] == "content"
            assert (await search(orca, session))[0]["content"] == "a" * MEMORY_CONTENT_MAX_CHARS
        else:
            assert (await orca.call("memory.manage", params))["outcome"] == "applied"
            assert (await search(orca, session))[0]["content"] == "c" * MEMORY_CONTENT_MAX_CHARS


@pytest.mark.parametrize(("limit", "ok"), [(0, False), (1, True), (20, True), (21, False)])
async def test_search_limit_boundaries(
    orca: InProcessDaemon, tmp_path: Path, limit: int, ok: bool
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    for i in range(25):
        await save(orca, session, f"note number {i} about widgets")
    for query in (None, "widgets"):
        params = {"limit": limit} if query is None else {"limit": limit, "query": query}
        if ok:
            assert len(await search(orca, session, **params)) == limit
        else:
            error = await error_of(orca, "memory.search", {**session, **params})
            assert error.error.code == -32602 and error.error.data["field"] == "limit"
    assert len(await search(orca, session)) == SEARCH_LIMIT_DEFAULT
    assert len(await search(orca, session, query="widgets")) == SEARCH_LIMIT_DEFAULT


# --- search -----------------------------------------------------------------------------------


async def test_no_query_lists_most_recently_updated_first(
    orca: InProcessDaemon, tmp_path: Path, clock: SettableClock
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    ids = []
    for i in range(3):
        clock.advance(1)
        ids.append((await save(orca, session, f"record {i} text"))["record"]["id"])
    assert [r["id"] for r in await search(orca, session)] == ids[::-1]
    assert [r["id"] for r in await search(orca, session, query="   ")] == ids[::-1]
    clock.advance(1)
    await orca.call(
        "memory.manage", {**session, "action": "update", "id": ids[0], "content": "record zero"}
    )
    assert [r["id"] for r in await search(orca, session)] == [ids[0], ids[2], ids[1]]


async def test_bm25_ranks_and_recent_updates_break_ties(
    orca: InProcessDaemon, tmp_path: Path, clock: SettableClock
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    weak = (await save(orca, session, "kubernetes is used by one service among many other things"))[
        "record"
    ]
    clock.advance(1)
    tie_old = (await save(orca, session, "kubernetes cluster notes"))["record"]
    clock.advance(1)
    tie_new = (await save(orca, session, "kubernetes cluster facts"))["record"]
    ranked = [r["id"] for r in await search(orca, session, query="kubernetes cluster")]
    assert ranked == [tie_new["id"], tie_old["id"], weak["id"]]
    clock.advance(1)
    await orca.call(
        "memory.manage", {**session, "action": "update", "id": tie_old["id"], "kind": "decision"}
    )
    ranked = [r["id"] for r in await search(orca, session, query="kubernetes cluster")]
    assert ranked == [tie_old["id"], tie_new["id"], weak["id"]]


async def test_stemming_finds_other_word_forms(orca: InProcessDaemon, tmp_path: Path) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, session, "the daemon deploys nightly"))["record"]
    assert [r["id"] for r in await search(orca, session, query="deploying")] == [record["id"]]


async def test_twelve_terms_of_the_query_are_used_the_most_selective_ones(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    # the issue changed the rule from "the first twelve" to "the most selective twelve"
    session = await orca.open(tmp_path / "ws", mode="yolo")
    target = (await save(orca, session, "zebracorn"))["record"]
    dropped = (await save(orca, session, "filler9"))["record"]
    fillers = [f"filler{i}" for i in range(12)]
    twelve = " ".join([*fillers[:11], "zebracorn"])  # twelve terms fit: all are used
    assert {r["id"] for r in await search(orca, session, query=twelve)} == {
        target["id"],
        dropped["id"],
    }
    # 13 terms: twelve are used, chosen by how many records each matches: "zebracorn" and
    # "filler9" match a record and are kept; one of the fillers that match nothing is not
    thirteen = " ".join([*fillers, "zebracorn"])
    found = {r["id"] for r in await search(orca, session, query=thirteen, limit=20)}
    assert found == {target["id"], dropped["id"]}
    # every term matching: the one matching the most records is the one left out
    others = [
        (await save(orca, session, f"filler{i}"))["record"]["id"] for i in range(12) if i != 9
    ]
    common = (await save(orca, session, "filler0 again"))["record"]["id"]
    found = {r["id"] for r in await search(orca, session, query=thirteen, limit=20)}
    assert found == {target["id"], dropped["id"], *others[1:]}
    assert others[0] not in found and common not in found


async def test_a_short_term_that_matches_is_kept_over_longer_ones_that_match_nothing(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, session, "CI runs on GitHub Actions"))["record"]
    # more than twelve terms besides the stop words; "ci", the shortest, is the only one any
    # record holds
    query = (
        "which ci tool builds the frontend application deployments, kubernetes manifests, "
        "terraform modules, helm charts, staging environments?"
    )
    assert len(distinct_terms(query)) > QUERY_MAX_TERMS
    assert [r["id"] for r in await search(orca, session, query=query)] == [record["id"]]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "AND",
        "NOT json",
        "NEAR(a b)",
        "json-rpc",
        "config.toml",
        "*",
        "^x",
        "()",
        "🎉",
        '"a" OR',
        "col:x",
        "\x00",
        "what is the",
    ],
)
async def test_hostile_queries_are_answered(
    orca: InProcessDaemon, tmp_path: Path, query: str
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    await save(orca, session, "json-rpc over config.toml AND NOT near what is the")
    assert isinstance(await search(orca, session, query=query), list)


# --- modes and policy -------------------------------------------------------------------------


def expected_outcome(mode: str, interactive: bool, auto_approve: bool) -> str:
    if mode == "plan":
        return "denied"
    if mode in ("yolo", "auto"):
        return "applied"
    if auto_approve:
        return "applied"
    return "pending_approval" if interactive else "denied"


@pytest.mark.parametrize(
    ("mode", "interactive", "auto_approve"),
    list(itertools.product(("normal", "plan", "auto", "yolo"), (True, False), (True, False))),
)
async def test_each_mode_interactive_and_auto_approve(
    orca: InProcessDaemon, tmp_path: Path, mode: str, interactive: bool, auto_approve: bool
) -> None:
    session = await orca.open(
        tmp_path / "ws", mode=mode, interactive=interactive, auto_approve=auto_approve
    )
    result = await save(orca, session, "The staging cluster runs in eu-west-1")
    assert result["outcome"] == expected_outcome(mode, interactive, auto_approve)
    assert "\n" not in result["summary"] and result["summary"]
    stored = await search(orca, session)
    assert len(stored) == (1 if result["outcome"] == "applied" else 0)
    if result["outcome"] == "pending_approval":
        assert result["approval_id"].startswith("apr_") and len(result["approval_id"]) == 36
        assert "workspace memory" in result["summary"]
    if result["outcome"] == "denied":
        assert result["reason"]


async def test_plan_mode_can_search_but_not_change(orca: InProcessDaemon, tmp_path: Path) -> None:
    writer = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, writer, "plan readers see this"))["record"]
    planner = await orca.open(tmp_path / "ws", mode="plan")
    assert [r["id"] for r in await search(orca, planner, query="readers")] == [record["id"]]
    result = await orca.call("memory.manage", {**planner, "action": "forget", "id": record["id"]})
    assert result["outcome"] == "denied" and "plan mode" in result["reason"]
    assert len(await search(orca, planner)) == 1


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("Currently working on the parser refactor", "progress"),
        ("x" * (AUTO_REVIEW_MAX_CHARS + 1), "limit"),
    ],
)
async def test_auto_mode_review_refuses_and_says_why(
    orca: InProcessDaemon, tmp_path: Path, content: str, why: str
) -> None:
    session = await orca.open(tmp_path / "ws", mode="auto")
    result = await save(orca, session, content)
    assert result["outcome"] == "denied" and why in result["reason"]
    assert await search(orca, session) == []


async def test_auto_mode_review_applies_to_updates(orca: InProcessDaemon, tmp_path: Path) -> None:
    session = await orca.open(tmp_path / "ws", mode="auto")
    record = (await save(orca, session, "tests run with pytest"))["record"]
    result = await orca.call(
        "memory.manage",
        {
            **session,
            "action": "update",
            "id": record["id"],
            "content": "WIP: switching test runner",
        },
    )
    assert result["outcome"] == "denied" and "progress" in result["reason"]
    assert (await search(orca, session))[0]["content"] == "tests run with pytest"


@pytest.mark.parametrize(
    "content", ["x" * (AUTO_REVIEW_MAX_CHARS + 500), "Currently working on the parser refactor"]
)
async def test_auto_mode_review_of_a_kind_only_update_judges_only_the_kind(
    orca: InProcessDaemon, tmp_path: Path, content: str
) -> None:
    """Changing only a record's kind was refused in auto mode for the text it already held
    (accepted when it was saved), which the update does not write."""
    writer = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, writer, content))["record"]
    session = await orca.open(tmp_path / "ws", mode="auto")
    result = await orca.call(
        "memory.manage",
        {**session, "action": "update", "id": record["id"], "kind": "decision"},
    )
    assert result["outcome"] == "applied", result
    [stored] = await search(orca, session)
    assert (stored["kind"], stored["content"]) == ("decision", content)


@pytest.mark.parametrize("mode", ["normal", "plan", "auto", "yolo"])
async def test_secrets_are_denied_in_every_mode(
    orca: InProcessDaemon, tmp_path: Path, mode: str
) -> None:
    session = await orca.open(tmp_path / "ws", mode=mode, auto_approve=True)
    result = await save(orca, session, f"the deploy token is {GITHUB_TOKEN}")
    assert result["outcome"] == "denied"
    assert "secret" in result["reason"]
    assert GITHUB_TOKEN not in result["summary"] and GITHUB_TOKEN not in result["reason"]
    assert await search(orca, session) == []


async def test_secret_update_is_denied(orca: InProcessDaemon, tmp_path: Path) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, session, "the deploy token lives in the vault"))["record"]
    result = await orca.call(
        "memory.manage",
        {**session, "action": "update", "id": record["id"], "content": GITHUB_TOKEN},
    )
    assert result["outcome"] == "denied" and "secret" in result["reason"]


@pytest.mark.parametrize("mode", ["normal", "auto", "yolo"])
async def test_exact_duplicates_in_the_same_scope_are_not_stored_twice(
    orca: InProcessDaemon, tmp_path: Path, mode: str
) -> None:
    session = await orca.open(tmp_path / "ws", mode=mode, auto_approve=True)
    first = await save(orca, session, "I prefer tabs", kind="preference")
    again = await save(orca, session, "  I prefer tabs ", kind="fact")
    assert first["outcome"] == "applied"
    assert again["outcome"] == "denied" and first["record"]["id"] in again["reason"]
    assert again["record"]["id"] == first["record"]["id"]
    # The same text in the other scope is a different record.
    assert (await save(orca, session, "I prefer tabs", is_global=True))["outcome"] == "applied"
    assert len(await search(orca, session)) == 2


async def test_update_into_a_duplicate_or_to_the_same_text_changes_nothing(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    one = (await save(orca, session, "one fact"))["record"]
    two = (await save(orca, session, "two fact"))["record"]
    into = await orca.call(
        "memory.manage", {**session, "action": "update", "id": two["id"], "content": "one fact"}
    )
    assert into["outcome"] == "denied" and one["id"] in into["reason"]
    same = await orca.call(
        "memory.manage", {**session, "action": "update", "id": one["id"], "content": "one fact"}
    )
    assert same["outcome"] == "denied"
    assert {r["content"] for r in await search(orca, session)} == {"one fact", "two fact"}


# --- approvals and grants ---------------------------------------------------------------------


async def approve(
    orca: InProcessDaemon, session: dict[str, Any], approval_id: str, decision: str
) -> dict[str, Any]:
    return await orca.call(
        "memory.approve", {**session, "approval_id": approval_id, "decision": decision}
    )


async def test_allow_once_applies_and_the_approval_is_single_use(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "ws")
    pending = await save(orca, session, "use ruff for lint")
    assert pending["outcome"] == "pending_approval"
    applied = await approve(orca, session, pending["approval_id"], "allow_once")
    assert applied["outcome"] == "applied" and applied["record"]["content"] == "use ruff for lint"
    assert "Saved workspace memory" in applied["summary"]
    error = await error_of(
        orca,
        "memory.approve",
        {**session, "approval_id": pending["approval_id"], "decision": "allow_once"},
    )
    assert error.error.code == -32014
    # allow_once grants nothing further.
    assert (await save(orca, session, "use mypy strict"))["outcome"] == "pending_approval"


async def test_a_change_proposed_while_its_session_closes_is_not_left_pending(
    orca: InProcessDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the close dropped the session's pending changes while the call read memory, and the call
    # then added one no one could approve, counted against the bounds until its TTL
    service = orca.features.deliberate
    session = await orca.open(tmp_path / "ws")
    decide = service.approvals.decide

    async def closing_meanwhile(*args: Any, **kwargs: Any) -> Any:
        await orca.call("session.close", session)
        return await decide(*args, **kwargs)

    monkeypatch.setattr(service.approvals, "decide", closing_meanwhile)
    error = await error_of(
        orca,
        "memory.manage",
        {**session, "action": "save", "content": "use ruff", "kind": "fact", "is_global": False},
    )
    assert error.error.code == -32014 and "was closed while this change was proposed" in str(
        error.error.message
    )
    assert error.error.data is not None and error.error.data["session_id"] == session["session_id"]
    assert len(service.approvals.pending) == 0
    monkeypatch.undo()
    reopened = await orca.open(tmp_path / "ws", session_id=session["session_id"])
    assert await search(orca, reopened) == []


async def test_an_approval_refused_by_storage_after_its_session_closed_is_not_kept(
    orca: InProcessDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the write failed (a full disk) while the session closed: the change was kept again for a
    # retry no one could make (the session is closed), counted against the bounds until its TTL
    service = orca.features.deliberate
    session = await orca.open(tmp_path / "ws")
    pending = await save(orca, session, "use ruff for lint")

    async def closed_then_full(*args: Any) -> None:
        await orca.call("session.close", session)
        raise StorageError("database or disk is full", kind="disk_full")

    monkeypatch.setattr(service.store, "insert", closed_then_full)
    error = await error_of(
        orca,
        "memory.approve",
        {**session, "approval_id": pending["approval_id"], "decision": "allow_once"},
    )
    assert error.error.code == -32017
    assert len(service.approvals.pending) == 0
    monkeypatch.undo()
    reopened = await orca.open(tmp_path / "ws", session_id=session["session_id"])
    assert await search(orca, reopened) == []


async def test_an_approved_change_whose_grant_cannot_be_kept_is_answered_as_made(
    orca: InProcessDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the record was saved, then the grant's write failed: the answer was that storage error,
    # and a client retrying the approval was told it was not found
    service = orca.features.deliberate
    session = await orca.open(tmp_path / "ws")
    pending = await save(orca, session, "use ruff for lint")

    async def full_disk(*args: Any) -> None:
        raise StorageError("database or disk is full", kind="disk_full")

    monkeypatch.setattr(service.approvals._store, "add_workspace_grant", full_disk)
    answered = await approve(orca, session, pending["approval_id"], "allow_workspace")
    assert answered["outcome"] == "applied"
    assert answered["summary"].endswith(
        "The grant could not be kept (database or disk is full): later changes will "
        "be asked about again."
    )
    assert [r["content"] for r in await search(orca, session)] == ["use ruff for lint"]
    assert (await orca.call("grants.list", {}))["grants"] == []
    assert (await save(orca, session, "use mypy strict"))["outcome"] == "pending_approval"


@pytest.mark.parametrize("decision", ["allow_session", "allow_workspace"])
async def test_an_approval_that_finds_nothing_to_apply_grants_nothing(
    orca: InProcessDaemon, tmp_path: Path, decision: str
) -> None:
    # the user was told "Nothing changed: identical ... already exists", and a lasting grant
    # was recorded all the same
    session = await orca.open(tmp_path / "ws")
    pending = await save(orca, session, "use ruff for lint")
    other = await orca.open(tmp_path / "ws", mode="yolo")
    assert (await save(orca, other, "use ruff for lint"))["outcome"] == "applied"
    answered = await approve(orca, session, pending["approval_id"], decision)
    assert answered["outcome"] == "denied" and "already exists" in answered["summary"]
    assert (await orca.call("grants.list", {}))["grants"] == []
    assert (await save(orca, session, "use mypy strict"))["outcome"] == "pending_approval"


@pytest.mark.parametrize("action", ["save", "update"])
@pytest.mark.parametrize("decision", ["allow_session", "allow_workspace"])
async def test_an_approval_beaten_by_an_identical_write_grants_nothing(
    orca: InProcessDaemon,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    action: str,
    decision: str,
) -> None:
    # another session wrote the same text after the approval checked for it and before its own
    # write: the write found the duplicate and nothing changed, yet the grant was recorded
    service = orca.features.deliberate
    session = await orca.open(tmp_path / "ws")
    other = await orca.open(tmp_path / "ws", mode="yolo")
    if action == "save":
        pending = await save(orca, session, "use ruff for lint")
    else:
        target = (await save(orca, other, "use flake8 for lint"))["record"]
        pending = await orca.call(
            "memory.manage",
            {**session, "action": "update", "id": target["id"], "content": "use ruff for lint"},
        )
    assert pending["outcome"] == "pending_approval"
    name = "insert" if action == "save" else "update"
    write = getattr(service.store, name)
    beaten_once: list[bool] = []

    async def beaten(*args: Any, **kwargs: Any) -> Any:
        if not beaten_once:  # the other session's save, made just before this write
            beaten_once.append(True)
            assert (await save(orca, other, "use ruff for lint"))["outcome"] == "applied"
        return await write(*args, **kwargs)

    monkeypatch.setattr(service.store, name, beaten)
    answered = await approve(orca, session, pending["approval_id"], decision)
    monkeypatch.undo()
    assert answered["outcome"] == "denied" and "already exists" in answered["summary"]
    assert (await orca.call("grants.list", {}))["grants"] == []
    assert (await save(orca, session, "use mypy strict"))["outcome"] == "pending_approval"


async def test_deny_changes_nothing_and_consumes_the_approval(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "ws")
    pending = await save(orca, session, "use ruff for lint")
    denied = await approve(orca, session, pending["approval_id"], "deny")
    assert denied["outcome"] == "denied" and "declined" in denied["reason"]
    assert await search(orca, session) == []
    error = await error_of(
        orca,
        "memory.approve",
        {**session, "approval_id": pending["approval_id"], "decision": "allow_once"},
    )
    assert error.error.code == -32014


async def test_pending_approvals_expire(
    orca: InProcessDaemon, tmp_path: Path, clock: SettableClock
) -> None:
    session = await orca.open(tmp_path / "ws")
    in_time = await save(orca, session, "approved just in time")
    late = await save(orca, session, "approved too late")
    clock.advance(APPROVAL_TTL_S - 0.01)
    assert (await approve(orca, session, in_time["approval_id"], "allow_once"))[
        "outcome"
    ] == "applied"
    clock.advance(0.01)
    error = await error_of(
        orca,
        "memory.approve",
        {**session, "approval_id": late["approval_id"], "decision": "allow_once"},
    )
    assert error.error.code == -32014 and "expired" in error.error.message
    assert [r["content"] for r in await search(orca, session)] == ["approved just in time"]


@pytest.mark.parametrize("wall_step", [-86400.0, -3600.0, 1800.0])
async def test_pending_approvals_expire_after_their_time_whatever_the_wall_clock_does(
    orca: InProcessDaemon, tmp_path: Path, clock: SettableClock, wall_step: float
) -> None:
    session = await orca.open(tmp_path / "ws")
    in_time = await save(orca, session, "approved in time")
    late = await save(orca, session, "approved too late")
    clock.set_wall(wall_step)  # NTP, a user or a resumed machine sets the clock
    clock.advance(APPROVAL_TTL_S - 0.01)
    assert (await approve(orca, session, in_time["approval_id"], "allow_once"))[
        "outcome"
    ] == "applied"
    clock.advance(0.01)
    error = await error_of(
        orca,
        "memory.approve",
        {**session, "approval_id": late["approval_id"], "decision": "allow_once"},
    )
    assert error.error.code == -32014 and "expired" in error.error.message
    assert [r["content"] for r in await search(orca, session)] == ["approved in time"]


@pytest.mark.parametrize("change", ["save", "update"])
async def test_a_correction_made_after_the_clock_went_back_still_ranks_first(
    orca: InProcessDaemon, tmp_path: Path, clock: SettableClock, change: str
) -> None:
    session = await orca.open(tmp_path / "ws", mode="yolo")
    await save(orca, session, "Logs are kept in Loki for 14 days.")
    other = (await save(orca, session, "The frontend builds with vite."))["record"]
    clock.advance(60)
    clock.set_wall(-86400)  # NTP, a user or a resumed machine sets the clock back a day
    correction = "Logs are now kept in Loki for 30 days."
    if change == "save":
        written = (await save(orca, session, correction))["record"]
    else:
        params = {**session, "action": "update", "id": other["id"], "content": correction}
        written = (await orca.call("memory.manage", params))["record"]
    assert written["updated_at"] > other["updated_at"]
    turn = {**session, "turn_id": "t1", "prompt": "How long are logs kept in Loki?"}
    deliberate = (await orca.call("recall", turn))["deliberate"]
    assert deliberate[0]["content"] == correction


async def test_only_the_proposing_session_can_approve(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    owner = await orca.open(tmp_path / "ws")
    other = await orca.open(tmp_path / "ws")
    pending = await save(orca, owner, "owner's change")
    error = await error_of(
        orca,
        "memory.approve",
        {**other, "approval_id": pending["approval_id"], "decision": "allow_once"},
    )
    assert error.error.code == -32014
    assert (await approve(orca, owner, pending["approval_id"], "allow_once"))[
        "outcome"
    ] == "applied"


async def test_allow_session_grants_this_session_only(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "ws")
    pending = await save(orca, session, "first change")
    assert (await approve(orca, session, pending["approval_id"], "allow_session"))[
        "outcome"
    ] == "applied"
    assert (await save(orca, session, "second change"))["outcome"] == "applied"
    other = await orca.open(tmp_path / "ws")
    assert (await save(orca, other, "third change"))["outcome"] == "pending_approval"


async def test_a_global_change_asks_saying_what_a_workspace_grant_on_it_covers(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    session = await orca.open(tmp_path / "ws")
    local = await save(orca, session, "we use pnpm")
    shared = await save(orca, session, "I prefer rebase", is_global=True)
    assert "global memory, from any workspace" in shared["summary"]
    assert "any workspace" not in local["summary"]


async def test_allow_workspace_persists_for_that_workspace_across_sessions_and_restarts(
    tmp_path: Path, clock: SettableClock
) -> None:
    (tmp_path / "ws" / ".git").mkdir(parents=True)  # a repository: ws/sub is the same workspace
    first = InProcessDaemon(tmp_path, clock)
    try:
        session = await first.open(tmp_path / "ws")
        pending = await save(first, session, "first change")
        assert (await approve(first, session, pending["approval_id"], "allow_workspace"))[
            "outcome"
        ] == "applied"
        later = await first.open(tmp_path / "ws" / "sub")  # the same workspace, another cwd
        assert (await save(first, later, "second change"))["outcome"] == "applied"
    finally:
        await first.aclose()
    second = InProcessDaemon(tmp_path, clock)
    try:
        session = await second.open(tmp_path / "ws")
        assert (await save(second, session, "after restart"))["outcome"] == "applied"
        elsewhere = await second.open(tmp_path / "other")
        assert (await save(second, elsewhere, "other workspace"))["outcome"] == "pending_approval"
        headless = await second.open(tmp_path / "ws", interactive=False)
        assert (await save(second, headless, "headless in granted workspace"))[
            "outcome"
        ] == "denied"
    finally:
        await second.aclose()


async def test_approval_rechecks_memory_changed_meanwhile(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    asker = await orca.open(tmp_path / "ws")
    writer = await orca.open(tmp_path / "ws", mode="yolo")
    pending_save = await save(orca, asker, "raced text")
    await save(orca, writer, "raced text")
    assert (await approve(orca, asker, pending_save["approval_id"], "allow_once"))[
        "outcome"
    ] == "denied"
    record = (await save(orca, writer, "to be forgotten twice"))["record"]
    pending_forget = await orca.call(
        "memory.manage", {**asker, "action": "forget", "id": record["id"]}
    )
    assert pending_forget["outcome"] == "pending_approval"
    await orca.call("memory.manage", {**writer, "action": "forget", "id": record["id"]})
    error = await error_of(
        orca,
        "memory.approve",
        {**asker, "approval_id": pending_forget["approval_id"], "decision": "allow_once"},
    )
    assert error.error.code == -32014


async def test_an_update_of_the_kind_keeps_text_another_session_changed_meanwhile(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    retyper = await orca.open(tmp_path / "ws", mode="yolo")
    writer = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, writer, "Deploys run from the main branch"))["record"]
    store = orca.features.deliberate.store
    write = store.update
    interleaved: list[dict[str, Any]] = []

    async def after_the_other_writer(*args: Any, **kwargs: Any) -> Any:
        # the writer's update lands between the retyper's read of the record and its write
        store.update = write  # type: ignore[method-assign]
        interleaved.append(
            await orca.call(
                "memory.manage",
                {
                    **writer,
                    "action": "update",
                    "id": record["id"],
                    "content": "Deploys run from the release branch",
                },
            )
        )
        return await write(*args, **kwargs)

    store.update = after_the_other_writer  # type: ignore[method-assign]
    retyped = await orca.call(
        "memory.manage", {**retyper, "action": "update", "id": record["id"], "kind": "decision"}
    )
    assert interleaved[0]["outcome"] == "applied" and retyped["outcome"] == "applied"
    both = {"content": "Deploys run from the release branch", "kind": "decision"}
    [stored] = await search(orca, writer)
    assert {name: stored[name] for name in both} == both
    assert {name: retyped["record"][name] for name in both} == both  # what was written, said


@pytest.mark.parametrize(("action", "write"), [("update", "update"), ("forget", "forget_visible")])
async def test_an_approved_change_never_writes_over_text_rewritten_while_it_was_approved(
    orca: InProcessDaemon, tmp_path: Path, action: str, write: str
) -> None:
    # the user approved the change on the record as its summary quoted it; another session
    # rewrites the record after the approval's check and before its write
    asker = await orca.open(tmp_path / "ws")
    writer = await orca.open(tmp_path / "ws", mode="yolo")
    record = (await save(orca, writer, "Deploys run from the main branch"))["record"]
    proposed = {"id": record["id"]} | (
        {"content": "Deploys run on Fridays"} if action == "update" else {}
    )
    pending = await orca.call("memory.manage", {**asker, "action": action, **proposed})
    assert pending["outcome"] == "pending_approval"
    store = orca.features.deliberate.store
    written = getattr(store, write)
    rewrites: list[dict[str, Any]] = []

    async def after_the_other_writer(*args: Any, **kwargs: Any) -> Any:
        setattr(store, write, written)
        rewrite = {"action": "update", "id": record["id"], "content": "Deploys run from release"}
        rewrites.append(await orca.call("memory.manage", {**writer, **rewrite}))
        return await written(*args, **kwargs)

    setattr(store, write, after_the_other_writer)
    error = await error_of(
        orca,
        "memory.approve",
        {**asker, "approval_id": pending["approval_id"], "decision": "allow_session"},
    )
    assert rewrites[0]["outcome"] == "applied"
    assert (error.error.code, error.error.data["kind"]) == (-32013, "conflict")
    assert "Deploys run from release" in error.error.message
    [stored] = await search(orca, writer)
    assert stored["content"] == "Deploys run from release"  # the text nobody was asked about
    again = await save(orca, asker, "another change")  # and no grant was given
    assert again["outcome"] == "pending_approval"


@pytest.mark.parametrize("action", ["forget", "update"])
async def test_a_change_whose_snapshot_purge_must_wait_is_applied_and_purged_later(
    tmp_path: Path, clock: SettableClock, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    monkeypatch.setattr(sqlite_worker, "SQLITE_BUSY_TIMEOUT_MS", 50)  # a lock fails fast
    orca = InProcessDaemon(tmp_path, clock)
    try:
        session = await orca.open(tmp_path / "ws", mode="yolo")
        record = (await save(orca, session, "The staging cluster is quartz-lemur-17"))["record"]
        turn = {**session, "turn_id": "t1", "prompt": "which staging cluster is it?"}
        assert "quartz-lemur-17" in (await orca.call("recall", turn))["context"]
        await orca.features.recall.snapshots.flush()
        change = {"id": record["id"]}
        if action == "update":
            change["content"] = "The staging cluster is basalt-heron-9"
        holder = sqlite3.connect(orca.paths.state_db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the state database's lock
        try:
            result = await orca.call("memory.manage", {**session, "action": action, **change})
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert result["outcome"] == "applied"  # it was: the answer says so, not -32603
        await orca.features.deliberate.purge_now()  # what the purger does next
        assert "quartz-lemur-17" not in (await orca.call("recall", turn))["context"]
        assert b"quartz-lemur-17" not in orca.paths.state_db.read_bytes()
    finally:
        await orca.aclose()


async def test_a_forget_read_past_by_another_connection_leaves_no_text_once_it_ends(
    tmp_path: Path, clock: SettableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_worker, "SQLITE_BUSY_TIMEOUT_MS", 50)  # a reader is waited for
    orca = InProcessDaemon(tmp_path, clock)
    try:
        session = await orca.open(tmp_path / "ws", mode="yolo")
        record = (await save(orca, session, "The staging cluster is quartz-lemur-17"))["record"]
        reader = sqlite3.connect(orca.paths.deliberate_db, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM memories").fetchone()  # a snapshot the WAL serves
        try:
            forget = {**session, "action": "forget", "id": record["id"]}
            assert (await orca.call("memory.manage", forget))["outcome"] == "applied"
            await orca.features.deliberate.purge_now()  # the checkpoint must wait for the reader
        finally:
            reader.execute("ROLLBACK")
            reader.close()
        await orca.features.deliberate.purge_now()  # what the purger does next
        files = [orca.paths.deliberate_db.with_name(f"memory.sqlite3{s}") for s in ("", "-wal")]
        assert all(b"quartz-lemur-17" not in path.read_bytes() for path in files if path.exists())
    finally:
        await orca.aclose()


# --- sessions ---------------------------------------------------------------------------------


async def test_bare_sessions_are_disabled(orca: InProcessDaemon, tmp_path: Path) -> None:
    session = await orca.open(tmp_path / "ws", bare=True, mode="yolo")
    for method, params in (
        ("memory.search", {}),
        ("memory.manage", {"action": "save", "content": "x", "kind": "fact", "is_global": False}),
        ("memory.approve", {"approval_id": "apr_" + "0" * 32, "decision": "allow_once"}),
    ):
        error = await error_of(orca, method, {**session, **params})
        assert error.error.code == -32016 and error.kind == "disabled"


async def test_stale_epoch_is_refused(orca: InProcessDaemon, tmp_path: Path) -> None:
    first = await orca.open(tmp_path / "ws", mode="yolo")
    await orca.call(
        "session.open", {"cwd": str(tmp_path / "ws"), "session_id": first["session_id"]}
    )
    error = await error_of(orca, "memory.search", first)
    assert error.error.code == -32010


async def test_recall_searches_the_same_store_with_the_same_visibility(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    a = await orca.open(tmp_path / "a", mode="yolo")
    b = await orca.open(tmp_path / "b", mode="yolo")
    mine = (await save(orca, a, "alpha deploys with helm"))["record"]
    await save(orca, b, "beta deploys with helm")
    recall = DeliberateRecall(orca.features.deliberate)  # lexical: no model
    session = await orca.daemon.sessions.require(a["session_id"], a["epoch"])

    def search(prompt: str) -> list[DeliberateEntry]:
        return recall.search_blocking(session, prompt, distinct_terms(prompt), 8)

    entries = await trio.to_thread.run_sync(search, "how do we deploy?")
    assert [e.id for e in entries] == [mine["id"]]
    assert entries[0].scope == "workspace"
    assert await trio.to_thread.run_sync(search, "🎉") == []


async def test_recall_brings_global_records_to_every_workspace_and_workspace_ones_home(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    a = await orca.open(tmp_path / "a", mode="yolo")
    b = await orca.open(tmp_path / "b", mode="yolo")
    shared = (await save(orca, a, "Status updates stay concise", is_global=True))["record"]
    local = (await save(orca, a, "Status updates go to the ops channel"))["record"]
    prompt = "how should status updates be written and where do they go?"
    for session, expected in ((a, {shared["id"], local["id"]}), (b, {shared["id"]})):
        recalled = await orca.call("recall", {**session, "turn_id": "t1", "prompt": prompt})
        assert {entry["id"] for entry in recalled["deliberate"]} == expected
        scopes = {entry["id"]: entry["scope"] for entry in recalled["deliberate"]}
        assert scopes[shared["id"]] == "global"
        assert "[fact | global |" in recalled["context"]


async def test_a_recall_right_after_the_backfill_finds_what_it_embedded(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    """Recall reloads its vectors in memory at most once a second after a change, so the
    backfill reads them again after its last batch (or, if it read them less than a second
    before, drops them for recall to read): a record it has just embedded is found by meaning
    at once (here the record shares no word with the prompt), and the first recall after a save
    reads no vectors itself (at 10k records that took it 100 ms)."""
    a = await orca.open(tmp_path / "a", mode="yolo")
    session = await orca.daemon.sessions.require(a["session_id"], a["epoch"])
    # the daemon's own recall and backfill, as the composition root wires them
    recall = orca.features.recall.service.deliberate
    backfill = orca.features.recall.backfill
    embeddings = orca.features.recall.service.embeddings
    assert isinstance(recall, DeliberateRecall) and embeddings is not None
    prompt = "oldest iPhone we target"
    query = embeddings.query(prompt)
    assert query is not None

    def search() -> list[str]:
        found = recall.search_blocking(session, prompt, distinct_terms(prompt), 8, query)
        return [entry.content for entry in found]

    in_memory = recall._matrix  # shared with the backfill, as the composition root wires them
    await save(orca, a, "Storybook runs on port 6006.")
    assert await trio.to_thread.run_sync(backfill.step_blocking) == 1
    loaded = in_memory[0]
    assert loaded is not None and len(loaded.row_ids) == 1  # read by the backfill
    assert await trio.to_thread.run_sync(search) == []
    assert in_memory[0] is loaded  # the search used them: it read no vectors itself
    fact = "The mobile app supports iOS 16 and Android 10 as the minimum versions."
    await save(orca, a, fact)
    assert await trio.to_thread.run_sync(backfill.step_blocking) == 1
    assert in_memory[0] is None  # read too recently by the backfill: dropped, for recall
    assert await trio.to_thread.run_sync(search) == [fact]
    # after a start, a backfill with nothing to embed reads them before the first recall
    in_memory[0] = None
    started = Backfill(orca.features.deliberate, embeddings, in_memory)
    assert await trio.to_thread.run_sync(started.step_blocking) == 0
    preloaded = in_memory[0]
    assert preloaded is not None and len(preloaded.row_ids) == 2


def put_older_database_in_place(path: Path, scratch: Path, *, records: int) -> None:
    """Move the database at `path` aside with its journal, and put in its place one holding
    `records` records that were never paired with their corrections (an older orcad's)."""
    older = scratch / "older.sqlite3"
    connection = open_database(older)
    for n in range(records):
        insert_record(
            connection, numbered_record(n, f"Service {n} keeps its logs for {n + 1} days.", None)
        )
    connection.close()
    for suffix in ("", "-wal", "-shm"):  # the file and its own journal, moved aside together
        current = Path(f"{path}{suffix}")
        if current.exists():
            current.rename(scratch / f"moved{suffix}")
    older.replace(path)


async def test_the_count_of_records_to_pair_follows_a_database_file_replaced(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    """The records still to pair with their corrections are counted at a start, then counted
    down; a file put in place of the database (an older orcad's copy restored, say) holds more
    than were counted, and is counted again."""
    a = await orca.open(tmp_path / "a", mode="yolo")
    await save(orca, a, "The code is formatted with a line length of 100.")
    backfill = orca.features.recall.backfill
    assert isinstance(backfill, Backfill)

    async def step() -> tuple[int, int]:
        done: int = await trio.to_thread.run_sync(backfill.links_step_blocking)
        return done, backfill.status().corrections_pending

    assert await step() == (0, 0)  # paired when it was saved
    put_older_database_in_place(orca.features.deliberate.store.path, tmp_path, records=40)
    steps = [await step()]
    while steps[-1][0]:
        steps.append(await step())
    assert steps[0] == (RECALL_LINK_BATCH, 40 - RECALL_LINK_BATCH)  # counted again
    assert [pending for _done, pending in steps] == [
        max(0, 40 - RECALL_LINK_BATCH * n) for n in range(1, len(steps) + 1)
    ]
    assert sum(done for done, _pending in steps) == 40


class ScriptedEmbedder(RankingSettings):
    """An embedding model that refuses any text holding "TOO LONG" (as an endpoint's 400), or
    every text once `refuse_all`; times out on a batch holding "SLOW" with another text, and
    on any once `calls_left` reaches 0; else a vector from the text's length."""

    model_id = "scripted"
    dims = 4

    def __init__(self) -> None:
        self.calls_left: int | None = None  # None: it never times out
        self.refuse_all = False
        self.sent: list[str] = []

    def embed(self, texts: Any) -> Any:
        self.sent.extend(texts)
        if self.calls_left is not None:
            if self.calls_left <= 0:
                raise EmbeddingTimedOut("timed out")
            self.calls_left -= 1
        if len(texts) > 1 and any("SLOW" in text for text in texts):
            raise EmbeddingTimedOut("timed out")
        if self.refuse_all or any("TOO LONG" in text for text in texts):
            raise EmbeddingRefused("400: input is too large to process")
        rows = np.array([[len(text), 1.0, 2.0, 3.0] for text in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def test_the_backfill_sets_aside_only_what_the_model_refuses(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    a = await orca.open(tmp_path / "a", mode="yolo")
    model = ScriptedEmbedder()
    backfill = Backfill(orca.features.deliberate, Embeddings("scripted", model))

    async def step() -> int:
        result: int = await trio.to_thread.run_sync(backfill.step_blocking)
        return result

    await save(orca, a, "Service one listens on port 7001.")
    refused = (await save(orca, a, "TOO LONG: the staging runbook."))["record"]
    await save(orca, a, "Service two listens on port 7002.")
    # the batch is refused, the probe is not: each record alone; only the refused one is set aside
    assert await step() == 3
    assert backfill.refused.current() == {text_digest("TOO LONG: the staging runbook.")}
    assert (backfill.embedded, backfill.pending) == (2, 1)
    # not sent again while nothing changed, nor along with a new record
    sent = len(model.sent)
    assert await step() == 0 and len(model.sent) == sent
    await save(orca, a, "Service three listens on port 7003.")
    assert await step() == 1
    assert model.sent[sent:] == ["Service three listens on port 7003."]
    # an edited record is tried at once, though its row was set aside
    await orca.call(
        "memory.manage",
        {**a, "action": "update", "id": refused["id"], "content": "The staging runbook."},
    )
    assert await step() == 1
    assert (backfill.embedded, backfill.pending) == (4, 0)
    # a model that times out while the records are tried one by one sets none of them aside
    await save(orca, a, "TOO LONG: the production runbook.")
    await save(orca, a, "Service four listens on port 7004.")
    model.calls_left = 2  # the batch (refused) and the probe; the first record times out
    assert await step() == 0
    assert backfill.refused.current() == {text_digest("TOO LONG: the staging runbook.")}
    assert backfill.pending == 2
    model.calls_left = None  # back: the next pass embeds one and sets the other aside
    assert await step() == 2
    assert text_digest("TOO LONG: the production runbook.") in backfill.refused.current()
    assert (backfill.embedded, backfill.pending) == (5, 1)
    # with set-aside texts no record holds any more, a record that a failed pass could not
    # embed is embedded at the next one
    production = (await search(orca, a, query="production runbook"))[0]
    await orca.call("memory.manage", {**a, "action": "forget", "id": production["id"]})
    await save(orca, a, "Service five listens on port 7005.")
    model.calls_left = 0
    assert await step() == 0
    model.calls_left = None
    assert await step() == 1
    assert (backfill.embedded, backfill.pending) == (6, 0)


def test_refused_texts_are_tried_again_after_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    refused = RefusedTexts()
    refused.add(["a text too long for the model"])
    assert refused.holds("a text too long for the model")
    assert refused.current() == {text_digest("a text too long for the model")}
    assert not refused.holds("a text the model took")
    monkeypatch.setattr(recall_deliberate, "RECALL_BACKFILL_REFUSED_RETRY_S", 0.0)
    assert not refused.holds("a text too long for the model")
    assert refused.current() == frozenset()


async def test_a_reopened_session_cannot_approve_what_its_earlier_epoch_proposed(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    """The reopened session may have another mode or workspace than the one the user was shown."""
    session = await orca.open(tmp_path / "a")
    pending = await save(orca, session, "proposed for workspace a")
    assert "workspace memory" in pending["summary"] and str(tmp_path / "a") in pending["summary"]
    (tmp_path / "b").mkdir()
    reopened = await orca.call(
        "session.open",
        {"cwd": str(tmp_path / "b"), "session_id": session["session_id"], "mode": "plan"},
    )
    again = {"session_id": reopened["session_id"], "epoch": reopened["epoch"]}
    error = await error_of(
        orca,
        "memory.approve",
        {**again, "approval_id": pending["approval_id"], "decision": "allow_workspace"},
    )
    assert error.error.code == -32014
    assert await search(orca, again) == []
    other = await orca.open(tmp_path / "b")
    assert (await save(orca, other, "no grant was given"))["outcome"] == "pending_approval"


async def test_summaries_stay_one_line_for_a_workspace_path_with_a_newline(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    odd = tmp_path / "line one\nline two"
    session = await orca.open(odd, mode="yolo")
    saved = await save(orca, session, "odd paths are still workspaces")
    assert saved["outcome"] == "applied" and saved["record"]["workspace_root"] == str(odd)
    asking = await orca.open(odd)
    pending = await save(orca, asking, "a second fact for the odd path")
    for result in (saved, pending):
        assert "\n" not in result["summary"] and "workspace memory" in result["summary"]
        assert "line one\\nline two" in result["summary"]


async def test_summaries_show_terminal_escapes_and_bidi_overrides_as_text(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    # a summary is the approval question a user answers (orcactl's prompt, an MCP client's
    # elicitation): an escape sequence must not drive their terminal, nor an override show
    # them other text than the change holds
    content = "Use \u202estaging\u202c \x1b]0;title\x07 \x9b2J"
    odd = tmp_path / "repo\u202e"
    applied = await save(orca, await orca.open(odd, mode="yolo"), content)
    asking = await orca.open(odd)
    pending = await save(orca, asking, content + " twice")
    forgetting = await orca.call(
        "memory.manage", {**asking, "action": "forget", "id": applied["record"]["id"]}
    )
    for result in (applied, pending, forgetting):
        summary = result["summary"]
        assert not any(ch in summary for ch in "\x1b\x07\x9b\u202e\u202c"), summary
        assert "Use \\u202estaging\\u202c \\x1b]0;title\\x07 \\x9b2J" in summary, summary
        assert "repo\\u202e" in summary, summary
    assert applied["record"]["content"] == content  # the record keeps what was written


async def test_the_backfill_embeds_the_facts_recall_noted_project_by_project(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    """Facts without a vector (after an upgrade) wait for the backfill: a batch the model
    fails is tried again half as large (a slow server), a batch it refuses one fact at a time
    (the refused one set aside, not sent again), and the projects take turns, so that one
    whose facts the model fails holds up no other."""
    model = ScriptedEmbedder()
    embeddings = Embeddings("scripted", model)
    many = [f"Service number {n} listens on port {7000 + n}." for n in range(40)]
    facts = {
        "a": ["TOO LONG: the whole staging runbook.", "Releases are cut on Thursdays."],
        "b": ["The frontend uses pnpm.", "Deploys need two approvals."],
        "c": many,
    }
    directories = {project: tmp_path / project for project in facts}
    for project, texts in facts.items():
        add_facts(directories[project], texts)
    search = ProjectMemorySearch(directories.__getitem__, embeddings=embeddings)
    errors: list[tuple[str, str]] = []
    backfill = Backfill(
        orca.features.deliberate,
        embeddings,
        record_error=lambda kind, message: errors.append((kind, message)),
        facts=search.backfill,
    )
    assert backfill.facts_step_blocking() == 0  # no recall yet: no project noted
    query = embeddings.query("which port")
    for project in ("a", "b", "c"):  # recall notes each (and ranks them by their words)
        search.search_blocking(project, ["port"], 6, query)
    assert search.backfill.facts_pending() == 44
    # a: refused as a batch, then one at a time; only the refused fact is set aside
    assert backfill.facts_step_blocking() == 2
    assert backfill.refused.current() == {text_digest(facts["a"][0])}
    assert [kind for kind, _message in errors] == ["embedding"]
    assert "refused 1 automatic fact(s)" in errors[0][1]
    assert backfill.facts_step_blocking() == 2  # b's turn
    model.calls_left = 0  # c: the model times out on 40 facts at once
    assert backfill.facts_step_blocking() == 0
    model.calls_left = None
    sent = len(model.sent)
    assert backfill.facts_step_blocking() == 32  # half as many
    assert backfill.facts_step_blocking() == 8
    assert model.sent[sent:] == many  # (32 then 8, in the ledger's order)
    assert search.backfill.facts_pending() == 1  # a's refused fact, left to its words
    sent = len(model.sent)
    assert backfill.facts_step_blocking() == 0 and len(model.sent) == sent  # not sent again
    for project in ("b", "c"):  # every vector is in the index, for the next start
        stored = read_index_vectors(directories[project] / "index.sqlite3")
        assert stored is not None and set(stored.by_text) == set(facts[project])
    search.close()


def projects_on_disk(
    tmp_path: Path, facts: dict[str, list[str]], embeddings: Embeddings
) -> tuple[dict[str, Path], ProjectMemorySearch]:
    """A project of each of `facts` (committed without vectors, as before an upgrade), and a
    search that lists them as the daemon's does."""
    directories = {project: tmp_path / project for project in facts}
    for project, texts in facts.items():
        add_facts(directories[project], texts)
    search = ProjectMemorySearch(
        directories.__getitem__, embeddings=embeddings, list_projects=lambda: sorted(facts)
    )
    return directories, search


async def test_the_backfill_embeds_the_facts_of_projects_no_recall_has_reached(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    """After an upgrade, a project nobody recalls still gets its facts embedded, and counted
    in status: the backfill looks at every project on disk once, one whose index holds every
    vector costs nothing more, and a project recall has cached is counted once."""
    model = ScriptedEmbedder()
    embeddings = Embeddings("scripted", model)
    facts = {
        "a": ["Releases are cut on Thursdays.", "Deploys need two approvals."],
        "b": [
            "The frontend uses pnpm.",
            "Staging is at staging.example.com.",
            "CI runs on Buildkite.",
        ],
        "c": ["The API throttles each token to 100 requests a minute."],
        "d": ["Backups run nightly at 02:00 UTC."],
    }
    directories, search = projects_on_disk(tmp_path, facts, embeddings)
    backfill = Backfill(orca.features.deliberate, embeddings, facts=search.backfill)
    search.search_blocking("d", ["backups"], 6, embeddings.query("when do backups run"))
    assert backfill.facts_step_blocking() == 1  # d, which recall noted, first
    query = embeddings.query("how fast may a token call")
    sent = len(model.sent)
    search.search_blocking("c", ["token"], 6, query)
    assert search.backfill.facts_pending() == 1  # c, noted by its recall; a and b not looked at yet
    assert backfill.facts_step_blocking() == 1  # c's turn
    assert search.backfill.facts_pending() == 0
    assert backfill.facts_step_blocking() == 2  # then the projects on disk: a
    assert search.backfill.facts_pending() == 3  # b found so too, counted once
    assert backfill.facts_step_blocking() == 3
    assert search.backfill.facts_pending() == 0
    assert backfill.facts_step_blocking() == 0  # c and d were not looked at again
    assert model.sent[sent:] == facts["c"] + facts["a"] + facts["b"]
    for project, texts in facts.items():  # every vector is in the index, for the next start
        stored = read_index_vectors(directories[project] / "index.sqlite3")
        assert stored is not None and set(stored.by_text) == set(texts)
    # nothing is kept of a project the backfill finished and no recall asked for (its cache
    # holds its facts and vectors), and recall's own are all kept
    assert list(search._caches.projects) == ["d", "c"] and not search._caches.backfill_caches
    search.close()


async def test_the_backfill_of_projects_on_disk_leaves_recalls_caches_alone(
    orca: InProcessDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The projects the backfill reads on disk are kept apart from the ones recall keeps (with
    room for two here), so they push none of them out; a project recall read by its words alone
    (a prompt without a vector: nothing noted) is counted and embedded too; and one whose
    facts left were all refused waits, counted but not kept, until a refusal expires."""
    monkeypatch.setattr(project_cache, "PROJECTS_CACHED", 2)
    model = ScriptedEmbedder()
    embeddings = Embeddings("scripted", model)
    facts = {
        "a": ["Releases are cut on Thursdays.", "Deploys need two approvals."],
        "b": ["TOO LONG: the whole staging runbook.", "The frontend uses pnpm."],
        "r1": ["The API throttles each token to 100 requests a minute."],
        "r2": ["Backups run nightly at 02:00 UTC."],
    }
    directories, search = projects_on_disk(tmp_path, facts, embeddings)
    backfill = Backfill(orca.features.deliberate, embeddings, facts=search.backfill)
    for project in ("r1", "r2"):  # by their words: no vector for the prompt, nothing noted
        assert search.search_blocking(project, ["nightly", "token"], 6)
    assert search.backfill.facts_pending() == 0
    steps = [backfill.facts_step_blocking() for _ in range(8)]
    assert sum(steps) == 6 and steps[-2:] == [0, 0]
    for project, texts in facts.items():
        stored = read_index_vectors(directories[project] / "index.sqlite3")
        assert stored is not None and set(stored.by_text) == set(texts) - {facts["b"][0]}
    assert search.backfill.facts_pending() == 1  # b's refused fact, left to its words
    assert list(search._caches.projects) == ["r1", "r2"] and not search._caches.backfill_caches
    sent = len(model.sent)
    assert backfill.facts_step_blocking() == 0 and len(model.sent) == sent
    monkeypatch.setattr(recall_deliberate, "RECALL_BACKFILL_REFUSED_RETRY_S", 0.0)
    backfill.facts_step_blocking()  # the refusal expired: b is read and its fact sent again
    assert facts["b"][0] in model.sent[sent:]
    monkeypatch.setattr(recall_deliberate, "RECALL_BACKFILL_REFUSED_RETRY_S", 600.0)
    assert backfill.facts_step_blocking() == 0  # (refused again: b is let go at the next pass)
    assert search.backfill.facts_pending() == 1 and not search._caches.backfill_caches
    search.close()


async def test_a_project_on_disk_the_backfill_cannot_finish_is_let_go(
    orca: InProcessDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index that cannot be written, or a ledger that cannot be read, lets the backfill's
    cache of a project go: no cache (each with an open connection) piles up per project, and
    no count is left that nothing would lower."""
    model = ScriptedEmbedder()
    embeddings = Embeddings("scripted", model)
    facts = {f"p{n}": [f"Service number {n} listens on port {7000 + n}."] for n in range(3)}
    facts["q"] = ["Releases are cut on Thursdays."]
    directories, search = projects_on_disk(tmp_path, facts, embeddings)
    backfill = Backfill(orca.features.deliberate, embeddings, facts=search.backfill)

    def disk_full(*args: Any, **kwargs: Any) -> None:
        raise StorageError("No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(projections, "write_index", disk_full)
        assert [backfill.facts_step_blocking() for _ in range(3)] == [1, 1, 1]
        assert not search._caches.backfill_caches
    model.calls_left = 0  # q's batch fails: q waits for the model, in the backfill's cache
    assert backfill.facts_step_blocking() == 0
    assert search.backfill.facts_pending() == 1 and list(search._caches.backfill_caches) == ["q"]
    ledger_path(directories["q"]).write_text("not a ledger\n")
    model.calls_left = None
    assert backfill.facts_step_blocking() == 0
    assert search.backfill.facts_pending() == 0 and not search._caches.backfill_caches
    search.close()


async def test_a_project_the_model_fails_holds_up_no_other_and_a_refusing_model_rests(
    orca: InProcessDaemon, tmp_path: Path
) -> None:
    model = ScriptedEmbedder()
    embeddings = Embeddings("scripted", model)
    facts = {
        "a": ["SLOW: the whole architecture document.", "Releases are cut on Thursdays."],
        "b": ["The frontend uses pnpm.", "Deploys need two approvals."],
    }
    directories = {project: tmp_path / project for project in facts}
    for project, texts in facts.items():
        add_facts(directories[project], texts)
    search = ProjectMemorySearch(directories.__getitem__, embeddings=embeddings)
    backfill = Backfill(orca.features.deliberate, embeddings, facts=search.backfill)
    query = embeddings.query("which port")
    for project in ("a", "b"):
        search.search_blocking(project, ["port"], 6, query)
    assert backfill.facts_step_blocking() == 0  # a's batch times out: b's turn next
    assert backfill.facts_step_blocking() == 2
    assert search.backfill.facts_pending() == 2
    # a's batch halves at each timeout (64 after b's success: six times) until the slow fact
    # goes alone
    assert [backfill.facts_step_blocking() for _ in range(9)] == [0] * 6 + [1, 1, 0]
    assert search.backfill.facts_pending() == 0
    # a model that refuses everything, the probe too (a model name the server does not know),
    # is left alone for a while rather than sent a batch and a probe every pass
    add_facts(directories["b"], ["Staging deploys run from the deploy-staging workflow."])
    search.search_blocking("b", ["port"], 6, query)
    model.refuse_all = True
    sent = len(model.sent)
    assert backfill.facts_step_blocking() == 0
    assert model.sent[sent:] == [
        "Staging deploys run from the deploy-staging workflow.",
        recall_deliberate.PROBE_TEXT,
    ]
    assert backfill.facts_step_blocking() == 0 and backfill.step_blocking() == 0
    assert len(model.sent) == sent + 2
    assert search.backfill.facts_pending() == 1 and not backfill.refused.current()
    search.close()
