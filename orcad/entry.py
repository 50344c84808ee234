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


def main() -> None:
    # First of all, before the imports that take a while: until orcad.main's own handlers
    # are in, SIGTERM and a hangup would kill orcad with their signal and Ctrl-C would print
    # a traceback.
    for signum in stop_signals():
        signal.signal(signum, _stop_before_start)
    from orcad.main import run  # noqa: PLC0415

    sys.exit(run())  # run ignores the stop signals once orcad has stopped
