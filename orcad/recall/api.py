"""Recall and explicit facts as daemon methods: `recall`, `remember`, and the startup context.

`install(host, capture=..., deliberate=..., embeddings=...)` is given the automatic memory
(the capture feature's project directories, locks and job barrier), the deliberate-memory
service and the embedding model (`embeddings_of`, made first because capture embeds the facts
it publishes) explicitly; it routes the two methods, starts the model's load and the backfill,
and returns the parts the composition root connects: the snapshots (purged when memory is
forgotten), the startup reader and the embedding status.
The work is done elsewhere: the turn's recall in orcad.recall.service, its two searches in
orcad.recall.automatic and orcad.recall.deliberate, `remember` and startup in
orcad.recall.explicit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
import trio

from orcad.capture.service import CaptureService
from orcad.deliberate.service import DeliberateMemory
from orcad.deliberate.vectors import VectorMatrix
from orcad.errors import StorageError
from orcad.host import BackgroundTask, Host
from orcad.limits import RECALL_MODEL_LOAD_DELAY_S
from orcad.recall.automatic import ProjectMemorySearch
from orcad.recall.deliberate import Backfill, DeliberateRecall, RefusedTexts
from orcad.recall.embedding import Embeddings
from orcad.recall.explicit import ExplicitFacts
from orcad.recall.service import RecallService
from orcad.recall.snapshots import SnapshotStore

log = structlog.get_logger("orcad.recall")


def embeddings_of(host: Host) -> Embeddings:
    """The configured model, not loaded yet (`model_loader` loads it once the daemon serves)."""
    return Embeddings.configured(host.config.recall)


def model_loader(host: Host, embeddings: Embeddings, backfill: Backfill) -> BackgroundTask:
    """The background task that loads the model off the start-up path (its arrays and
    vocabulary take about a third as long as the rest of the start), says how it went, and
    then runs the backfill for as long as the daemon does."""
    reported = False

    async def load_then_backfill(
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        nonlocal reported
        task_status.started()
        await trio.sleep(RECALL_MODEL_LOAD_DELAY_S)  # a recall before then loads it itself
        await trio.to_thread.run_sync(embeddings.load_blocking)
        if not reported:
            reported = True
            if embeddings.state == "unavailable":
                log.warning("recall.embedding_unavailable", reason=embeddings.reason)
                host.record_error("embedding", f"recall is lexical only: {embeddings.reason}")
            else:
                log.info(
                    "recall.embedding_loaded",
                    model=embeddings.loaded_model_id,
                    setting=embeddings.setting,
                )
            backfill.announced = True
        if embeddings.state == "ready":
            await backfill.run()
        else:
            await trio.sleep_forever()  # lexical recall; nothing to embed

    return load_then_backfill


def replaced_database_check(
    deliberate: DeliberateMemory, snapshots: SnapshotStore
) -> Callable[[], Awaitable[None]]:
    """The check recall makes first: when the deliberate database at its path is not the file
    the last recall saw (deleted, moved or replaced), the file now there is opened and every
    snapshot holding a record is dropped, since deleting the file deletes its records (README:
    Deliberate memory). A stat per recall; its turn then gets a fresh recall."""
    store = deliberate.store
    seen = [store.file_identity()]  # the file opened at start

    async def forget_replaced_database() -> None:
        if store.file_identity() == seen[0]:
            return
        try:
            await store.open_current_file()
        except StorageError as exc:  # the search says so too; the snapshots go regardless
            log.warning("recall.deliberate_reopen_failed", error=exc.message)
        seen[0] = store.file_identity()
        dropped = await snapshots.purge_deliberate_records()
        log.info("recall.deliberate_database_replaced", snapshots=dropped)

    return forget_replaced_database


@dataclass(frozen=True)
class RecallFeature:
    """What the composition root connects after installing recall."""

    service: RecallService
    snapshots: SnapshotStore
    explicit: ExplicitFacts
    backfill: Backfill


def install(
    host: Host,
    *,
    capture: CaptureService,
    deliberate: DeliberateMemory,
    embeddings: Embeddings,
) -> RecallFeature:
    snapshots = SnapshotStore(host.paths.state_db)
    snapshots.on_write_failed = lambda message: host.record_error("storage", message)
    host.share_state_db(snapshots.forget_database)

    async def recover_state_db(problem: str) -> None:
        await trio.to_thread.run_sync(host.recover_state_db, problem)

    snapshots.on_corrupt = recover_state_db
    vectors_in_memory: list[VectorMatrix | None] = [None]  # recall's, read by the backfill
    refused = RefusedTexts()  # what the model would not embed: neither sends it again soon
    projects = capture.projects
    automatic = ProjectMemorySearch(
        projects.project_dir,
        host.record_error,
        embeddings=embeddings,
        list_projects=projects.list_project_ids,
    )
    backfill = Backfill(
        deliberate,
        embeddings,
        vectors_in_memory,
        record_error=host.record_error,
        refused=refused,
        facts=automatic.backfill,
    )

    def active_jobs() -> int:
        """Queued and running extraction jobs of every session."""
        counts = capture.index.job_counts()
        return counts.pending + counts.leased

    service = RecallService(
        sessions=host.sessions,
        clock=host.clock,
        snapshots=snapshots,
        automatic=automatic,
        deliberate=DeliberateRecall(deliberate, embeddings, vectors_in_memory, refused),
        jobs=capture,
        active_jobs=active_jobs,
        embeddings=embeddings,
        record_error=host.record_error,
    )
    service.forget_replaced_database = replaced_database_check(deliberate, snapshots)
    if embeddings.setting != "none":
        host.run_in_background(model_loader(host, embeddings, backfill))
    explicit = ExplicitFacts(host, projects)
    host.router.add("recall", service.recall)
    host.router.add("remember", explicit.remember)
    host.run_in_background(snapshots.run_writer)
    host.close_at_exit(snapshots.aclose)
    return RecallFeature(service=service, snapshots=snapshots, explicit=explicit, backfill=backfill)
