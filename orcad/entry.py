"""The `orcad` executable and `python -m orcad`. The daemon's modules take a few tenths of a
second to import; this module imports only the standard library, so that a stop asked for in
that time ends orcad at once, quietly and with status 0: nothing exists yet that would need
undoing (no socket, lock or file). From `run` on, orcad.main.StopSignals takes over."""

from __future__ import annotations

import os
import signal
import sys


def stop_signals() -> tuple[signal.Signals, ...]:
    """The signals that stop orcad: SIGTERM, Ctrl-C, and a hangup (its terminal closed),
    unless orcad was started with hangups ignored (`nohup`), which asks it to outlive one."""
    hangup = () if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN else (signal.SIGHUP,)
    return (signal.SIGTERM, signal.SIGINT, *hangup)


def _stop_before_start(_signum: int, _frame: object) -> None:
    os._exit(0)  # nothing to flush or remove yet; a Ctrl-C here was a KeyboardInterrupt traceback


def _hold_standard_descriptors() -> None:
    """Open /dev/null on each of descriptors 0, 1 and 2 orcad was started without (`orcad
    2>&-`, a parent that closed them), and give Python a stdout and stderr on them. Python
    leaves sys.stderr None then, which the log cannot write to (the start failed, its socket
    left behind), and the lock file, a database or the socket would take the free number:
    whatever a library writes to its stderr would land in that file."""
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            try:
                opened = os.open(os.devnull, os.O_RDWR)
            except OSError:
                continue  # (no descriptor left at all: the start fails, saying so if it can)
            if opened != descriptor:
                os.dup2(opened, descriptor)
                os.close(opened)
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115


def main() -> None:
    # First of all, before the imports that take a while: until orcad.main's own handlers
    # are in, SIGTERM and a hangup would kill orcad with their signal and Ctrl-C would print
    # a traceback.
    for signum in stop_signals():
        signal.signal(signum, _stop_before_start)
    _hold_standard_descriptors()
    from orcad.main import run  # noqa: PLC0415

    sys.exit(run())  # run ignores the stop signals once orcad has stopped
