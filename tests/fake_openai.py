"""A real OpenAI-compatible chat-completions server on 127.0.0.1, scripted per request.

The LLM endpoint is the one thing that is off the machine, so tests talk to this instead: a real
HTTP/1.1 server on a random loopback port, run in threads, that answers each POST with the next
scripted behaviour (a full JSON answer, an SSE stream in small pieces, a stall, an error status
with Retry-After, junk, a connection dropped mid-stream) and records every request exactly as it
arrived. Usable from any test, in-process providers and daemon subprocesses alike:

    with FakeOpenAI() as server:
        server.script(streamed('{"category": "user", "fact": "..."}'), status(500))
        ... point base_url at server.base_url ...
        assert server.requests[0].json()["model"] == "test-model"
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behaviour = Callable[["_Handler", "FakeOpenAI"], None]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes
    received_at: float  # time.monotonic() when the body had been read

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeOpenAI:
    """Start with `with FakeOpenAI() as server:`; `base_url` ends in /v1 like real servers."""

    default: Behaviour | None = None  # used when the script is exhausted; None answers 599
    requests: list[RecordedRequest] = field(default_factory=list)
    _script: deque[Behaviour] = field(default_factory=deque)
    _lock: threading.Condition = field(default_factory=threading.Condition)
    closing: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    def __enter__(self) -> FakeOpenAI:
        fake = self

        class Handler(_Handler):
            server_state = fake

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.closing.set()  # ends every stall at once
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._script.extend(behaviours)

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> list[RecordedRequest]:
        """Block until `count` requests have arrived (for driving a daemon subprocess)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests) >= count, timeout=timeout):
                raise TimeoutError(f"{len(self.requests)} of {count} requests arrived")
            return list(self.requests)

    def _next(self, request: RecordedRequest) -> Behaviour | None:
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()
            return self._script.popleft() if self._script else self.default


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # as real servers do (Go's, uvicorn's): else the body, written after the headers, waits
    # for the client's delayed acknowledgement (40 ms on Linux) on a kept-alive connection
    disable_nagle_algorithm = True
    server_state: FakeOpenAI

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        request = RecordedRequest(
            method="POST",
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            received_at=time.monotonic(),
        )
        behaviour = self.server_state._next(request)
        try:
            if behaviour is None:
                status(599, "the test script is exhausted")(self, self.server_state)
            else:
                behaviour(self, self.server_state)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up first, as clients with deadlines do

    # --- pieces the behaviours use ---------------------------------------------------------

    def send_fixed(self, code: int, body: bytes, content_type: str, extra: dict[str, str]) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def start_event_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def send_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def abort(self) -> None:
        """Drop the connection with the chunked body unfinished."""
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


# --- behaviours ------------------------------------------------------------------------------


def completion_json(content: str, *, finish_reason: str = "stop", model: str = "fake") -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
        }
    ).encode()


def sse_event(content: str | None, *, finish_reason: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    chunk = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _pieces(content: str, size: int) -> list[str]:
    return [content[i : i + size] for i in range(0, len(content), size)] or [""]


def ok(content: str) -> Behaviour:
    """A complete non-streamed answer (a server that ignores `stream: true`)."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        handler.send_fixed(200, completion_json(content), "application/json", {})

    return respond


def streamed(
    content: str,
    *,
    chunk_chars: int = 3,
    gap_s: float = 0.0,
    finish_reason: str | None = "stop",
    send_done: bool = True,
    stall_after_first_s: float = 0.0,
    keepalive_every_s: float | None = None,
    hold_open_s: float = 0.0,
) -> Behaviour:
    """An SSE answer in pieces of `chunk_chars`, `gap_s` apart; optionally one long silence
    after the first piece (during which `: ping` comments go out every `keepalive_every_s`),
    and a silence of `hold_open_s` after the answer, before the body ends."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        handler.start_event_stream()
        for index, piece in enumerate(_pieces(content, chunk_chars)):
            if index and gap_s:
                state.closing.wait(gap_s)
            handler.send_chunk(sse_event(piece))
            if index == 0 and stall_after_first_s:
                _silence(handler, state, stall_after_first_s, keepalive_every_s)
        if finish_reason is not None:
            handler.send_chunk(sse_event(None, finish_reason=finish_reason))
        if send_done:
            handler.send_chunk(b"data: [DONE]\n\n")
        if hold_open_s:
            state.closing.wait(hold_open_s)
        handler.end_chunks()

    return respond


def endless_stream(first: bytes = b"", piece: bytes = b": ping\n\n") -> Behaviour:
    """An SSE body that starts with `first` and then repeats `piece` until the server closes,
    as fast as the client reads it: a model stuck in a loop, or a proxy's keep-alives."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        handler.start_event_stream()
        if first:  # an empty chunk would end the body
            handler.send_chunk(first)
        while not state.closing.is_set():
            handler.send_chunk(piece)
        handler.close_connection = True

    return respond


def _silence(
    handler: _Handler, state: FakeOpenAI, seconds: float, ping_every: float | None
) -> None:
    if ping_every is None:
        state.closing.wait(seconds)
        return
    remaining = seconds
    while remaining > 0 and not state.closing.is_set():
        state.closing.wait(min(ping_every, remaining))
        remaining -= ping_every
        handler.send_chunk(b": ping\n\n")


def stall_before_headers(seconds: float, then: Behaviour | None = None) -> Behaviour:
    """Say nothing at all for `seconds` (the request was read), then behave as `then`."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        state.closing.wait(seconds)
        if then is not None and not state.closing.is_set():
            then(handler, state)
        else:
            handler.close_connection = True

    return respond


def status(code: int, message: str = "error", *, retry_after: str | None = None) -> Behaviour:
    """An error status with an OpenAI-style error body and optional Retry-After."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
        extra = {"Retry-After": retry_after} if retry_after is not None else {}
        handler.send_fixed(code, body, "application/json", extra)

    return respond


def junk(body: bytes = b"<html>not an API</html>", content_type: str = "text/html") -> Behaviour:
    """A 200 whose body is not the protocol."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        if content_type == "text/event-stream":
            handler.start_event_stream()
            handler.send_chunk(body)
            handler.end_chunks()
        else:
            handler.send_fixed(200, body, content_type, {})

    return respond


def disconnect_mid_stream(content: str, *, pieces_before: int = 2) -> Behaviour:
    """Start streaming, send a few pieces, then drop the connection without finishing."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        handler.start_event_stream()
        for piece in _pieces(content, 3)[:pieces_before]:
            handler.send_chunk(sse_event(piece))
        handler.abort()

    return respond


def trickled_headers(every_s: float, lines: int = 1000) -> Behaviour:
    """A status line, then a header line every `every_s`, never ending the headers: each read
    gets something well within any per-read timeout."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
        handler.wfile.flush()
        for _ in range(lines):
            if state.closing.wait(every_s):
                break
            handler.wfile.write(b"X-Still-Thinking: yes\r\n")
            handler.wfile.flush()
        handler.close_connection = True

    return respond


def trickled_body(body: bytes, every_s: float) -> Behaviour:
    """A 200 whose chunked JSON body comes a byte every `every_s`."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for byte in body:
            if state.closing.wait(every_s):
                return
            handler.send_chunk(bytes([byte]))
        handler.end_chunks()

    return respond


def endless_body(piece: bytes = b"[0.5, " * 10_000) -> Behaviour:
    """A 200 whose chunked JSON body never ends, as fast as the client reads it."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.send_chunk(b'{"data": [{"index": 0, "embedding": ')
        while not state.closing.is_set():
            handler.send_chunk(piece)
        handler.close_connection = True

    return respond


def gzipped(body: bytes, *, unasked: bool = False) -> Behaviour:
    """`body` gzip-compressed as a JSON answer, as servers do for clients that accept gzip (or
    always, with `unasked`); otherwise sent as it is."""

    def respond(handler: _Handler, state: FakeOpenAI) -> None:
        accepted = handler.headers.get("Accept-Encoding", "")
        if unasked or "gzip" in accepted:
            extra = {"Content-Encoding": "gzip"}
            handler.send_fixed(200, gzip.compress(body), "application/json", extra)
        else:
            handler.send_fixed(200, body, "application/json", {})

    return respond
