"""Stored text cannot drive the terminal through orcactl's human output."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from orcactl.terminal import neutralize
from tests.harness import DaemonProcess

pytestmark = pytest.mark.daemon


def orcactl_in(daemon: DaemonProcess, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """orcactl against `daemon`, acting from `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "orcactl", *args, "--cwd", str(cwd)],
        env=daemon.orca.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_control_characters_print_as_text() -> None:
    assert neutralize("a\x1b[2Jb\x07\x9b\x7f") == "a\\x1b[2Jb\\x07\\x9b\\x7f"
    assert neutralize("line one\n\tline two ünïcode ✓") == "line one\n\tline two ünïcode ✓"
    # a bidirectional override shows a reader the text in another order than it is
    assert (
        neutralize("ok \u202etxt.exe\u202c \u2066x\u2069")
        == "ok \\u202etxt.exe\\u202c \\u2066x\\u2069"
    )


def test_a_record_with_an_escape_sequence_is_shown_escaped(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    content = "the build uses make \x1b]0;pwned\x07 release"
    env = daemon.orca.env

    def orcactl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orcactl", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    saved = orcactl(
        "memory", "save", content, "--kind", "fact", "--workspace", "--yes", "--cwd", str(tmp_path)
    )
    assert saved.returncode == 0, saved.stderr
    shown = orcactl("memory", "search", "build release", "--cwd", str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "make \\x1b]0;pwned\\x07 release" in shown.stdout  # the text is there, escaped
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    as_json = orcactl("memory", "search", "build release", "--json", "--cwd", str(tmp_path))
    assert json.loads(as_json.stdout)["records"][0]["content"] == content  # JSON keeps it exact


# DEL, NEL, CSI and a bidirectional override: JSON allows them raw
@pytest.mark.parametrize("control", ["\x7f", "\x85", "\x9b", "\u202e"])
def test_json_output_with_del_or_a_c1_control_is_still_json(
    daemon: DaemonProcess, tmp_path: Path, control: str
) -> None:
    content = f"deploys go through {control} ArgoCD"

    orcactl = partial(orcactl_in, daemon, tmp_path)

    saved = orcactl("memory", "save", content, "--kind", "fact", "--workspace", "--yes", "--json")
    assert saved.returncode == 0, saved.stderr
    listed = orcactl("memory", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert control not in listed.stdout  # nothing raw reaches the terminal
    assert json.loads(listed.stdout)["records"][0]["content"] == content  # and it is JSON, exact


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--bogus", "\x1b]0;pwned\x07"],  # argparse repeats an unknown argument
        ["\x1b[2Jstatus"],  # and an unknown command
        ["memory", "list", "--limit", "\x1b[31m5"],  # and a value its type refused
    ],
    ids=["unknown argument", "unknown command", "bad value"],
)
def test_a_usage_error_shows_control_characters_of_the_arguments_as_text(
    argv: list[str],
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "\\x1b" in result.stderr  # the argument is named, escaped
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr


def test_text_hidden_in_tag_characters_or_reordered_is_shown_escaped(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # a record is stored as given: an order spelled in tag characters is invisible on the
    # terminal, and U+202E shows the text after it reversed; the user reviewing it must see both
    hidden = "".join(chr(0xE0000 + ord(character)) for character in "rm -rf")
    content = f"the build uses make release{hidden} \u202eesaeler\u202c"

    orcactl = partial(orcactl_in, daemon, tmp_path)

    saved = orcactl("memory", "save", content, "--kind", "fact", "--workspace", "--yes")
    assert saved.returncode == 0, saved.stderr
    for shown in (orcactl("memory", "list"), orcactl("memory", "list", "--json")):
        assert shown.returncode == 0, shown.stderr
        raw = [c for c in shown.stdout if 0xE0000 <= ord(c) <= 0xE007F or c in "\u202e\u202c"]
        assert raw == [], shown.stdout
    listed = orcactl("memory", "list")
    assert "release\\U000e0072\\U000e006d" in listed.stdout and "\\u202eesaeler" in listed.stdout
    as_json = orcactl("memory", "list", "--json")
    assert json.loads(as_json.stdout)["records"][0]["content"] == content  # JSON keeps it exact


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
def test_output_in_a_terminal_encoding_other_than_utf8_is_shown_not_refused(
    daemon: DaemonProcess, tmp_path: Path, encoding: str
) -> None:
    # a terminal in a Latin-1 locale cannot show ☕ or status's ●: orcactl still prints all it
    # has to say (what the encoding lacks as escapes), and its JSON stays JSON, exact
    content = "the café serves ☕ and 🍵 from 8"
    env = {**daemon.orca.env, "PYTHONIOENCODING": encoding}

    def orcactl(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "orcactl", *args, "--cwd", str(tmp_path)],
            env=env,
            capture_output=True,
            timeout=60,
        )

    saved = orcactl("memory", "save", content, "--kind", "fact", "--workspace", "--yes")
    assert saved.returncode == 0, saved.stderr
    listed = orcactl("memory", "list")
    assert listed.returncode == 0, listed.stderr
    shown = listed.stdout.decode(encoding)
    assert "\\u2615" in shown and "\\U0001f375" in shown, shown
    if encoding == "latin-1":
        assert "café" in shown  # what the encoding has is shown as it is
    as_json = orcactl("memory", "list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout.decode(encoding))["records"][0]["content"] == content
    status = subprocess.run(
        [sys.executable, "-m", "orcactl", "status"],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert status.returncode == 0, status.stderr
    assert "\\u25cf orcad" in status.stdout.decode(encoding)
