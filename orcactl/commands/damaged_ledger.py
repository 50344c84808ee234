"""`orcactl inspect` of a project whose ledger orcad cannot read: projects.inspect then answers
with the damage alone, but the project still has its jobs, its files and the Markdown view of
the ledger as it was last written. What inspect shows of those, read as they are on disk."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from orcactl.approval import shell_word
from protocol.errors import RemoteError
from protocol.types import ProjectSummary

LEDGER = "candidates.jsonl"  # orcad.capture.ledger's file name
PROJECT_FILE = "project.json"  # orcad.capture.projects' file name
MARKDOWN_VIEW = "auto-memory.md"  # the ledger's readable view, rebuilt at each ledger write
# far above the view of a full ledger (128 facts of at most 400 characters), so only a file
# that is no view is cut
MARKDOWN_VIEW_MAX_BYTES = 1 << 20


def damaged_ledger(error: RemoteError) -> Path | None:
    """The ledger a projects.inspect failed on (damaged or unreadable), else None."""
    path = error.error.data.get("path")
    if error.kind != "storage" or not isinstance(path, str):
        return None
    return Path(path) if Path(path).name == LEDGER else None


def move_aside(path: Path) -> str:
    """The command that moves a damaged file aside, quoted to paste into a shell."""
    return f"mv {shell_word(str(path))} {shell_word(f'{path}.damaged')}"


def not_read(path: Path, problem: str) -> bool:
    """Whether `problem` says that `path` could not be read (its permissions, a directory on
    the way orcad may not enter) rather than that what it holds is damaged."""
    return f"cannot read {path}:" in problem


def make_readable(path: Path) -> str:
    """What to do about a file orcad could not read, which may well be intact: moving it aside
    would give up what it holds for a fault that lies elsewhere."""
    return (
        f"{path} could not be read, which says nothing of what it holds, so do not move it "
        f"aside: make it readable and writable for yourself again (chmod u+rw "
        f"{shell_word(str(path))}; chmod u+rwx {shell_word(str(path.parent))}) or fix what the "
        "message names; orcad reads it again at its next use"
    )


def written_by_newer(path: Path, problem: str) -> bool:
    """Whether `problem` says that a newer orcad wrote `path` (orcad.capture.ledger's words):
    its memory is whole, for that version to read. Only the start of the problem counts: a
    damaged ledger's problem quotes what it read there, a field's name among it."""
    return problem.startswith(
        f"automatic-memory ledger {path} was written by a newer orcad (format "
    )


def job_written_by_newer(path: str | Path, problem: str) -> bool:
    """Whether `problem` says that a newer orcad wrote the job file at `path`
    (orcad.capture.jobstore's words), from its start: a damaged job file's problem quotes the
    format it read there."""
    return problem.startswith(f"job file {path} was written by a newer orcad (format ")


def ledger_fix(ledger: Path, problem: str = "") -> str:
    """What to do about a ledger orcad cannot read (README, Automatic memory); doctor gives
    the same."""
    if not_read(ledger, problem):
        return make_readable(ledger)
    if written_by_newer(ledger, problem):
        return (
            f"{ledger} is not damaged, so do not move it aside: install the newer orcad again "
            "(pip install --upgrade) and restart orcad; until then this project's automatic "
            "memory is held as it is and its jobs wait"
        )
    return (
        f"move it aside ({move_aside(ledger)}): automatic memory starts again for this project "
        "with an empty ledger and its held jobs run again; the moved file keeps what it held"
    )


def project_file_fix(project_file: Path, problem: str = "") -> str:
    """What to do about a project.json orcad cannot read; doctor gives the same."""
    if not_read(project_file, problem):
        return make_readable(project_file)
    return (
        f"{move_aside(project_file)} (it only records where the project was seen; the next "
        "session opened in it writes it again)"
    )


def damaged_project(
    project_id: str, directory: Path, summary: ProjectSummary | None, problem: str
) -> dict[str, Any]:
    """The project as projects.list knows it (--json's `project`, as inspect's)."""
    return {
        "id": project_id,
        "identity": summary.identity if summary is not None else "",
        "last_seen_cwd": summary.last_seen_cwd if summary is not None else None,
        "path": str(directory),
        "corrupt": True,
        "problem": summary.problem if summary is not None and summary.problem else problem,
    }


def list_files(directory: Path) -> list[dict[str, Any]]:
    """The project directory's entries as they are (links not followed): name, type, size."""
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return []
    files = []
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed meanwhile
        files.append({"name": entry.name, **_kind(info)})
    return files


def _kind(info: os.stat_result) -> dict[str, Any]:
    if stat.S_ISREG(info.st_mode):
        return {"type": "file", "bytes": info.st_size}
    if stat.S_ISDIR(info.st_mode):
        return {"type": "directory", "bytes": None}
    if stat.S_ISLNK(info.st_mode):
        return {"type": "symlink", "bytes": None}
    return {"type": "other", "bytes": None}


def read_markdown_view(path: Path) -> dict[str, Any]:
    """auto-memory.md as it is, never through a link and never waiting on a FIFO."""
    view: dict[str, Any] = {"path": str(path), "text": None, "problem": None}
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        view["problem"] = _unreadable(exc)
        return view
    with os.fdopen(descriptor, "rb") as view_file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            view["problem"] = "not a regular file; not read"
            return view
        try:
            data = view_file.read(MARKDOWN_VIEW_MAX_BYTES + 1)
        except OSError as exc:
            view["problem"] = _unreadable(exc)
            return view
    if len(data) > MARKDOWN_VIEW_MAX_BYTES:
        view["problem"] = f"longer than {MARKDOWN_VIEW_MAX_BYTES} bytes; its start is shown"
    view["text"] = data[:MARKDOWN_VIEW_MAX_BYTES].decode("utf-8", "replace")
    return view


def _unreadable(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "missing"
    if exc.errno == errno.ELOOP:
        return "a symbolic link; not read"
    return f"cannot be read: {exc.strerror}"


def file_line(file: dict[str, Any]) -> str:
    if file["type"] == "file":
        return f"{file['name']} ({file['bytes']} bytes)"
    if file["type"] == "directory":
        return f"{file['name']}/"
    return f"{file['name']} ({file['type']})"
