"""The OpenAI chat-completions wire format, sans I/O: request body, SSE decoding, answers, errors.

`orcad.providers.openai` feeds bytes and lines from the network into these functions and acts on
what they return; nothing here touches a socket or a clock, so every rule is testable directly.
"""

from __future__ import annotations

import base64
import email.utils
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from orcad import limits
from orcad.secrets import redact, shorten_redacted

ERROR_REASON_MAX_CHARS = 200  # the part of a server's error text recorded in the job
EVENT_LINE_MAX_BYTES = 64 * 1024  # one SSE line; a delta is a few hundred bytes at most
EVENT_MAX_BYTES = 64 * 1024  # the data lines of one event: no more than one line may hold
CUT_OFF_FINISH_REASONS = frozenset({"length", "content_filter"})
_MESSAGE_FIELD = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)')


class WireError(Exception):
    """The server answered with something that is not the chat-completions protocol."""


def request_body(
    model: str, messages: list[dict[str, str]], *, stream: bool, temperature: float
) -> bytes:
    """The exact bytes POSTed to /chat/completions."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": stream,
        "temperature": temperature,
    }
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


URL_CREDENTIALS_SHOWN = "[credentials]"
URL_SECRET_MIN_CHARS = 4  # a shorter password is masked where the URL is shown, not elsewhere


# a URL's scheme and userinfo (up to the authority's last "@", as urlsplit reads it)
_URL_USERINFO = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


URL_QUERY_SHOWN = "?[query]"
# a URL's query and fragment, which may carry a token (`?key=...`)
_URL_QUERY = re.compile(r"[?#].*\Z", re.DOTALL)


def shown_url(url: str) -> str:
    """`url` as messages show it: a user name and password it holds (sent as Basic credentials)
    replaced by a placeholder, however short or plain the password is, and so is a query or a
    fragment. Any text will do, a URL no request can be sent to included (it is shown in the
    message that says so)."""
    shown = _URL_USERINFO.sub(lambda found: f"{found[1]}{URL_CREDENTIALS_SHOWN}@", url, count=1)
    return _URL_QUERY.sub(URL_QUERY_SHOWN, shown, count=1)


def url_secrets(url: str) -> tuple[str, ...]:
    """What of the credentials in `url` a server could echo back in an error: the password (or
    a user name that stands alone, as a token given so does) and the Basic token of the
    Authorization header they are sent as."""
    try:
        parts = urlsplit(url)
    except ValueError:  # (a broken [IPv6] literal): no request is sent to it
        return ()
    if "@" not in parts.netloc:
        return ()
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    found = [password or user, token]
    return tuple(secret for secret in found if len(secret) >= URL_SECRET_MIN_CHARS)


def exception_text(exc: BaseException) -> str:
    """What went wrong, in words: the exception's own text, else that of the first exception
    in its chain that has one (httpx under trio raises a ConnectError with no text from the
    TLS error that says why), else its type's name."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if text := str(current).strip():
            return text
        current = current.__cause__ or current.__context__
    return type(exc).__name__


def _json(document: str | bytes) -> Any:
    """json.loads, where a document nested deeper than the decoder recurses is not JSON either
    (ValueError, like any other that is not): a server controls the nesting."""
    try:
        return json.loads(document)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def parse_retry_after(value: str | None, *, now_epoch: float) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), never negative."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now_epoch)


def _without_last_word(text: str) -> str:
    """`text` without the run of non-space characters that ends it (if one does). A scan back
    from the end: `re.sub(r"\\S*\\Z", ...)` retries the run from each of its characters, 0.1 s
    for a 4 KiB body of one word and a space."""
    end = len(text)
    while end and not text[end - 1].isspace():
        end -= 1
    return text[:end]


def error_reason(body: bytes, *, secrets: tuple[str, ...] = (), whole: bool = True) -> str:
    """A short, single-line reason from an error body; any secret in it is masked.

    `whole` is False for a body cut at the read limit: the word the cut went through is dropped,
    since a secret cut in two is no longer recognised and its start would be kept.
    """
    text = body.decode("utf-8", errors="replace")
    if not whole:
        text = _without_last_word(text)
    try:
        decoded = _json(text)
    except ValueError:
        decoded = None
        if cut_short := _MESSAGE_FIELD.search(text):  # a JSON error body cut at the read limit
            text = cut_short.group(1).replace('\\"', '"')
    if isinstance(decoded, dict):
        error = decoded.get("error", decoded.get("detail", decoded.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            text = error if isinstance(error, str) else json.dumps(error)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[key]")
    # redacted whole, then shortened: a cut first would leave the rest of a secret it went through
    text = redact(text)
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    return shorten_redacted(text, ERROR_REASON_MAX_CHARS)


def completion_content(
    body: bytes,
    *,
    secrets: tuple[str, ...] = (),
    max_bytes: int = limits.EXTRACTOR_OUTPUT_MAX_BYTES,
) -> str:
    """The answer text of a non-streamed chat completion; `secrets` are masked in errors."""
    try:
        decoded = _json(body)
    except ValueError as exc:
        raise WireError("the response is not JSON") from exc
    if not isinstance(decoded, dict):
        raise WireError("the response is not a JSON object")
    if "error" in decoded:
        raise WireError(f"the server reported an error: {error_reason(body, secrets=secrets)}")
    choices = decoded.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise WireError("the response has no choices")
    choice = choices[0]
    finish_reason = choice.get("finish_reason")
    if finish_reason in CUT_OFF_FINISH_REASONS:
        raise WireError(f"the answer was cut off (finish_reason {finish_reason})")
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise WireError("the response has no message content")
    answer = without_reasoning(content)
    # a leading think block counts towards the bound, as when the answer is streamed; without
    # one, the parser judges the size (and `orcactl provider test` shows the answer cut)
    if answer is not content and len(content.encode("utf-8", "surrogatepass")) > max_bytes:
        raise WireError(f"the answer grew past {max_bytes} bytes")
    return answer


_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"


def without_reasoning(content: str) -> str:
    """The answer after the `<think>...</think>` block reasoning models (DeepSeek-R1, Qwen3, ...)
    open their content with; only a leading one goes, and everything after it is left to the
    strict extractor format. The answer is already within its size bound, so is the search."""
    stripped = content.lstrip()
    if not stripped.startswith(_THINK_OPEN):
        return content
    end = stripped.find(_THINK_CLOSE, len(_THINK_OPEN))
    if end < 0:
        raise WireError("the answer's leading <think> block is never closed")
    return stripped[end + len(_THINK_CLOSE) :]


_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass
class EventStreamDecoder:
    """Server-sent events: returns the data of each event a blank line completes."""

    _data: list[str] = field(default_factory=list)
    _data_bytes: int = 0  # of the event being read: a server that never ends one is cut off
    _partial: bytearray = field(default_factory=bytearray)
    _started: bool = False  # the stream's first bytes were seen (a byte order mark dropped)
    _after_cr: bool = False  # the last line ended in CR: a LF first in the next bytes is its end

    def feed(self, data: bytes) -> list[str]:
        """Take the next bytes of the body, split anywhere. Lines end in LF, CRLF or CR alone,
        as the format allows, and a byte order mark the stream starts with is not data."""
        self._partial.extend(data)
        if not self._started:
            if len(self._partial) < len(_BOM) and _BOM.startswith(self._partial):
                return []  # (perhaps the start of one)
            if self._partial.startswith(_BOM):
                del self._partial[: len(_BOM)]
            self._started = True
        if self._after_cr and self._partial:  # a LF now is the rest of the last line's end
            if self._partial[:1] == b"\n":
                del self._partial[:1]
            self._after_cr = False
        if b"\n" not in data and b"\r" not in data:
            # what was held has no line end either: the line goes on. Splitting it all again
            # at each piece cost a 64 KiB line sent a byte at a time 8 s of the event loop.
            if len(self._partial) > EVENT_LINE_MAX_BYTES:
                raise WireError(f"the stream has a line longer than {EVENT_LINE_MAX_BYTES} bytes")
            return []
        *lines, rest = _LINE_END.split(self._partial)  # at C speed, however many lines
        payloads: list[str] = []
        if lines:
            self._after_cr = self._partial.endswith(b"\r")  # perhaps a CRLF's CR, cut in two
            self._partial = bytearray(rest)
        for raw in lines:
            if not raw and not self._data:
                continue  # a blank line with no event to complete (keep-alives, stray ends)
            try:
                line = bytes(raw).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise WireError("the stream is not UTF-8") from exc
            payloads.extend(self.feed_line(line))
        if len(self._partial) > EVENT_LINE_MAX_BYTES:
            raise WireError(f"the stream has a line longer than {EVENT_LINE_MAX_BYTES} bytes")
        return payloads

    def feed_end(self) -> list[str]:
        """The body ended: an unterminated last line and event still count."""
        payloads: list[str] = []
        if not self._started:  # a body shorter than a byte order mark
            self._started = True
            if _BOM.startswith(self._partial):
                self._partial.clear()
        if self._partial:
            payloads.extend(self.feed(b"\n"))
        payloads.extend(self.feed_line(""))
        return payloads

    def feed_line(self, line: str) -> list[str]:
        if not line:
            if not self._data:
                return []
            payload, self._data, self._data_bytes = "\n".join(self._data), [], 0
            return [payload]
        if line.startswith(":"):
            return []  # a comment: servers send these as keep-alives
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value.removeprefix(" "))
            self._data_bytes += len(value.encode("utf-8"))
            if self._data_bytes > EVENT_MAX_BYTES:
                raise WireError(f"the stream has an event larger than {EVENT_MAX_BYTES} bytes")
        return []


@dataclass
class StreamedAnswer:
    """Accumulates the deltas of a streamed completion and knows whether it ended properly."""

    max_bytes: int = limits.EXTRACTOR_OUTPUT_MAX_BYTES
    secrets: tuple[str, ...] = ()  # masked in an error the server reports mid-stream
    parts: list[str] = field(default_factory=list)
    size: int = 0
    finish_reason: str | None = None
    done: bool = False

    @property
    def complete(self) -> bool:
        return self.done or self.finish_reason is not None

    def feed_event(self, payload: str) -> None:
        """Take one event's data. Raises WireError on anything a well-behaved server never sends."""
        if payload.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = _json(payload)
        except ValueError as exc:
            raise WireError("the stream carried an event that is not JSON") from exc
        if not isinstance(chunk, dict):
            raise WireError("the stream carried an event that is not a JSON object")
        if "error" in chunk:
            reason = error_reason(payload.encode(), secrets=self.secrets)
            raise WireError(f"the server reported an error mid-stream: {reason}")
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise WireError("a stream event has no choices")
        if not choices:
            return  # usage-only chunks carry no choices
        choice = choices[0]
        if not isinstance(choice, dict):
            raise WireError("a stream event has a malformed choice")
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            self.parts.append(content)
            # half of a surrogate pair (a \ud83d escape) has no UTF-8 of its own: see text()
            self.size += len(content.encode("utf-8", "surrogatepass"))
            if self.size > self.max_bytes:
                raise WireError(f"the answer grew past {self.max_bytes} bytes")
        finish_reason = choice.get("finish_reason")
        if isinstance(finish_reason, str):
            self.finish_reason = finish_reason

    def text(self) -> str:
        """The whole answer; raises WireError unless the stream ended properly."""
        if not self.complete:
            raise WireError("the stream ended before the answer was complete")
        if self.finish_reason in CUT_OFF_FINISH_REASONS:
            raise WireError(f"the answer was cut off (finish_reason {self.finish_reason})")
        return without_reasoning(_paired_surrogates("".join(self.parts)))


def _paired_surrogates(text: str) -> str:
    """`text` with each surrogate pair made the one character it stands for. A server that
    escapes text as UTF-16 may send an emoji's two halves in two events; a lone half stays, for
    the extractor-output parser to refuse."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text
