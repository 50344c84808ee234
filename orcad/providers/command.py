"""Extraction through a local command: the prompt goes to its stdin, its stdout is the answer.

The command runs in a new session (its own process group), started by command_launcher, which
exits as the command does and ends the group if orcad dies first (SIGKILL, a crash), when
nothing here could. When the deadline passes, the output grows past the limit, or the call is
cancelled, the whole group is killed with SIGKILL and reaped, so no helper process it started
outlives the attempt; so is a helper left holding the pipes open after the command exited (its
answer is what it wrote). A helper that leaves the group (setsid) is out of reach. A non-zero
exit is a failed attempt whose message carries the end of stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Final

import trio

from orcad import limits
from orcad.providers import command_launcher, prompt
from orcad.providers.base import ProviderError
from orcad.secrets import redact, shorten_redacted

EXTRACTION_ENV: Final = "ORCA_EXTRACTION"  # orcactl.hooks.runner's recursion guard
STDERR_TAIL_CHARS: Final = 500  # the end of stderr recorded with a failed attempt
_READ_CHUNK: Final = 65536
# After the command exits, its pipes are read this much longer for what is still in them; a
# helper process it left holding them open is then killed with the rest of its group.
EXIT_DRAIN_S: Final = 0.5


class CommandProvider:
    name = "command"
    prompt_version = prompt.PROMPT_VERSION

    def __init__(self, argv: list[str]) -> None:
        self.argv = list(argv)
        self.model = " ".join(argv)  # the command line is the closest thing to a model name

    def __repr__(self) -> str:
        return f"CommandProvider(argv={self.argv!r})"

    async def extract(self, source: str, *, deadline: float) -> str:
        budget = deadline - trio.current_time()
        try:
            process = await trio.lowlevel.open_process(
                _launched(self.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                # An agent CLI run as the extractor (claude -p, codex exec) fires the agent's
                # hooks: this tells `orcactl hook` to stay out, so extraction never captures.
                env={**os.environ, EXTRACTION_ENV: "1"},
            )
        except OSError as exc:
            raise ProviderError(f"cannot run {self.argv[0]!r}: {exc.strerror or exc}") from exc
        stdout = bytearray()
        stderr = bytearray()
        finished = False
        pipes_closed = trio.Event()

        async def collect(stop_when_over_limit: trio.CancelScope) -> None:
            async with trio.open_nursery() as pipes:
                pipes.start_soon(_collect, process.stdout, stdout, stop_when_over_limit)
                pipes.start_soon(_collect, process.stderr, stderr, None)
            pipes_closed.set()

        async def end_after_exit(nursery: trio.Nursery) -> None:
            """Once the command has exited, what it wrote is its answer: a helper it left
            running that keeps the pipes open (a forked child) does not hold it up."""
            await process.wait()
            with trio.move_on_after(EXIT_DRAIN_S):
                await pipes_closed.wait()
            nursery.cancel_scope.cancel()

        try:
            with trio.move_on_at(deadline) as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        _feed_stdin, process, prompt.render_text(source).encode("utf-8")
                    )
                    nursery.start_soon(collect, nursery.cancel_scope)
                    nursery.start_soon(end_after_exit, nursery)
                if len(stdout) > limits.EXTRACTOR_OUTPUT_MAX_BYTES:
                    limit = limits.EXTRACTOR_OUTPUT_MAX_BYTES
                    raise ProviderError(f"{self.argv[0]!r} wrote more than {limit} bytes; killed")
                await process.wait()
                finished = True
                if not pipes_closed.is_set():  # its helpers go with it
                    _kill_group(process)
            if scope.cancelled_caught:
                raise ProviderError(
                    f"{self.argv[0]!r} did not finish within {budget:.1f} s; killed"
                )
        finally:
            if not finished:  # timeout, oversize or cancellation: nothing of the group may survive
                with trio.CancelScope(shield=True):
                    _kill_group(process)
                    await process.wait()
        if process.returncode != 0:
            raise ProviderError(
                f"{self.argv[0]!r} {_exit_description(process.returncode)}: {_tail(stderr, stdout)}"
            )
        try:
            return stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProviderError(f"{self.argv[0]!r} wrote output that is not UTF-8") from exc


async def _feed_stdin(process: trio.Process, data: bytes) -> None:
    assert process.stdin is not None
    async with process.stdin:
        try:
            await process.stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the command may answer without reading all of its input


async def _collect(
    stream: trio.abc.ReceiveStream | None,
    into: bytearray,
    stop_when_over_limit: trio.CancelScope | None,
) -> None:
    """Read a pipe to its end; stdout stops early past the output limit, stderr keeps its end."""
    assert stream is not None
    async with stream:
        while chunk := await stream.receive_some(_READ_CHUNK):
            into.extend(chunk)
            if stop_when_over_limit is None:
                if len(into) > 2 * _READ_CHUNK:
                    del into[: len(into) - _READ_CHUNK]  # only the end of stderr is ever used
            elif len(into) > limits.EXTRACTOR_OUTPUT_MAX_BYTES:
                stop_when_over_limit.cancel()
                return


def _launched(argv: list[str]) -> list[str]:
    """The command line that runs `argv` through the launcher, isolated (-I: no environment
    variables or user site read by it) and without site-packages (-S), so it starts fast."""
    launcher = command_launcher.__file__
    return [sys.executable, "-I", "-S", launcher, str(os.getpid()), *argv]


def _kill_group(process: trio.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the leader's pid is the group id (new session)
    except ProcessLookupError:
        pass


def _exit_description(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _tail(stderr: bytearray, stdout: bytearray) -> str:
    """The end of stderr on one line; without any, the end of stdout, where some CLIs say why
    they failed (`claude -p` not logged in writes "Not logged in · Please run /login" there).
    It is redacted before it is cut: a secret straddling the cut would otherwise lose the
    prefix that makes it recognisable."""
    text = redact(bytes(stderr).decode("utf-8", errors="replace")).strip()
    if text:
        return " ".join(shorten_redacted(text, STDERR_TAIL_CHARS, keep_end=True).split())
    text = redact(bytes(stdout[-2 * _READ_CHUNK :]).decode("utf-8", errors="replace")).strip()
    if not text:
        return "(no stderr)"
    shown = " ".join(shorten_redacted(text, STDERR_TAIL_CHARS, keep_end=True).split())
    return f"nothing on stderr; its stdout ends: {shown}"
