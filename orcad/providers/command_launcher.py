"""Runs an extraction command, and ends its process group if orcad dies first.

orcad runs this file, not the command, as the leader of a new session:
`python -I -S command_launcher.py ORCAD_PID ARGV...`. It starts ARGV in the same process group
with stdin, stdout and stderr untouched (they carry the provider protocol), and exits as the
command did: with its exit status, or killed by its signal. orcad's timeout and cancellation
kill the whole group, this launcher with it. When orcad is gone first (SIGKILL, a crash), nobody
would read the answer or kill the group, so the launcher does: SIGTERM, then SIGKILL after
GRACE_S. On Linux it waits on pidfds of orcad and the command; elsewhere (or where pidfd_open is
refused) it wakes on SIGCHLD and checks its parent pid every PARENT_POLL_S.

Standard library only, run isolated and without site-packages, and no `typing` or `threading`
at run time: it starts in milliseconds and could not import orcad's dependencies if it tried.
"""

from __future__ import annotations

import os
import select
import sys
import time

# What is slow to import is left out: `typing` is for the type checker only, and `signal` is
# replaced by the C module it wraps, which has the same calls but not the enum module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from typing import Final, NoReturn
else:
    try:
        import _signal as signal
    except ImportError:  # not CPython
        import signal

CANNOT_RUN_STATUS: Final = 127  # what a shell exits with for a command it cannot run
GRACE_S: Final = 1.0  # between the group's SIGTERM and its SIGKILL once orcad is gone
PARENT_POLL_S: Final = 0.1  # how often the parent pid is checked where there is no pidfd
# Python ignores SIGPIPE (and SIGXFSZ); an ignored signal stays ignored across exec, so the
# command gets them back at their defaults, as subprocess.Popen does. (_GROUP_SIGNALS are
# ignored only after the command has started.)
_RESTORED_SIGNALS: Final = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name)
)
# Signals that reach the launcher as one of the group (a service manager stopping everything,
# `kill -- -PGID`): the command decides what they mean, the launcher relays its outcome.
_GROUP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def main(args: list[str]) -> NoReturn:
    orcad_pid, argv = int(args[0]), args[1:]
    orcad_fd = open_pidfd(orcad_pid)
    # orcad is this process's parent until it exits; checked after pidfd_open, so the pidfd
    # cannot belong to another process that took a dead orcad's pid
    if os.getppid() != orcad_pid:
        os._exit(CANNOT_RUN_STATUS)  # orcad is gone already: nobody waits for an answer
    wake_on_child_exit = None if orcad_fd is not None else _wakeup_on_sigchld()
    command = start(argv)
    for number in _GROUP_SIGNALS:  # sent to the whole group, they are the command's to answer
        signal.signal(number, signal.SIG_IGN)
    if orcad_fd is not None:
        status = wait_on_pidfds(command, orcad_fd)
    else:
        assert wake_on_child_exit is not None
        status = wait_polling_parent(command, orcad_pid, wake_on_child_exit)
    if status is None:
        end_group()
    exit_as(status)


def start(argv: list[str]) -> int:
    """Fork and exec the command (not posix_spawn: glibc's leaves its internal signals ignored
    in the program it runs). One that cannot be run says so on stderr and exits with 127."""
    pid = os.fork()  # this process has a single thread
    if pid:
        return pid
    try:
        for number in _RESTORED_SIGNALS:
            signal.signal(number, signal.SIG_DFL)
        os.execvp(argv[0], argv)  # noqa: S606 - the configured argv, with no shell, as before
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]!r}: {exc.strerror or exc}\n".encode(errors="replace"))
    finally:
        os._exit(CANNOT_RUN_STATUS)


def open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or a sandbox refusing it
        return None


def wait_on_pidfds(command: int, orcad_fd: int) -> int | None:
    """The command's wait status once it exits; None if orcad exits first."""
    command_fd = os.pidfd_open(command)  # the command is not reaped yet: its pid is its own
    poller = select.poll()
    poller.register(orcad_fd, select.POLLIN)
    poller.register(command_fd, select.POLLIN)
    ready = {fd for fd, _ in poller.poll()}
    if orcad_fd in ready:
        return None
    return os.waitpid(command, 0)[1]


def _wakeup_on_sigchld() -> int:
    """A pipe that receives a byte at each SIGCHLD (set up before the command starts)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)  # handled, so the fd is written
    return read_end


def wait_polling_parent(command: int, orcad_pid: int, wakeup: int) -> int | None:
    """The command's wait status once it exits; None once orcad has exited (this process has
    another parent)."""
    while True:
        pid, status = os.waitpid(command, os.WNOHANG)
        if pid:
            return status
        if os.getppid() != orcad_pid:
            return None
        if select.select([wakeup], [], [], PARENT_POLL_S)[0]:
            os.read(wakeup, 512)


def end_group() -> NoReturn:
    group = os.getpgrp()
    os.killpg(group, signal.SIGTERM)  # ignored by this launcher
    time.sleep(GRACE_S)
    os.killpg(group, signal.SIGKILL)  # helpers that ignored SIGTERM, and this launcher
    os._exit(CANNOT_RUN_STATUS)  # reached only if the group could not be signalled


def exit_as(status: int) -> NoReturn:
    """Exit with the command's status, or die of the signal that killed it."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        os._exit(code)
    signal_number = -code
    if signal_number not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signal_number, signal.SIG_DFL)
    import resource  # noqa: PLC0415  (only here: a command killed by a signal is rare)

    # the command's crash is reported, not repeated as a core file of this launcher
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal_number})
    os.kill(os.getpid(), signal_number)
    os._exit(128 + signal_number)  # a signal whose default is not to terminate


if __name__ == "__main__":
    main(sys.argv[1:])
