"""A `.git` another user put in a directory every user may write in (`/tmp/.git`) does not make
the directories below it one workspace with a project another user chose, as Git itself
refuses such a repository; a `.git` of the user's own there, or one another user owns in a
directory only they can write in (a mounted volume), still counts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orcad.identity import project_id
from tests.harness import DaemonProcess

pytestmark = pytest.mark.daemon

ORIGIN = '[remote "origin"]\n\turl = git@github.com:alice/app.git\n'


def shared_with_git(tmp_path: Path, *, owner: int, mode: int) -> tuple[Path, Path]:
    shared = tmp_path / "shared"
    (shared / ".git").mkdir(parents=True)
    (shared / ".git" / "config").write_text(ORIGIN)
    scratch = shared / "scratch"
    scratch.mkdir()
    os.chown(shared / ".git", owner, owner)
    shared.chmod(mode)
    return shared, scratch


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a .git another uid owns")
def test_a_git_another_user_planted_in_a_shared_directory_is_passed_over(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    _shared, scratch = shared_with_git(tmp_path, owner=65534, mode=0o1777)
    opened = daemon.call("session.open", {"cwd": str(scratch)})
    assert opened.workspace.root == str(scratch)
    assert opened.project.identity == str(scratch)
    assert opened.project.id == project_id(str(scratch))


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a .git another uid owns")
def test_the_shared_directory_itself_is_no_repository_for_its_project_either(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # a session started in /tmp itself: the workspace passes the planted .git over, and the
    # project must not take the origin another user wrote into it
    shared, _scratch = shared_with_git(tmp_path, owner=65534, mode=0o1777)
    opened = daemon.call("session.open", {"cwd": str(shared)})
    assert opened.workspace.root == str(shared)
    assert opened.project.identity == str(shared)
    assert opened.project.id == project_id(str(shared))
    listed = daemon.call("projects.list", {})
    assert [project.identity for project in listed.projects] == [str(shared)]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a .git another uid owns")
def test_a_git_another_user_owns_in_a_directory_closed_to_others_counts(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    shared, scratch = shared_with_git(tmp_path, owner=65534, mode=0o755)
    opened = daemon.call("session.open", {"cwd": str(scratch)})
    assert opened.workspace.root == str(shared)
    assert opened.project.identity == "github.com/alice/app"


def test_the_users_own_git_in_a_shared_directory_counts(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    shared, scratch = shared_with_git(tmp_path, owner=os.getuid(), mode=0o1777)
    opened = daemon.call("session.open", {"cwd": str(scratch)})
    assert opened.workspace.root == str(shared)
    assert opened.project.identity == "github.com/alice/app"
