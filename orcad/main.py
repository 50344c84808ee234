"""`orcad`: run the daemon in the foreground until SIGTERM, SIGINT or SIGHUP (orcad.entry is
the executable, which imports this module)."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import os
import signal
import socket as stdlib_socket
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog
import trio

from orcad import __version__, limits
from orcad.activation import activated_socket, listening_path
from orcad.app import Daemon, install_features
from orcad.c_heap import keep_releasing_freed_memory
from orcad.config import likely_meant, load_config
from orcad.entry import main, stop_signals
from orcad.errors import StartupError
from orcad.journal import configure_journal_logging, stderr_is_journal
from orcad.log import configure_logging, say
from orcad.notify import Notifier
from orcad.paths import (
    SHORTER_SOCKET,
    Paths,
    launchd_log_path,
    resolve_paths,
    socket_path_problem,
)
from orcad.rpc import Dispatcher
from orcad.runtime import (
    InstanceLock,
    bind_private_socket,
    check_home_directory,
    check_not_shared,
    clear_stale_socket,
    prepare_runtime_dir,
)
from orcad.server import Server
from orcad.supervision import Supervisor

log = structlog.get_logger("orcad")

# The console script an install wrote before orcad.entry was the executable says `from
# orcad.main import main`: it runs orcad until the install is made again.
__all__ = ["main", "run"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="orcad",
        description="Per-user memory daemon for coding agents. Runs in the foreground; "
        "logs JSON lines to stderr; stops cleanly on SIGTERM, SIGINT or SIGHUP.",
    )
    parser.add_argument(
        "--socket",
        help="socket path (default: $ORCA_SOCKET, else orca/orcad.sock in $XDG_RUNTIME_DIR or, "
        "without it, in the platform's runtime directory; `orcactl status` shows it)",
    )
    parser.add_argument("--version", action="version", version=f"orcad {__version__}")
    return parser.parse_args(argv)


class Listening:
    """The listening socket and how to clean it up: we remove only a socket file we bound."""

    def __init__(self, sock: stdlib_socket.socket, path: Path, *, owned: bool) -> None:
        self.sock = sock
        self.path = path
        self._inode = path.stat().st_ino if owned else None

    def remove_socket_file(self) -> None:
        if self._inode is None:
            return
        with contextlib.suppress(FileNotFoundError):
            if self.path.stat().st_ino == self._inode:
                self.path.unlink()


class StopSignals:
    """The stop signals (orcad.entry.stop_signals) from the start of `run` until `serve` listens
    for them: noted rather than acted on, and passed on once it does. Their default actions
    would end orcad where it stands: a socket it bound left behind, and for Ctrl-C a traceback."""

    def __init__(self) -> None:
        self.signals = stop_signals()
        self.noted: list[int] = []
        for signum in self.signals:
            signal.signal(signum, self._note)

    def _note(self, signum: int, _frame: object) -> None:
        self.noted.append(signum)

    def pass_on(self) -> None:
        """Raise the noted signals again, for the receiver `serve` has installed by now."""
        for signum in self.noted:
            signal.raise_signal(signum)

    def ignore(self) -> None:
        """orcad has stopped: a stop signal now would only cut its exit short, and the handler
        before `run` (orcad.entry's, which exits 0) would replace its exit status."""
        for signum in self.signals:
            signal.signal(signum, signal.SIG_IGN)


def inherited_or_bindable(paths: Paths) -> stdlib_socket.socket | None:
    """The service manager's socket when it passed one; else None, once the socket path is
    known to fit a Unix socket. Asked first, before orcad makes anything, so that a path too
    long leaves no runtime directory or lock behind."""
    inherited = activated_socket(os.environ, os.getpid())
    if inherited is None:
        problem = socket_path_problem(str(paths.socket))
        if problem is not None:  # bind would say only "AF_UNIX path too long", with no errno
            raise StartupError(f"{problem}; {SHORTER_SOCKET}")
    return inherited


def open_listening_socket(paths: Paths, inherited: stdlib_socket.socket | None) -> Listening:
    if inherited is not None:  # the service manager's socket: used as is, never unlinked
        return Listening(inherited, listening_path(inherited, paths.socket), owned=False)
    clear_stale_socket(paths.socket)
    return Listening(bind_private_socket(paths.socket), paths.socket, owned=True)


async def keep_instance_lock(
    lock: InstanceLock, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Background task: the lock file and orcad.pid made again within INSTANCE_LOCK_CHECK_S of
    their deletion (InstanceLock.keep), so that the memory stays this daemon's alone."""
    task_status.started()
    problem = None
    while True:
        await trio.sleep(limits.INSTANCE_LOCK_CHECK_S)
        try:
            made = await trio.to_thread.run_sync(lock.keep)
        except (OSError, StartupError) as exc:
            if str(exc) != problem:  # said once, not every check
                problem = str(exc)
                log.error("instance.lock_not_kept", error=problem)
            continue
        problem = None
        if made:
            log.warning("instance.lock_made_again")


async def serve(
    daemon: Daemon,
    listening: Listening,
    on_ready: Sequence[Callable[[], None]],
    on_stopping: Sequence[Callable[[], None]],
    noted: StopSignals,
) -> int:
    """Serve until a stop signal; the exit status (1 when a feature could not be installed).

    Accepting starts first, so that `daemon.ping` answers while the features are imported and
    their stores opened (off the event loop); any other request waits until they are in.
    """
    config = daemon.config.server
    server = Server(
        Dispatcher(daemon.router),
        config,
        on_connection_error=lambda message: daemon.record_error("connection", message),
    )
    daemon.connections = lambda: server.connections
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(listening.sock))
    status = 0
    with trio.open_signal_receiver(*noted.signals) as signals:
        noted.pass_on()  # a stop asked for while starting: served once ready, then stopped
        async with trio.open_nursery() as background:
            async with trio.open_nursery() as connections:
                accept_scope = trio.CancelScope()

                async def accept() -> None:
                    with accept_scope:
                        await server.serve(listener, connections)

                connections.start_soon(accept)
                try:
                    await trio.to_thread.run_sync(install_features, daemon)
                    await daemon.run_background(background)
                except Exception as exc:
                    why = startup_failure(exc)
                    log.error("daemon.startup_failed", error=why, exc_info=exc)
                    say(f"orcad: cannot start: {why}")
                    daemon.router.mark_failed(why)
                    status = 1
                else:
                    daemon.router.mark_ready()
                    log.info(
                        "daemon.ready",
                        socket=str(listening.path),
                        pid=os.getpid(),
                        version=__version__,
                    )
                    for hook in on_ready:
                        hook()
                    async for signum in signals:
                        log.info("daemon.stopping", signal=signal.Signals(signum).name)
                        break
                for hook in on_stopping:
                    hook()
                accept_scope.cancel()
                await listener.aclose()
                listening.remove_socket_file()
                with trio.move_on_after(limits.SHUTDOWN_GRACE_S):
                    await server.wait_drained()
                connections.cancel_scope.cancel()
            background.cancel_scope.cancel()
        await daemon.aclose()
    return status


def startup_failure(exc: Exception) -> str:
    """What stopped the start, for the user: the exception's words, or when it has none (a
    MemoryError, mostly) what it is."""
    if str(exc):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of memory (MemoryError) while the features were loaded"
    return type(exc).__name__


def run(argv: list[str] | None = None) -> int:
    """Run orcad until it is stopped; its exit status. The stop signals are left ignored when it
    returns: the process is about to exit (orcad.entry), and a late signal must not change how."""
    args = parse_args(argv)
    stop_signals = StopSignals()
    try:
        return _run(args, stop_signals)
    finally:
        stop_signals.ignore()


M_ARENA_MAX = -8  # glibc's mallopt parameter
MALLOC_ARENAS = 2


def limit_malloc_arenas() -> None:
    """Let the C heap make at most MALLOC_ARENAS arenas (glibc only), before any thread runs.
    glibc gives each new thread an arena of its own, up to eight per core, and the worker
    threads orcad starts and lets go leave freed memory in each of them: bench/soak.py over
    20 projects ended 9,000 requests at 185 MiB of RSS with glibc's default, 168 MiB with two
    arenas; bench/recall_cost.py's recall p50 at 10k records 1.02x that of glibc's default."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, MALLOC_ARENAS)
    except (OSError, AttributeError):  # not glibc
        pass


def _run(args: argparse.Namespace, stop_signals: StopSignals) -> int:
    limit_malloc_arenas()
    logger = None
    if stderr_is_journal(os.environ):
        configure_journal_logging()
    else:
        logger = configure_logging()
    notifier = Notifier.from_environ(os.environ)
    os.umask(0o077)  # every file and directory the daemon creates is private to the user
    if args.socket:
        os.environ["ORCA_SOCKET"] = os.path.abspath(args.socket)
    paths = resolve_paths()
    lock: InstanceLock | None = None
    inherited: stdlib_socket.socket | None = None
    listening: Listening | None = None
    try:
        inherited = inherited_or_bindable(paths)
        check_home_directory(paths.home)
        check_not_shared(paths.deliberate_db.parent, "the deliberate memory's directory")
        loaded = load_config(paths.config_file)
        for key in loaded.unknown_keys:
            log.warning(
                "config.unknown_key", key=key, path=loaded.path, likely_meant=likely_meant(key)
            )
        prepare_runtime_dir(paths)
        lock = InstanceLock(paths)
        lock.acquire()
        listening = open_listening_socket(paths, inherited)
        daemon = Daemon(paths=paths, loaded=loaded)
        daemon.run_in_background(functools.partial(keep_instance_lock, lock))
        daemon.run_in_background(keep_releasing_freed_memory)
        if logger is not None:
            # the one daemon of this home, so the one writer of its log (the one orcactl starts
            # it with, or the one launchd writes for `orcactl service install`); only once
            # started, so that the lines orcactl reads after a failed start stay where it looks
            logger.rotate_as(paths.home / "orcad.log", launchd_log_path())
    except (StartupError, OSError) as exc:  # OSError: a path it cannot create or open
        log.error("daemon.startup_failed", error=str(exc))
        notifier.status(f"failed to start: {exc}")
        say(f"orcad: {exc}" if isinstance(exc, StartupError) else f"orcad: cannot start: {exc}")
        if listening is not None:
            listening.remove_socket_file()
            listening.sock.close()
        elif inherited is not None:
            inherited.close()
        if lock is not None:
            lock.release()
        return 1
    supervisor = Supervisor(notifier, daemon)
    try:
        status = trio.run(
            serve, daemon, listening, [supervisor.ready], [supervisor.stopping], stop_signals
        )
    finally:
        listening.remove_socket_file()
        listening.sock.close()
        lock.release()
    log.info("daemon.stopped", status=status)
    return status
