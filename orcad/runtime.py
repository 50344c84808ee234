"""The runtime directory, the single-instance lock and the listening socket's path.

The runtime dir holds only the socket and its lock; the memory root holds the lock that keeps
one daemon per memory, and a small file naming the daemon that holds it (pid and socket).
The runtime dir must be a real directory owned by us and private (0700); a directory
platformdirs chose under /tmp is checked as strictly, together with its parent, since anyone
can create names there.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shlex
import socket
import stat
import time
from pathlib import Path

import filelock
import msgspec

from orcad.errors import StartupError
from orcad.limits import HOLDER_PING_TIMEOUT_S, SOCKET_PROBE_TIMEOUT_S, STOPPING_HOLDER_WAIT_S
from orcad.paths import Paths
from orcad.regular_files import read_regular_file

PRIVATE_DIR = 0o700


def _check_owned_private(path: Path, *, fix_mode: bool) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise StartupError(f"{path} vanished while the daemon was starting") from None
    if stat.S_ISLNK(info.st_mode):
        raise StartupError(f"refusing to use {path}: it is a symbolic link (remove it and retry)")
    if not stat.S_ISDIR(info.st_mode):
        raise StartupError(f"refusing to use {path}: it is not a directory")
    if info.st_uid != os.getuid():
        raise StartupError(
            f"refusing to use {path}: it is owned by uid {info.st_uid}, not by you ({os.getuid()})"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        if not fix_mode:
            raise StartupError(
                f"refusing to use {path}: mode {stat.S_IMODE(info.st_mode):o} lets others in "
                f"(chmod 700 {path})"
            )
        os.chmod(path, PRIVATE_DIR)


def _under_tmp(path: Path) -> bool:
    tmp = Path("/tmp")  # noqa: S108 - platformdirs' fallback location, checked strictly
    return path == tmp or tmp in path.parents


def check_home_directory(home: Path) -> None:
    """orca's home must be a directory when it exists: anything else there would only show as
    errors about paths inside it (config.toml, memory/) that name no cause."""
    try:
        info = home.stat()
    except FileNotFoundError:
        if home.is_symlink():  # made at start otherwise; a link to nowhere cannot be
            raise StartupError(
                f"{home} (ORCA_HOME) is a symbolic link to {os.readlink(home)}, which does not "
                "exist (a drive not mounted?); create that directory or set ORCA_HOME to one"
            ) from None
        return
    except NotADirectoryError:
        raise StartupError(
            f"{home} (ORCA_HOME) cannot be a directory: a path above it is not a directory"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        what = _file_kind(info.st_mode)
        raise StartupError(
            f"{home} (ORCA_HOME) is {what}, not a directory; move it away or set ORCA_HOME to "
            "a directory"
        )
    check_not_shared(home, "ORCA_HOME")


def check_not_shared(directory: Path, role: str) -> None:
    """A directory orcad keeps memory in (ORCA_HOME, the memory root, the deliberate memory's
    directory) must be the user's and closed to other users' writes, when it exists: whoever
    can add names to it can put a symbolic link where orcad writes (`user.md` naming the
    user's `~/.bashrc`, which `remember` would then rewrite) or a database of their own in
    place of the user's. Links are followed: the directory they lead to is what is checked."""
    try:
        info = directory.stat()
    except FileNotFoundError:
        return  # made private by orcad when it is needed
    if not stat.S_ISDIR(info.st_mode):
        return  # said where it is made, naming what is there instead
    if info.st_uid != os.getuid():
        raise StartupError(
            f"refusing to use {directory} ({role}): it is owned by uid {info.st_uid}, not by "
            f"you ({os.getuid()})"
        )
    if info.st_mode & stat.S_IWOTH:
        raise StartupError(
            f"refusing to use {directory} ({role}): mode {stat.S_IMODE(info.st_mode):o} lets "
            f"every user write in it (chmod o-w {directory})"
        )


def make_memory_root(root: Path) -> None:
    """The memory root, made 0700 when missing. What is in its place (or a missing parent's)
    instead is named: mkdir's own words ("File exists") give no cause, least of all for a link
    to a drive not mounted."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError as exc:
        in_the_way = Path(exc.filename or root)
        # "cannot start:" as orcad says of every path it cannot make
        what = f"cannot start: {in_the_way}" + (" (the memory root)" if in_the_way == root else "")
        if in_the_way.is_symlink():
            raise StartupError(
                f"{what} is a symbolic link to {os.readlink(in_the_way)}, which does not exist "
                "(a drive not mounted?) or leads back to the link; create that directory or "
                "remove the link"
            ) from None
        raise StartupError(
            f"{what} is {_file_kind(in_the_way.lstat().st_mode)}, not a directory; move it "
            "away (orcad makes the directory)"
        ) from None


def _file_kind(mode: int) -> str:
    """What a path that is no directory is, for a message that says so."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def prepare_runtime_dir(paths: Paths) -> None:
    """Create the runtime dir 0700 (and a /tmp fallback parent), refusing unsafe ones."""
    runtime = paths.runtime_dir
    if paths.socket_from_env:
        # The caller chose the socket's directory: create it if missing, never loosen or tighten
        # a directory we did not create, but refuse one that is a symlink or someone else's.
        if not runtime.exists() and not runtime.is_symlink():
            with contextlib.suppress(FileExistsError):  # another start made it meanwhile
                runtime.mkdir(mode=PRIVATE_DIR, parents=True)
        info = runtime.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise StartupError(f"refusing to use {runtime}: it is a symbolic link")
        if info.st_uid != os.getuid():
            raise StartupError(f"refusing to use {runtime}: it is owned by uid {info.st_uid}")
        if not stat.S_ISDIR(info.st_mode):  # the socket and its lock file go in it
            raise StartupError(f"refusing to use {runtime}: it is not a directory")
        return
    if _under_tmp(runtime.parent) and runtime.parent != Path("/tmp"):  # noqa: S108
        with contextlib.suppress(FileExistsError):
            runtime.parent.mkdir(mode=PRIVATE_DIR)
        _check_owned_private(runtime.parent, fix_mode=False)
    with contextlib.suppress(FileExistsError):
        runtime.mkdir(mode=PRIVATE_DIR, parents=True)
    _check_owned_private(runtime, fix_mode=True)


class InstanceLock:
    """Held for the daemon's whole life: one daemon per memory root (whatever its socket) and
    one per socket path. A second daemon fails at once, naming the first, unless the first no
    longer serves its socket: a stopping daemon removes its socket first and holds the lock
    until its stores are closed, so a start right after a stop (`orcactl` starting one on
    demand, a restart) waits up to STOPPING_HOLDER_WAIT_S for it rather than failing."""

    def __init__(self, paths: Paths) -> None:
        self._paths = paths
        self._root_lock = filelock.FileLock(str(paths.instance_lock), mode=0o600)
        self._socket_lock = filelock.FileLock(str(paths.lock_file), mode=0o600)
        self._held: os.stat_result | None = None  # the lock file the lock is on
        self._kept: list[int] = []  # descriptors locking lock files made again (see `keep`)

    def acquire(self) -> None:
        make_memory_root(self._paths.memory_root)
        check_not_shared(self._paths.memory_root, "the memory root")
        try:
            self._root_lock.acquire(timeout=0)
        except filelock.Timeout:
            holder = read_instance(self._paths.instance_file)
            if not self._stopped_serving(holder):
                # a holder that had only just taken the lock names itself while it is waited for
                holder = holder or read_instance(self._paths.instance_file)
                who = f"pid {holder.pid}, serving {holder.socket}" if holder else "another process"
                raise StartupError(
                    f"another orcad is already running on the memory in {self._paths.memory_root} "
                    f"({who}); stop it first, or set ORCA_HOME to run a daemon with separate memory"
                ) from None
        self._refuse_a_named_holder_that_serves()
        try:
            self._socket_lock.acquire(timeout=0)
        except filelock.Timeout:
            self._root_lock.release()
            raise StartupError(
                f"another orcad is serving {self._paths.socket} with other memory; stop it "
                "first or set ORCA_SOCKET to another path"
            ) from None
        self._held = os.stat(self._paths.instance_lock)
        self._refuse_a_directory_for_the_instance_file()
        self._write_instance_file()

    def _refuse_a_directory_for_the_instance_file(self) -> None:
        """A directory at orcad.pid (or the temporary file it is written through) cannot be
        replaced by the file, and the rename would only say "Is a directory". What is in it is
        not orcad's to delete: the start is refused, naming it and what to do."""
        blocked = instance_file_blocked(self._paths)
        if blocked is not None:
            self.release()
            problem, advice = blocked
            raise StartupError(f"refusing to use {problem}; {advice}")

    def _write_instance_file(self) -> None:
        write_private_atomically(
            self._paths.instance_file,
            msgspec.json.encode(Instance(pid=os.getpid(), socket=str(self._paths.socket))),
        )

    def keep(self) -> bool:
        """Make the lock file and the instance file again when they are gone (the memory root
        deleted whole, `rm -rf`, while the daemon runs): without them a daemon started on
        another socket would find the memory free and work on it beside this one. Whether
        anything was made again. Blocking: a few system calls when nothing is missing.

        The new lock file is locked with flock, as filelock locks, on a descriptor kept open
        until `release` or the next one made; it is never removed by this daemon, so a start
        that makes it at the same moment locks the same file. OSError when the lock cannot be
        taken or written."""
        made = False
        try:
            now: os.stat_result | None = os.stat(self._paths.instance_lock)
        except FileNotFoundError:
            now = None
        if now is None or self._held is None or not os.path.samestat(now, self._held):
            make_memory_root(self._paths.memory_root)
            descriptor = os.open(
                self._paths.instance_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(descriptor)
                raise
            # a lock file made again before is gone or replaced too: its descriptor locks a
            # file no daemon can open any more, and deleting the lock file again and again
            # would otherwise pile them up
            for replaced in self._kept:
                os.close(replaced)
            self._kept = [descriptor]
            self._held = os.fstat(descriptor)
            made = True
        if made or not self._paths.instance_file.exists():
            self._write_instance_file()
            made = True
        return made

    def _refuse_a_named_holder_that_serves(self) -> None:
        """The lock was free, yet the instance file may name a daemon that still runs and
        serves its socket: its lock file was deleted (or replaced) while it ran, and the lock
        taken here is on another file. Two daemons would then work on one memory."""
        holder = read_instance(self._paths.instance_file)
        if holder is None or holder.pid == os.getpid() or not _process_exists(holder.pid):
            return
        if not answers_as(Path(holder.socket), holder.pid):
            # it stopped (or was killed) and left the file behind, and its pid went to another
            # process: a socket that merely accepts (systemd's, which this start inherits) is
            # not that daemon serving
            return
        self._root_lock.release()
        raise StartupError(
            f"another orcad is already running on the memory in {self._paths.memory_root} (pid "
            f"{holder.pid}, serving {holder.socket}), though its lock file "
            f"{self._paths.instance_lock} was deleted or replaced; stop it first (a restart "
            "makes the lock file again), or set ORCA_HOME to run a daemon with separate memory"
        )

    def _stopped_serving(self, holder: Instance | None) -> bool:
        """Whether the holder, not serving its socket, let go of the lock within
        STOPPING_HOLDER_WAIT_S (then the lock is ours). A holder that serves it, or starts to
        (a daemon starting at the same moment), is running: no wait. A holder not named yet has
        only just taken the lock (a start racing ours): it writes the instance file next, so it
        is read again rather than taken for a daemon that runs."""
        deadline = time.monotonic() + STOPPING_HOLDER_WAIT_S
        while time.monotonic() < deadline:
            holder = holder or read_instance(self._paths.instance_file)
            if holder is not None and socket_is_live(Path(holder.socket)):
                return False
            try:
                self._root_lock.acquire(timeout=0.1)
            except filelock.Timeout:
                continue
            return True
        return False

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            holder = read_instance(self._paths.instance_file)
            if holder is not None and holder.pid == os.getpid():
                self._paths.instance_file.unlink()
        self._socket_lock.release()
        self._root_lock.release()
        for descriptor in self._kept:
            os.close(descriptor)  # (its flock goes with it)
        self._kept.clear()


class Instance(msgspec.Struct, frozen=True):
    pid: int
    socket: str


def instance_file_blocked(paths: Paths) -> tuple[str, str] | None:
    """What stops orcad.pid from being written, and what to do, when a directory stands at
    it or at the temporary file it is written through (a start is refused; doctor says the
    same); None when nothing does."""
    path = paths.instance_file
    for odd in (path, path.with_name(path.name + ".tmp")):
        try:
            is_directory = stat.S_ISDIR(odd.lstat().st_mode)
        except OSError:  # none there, or nothing that stops the write
            continue
        if is_directory:
            return (
                f"{odd}: it is a directory, where orcad writes its pid and socket",
                f"move it aside (mv {shlex.quote(str(odd))} "
                f"{shlex.quote(f'{odd}.not-a-file')}) and start orcad again",
            )
    return None


def write_private_atomically(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all. A write that fails (a full disk) leaves no temporary
    file behind, and its error names `path`. Whatever stands at the temporary name (a crash's
    leftover, a FIFO, a symbolic link) is removed, not opened: the file is made there anew,
    so a FIFO cannot hold the write and a link cannot send it elsewhere. Only one writer:
    call with the instance lock held."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(tmp, flags, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
        finally:
            os.close(descriptor)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


# an instance file is one short JSON object: anything longer is not one
INSTANCE_MAX_BYTES = 4096


def read_instance(path: Path) -> Instance | None:
    """The daemon the instance file names; None when there is none to be read. Only a regular
    file is read (a FIFO put there would hold a start until a writer came, and SIGTERM with
    it), and only its first INSTANCE_MAX_BYTES, as the clients read it."""
    try:
        data = read_regular_file(path, INSTANCE_MAX_BYTES + 1, follow_symlinks=False)
        if len(data) > INSTANCE_MAX_BYTES:
            return None
        return msgspec.json.decode(data, type=Instance)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _process_exists(pid: int) -> bool:
    if pid <= 0:  # (0 and below would name process groups)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process has that pid
        return True
    return True


def answers_as(path: Path, pid: int) -> bool:
    """Whether an orcad on this Unix socket answers a ping, within HOLDER_PING_TIMEOUT_S, as
    process `pid`."""
    from protocol.client import Client, ProtocolViolation  # noqa: PLC0415  (rarely needed)
    from protocol.errors import RemoteError  # noqa: PLC0415
    from protocol.types import PingResult  # noqa: PLC0415

    try:
        with Client(str(path), timeout=HOLDER_PING_TIMEOUT_S) as client:
            answer = client.call("daemon.ping", result_type=PingResult)
    except (OSError, RemoteError, ProtocolViolation, msgspec.MsgspecError):
        return False
    return answer.pid == pid


def socket_is_live(path: Path) -> bool:
    """Does something accept connections on this Unix socket path?"""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(SOCKET_PROBE_TIMEOUT_S)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as exc:
        # Anything but "nobody listens" (a timeout, say) is treated as alive: never unlink it.
        return exc.errno not in (errno.ECONNREFUSED, errno.ENOENT)
    finally:
        probe.close()
    return True


def clear_stale_socket(path: Path) -> None:
    """Remove a socket file left by a killed daemon; never a live one or a non-socket."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise StartupError(f"refusing to replace {path}: it exists and is not a socket")
    if socket_is_live(path):
        raise StartupError(f"another process is serving on {path}; not replacing a live socket")
    path.unlink()


def bind_private_socket(path: Path) -> socket.socket:
    """A listening Unix socket whose file is 0600 from the moment it exists (umask at bind)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot bind {path}: {exc.strerror or exc}") from exc
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(socket.SOMAXCONN)
    return sock
