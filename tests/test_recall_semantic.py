"""Semantic recall on a real daemon: the built-in model by default, the relevance floor,
corrections first, the background backfill after an upgrade, lexical fallback when no model
loads or the endpoint fails, and each part surviving the other's broken storage."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orcactl.commands.daemon import describe_embedding
from orcad.capture.projections import read_index_vectors
from orcad.limits import RECALL_BACKFILL_BATCH
from protocol.types import EmbeddingStatus
from tests.external_worker import fact_output, turn_params
from tests.fake_openai import FakeOpenAI, stall_before_headers, status
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_recall_daemon import Agent, add_facts, project_dir, texts
from tests.test_recall_embedding import answer_embeddings

pytestmark = pytest.mark.daemon

FACTS = [
    "The response cache is capped at 500 entries per tenant.",
    "This repository deploys with `make release`.",
    "The frontend uses pnpm, never npm or yarn.",
    "The public API throttles each token to 100 requests a minute.",
]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


def start(orca_env: OrcaEnv, factory: list[DaemonProcess], config: str = "") -> DaemonProcess:
    orca_env.write_config("[extraction]\nworkers = 0\n" + config)
    daemon = DaemonProcess(orca_env)
    factory.append(daemon)
    return daemon.start()


def endpoint_config(server: FakeOpenAI, timeout_s: float) -> str:
    """[recall] for an embedding endpoint served by `server` (model "embed-test")."""
    return (
        '[recall]\nembedding = "endpoint"\n[recall.endpoint]\n'
        f'base_url = "{server.base_url}"\nmodel = "embed-test"\ntimeout_s = {timeout_s}\n'
    )


def loaded_status(daemon: DaemonProcess) -> Any:
    """daemon.status once the model's background load has ended, one way or the other."""
    deadline = time.monotonic() + 30
    while True:
        status = daemon.call("daemon.status", {})
        if status.embedding.state != "loading":
            return status
        assert time.monotonic() < deadline, status.embedding
        time.sleep(0.02)


def wait_for_progress(daemon: DaemonProcess, embedded: int, pending: int) -> Any:
    """daemon.status once the backfill counts `embedded` records embedded and `pending` not."""
    deadline = time.monotonic() + 30
    while True:
        seen = daemon.call("daemon.status", {})
        if (seen.embedding.embedded, seen.embedding.pending) == (embedded, pending):
            return seen
        assert time.monotonic() < deadline, seen.embedding
        time.sleep(0.05)


def wait_for_backfill(daemon: DaemonProcess, records: int) -> Any:
    return wait_for_progress(daemon, records, 0).embedding


def add_embedded_facts(
    orca_env: OrcaEnv, agent: Agent, facts: list[str], now: float | None = None
) -> None:
    """Facts in the project's ledger with their vectors, as a publish leaves them. Written
    there directly they have none (as facts from before an upgrade): a first recall notes the
    project, and the backfill embeds them in the background."""
    add_facts(project_dir(orca_env, agent.project_id), facts, now=now)
    agent.recall("a first recall notes the project for the backfill")
    deadline = time.monotonic() + 30
    while (seen := agent.daemon.call("daemon.status", {}).embedding).facts_pending:
        assert time.monotonic() < deadline, seen
        time.sleep(0.02)


def test_builtin_model_by_default_and_nothing_injected_for_an_unrelated_prompt(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory)
    embedding = loaded_status(daemon).embedding
    assert embedding.state == "ready" and embedding.setting == "builtin"
    assert embedding.model.startswith("minilm-l6-int8-")
    agent = Agent(daemon, workdir)
    # the last two prompts below share a word with one of these: not enough for small talk
    facts = [*FACTS, "Integration tests work only with the services of `make services` up."]
    add_embedded_facts(orca_env, agent, facts)
    for fact in facts:
        agent.save(fact)
    unrelated = ("explain the CAP theorem", "sorry, I meant the other file")
    for prompt in (*unrelated, "can you make it shorter?", "thanks, that worked"):
        result = agent.recall(prompt)
        assert (result.automatic, result.deliberate, result.context, result.bytes) == (
            [],
            [],
            "",
            0,
        ), prompt
    result = agent.recall("how does this repository deploy a release?")
    assert texts(result)[0] == "This repository deploys with `make release`."
    assert result.deliberate[0].content == "This repository deploys with `make release`."


def test_careless_and_hostile_prompts_get_a_bounded_answer_and_no_secret_back(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """Every prompt is embedded and gated: none of these may fail, exceed a cap, echo a pasted
    secret, or leave the daemon unable to answer the next, ordinary prompt."""
    daemon = start(orca_env, daemon_factory)
    assert loaded_status(daemon).embedding.state == "ready"
    agent = Agent(daemon, workdir)
    add_embedded_facts(orca_env, agent, FACTS)
    for fact in FACTS:
        agent.save(fact)
    secret = "AKIAIOSFODNN7EXAMPLE"
    prompts = [
        "",  # no tokens: no vector at all
        " \t\n ",
        "\x00\x01\x1b[31m\u202e\ufffd",
        "\U0001f680" * 2000,
        "[" * 5000 + "]" * 5000,
        f"my aws key is {secret} and the db password is hunter2, deploy with it",
        "deploy " * 40_000 + "make release",  # about 300 kB, the deciding word last
        "x" * 300_000,  # one huge token
        "\u00e9" * 4_000_000,  # 8 MB on the wire, not ASCII, no whitespace: read in part
        "\n".join(f"layer sha256:{n:064x} pulled" for n in range(40_000)),  # a 3 MB paste
        # thousands of made-up names none of the general words have, and one a fact holds
        " ".join(f"zq{n}vex" for n in range(30_000)) + " pnpm",
    ]
    for prompt in prompts:
        result = agent.recall(prompt)
        assert result.bytes == len(result.context.encode()) <= 3072 + 4096 * 4, prompt[:40]
        assert len(result.automatic) <= 6 and len(result.deliberate) <= 8
        assert secret not in result.context and "hunter2" not in result.context
    result = agent.recall("how does this repository deploy a release?")
    assert texts(result)[0] == "This repository deploys with `make release`."


def test_a_pasted_error_naming_a_tool_of_the_project_finds_its_fact(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """A pasted error reads like a question about the code on screen, which the gate keeps
    empty; a name in it that general words do not have and one stored text holds opens it."""
    daemon = start(orca_env, daemon_factory)
    loaded_status(daemon)
    agent = Agent(daemon, workdir)
    kapt = "The Gradle daemon needs `-Xmx6g` in gradle.properties; less memory makes kapt fail."
    containers = "Go integration tests use testcontainers, so Docker must be running locally."
    facts = [*FACTS, kapt, containers]
    add_embedded_facts(orca_env, agent, facts)
    for fact in facts:
        agent.save(fact)
    for prompt, fact in (
        ("gradle build dies with OutOfMemoryError in kapt", kapt),
        ("testcontainers wont start on my mac, says it cant find a socket", containers),
    ):
        result = agent.recall(prompt)
        assert texts(result)[0] == fact, (prompt, texts(result))
        assert result.deliberate[0].content == fact, prompt
    # a tool everybody uses is no name of the project's, even when one fact holds it
    result = agent.recall("explain what a docker image layer is")
    assert (result.automatic, result.deliberate) == ([], [])


def test_a_prompt_naming_a_setting_of_the_project_finds_its_fact(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """A prompt asking what a setting does reads like a general question, which the gate keeps
    empty, and the terms of an environment variable's name are words in general use ("dry",
    "run"); the whole name, which one stored text holds, opens it."""
    daemon = start(orca_env, daemon_factory)
    loaded_status(daemon)
    agent = Agent(daemon, workdir)
    flag = (
        "The ledger exporter reads exporter.toml plus env vars prefixed LGX_; `LGX_DRY_RUN=1` "
        "writes the batch files to /tmp instead of uploading them to the bank's SFTP server."
    )
    facts = [*FACTS, flag]
    add_embedded_facts(orca_env, agent, facts)
    for fact in facts:
        agent.save(fact)
    result = agent.recall("what does LGX_DRY_RUN=1 do")
    assert texts(result)[0] == flag, texts(result)
    assert result.deliberate[0].content == flag
    # the same words apart are no name: the gate stays shut for a general question
    result = agent.recall("what does a dry run do")
    assert (result.automatic, result.deliberate) == ([], [])


def test_a_correction_is_recalled_in_place_of_the_fact_it_corrects(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory)
    agent = Agent(daemon, workdir)
    old, new = "Logs are kept in Loki for 14 days.", "Logs are now kept in Loki for 30 days."
    add_facts(project_dir(orca_env, agent.project_id), [old], now=time.time() - 3600)
    add_embedded_facts(orca_env, agent, [new])
    agent.save(old)
    time.sleep(0.01)
    agent.save(new)
    result = agent.recall("how long are logs kept in Loki?")
    assert texts(result) == [new]
    assert [d.content for d in result.deliberate] == [new]


def test_one_record_of_a_template_is_recalled_and_the_one_the_prompt_names_with_it(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory)
    agent = Agent(daemon, workdir)
    components = ["survey-engine", "lab-results", "fleet-tracker", "sensor-hub", "label-printer"]
    for hours, component in enumerate(components, start=3):  # lab-results's is the second
        agent.save(
            f"The {component} queue is drained by a worker that restarts every {hours} hours."
        )
        time.sleep(0.01)
    agent.save("Logs are shipped to Loki and kept for 14 days.")
    result = agent.recall("how often does the worker draining a queue restart?")
    shown = [d.content for d in result.deliberate]
    assert sum("queue is drained" in text for text in shown) == 1, shown
    result = agent.recall("how often does the lab-results queue worker restart?")
    shown = [d.content for d in result.deliberate]
    templated = [text for text in shown if "queue is drained" in text]
    # the newest copy ranks above it, as a correction would, but does not take its place
    assert "The lab-results queue is drained by a worker that restarts every 4 hours." in templated
    assert len(templated) <= 2, shown


def test_records_from_before_the_model_are_embedded_in_the_background(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory, '[recall]\nembedding = "none"\n')
    assert daemon.call("daemon.status", {}).embedding.state == "off"
    agent = Agent(daemon, workdir)
    for n in range(RECALL_BACKFILL_BATCH + 6):  # more than one backfill batch
        agent.save(f"Service number {n} listens on port {7000 + n}.")
    agent.save("The frontend uses pnpm, never npm or yarn.")
    orca_env.write_config("[extraction]\nworkers = 0\n")  # upgrade: the built-in model
    daemon.restart()
    embedding = wait_for_backfill(daemon, RECALL_BACKFILL_BATCH + 7)
    database = sqlite3.connect(daemon.call("daemon.status", {}).deliberate_db)
    try:
        rows = database.execute("SELECT model, count(*) FROM memory_vectors GROUP BY model")
        assert rows.fetchall() == [(embedding.model, RECALL_BACKFILL_BATCH + 7)]
    finally:
        database.close()
    agent = Agent(daemon, workdir)
    result = agent.recall("which package manager does the frontend use?")
    assert result.deliberate[0].content == "The frontend uses pnpm, never npm or yarn."
    # a changed record loses its vector and gets a new one
    agent.save("Service number 1 was retired.")
    wait_for_backfill(daemon, RECALL_BACKFILL_BATCH + 8)


def test_records_from_before_the_pairs_of_corrections_are_paired_in_the_background(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """An orcad that kept no pairs of corrections left records without them: the background
    pass pairs them, and recall brings the correction along."""
    daemon = start(orca_env, daemon_factory, '[recall]\nembedding = "none"\n')
    agent = Agent(daemon, workdir)
    old = "The code is formatted by ruff format with a line length of 100."
    new = "The code is formatted by ruff format with a line length of 120 since the style change."
    agent.save(old)
    time.sleep(0.01)
    agent.save(new)
    for n in range(RECALL_BACKFILL_BATCH):
        agent.save(f"The service number {n} keeps its sources under src/service{n}.")
    path = daemon.call("daemon.status", {}).deliberate_db
    daemon.stop()
    database = sqlite3.connect(path)
    try:  # as an older orcad leaves the database
        for trigger in ("on_delete", "on_update"):
            database.execute(f"DROP TRIGGER memory_corrections_{trigger}")
        for table in ("memory_corrections", "memory_corrections_checked"):
            database.execute(f"DROP TABLE {table}")
        database.commit()
    finally:
        database.close()
    orca_env.write_config("[extraction]\nworkers = 0\n")  # upgrade: the built-in model
    daemon.start()
    loaded_status(daemon)
    deadline = time.monotonic() + 30
    while True:
        database = sqlite3.connect(path)
        try:
            checked = database.execute(
                "SELECT count(*) FROM memory_corrections_checked"
            ).fetchone()[0]
            paired = database.execute(
                "SELECT o.content, n.content FROM memory_corrections JOIN memories AS o "
                "ON o.row_id = older JOIN memories AS n ON n.row_id = newer"
            ).fetchall()
        except sqlite3.OperationalError:  # not created yet
            checked, paired = 0, []
        finally:
            database.close()
        if checked == RECALL_BACKFILL_BATCH + 2:
            break
        assert time.monotonic() < deadline, checked
        time.sleep(0.05)
    assert paired == [(old, new)]
    deadline = time.monotonic() + 10
    while (seen := daemon.call("daemon.status", {}).embedding).corrections_pending:
        assert time.monotonic() < deadline, seen  # its count follows the pass
        time.sleep(0.02)
    agent = Agent(daemon, workdir)
    shown = [d.content for d in agent.recall("how wide may a line of code be?").deliberate]
    assert new in shown and old not in shown, shown


def test_facts_from_before_the_model_are_embedded_in_the_background(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """Recall does not embed a project's facts itself (128 facts took 0.4 s, and an endpoint's
    deadline cut them every time): they rank on their words until the backfill has embedded
    them, which it does once recall has noted the project, and keeps them in the index."""
    daemon = start(orca_env, daemon_factory)
    loaded_status(daemon)
    agent = Agent(daemon, workdir)
    directory = project_dir(orca_env, agent.project_id)
    add_facts(directory, FACTS)  # as before an upgrade: the index holds no vector
    throttle = "The public API throttles each token to 100 requests a minute."
    prompt = "customers keep getting 429s from us"  # no word of it in the fact
    assert texts(agent.recall(prompt)) == []  # by their words: nothing, and no wait
    deadline = time.monotonic() + 30
    while (seen := daemon.call("daemon.status", {})).embedding.facts_pending:
        assert time.monotonic() < deadline, seen.embedding
        time.sleep(0.02)
    assert texts(agent.recall(prompt))[0] == throttle
    stored = read_index_vectors(directory / "index.sqlite3")
    assert stored is not None and stored.model == seen.embedding.model
    assert set(stored.by_text) == set(FACTS)
    index_written = (directory / "index.sqlite3").stat().st_mtime_ns
    daemon.restart()
    loaded_status(daemon)
    agent = Agent(daemon, workdir)
    assert texts(agent.recall(prompt))[0] == throttle  # from the index, at once
    assert daemon.call("daemon.status", {}).embedding.facts_pending == 0
    assert (directory / "index.sqlite3").stat().st_mtime_ns == index_written


def test_facts_of_a_project_no_recall_reaches_are_embedded_after_a_start(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """An upgrade embeds every project's facts in the background, not only those of projects
    recalled since: with no recall at all, the index of each gets its vectors, status counts
    them until then, and the first recall after ranks them by meaning at once."""
    daemon = start(orca_env, daemon_factory, '[recall]\nembedding = "none"\n')
    agents = [Agent(daemon, workdir), Agent(daemon, workdir.parent)]
    directories = [project_dir(orca_env, agent.project_id) for agent in agents]
    for directory in directories:
        add_facts(directory, FACTS)  # written without a model: the indexes hold no vector
    orca_env.write_config("[extraction]\nworkers = 0\n")  # the built-in model
    daemon.restart()
    deadline = time.monotonic() + 30
    while not all(
        (stored := read_index_vectors(directory / "index.sqlite3")) is not None
        and set(stored.by_text) == set(FACTS)
        for directory in directories
    ):
        assert time.monotonic() < deadline, daemon.call("daemon.status", {}).embedding
        time.sleep(0.05)
    assert daemon.call("daemon.status", {}).embedding.facts_pending == 0
    agent = Agent(daemon, workdir.parent)
    prompt = "customers keep getting 429s from us"  # no word of it in the fact
    assert texts(agent.recall(prompt))[0] == FACTS[3]


def test_status_says_how_many_records_and_facts_wait_for_a_vector() -> None:
    embedding = EmbeddingStatus(
        state="ready", setting="builtin", model="m-1", embedded=70, pending=3, facts_pending=128
    )
    assert describe_embedding(embedding) == (
        "m-1; 70 records embedded, 3 pending (embedding in the background); "
        "128 automatic facts pending (embedding in the background)"
    )
    pairing = EmbeddingStatus(
        state="ready", setting="builtin", model="m-1", embedded=73, corrections_pending=40
    )
    assert describe_embedding(pairing) == (
        "m-1; 73 records embedded; 40 records not yet paired with their corrections "
        "(in the background)"
    )
    done = EmbeddingStatus(state="ready", setting="builtin", model="m-1", embedded=73)
    assert describe_embedding(done) == "m-1; 73 records embedded"


def refusing_long_inputs(limit: int) -> Any:
    """An endpoint that refuses a request holding an input longer than `limit` characters, as
    llama.cpp's server does for a text longer than its batch ("input is too large")."""

    def respond(handler: Any, state: FakeOpenAI) -> None:
        if any(len(text) > limit for text in state.requests[-1].json()["input"]):
            status(400, "input is too large to process")(handler, state)
        else:
            answer_embeddings(handler, state)

    return respond


def test_a_record_the_endpoint_refuses_does_not_keep_the_others_from_their_vectors(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    long_record = "The staging cluster runbook:" + " drain the nodes one by one." * 20
    count = RECALL_BACKFILL_BATCH + 6  # short records: more than one batch
    with FakeOpenAI() as server:
        server.default = refusing_long_inputs(200)
        daemon = start(orca_env, daemon_factory, '[recall]\nembedding = "none"\n')
        agent = Agent(daemon, workdir)
        for n in range(count):
            agent.save(f"Service number {n} listens on port {7000 + n}.")
            if n == count - 3:  # among the newest: in the first batch the backfill sends
                agent.save(long_record)
        orca_env.write_config("[extraction]\nworkers = 0\n" + endpoint_config(server, 2.0))
        daemon.restart()
        # every record but the refused one gets its vector; that one stays pending
        seen = wait_for_progress(daemon, count, 1)
        assert any(
            error.kind == "embedding" and "refused 1 deliberate record" in error.message
            for error in seen.recent_errors
        ), seen.recent_errors
        time.sleep(1.5)  # three idle passes of the backfill

        def sent_long() -> int:
            return sum(long_record in r.json()["input"] for r in server.requests)

        assert sent_long() == 2  # in its batch, then alone: not again while it is refused
        result = Agent(daemon, workdir).recall("how do I drain the staging cluster nodes?")
        assert long_record in [entry.content for entry in result.deliberate]  # by its words
        assert sent_long() == 2  # recall did not send it either


@pytest.mark.parametrize(
    "failure",
    [status(400, "model 'embed-test' not found"), status(503, "loading the model")],
    ids=["refuses-everything", "down"],
)
def test_an_endpoint_that_fails_everything_sets_no_record_aside(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path, failure: Any
) -> None:
    """A server that refuses every request (a model name it does not know: the probe is
    refused too) or cannot answer is not taken for one that refuses some records: nothing is
    set aside, and every record is embedded as soon as it works."""
    with FakeOpenAI() as server:
        server.default = failure
        daemon = start(orca_env, daemon_factory, '[recall]\nembedding = "none"\n')
        agent = Agent(daemon, workdir)
        for n in range(4):
            agent.save(f"Service number {n} listens on port {7000 + n}.")
        orca_env.write_config("[extraction]\nworkers = 0\n" + endpoint_config(server, 2.0))
        daemon.restart()
        server.wait_for_requests(4)  # passes have failed meanwhile
        seen = wait_for_progress(daemon, 0, 4)
        assert not any("refused" in error.message for error in seen.recent_errors)
        server.default = answer_embeddings
        wait_for_backfill(daemon, 4)


def test_a_relative_model_directory_stops_orcad_at_start_naming_the_key(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    """Looked up from orcad's working directory, the model loaded when orcad was started by
    hand from the right place and not when orcactl started it (from `/`)."""
    model = orca_env.root / "models" / "mine"
    model.mkdir(parents=True)  # relative to the directory the daemon starts in below
    orca_env.write_config('[recall]\nembedding = "models/mine"\n')
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    process = daemon.spawn()
    assert process.wait(timeout=30) == 1
    assert "key `recall.embedding`: 'models/mine'" in daemon.stderr()
    assert "Traceback" not in daemon.stderr()


def test_a_model_that_cannot_load_leaves_recall_lexical_and_says_why(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-model"
    daemon = start(orca_env, daemon_factory, f'[recall]\nembedding = "{missing}"\n')
    status = loaded_status(daemon)
    assert status.embedding.state == "unavailable" and str(missing) in status.embedding.reason
    assert any(e.kind == "embedding" for e in status.recent_errors)
    agent = Agent(daemon, workdir)
    add_facts(project_dir(orca_env, agent.project_id), FACTS)
    agent.save("Deploys need two approvals.")
    result = agent.recall("deploys")
    assert texts(result) == ["This repository deploys with `make release`."]
    assert [d.content for d in result.deliberate] == ["Deploys need two approvals."]


def start_with_endpoint_key(
    orca_env: OrcaEnv, factory: list[DaemonProcess], server: FakeOpenAI, key: str
) -> DaemonProcess:
    """A daemon embedding through `server`, its key in ORCA_TEST_EMBED_KEY."""
    orca_env.extra_env["ORCA_TEST_EMBED_KEY"] = key
    config = endpoint_config(server, 2.0) + 'api_key_env = "ORCA_TEST_EMBED_KEY"\n'
    return start(orca_env, factory, config)


def test_an_endpoint_key_pasted_over_two_lines_is_refused_without_showing_it(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """No header can carry a line break; the HTTP library's error quotes the whole header, so
    the key was shown in daemon.status, and from there by `orcactl status` and `doctor`."""
    with FakeOpenAI() as server:
        server.default = answer_embeddings
        daemon = start_with_endpoint_key(orca_env, daemon_factory, server, "sk-pasted\nkey-0123")
        loaded_status(daemon)
        Agent(daemon, workdir).recall("how do we deploy")
        status = daemon.call("daemon.status", {})
        shown = [status.embedding.reason or "", *(e.message for e in status.recent_errors)]
        assert not any("key-0123" in text for text in shown), shown
        assert "key-0123" not in daemon.stderr()
        assert status.embedding.state == "unavailable"
        assert "ORCA_TEST_EMBED_KEY" in (status.embedding.reason or "")
        assert server.requests == []


def test_an_endpoint_key_read_with_its_line_end_is_sent_without_it(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """`export KEY="$(cat file)"` drops the line end, other ways of setting it do not."""
    with FakeOpenAI() as server:
        server.default = answer_embeddings
        daemon = start_with_endpoint_key(orca_env, daemon_factory, server, " sk-key-0123\n")
        assert loaded_status(daemon).embedding.state == "ready"
        Agent(daemon, workdir).recall("how do we deploy")
        request = server.wait_for_requests(1)[0]
        assert request.headers["authorization"] == "Bearer sk-key-0123"
        status = daemon.call("daemon.status", {})
        assert "key-0123" not in (status.embedding.reason or "")


def test_an_endpoint_base_url_with_a_query_leaves_recall_lexical_and_hides_it(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    """`{base_url}/embeddings` put the path in the query: every call went to the wrong place,
    and the query (often a token) was shown with each failure."""
    with FakeOpenAI() as server:
        server.default = answer_embeddings
        config = endpoint_config(server, 2.0).replace('/v1"', '/v1?api-key=tok-0123"')
        assert "tok-0123" in config
        daemon = start(orca_env, daemon_factory, config)
        status = loaded_status(daemon)
        Agent(daemon, workdir).recall("how do we deploy")
        assert status.embedding.state == "unavailable"
        assert "has a query or a fragment" in (status.embedding.reason or "")
        status = daemon.call("daemon.status", {})
        shown = [status.embedding.reason or "", *(e.message for e in status.recent_errors)]
        assert not any("tok-0123" in text for text in shown), shown
        assert server.requests == []


def test_an_endpoint_model_and_its_failure_within_the_deadline(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    with FakeOpenAI() as server:
        server.default = answer_embeddings
        daemon = start(orca_env, daemon_factory, endpoint_config(server, 0.5))
        assert loaded_status(daemon).embedding.model == "endpoint-embed-test"
        agent = Agent(daemon, workdir)
        add_embedded_facts(orca_env, agent, FACTS)  # (the backfill then has nothing to ask)
        result = agent.recall("make release deploys")
        assert "This repository deploys with `make release`." in texts(result)
        assert any(r.json()["model"] == "embed-test" for r in server.requests)
        server.default = stall_before_headers(5.0)
        started = time.monotonic()
        result = agent.recall("deploys")
        assert time.monotonic() - started < 3.0
        assert texts(result) == ["This repository deploys with `make release`."]  # lexical
        assert daemon.call("daemon.status", {}).embedding.reason is not None
        # the hung endpoint rests (one second, then two): the next recalls do not wait on it
        asked = len(server.requests)
        for number in range(5):
            result = agent.recall("deploys")
            assert texts(result) == ["This repository deploys with `make release`."]
            if not number:
                reason = daemon.call("daemon.status", {}).embedding.reason or ""
                assert "asked again in" in reason
        assert len(server.requests) <= asked + 1


def test_a_broken_memory_database_leaves_automatic_recall_working(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory)
    database = Path(daemon.call("daemon.status", {}).deliberate_db)
    daemon.stop()
    for sibling in database.parent.glob(database.name + "*"):
        sibling.unlink()
    database.write_bytes(b"this is not a database" * 100)
    daemon.start()
    agent = Agent(daemon, workdir)
    add_facts(project_dir(orca_env, agent.project_id), FACTS)
    result = agent.recall("how does this repository deploy a release?")
    assert texts(result)[0] == "This repository deploys with `make release`."
    assert result.deliberate == []
    assert any(
        e.kind in ("storage", "recall") for e in daemon.call("daemon.status", {}).recent_errors
    )


def test_published_facts_carry_their_vectors_into_the_index(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    daemon = start(orca_env, daemon_factory)  # no workers: the test publishes
    model = loaded_status(daemon).embedding.model
    session = daemon.call("session.open", {"cwd": str(workdir)})
    index = project_dir(orca_env, session.project.id) / "index.sqlite3"
    facts = ["The frontend uses pnpm, never npm or yarn.", "Releases are cut on Thursdays."]
    for number, fact in enumerate(facts):
        job_id = daemon.call("turn.completed", turn_params(session, f"t{number}")).job_id
        token = daemon.call("jobs.claim", {"worker": "w"}).lease.token
        publish = {"job_id": job_id, "token": token, "output": fact_output(fact)}
        publish |= {"provider": "x", "model": "y"}
        assert daemon.call("jobs.publish", publish).added == 1
    database = sqlite3.connect(index)
    try:
        (stored_model,) = database.execute(
            "SELECT value FROM meta WHERE key = 'vector_model'"
        ).fetchone()
        rows = database.execute(
            "SELECT c.fact, length(v.vector) FROM vectors AS v "
            "JOIN candidates AS c ON c.candidate_id = v.candidate_id"
        ).fetchall()
    finally:
        database.close()
    # the second publish rebuilt the index and kept the first fact's vector
    assert stored_model == model
    assert sorted(fact for fact, _size in rows) == sorted(facts)
    assert {size for _fact, size in rows} == {2 * 384}  # float16, the built-in model's 384 dims
    agent = Agent(daemon, workdir)
    assert texts(agent.recall("which package manager does the frontend use?"))[0] == facts[0]


def test_nothing_that_looks_like_a_secret_reaches_the_embedding_endpoint(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path
) -> None:
    token = "ghp_Zq8Lm2Np4Rt6Vx9Bc1Df3Gh5Jk7Mn0Pq2St4"
    with FakeOpenAI() as server:
        server.default = answer_embeddings
        daemon = start(orca_env, daemon_factory, endpoint_config(server, 2.0))
        session = daemon.call("session.open", {"cwd": str(workdir)})
        job_id = daemon.call("turn.completed", turn_params(session, "t1")).job_id
        token_of_lease = daemon.call("jobs.claim", {"worker": "w"}).lease.token
        output = fact_output(f"The CI token is {token}.", "Releases are cut on Thursdays.")
        publish = {"job_id": job_id, "token": token_of_lease, "output": output}
        published = daemon.call("jobs.publish", publish | {"provider": "x", "model": "y"})
        assert (published.added, published.rejected) == (1, 1)
        sent = [r.json()["input"] for r in server.requests if r.path.endswith("/embeddings")]
        assert ["Releases are cut on Thursdays."] in sent  # the clean fact was embedded
        agent = Agent(daemon, workdir)
        agent.recall(f"why does CI reject {token} when releases are cut?")
        prompts = [r.json()["input"] for r in server.requests if "why does CI" in r.body.decode()]
        assert prompts and "[REDACTED:" in prompts[0][0]  # the prompt went, redacted
        assert all(token not in r.body.decode() for r in server.requests)


def crafted_static_model(directory: Path, vectors: dict[str, tuple[float, ...]]) -> Path:
    """A static model whose tokens have the given vectors (any other token is [UNK], zero), so
    that a test sets each text's cosine with a prompt; gate and floor low, no classifier."""
    directory.mkdir()
    vocab = ["[UNK]", *vectors]
    rows = np.array([[0.0] * len(next(iter(vectors.values()))), *vectors.values()])
    peak = np.abs(rows).max(axis=1)
    scale = np.where(peak > 0, peak / 127, 1.0).astype(np.float32)
    codes = np.rint(rows / scale[:, None]).astype(np.int8)
    np.savez(directory / "vectors.npz", codes=codes, scale=scale)
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (directory / "MODEL.txt").write_text("id: crafted\nfloor: 0.5\ngate: 0.5\n")
    return directory


def test_a_fact_correcting_one_recalled_comes_along_however_far_from_the_prompt(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], workdir: Path, tmp_path: Path
) -> None:
    """Only the facts most relevant to the prompt are ranked (the 36 most relevant); a
    correction outside them is brought along with the fact it corrects, and shown in its
    place. Here the fact has a cosine of 1 with the prompt, forty others 0.989, and its
    correction 0.949."""
    names = [f"w{n:02}" for n in range(40)]
    along = (1.0, 0.0, 0.0)
    model = crafted_static_model(
        tmp_path / "crafted",
        {
            "probe": along,
            "alpha": along,
            "beta": along,
            "gamma": along,
            "delta": (0.0, 0.0, 1.0),
            "omega": (1.0, 0.0, 0.15),
            **dict.fromkeys(names, (1.0, 0.0, 0.15)),
        },
    )
    daemon = start(orca_env, daemon_factory, f'[recall]\nembedding = "{model}"\n')
    agent = Agent(daemon, workdir)
    old, new = "alpha beta gamma 100", "alpha beta gamma 120 delta"
    now = time.time()
    add_facts(
        project_dir(orca_env, agent.project_id),
        [old, *(f"omega {name}" for name in names)],
        now=now - 3600,
    )
    add_embedded_facts(orca_env, agent, [new], now=now)
    shown = texts(agent.recall("probe"))
    assert len(shown) == 6 and shown[0] == new and old not in shown, shown
