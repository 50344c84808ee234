"""An OpenAI-compatible `/v1/embeddings` server as recall's embedding model: every call bounded
by a deadline, texts redacted before they leave the machine, and each purpose (recall, a
publish, the backfill) resting on its own failures.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from orcad.limits import (
    EMBEDDING_ANSWER_BASE_BYTES,
    EMBEDDING_ANSWER_BYTES_PER_TEXT,
    EMBEDDING_BACKGROUND_TIMEOUT_S,
)
from orcad.providers import is_loopback_url
from orcad.providers.openai_wire import (
    error_reason,
    exception_text,
    parse_retry_after,
    shown_url,
)
from orcad.recall.breaker import EndpointBreaker
from orcad.recall.embedders import (
    EMBED_READ_CHARS,
    PURPOSES,
    Array,
    EmbeddingRefused,
    EmbeddingTimedOut,
    EmbeddingUnavailable,
    Purpose,
    RankingSettings,
    normalize_rows,
)
from orcad.secrets import redact

# an endpoint's statuses that refuse what was sent, rather than say it cannot answer now
REFUSING_STATUSES = frozenset({400, 413, 422})


class EndpointEmbedder(RankingSettings):
    """An OpenAI-compatible `/v1/embeddings` server, each call bounded by `timeout_s`. Texts are
    redacted before they are sent (a prompt may hold a pasted secret)."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float):
        if not base_url or not model:
            raise EmbeddingUnavailable(
                '[recall.endpoint] needs base_url and model for embedding = "endpoint"'
            )
        if (problem := _url_problem(base_url)) is not None:  # else every call fails for it
            raise EmbeddingUnavailable(
                f"[recall.endpoint] base_url {shown_url(base_url)!r} {problem}; "
                "use e.g. http://127.0.0.1:11434/v1"
            )
        self.url = base_url.rstrip("/") + "/embeddings"
        self.shown_url = shown_url(self.url)  # in messages: without the credentials it may hold
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._secrets = (api_key,) if api_key else ()  # masked in a reason the server gives
        self.timeout_s = timeout_s
        self.model_id = f"endpoint-{model}"
        self.dims = 0  # known after the first answer
        # each purpose rests on its own failures: a batch a slow server could not embed in time
        # says nothing about one prompt, nor a failure within recall's deadline about the
        # backfill's longer one
        self.breakers: dict[Purpose, EndpointBreaker] = {
            purpose: EndpointBreaker() for purpose in PURPOSES
        }
        self._client: Any = None  # its DeadlineClient, made at the first call
        self._client_lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, purpose: Purpose = "recall") -> Array:
        """Unit rows for `texts`; EmbeddingRefused when the server refuses them,
        EmbeddingTimedOut past the deadline, else EmbeddingUnavailable when it fails, or failed
        lately and rests (orcad.recall.breaker). The backfill gets at least
        EMBEDDING_BACKGROUND_TIMEOUT_S (recall's deadline is set for one prompt)."""
        if not texts:
            return np.zeros((0, max(self.dims, 1)), dtype=np.float32)
        breaker = self.breakers[purpose]
        admitted = breaker.admit()
        if admitted.resting is not None:
            raise EmbeddingUnavailable(admitted.resting)
        timeout_s = self.timeout_s
        if purpose == "backfill":
            timeout_s = max(timeout_s, EMBEDDING_BACKGROUND_TIMEOUT_S)
        try:
            matrix = self._post(texts, timeout_s)
        except EmbeddingRefused:
            self._answered(purpose)  # the input is at fault, not the server
            raise
        except EmbeddingUnavailable as exc:
            breaker.failed(admitted.round, str(exc), exc.retry_after)
            raise
        except BaseException as exc:  # whatever it was, the trial it may be has an outcome
            breaker.failed(admitted.round, f"embedding endpoint {self.shown_url}: {exc!r}")
            raise
        self._answered(purpose)
        return matrix

    def _answered(self, purpose: Purpose) -> None:
        """The server answered within the deadline of `purpose`: the rests of the purposes
        with that deadline or a longer one are over (an answer within the backfill's says
        nothing about recall's)."""
        ended = ("backfill",) if purpose == "backfill" else PURPOSES
        for each in ended:
            self.breakers[each].succeeded()

    def _http(self) -> Any:
        """The client every call shares (orcad.recall.endpoint_http), and with it its open
        connections: each one made anew (as `httpx.post` does) builds a TLS context first,
        about 30 ms on every recall."""
        # only for an endpoint: httpx would add ~45 ms to every start
        from orcad.recall.endpoint_http import DeadlineClient  # noqa: PLC0415

        with self._client_lock:
            if self._client is None:
                # as for extraction, a server on this machine is reached directly, whatever
                # proxy the environment names for reaching the outside
                self._client = DeadlineClient(trust_env=not is_loopback_url(self.url))
                # its loop and connections end with it when this embedder goes
                weakref.finalize(self, self._client.close)
            return self._client

    def start(self) -> None:
        """Start the HTTP client's loop (imports included, about 0.2 s), which the first
        request would otherwise wait for."""
        self._http().start()

    def _post(self, texts: Sequence[str], timeout_s: float) -> Array:
        import httpx  # noqa: PLC0415 - as in `_http`

        from orcad.recall.endpoint_http import AnswerTooLarge, DeadlinePassed  # noqa: PLC0415

        client = self._http()
        try:
            answer = client.post_json(
                self.url,
                # leaves the machine: what looks like a secret goes as its placeholder
                {
                    "model": self.model,
                    # redacted whole, then cut: a cut first could leave half a secret
                    "input": [redact(text)[:EMBED_READ_CHARS] for text in texts],
                },
                headers=self.headers,
                deadline_s=timeout_s,
                max_bytes=EMBEDDING_ANSWER_BASE_BYTES
                + len(texts) * EMBEDDING_ANSWER_BYTES_PER_TEXT,
            )
        except (DeadlinePassed, httpx.TimeoutException) as exc:
            message = f"embedding endpoint {self.shown_url}: timed out after {timeout_s:g} s"
            raise EmbeddingTimedOut(message) from exc
        except (AnswerTooLarge, httpx.HTTPError) as exc:
            reason = exception_text(exc)  # (a TLS failure's text is in the chain alone)
            raise EmbeddingUnavailable(f"embedding endpoint {self.shown_url}: {reason}") from exc
        if not 200 <= answer.status < 300:  # a redirect is not followed, nor its body taken
            message = f"embedding endpoint {self.shown_url} answered {answer.status}"
            message += f" {answer.reason}" if answer.reason else ""
            if answer.status in REFUSING_STATUSES:
                raise EmbeddingRefused(message)
            retry_after = parse_retry_after(answer.retry_after, now_epoch=time.time())
            raise EmbeddingUnavailable(message, retry_after=retry_after)
        try:
            document = json.loads(answer.body)
        except (ValueError, RecursionError) as exc:  # the decoder's own words name no field
            raise EmbeddingUnavailable(
                f"embedding endpoint {self.shown_url}: its answer is not JSON"
            ) from exc
        if isinstance(document, dict) and "error" in document and "data" not in document:
            # a server that answers 200 with an OpenAI-style error: its own words, bounded,
            # on one line, redacted, rather than what the answer lacks
            reason = error_reason(answer.body, secrets=self._secrets)
            raise EmbeddingUnavailable(
                f"embedding endpoint {self.shown_url}: the server reported an error: {reason}"
            )
        try:
            items = sorted(document["data"], key=lambda item: item["index"])
            matrix = np.array([item["embedding"] for item in items], dtype=np.float32)
            # each text's row once: a repeated or missing index would give a text another's
            indexed = [item["index"] for item in items] == list(range(len(texts)))
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            # a KeyError's text is the bare key ('data'): said as what the answer lacks
            raise EmbeddingUnavailable(
                f"embedding endpoint {self.shown_url}: its answer is not an embeddings list "
                f"(`data`, each item with `index` and `embedding`): "
                f"{'no ' + repr(exc.args[0]) if isinstance(exc, KeyError) else exc}"
            ) from exc
        if (
            not indexed
            or matrix.ndim != 2
            or len(matrix) != len(texts)
            or matrix.shape[1] == 0
            or (self.dims and matrix.shape[1] != self.dims)
        ):
            raise EmbeddingUnavailable(
                f"embedding endpoint {self.shown_url}: answer of wrong shape"
            )
        self.dims = int(matrix.shape[1])
        # a row holding NaN or inf says nothing: a zero row (cosine 0 with everything), as for
        # a text without tokens, so the others of the batch are kept
        matrix[~np.isfinite(matrix).all(axis=1)] = 0.0
        return normalize_rows(matrix)


def _url_problem(base_url: str) -> str | None:
    """Why no request can be sent to this base URL (not http(s), a port that is no port, a
    broken [IPv6] literal, a control character), or None."""
    # httpx, which any endpoint loads anyway: not imported by orcad for other settings
    from orcad.providers.openai import url_problem  # noqa: PLC0415

    if (problem := url_problem(base_url)) is not None:
        return f"is not a valid URL ({problem})"
    parts = urlsplit(base_url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL"
    return None
