"""Paths not named in UTF-8 (a directory made on a system with another encoding), which no
request and no agent configuration can carry."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from orcactl import arguments
from orcactl.connect import EXIT_USAGE, CommandError
from tests.harness import OrcaEnv
from tests.hook_helpers import ORCACTL
from tests.test_orcactl_usage import orcactl

pytestmark = pytest.mark.daemon


@pytest.mark.parametrize(
    "argv",
    [
        ["recall", "x"],
        ["remember", "x"],
        ["memory", "list"],
        ["inspect"],
        ["forget", "cand_" + "0" * 32],
        ["integrate", "codex", "--project", "--dry-run"],
        ["mcp"],
    ],
    ids=" ".join,
)
def test_a_current_directory_not_named_in_utf8_is_bad_usage_before_any_start(
    orca_env: OrcaEnv, tmp_path: Path, argv: list[str]
) -> None:
    # a directory named in Latin-1 (b"caf\xe9"): JSON cannot carry its path. It was exit 1
    # with a message that named no directory, after starting orcad for nothing.
    latin1 = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    latin1.mkdir()
    result = orcactl(orca_env, *argv, "--json", cwd=latin1)
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, result.stderr
    shown = f"{tmp_path}/caf\\xe9"
    assert f"the current directory's path {shown} is not valid UTF-8" in result.stderr
    if argv != ["mcp"]:  # mcp speaks JSON-RPC on stdout, not orcactl's --json
        assert json.loads(result.stdout)["error"]["data"] == {"kind": "usage"}
    assert not orca_env.socket.exists()  # refused before orcad was started for it


@pytest.mark.parametrize("which", ["--orcactl", "ORCA_SOCKET"])
def test_integrate_refuses_a_path_not_in_utf8_as_bad_usage_naming_it(
    orca_env: OrcaEnv, tmp_path: Path, which: str
) -> None:
    # it was exit 1, blaming ~/.codex/config.toml: "cannot be written back as UTF-8"
    latin1 = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    latin1.mkdir()
    shutil.copy(ORCACTL, latin1 / "orcactl")
    args = ["--orcactl", str(latin1 / "orcactl" if which == "--orcactl" else ORCACTL)]
    env = dict(orca_env.env)
    if which == "ORCA_SOCKET":
        env["ORCA_SOCKET"] = str(latin1 / "orcad.sock")
    result = subprocess.run(
        [ORCACTL, "integrate", "codex", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    what = "the orcactl path" if which == "--orcactl" else "the socket path"
    assert result.stderr.startswith(f"orcactl: {what} {tmp_path}/caf\\xe9/")
    assert "nothing was changed" in result.stderr
    assert not (orca_env.root / "user-home" / ".codex").exists()


def test_integrate_remove_writes_no_path_so_one_not_in_utf8_does_not_stop_it(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    def integrate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        command = [ORCACTL, "integrate", "codex", "--orcactl", ORCACTL, *args]
        return subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=60, check=False
        )

    assert integrate(env=orca_env.env).returncode == 0
    latin1 = os.fsdecode(bytes(tmp_path) + b"/caf\xe9/orcad.sock")
    removed = integrate("--remove", env=dict(orca_env.env, ORCA_SOCKET=latin1))
    assert removed.returncode == 0, removed.stderr
    assert not (orca_env.root / "user-home" / ".codex" / "hooks.json").exists()


def test_one_check_refuses_a_path_not_in_utf8_naming_its_role(tmp_path: Path) -> None:
    # the current directory's check and integrate's were two near-copies, each with its wording
    latin1 = os.fsdecode(bytes(tmp_path) + b"/caf\xe9")
    with pytest.raises(CommandError) as refused:
        arguments.utf8_path("the socket path", latin1, "which nothing can carry; fix it")
    assert refused.value.status == EXIT_USAGE
    assert str(refused.value) == (
        f"the socket path {tmp_path}/caf\\xe9 is not valid UTF-8, which nothing can carry; fix it"
    )
    assert arguments.utf8_path("the socket path", str(tmp_path), "unused") == str(tmp_path)


@pytest.mark.parametrize("directory", ["not utf-8", "removed"])
def test_inspect_refusing_the_current_directory_advises_an_argument_it_takes(
    orca_env: OrcaEnv, tmp_path: Path, directory: str
) -> None:
    # inspect takes the directory as PATH: it has no --cwd, and following advice to give one
    # was only another usage error
    if directory == "removed":
        gone = tmp_path / "gone"
        gone.mkdir()
        script = f'cd {shlex.quote(str(gone))} && rmdir "$PWD" && exec "$@"'
        result = orcactl(orca_env, "inspect", prefix=["sh", "-c", script, "sh"])
    else:
        latin1 = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
        latin1.mkdir()
        result = orcactl(orca_env, "inspect", cwd=latin1)
    assert result.returncode == 2, result.stderr
    assert "--cwd" not in result.stderr
    assert "orcactl inspect PATH" in result.stderr
    advised = orcactl(orca_env, "inspect", "--cwd", str(tmp_path))
    assert "unrecognized arguments: --cwd" in advised.stderr  # what the old advice led to
