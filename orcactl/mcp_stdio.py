"""`orcactl mcp`'s stdio transport: the MCP SDK's server on stdin and stdout, one line a message.

The SDK's own stdio transport drops every line it cannot validate without a word (a client
waits for its timeout), and reads on while answers wait for a client that does not read them
(the server's memory grows with every request). Here each line is judged first
(`mcp_lines.judge`): a request that cannot be taken is answered with a JSON-RPC error and the
next line is served; and a request is read only while fewer than `MAX_ANSWERS_OWED` answers
are owed, and their requests' lines add up to less than `MAX_REQUEST_BYTES_OWED`, so a client
that stops reading, or sends long requests faster than they are answered, stops being read.
An open subscription, answered only when its stream ends, is not counted among those answers:
a client holds `MAX_SUBSCRIPTIONS` open at most, and one more is refused with an error.
When stdin ends, every request read is answered before serving ends, unless the client takes
no answer for `STALL_DEADLINE_S`.
What was read and answered before the SDK loaded (orcactl.mcp_handshake) is read again here
first, and the SDK's answers to the requests already answered are recorded, not sent.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import select
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any, BinaryIO, cast

import anyio
from anyio.lowlevel import EventLoopToken, current_token
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.shared.dispatcher import as_request_id, coerce_request_id
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from orcactl.mcp_handshake import (
    ACKNOWLEDGED,
    STATELESS_PASSED_OVER,
    Handover,
    Recorder,
    id_key,
)
from orcactl.mcp_lines import MAX_LINE_BYTES, Refused, TooLong, encoded, judge, read_line
from orcad.limits import (
    MAX_ANSWERS_OWED_PER_CONNECTION,
)

# As orcad bounds a connection: past this many answers owed, the client is not read until it
# reads (an answer it waits for from the client, such as an elicitation's, is not counted).
MAX_ANSWERS_OWED = MAX_ANSWERS_OWED_PER_CONNECTION
# and as orcad bounds the bytes of a connection's requests owed an answer: a request held until
# it is answered (a tool call waiting on a slow orcad) keeps its params decoded, several times
# the size of its line, so 64 of the longest lines took gigabytes. One line of any size the
# server keeps is always taken.
MAX_REQUEST_BYTES_OWED = MAX_LINE_BYTES
# A subscription (`subscriptions/listen`) is answered only when its stream ends, so it is not
# counted among the answers owed (64 open subscriptions stopped the reading of every request
# after them for good); instead a client holds this many open at most, whose lines add up to
# no more than MAX_REQUEST_BYTES_OWED (the first of any size the server keeps is taken), and
# one more is refused with an error. Claude Code holds one open.
MAX_SUBSCRIPTIONS = 64
TOO_MANY_SUBSCRIPTIONS = (
    f"Subscription limit reached: {MAX_SUBSCRIPTIONS} subscriptions of this client are open, as "
    "many as it may hold; cancel one (notifications/cancelled) before listening again"
)
SUBSCRIPTIONS_TOO_LONG = (
    "Subscription limit reached: the requests of this client's open subscriptions and this one "
    "add up to more than {mib} MiB; cancel one (notifications/cancelled) before listening again"
)
# Once stdin has ended (MCP's stdio shutdown: the client closes it, waits for the server to exit,
# then kills it), the answers still owed are waited for only while one is written at least this
# often: a client that never reads them would otherwise keep the server running for ever.
STALL_DEADLINE_S = 10.0
# A socket's peer shutting down its writing, as a pipe's writer closing it: Linux's poll()
# reports the former only when asked (POLLRDHUP); elsewhere there is no such flag, and a pipe's
# hangup, reported unasked, is what there is to see.
STDIN_HANGUP = getattr(select, "POLLRDHUP", 0)


class Owed:
    """The answers owed to the client, less those waiting on the client's own answers."""

    def __init__(
        self,
        limit: int = MAX_ANSWERS_OWED,
        max_bytes: int = MAX_REQUEST_BYTES_OWED,
        max_streams: int = MAX_SUBSCRIPTIONS,
    ) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self.max_streams = max_streams
        self._owed: Counter[str] = Counter()  # by id as text
        self._sizes: dict[str, list[int]] = {}  # the line of each request owed, by id as text
        self.bytes = 0  # of the lines of the requests owed, the subscriptions' included
        self._asked: set[str] = set()  # the server's requests the client has not answered
        # the subscriptions (`subscriptions/listen`) owed, by id as text: a stream the server
        # answers only when it ends, which it does once it sees the end of stdin
        self._streams: Counter[str] = Counter()
        self._stream_sizes: dict[str, list[int]] = {}  # their lines, by id as text
        self.stream_bytes = 0  # of the lines of the subscriptions owed
        # the subscription a cancellation of an id ends (by the id as the SDK matches it: 7
        # and "7" are one), by id as text: the SDK cancels only the request it was last given
        # with that id, and only while it runs, so an older one of the same id stays open
        self._cancellable: dict[RequestId, str] = {}
        self._changed = anyio.Event()
        self._early = 0  # 1 while answers given before the SDK loaded are still being written
        self.reported = False  # whether stderr has said which answers were not delivered

    @property
    def waiting(self) -> int:
        """The answers owed that the server can give without the client's own answers."""
        return self._owed.total() - len(self._asked) + self._early

    @property
    def total(self) -> int:
        """Every answer owed, those held up on the client's own answers included."""
        return self._owed.total() + self._early

    @property
    def streams(self) -> int:
        """The subscriptions owed their answer: open until their stream ends."""
        return self._streams.total()

    @property
    def _replying(self) -> int:
        """The answers owed that the server gives without the client's own answers, and
        without waiting for a stream to end: what a client that does not read piles up."""
        return self.waiting - self.streams

    @property
    def full(self) -> bool:
        return self._replying >= self.limit

    def _too_many_bytes(self, size: int) -> bool:
        """Whether a request line of `size` bytes must wait: the lines of the requests owed
        would add up to more than `max_bytes`, and one of them is to be answered without the
        client (one that waits on the client's own answer, or a subscription, answered when
        the client ends it, must not stop its being read)."""
        return self.bytes > 0 and self.bytes + size > self.max_bytes and self._replying > 0

    def refuses_stream(self, message: JSONRPCRequest, size: int = 0) -> JSONRPCError | None:
        """The answer refusing a subscription past `max_streams` open, or whose line would
        take the lines of those open past `max_bytes`; None for any other request."""
        if message.method != STATELESS_PASSED_OVER:
            return None
        if self.streams >= self.max_streams:
            text = TOO_MANY_SUBSCRIPTIONS
        elif self.stream_bytes and self.stream_bytes + size > self.max_bytes:
            text = SUBSCRIPTIONS_TOO_LONG.format(mib=self.max_bytes // 2**20)
        else:
            return None
        error = ErrorData(code=INTERNAL_ERROR, message=text)
        return JSONRPCError(jsonrpc="2.0", id=message.id, error=error)

    async def room(self, size: int = 0) -> None:
        while self.full or self._too_many_bytes(size):
            await self._changed.wait()

    async def wait_settled(self) -> None:
        """Wait until no answer is owed but those held up on the client's own answers, and
        the subscriptions, which stay open until the SDK sees the end of its input."""
        while self._replying > 0:
            await self._changed.wait()

    async def wait_stalled(self, seconds: float) -> None:
        """Wait until answers have been owed for `seconds` with nothing counted meanwhile: no
        answer written or settled, no request read."""
        while True:
            with anyio.move_on_after(seconds if self.total else math.inf) as timer:
                await self._changed.wait()
            if timer.cancelled_caught:
                return

    def _change(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _settle(self, request_id: object) -> None:
        key = str(request_id)
        if key in self._owed:
            self._owed[key] -= 1
            if not self._owed[key]:
                del self._owed[key]
            # a subscription of that id ended, if no other request of it is owed
            streams = self._streams[key]
            self._streams[key] = min(streams, self._owed[key])
            self._streams += Counter()  # without the ids that count none
            ended = self._streams[key] < streams
            rid = as_request_id(request_id)
            if ended or key not in self._owed:  # the SDK no longer runs the one it may end
                matched = None if rid is None else coerce_request_id(rid)
                if matched is not None and self._cancellable.get(matched) == key:
                    del self._cancellable[matched]
            by_id = self._stream_sizes if ended else self._sizes
            if sizes := by_id.get(key):
                size = sizes.pop()
                self.bytes -= size
                self.stream_bytes -= size if ended else 0
                if not sizes:
                    del by_id[key]
            self._change()

    def _answered(self, request_id: object) -> None:
        if str(request_id) in self._asked:
            self._asked.discard(str(request_id))
            self._change()

    def early_answers(self, *, writing: bool) -> None:
        """Count the answers given before the SDK loaded as one owed while they are written."""
        self._early = int(writing)
        self._change()

    def read(self, message: JSONRPCMessage, size: int = 0) -> None:
        """Count a message from the client, read in a line of `size` bytes."""
        match message:
            case JSONRPCRequest():
                key = str(message.id)
                self._owed[key] += 1
                stream = message.method == STATELESS_PASSED_OVER  # a subscription
                if stream:
                    self._streams[key] += 1
                    self._cancellable[coerce_request_id(message.id)] = key
                else:
                    self._cancellable.pop(coerce_request_id(message.id), None)
                if size:
                    sizes = self._stream_sizes if stream else self._sizes
                    sizes.setdefault(key, []).append(size)
                    self.bytes += size
                    self.stream_bytes += size if stream else 0
                self._change()
            case JSONRPCResponse() | JSONRPCError():
                self._answered(message.id)
            case JSONRPCNotification(method="notifications/cancelled", params=dict() as params):
                self._cancelled(params.get("requestId"))

    def _cancelled(self, request_id: object) -> None:
        """The client ended a subscription of `request_id`: no longer open, and its room is
        given back at once for another, while its end is still owed as any answer until the
        SDK settles it (a moment later, once the handler's cancellation has run). A requestId
        the SDK takes for no request id (a bool, a fraction, null...) cancels nothing there,
        however its text reads: the subscription stays open."""
        rid = as_request_id(request_id)
        if rid is None:
            return
        key = self._cancellable.pop(coerce_request_id(rid), None)
        if key is None or not self._streams[key]:  # no subscription the SDK ends for it
            return
        self._streams[key] -= 1
        self._streams += Counter()  # without the ids that count none
        if sizes := self._stream_sizes.get(key):
            size = sizes.pop()
            self.stream_bytes -= size
            self._sizes.setdefault(key, []).append(size)
            if not sizes:
                del self._stream_sizes[key]
        self._change()

    def refusing(self, answer: JSONRPCError) -> None:
        """Count the answer to a line refused before the SDK saw it: owed as any other."""
        self._owed[str(answer.id)] += 1
        self._change()

    async def unanswered(self, request_id: RequestId) -> None:
        """The SDK settled a request without answering it (the client cancelled it while it
        ran). A cancellation the SDK did not act on, such as one for a request whose answer
        already waits to be written, settles nothing: that answer is still owed."""
        self._settle(request_id)

    def written(self, message: JSONRPCMessage) -> None:
        """Count a message written to the client."""
        match message:
            case JSONRPCResponse() | JSONRPCError():
                self._settle(message.id)
            case JSONRPCRequest():
                self._asked.add(str(message.id))
                self._change()
            case JSONRPCNotification(method="notifications/cancelled", params=dict() as params):
                self._answered(params.get("requestId"))  # the server stopped waiting


def _write_line(wire: BinaryIO, data: bytes) -> None:
    wire.write(data)
    wire.flush()


async def _write_abandonably(wire: BinaryIO, data: bytes) -> None:
    """Write `data` in a daemon thread of its own, not in one of anyio's workers (the
    interpreter waits for those at exit): a write blocked on a client that never reads is left
    behind when serving gives up on that client."""
    token = current_token()
    done = anyio.Event()
    failures: list[OSError] = []

    def write() -> None:
        try:
            _write_line(wire, data)
        except OSError as exc:
            failures.append(exc)
        finally:
            with suppress(RuntimeError):  # serving is over (RunFinishedError)
                anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=write, name="mcp stdout write", daemon=True).start()
    await done.wait()
    if failures:
        raise failures[0]


def _pump(
    wire: BinaryIO, lines: MemoryObjectSendStream[bytes | TooLong], token: EventLoopToken
) -> None:
    """Hand stdin's lines to the event loop, one at a time, until stdin ends.

    A daemon thread of its own, not one of anyio's workers: a read blocked on a client that
    keeps stdin open after serving ended (it closed its end of stdout) must not keep the
    process alive.
    """
    try:
        while (line := read_line(wire)) != b"":
            anyio.from_thread.run(lines.send, line, token=token)
    except (OSError, anyio.BrokenResourceError, RuntimeError):
        pass  # stdin failed (as good as its end), or serving is over (RunFinishedError)
    finally:
        with suppress(RuntimeError):
            anyio.from_thread.run_sync(lines.close, token=token)


async def _read(  # noqa: PLR0917
    wire: BinaryIO,
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    to_client: MemoryObjectSendStream[SessionMessage],
    owed: Owed,
    input_ended: anyio.Event,
    recorder: Recorder | None = None,
) -> None:
    sender, lines = anyio.create_memory_object_stream[bytes | TooLong](0)
    pump = (wire, sender, current_token())
    threading.Thread(target=_pump, args=pump, name="mcp stdin", daemon=True).start()
    async with to_server, to_client, lines:
        async for line in lines:
            verdict = judge(line)
            size = len(line) if isinstance(line, bytes) else 0
            try:
                if isinstance(verdict, Refused):
                    owed.refusing(verdict.answer)
                    await to_client.send(SessionMessage(verdict.answer))
                elif isinstance(verdict, JSONRPCRequest) and (
                    refusal := owed.refuses_stream(verdict, size)
                ):
                    owed.refusing(refusal)
                    await to_client.send(SessionMessage(refusal))
                elif isinstance(verdict, JSONRPCRequest):
                    await owed.room(size)
                    owed.read(verdict, size)
                    if recorder is not None:
                        recorder.asked(verdict.id, verdict.method, verdict.params)
                    settled = partial(owed.unanswered, verdict.id)
                    metadata = ServerMessageMetadata(on_request_unanswered=settled)
                    await to_server.send(SessionMessage(verdict, metadata=metadata))
                elif verdict is not None:
                    owed.read(verdict)
                    await to_server.send(SessionMessage(verdict))
            except anyio.BrokenResourceError:  # the writer found the client gone
                return
        input_ended.set()
        # the SDK stops serving at the end of its input, cancelling the requests it still
        # handles: it sees the end once they are answered (one held up on the client never is)
        await owed.wait_settled()


def _watch_hangup(
    wire: BinaryIO, events: int, then: Callable[[], object], token: EventLoopToken
) -> None:
    """Call `then` once the client closes its end of `wire`, even while it is neither read nor
    written: its end of stdout, or of stdin while reading waits for answers to be taken.

    A daemon thread, as `_pump`: poll() reports a hangup or an error on a pipe whose other end
    is closed whatever events are asked for, and waits for nothing else but `events` (none for
    stdout; for stdin, a socket's peer shutting down its writing).
    """
    poller = select.poll()
    poller.register(wire.fileno(), events)
    with suppress(OSError):
        poller.poll()
    with suppress(RuntimeError):  # serving is over already (RunFinishedError)
        anyio.from_thread.run_sync(then, token=token)


def _start_watching(wire: BinaryIO, events: int, then: Callable[[], object], name: str) -> None:
    watch = (wire, events, then, current_token())
    threading.Thread(target=_watch_hangup, args=watch, name=name, daemon=True).start()


async def _write(  # noqa: PLR0917
    wire: BinaryIO,
    from_server: MemoryObjectReceiveStream[SessionMessage],
    owed: Owed,
    scope: anyio.CancelScope,
    recorder: Recorder | None = None,
    answered: set[str] | None = None,
    early_written: anyio.Event | None = None,
    acknowledged: set[str] | None = None,
) -> None:
    """Write the server's messages to the client as they come; an answer to a request the
    client had its answer to before the SDK loaded (`answered`) is recorded and settled, not
    written again, and so is an acknowledgement of a subscription acknowledged then
    (`acknowledged`). Nothing is written before those earlier answers are (`early_written`)."""
    answered = set() if answered is None else answered
    acknowledged = set() if acknowledged is None else acknowledged
    async with from_server:
        async for item in from_server:
            data = encoded(item.message)
            if data is None:
                continue
            if (
                isinstance(item.message, JSONRPCNotification)
                and item.message.method == ACKNOWLEDGED
                and recorder is not None
            ):
                subscription = recorder.acknowledged(json.loads(data).get("params"))
                if subscription is not None and subscription in acknowledged:
                    acknowledged.discard(subscription)
                    continue
            if isinstance(item.message, (JSONRPCResponse, JSONRPCError)):
                if (
                    recorder is not None
                    and isinstance(item.message, JSONRPCResponse)
                    and recorder.wants(item.message.id)
                ):  # only the handshake's answers are read back (a tool's may be long)
                    recorder.answered(item.message.id, json.loads(data).get("result"))
                if id_key(item.message.id) in answered:
                    answered.discard(id_key(item.message.id))
                    owed.written(item.message)
                    continue
            # a request of the server counts as asked before the client can see it (its answer
            # may be read before this write returns); an answer is owed until it is written
            asking = isinstance(item.message, JSONRPCRequest)
            if asking:
                owed.written(item.message)
            if early_written is not None:
                await early_written.wait()
            try:
                await _write_abandonably(wire, data)
            except OSError:  # the client closed its end: nobody is left to serve
                scope.cancel()
                return
            if not asking:
                owed.written(item.message)


class _ReadAgain(io.RawIOBase):
    """A descriptor read as if `first`, read from it already, were still to come."""

    def __init__(self, first: bytes, descriptor: int, *, ended: bool = False) -> None:
        self._first = memoryview(first)
        self._descriptor = descriptor
        self._ended = ended  # the end of input followed `first`: it is not read again

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._descriptor

    def readinto(self, buffer: Any) -> int:
        if self._first:
            size = min(len(buffer), len(self._first))
            buffer[:size] = self._first[:size]
            self._first = self._first[size:]
            return size
        if self._ended:
            return 0
        data = os.read(self._descriptor, len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        """Leaves the descriptor open, as `os.fdopen(..., closefd=False)` does."""
        super().close()


@contextmanager
def _claimed_stdio(
    read_already: bytes = b"", *, ended: bool = False
) -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """stdin and stdout for the protocol alone, as the SDK's transport claims them: while
    serving, file descriptor 0 reads the null device and 1 writes to stderr, so that stray
    output (ours, a library's, a child's) never lands on the wire. Started with stdout closed,
    there is no sys.stdout to flush (orcactl's main put the null device at descriptor 1).
    `read_already`, read from stdin before, is read from it again first, and then its end
    when that was read as well (`ended`)."""
    if sys.stdout is not None:
        sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        # never closed: a reading thread may still wait on stdin when serving ends, and a
        # writing one on stdout
        reader = (
            cast(BinaryIO, io.BufferedReader(_ReadAgain(read_already, wire_in, ended=ended)))
            if read_already or ended
            else os.fdopen(wire_in, "rb", closefd=False)
        )
        yield reader, os.fdopen(wire_out, "wb", closefd=False)
    finally:
        os.dup2(wire_out, 1)
        os.dup2(wire_in, 0)


async def _give_up_on_a_stalled_client(
    owed: Owed, input_ended: anyio.Event, scope: anyio.CancelScope
) -> None:
    """End serving once stdin has ended and answers owed have gone untaken for
    `STALL_DEADLINE_S`: the client is done with the server but does not read its answers."""
    await input_ended.wait()
    await owed.wait_stalled(STALL_DEADLINE_S)
    _say_undelivered(owed, f"took no answer for {STALL_DEADLINE_S:g} s")
    scope.cancel()


def _say_undelivered(owed: Owed, why: str) -> None:
    """One line on stderr: how many answers the client will never get, and why."""
    if not owed.total or owed.reported or sys.stderr is None:  # None: stderr closed at start
        return
    owed.reported = True
    lost = "1 answer owed to it was" if owed.total == 1 else f"{owed.total} answers owed to it were"
    say_on_stderr(f"orcactl mcp: the client closed stdin and {why}; {lost} not delivered")


def say_on_stderr(text: str) -> None:
    """Write `text` as a line on stderr when stderr has room for it, else drop it: a client
    that does not read the server's stderr (which MCP lets it ignore) must not stop the server.
    Written whole in one write of at most PIPE_BUF bytes, which a pipe with room for any takes
    without waiting; a longer line is cut."""
    data = text.encode("utf-8", "backslashreplace") + b"\n"
    if len(data) > select.PIPE_BUF:
        data = data[: select.PIPE_BUF - 4] + b"...\n"
    poller = select.poll()
    poller.register(2, select.POLLOUT)
    with suppress(OSError):  # stderr closed, or its reader gone
        if any(events & select.POLLOUT for _, events in poller.poll(0)):
            os.write(2, data)


class _StderrLog(logging.Handler):
    """The SDK's log (a line for every tool call that fails, every malformed notification) on
    stderr by `say_on_stderr`. Its own handler writes and waits, on the thread that serves:
    once a client that never read stderr had let its pipe fill, the server answered nothing
    more, and did not even end when stdin closed."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            say_on_stderr(self.format(record))
        except Exception:  # as logging's own handlers do: a log line never fails a call
            self.handleError(record)


@contextmanager
def _log_without_waiting() -> Iterator[None]:
    """While serving, log records go to stderr by `_StderrLog` instead of the handlers the SDK
    configured (at the server's creation)."""
    root = logging.getLogger()
    handlers = root.handlers[:]
    for handler in handlers:
        root.removeHandler(handler)
    stderr_log = _StderrLog()
    stderr_log.setFormatter(logging.Formatter("%(message)s"))
    root.addHandler(stderr_log)
    try:
        yield
    finally:
        root.removeHandler(stderr_log)
        for handler in handlers:
            root.addHandler(handler)


def _await_early_answers(written: threading.Event, owed: Owed, done: anyio.Event) -> None:
    """Count the answers given before the SDK loaded as owed until they are all written: to a
    client that does not read them, one may still be (the SDK's answers wait for it, `done`),
    and once stdin ends serving waits for it as for any answer, giving up after
    `STALL_DEADLINE_S`. A daemon thread waits, as `_watch_hangup` does."""
    owed.early_answers(writing=True)
    token = current_token()

    def settled() -> None:
        owed.early_answers(writing=False)
        done.set()

    def wait() -> None:
        written.wait()
        with suppress(RuntimeError):  # serving is over already (RunFinishedError)
            anyio.from_thread.run_sync(settled, token=token)

    threading.Thread(target=wait, name="mcp early answers written", daemon=True).start()


async def serve(
    server: MCPServer, wire_in: BinaryIO, wire_out: BinaryIO, handover: Handover | None = None
) -> None:
    """Serve one client until its stdin ends and every answer it is owed is written; or until
    it closes its stdout, or takes no answer for `STALL_DEADLINE_S` after closing its stdin."""
    handover = handover or Handover()
    recorder = Recorder(handover.key, handover.known)
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    owed = Owed()
    input_ended = anyio.Event()
    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs on its streams
    async with anyio.create_task_group() as group:
        _start_watching(wire_out, 0, group.cancel_scope.cancel, "mcp stdout")
        _start_watching(wire_in, STDIN_HANGUP, input_ended.set, "mcp stdin")
        group.start_soon(_read, wire_in, to_server, to_client.clone(), owed, input_ended, recorder)
        group.start_soon(_give_up_on_a_stalled_client, owed, input_ended, group.cancel_scope)
        early_written = None
        if handover.written is not None and not handover.written.is_set():
            early_written = anyio.Event()
            _await_early_answers(handover.written, owed, early_written)
        async with anyio.create_task_group() as answering:
            answering.start_soon(
                _write,
                wire_out,
                from_server,
                owed,
                group.cancel_scope,
                recorder,
                set(handover.answered),
                early_written,
                set(handover.acknowledged),
            )
            await lowlevel.run(from_client, to_client, lowlevel.create_initialization_options())
        group.cancel_scope.cancel()  # every answer is written: no stall left to watch for
    if input_ended.is_set():  # the SDK ended the calls that waited on the client's answers
        _say_undelivered(owed, "left questions to it unanswered")


def run_stdio(server: MCPServer, handover: Handover | None = None) -> None:
    handover = handover or Handover()
    with (
        _log_without_waiting(),
        _claimed_stdio(handover.read, ended=handover.ended) as (wire_in, wire_out),
    ):
        anyio.run(serve, server, wire_in, wire_out, handover)
