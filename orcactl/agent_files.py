"""Reading and replacing the agents' configuration files for `orcactl integrate`.

A file is read only when it is a regular file (or a symlink to one); every place a change will
write is checked first; each changed file is backed up (`<file>.orca-backup-<time>`, 0600) and
replaced atomically, and a write that fails anyway puts back the files already written.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from orcactl.agent_configs import Unparseable
from orcactl.connect import CommandError
from orcad.regular_files import NotARegularFile, read_regular_file


@dataclass
class Change:
    path: Path
    before: str | None  # None: the file does not exist
    after: str

    @property
    def changed(self) -> bool:
        return (self.before or "") != self.after

    def diff(self) -> str:
        """A unified diff, as `diff -u` writes it: a line without its line end (a file's last,
        when the file does not end with one) is followed by the `\\ No newline at end of
        file` marker, so that the next line, or the next file's header, starts a line."""
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path),
        )
        return "".join(
            line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n"
            for line in lines
        )


def read_config(path: Path) -> str | None:
    """The file's text (None: no file there). A path whose real target is not a regular file (a
    FIFO, a device, a directory, a dangling symlink) is refused: it is never opened in a way that
    could block, and never replaced by a regular file."""
    try:
        status = os.stat(path)  # follows a symlink to what it names; opens nothing
    except FileNotFoundError:
        if os.path.islink(path):
            raise Unparseable(
                f"{path} is a symlink to {os.readlink(path)}, which does not exist"
            ) from None
        return None
    except OSError as exc:
        raise Unparseable(f"{path} cannot be read ({exc})") from None
    if not stat.S_ISREG(status.st_mode):
        raise Unparseable(f"{path} is not a regular file")
    try:
        # bytes, decoded: reading as text would turn the file's CRLF line endings into LF
        return read_regular_file(path).decode("utf-8")
    except FileNotFoundError:
        return None
    except NotARegularFile:  # it became one since the stat: the open did not wait
        raise Unparseable(f"{path} is not a regular file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Unparseable(f"{path} cannot be read ({exc})") from None


def _read_only(path: Path) -> bool:
    # no write bit at all is a choice even for root, whom os.access lets write anything
    return not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222


def _check_directory(path: Path, purpose: str) -> None:
    directory = path.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent  # the one that will hold the directories made for it
    if _read_only(directory) or not os.access(directory, os.X_OK):
        raise Unparseable(f"{path} cannot be written ({purpose} {directory} is read-only)")


def check_writable(path: Path, backed_up: bool) -> None:
    """Every place a change writes (the file, or the file a symlink names; the directory of its
    temporary copy; the directory of its backup, beside the path itself) is checked before
    anything is written: a read-only file or directory is the user's choice, not ours to
    override, and finding it halfway would leave the agent half connected."""
    real = Path(os.path.realpath(path))
    if real.exists() and _read_only(real):
        raise Unparseable(f"{path} is read-only")
    _check_directory(real, "its directory")
    if backed_up:  # written beside the path, which may be a symlink from elsewhere
        _check_directory(path, "its backup's directory")


def _backup_path(path: Path, stamp: str) -> Path:
    backup = path.with_name(f"{path.name}.orca-backup-{stamp}")
    number = 1
    while backup.exists():  # two runs within a second keep both backups
        number += 1
        backup = path.with_name(f"{path.name}.orca-backup-{stamp}-{number}")
    return backup


def _back_up(path: Path, stamp: str) -> Path:
    """A private copy (0600 whatever the file's mode: ~/.claude.json may hold credentials); a
    copy cut short (a full disk) is not left behind."""
    backup = _backup_path(path, stamp)
    descriptor = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(path.read_bytes())
    except BaseException:
        backup.unlink(missing_ok=True)
        raise
    return backup


def _replace(real: Path, data: bytes, mode: int, check: Callable[[], None] = lambda: None) -> None:
    """`real` holds `data` afterwards, or (any failure) is as it was: a temporary copy beside it
    is renamed over it, after `check` (last thing before the rename) passes."""
    descriptor, temporary = tempfile.mkstemp(dir=real.parent, prefix=".orca-")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        check()
        os.replace(temporary, real)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class ChangedMeanwhile(Exception):
    """A file is no longer what integrate read: another program (the agent itself, rewriting
    ~/.claude.json) wrote it in the meantime, and replacing it would lose that write."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} was changed by another program while integrate was writing it")
        self.path = path


def _check_unchanged(change: Change) -> None:
    try:
        now: bytes | None = read_regular_file(change.path)
    except FileNotFoundError:
        now = None
    if now != (None if change.before is None else change.before.encode("utf-8")):
        raise ChangedMeanwhile(change.path)


@dataclass(frozen=True)
class Written:
    """What one write did, enough to undo it."""

    change: Change
    backup: Path | None  # None: the file is new (or was removed, see `removed`)
    mode: int
    created: tuple[Path, ...] = ()  # directories made for it, outermost first
    removed: bool = False  # it held only orca's entries, and is gone


def _make_parents(directory: Path) -> tuple[Path, ...]:
    """`directory` and any missing parents made; those made, outermost first."""
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    made: list[Path] = []
    try:
        for path in reversed(missing):
            try:
                path.mkdir()
            except FileExistsError:  # another program made it meanwhile: not ours to remove
                continue
            made.append(path)
    except OSError:
        _remove_empty(tuple(made))
        raise
    return tuple(made)


def _remove_empty(created: tuple[Path, ...]) -> None:
    """The directories made for a file that was taken back out, innermost first, while empty:
    one that something else has put a file in since stays."""
    for path in reversed(created):
        try:
            path.rmdir()
        except OSError:
            return


def write(change: Change, stamp: str) -> Written:
    """Back the file up, then replace it atomically (or remove it when nothing is left in it:
    a JSON file that held only orca's entries), provided it still holds what was read.

    A symlink (a dotfiles checkout, say) stays a symlink: the file it names is replaced."""
    real = Path(os.path.realpath(change.path))
    created = _make_parents(real.parent)
    unchanged = partial(_check_unchanged, change)
    backup = None
    mode = 0o600
    after = change.after
    try:
        unchanged()
        if change.before is not None:
            backup = _back_up(change.path, stamp)
            mode = real.stat().st_mode & 0o777
        if backup is not None and not after and not change.path.is_symlink():
            unchanged()
            change.path.unlink()
            return Written(change, backup, mode, created, removed=True)
        else:
            if backup is not None and not after and change.path.suffix == ".json":
                after = "{}\n"  # a linked file is the user's: emptied, never deleted
            _replace(real, after.encode("utf-8"), mode, unchanged)
    except BaseException:
        if backup is not None:  # the file is as it was: its copy would only mislead
            backup.unlink(missing_ok=True)
        _remove_empty(created)
        raise
    return Written(change, backup, mode, created)


def _undo(written: Written) -> None:
    """The file as it was before `write`: its backup put back atomically, or a new file gone."""
    real = Path(os.path.realpath(written.change.path))
    if written.backup is None:
        real.unlink(missing_ok=True)
        _remove_empty(written.created)
    else:
        _replace(real, written.backup.read_bytes(), written.mode)
        written.backup.unlink()


def _undo_all(done: list[Written]) -> list[str]:
    """Every file written so far put back, last first; what could not be, as advice."""
    left = []
    for written in reversed(done):
        try:
            _undo(written)
        except OSError as exc:
            saved = written.backup or "nothing (it was new)"
            left.append(f"{written.change.path} ({exc.strerror or exc}; its backup: {saved})")
    return left


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[Callable[[], bool]]:
    """Ctrl-C noted rather than raised meanwhile (in the main thread, where Python handles
    signals); the function yielded says whether it came."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    asked: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: asked.append(signum))
    try:
        yield lambda: bool(asked)
    finally:
        signal.signal(signal.SIGINT, previous)


def _reason(failure: Exception) -> str:
    if isinstance(failure, ChangedMeanwhile):
        return "another program changed it meanwhile"
    return str(getattr(failure, "strerror", None) or failure)


def write_all(pending: list[Change], stamp: str) -> list[Written]:
    """All the changes, or (a write fails anyway: a full disk; a file changed since it was read)
    none: those already made are put back from their backups, and the error names the file that
    failed and why. So too when the user interrupts it (Ctrl-C): the interrupt is taken between
    two files, never inside one, the files written are put back and it goes on
    (KeyboardInterrupt)."""
    done: list[Written] = []
    with _interrupts_deferred() as interrupted:
        for change in pending:
            try:
                done.append(write(change, stamp))
            except (OSError, ChangedMeanwhile) as exc:
                left = _undo_all(done)
                if isinstance(exc, ChangedMeanwhile) and not left:
                    raise  # nothing changed: the caller may read the files again and retry
                outcome = (
                    f"these could not be put back: {'; '.join(left)}"
                    if left
                    else "nothing was changed (files already written were put back)"
                )
                raise CommandError(
                    f"{change.path} could not be written ({_reason(exc)}); {outcome}"
                ) from None
            if interrupted():
                left = _undo_all(done)
                if left:
                    print(
                        f"orcactl: interrupted; these could not be put back: {'; '.join(left)}",
                        file=sys.stderr,
                    )
                raise KeyboardInterrupt
    return [_settled(written) for written in done]


AGENT_FOLDERS = frozenset((".claude", ".codex"))  # the agents' own folders in a project or home


def _settled(written: Written) -> Written:
    """Once every write has been made: a file removed because it held only orca's entries
    leaves no backup (it would hold only those: `integrate` writes them again), nor the
    directory it was alone in (a project's `.claude` or `.codex`: `--remove` leaves the project
    as it was)."""
    if not written.removed or written.backup is None:
        return written
    with contextlib.suppress(OSError):  # a backup left behind is only clutter
        written.backup.unlink()
        folder = written.change.path.parent
        if folder.name in AGENT_FOLDERS:  # never the project's own (`.mcp.json` is in it)
            folder.rmdir()  # only when empty
    return replace(written, backup=None)
