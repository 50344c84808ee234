"""An in-process daemon (real SQLite files, real dispatch, injected clock) for deliberate tests."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import msgspec
import trio

from orcad.app import Daemon, build_daemon
from orcad.config import Config, LoadedConfig
from orcad.deliberate.queries import StoredRecord
from orcad.paths import resolve_paths
from orcad.rpc import Dispatcher
from protocol.errors import ErrorObject, RemoteError

_ids = itertools.count(1)


def numbered_record(n: int, content: str, workspace: str | None = "ws1") -> StoredRecord:
    """Record number `n` (its id and its times made from `n`), as the store would keep it."""
    return StoredRecord(
        id=f"mem_{n:032x}",
        kind="fact",
        content=content,
        workspace_id=workspace,
        workspace_root="/w",
        created_at=float(n),
        updated_at=float(n),
    )


class SettableClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.value = start
        self.elapsed = 0.0  # the monotonic clock

    def now(self) -> float:
        return self.value

    def monotonic(self) -> float:
        return self.elapsed

    def advance(self, seconds: float) -> None:
        """Time passes: both clocks move."""
        self.value += seconds
        self.elapsed += seconds

    def set_wall(self, seconds: float) -> None:
        """The wall clock is set `seconds` forward (back if negative); no time passes."""
        self.value += seconds


class InProcessDaemon:
    """Requests go through the same JSON-RPC dispatcher the socket server uses."""

    def __init__(self, root: Path, clock: SettableClock, config: Config | None = None) -> None:
        self.root = root
        self.clock = clock
        env = {
            "ORCA_HOME": str(root / "home"),
            "ORCA_CONFIG_DIR": str(root / "config"),
            "ORCA_SOCKET": str(root / "run" / "orcad.sock"),
            "HOME": str(root / "user-home"),
        }
        self.paths = resolve_paths(env)
        self.daemon: Daemon
        self.daemon, self.features = build_daemon(
            self.paths, LoadedConfig(config=config or Config(), path=None, unknown_keys=[]), clock
        )
        self.dispatcher = Dispatcher(self.daemon.router)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
        line = await self.dispatcher.handle_line(msgspec.json.encode(request))
        assert line is not None
        answer = msgspec.json.decode(line)
        if "error" in answer:
            raise RemoteError(msgspec.convert(answer["error"], ErrorObject))
        result: dict[str, Any] = answer["result"]
        return result

    async def open(self, cwd: Path, **options: Any) -> dict[str, Any]:
        await trio.Path(cwd).mkdir(parents=True, exist_ok=True)
        opened = await self.call("session.open", {"cwd": str(cwd), **options})
        return {"session_id": opened["session_id"], "epoch": opened["epoch"]}

    async def aclose(self) -> None:
        await self.daemon.aclose()
