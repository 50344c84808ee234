"""HTTP for the embedding endpoint: each request bounded by one deadline and its answer by a size.

httpx's timeouts bound each network operation, not the request. A server that sends its answer a
few bytes at a time, each within the timeout, kept a recall with a 0.5 s deadline waiting 3.5 s,
and one that kept trickling would have held it, and the search thread under it, for as long as it
liked. Its answer was also read whole, whatever its size.

So the requests are made on a trio event loop of their own, on a thread of its own, each under a
cancel scope that ends it at the deadline whatever the server does, and the body is read up to a
limit. Callers block on it from any thread (recall's and the backfill's workers). The loop and its
httpx client (with its kept-alive connections, and the proxies the environment names unless the
endpoint is on this machine) are made
by `start` (when the model loads, else at the first request) and live until `close`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import httpx
import trio


class DeadlinePassed(Exception):
    """The request was still unanswered, or its answer unread, at its deadline."""


class AnswerTooLarge(Exception):
    """The answer's body was longer than the limit given, or compressed (unasked), so that it
    could swell past it."""


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    retry_after: str | None
    body: bytes  # empty for a status outside 2xx (not read)


# each loop's own client: a request that reaches a loop being closed never uses the next one's
_CLIENT: trio.lowlevel.RunVar[httpx.AsyncClient] = trio.lowlevel.RunVar("client")


def _identity(encoding: str) -> bool:
    return encoding.strip().lower() in {"", "identity"}  # (codings ignore case)


class _Request(NamedTuple):
    url: str
    payload: Any
    headers: Mapping[str, str]
    deadline_s: float
    max_bytes: int


class DeadlineClient:
    """Blocking `post_json` calls made on a private event loop, each ending by its deadline."""

    def __init__(self, *, trust_env: bool = True) -> None:
        # proxy variables and SSL_CERT_FILE apply (they are for reaching other hosts)
        self._trust_env = trust_env
        self._lock = threading.Lock()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None

    def post_json(
        self,
        url: str,
        payload: Any,
        *,
        headers: Mapping[str, str],
        deadline_s: float,
        max_bytes: int,
    ) -> Answer:
        """POST `payload` as JSON. DeadlinePassed when the answer is not read within
        `deadline_s` of the call, AnswerTooLarge past `max_bytes` (or compressed, which it was
        asked not to be), httpx.HTTPError when the request fails otherwise."""
        token = self.start()
        request = _Request(url, payload, headers, deadline_s, max_bytes)
        try:
            return trio.from_thread.run(self._post, request, trio_token=token)
        except (trio.RunFinishedError, trio.Cancelled) as exc:  # the loop ended meanwhile
            with self._lock:
                if self._token is token:
                    self._token = None  # the next request starts it anew
            raise httpx.TransportError("the embedding endpoint's client was closed") from exc

    async def _post(self, request: _Request) -> Answer:
        url, payload, headers, deadline_s, max_bytes = request
        try:
            client = _CLIENT.get()
        except LookupError as exc:  # (the loop is closing)
            raise httpx.TransportError("the embedding endpoint's client was closed") from exc
        answer: Answer | None = None
        too_large = False
        with trio.move_on_after(deadline_s) as scope:
            # httpx's own timeouts are the deadline too, so none is shorter than the request's
            async with client.stream(
                "POST",
                url,
                json=payload,
                # a compressed answer could swell far past the limit within one chunk
                headers={**headers, "Accept-Encoding": "identity"},
                timeout=deadline_s,
            ) as response:
                retry_after = response.headers.get("retry-after")
                status, reason = response.status_code, response.reason_phrase
                if not 200 <= status < 300:  # its body is never used (nor a redirect followed)
                    answer = Answer(status, reason, retry_after, b"")
                elif not _identity(response.headers.get("content-encoding", "")):
                    encoding = response.headers["content-encoding"]
                    raise AnswerTooLarge(f"its answer is compressed ({encoding}), unasked")
                else:
                    body = bytearray()
                    # past the limit the request is cancelled rather than left: httpx's chain
                    # of async generators must finish (a cancellation finishes them), not be
                    # left to the garbage collector
                    async for chunk in response.aiter_bytes():
                        if len(body) + len(chunk) > max_bytes:
                            too_large = True
                            scope.cancel()
                        elif not too_large:
                            body += chunk
                    if not too_large:
                        answer = Answer(status, reason, retry_after, bytes(body))
        if answer is not None:  # (read whole, even if the deadline came as it closed)
            return answer
        if too_large:
            raise AnswerTooLarge(f"its answer is larger than {max_bytes} bytes")
        raise DeadlinePassed

    def start(self) -> trio.lowlevel.TrioToken:
        """The loop's token, the loop and its client started first if they are not running."""
        with self._lock:
            token = self._token
            if token is None:
                ready = threading.Event()  # the loop runs, or failed to start
                thread = threading.Thread(
                    target=self._run, args=(ready,), name="orcad-embedding-http", daemon=True
                )
                thread.start()
                ready.wait()
                token = self._token
                if token is None:  # the loop's thread sets it, or `_failed`
                    raise httpx.TransportError(f"cannot start the HTTP client: {self._failed!r}")
                self._thread = thread
            return token

    def _run(self, ready: threading.Event) -> None:
        try:
            trio.run(self._serve, ready)
        except BaseException as exc:  # kept for the callers, who raise it
            self._failed = exc
        finally:
            ready.set()

    async def _serve(self, ready: threading.Event) -> None:
        token = trio.lowlevel.current_trio_token()
        try:
            async with httpx.AsyncClient(trust_env=self._trust_env) as client:
                _CLIENT.set(client)
                self._stop = trio.Event()
                self._token = token
                ready.set()
                await self._stop.wait()
        finally:
            if self._token is token:  # ended by a failure: the next request starts anew
                self._token = None

    def close(self) -> None:
        """End the loop and close the client's connections (a later call starts them anew)."""
        with self._lock:
            token, stop, thread = self._token, self._stop, self._thread
            self._token = self._stop = self._thread = None
        if token is None or stop is None or thread is None:
            return
        try:
            trio.from_thread.run_sync(stop.set, trio_token=token)
        except trio.RunFinishedError:
            return
        thread.join(timeout=5.0)
