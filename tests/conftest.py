from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import DaemonProcess, OrcaEnv

# Every test module says which tier it is in (`pytestmark = pytest.mark.<tier>`); see README,
# Running the tests.
TIERS = ("pure", "inprocess", "daemon", "crash")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    untiered = sorted(
        {
            item.nodeid.split("::")[0]
            for item in items
            if not any(item.get_closest_marker(tier) for tier in TIERS)
        }
    )
    if untiered:
        raise pytest.UsageError(
            f"test modules without a tier marker ({', '.join(TIERS)}): {', '.join(untiered)}"
        )


@pytest.fixture
def orca_env(tmp_path: Path) -> OrcaEnv:
    """Isolated paths and environment variables for one daemon; no daemon is started."""
    return OrcaEnv(tmp_path)


@pytest.fixture
def daemon_factory(orca_env: OrcaEnv) -> Iterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for process in started:
        process.kill()


@pytest.fixture
def daemon(orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]) -> DaemonProcess:
    """A running orcad subprocess on a socket under tmp_path (killed at teardown)."""
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    return process.start()
