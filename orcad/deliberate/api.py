"""Deliberate memory as daemon methods: memory.search, memory.manage, memory.approve, and the
grants methods.

`install(host)` opens the store, routes the methods to the service (orcad.deliberate.service),
starts the purger, adds a closer and returns the `DeliberateMemory` service, which the
composition root hands to recall.
"""

from __future__ import annotations

import structlog
import trio

from orcad.deliberate.grants import GrantsService
from orcad.deliberate.service import DeliberateMemory
from orcad.deliberate.store import DeliberateStore
from orcad.host import Host

log = structlog.get_logger("orcad.deliberate")


def _report_damage(host: Host, message: str) -> None:
    log.error("memory.damaged", path=str(host.paths.deliberate_db))
    host.record_error("memory_db_corrupt", message)


def install(host: Host) -> DeliberateMemory:
    """The deliberate-memory service, its routes, its purger and its closer. `purge_copies`
    is left for the composition root to connect (to recall's snapshots)."""
    store = DeliberateStore(host.paths.deliberate_db)
    store.on_damage = lambda message: _report_damage(host, message)
    store.on_reopened = lambda message: host.record_error("database_reopened", message)
    # nothing is wrong any more: recorded so that doctor can say what orcad mended
    store.on_index_rebuilt = lambda message: host.record_error("memory_index_rebuilt", message)
    try:
        store.open_blocking()
    except Exception as exc:  # memory.* then answer -32017; the daemon serves everything else
        log.error("memory.open_failed", path=str(host.paths.deliberate_db), error=str(exc))
        host.record_error("storage", f"memory database {host.paths.deliberate_db}: {exc}")
    service = DeliberateMemory(store, host.clock, host.sessions)
    host.router.add("memory.search", service.search)
    host.router.add("memory.manage", service.manage)
    host.router.add("memory.approve", service.approve)
    grants = GrantsService(service, host.sessions)
    host.router.add("grants.list", grants.list)
    host.router.add("grants.revoke", grants.revoke)

    async def close() -> None:
        with trio.CancelScope(shield=True):
            await service.purge_now()
        await trio.to_thread.run_sync(store.close)

    host.run_in_background(service.run_purger)
    host.close_at_exit(close)
    return service
