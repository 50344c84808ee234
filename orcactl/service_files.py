"""The text of the service definitions: systemd user units and the launchd LaunchAgent plist.

Pure rendering; `orcactl service` decides where they go and what to run. The files checked in
under systemd/ and launchd/ are these renderings with reference values (a test keeps them equal).
"""

from __future__ import annotations

import os
import plistlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from orcad.paths import resolve_paths

SOCKET_UNIT = "orcad.socket"
SERVICE_UNIT = "orcad.service"
LAUNCHD_LABEL = "dev.orca.orcad"  # reverse-DNS label; also the plist's file name
LAUNCHD_SOCKET_KEY = "Listeners"  # orcad.activation asks launchd for this name
PRIVATE_SOCKET_MODE = 0o600

# What the checked-in reference files contain where an installed file has real paths.
REFERENCE_EXEC_START = "%h/.local/bin/orcad"  # where `pipx install` / `uv tool install` put it
# orcad's defaults for $ORCA_HOME and the deliberate database's directory, as unit specifiers
# (%E is the manager's $XDG_CONFIG_HOME, or ~/.config).
DEFAULT_HOME_SPEC = "%h/.orca"
DEFAULT_CONFIG_DIR_SPEC = "%E/orcacode"
RUNTIME_DIR_SPEC = "%t/orca"
REFERENCE_MAC_HOME = "/Users/you"
REFERENCE_MAC_ORCAD = "/usr/local/bin/orcad"

SOCKET_UNIT_TEXT = """\
# orcad's listening socket, held by the user's service manager: the first client to connect
# starts orcad.service, and the socket stays in place while the daemon restarts.
[Unit]
Description=orcad socket (memory daemon for coding agents)

[Socket]
ListenStream=%t/orca/orcad.sock
SocketMode=0600
DirectoryMode=0700
RemoveOnStop=yes

[Install]
WantedBy=sockets.target
"""

SERVICE_UNIT_TEMPLATE = """\
# orcad, the per-user memory daemon for coding agents. It takes its socket from orcad.socket,
# reports readiness and a health line (systemctl --user status orcad) and logs to the journal.
[Unit]
Description=orcad (memory daemon for coding agents)
Requires=orcad.socket
After=orcad.socket

[Service]
Type=notify
ExecStart={exec_start}
{environment}Restart=on-failure
RestartSec=2s
# On SIGTERM orcad stops accepting, answers requests in flight and releases job leases.
TimeoutStopSec=30s
UMask=0077
{sandbox}
[Install]
WantedBy=default.target
Also=orcad.socket
"""

UNSANDBOXED = '# Installed with --no-sandbox (README "Service sandbox").\nNoNewPrivileges=yes\n'

SANDBOX_TEMPLATE = """\
# Sandbox (README "Service sandbox"): orcad and any provider command it runs may write only
# the paths below and a private /tmp, reach only local and Internet sockets (the openai
# provider speaks HTTP), and gain no privileges. PrivateUsers= lets a user manager apply it.
PrivateUsers=yes
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
ReadWritePaths={writable}
PrivateTmp=yes
PrivateDevices=yes
# PrivateIPC=, ProtectKernelTunables= and ProtectKernelLogs= are left out: where a user manager
# cannot set them up (no IPC namespace; a container's /proc and /sys) the unit would not start.
ProtectKernelModules=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
CapabilityBoundingSet=
AmbientCapabilities=
KeyringMode=private
SystemCallArchitectures=native
SystemCallFilter=@system-service
# @resources stays: numpy's OpenBLAS sets a memory policy (mbind) on its buffers.
SystemCallFilter=~@privileged
SystemCallErrorNumber=EPERM
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
"""


class UncarriableValue(ValueError):
    """A path or word that a unit file or a plist cannot hold as it is."""


def check_carriable(name: str, value: str) -> None:
    """Refuse what would break the file or change meaning in it: a unit file is line-based,
    and a plist is XML, which has no control characters and reads a carriage return as a newline."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise UncarriableValue(
            f"{name} {value!r} contains a control character (a newline, say), which a service "
            "file cannot carry; use a path without one"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UncarriableValue(
            f"{name} {value!r} is not valid UTF-8, which a service file cannot carry"
        ) from None


def _systemd_quote(word: str, *, expands_variables: bool = True) -> str:
    """One word of an ExecStart= (which expands $VARS) or Environment= line, taken literally."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if expands_variables:
        escaped = escaped.replace("$", "$$")
    if escaped and not any(ch.isspace() for ch in escaped) and '"' not in word:
        return escaped
    return f'"{escaped}"'


def systemd_exec_line(argv: Sequence[str]) -> str:
    return " ".join(_systemd_quote(word) for word in argv)


def systemd_path(path: str) -> str:
    """A ReadWritePaths= entry taken literally; '-' tolerates one missing at start."""
    escaped = path.replace("\\", "\\\\").replace("%", "%%")
    return f'"-{escaped}"' if any(ch.isspace() or ch == '"' for ch in path) else f"-{escaped}"


def systemd_service_unit(
    exec_start: str,
    environment: Mapping[str, str] | None = None,
    writable: Sequence[str] | None = None,
    *,
    sandbox: bool = True,
) -> str:
    """The service unit; `exec_start` is a ready ExecStart= value (see systemd_exec_line) and
    `writable` the ready ReadWritePaths= entries (default: orcad's default directories).
    Without `sandbox` (no user namespaces for the user manager) only NoNewPrivileges= stays."""
    lines = "".join(
        f"Environment={_systemd_quote(f'{key}={value}', expands_variables=False)}\n"
        for key, value in sorted((environment or {}).items())
    )
    if writable is None:
        writable = [f"-{DEFAULT_HOME_SPEC}", f"-{DEFAULT_CONFIG_DIR_SPEC}", f"-{RUNTIME_DIR_SPEC}"]
    confinement = SANDBOX_TEMPLATE.format(writable=" ".join(writable))
    if not sandbox:
        confinement = UNSANDBOXED
    return SERVICE_UNIT_TEMPLATE.format(
        exec_start=exec_start, environment=lines, sandbox=confinement
    )


def systemd_socket_unit() -> str:
    return SOCKET_UNIT_TEXT


def launchd_plist(
    argv: Sequence[str],
    socket_path: str,
    log_path: str,
    environment: Mapping[str, str] | None = None,
) -> bytes:
    """The LaunchAgent: launchd holds the socket (0600) and starts orcad at login and on demand."""
    agent = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(argv),
        "RunAtLoad": True,
        # restart after a crash, not after a clean stop (systemd's Restart=on-failure)
        "KeepAlive": {"SuccessfulExit": False},
        "Sockets": {
            LAUNCHD_SOCKET_KEY: {
                "SockFamily": "Unix",
                "SockType": "stream",
                "SockPathName": socket_path,
                "SockPathMode": PRIVATE_SOCKET_MODE,
            }
        },
        "EnvironmentVariables": {"ORCA_SOCKET": socket_path, **(environment or {})},
        "StandardErrorPath": log_path,
        "ProcessType": "Background",
        "Umask": 0o077,
    }
    return plistlib.dumps(agent, sort_keys=False)


def reference_service_unit() -> str:
    return systemd_service_unit(REFERENCE_EXEC_START)


def reference_plist() -> bytes:
    return launchd_plist(
        [REFERENCE_MAC_ORCAD],
        f"{REFERENCE_MAC_HOME}/Library/Caches/TemporaryItems/orca/orcad.sock",
        f"{REFERENCE_MAC_HOME}/Library/Logs/orcad.log",
    )


# Where orcad's files go; set at install time, they are written into the unit or plist.
CARRIED_ENVIRONMENT = ("ORCA_HOME", "ORCA_CONFIG_DIR")


def carried_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """ORCA_HOME / ORCA_CONFIG_DIR as set now, made absolute, for the service to see too."""
    return {
        name: os.path.abspath(os.path.expanduser(environ[name]))
        for name in CARRIED_ENVIRONMENT
        if environ.get(name)
    }


def writable_paths(carried: dict[str, str]) -> list[str]:
    """The unit's ReadWritePaths=: orcad's home, the deliberate database's directory, the
    runtime directory; the defaults as specifiers, so the unit follows the user's manager."""
    home = carried.get("ORCA_HOME")
    config_dir = carried.get("ORCA_CONFIG_DIR")
    return [
        systemd_path(home) if home else f"-{DEFAULT_HOME_SPEC}",
        systemd_path(config_dir) if config_dir else f"-{DEFAULT_CONFIG_DIR_SPEC}",
        f"-{RUNTIME_DIR_SPEC}",
    ]


def writable_directories(environ: Mapping[str, str]) -> list[Path]:
    """The directories the sandboxed service may write, which must exist before it starts
    (it cannot create them under a read-only home)."""
    paths = resolve_paths({k: v for k, v in environ.items() if k != "ORCA_SOCKET"})
    return [paths.home, paths.deliberate_db.parent]
