"""Project identity: which per-project memory directory a workspace belongs to.

Spec, Storage: clones and worktrees with the same normalized Git origin share project memory;
a repository without an origin uses its canonical repository root; a non-Git directory its
canonical path. The project id is the sha256 hex of the identity string.

A normalized origin is `host/path` (`github.com/owner/repo`), or an absolute path for a local
origin (a `#` or `?` in it written `%23` and `%3F`: a path has neither a query nor a fragment).
Scheme, user info, port, query and fragment are dropped, the host is lower-cased, and
trailing slashes and `.git` suffixes removed, so the scp-like, https and ssh spellings of one
repository agree. Ports are dropped because the same repository is commonly served over ssh
on a custom port and over https on the default one. A remote helper's `<transport>::<address>`
is read whole, as it always was (so its project keeps its id). No part of a password may reach
the identity, which project.json keeps and projects.list shows: one a URL holds where Git
would not look for it (scp-like `user:password@host:path`, a helper's address, a `/` in the
password) is dropped or makes the origin unusable; so is a helper address's user name that the
secret detector reads as a credential (`hg::https://<token>@host/repo`), or that is shaped as a
token (40 hex digits, a classic GitHub token the detector cannot tell from a hash).

The origin URL is read from the repository's config file directly (no git binary). `include`
directives and `url.<base>.insteadOf` rewrites are not followed. Only regular files are read,
and only their first GIT_FILE_MAX_BYTES: a FIFO or a device under `.git` (an unpacked archive
may hold anything) is as good as absent.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from orcad.limits import GIT_FILE_MAX_BYTES
from orcad.regular_files import read_regular_file
from orcad.workspace import planted_git


@dataclass(frozen=True, slots=True)
class ProjectIdentity:
    id: str  # sha256 of `identity`; the project's directory name
    identity: str
    root: str


def derive_project(root: Path) -> ProjectIdentity:
    """The identity of the workspace rooted at `root` (a Git top level or a plain directory)."""
    canonical_root = Path(os.path.realpath(root))
    identity = str(canonical_root)
    common_dir = None if _planted(canonical_root) else git_common_dir(canonical_root)
    if common_dir is not None:
        origin = _origin_identity(common_dir, canonical_root)
        identity = origin if origin is not None else str(_repository_root(common_dir))
    return ProjectIdentity(id=project_id(identity), identity=identity, root=str(canonical_root))


def _planted(root: Path) -> bool:
    """Whether the `.git` in `root` is one the workspace passes over (another user's, in a
    directory everyone may write in): its origin must not choose the project either."""
    try:
        return planted_git(root)
    except OSError:  # no .git there to look at, or no root: git_common_dir finds nothing either
        return False


def project_id(identity: str) -> str:
    return hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()


# --- origin normalisation (pure) ------------------------------------------------------------

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://(.*)\Z", re.DOTALL)
# `<transport>::<address>`, a URL a remote helper handles (`hg::https://host/repo`)
_HELPER = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*::(.*)\Z", re.DOTALL)
# `user:password@host:path`: Git itself reads `user` as the host of such an scp-like URL, but
# the password is in it all the same
_SCP_LIKE_PASSWORD = re.compile(r"\A[^@/:\[\]]*:[^/]*@(?=[^@/:\[\]]+:)")
_REPEATED_SLASHES = re.compile(r"/{2,}")
_HOST = re.compile(r"\[[0-9a-z:.%]+\]|[^\s/\\@\[\]:?#]+")


def normalize_origin(url: str) -> str:
    """The normalized identity of a Git remote URL; ValueError when it names no repository.

    Idempotent: a normalized origin normalizes to itself.
    """
    text = url.strip()
    helper = _HELPER.match(text) is not None
    if helper:
        text = _helper_url(text)  # its address's password already dropped
    elif text.startswith("/"):
        # a path, not a URL: a `#` or `?` in it is part of a directory's name (`c#-tools`), and
        # cutting there would give repositories named alike one project; written as `%23` and
        # `%3F`, so that no identity holds either
        return _local_path(text.replace("#", "%23").replace("?", "%3F"))
    text = text.split("#", 1)[0].split("?", 1)[0]
    scheme_match = _SCHEME.match(text)
    if scheme_match is not None:
        scheme, rest = scheme_match.group(1).lower(), scheme_match.group(2)
        authority, _, path = rest.partition("/")
        host = _host_of(authority)
        if scheme == "file" and host in ("", "localhost"):
            return _local_path("/" + path)
    else:
        # not again for a helper's URL: its `<transport>:` would be taken for a user and the
        # `:user` of its address (`gcrypt::git@host:repo`) for a password
        without_password = text if helper else _SCP_LIKE_PASSWORD.sub("", text, count=1)
        host_part, path = _split_scp_like(without_password)
        host = _host_of(host_part)
    if not _HOST.fullmatch(host):
        raise ValueError(f"origin {url!r} names no valid host")
    path = _trimmed_path(path)
    if not path:
        raise ValueError(f"origin {url!r} names no repository path")
    return f"{host}/{path}"


def _helper_url(text: str) -> str:
    """A remote helper's `<transport>::<address>` (`hg::https://host/repo`,
    `codecommit::us-east-1://repo`) as orcad has always named its repository, read whole as an
    scp-like URL (`hg/:https:/host/repo`), so that such a project keeps its id; only a password
    its address holds is dropped first, and a user name that is itself a credential (a token
    given as the user, `https://<token>@host/repo`, as GitHub takes it). ValueError for an
    address that is a command (`ext::`) or another helper's URL."""
    transport, _, address = text.partition("::")
    address = address.strip()
    if transport.lower() == "ext":
        raise ValueError("an ext:: remote is a command to run, not a place")
    if _HELPER.match(address):
        raise ValueError("a remote helper's address is no other helper's URL")
    scheme = _SCHEME.match(address)
    if scheme is None:
        address = _SCP_LIKE_PASSWORD.sub("", address, count=1)
        host_part, colon, path = address.partition(":")
        user, at, host = host_part.rpartition("@")
        if colon and at and "/" not in host_part and _credential_user(user):
            return f"{transport}::{host}{colon}{path}"
        return f"{transport}::{address}"
    authority, slash, path = scheme.group(2).partition("/")
    _host_of(authority)  # ValueError for a port that is no number: a `/` in a password
    user, at, host = authority.rpartition("@")
    if at and (":" in user or _credential_user(user)):
        return f"{transport}::{scheme.group(1)}://{host}{slash}{path}"
    return text


# a user name shaped as only a key is: 32 or more hex digits (a classic 40-digit GitHub token),
# or 32 or more letters and digits, with a digit, a lower- and an upper-case letter among them
# (a name of words, `build-and-release-bot`, stays: its project keeps its id)
_HEX_USER = re.compile(r"[0-9A-Fa-f]{32,}")
_KEY_USER = re.compile(r"(?=[^0-9]*[0-9])(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])[A-Za-z0-9]{32,}")


def _credential_user(user: str) -> bool:
    """Whether a helper address's user name is a credential: one the secret detector reads as
    such, or one shaped as a token. Names such as `git` or `alice` stay (their projects keep
    their ids)."""
    if _HEX_USER.fullmatch(user) or _KEY_USER.fullmatch(user):
        return True
    # imported at the first such address, not with this module: the detector's modules take a
    # good part of orcad's imports before it answers its first request
    from orcad.secrets import contains_secret  # noqa: PLC0415

    return contains_secret(user)


def _split_scp_like(text: str) -> tuple[str, str]:
    """`[user@]host:path` or an already normalized `host/path`."""
    if text.startswith("[") or "@[" in text.split("/", 1)[0]:
        close = text.find("]")
        if close < 0:
            raise ValueError(f"origin {text!r} has an unclosed IPv6 bracket")
        end = close + 1
        separator = text[end : end + 1]
        if separator not in (":", "/"):
            raise ValueError(f"origin {text!r} is not a repository URL")
        return text[:end], text[end + 1 :]
    colon, slash = text.find(":"), text.find("/")
    if colon >= 0 and (slash < 0 or colon < slash):
        return text[:colon], text[colon + 1 :]
    if slash > 0:
        return text[:slash], text[slash + 1 :]
    raise ValueError(f"origin {text!r} is not a repository URL")


def _host_of(authority: str) -> str:
    """The lower-cased host of `[user[:password]@]host[:port]`. ValueError for a port that is
    no number: that is `user:password` with a `/` in the password, and what follows the `/`
    is no repository path."""
    host = authority.rpartition("@")[2].strip()
    if host.startswith("["):
        close = host.find("]")
        port = host[close + 1 :].removeprefix(":") if close >= 0 else ""
        host = host[: close + 1] if close >= 0 else host
    else:
        host, _, port = host.partition(":")
    if port and not (port.isascii() and port.isdigit()):
        raise ValueError("the origin's port is not a number")  # not quoted: it may be a password
    return host.lower()


def _trimmed_path(path: str) -> str:
    """Repeated slashes collapsed, surrounding slashes and `.git` suffixes removed."""
    while True:
        trimmed = _REPEATED_SLASHES.sub("/", path.strip()).strip("/")
        trimmed = trimmed.removesuffix(".git")
        if trimmed == path:
            return trimmed
        path = trimmed


def _local_path(path: str) -> str:
    trimmed = _trimmed_path(path)
    if not trimmed:
        raise ValueError("a local origin must name a directory below /")
    return "/" + trimmed


# --- reading the repository (I/O) -----------------------------------------------------------


def _read_git_file(path: Path) -> bytes:
    """The start of a regular file; OSError for anything else, which is never waited on."""
    return read_regular_file(path, GIT_FILE_MAX_BYTES)


def git_common_dir(work_tree: Path) -> Path | None:
    """The directory holding the repository's shared config, for a main worktree, a linked
    worktree (`.git` file pointing at `<main>/.git/worktrees/<name>`) or a submodule; None
    when there is none."""
    dot_git = work_tree / ".git"
    if dot_git.is_dir():
        git_dir = dot_git
    elif dot_git.is_file():
        try:
            first_line = _read_git_file(dot_git).decode("utf-8").splitlines()[0]
        except (OSError, UnicodeDecodeError, IndexError):
            return None
        if not first_line.startswith("gitdir:") or "\0" in first_line:  # no path holds a NUL
            return None
        git_dir = work_tree / first_line.removeprefix("gitdir:").strip()
    else:
        return None
    try:
        common = _read_git_file(git_dir / "commondir").decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        common = ""
    if "\0" in common:  # names no directory: as good as no commondir file
        common = ""
    resolved = Path(os.path.realpath(git_dir / common if common else git_dir))
    # a .git file or commondir naming a directory that is not there (a moved or deleted main
    # repository) makes no repository, as for Git: the path it names is no identity, and
    # unrelated directories naming the same missing one would share its project
    return resolved if os.path.isdir(resolved) else None  # False for any OSError too


def _repository_root(common_dir: Path) -> Path:
    """The main worktree of a repository whose common dir is `<root>/.git`; else the dir itself."""
    return common_dir.parent if common_dir.name == ".git" else common_dir


def _origin_identity(common_dir: Path, work_tree: Path) -> str | None:
    try:
        config_text = _read_git_file(common_dir / "config").decode("utf-8", errors="replace")
    except OSError:
        return None
    url = origin_url_from_config(config_text)
    if url is None:
        return None
    if _relative_local_path(url):  # relative to the work tree, as Git reads it
        url = os.path.normpath(work_tree / url)
    try:
        return normalize_origin(url)
    except ValueError:
        return None


def _relative_local_path(url: str) -> bool:
    """Whether Git reads a remote URL as a path relative to the work tree: `../upstream`, or
    one with a `/` and no scheme, helper or colon before that slash (`mirrors/app`). Taken for
    `host/path`, `github.com/owner/repo` (a scheme left out) would be the project of the real
    repository, and `mirrors/app` of every repository with that remote, wherever they are."""
    if url.startswith("."):
        return True
    if url.startswith(("/", "~")) or _SCHEME.match(url) or _HELPER.match(url):
        return False
    colon, slash = url.find(":"), url.find("/")
    return slash > 0 and (colon < 0 or slash < colon)


# --- git config parsing (pure) --------------------------------------------------------------

_SECTION = re.compile(r'\s*\[\s*([A-Za-z0-9.\-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\](.*)\Z', re.DOTALL)
_VARIABLE = re.compile(r"\s*([A-Za-z][A-Za-z0-9\-]*)\s*(?:=(.*))?\Z", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}


def origin_url_from_config(text: str) -> str | None:
    """The first `url` of `[remote "origin"]` in a git config file, or None."""
    in_origin = False
    lines = iter(text.splitlines())
    for raw_line in lines:
        line = raw_line
        section = _SECTION.match(line)
        if section is not None:
            name, subsection, line = section.group(1), section.group(2), section.group(3)
            in_origin = _is_origin_section(name, subsection)
        if not in_origin:
            continue
        variable = _VARIABLE.match(line)
        if variable is None or variable.group(1).lower() != "url":
            continue
        # a value continued over many lines is joined once: joining it line by line copied
        # it again at each line, minutes for a megabyte of one-character lines
        parts = []
        value = variable.group(2) or ""
        while _ends_with_continuation(value):
            parts.append(value[:-1])
            value = next(lines, "")
        url = _config_value("".join([*parts, value]))
        if url:
            return url
    return None


def _is_origin_section(name: str, subsection: str | None) -> bool:
    if subsection is not None:
        return name.lower() == "remote" and re.sub(r"\\(.)", r"\1", subsection) == "origin"
    return name.lower() == "remote.origin"  # the deprecated [remote.origin] spelling


def _ends_with_continuation(value: str) -> bool:
    trailing = len(value) - len(value.rstrip("\\"))
    return trailing % 2 == 1


def _config_value(raw: str) -> str:
    """A git config value: quotes removed, escapes decoded, comments and edge spaces dropped."""
    result: list[str] = []
    quoted = False
    pending_space = ""
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "\\" and index + 1 < len(raw):
            result.append(pending_space + _ESCAPES.get(raw[index + 1], raw[index + 1]))
            pending_space = ""
            index += 2
            continue
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "#;":
            break
        elif not quoted and char.isspace():
            if result:
                pending_space += char
        else:
            result.append(pending_space + char)
            pending_space = ""
        index += 1
    return "".join(result)
