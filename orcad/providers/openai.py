"""Extraction through any OpenAI-compatible chat-completions endpoint, streamed over SSE.

Three deadlines bound a call: `connect_timeout_s` for the TCP/TLS connect, `idle_timeout_s` for
the longest silence between two pieces of the response (the wait for the first byte included,
when streaming), and the caller's absolute deadline for the whole call. Any of them passing, an
HTTP error status, a broken stream or a body that is not the protocol raises ProviderError: one
failed attempt. Cancellation from outside (daemon shutdown) propagates untouched.

The HTTP client is httpx (0.28): it runs natively under trio through httpcore's trio backend, so
no thread or foreign event loop is involved, and trio cancellation reaches the socket.
"""

from __future__ import annotations

import ssl
import time
from typing import Final
from urllib.parse import urlsplit

import httpx
import trio

from orcad import limits
from orcad.config import OpenAIConfig
from orcad.providers import prompt
from orcad.providers.base import ProviderError
from orcad.providers.openai_wire import (
    ERROR_REASON_MAX_CHARS,
    EventStreamDecoder,
    StreamedAnswer,
    WireError,
    completion_content,
    error_reason,
    exception_text,
    parse_retry_after,
    request_body,
    shown_url,
    url_secrets,
)
from orcad.secrets import redact, shorten_redacted

RETRY_AFTER_STATUSES: Final = frozenset({429, 503})
ERROR_BODY_MAX_BYTES: Final = 4096  # enough of an error body to find its message
USER_AGENT: Final = "orcad-extractor"


def chat_completions_url(base_url: str) -> str:
    return base_url.rstrip("/") + "/chat/completions"


def url_problem(base_url: str) -> str | None:
    """Why no request can be sent to this base URL (a port that is no port, a broken [IPv6]
    literal, a control character, a query or fragment), or None."""
    if "?" in base_url or "#" in base_url:
        # the endpoint's path is added at the end of the base URL, so it would land in the
        # query (`/v1?x=1/chat/completions`) and every request would go to the wrong place
        return (
            "it has a query or a fragment (? or #), after which the endpoint's path would be "
            "added; give the URL without it"
        )
    try:
        _ = urlsplit(base_url).port  # a port out of range or not a number raises ValueError
        httpx.URL(chat_completions_url(base_url))
    except (ValueError, httpx.InvalidURL) as exc:
        return shorten_redacted(redact(str(exc)), ERROR_REASON_MAX_CHARS)
    return None


class OpenAIProvider:
    """One provider per daemon; each call opens its own short-lived client (no pool to close)."""

    name = "openai"
    prompt_version = prompt.PROMPT_VERSION

    def __init__(self, config: OpenAIConfig, *, api_key: str | None, trust_env: bool) -> None:
        self.model = config.model
        self.url = chat_completions_url(config.base_url)
        self.shown_url = shown_url(self.url)  # in messages: without the credentials it may hold
        self._config = config
        self._api_key = api_key or None
        # what a server could echo back that must not be kept: the key, and credentials in the
        # URL (httpx sends them as Basic authorization)
        self._secret_values = tuple(
            secret for secret in (self._api_key, *url_secrets(self.url)) if secret
        )
        self._trust_env = trust_env
        self._ssl_context: ssl.SSLContext | None = None

    def __repr__(self) -> str:  # never shows the key
        key = "set" if self._api_key else "unset"
        return f"OpenAIProvider(url={self.shown_url!r}, model={self.model!r}, key={key})"

    def request_headers(self) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if self._config.stream else "application/json",
            "User-Agent": USER_AGENT,
            # httpx asks for gzip by default and inflates what comes: the size bounds below
            # count inflated bytes, and one compressed chunk can inflate to gigabytes
            "Accept-Encoding": "identity",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def extract(self, source: str, *, deadline: float) -> str:
        budget = deadline - trio.current_time()
        body = request_body(
            self.model,
            prompt.render_messages(source),
            stream=self._config.stream,
            temperature=self._config.temperature,
        )
        try:
            with trio.move_on_at(deadline):
                return await self._post(body)
        except ProviderError as exc:
            if self._keyless(exc):
                raise
            masked = self._without_key(exc)
        else:
            masked = ProviderError(
                f"timed out: no complete answer from {self.shown_url} within {budget:.1f} s"
            )
        raise masked  # outside the handler: the unmasked error is not kept as its context

    def _keyless(self, exc: ProviderError) -> bool:
        """Neither the message nor its cause mentions the key or the URL's credentials (a
        server may echo them anywhere)."""
        cause = repr(exc.__cause__)
        return not any(secret in exc.message or secret in cause for secret in self._secret_values)

    def _without_key(self, exc: ProviderError) -> ProviderError:
        return ProviderError(self._masked(exc.message), retry_after=exc.retry_after)

    def _masked(self, text: str) -> str:
        for secret in self._secret_values:
            text = text.replace(secret, "[key]")
        return text

    def _timeouts(self) -> httpx.Timeout:
        config = self._config
        # Without streaming the whole generation happens before the first byte: only the overall
        # deadline can bound that wait.
        read = config.idle_timeout_s if config.stream else None
        return httpx.Timeout(
            connect=config.connect_timeout_s,
            read=read,
            write=config.idle_timeout_s,
            pool=config.connect_timeout_s,
        )

    def client_problem(self) -> str | None:
        """Why no HTTP client can be made in this process's environment, or None: a proxy
        variable with a scheme httpx does not know or a socks proxy without its optional
        package, an SSL_CERT_FILE that cannot be read. The environment does not change while
        orcad runs, so this is checked once, when the provider is built."""
        try:
            self._client()  # made and dropped: it opens nothing until a request is sent
        except (OSError, ValueError, ImportError, httpx.InvalidURL) as exc:
            text = f"{type(exc).__name__}: {exc}"
            return shorten_redacted(redact(text), ERROR_REASON_MAX_CHARS)  # a proxy's password
        return None

    def _client(self) -> httpx.AsyncClient:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context(trust_env=self._trust_env)
        return httpx.AsyncClient(
            timeout=self._timeouts(), trust_env=self._trust_env, verify=self._ssl_context
        )

    async def _post(self, body: bytes) -> str:
        answer = StreamedAnswer(secrets=self._secrets())
        try:
            async with (
                self._client() as client,
                client.stream(
                    "POST", self.url, content=body, headers=self.request_headers()
                ) as response,
            ):
                if not response.is_success:  # redirects are not followed: 3xx is a failure too
                    raise await self._http_error(response)
                if not _uncompressed(response):
                    shown = shorten_redacted(redact(response.headers["content-encoding"]), 40)
                    raise ProviderError(
                        f"{self.shown_url}: its answer is compressed ({shown}), unasked"
                    )
                content_type = response.headers.get("content-type", "")
                if "text/event-stream" in content_type:
                    return await self._read_stream(response, answer)
                return completion_content(
                    await _read_limited(response, limits.EXTRACTOR_OUTPUT_MAX_BYTES * 4),
                    secrets=self._secrets(),
                )
        except WireError as exc:
            raise ProviderError(f"{self.shown_url}: {exc}") from exc
        except httpx.ConnectTimeout as exc:
            raise ProviderError(
                f"cannot connect to {self.shown_url}: "
                f"no answer within {self._config.connect_timeout_s} s"
            ) from exc
        except httpx.ConnectError as exc:
            raise ProviderError(f"cannot connect to {self.shown_url}: {_describe(exc)}") from exc
        except httpx.HTTPError as exc:
            if answer.complete:  # the server finished the answer, then went silent or away
                try:
                    return answer.text()
                except WireError:
                    pass
            if isinstance(exc, httpx.TimeoutException):
                raise ProviderError(
                    f"{self.shown_url} was silent for more than {self._config.idle_timeout_s} s"
                ) from exc
            raise ProviderError(
                f"{self.shown_url}: the response broke off: {_describe(exc)}"
            ) from exc

    async def _read_stream(self, response: httpx.Response, answer: StreamedAnswer) -> str:
        decoder = EventStreamDecoder()
        problem: WireError | None = None
        # Reading stops at [DONE] or the first problem, whatever the server sends after it (a
        # model looping past the output limit, keep-alives): by a cancelled read, which unwinds
        # httpx's chain of async generators at once, where a break would leave them unclosed.
        with trio.CancelScope() as reading:
            async for data in response.aiter_bytes():
                if problem is not None or answer.done:
                    continue  # until the cancelled read: chunks httpx already holds
                try:
                    for payload in decoder.feed(data):
                        if not answer.done:
                            answer.feed_event(payload)
                except WireError as exc:
                    problem = exc
                if problem is not None or answer.done:
                    reading.cancel()
        if problem is not None:
            raise problem
        if not reading.cancelled_caught:
            for payload in decoder.feed_end():
                if not answer.done:
                    answer.feed_event(payload)
        return answer.text()

    def _secrets(self) -> tuple[str, ...]:
        return self._secret_values

    async def _http_error(self, response: httpx.Response) -> ProviderError:
        reason = ""
        if _uncompressed(response):  # a compressed one would be inflated before it is cut
            # one byte past the limit tells a body that was cut from one that just fits
            body = await _read_limited(response, ERROR_BODY_MAX_BYTES + 1, truncate=True)
            whole = len(body) <= ERROR_BODY_MAX_BYTES
            reason = error_reason(body[:ERROR_BODY_MAX_BYTES], secrets=self._secrets(), whole=whole)
        location = response.headers.get("location")
        if location is not None and response.is_redirect:  # the key would go where it points
            shown = shorten_redacted(redact(self._masked(location)), ERROR_REASON_MAX_CHARS)
            reason = f"redirect to {shown} not followed"
        reason = reason or response.reason_phrase
        retry_after = None
        if response.status_code in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(
                response.headers.get("retry-after"), now_epoch=time.time()
            )
        message = f"HTTP {response.status_code} from {self.shown_url}: {reason}"
        return ProviderError(message, retry_after=retry_after)


def _uncompressed(response: httpx.Response) -> bool:
    """The body is sent as it is: httpx inflates any other coding as it reads, past a bound."""
    return response.headers.get("content-encoding", "").strip().lower() in ("", "identity")


async def _read_limited(
    response: httpx.Response, max_bytes: int, *, truncate: bool = False
) -> bytes:
    """At most max_bytes of the body; a longer body is an error unless truncate is set.

    Reading stops past the limit (by a cancelled read, as in _read_stream): a body that never
    ends costs no more than one that is just too long.
    """
    received = bytearray()
    oversized = False
    with trio.CancelScope() as reading:
        async for chunk in response.aiter_bytes():
            if not oversized:
                received.extend(chunk)
                oversized = len(received) > max_bytes
                if oversized:
                    reading.cancel()
    if oversized and not truncate:
        raise WireError(f"the response is larger than {max_bytes} bytes")
    return bytes(received[:max_bytes])


def _describe(exc: Exception) -> str:
    # the text may quote what the server sent: redacted whole before it is shortened
    return shorten_redacted(redact(exception_text(exc)), ERROR_REASON_MAX_CHARS)
