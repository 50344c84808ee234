"""Project identity from the normalized Git origin (spec: Storage)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orcad.identity import (
    ProjectIdentity,
    derive_project,
    normalize_origin,
    origin_url_from_config,
)

pytestmark = pytest.mark.inprocess

# --- normalize_origin -----------------------------------------------------------------------

# credentials as the secret detector knows them (a GitHub and a GitLab personal access token)
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITLAB_TOKEN = "glpat-" + "abcdefghij0123456789"
# a classic GitHub token: 40 hex digits, which the detector cannot tell from a commit's hash
HEX_TOKEN = "0123456789abcdef" * 2 + "89abcdef"

SAME_REPOSITORY = [
    "git@github.com:owner/repo.git",
    "git@github.com:owner/repo",
    "github.com:owner/repo.git/",
    "https://github.com/owner/repo",
    "https://github.com/owner/repo.git",
    "https://GitHub.COM/owner/repo/",
    "https://user:s3cret@github.com/owner/repo.git",
    "https://github.com/owner/repo?ref=main#readme",
    "http://github.com//owner//repo",
    "ssh://git@github.com/owner/repo.git",
    "ssh://git@github.com:22/owner/repo.git",
    "ssh://git@github.com:2222/owner/repo",
    "git+ssh://git@github.com/owner/repo",
    "git://github.com/owner/repo.git",
    "  https://github.com/owner/repo.git  ",
    "github.com/owner/repo",
]


@pytest.mark.parametrize("url", SAME_REPOSITORY)
def test_spellings_of_one_repository_give_one_identity(url: str) -> None:
    assert normalize_origin(url) == "github.com/owner/repo"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("/srv/git/repo.git", "/srv/git/repo"),
        ("/srv/git/repo/.git/", "/srv/git/repo"),
        ("file:///srv/git/repo.git", "/srv/git/repo"),
        ("file://localhost/srv/git/repo", "/srv/git/repo"),
        ("git@[::1]:owner/repo.git", "[::1]/owner/repo"),
        ("ssh://git@[::1]:2222/owner/repo", "[::1]/owner/repo"),
        ("https://gitlab.example.org/group/sub/Repo", "gitlab.example.org/group/sub/Repo"),
    ],
)
def test_local_and_unusual_origins(url: str, expected: str) -> None:
    assert normalize_origin(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # scp-like with a password: Git takes `alice` for the host, the user meant github.com
        ("alice:pw-SECRET@github.com:owner/repo.git", "github.com/owner/repo"),
        ("alice:pw@SECRET@github.com:owner/repo", "github.com/owner/repo"),
        # a remote helper's URL: read whole, as the same URL without the password is
        ("hg::https://alice:pw-SECRET@hg.example.org/repo", "hg/:https:/hg.example.org/repo"),
        ("gcrypt::rsync://alice:pw-SECRET@example.org/srv/r", "gcrypt/:rsync:/example.org/srv/r"),
        ("gcrypt::alice:pw-SECRET@example.org:srv/r", "gcrypt/:example.org:srv/r"),
        # a token given as the user name of a helper's address, as GitHub takes one
        (f"gcrypt::https://{TOKEN}@github.com/owner/repo", "gcrypt/:https:/github.com/owner/repo"),
        (f"gcrypt::{TOKEN}@github.com:owner/repo.git", "gcrypt/:github.com:owner/repo"),
        (f"hg::ssh://{GITLAB_TOKEN}@example.org/repo", "hg/:ssh:/example.org/repo"),
        # one shaped as a token, which the detector does not know
        (f"gcrypt::https://{HEX_TOKEN}@github.com/o/r", "gcrypt/:https:/github.com/o/r"),
        (f"gcrypt::{HEX_TOKEN.upper()}@github.com:o/r", "gcrypt/:github.com:o/r"),
        ("hg::https://aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gH3@host/r", "hg/:https:/host/r"),
    ],
)
def test_passwords_in_unusual_origin_spellings_are_dropped(url: str, expected: str) -> None:
    assert normalize_origin(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("hg::https://hg.example/repo", "hg/:https:/hg.example/repo"),
        ("gcrypt::rsync://host/o/r", "gcrypt/:rsync:/host/o/r"),
        ("codecommit::us-east-1://myrepo", "codecommit/:us-east-1:/myrepo"),
        ("codecommit::us-east-1://profile@myrepo", "codecommit/:us-east-1:/profile@myrepo"),
        ("hg::ssh://hg@hg.example.org:2222/repo", "hg/:ssh:/hg@hg.example.org:2222/repo"),
        ("persistent-https::https://host/r.git", "persistent-https/:https:/host/r"),
        # an scp-like address with a user (gcrypt's usual spelling): no password in it
        ("gcrypt::git@github.com:owner/repo.git", "gcrypt/:git@github.com:owner/repo"),
        ("hg::hg@hg.example.org:owner/repo", "hg/:hg@hg.example.org:owner/repo"),
        # ordinary user names, short hex and long names that are words stay
        ("gcrypt::https://alice@github.com/o/r", "gcrypt/:https:/alice@github.com/o/r"),
        ("gcrypt::deadbeef@host:o/r", "gcrypt/:deadbeef@host:o/r"),
        (
            "hg::https://Build-And-Release-Automation-User-2024@host/r",
            "hg/:https:/Build-And-Release-Automation-User-2024@host/r",
        ),
    ],
)
def test_a_remote_helpers_url_names_its_project_as_it_always_did(url: str, expected: str) -> None:
    # what earlier versions made of these: a project of a clone through git-remote-hg,
    # gcrypt or codecommit keeps its id, and so its memory, across an upgrade
    assert normalize_origin(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "https://alice:pw/SECRET@github.com/owner/repo",  # a `/` in the password
        "ext::ssh -i key-SECRET example.org %S repo",  # a command, not a place
        "hg::" * 100_000 + "example.org:owner/repo",  # no helper reaches another
    ],
)
def test_origins_whose_rest_may_be_a_password_name_no_repository(url: str) -> None:
    with pytest.raises(ValueError):
        normalize_origin(url)


def test_different_repositories_stay_different() -> None:
    assert normalize_origin("git@github.com:owner/repo") != normalize_origin(
        "git@github.com:owner/other"
    )
    assert normalize_origin("git@github.com:owner/repo") != normalize_origin(
        "git@gitlab.com:owner/repo"
    )


@pytest.mark.parametrize(
    "url", ["", "   ", "https://", "https://github.com", "https://github.com/.git", "repo", "/"]
)
def test_origins_naming_no_repository_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        normalize_origin(url)


labels = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?", fullmatch=True)
hosts = st.lists(labels, min_size=1, max_size=3).map(".".join)
segments = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,15}", fullmatch=True).filter(
    lambda s: not s.endswith(".git") and s not in (".", "..")
)
paths = st.lists(segments, min_size=1, max_size=3).map("/".join)
users = st.from_regex(r"[A-Za-z0-9_.-]{1,10}", fullmatch=True)
ports = st.integers(min_value=1, max_value=65535)


@given(
    host=hosts,
    path=paths,
    user=users,
    port=ports,
    suffix=st.sampled_from(["", ".git", "/", ".git/"]),
)
def test_scp_https_and_ssh_forms_agree(
    host: str, path: str, user: str, port: int, suffix: str
) -> None:
    forms = [
        f"{user}@{host}:{path}{suffix}",
        f"https://{host}/{path}{suffix}",
        f"https://{user}:pw@{host}:{port}/{path}{suffix}?q=1#frag",
        f"ssh://{user}@{host}/{path}{suffix}",
        f"ssh://{user}@{host}:{port}/{path}{suffix}",
    ]
    identities = {normalize_origin(form) for form in forms}
    assert identities == {f"{host.lower()}/{path}"}


@given(st.text(max_size=80))
def test_normalization_is_idempotent_and_strips_private_parts(url: str) -> None:
    try:
        normalized = normalize_origin(url)
    except ValueError:
        return
    assert normalize_origin(normalized) == normalized
    assert "?" not in normalized
    assert "#" not in normalized
    host = normalized.split("/", 1)[0]
    assert "@" not in host
    assert host == host.lower()
    assert not normalized.endswith((".git", "/"))


@given(host=hosts, path=paths, user=users, secret=users, query=st.text(max_size=10))
def test_no_userinfo_query_or_fragment_survives(
    host: str, path: str, user: str, secret: str, query: str
) -> None:
    normalized = normalize_origin(f"https://{user}:{secret}@{host}/{path}?{query}#{query}")
    assert normalized == f"{host.lower()}/{path}"


# --- git config parsing ---------------------------------------------------------------------


def test_origin_url_is_read_from_the_config_text() -> None:
    config = """
[core]
\trepositoryformatversion = 0
[remote "upstream"]
\turl = git@github.com:upstream/repo.git
[Remote "origin"]  ; a comment
\tfetch = +refs/heads/*:refs/remotes/origin/*
\tURL = "git@github.com:owner/repo.git" # trailing comment
\turl = https://second.example/ignored
"""
    assert origin_url_from_config(config) == "git@github.com:owner/repo.git"


def test_config_forms_header_inline_deprecated_and_continuation() -> None:
    assert origin_url_from_config('[remote "origin"] url = a.example:o/r') == "a.example:o/r"
    assert origin_url_from_config("[remote.origin]\n url = b.example:o/r") == "b.example:o/r"
    assert origin_url_from_config('[remote "origin"]\nurl = c.example:o/\\\nr') == "c.example:o/r"
    assert origin_url_from_config('[remote "Origin"]\nurl = d.example:o/r') is None
    assert origin_url_from_config('[remote "origin"]\nurlx = e\n[x]\nurl = f') is None
    assert origin_url_from_config("") is None


# --- repositories on disk -------------------------------------------------------------------


def git(*args: str, cwd: Path) -> None:
    environment = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_SYSTEM": os.devnull,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    subprocess.run(["git", *args], cwd=cwd, env=environment, check=True, capture_output=True)


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    repository = tmp_path / "upstream"
    repository.mkdir()
    git("init", "-q", "-b", "main", cwd=repository)
    (repository / "README").write_text("hello\n")
    git("add", "README", cwd=repository)
    git("commit", "-q", "-m", "first", cwd=repository)
    return repository


def test_clones_and_worktrees_of_one_origin_share_an_id(upstream: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    git("clone", "-q", str(upstream), str(first), cwd=tmp_path)
    git("clone", "-q", str(upstream), str(second), cwd=tmp_path)
    for clone in (first, second):
        git("remote", "set-url", "origin", "git@GitHub.com:Owner/project.git", cwd=clone)
    git("remote", "set-url", "origin", "https://tok@github.com/Owner/project/", cwd=second)
    worktree = tmp_path / "feature"
    git("worktree", "add", "-q", "-b", "feature", str(worktree), cwd=first)
    assert (worktree / ".git").is_file()

    identities = {derive_project(path) for path in (first, second, worktree)}
    assert {identity.identity for identity in identities} == {"github.com/Owner/project"}
    assert {identity.id for identity in identities} == {
        hashlib.sha256(b"github.com/Owner/project").hexdigest()
    }
    assert {identity.root for identity in identities} == {str(first), str(second), str(worktree)}


def test_local_clones_share_the_path_origin(upstream: Path, tmp_path: Path) -> None:
    clone_a, clone_b = tmp_path / "a", tmp_path / "b"
    git("clone", "-q", str(upstream), str(clone_a), cwd=tmp_path)
    git("clone", "-q", f"file://{upstream}", str(clone_b), cwd=tmp_path)
    assert derive_project(clone_a).id == derive_project(clone_b).id
    assert derive_project(clone_a).identity == normalize_origin(str(upstream))


def test_clones_of_local_repositories_whose_names_differ_after_a_hash_differ(
    tmp_path: Path,
) -> None:
    # a `#` or `?` in a local path is part of a directory's name, not a URL's fragment or query
    clones = []
    for name in ("c#-tools", "c#-game", "c?-tools"):
        repository = tmp_path / "mirror" / name
        repository.mkdir(parents=True)
        git("init", "-q", "-b", "main", cwd=repository)
        (repository / "README").write_text(f"{name}\n")
        git("add", "README", cwd=repository)
        git("commit", "-q", "-m", "first", cwd=repository)
        clone = tmp_path / f"clone-{len(clones)}"
        git("clone", "-q", str(repository), str(clone), cwd=tmp_path)
        clones.append(clone)
    projects = [derive_project(clone) for clone in clones]
    assert len({project.id for project in projects}) == 3
    mirror = str((tmp_path / "mirror").resolve())
    assert [project.identity for project in projects] == [
        f"{mirror}/c%23-tools",
        f"{mirror}/c%23-game",
        f"{mirror}/c%3F-tools",
    ]


def test_repository_without_origin_uses_its_canonical_root(upstream: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(upstream)
    project = derive_project(link)
    assert project.identity == str(upstream.resolve())
    assert project.id == hashlib.sha256(str(upstream.resolve()).encode()).hexdigest()
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", "-b", "side", str(worktree), cwd=upstream)
    assert derive_project(worktree).id == project.id  # same repository, no origin


def test_non_git_directory_uses_its_canonical_path(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    link = tmp_path / "alias"
    link.symlink_to(plain)
    assert derive_project(link) == derive_project(plain)
    assert derive_project(plain).identity == str(plain.resolve())


def test_unrelated_repositories_differ(upstream: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", cwd=other)
    git("remote", "add", "origin", "git@github.com:owner/other.git", cwd=other)
    assert derive_project(other).identity == "github.com/owner/other"
    assert derive_project(other).id != derive_project(upstream).id


def test_unparseable_origin_falls_back_to_the_root(tmp_path: Path) -> None:
    repository = tmp_path / "weird"
    repository.mkdir()
    git("init", "-q", cwd=repository)
    git("remote", "add", "origin", "not-a-url", cwd=repository)
    assert derive_project(repository).identity == str(repository.resolve())


@pytest.mark.parametrize(
    "origin",
    [
        "alice:pw-SECRET@github.com:owner/repo.git",
        "hg::https://alice:pw-SECRET@github.com/owner/repo",
        "https://alice:pw/SECRET@github.com/owner/repo",
        f"hg::https://{TOKEN}@github.com/owner/repo",
        f"gcrypt::{TOKEN}@github.com:owner/repo",
        f"gcrypt::https://{HEX_TOKEN}@github.com/owner/repo",
        f"gcrypt::{HEX_TOKEN}@github.com:owner/repo",
    ],
)
def test_no_password_of_the_origin_reaches_the_identity(tmp_path: Path, origin: str) -> None:
    repository = tmp_path / "repository"
    repository.mkdir()
    git("init", "-q", cwd=repository)
    git("remote", "add", "origin", origin, cwd=repository)
    project = derive_project(repository)
    assert "SECRET" not in project.identity
    assert TOKEN not in project.identity
    assert HEX_TOKEN not in project.identity
    assert project.identity in (
        "github.com/owner/repo",
        "hg/:https:/github.com/owner/repo",  # a helper's URL, read whole
        "gcrypt/:https:/github.com/owner/repo",
        "gcrypt/:github.com:owner/repo",
        str(repository.resolve()),
    )


def test_a_relative_path_origin_is_a_directory_not_a_host(tmp_path: Path) -> None:
    # Git reads a remote with no scheme and no colon before its first slash as a path
    # relative to the work tree: neither a real GitHub repository nor every other
    # repository whose remote is spelled the same
    real, typo, first, second = (tmp_path / name for name in ("real", "typo", "one", "two"))
    for repository, origin in (
        (real, "git@github.com:owner/repo.git"),
        (typo, "github.com/owner/repo"),
        (first, "mirrors/app"),
        (second, "mirrors/app"),
    ):
        repository.mkdir()
        git("init", "-q", cwd=repository)
        git("remote", "add", "origin", origin, cwd=repository)
    assert derive_project(real).identity == "github.com/owner/repo"
    assert derive_project(typo).identity == str(typo.resolve() / "github.com/owner/repo")
    assert derive_project(first).identity == str(first.resolve() / "mirrors/app")
    assert derive_project(second).identity == str(second.resolve() / "mirrors/app")


@pytest.mark.parametrize(
    ("name", "text"),
    [(".git", b"gitdir: /srv/a\0b\n"), (".git/commondir", b"../x\0y\n")],
)
def test_a_git_file_naming_a_path_with_a_nul_is_no_repository_path(
    tmp_path: Path, name: str, text: bytes
) -> None:
    # what an unpacked archive or a damaged file may hold; no path can hold a NUL, and looking
    # one up raised ValueError: session.open answered there with an internal error
    repository = tmp_path / "damaged"
    repository.mkdir()
    git("init", "-q", cwd=repository)
    if name == ".git":
        shutil.rmtree(repository / ".git")
    (repository / name).write_bytes(text)
    assert derive_project(repository).identity == str(repository.resolve())


def test_git_files_naming_a_missing_repository_make_no_shared_project(tmp_path: Path) -> None:
    # two unrelated copies of a worktree whose main repository was deleted: Git finds no
    # repository in either, and the path of the missing one is no identity for both
    first, second = tmp_path / "first", tmp_path / "second"
    for directory in (first, second):
        directory.mkdir()
        (directory / ".git").write_text(f"gitdir: {tmp_path / 'deleted' / '.git'}\n")
    assert derive_project(first).identity == str(first.resolve())
    assert derive_project(second).identity == str(second.resolve())
    # likewise a commondir naming a directory that is not there, however long its name
    repository = tmp_path / "damaged"
    repository.mkdir()
    git("init", "-q", cwd=repository)
    (repository / ".git" / "commondir").write_text("/gone" * 2000)
    assert derive_project(repository).identity == str(repository.resolve())


@pytest.mark.parametrize("name", ["config", "commondir"])
def test_a_git_file_that_is_a_fifo_is_not_waited_on(tmp_path: Path, name: str) -> None:
    # an unpacked archive may hold anything under .git: reading a FIFO waits for a writer
    repository = tmp_path / "unpacked"
    repository.mkdir()
    git("init", "-q", cwd=repository)
    fifo = repository / ".git" / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    found: list[ProjectIdentity] = []
    deriving = threading.Thread(target=lambda: found.append(derive_project(repository)))
    deriving.start()
    deriving.join(timeout=10)
    if deriving.is_alive():  # let it go before failing, so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        deriving.join()
        pytest.fail(f"derive_project waited on .git/{name}")
    assert found[0].identity == str(repository.resolve())
