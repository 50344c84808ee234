"""The trio server: accept connections on the private socket and serve NDJSON JSON-RPC.

Requests on one connection run concurrently; responses are written whole under a lock. A
connection that sends an oversized line, goes idle, trickles a line for too long, stops reading
its answers, or belongs to another uid is closed without touching any other connection; so is one
whose client vanished, or whose handling failed in a way nobody foresaw (logged once). A
connection with too many answers owed stops being read until its client catches up. When all of
them together hold too much of what their clients sent, those whose clients have taken none of
an answer, or sent none of an unfinished line, longest are closed (`_Holdings`). When the
connection limit is reached, the connection longest without a complete request makes room.

This is the only module that writes to a connection. The dispatcher hands it each answer as
bytes: at once for a request that cannot block (the reader sends it when the connection's send
lock is free), or from a task of the request's own; every answer goes out through `_write`,
whole, under that lock.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable

import structlog
import trio

from orcad import limits
from orcad.config import ServerConfig
from orcad.errors import Busy, InvalidRequest, MessageTooLarge
from orcad.log import describe_exception
from orcad.rpc import DeferredReply, Dispatcher, encode_error
from protocol.client import peer_uid
from protocol.framing import LineFramer, LineTooLong

log = structlog.get_logger("orcad.server")

RECEIVE_CHUNK = 65536
SEND_CHUNK = 262144  # an answer larger than this is written in parts of it (Server._write)
_BATCH = re.compile(rb"[ \t\r\n]*\[")  # a line that is a batch (or no request at all)
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
# The client ended its side of the connection inside a line: a request cut short, or one
# written without its newline, which a client that half-closes and then reads is told of
_UNENDED_LINE = encode_error(
    InvalidRequest(
        "the connection ended inside a line; nothing of it was run (end each request with a "
        "newline)"
    )
)


def _line_bytes(events: list[bytes | LineTooLong]) -> int:
    """The bytes of the lines among `events` (a LineTooLong ends them)."""
    if isinstance(events[-1], LineTooLong):
        events = events[:-1]
    return sum(map(len, events))  # type: ignore[arg-type]  # bytes alone, now


class _Holdings:
    """What every connection together holds of what its client sent: requests owed an answer
    (their lines, or the answers ready for them) and lines not yet taken as requests (arriving,
    or complete and waiting to be). Each connection's own bounds keep it to a few lines; this
    bounds them together, not by waiting (a client may read its answers only once its next line
    is read, and waiting on others' bytes stalled well-behaved clients), but by closing: over
    `bound`, the connections whose client has left an answer unread, or stopped sending a line
    it has not finished, for SHED_AFTER_S or more are closed, longest first, until they hold
    less (Server._shed). A client that keeps sending its line is not closed for it (it is
    bounded by request_line_timeout_s)."""

    __slots__ = ("bound", "total")

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.total = 0


class _BytesOwed:
    """The bytes of the requests a connection has sent and not yet been answered: the reader
    waits while taking the next would go over the bound, unless nothing is owed (a line of any
    size the framer passed is served). A request is held until its answer is written, and an
    answer that echoes a request (its `id`, a field named in an error) is about as large as it,
    so a client that never reads keeps a bounded amount whatever its lines hold. A client that
    writes more than the bound of requests before it reads an answer waits for the daemon to
    read them, as it would at the count of answers owed: clients read as they send."""

    __slots__ = ("_changed", "bound", "holdings", "owed")

    def __init__(self, bound: int, holdings: _Holdings) -> None:
        self.bound = bound
        self.holdings = holdings  # the daemon's, which counts them too
        self.owed = 0
        self._changed = trio.Event()

    async def take(self, size: int) -> None:
        while self.owed and self.owed + size > self.bound:
            await self._changed.wait()
        self.owed += size
        self.holdings.total += size

    async def wait_for_room(self) -> None:
        """Until what is owed is within the bound: an answer is not made while those made
        before it, larger than their requests, wait for a client that does not read them."""
        while self.owed > self.bound:
            await self._changed.wait()

    def hold_more(self, size: int) -> None:
        """An answer larger than its request now waits to be written: the rest of it is held
        too, at once (it is made already); the reader waits for it as for requests owed."""
        self.owed += size
        self.holdings.total += size

    def give_back(self, size: int) -> None:
        self.owed -= size
        self.holdings.total -= size
        self._changed.set()
        self._changed = trio.Event()


class _Connection:
    """One connection's cancel scopes, its clocks and its answers owed: what the sweep needs to
    close idle, trickling and stuck connections, and what eviction needs to choose one."""

    __slots__ = (
        "answer_cut",
        "answers_owed",
        "batches",
        "bytes_owed",
        "closed_because",
        "held",
        "holdings",
        "idle_closed",
        "last_received",
        "last_request",
        "line_started",
        "reader",
        "scope",
        "sending_since",
    )

    def __init__(self, max_answers_owed: int, max_bytes_owed: int, holdings: _Holdings) -> None:
        self.scope = trio.CancelScope()
        self.reader: trio.CancelScope | None = None  # cancelled to stop reading new requests
        self.last_received = trio.current_time()
        self.last_request = self.last_received  # when its last complete line arrived
        self.line_started: float | None = None  # first byte of a line not yet complete
        self.sending_since: float | None = None
        self.idle_closed = False
        self.closed_because: str | None = None
        # An answer's write was cancelled part way (a drain or the idle sweep stopped the reader
        # writing it): whatever followed would be read as the rest of that line, so nothing does.
        self.answer_cut = False
        # Requests read but not yet answered; at the bound the reader waits (back-pressure).
        self.answers_owed = trio.Semaphore(max_answers_owed)
        self.bytes_owed = _BytesOwed(max_bytes_owed, holdings)  # and so for their bytes
        # A batch's answer is up to MAX_BATCH_REQUESTS answers in one line: its batches are
        # answered one at a time, so that those owed at once are not made all together.
        self.batches = trio.Lock()
        # its lines not yet taken as requests, counted in the daemon's `holdings` too
        self.holdings = holdings
        self.held = 0

    def hold(self, size: int) -> None:
        """It holds `size` bytes of lines not yet taken now."""
        self.holdings.total += size - self.held
        self.held = size

    def stuck_since(self) -> float | None:
        """Since when its client has left an answer unread, or stopped sending a line it has
        not finished, if it has. A line still arriving is not stuck however long it takes:
        with many large lines at once, each is read a chunk at a time, in turn, for seconds."""
        since = self.sending_since
        stopped = self.last_received if self.line_started is not None else None
        if stopped is not None and (since is None or stopped < since):
            return stopped
        return since

    def close(self, reason: str) -> None:
        self.closed_because = reason
        self.scope.cancel()


def _one_batch_at_a_time(connection: _Connection, produce: DeferredReply) -> DeferredReply:
    """`produce` for a batch line: made once the connection's earlier batches are, and once
    there is room for it among what the connection owes."""

    async def alone() -> bytes | None:
        async with connection.batches:
            await connection.bytes_owed.wait_for_room()
            return await produce()

    return alone


class Server:
    def __init__(
        self,
        dispatcher: Dispatcher,
        config: ServerConfig,
        *,
        allowed_uid: int | None = None,
        on_activity: Callable[[], None] | None = None,
        on_connection_error: Callable[[str], None] | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._config = config
        self._allowed_uid = os.getuid() if allowed_uid is None else allowed_uid
        self._connections = 0
        self._open: set[_Connection] = set()
        self._in_flight = 0
        self._idle = trio.Event()
        self._idle.set()
        self._draining = False
        self._on_activity = on_activity
        self._on_connection_error = on_connection_error
        self._holdings = _Holdings(config.max_buffered_bytes)

    @property
    def connections(self) -> int:
        return self._connections

    @property
    def buffered_bytes(self) -> int:
        """What the connections hold of what their clients sent (`_Holdings`)."""
        return self._holdings.total

    def _shed(self) -> None:
        """Over the bound on what the connections hold together: close those whose client has
        left an answer unread, or stopped sending a line it has not finished, for SHED_AFTER_S
        or more, longest first, until what the others hold is under it. The bytes of one closed
        are given back as its tasks end, so the count goes by what each holds now."""
        holdings = self._holdings
        left = holdings.total
        if left <= holdings.bound:
            return
        latest = trio.current_time() - limits.SHED_AFTER_S
        stuck = []
        for connection in self._open:
            since = connection.stuck_since()
            if connection.closed_because is None and since is not None and since <= latest:
                stuck.append((since, connection))
        stuck.sort(key=lambda pair: pair[0])
        for since, connection in stuck:
            if left <= holdings.bound:
                break
            held = connection.held + connection.bytes_owed.owed
            if not held:
                continue
            log.warning(
                "connection.shed",
                held=holdings.total,
                bound=holdings.bound,
                stuck="answer_unread" if connection.sending_since == since else "line_stopped",
                stuck_s=round(trio.current_time() - since, 3),
            )
            connection.close("shed")
            left -= held

    async def serve(
        self,
        listener: trio.SocketListener,
        connections: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept until cancelled; each connection runs in `connections` so that stopping the
        accept loop does not cut in-flight requests short."""
        connections.start_soon(self._disconnect_slow_readers)
        task_status.started()
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                    raise
                # Out of file descriptors: the connections we have must go on; retry shortly.
                log.error("connection.accept_failed", error=os.strerror(exc.errno or 0))
                await trio.sleep(limits.ACCEPT_RETRY_S)
                continue
            connections.start_soon(self._serve_connection, stream)

    async def _disconnect_slow_readers(self) -> None:
        """Close connections idle for idle_timeout_s, those whose answer could not be written for
        send_timeout_s (a client that stops reading must not hold its slot), and those whose
        request line is still incomplete request_line_timeout_s after its first byte (a client
        that trickles bytes must not hold its slot either).

        One periodic sweep instead of a deadline per read or write: moving a cancel scope's
        deadline on every request costs more than the rest of answering a ping."""
        send_timeout = self._config.send_timeout_s
        idle_timeout = self._config.idle_timeout_s
        line_timeout = self._config.request_line_timeout_s
        shortest = min(1.0, send_timeout / 4, idle_timeout / 4, line_timeout / 4)
        period = max(limits.CONNECTION_SWEEP_MIN_S, shortest)  # a tiny timeout must not spin
        while True:
            await trio.sleep(period)
            self._shed()  # those stuck long enough since the last time the bound was passed
            now = trio.current_time()
            for connection in self._open:
                since = connection.sending_since
                started = connection.line_started
                if since is not None and now - since >= send_timeout:
                    log.warning("connection.send_timeout", send_timeout_s=send_timeout)
                    connection.close("send_timeout")
                elif started is not None and now - started >= line_timeout:
                    log.warning("connection.line_timeout", request_line_timeout_s=line_timeout)
                    connection.close("line_timeout")
                elif now - connection.last_received >= idle_timeout and connection.reader:
                    connection.idle_closed = True
                    connection.reader.cancel()

    async def wait_drained(self) -> None:
        """Stop starting new requests and wait until those in flight have answered."""
        self._draining = True
        for connection in self._open:  # a reader waits for its next line: stop it now
            if connection.reader is not None:
                connection.reader.cancel()
        await self._idle.wait()

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        async with stream:
            uid = peer_uid(stream.socket)
            if uid is not None and uid != self._allowed_uid:
                log.warning("connection.refused", reason="peer_uid", peer_uid=uid)
                return
            if self._connections >= self._config.max_connections and not self._evict_one():
                log.warning("connection.refused", reason="busy", limit=self._config.max_connections)
                busy = Busy(
                    f"orcad is serving its limit of {self._config.max_connections} connections; "
                    "retry later or raise server.max_connections"
                )
                with trio.move_on_after(limits.BUSY_ANSWER_WAIT_S):
                    try:
                        await stream.send_all(encode_error(busy))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass
                return
            self._connections += 1
            connection = _Connection(
                limits.MAX_ANSWERS_OWED_PER_CONNECTION,
                limits.REQUEST_LINES_OWED_PER_CONNECTION * self._config.max_message_bytes,
                self._holdings,
            )
            self._open.add(connection)
            try:
                with connection.scope:
                    await self._read_requests(stream, connection)
            except* (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the client went away (closed early, reset, killed): nothing is owed
            except* Exception as failure:
                # Whatever went wrong ends this connection only; the daemon goes on.
                log.error("connection.failed", **describe_exception(failure))
                if self._on_connection_error is not None:
                    self._on_connection_error(
                        "a connection failed unexpectedly and was closed; the daemon log has "
                        "the details (event connection.failed)"
                    )
            finally:
                if connection in self._open:  # else eviction already gave its slot away
                    self._open.discard(connection)
                    self._connections -= 1

    def _evict_one(self) -> bool:
        """At the connection limit: close the connection longest without a complete request,
        among those with no answer owed, so that a new client is served; failing that, the one
        whose client has left an answer unread longest, for at least EVICT_UNREAD_AFTER_S (a
        client that sends and never reads must not hold slots others need until the send
        timeout). False when every connection is busy answering (the newcomer is then told to
        retry)."""
        owes_nothing = limits.MAX_ANSWERS_OWED_PER_CONNECTION
        open_now = [c for c in self._open if c.closed_because is None]
        candidates = [
            connection
            for connection in open_now
            if connection.answers_owed.value == owes_nothing and connection.sending_since is None
        ]
        if candidates:
            oldest = min(candidates, key=lambda connection: connection.last_request)
            reason = "no_request"
        else:
            since = trio.current_time() - limits.EVICT_UNREAD_AFTER_S
            unread = [
                connection
                for connection in open_now
                if connection.sending_since is not None and connection.sending_since <= since
            ]
            if not unread:
                return False
            oldest = min(unread, key=lambda connection: connection.sending_since or 0.0)
            reason = "answers_unread"
        log.info("connection.evicted", limit=self._config.max_connections, reason=reason)
        oldest.close("evicted")
        # Its slot is given up now: the cancelled task only has cleanup left to do.
        self._open.discard(oldest)
        self._connections -= 1
        return True

    async def _read_requests(self, stream: trio.SocketStream, connection: _Connection) -> None:
        framer = LineFramer(self._config.max_message_bytes)
        send_lock = trio.Lock()
        owed = connection.answers_owed
        try:
            await self._serve_lines(stream, connection, framer, send_lock, owed)
        finally:
            connection.hold(0)  # its lines not taken go with it

    async def _serve_lines(
        self,
        stream: trio.SocketStream,
        connection: _Connection,
        framer: LineFramer,
        send_lock: trio.Lock,
        owed: trio.Semaphore,
    ) -> None:
        holdings = self._holdings
        async with trio.open_nursery() as requests:
            with trio.CancelScope() as reading:  # cancelled by the sweep (idle) or by draining
                connection.reader = reading
                while not self._draining:
                    data = await stream.receive_some(RECEIVE_CHUNK)
                    if not data:
                        if framer.pending_text:
                            try:
                                await self._send(stream, connection, send_lock, _UNENDED_LINE)
                            except (trio.BrokenResourceError, trio.ClosedResourceError):
                                pass  # gone altogether: its requests in flight still finish
                        break
                    now = connection.last_received = trio.current_time()
                    events = framer.feed(data)
                    pending = framer.pending_bytes
                    # the lines are held until taken; those of a feed that leaves nothing
                    # behind (one chunk at most: the common case) are served at once, uncounted
                    if pending or connection.held:
                        connection.hold(pending + _line_bytes(events) if events else pending)
                    if events:
                        connection.last_request = now
                        connection.line_started = now if framer.pending_bytes else None
                    elif connection.line_started is None and framer.pending_bytes:
                        connection.line_started = now
                    for event in events:
                        if isinstance(event, LineTooLong):
                            await self._refuse_oversized(stream, connection, send_lock, event.limit)
                            return
                        outcome = self._dispatcher.begin(event)
                        size = len(event)
                        if callable(outcome):
                            # at either bound, stop reading (back-pressure)
                            await owed.acquire()
                            await connection.bytes_owed.take(size)
                            self._begin_request()
                            if _BATCH.match(event):
                                outcome = _one_batch_at_a_time(connection, outcome)
                            requests.start_soon(
                                self._answer_later, stream, connection, send_lock, outcome, size
                            )
                        elif outcome is not None:
                            try:
                                send_lock.acquire_nowait()
                            except trio.WouldBlock:
                                # Another answer is being written: a task waits for it, so the
                                # reader neither stalls nor, when stopped by a drain or the
                                # idle sweep, drops an answer owed.
                                await owed.acquire()
                                await connection.bytes_owed.take(len(outcome))
                                self._begin_request()
                                requests.start_soon(
                                    self._answer_ready,
                                    stream,
                                    connection,
                                    send_lock,
                                    outcome,
                                    len(outcome),
                                )
                                continue
                            await self._write(stream, connection, send_lock, outcome)
                    if connection.held:
                        connection.hold(pending)  # the feed's lines are taken
                    if holdings.total > holdings.bound:
                        self._shed()
            if connection.idle_closed:
                log.info("connection.idle_closed", idle_timeout_s=self._config.idle_timeout_s)

    async def _refuse_oversized(
        self, stream: trio.SocketStream, connection: _Connection, send_lock: trio.Lock, limit: int
    ) -> None:
        too_large = MessageTooLarge(
            f"a message exceeded the {limit}-byte limit; the connection is closed "
            "(raise server.max_message_bytes if this was intended)",
            limit=limit,
        )
        log.warning("connection.message_too_large", limit=limit)
        await self._send(stream, connection, send_lock, encode_error(too_large))

    def _begin_request(self) -> None:
        self._in_flight += 1
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        if self._on_activity is not None:
            self._on_activity()

    def _end_request(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()

    @classmethod
    async def _send(
        cls,
        stream: trio.SocketStream,
        connection: _Connection,
        send_lock: trio.Lock,
        reply: bytes | None,
    ) -> None:
        """Wait for the connection's send lock, then write `reply` (nothing for None)."""
        if reply is None:
            return
        try:
            send_lock.acquire_nowait()  # the common case: nobody else is writing
        except trio.WouldBlock:
            await send_lock.acquire()
        await cls._write(stream, connection, send_lock, reply)

    @staticmethod
    async def _write(
        stream: trio.SocketStream, connection: _Connection, send_lock: trio.Lock, reply: bytes
    ) -> None:
        """Every answer goes out here, whole: the caller has just taken `send_lock`, and it is
        released once the answer is written (or the write failed). A large one goes out a
        chunk at a time, and `sending_since` moves on with each, so that it says how long the
        client has taken nothing (a client reading a large answer slowly is not one that
        never reads)."""
        if connection.answer_cut:
            send_lock.release()
            return
        connection.sending_since = trio.current_time()
        try:
            if len(reply) <= SEND_CHUNK:
                await stream.send_all(reply)
            else:
                whole = memoryview(reply)
                for start in range(0, len(reply), SEND_CHUNK):
                    await stream.send_all(whole[start : start + SEND_CHUNK])
                    connection.sending_since = trio.current_time()
        except trio.Cancelled:
            connection.answer_cut = True
            raise
        finally:
            connection.sending_since = None
            send_lock.release()

    async def _answer_ready(
        self,
        stream: trio.SocketStream,
        connection: _Connection,
        send_lock: trio.Lock,
        reply: bytes,
        size: int,
    ) -> None:
        try:
            await self._send(stream, connection, send_lock, reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away; nothing is owed
        finally:
            connection.answers_owed.release()
            connection.bytes_owed.give_back(size)
            self._end_request()

    async def _answer_later(
        self,
        stream: trio.SocketStream,
        connection: _Connection,
        send_lock: trio.Lock,
        produce: DeferredReply,
        size: int,
    ) -> None:
        held = size
        try:
            await connection.bytes_owed.wait_for_room()
            reply = await produce()
            if reply is not None and len(reply) > held:
                # An answer may be many times its request (a batch, the records a search
                # found): what waits to be written is held as its request was, so that a
                # client that does not read is bounded, and shed, by what it makes orcad keep.
                connection.bytes_owed.hold_more(len(reply) - held)
                held = len(reply)
                if self._holdings.total > self._holdings.bound:
                    self._shed()
            await self._send(stream, connection, send_lock, reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away; nothing is owed
        finally:
            connection.answers_owed.release()
            connection.bytes_owed.give_back(held)
            self._end_request()
