"""The service definitions (systemd units, launchd plist) and `orcactl service`.

systemctl is replaced by a recording stand-in on PATH: a container has no user service manager,
and what matters here is which commands orcactl runs, in which order, and that a second run
changes nothing.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import plistlib
import resource
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from orcactl import service_files
from orcactl.commands.service import find_orcad
from orcad import activation
from tests.harness import REPO_ROOT, DaemonProcess, OrcaEnv

pytestmark = pytest.mark.daemon

# The installed `orcad` script beside this interpreter when there is one (a pip install),
# else `python -m orcad` (a source checkout): what `service install` must write.
EXPECTED_ORCAD, EXPECTED_ENVIRONMENT = find_orcad(None)

FAKE_SYSTEMCTL = """\
#!{python}
import json, os, sys
state_path = os.environ["FAKE_SYSTEMCTL_STATE"]
with open(os.environ["FAKE_SYSTEMCTL_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
state = {{"enabled": [], "active": []}}
if os.path.exists(state_path):
    with open(state_path) as f:
        state = json.load(f)
args = sys.argv[1:]
assert args[0] == "--user", args
command, units = args[1], [a for a in args[2:] if not a.startswith("--")]
status = 0
if command == "show-environment":
    print("HOME=/nowhere")
elif command in ("is-enabled", "is-active"):
    key = "enabled" if command == "is-enabled" else "active"
    yes, no = (key, "disabled" if key == "enabled" else "inactive")
    for unit in units:
        print(yes if unit in state[key] else no)
    status = 0 if all(unit in state[key] for unit in units) else (1 if key == "enabled" else 3)
elif command == "enable":
    state["enabled"] = sorted(set(state["enabled"]) | set(units))
    if "--now" in args:
        state["active"] = sorted(set(state["active"]) | set(units))
elif command == "disable":
    state["enabled"] = sorted(set(state["enabled"]) - set(units))
    if "--now" in args:
        state["active"] = sorted(set(state["active"]) - set(units))
elif command in ("start", "restart"):
    state["active"] = sorted(set(state["active"]) | set(units))
elif command != "daemon-reload":
    sys.exit(f"unexpected systemctl command {{args}}")
with open(state_path, "w") as f:
    json.dump(state, f)
sys.exit(status)
"""


def read_unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def systemd_analyze_verify(
    units: list[Path], home: Path, runtime: Path
) -> subprocess.CompletedProcess[str]:
    if shutil.which("systemd-analyze") is None:
        if sys.platform == "darwin":
            pytest.skip("systemd units are checked on Linux")
        pytest.fail("systemd-analyze is missing: apt-get install -y systemd")
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = dict(os.environ, HOME=str(home), XDG_RUNTIME_DIR=str(runtime))
    return subprocess.run(
        ["systemd-analyze", "--user", "verify", *map(str, units)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --- the checked-in files -------------------------------------------------------------------


def test_checked_in_files_are_the_renderings() -> None:
    systemd, launchd = REPO_ROOT / "systemd", REPO_ROOT / "launchd"
    assert (systemd / "orcad.socket").read_text() == service_files.systemd_socket_unit()
    assert (systemd / "orcad.service").read_text() == service_files.reference_service_unit()
    assert (launchd / "dev.orca.orcad.plist").read_bytes() == service_files.reference_plist()


def test_socket_unit_is_private_and_where_clients_look() -> None:
    unit = read_unit((REPO_ROOT / "systemd" / "orcad.socket").read_text())
    assert unit["Socket"]["ListenStream"] == "%t/orca/orcad.sock"  # in $XDG_RUNTIME_DIR
    assert unit["Socket"]["SocketMode"] == "0600"
    assert unit["Socket"]["DirectoryMode"] == "0700"


def test_service_unit_notifies_and_restarts_on_failure() -> None:
    unit = read_unit((REPO_ROOT / "systemd" / "orcad.service").read_text())
    assert unit["Service"]["Type"] == "notify"
    assert unit["Service"]["Restart"] == "on-failure"
    assert unit["Service"]["ExecStart"].endswith("/orcad")
    assert unit["Unit"]["Requires"] == "orcad.socket"


def test_plist_parses_and_has_the_agent_keys() -> None:
    agent = plistlib.loads((REPO_ROOT / "launchd" / "dev.orca.orcad.plist").read_bytes())
    assert agent["Label"] == service_files.LAUNCHD_LABEL
    assert agent["ProgramArguments"][0].startswith("/")
    assert agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    listeners = agent["Sockets"][activation.LAUNCHD_SOCKET_NAME]
    assert listeners["SockPathMode"] == 0o600
    assert listeners["SockType"] == "stream"
    assert listeners["SockFamily"] == "Unix"
    assert agent["EnvironmentVariables"]["ORCA_SOCKET"] == listeners["SockPathName"]


def test_systemd_analyze_verifies_the_checked_in_units(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "orcad").symlink_to(sys.executable)  # %h/.local/bin/orcad exists
    result = systemd_analyze_verify(
        [REPO_ROOT / "systemd" / "orcad.socket", REPO_ROOT / "systemd" / "orcad.service"],
        home,
        tmp_path / "runtime",
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_systemd_analyze_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a unit naming a missing program or an unknown key does."""
    broken = tmp_path / "orcad.service"
    text = service_files.systemd_service_unit("/nonexistent/orcad").replace(
        "Type=notify", "Type=notify\nRestartSteps=often"
    )
    broken.write_text(text)
    result = systemd_analyze_verify([broken], tmp_path, tmp_path / "runtime")
    assert "RestartSteps" in result.stderr or "nonexistent" in result.stderr


def test_quoting_keeps_paths_literal() -> None:
    assert service_files.systemd_exec_line(["/opt/my tools/orcad", "50%", "$HOME"]) == (
        '"/opt/my tools/orcad" 50%% $$HOME'
    )


# --- orcactl service ------------------------------------------------------------------------


class ServiceCli:
    def __init__(self, orca: OrcaEnv, *, fake_systemctl: bool) -> None:
        self.orca = orca
        self.bin = orca.root / "fakebin"
        self.bin.mkdir(exist_ok=True)
        self.log = orca.root / "systemctl.log"
        if fake_systemctl:
            script = self.bin / "systemctl"
            script.write_text(FAKE_SYSTEMCTL.format(python=sys.executable))
            script.chmod(0o755)
        env = dict(orca.env)
        env.pop("ORCA_SOCKET")  # clients and systemd agree on $XDG_RUNTIME_DIR/orca/orcad.sock
        env["PATH"] = f"{self.bin}:/usr/bin:/bin"
        env["FAKE_SYSTEMCTL_STATE"] = str(orca.root / "systemctl.json")
        env["FAKE_SYSTEMCTL_LOG"] = str(self.log)
        self.env = env

    @property
    def unit_dir(self) -> Path:
        return Path(self.env["XDG_CONFIG_HOME"]) / "systemd" / "user"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orcactl", "service", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def systemctl_calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        self.log.unlink()
        queries = ("show-environment", "is-enabled", "is-active")
        return [call for call in calls if call[1] not in queries]


def test_install_dry_run_prints_the_units_and_changes_nothing(orca_env: OrcaEnv) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    result = cli.run("install", "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"would write {cli.unit_dir / 'orcad.socket'}:" in lines
    assert f"would write {cli.unit_dir / 'orcad.service'}:" in lines
    assert "    ListenStream=%t/orca/orcad.sock" in lines
    assert f"    ExecStart={' '.join(EXPECTED_ORCAD)}" in lines
    assert "would run: systemctl --user daemon-reload" in lines
    assert "would run: systemctl --user enable orcad.socket orcad.service" in lines
    assert "would run: systemctl --user start orcad.socket orcad.service" in lines
    assert not cli.unit_dir.exists()
    assert cli.systemctl_calls() == []


def test_install_is_idempotent_and_uninstall_undoes_it(orca_env: OrcaEnv, tmp_path: Path) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    first = cli.run("install")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        f"wrote {cli.unit_dir / 'orcad.socket'}",
        f"wrote {cli.unit_dir / 'orcad.service'}",
        "ran: systemctl --user daemon-reload",
        "ran: systemctl --user enable orcad.socket orcad.service",
        "ran: systemctl --user start orcad.socket orcad.service",
    ]
    assert cli.systemctl_calls() == [
        ["--user", "daemon-reload"],
        ["--user", "enable", "orcad.socket", "orcad.service"],
        ["--user", "start", "orcad.socket", "orcad.service"],
    ]
    service = (cli.unit_dir / "orcad.service").read_text()
    assert f"ExecStart={' '.join(EXPECTED_ORCAD)}\n" in service
    # A source checkout needs the repository on PYTHONPATH; an installed orcad needs nothing.
    assert EXPECTED_ENVIRONMENT in ({"PYTHONPATH": str(REPO_ROOT)}, {})
    for name, value in EXPECTED_ENVIRONMENT.items():
        assert f"Environment={name}={value}\n" in service
    if not EXPECTED_ENVIRONMENT:
        assert "Environment=PYTHONPATH" not in service

    # The units as installed pass systemd's own check (absolute interpreter path and all).
    verify = systemd_analyze_verify(
        [cli.unit_dir / "orcad.socket", cli.unit_dir / "orcad.service"], tmp_path, tmp_path / "rt"
    )
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, "")

    again = cli.run("install", "--json")
    steps = json.loads(again.stdout)["steps"]
    assert [step["action"] for step in steps] == ["unchanged"] * 4
    assert cli.systemctl_calls() == []

    status = cli.run("status", "--json")
    report = json.loads(status.stdout)
    assert status.returncode == 0
    assert set(report["files"].values()) == {"current"}
    assert report["units"]["orcad.socket"] == {"enabled": "enabled", "active": "active"}

    removed = cli.run("uninstall")
    assert removed.returncode == 0, removed.stderr
    assert cli.systemctl_calls() == [
        ["--user", "disable", "--now", "orcad.service", "orcad.socket"],
        ["--user", "daemon-reload"],
    ]
    assert not (cli.unit_dir / "orcad.socket").exists()
    assert not (cli.unit_dir / "orcad.service").exists()
    assert "already absent" in cli.run("uninstall").stdout
    assert cli.systemctl_calls() == []


def test_changed_units_are_rewritten_and_the_service_restarted(orca_env: OrcaEnv) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    assert cli.run("install").returncode == 0
    cli.systemctl_calls()
    other = orca_env.root / "opt" / "orca" / "bin" / "orcad"
    other.parent.mkdir(parents=True)
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    result = cli.run("install", "--orcad", str(other))
    assert result.returncode == 0, result.stderr
    assert f"ExecStart={other}\n" in (cli.unit_dir / "orcad.service").read_text()
    assert cli.systemctl_calls() == [
        ["--user", "daemon-reload"],
        ["--user", "restart", "orcad.service"],
    ]
    status = cli.run("status")
    assert status.returncode == 1  # the service file now differs from what install would write
    assert "differs from what `orcactl service install` writes now" in status.stdout


def test_without_a_user_manager_units_are_written_and_the_next_step_named(
    orca_env: OrcaEnv,
) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=False)
    result = cli.run("install")
    assert result.returncode == 0, result.stderr
    assert (cli.unit_dir / "orcad.socket").exists()
    assert result.stdout.splitlines()[-1] == (
        "note: systemctl --user cannot reach a user service manager, so the units are not "
        "enabled; in a session that has one, run: "
        "systemctl --user enable --now orcad.socket orcad.service"
    )


def test_launchd_status_without_launchctl_judges_only_the_files(orca_env: OrcaEnv) -> None:
    # as for systemd without a user manager: what cannot be asked is not reported as unloaded
    cli = ServiceCli(orca_env, fake_systemctl=False)  # PATH has no launchctl either
    assert cli.run("install", "--manager", "launchd").returncode == 0
    status = cli.run("status", "--manager", "launchd")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "launchctl: not found" in status.stdout and "False" not in status.stdout
    report = json.loads(cli.run("status", "--manager", "launchd", "--json").stdout)
    assert (report["units"], report["healthy"]) == (None, True)
    assert cli.run("uninstall", "--manager", "launchd").returncode == 0
    assert cli.run("status", "--manager", "launchd").returncode == 1  # the plist is missing


def test_install_does_not_start_over_a_daemon_running_outside_systemd(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    systemd_socket = orca_env.root / "xdg-runtime" / "orca" / "orcad.sock"
    systemd_socket.parent.mkdir(mode=0o700)
    orca_env.extra_env["ORCA_SOCKET"] = str(systemd_socket)
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    process.start()
    assert process.proc is not None
    del orca_env.extra_env["ORCA_SOCKET"]
    cli = ServiceCli(orca_env, fake_systemctl=True)
    result = cli.run("install")
    assert result.returncode == 0, result.stderr
    assert f"orcad pid {process.proc.pid} already serves {systemd_socket}" in result.stdout
    assert cli.systemctl_calls() == [
        ["--user", "daemon-reload"],
        ["--user", "enable", "orcad.socket", "orcad.service"],
    ]


def test_launchd_dry_run_renders_a_plist_for_this_user(orca_env: OrcaEnv) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=False)
    result = cli.run("install", "--manager", "launchd", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    steps: list[dict[str, Any]] = json.loads(result.stdout)["steps"]
    plist_path = Path(cli.env["HOME"]) / "Library" / "LaunchAgents" / "dev.orca.orcad.plist"
    assert steps[0]["action"] == "would_write"
    assert steps[0]["path"] == str(plist_path)
    agent = plistlib.loads(steps[0]["content"].encode())
    assert agent["ProgramArguments"] == EXPECTED_ORCAD
    expected_socket = orca_env.root / "xdg-runtime" / "orca" / "orcad.sock"
    assert agent["Sockets"]["Listeners"]["SockPathName"] == str(expected_socket)
    assert not plist_path.exists()


def test_launchd_gets_a_relative_orca_socket_as_an_absolute_path(orca_env: OrcaEnv) -> None:
    # launchd resolves nothing against the directory install ran in
    cli = ServiceCli(orca_env, fake_systemctl=False)
    cli.env["ORCA_SOCKET"] = "run/orcad.sock"
    result = cli.run("install", "--manager", "launchd", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    agent = plistlib.loads(json.loads(result.stdout)["steps"][0]["content"].encode())
    expected = str(Path.cwd() / "run" / "orcad.sock")  # where orcactl ran
    assert agent["Sockets"]["Listeners"]["SockPathName"] == expected
    assert agent["EnvironmentVariables"]["ORCA_SOCKET"] == expected


@pytest.mark.parametrize("manager", ["systemd", "launchd"])
@pytest.mark.parametrize("name", ["ho\nme", "ho\x01me", "ho\rme"])
def test_a_path_a_service_file_cannot_carry_is_refused(
    orca_env: OrcaEnv, manager: str, name: str
) -> None:
    # a unit file is line-based, and XML (a plist) has no control characters and reads \r as \n
    cli = ServiceCli(orca_env, fake_systemctl=True)
    cli.env["ORCA_HOME"] = str(orca_env.root / name)
    result = cli.run("install", "--manager", manager)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "ORCA_HOME" in result.stderr and "control character" in result.stderr
    assert "Traceback" not in result.stderr
    assert not cli.unit_dir.exists() and not (Path(cli.env["HOME"]) / "Library").exists()
    assert cli.systemctl_calls() == []


@pytest.mark.parametrize("extra", [0, 20])
def test_a_launchd_socket_path_too_long_for_macos_is_refused_and_nothing_is_written(
    orca_env: OrcaEnv, tmp_path: Path, extra: int
) -> None:
    # the plist named a socket launchd would make and no orcad or client could ever use; 104
    # bytes fit Linux's 107 and not macOS's 103
    cli = ServiceCli(orca_env, fake_systemctl=False)
    socket_path = str(tmp_path / "s")
    socket_path += "x" * (104 + extra - len(socket_path))
    cli.env["ORCA_SOCKET"] = socket_path
    result = cli.run("install", "--manager", "launchd")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        f"orcactl: no orcad can listen on {socket_path}: its path is {104 + extra} bytes, and a "
        "Unix socket's path may have at most 103 on macOS; set ORCA_SOCKET"
    ), result.stderr
    assert result.stderr.endswith("; nothing was written\n")
    assert not (Path(cli.env["HOME"]) / "Library").exists()


def test_a_launchd_socket_path_of_exactly_the_macos_limit_is_installed(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=False)
    socket_path = str(tmp_path / "s")
    socket_path += "x" * (103 - len(socket_path))
    cli.env["ORCA_SOCKET"] = socket_path
    result = cli.run("install", "--manager", "launchd")
    assert result.returncode == 0, result.stdout + result.stderr
    plist = Path(cli.env["HOME"]) / "Library" / "LaunchAgents" / "dev.orca.orcad.plist"
    assert socket_path in plist.read_text()


def test_install_writes_through_no_symlink_left_at_its_temporary_path(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    cli.unit_dir.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    victim.chmod(0o600)
    (cli.unit_dir / "orcad.service.tmp").symlink_to(victim)
    result = cli.run("install")
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep me\n" and victim.stat().st_mode & 0o777 == 0o600
    service = cli.unit_dir / "orcad.service"
    assert not service.is_symlink() and "ExecStart=" in service.read_text()
    assert not (cli.unit_dir / "orcad.service.tmp").exists()


@pytest.mark.parametrize("kind", ["directory", "fifo", "link to a fifo"])
def test_install_over_what_is_no_unit_file_writes_nothing_or_replaces_the_link(
    orca_env: OrcaEnv, tmp_path: Path, kind: str
) -> None:
    # a directory at orcad.service failed after orcad.socket was written (a half install, and
    # a bare "[Errno 21]"); a FIFO there, or a link to one, held install reading it
    cli = ServiceCli(orca_env, fake_systemctl=True)
    cli.unit_dir.mkdir(parents=True)
    service = cli.unit_dir / "orcad.service"
    if kind == "directory":
        service.mkdir()
    elif kind == "fifo":
        os.mkfifo(service)
    else:
        os.mkfifo(tmp_path / "fifo")
        service.symlink_to(tmp_path / "fifo")
    result = cli.run("install")
    if kind == "link to a fifo":  # the link is replaced, as any link there is
        assert result.returncode == 0, result.stderr
        assert not service.is_symlink() and "ExecStart=" in service.read_text()
        return
    what = "a directory" if kind == "directory" else "not a regular file"
    assert (result.returncode, result.stderr) == (
        1,
        f"orcactl: cannot install: {service} is {what}; nothing was written\n",
    )
    assert sorted(path.name for path in cli.unit_dir.iterdir()) == ["orcad.service"]
    assert cli.systemctl_calls() == []


def test_install_that_cannot_write_a_unit_names_it_and_leaves_no_partial_file(
    orca_env: OrcaEnv,
) -> None:
    # a full disk stood for by a file size limit of 0: the unit's temporary file is created,
    # its write fails. It was a bare "[Errno 28]" with orcad.socket.tmp left behind.
    cli = ServiceCli(orca_env, fake_systemctl=True)
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", "service", "install"],
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0)),
    )
    socket_unit = cli.unit_dir / "orcad.socket"
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"orcactl: cannot write {socket_unit}: File too large; it is as it was; no later step "
        "was carried out\n"
    )
    assert list(cli.unit_dir.iterdir()) == []
    assert cli.systemctl_calls() == []


def test_install_that_cannot_write_a_unit_names_what_is_in_the_way(orca_env: OrcaEnv) -> None:
    # a directory where the unit's temporary file goes: "cannot write orcad.socket: Is a
    # directory" sent the user to a unit file that is no directory
    cli = ServiceCli(orca_env, fake_systemctl=True)
    temporary = cli.unit_dir / "orcad.socket.tmp"
    temporary.mkdir(parents=True)
    result = cli.run("install")
    assert result.returncode == 1
    assert result.stderr == (
        f"orcactl: cannot write {cli.unit_dir / 'orcad.socket'}: {temporary}: Is a directory; "
        "it is as it was; no later step was carried out\n"
    )
    assert sorted(path.name for path in cli.unit_dir.iterdir()) == ["orcad.socket.tmp"]
    assert cli.systemctl_calls() == []


def test_install_under_a_file_where_the_unit_directory_goes_names_that_file(
    orca_env: OrcaEnv,
) -> None:
    # it was a bare "[Errno 20] Not a directory: '.../orcad.socket'"
    cli = ServiceCli(orca_env, fake_systemctl=True)
    cli.unit_dir.parent.mkdir(parents=True)
    cli.unit_dir.write_text("not a directory\n")
    result = cli.run("install")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"orcactl: cannot install: {cli.unit_dir} is not a directory, so "
        f"{cli.unit_dir / 'orcad.socket'} cannot be written; move {cli.unit_dir} aside; nothing "
        "was written\n"
    )
    assert cli.unit_dir.read_text() == "not a directory\n"
    assert cli.systemctl_calls() == []


def test_status_of_units_that_are_no_files_says_so_without_waiting(orca_env: OrcaEnv) -> None:
    # a FIFO at a unit's path was read, and status waited for a writer for good; a directory
    # ended with a bare "[Errno 21] Is a directory"
    cli = ServiceCli(orca_env, fake_systemctl=True)
    cli.unit_dir.mkdir(parents=True)
    os.mkfifo(cli.unit_dir / "orcad.socket")
    (cli.unit_dir / "orcad.service").mkdir()
    result = cli.run("status", "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert set(report["files"].values()) == {"not_a_file"} and not report["healthy"]
    shown = cli.run("status")
    assert shown.returncode == 1 and "Errno" not in shown.stdout + shown.stderr
    assert f"{cli.unit_dir / 'orcad.socket'}: not a regular file" in shown.stdout


def test_uninstall_removes_a_dangling_unit_symlink(orca_env: OrcaEnv, tmp_path: Path) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    cli.unit_dir.mkdir(parents=True)
    (cli.unit_dir / "orcad.service").symlink_to(tmp_path / "gone.service")
    result = cli.run("uninstall")
    assert result.returncode == 0, result.stderr
    assert not (cli.unit_dir / "orcad.service").is_symlink()
    assert f"removed {cli.unit_dir / 'orcad.service'}" in result.stdout.splitlines()


@pytest.mark.parametrize("manager", ["systemd", "launchd"])
def test_uninstall_removes_the_directories_install_made_and_no_other(
    orca_env: OrcaEnv, manager: str
) -> None:
    # install made the unit directory (and systemd/ above it) when it was missing, and
    # uninstall left them behind, empty
    cli = ServiceCli(orca_env, fake_systemctl=True)
    home = Path(cli.env["HOME"])
    home.mkdir(exist_ok=True)
    made, kept = (
        (cli.unit_dir.parent, cli.unit_dir.parent.parent)
        if manager == "systemd"
        else (home / "Library", home)
    )
    kept.mkdir(exist_ok=True)
    assert not made.exists()
    args = ("--manager", manager)
    for _ in range(2):  # made, then there: what install made is known all the same
        assert cli.run("install", *args).returncode == 0
    assert made.is_dir()
    removed = cli.run("uninstall", *args)
    assert removed.returncode == 0, removed.stderr
    assert not made.exists(), list(made.rglob("*"))
    assert kept.is_dir()
    shown = "made by install and now empty"
    assert sum(shown in line for line in removed.stdout.splitlines()) == 2, removed.stdout
    # the directories are the user's once they hold something else, or if they were there
    assert cli.run("install", *args).returncode == 0
    unit_dir = cli.unit_dir if manager == "systemd" else home / "Library" / "LaunchAgents"
    (unit_dir / "mine.service").write_text("[Service]\n")
    assert cli.run("uninstall", *args).returncode == 0
    assert [p.name for p in unit_dir.iterdir()] == ["mine.service"]
    (unit_dir / "mine.service").unlink()
    assert cli.run("install", *args).returncode == 0
    removed = cli.run("uninstall", *args)
    assert removed.returncode == 0 and shown not in removed.stdout, removed.stdout
    assert unit_dir.is_dir() and not any(unit_dir.iterdir())


def test_uninstall_removes_no_directory_a_hand_edited_record_names(orca_env: OrcaEnv) -> None:
    # the record of the directories install made, edited by hand to name the home directory
    # and `/`: uninstall removed the home directory once nothing else was in it
    cli = ServiceCli(orca_env, fake_systemctl=True)
    home = Path(cli.env["HOME"])
    assert list(home.iterdir()) == []
    assert cli.run("install").returncode == 0
    record = Path(cli.env["ORCA_HOME"]) / "service-directories.json"
    made = json.loads(record.read_text())
    noted = [entry["path"] for entry in made]
    assert str(cli.unit_dir) in noted and str(home) not in noted
    # noted as install notes what it made, with what identifies each one
    edited = [
        {"path": str(p), "device": p.stat().st_dev, "inode": p.stat().st_ino}
        for p in (home, Path("/"))
    ]
    record.write_text(json.dumps([*made, *edited]))
    removed = cli.run("uninstall")
    assert removed.returncode == 0, removed.stderr
    assert not (home / ".config").exists()
    assert home.is_dir()
    assert f"removed {home}," not in removed.stdout


def test_uninstall_leaves_directories_made_again_since_by_someone_else(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # install under one ORCA_HOME made the unit directories and noted them in that home; an
    # uninstall under another home left them (it has no record of its own), the user moved them
    # aside and made their own in their place, and an uninstall under the first home then
    # removed the user's directories by the old record's paths
    cli = ServiceCli(orca_env, fake_systemctl=True)
    first_home = cli.env["ORCA_HOME"]
    config = cli.unit_dir.parent.parent
    assert not config.exists()
    assert cli.run("install").returncode == 0
    assert cli.unit_dir.is_dir()
    cli.env["ORCA_HOME"] = str(tmp_path / "other-orca-home")
    assert cli.run("install").returncode == 0
    assert cli.run("uninstall").returncode == 0
    assert cli.unit_dir.is_dir() and not any(cli.unit_dir.iterdir())  # not its own to remove
    (config / "systemd").rename(tmp_path / "systemd-aside")
    cli.unit_dir.mkdir(parents=True)  # the user's own, for units to come
    cli.env["ORCA_HOME"] = first_home
    removed = cli.run("uninstall")
    assert removed.returncode == 0, removed.stderr
    assert "made by install" not in removed.stdout, removed.stdout
    assert cli.unit_dir.is_dir()
    assert not (Path(first_home) / "service-directories.json").exists()  # stale: dropped
    # what install makes afresh is its own again
    shutil.rmtree(config)
    assert cli.run("install").returncode == 0
    removed = cli.run("uninstall")
    assert removed.returncode == 0, removed.stderr
    assert not config.exists(), removed.stdout


def test_a_record_of_made_directories_nested_too_deep_is_none_to_trust(
    orca_env: OrcaEnv,
) -> None:
    # a record of the directories install made nested deeper than Python's JSON reading goes
    # ended install and uninstall with a traceback
    cli = ServiceCli(orca_env, fake_systemctl=True)
    record = Path(cli.env["ORCA_HOME"]) / "service-directories.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("[" * 100_000 + "]" * 100_000)
    for command in ("install", "uninstall"):
        done = cli.run(command)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert not cli.unit_dir.exists()  # install noted the directories it made afresh


def test_uninstall_removes_nothing_through_a_directory_now_a_symlink(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # install made the configuration directory; it was since moved elsewhere and a symlink
    # put in its place: uninstall removed the directories now elsewhere through that symlink
    cli = ServiceCli(orca_env, fake_systemctl=True)
    config = cli.unit_dir.parent.parent
    assert not config.exists()
    assert cli.run("install").returncode == 0
    elsewhere = tmp_path / "dotfiles" / "config"
    elsewhere.parent.mkdir()
    config.rename(elsewhere)
    config.symlink_to(elsewhere)
    removed = cli.run("uninstall")
    assert removed.returncode == 0, removed.stderr
    assert not (elsewhere / "systemd" / "user" / "orcad.service").exists()
    assert (elsewhere / "systemd" / "user").is_dir()
    assert config.is_symlink()
    assert "made by install" not in removed.stdout


@pytest.mark.parametrize(
    "answer",
    [
        b"hello, this is not orcad\n",
        b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no such method"}}\n',
    ],
)
def test_status_with_something_else_on_the_socket_reports_no_daemon(
    orca_env: OrcaEnv, answer: bytes
) -> None:
    systemd_socket = orca_env.root / "xdg-runtime" / "orca" / "orcad.sock"
    systemd_socket.parent.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(systemd_socket))
    listener.listen()

    def answer_each() -> None:
        with contextlib.suppress(OSError):  # closed when the test is done
            while True:
                connection, _ = listener.accept()
                with connection:
                    connection.recv(65536)
                    connection.sendall(answer)

    threading.Thread(target=answer_each, daemon=True).start()
    cli = ServiceCli(orca_env, fake_systemctl=True)
    try:
        status = cli.run("status", "--json")
        install = cli.run("install")
    finally:
        listener.close()
    assert "Traceback" not in status.stderr + install.stderr
    report = json.loads(status.stdout)
    assert (status.returncode, report["daemon_pid"]) == (1, None)
    assert install.returncode == 0, install.stderr
    assert "ran: systemctl --user start orcad.socket orcad.service" in install.stdout


def test_the_socket_option_names_the_socket_launchd_listens_on(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # --socket stands for ORCA_SOCKET; install ignored it and wrote the default socket, which
    # the clients given that same --socket never reach
    cli = ServiceCli(orca_env, fake_systemctl=False)
    given = str(tmp_path / "given.sock")
    result = cli.run("install", "--manager", "launchd", "--dry-run", "--json", "--socket", given)
    assert result.returncode == 0, result.stderr
    agent = plistlib.loads(json.loads(result.stdout)["steps"][0]["content"].encode())
    assert agent["Sockets"]["Listeners"]["SockPathName"] == given
    assert agent["EnvironmentVariables"]["ORCA_SOCKET"] == given
    status = cli.run("status", "--manager", "launchd", "--json", "--socket", given)
    assert json.loads(status.stdout)["socket"] == given


def test_a_socket_option_systemd_does_not_listen_on_is_noted(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    cli = ServiceCli(orca_env, fake_systemctl=True)
    given = str(tmp_path / "given.sock")
    result = cli.run("install", "--dry-run", "--socket", given)
    assert result.returncode == 0, result.stderr
    listening = Path(cli.env["XDG_RUNTIME_DIR"]) / "orca" / "orcad.sock"
    assert f"the socket given is {given} but systemd listens on {listening}" in result.stdout
