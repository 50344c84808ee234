"""The trio server: accept connections on the private socket and serve NDJSON JSON-RPC.

Requests on one connection run concurrently; responses are written whole under a lock. A
connection that sends an oversized line, goes idle, trickles a line for too long, stops reading
its answers, or belongs to another uid is closed without touching any other connection; so is one
whose client vanished, or whose handling failed in a way nobody foresaw (logged once). A
connection with too many answers owed stops being read until its client catches up, and so does
one holding a large part of what the daemon may hold of all clients' requests (`_ReadBudget`).
When the connection limit is reached, the connection longest without a complete request makes
room.

This is the only module that writes to a connection. The dispatcher hands it each answer as
bytes: at once for a request that cannot block (the reader sends it when the connection's send
lock is free), or from a task of the request's own; every answer goes out through `_write`,
whole, under that lock.
"""

from __future__ import annotations

import collections
import errno
import os
import socket as stdlib_socket
import struct
from collections.abc import Callable

import structlog
import trio

from orcad import limits
from orcad.config import ServerConfig
from orcad.errors import Busy, MessageTooLarge
from orcad.log import describe_exception
from orcad.rpc import DeferredReply, Dispatcher, encode_error
from protocol.framing import LineFramer, LineTooLong

log = structlog.get_logger("orcad.server")

RECEIVE_CHUNK = 65536
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def _line_bytes(events: list[bytes | LineTooLong]) -> int:
    """The bytes of the lines among `events` (a LineTooLong ends them)."""
    if isinstance(events[-1], LineTooLong):
        events = events[:-1]
    return sum(map(len, events))  # type: ignore[arg-type]  # bytes alone, now


class _ReadBudget:
    """What every connection together holds of what their clients sent, in two parts, each
    bounded by `bound`:

    - Lines arriving (and complete ones not yet taken as requests). A connection holding less
      than READ_ALLOWANCE_BYTES of them is read whatever the others hold, so requests of
      ordinary size are never held up; past that, it is read while they add up to less than
      the bound, and otherwise waits for room. Waiting connections would each hold part of a
      line and none ever finish, so the one that has waited longest is read over the bound
      (one at a time) until its lines are taken.
    - Requests owed an answer (their lines, or the answers ready for them). A line of
      READ_ALLOWANCE_BYTES or more that would take them over the bound, while any are owed, is
      answered `busy` and neither decoded nor run. Requests owed are not waited for: a client
      may be waiting for its next line to be read before it reads the answers that make room.

    So the daemon holds at most about twice the bound, two lines and each connection's
    allowance, however many clients send large lines and never read."""

    __slots__ = ("_changed", "_queue", "arriving", "bound", "overdraft", "owed")

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.arriving = 0
        self.owed = 0
        self.overdraft: _Connection | None = None  # the one read over the bound
        self._queue: collections.deque[_Connection] = collections.deque()
        self._changed = trio.Event()

    def allows(self, connection: _Connection) -> bool:
        """Whether `connection` may be read now."""
        return (
            connection.arriving < limits.READ_ALLOWANCE_BYTES
            or self.arriving < self.bound
            or self.overdraft is connection
        )

    def takes(self, size: int) -> bool:
        """Whether a request line of `size` bytes may be owed an answer."""
        return size < limits.READ_ALLOWANCE_BYTES or not self.owed or self.owed + size <= self.bound

    async def room(self, connection: _Connection) -> None:
        """Wait until `connection` may be read: the lines arriving add up to less than the
        bound, or it has waited longest and nobody else is read over the bound."""
        self._queue.append(connection)
        try:
            while self.arriving >= self.bound:
                if self.overdraft is None and self._queue[0] is connection:
                    self.overdraft = connection
                    return
                await self._changed.wait()
        finally:
            self._queue.remove(connection)
            self._notify()  # the next one may be first now

    def lines_taken(self, connection: _Connection) -> None:
        """`connection` holds no line it has not taken, or is gone: another may be read over
        the bound."""
        if self.overdraft is connection:
            self.overdraft = None
            self._notify()

    def change(self, arriving: int = 0, owed: int = 0) -> None:
        self.arriving += arriving
        self.owed += owed
        if arriving < 0:
            self._notify()

    def _notify(self) -> None:
        if self._queue:
            self._changed.set()
            self._changed = trio.Event()


class _BytesOwed:
    """The bytes of the requests a connection has sent and not yet been answered: the reader
    waits while taking the next would go over the bound, unless nothing is owed (a line of any
    size the framer passed is served). A request is held until its answer is written, and an
    answer that echoes a request (its `id`, a field named in an error) is about as large as it,
    so a client that never reads keeps a bounded amount whatever its lines hold. A client that
    writes more than the bound of requests before it reads an answer waits for the daemon to
    read them, as it would at the count of answers owed: clients read as they send."""

    __slots__ = ("_changed", "bound", "budget", "owed")

    def __init__(self, bound: int, budget: _ReadBudget) -> None:
        self.bound = bound
        self.budget = budget  # the daemon's, which counts them too
        self.owed = 0
        self._changed = trio.Event()

    async def take(self, size: int) -> None:
        while self.owed and self.owed + size > self.bound:
            await self._changed.wait()
        self.owed += size
        self.budget.change(owed=size)

    def give_back(self, size: int) -> None:
        self.owed -= size
        self.budget.change(owed=-size)
        self._changed.set()
        self._changed = trio.Event()


class _Connection:
    """One connection's cancel scopes, its clocks and its answers owed: what the sweep needs to
    close idle, trickling and stuck connections, and what eviction needs to choose one."""

    __slots__ = (
        "answer_cut",
        "answers_owed",
        "arriving",
        "budget",
        "bytes_owed",
        "closed_because",
        "idle_closed",
        "last_received",
        "last_request",
        "line_started",
        "reader",
        "scope",
        "sending_since",
        "waiting_for_room",
    )

    def __init__(self, max_answers_owed: int, max_bytes_owed: int, budget: _ReadBudget) -> None:
        self.scope = trio.CancelScope()
        self.reader: trio.CancelScope | None = None  # cancelled to stop reading new requests
        self.last_received = trio.current_time()
        self.last_request = self.last_received  # when its last complete line arrived
        self.line_started: float | None = None  # first byte of a line not yet complete
        self.sending_since: float | None = None
        # waiting for the daemon to have room for more of its bytes (`_ReadBudget`): its line
        # is not timed meanwhile, since the wait is the daemon's
        self.waiting_for_room = False
        self.idle_closed = False
        self.closed_because: str | None = None
        # An answer's write was cancelled part way (a drain or the idle sweep stopped the reader
        # writing it): whatever followed would be read as the rest of that line, so nothing does.
        self.answer_cut = False
        # Requests read but not yet answered; at the bound the reader waits (back-pressure).
        self.answers_owed = trio.Semaphore(max_answers_owed)
        self.bytes_owed = _BytesOwed(max_bytes_owed, budget)  # and so for their bytes
        # its bytes of lines still arriving, and of complete ones not yet taken as requests,
        # counted in the daemon's `budget` too
        self.budget = budget
        self.arriving = 0

    def hold(self, size: int) -> None:
        """It holds `size` bytes of lines now (`arriving`)."""
        self.budget.change(arriving=size - self.arriving)
        self.arriving = size

    def close(self, reason: str) -> None:
        self.closed_because = reason
        self.scope.cancel()


def peer_uid(sock: trio.socket.SocketType) -> int | None:
    """The connecting process's uid, where the OS tells (SO_PEERCRED on Linux)."""
    so_peercred = getattr(stdlib_socket, "SO_PEERCRED", None)
    if so_peercred is None:
        return None  # no peer credentials: the 0700 runtime dir is the guard
    raw = sock.getsockopt(stdlib_socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


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
        self._budget = _ReadBudget(config.max_buffered_bytes)
        self._too_much_held = Busy(
            f"orcad holds its limit of {config.max_buffered_bytes} bytes of large requests "
            "owed an answer; retry this request shortly (or raise server.max_buffered_bytes)"
        )

    @property
    def connections(self) -> int:
        return self._connections

    @property
    def buffered_bytes(self) -> int:
        """What the daemon holds of what clients sent (`_ReadBudget`)."""
        return self._budget.arriving + self._budget.owed

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
            now = trio.current_time()
            for connection in self._open:
                since = connection.sending_since
                started = connection.line_started
                if since is not None and now - since >= send_timeout:
                    log.warning("connection.send_timeout", send_timeout_s=send_timeout)
                    connection.close("send_timeout")
                elif (
                    started is not None
                    and not connection.waiting_for_room
                    and now - started >= line_timeout
                ):
                    log.warning("connection.line_timeout", request_line_timeout_s=line_timeout)
                    connection.close("line_timeout")
                elif (
                    now - connection.last_received >= idle_timeout
                    and connection.reader
                    and not connection.waiting_for_room
                ):
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
                self._budget,
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
        budget = self._budget
        try:
            async with trio.open_nursery() as requests:
                with trio.CancelScope() as reading:  # cancelled by the sweep (idle) or by draining
                    connection.reader = reading
                    while not self._draining:
                        if connection.arriving and not budget.allows(connection):
                            await self._wait_for_room(connection)
                        data = await stream.receive_some(RECEIVE_CHUNK)
                        if not data:
                            break
                        now = connection.last_received = trio.current_time()
                        events = framer.feed(data)
                        pending = framer.pending_bytes
                        if not events:
                            connection.hold(pending)
                            if connection.line_started is None and pending:
                                connection.line_started = now
                            continue
                        connection.last_request = now
                        connection.line_started = now if pending else None
                        # Lines are held until taken, counted whole as the feed's; those of a
                        # feed that leaves nothing behind (one chunk at most, the common case)
                        # are served at once and not counted.
                        if pending or connection.arriving:
                            connection.hold(pending + _line_bytes(events))
                        for event in events:
                            if isinstance(event, LineTooLong):
                                await self._refuse_oversized(
                                    stream, connection, send_lock, event.limit
                                )
                                return
                            size = len(event)
                            if size < limits.READ_ALLOWANCE_BYTES or budget.takes(size):
                                outcome = self._dispatcher.begin(event)
                            else:  # refused before it is decoded: its parts would be held too
                                log.warning(
                                    "connection.request_refused", reason="buffered_bytes", size=size
                                )
                                outcome = self._dispatcher.refuse(event, self._too_much_held)
                            if callable(outcome):
                                # at either bound, stop reading (back-pressure)
                                await owed.acquire()
                                await connection.bytes_owed.take(size)
                                self._begin_request()
                                requests.start_soon(
                                    self._answer_later, stream, connection, send_lock, outcome, size
                                )
                            elif outcome is not None:
                                try:
                                    send_lock.acquire_nowait()
                                except trio.WouldBlock:
                                    # Another answer is being written: a task waits for it, so
                                    # the reader neither stalls nor, when stopped by a drain or
                                    # the idle sweep, drops an answer owed.
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
                        if connection.arriving:  # the feed's lines are taken
                            connection.hold(framer.pending_bytes)
                            budget.lines_taken(connection)
                if connection.idle_closed:
                    log.info("connection.idle_closed", idle_timeout_s=self._config.idle_timeout_s)
        finally:
            connection.hold(0)  # its incomplete line goes with it
            budget.lines_taken(connection)

    async def _wait_for_room(self, connection: _Connection) -> None:
        """Wait until the daemon may hold more of `connection`'s bytes (`_ReadBudget`). Its
        clocks stop meanwhile: the wait is the daemon's, not its client's."""
        budget = self._budget
        log.debug("connection.waiting_for_room", arriving=budget.arriving, bound=budget.bound)
        connection.waiting_for_room = True
        started = trio.current_time()
        try:
            await budget.room(connection)
        finally:
            connection.waiting_for_room = False
            waited = trio.current_time() - started
            connection.last_received += waited
            if connection.line_started is not None:
                connection.line_started += waited

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
        released once the answer is written (or the write failed)."""
        if connection.answer_cut:
            send_lock.release()
            return
        connection.sending_since = trio.current_time()
        try:
            await stream.send_all(reply)
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
        try:
            await self._send(stream, connection, send_lock, await produce())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away; nothing is owed
        finally:
            connection.answers_owed.release()
            connection.bytes_owed.give_back(size)
            self._end_request()
