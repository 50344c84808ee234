"""orcad under an address space limit (`ulimit -v`, RLIMIT_AS) too low for the built-in model:
it serves, says why recall is lexical, and stops cleanly."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

MIB = 1024 * 1024


def _mapped_bytes(pid: int) -> int:
    """The address space the process has mapped (VmSize)."""
    status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    line = next(line for line in status.splitlines() if line.startswith("VmSize:"))
    return int(line.split()[1]) * 1024


def _spawn_limited(orca_env: OrcaEnv, address_space: int) -> DaemonProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    daemon = DaemonProcess(orca_env)
    with open(daemon.stderr_path, "ab") as stderr:
        daemon.proc = subprocess.Popen(
            [sys.executable, "-m", "orcad"],
            env=orca_env.env,
            cwd=orca_env.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=limit,  # noqa: PLW1509
        )
    return daemon


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
@pytest.mark.parametrize("room_mib", [32, 48])
def test_a_limit_too_low_for_the_model_leaves_recall_lexical_and_says_so(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], room_mib: int
) -> None:
    # with this little room beyond what orcad maps without a model, importing onnxruntime
    # now and then failed with std::bad_alloc, reported as "reinstall orcad", or aborted the
    # whole daemon (SIGABRT: "libgcc_s.so.1 must be installed for unwinding to work", or a
    # double free); it is refused before the import, saying why.
    # One malloc arena, so that what is mapped is what is used: the arena glibc reserves for
    # each thread (64 MiB apiece) would count, yet under the limit it is simply not made
    orca_env.extra_env["MALLOC_ARENA_MAX"] = "1"
    orca_env.write_config('[recall]\nembedding = "none"\n')
    without_model = DaemonProcess(orca_env)
    daemon_factory.append(without_model)
    assert without_model.start().proc is not None
    without_model.call("daemon.status")  # answered once its features are in, its threads up
    time.sleep(1)
    baseline = _mapped_bytes(without_model.proc.pid)
    assert without_model.stop() == 0
    orca_env.write_config('[recall]\nembedding = "builtin"\n')

    daemon = _spawn_limited(orca_env, baseline + room_mib * MIB)
    daemon_factory.append(daemon)
    daemon.wait_ready()
    deadline = time.monotonic() + 30
    embedding = daemon.call("daemon.status").embedding
    while embedding.state == "loading" and time.monotonic() < deadline:
        time.sleep(0.1)
        embedding = daemon.call("daemon.status").embedding
    assert embedding.state == "unavailable", embedding
    reason = embedding.reason or ""
    assert "address space limit" in reason and "ulimit -v" in reason, reason
    assert "reinstall" not in reason, reason
    assert daemon.proc is not None
    assert daemon.call("daemon.ping").pid == daemon.proc.pid
    assert daemon.stop() == 0
    assert not orca_env.socket.exists()
