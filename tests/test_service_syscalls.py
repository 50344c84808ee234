"""orcad, and a provider command it runs, stay inside the service unit's sandbox.

A container has no user service manager to run the unit in, so the daemon runs under strace
while it serves sessions, deliberate and explicit memory, and extraction through the openai
provider (a real local HTTP server) and the command provider; every system call, socket
family, executable mapping and written path is then checked against what the unit allows.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orcactl import service_files
from protocol.client import Client, DaemonUnavailable
from tests.fake_openai import FakeOpenAI, ok
from tests.harness import OrcaEnv
from tests.test_provider_jobs import ANSWER, capture_turn, configure, wait_settled
from tests.test_service_units import read_unit

pytestmark = [pytest.mark.daemon, pytest.mark.slow]

UNIT = read_unit(service_files.reference_service_unit())["Service"]
_CALL = re.compile(r"^\d+\s+([a-z_0-9]+)\((.*)$")
# a quoted path, after the directory descriptor it is relative to when there is one (strace -y)
_PATH = re.compile(r'(?:\d+<([^>]*)>, )?"((?:[^"\\]|\\.)*)"')
_WRITES = ("O_WRONLY", "O_RDWR", "O_CREAT")
_PATH_CHANGES = {
    "mkdir", "mkdirat", "rename", "renameat", "renameat2", "unlink", "unlinkat", "rmdir",
    "symlink", "symlinkat", "link", "linkat", "chmod", "fchmodat", "truncate", "mknod",
}  # fmt: skip


def filter_groups() -> dict[str, list[str]]:
    """`systemd-analyze syscall-filter`: each @group with its calls and nested groups."""
    listing = subprocess.run(
        ["systemd-analyze", "syscall-filter", "--no-pager"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    groups: dict[str, list[str]] = {}
    current = None
    for line in listing.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.split()[0], [])
        elif current is not None and line.strip() and not line.strip().startswith("#"):
            current.append(line.split()[0])
    return groups


def expand(name: str, groups: dict[str, list[str]]) -> set[str]:
    if not name.startswith("@"):
        return {name}
    return set().union(*(expand(item, groups) for item in groups[name]))


def allowed_calls() -> set[str]:
    """The unit's SystemCallFilter= lines, applied in order (allow list, then ~ removals)."""
    groups = filter_groups()
    allowed: set[str] = set()
    for line in service_files.reference_service_unit().splitlines():
        if not line.startswith("SystemCallFilter="):
            continue
        value = line.partition("=")[2]
        names = set().union(*(expand(n, groups) for n in value.removeprefix("~").split()))
        allowed = allowed - names if value.startswith("~") else allowed | names
    return allowed


@pytest.fixture
def traced(orca_env: OrcaEnv, tmp_path: Path) -> Iterator[tuple[OrcaEnv, Path]]:
    if sys.platform != "linux":
        pytest.skip("the systemd sandbox is Linux's")
    for tool in ("strace", "systemd-analyze"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: apt-get install -y strace systemd")
    yield orca_env, tmp_path / "trace"


def run_traced(orca_env: OrcaEnv, trace: Path, work: object) -> list[str]:
    """Run orcad under strace (following children), do `work`, stop it; the trace's lines."""
    process = subprocess.Popen(
        ["strace", "-f", "-qq", "-y", "-s", "256", "-o", str(trace), sys.executable, "-m", "orcad"],
        env=orca_env.env, cwd=orca_env.root,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    pid = None
    try:
        deadline = time.monotonic() + 60
        while pid is None:
            try:
                with Client(str(orca_env.socket), timeout=10) as client:
                    pid = client.call("daemon.ping").pid
            except (DaemonUnavailable, ConnectionError):
                assert process.poll() is None and time.monotonic() < deadline, "no start"
                time.sleep(0.1)
        work()  # type: ignore[operator]
    finally:
        if pid is not None:  # strace holds off signals sent to itself; the daemon stops
            os.kill(pid, signal.SIGTERM)
        else:
            process.kill()
        process.wait(timeout=60)
    return trace.read_text(errors="replace").splitlines()


def serve_everything(orca_env: OrcaEnv, project: Path) -> None:
    with Client(str(orca_env.socket), timeout=30) as client:
        project.mkdir(parents=True, exist_ok=True)
        opened = client.call("session.open", {"cwd": str(project), "auto_approve": True})
        ids = {"session_id": opened.session_id, "epoch": opened.epoch}
        client.call("remember", {**ids, "text": "we release on Fridays", "scope": "project"})
        client.call(
            "memory.manage",
            {**ids, "action": "save", "content": "tabs, not spaces", "kind": "preference",
             "is_global": True},
        )  # fmt: skip
        client.call("memory.search", {**ids, "query": "tabs"})
        client.call("recall", {**ids, "turn_id": "r1", "prompt": "how do we release?"})
        client.call("session.close", ids)


class _Daemon:
    """What capture_turn needs: `call` on the traced daemon."""

    def __init__(self, orca_env: OrcaEnv) -> None:
        self.orca = orca_env

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        with Client(str(self.orca.socket), timeout=30) as client:
            return client.call(method, params)


def extract_once(orca_env: OrcaEnv, project: Path) -> None:
    serve_everything(orca_env, project)
    job_id = capture_turn(_Daemon(orca_env), project, "we deploy with make release")  # type: ignore[arg-type]
    assert wait_settled(orca_env, job_id)["state"] == "committed"


def check_trace(lines: list[str], orca_env: OrcaEnv) -> None:
    allowed = allowed_calls()
    if os.geteuid() == 0:  # SQLite chowns its files to the owner only when run as root
        allowed |= {"fchown"}
    used = {m.group(1) for m in map(_CALL.match, lines) if m}
    assert used, lines[:5]
    assert used <= allowed, f"outside SystemCallFilter=: {sorted(used - allowed)}"

    families = set(UNIT["RestrictAddressFamilies"].split())
    opened = {f.group(1) for f in re.finditer(r"socket\((AF_[A-Z0-9]+)", "\n".join(lines))}
    assert opened <= families, f"outside RestrictAddressFamilies=: {opened - families}"

    # MemoryDenyWriteExecute=: no mapping both writable and executable, none made executable
    for match in map(_CALL.match, lines):
        if match is not None and match.group(1) in ("mmap", "mprotect", "pkey_mprotect"):
            call, rest = match.groups()
            assert not ("PROT_WRITE" in rest and "PROT_EXEC" in rest), (call, rest)
            assert call == "mmap" or "PROT_EXEC" not in rest, (call, rest)

    # ProtectSystem=strict + PrivateTmp=: writes go to orcad's directories, /tmp or /dev
    writable = [orca_env.home, orca_env.config_dir, orca_env.socket.parent]
    writable += [Path("/tmp"), Path("/var/tmp"), Path("/dev")]
    for match in map(_CALL.match, lines):
        if match is None:
            continue
        call, rest = match.groups()
        writes = call in ("open", "openat", "creat") and any(f in rest for f in _WRITES)
        if not (writes or call in _PATH_CHANGES) or "= -1" in rest:
            continue
        for directory, raw in _PATH.findall(rest):
            path = Path(os.path.normpath(Path(directory or orca_env.root) / raw))
            if path.is_relative_to("/proc/self/fd"):  # linking an O_TMPFILE file into place
                continue
            # the test's own directory is under /tmp: inside it only orcad's directories count
            shared_tmp = not path.is_relative_to(orca_env.root)
            allowed_here = writable if shared_tmp else writable[:3]
            assert any(path.is_relative_to(root) for root in allowed_here), f"writes {path}"


def test_orcad_and_the_openai_provider_stay_in_the_sandbox(
    traced: tuple[OrcaEnv, Path],
) -> None:
    orca_env, trace = traced
    with FakeOpenAI() as server:
        server.default = ok(ANSWER)
        configure(orca_env, server)
        lines = run_traced(orca_env, trace, lambda: extract_once(orca_env, orca_env.root / "p"))
    assert any("socket(AF_INET" in line for line in lines)  # the check below saw the HTTP call
    check_trace(lines, orca_env)


def test_a_provider_command_stays_in_the_sandbox(traced: tuple[OrcaEnv, Path]) -> None:
    orca_env, trace = traced
    script = orca_env.root / "extract.py"
    script.write_text(f"import sys\nsys.stdin.read()\nprint({ANSWER!r})\n")
    argv = f'["{sys.executable}", "{script}"]'
    orca_env.write_config(
        f'[extraction]\nprovider = "command"\n[extraction.command]\nargv = {argv}\n'
    )
    lines = run_traced(orca_env, trace, lambda: extract_once(orca_env, orca_env.root / "p"))
    assert any(
        f'execve("{sys.executable}", ["{sys.executable}", "{script}"' in line for line in lines
    )
    check_trace(lines, orca_env)
