"""JSON-RPC 2.0 dispatch: one line in, one line (or nothing) out.

A well-formed single request is decoded in one typed pass (envelope, then params straight into
the method's Struct); anything else takes the general path, which validates batches and builds
the exact error. Handlers that cannot block are plain functions and are answered inline by the
connection's reader; async handlers get a task of their own, so that a slow request never holds
up the others on its connection.

This is the only place where exceptions become error objects: OrcaError subclasses map to their
code and kind, anything else is logged with its traceback and answered with a bare -32603.
Handlers return results and never see the connection; the server alone writes answers.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog
import trio

from orcad import limits
from orcad.config import explain_validation_error
from orcad.errors import (
    QUOTED_MAX_CHARS,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    OrcaError,
    ParseError,
    clipped,
    quoted,
)
from orcad.log import describe_exception
from protocol.errors import ErrorCode, ErrorObject
from protocol.framing import json_nesting_exceeds
from protocol.types import METHODS, NO_CONTROL_CHARACTERS, Params, Result

AsyncHandler = Callable[[Any], Awaitable[Result]]
SyncHandler = Callable[[Any], Result]
RequestId = int | str | None
Reply = bytes | None
DeferredReply = Callable[[], Awaitable[Reply]]  # the answer of a request that may block


_ENVELOPE_KEYS = frozenset({"jsonrpc", "method", "params", "id"})
_NO_ID = object()

log = structlog.get_logger("orcad.rpc")


class _Success(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    id: RequestId
    result: Any


class _Failure(msgspec.Struct, frozen=True, kw_only=True):
    jsonrpc: str = "2.0"
    id: RequestId
    error: ErrorObject


class _Envelope(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The common case, decoded in one pass; anything it rejects takes the general path."""

    jsonrpc: str
    method: str
    id: int | str | msgspec.UnsetType | None = msgspec.UNSET
    params: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"{}"))


_encoder = msgspec.json.Encoder()
_envelope_decoder = msgspec.json.Decoder(_Envelope)


class _Route:
    __slots__ = ("decoder", "handler", "is_async", "method", "params_type")

    def __init__(
        self, method: str, params_type: type[Params], handler: AsyncHandler | SyncHandler
    ) -> None:
        self.method = method
        self.params_type = params_type
        self.decoder = msgspec.json.Decoder(params_type)
        self.handler = handler
        self.is_async = inspect.iscoroutinefunction(handler)


class Router:
    """Method name -> (params type, handler). Methods not added answer -32601.

    A handler is async only if it can block; a plain function is answered inline.
    Until `mark_ready()` (all features installed), only routes added with `early=True` are
    served; any other request waits for readiness instead of being refused.
    """

    def __init__(self) -> None:
        self._routes: dict[str, _Route] = {}
        self._early: set[str] = set()
        self._ready = trio.Event()
        self._failure: str | None = None

    @property
    def ready(self) -> bool:
        """Startup has ended, well or not (see `failure`)."""
        return self._ready.is_set()

    @property
    def failure(self) -> str | None:
        return self._failure

    def mark_ready(self) -> None:
        self._ready.set()

    def mark_failed(self, reason: str) -> None:
        """The features could not be installed: requests waiting for them are answered now."""
        self._failure = reason
        self._ready.set()

    async def wait_ready(self) -> None:
        await self._ready.wait()

    def serves_now(self, method: str) -> bool:
        return (self._ready.is_set() and self._failure is None) or method in self._early

    def add(self, method: str, handler: AsyncHandler | SyncHandler, *, early: bool = False) -> None:
        if method not in METHODS:
            raise ValueError(f"{method} is not a protocol method")
        if method in self._routes:
            raise ValueError(f"{method} is already routed")
        self._routes[method] = _Route(method, METHODS[method][0], handler)
        if early:
            self._early.add(method)

    def get(self, method: str) -> _Route | None:
        return self._routes.get(method)

    def methods(self) -> list[str]:
        return sorted(self._routes)


_TOO_DEEP = InvalidRequest(
    f"the line nests arrays or objects more than {limits.MAX_JSON_NESTING} levels deep; "
    "no request of this protocol does",
    limit=limits.MAX_JSON_NESTING,
)


_NOT_AN_OBJECT = "a request must be a JSON object"

_TOO_MANY_IN_BATCH = InvalidRequest(
    f"a batch holds at most {limits.MAX_BATCH_REQUESTS} requests; nothing in this one was run "
    "(send it as smaller batches, or one request per line)",
    limit=limits.MAX_BATCH_REQUESTS,
)


def error_object(error: OrcaError) -> ErrorObject:
    return ErrorObject(code=int(error.code), message=error.message, data=error.to_data())


INTERNAL_ERROR = ErrorObject(
    code=int(ErrorCode.INTERNAL),
    message="internal error in orcad; the daemon log has the details",
    data={"kind": "internal"},
)


def encode_error(error: OrcaError, request_id: RequestId = None) -> bytes:
    return _encoder.encode(_Failure(id=request_id, error=error_object(error))) + b"\n"


# What a pattern of protocol.types asks, in words: msgspec's message quotes the regex.
_PATTERN_MEANINGS = {
    NO_CONTROL_CHARACTERS: "a control character (U+0000 to U+001F, U+007F to U+009F: a newline, "
    "a tab, an escape) is not allowed here",
}


def _invalid_params(exc: msgspec.ValidationError, raw: object) -> InvalidParams:
    field, reason = explain_validation_error(exc, raw)
    for pattern, meaning in _PATTERN_MEANINGS.items():
        if reason.endswith(f"matching regex {pattern!r}"):
            reason = meaning
    # the reason may quote the value or the unknown name sent, escaped: bounded, as the field
    field, reason = clipped(field), clipped(reason, 2 * QUOTED_MAX_CHARS)
    return InvalidParams(
        f"invalid params: {reason}" + (f" (field `{field}`)" if field else ""),
        field=field or "params",
    )


def decode_params(params_type: type[Params], raw: object) -> Params:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidParams("params must be a JSON object", field="params")
    try:
        return msgspec.convert(raw, params_type, strict=True)
    except msgspec.ValidationError as exc:
        raise _invalid_params(exc, raw) from exc


def _encode(answer: _Success | _Failure | None) -> Reply:
    return None if answer is None else _encoder.encode(answer) + b"\n"


class Dispatcher:
    def __init__(self, router: Router) -> None:
        self._router = router

    def begin(self, line: bytes) -> Reply | DeferredReply:
        """Answer a line now when nothing can block (bytes, or None when nothing is owed);
        otherwise return a coroutine function that produces the answer."""
        if json_nesting_exceeds(line, limits.MAX_JSON_NESTING):
            return encode_error(_TOO_DEEP)
        try:
            envelope = _envelope_decoder.decode(line)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return lambda: self.handle_line(line)
        route = self._router.get(envelope.method)
        if envelope.jsonrpc != "2.0" or route is None or not self._router.serves_now(route.method):
            return lambda: self.handle_line(line)
        request_id = _NO_ID if envelope.id is msgspec.UNSET else envelope.id
        try:
            raw = envelope.params if bytes(envelope.params) != b"null" else b"{}"
            params = route.decoder.decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            # Judged as the general path judges it (a number out of range there is no request,
            # not bad params), so that a line's answer never depends on the path it took.
            return lambda: self.handle_line(line)
        if route.is_async:
            return lambda: self._run_async(route, params, request_id)
        try:
            result = route.handler(params)
            # Encoded here so that a result msgspec cannot encode is a -32603, not a dead reader.
            return _encode(
                None if request_id is _NO_ID else _Success(id=_safe_id(request_id), result=result)
            )
        except Exception as exc:
            return _encode(self._exception_answer(exc, envelope.method, request_id))

    async def _run_async(self, route: _Route, params: Params, request_id: object) -> Reply:
        try:
            result = await route.handler(params)  # type: ignore[misc]
            if request_id is _NO_ID:
                return None
            return _encode(_Success(id=_safe_id(request_id), result=result))
        except Exception as exc:
            return _encode(self._exception_answer(exc, route.method, request_id))

    async def handle_line(self, line: bytes) -> Reply:
        """The general path: any line, including batches and every malformed shape."""
        if not self._router.ready:
            await self._router.wait_ready()
        try:
            message = msgspec.json.decode(line)
        except msgspec.ValidationError:  # valid JSON that Python cannot hold, such as 1e400
            return encode_error(
                InvalidRequest("the line holds a number out of range; it is not a request")
            )
        except msgspec.DecodeError:
            # off the event loop: the standard library's decoder takes ~20 ms for 8 MiB
            return await trio.to_thread.run_sync(_undecodable, line, self._knows)
        except RecursionError:  # json_nesting_exceeds runs first; this is the last line of defence
            return encode_error(_TOO_DEEP)
        if isinstance(message, list):
            if not message:
                return encode_error(InvalidRequest("an empty batch is not a request"))
            if len(message) > limits.MAX_BATCH_REQUESTS:
                return encode_error(_TOO_MANY_IN_BATCH)
            answers = [await self._handle_one(item) for item in message]
            present = [answer for answer in answers if answer is not None]
            if not present:
                return None
            return _encoder.encode(present) + b"\n"
        return _encode(await self._handle_one(message))

    def _knows(self, method: str) -> bool:
        return self._router.get(method) is not None

    def _failure(self, request_id: object, error: OrcaError) -> _Failure | None:
        if request_id is _NO_ID:
            return None
        return _Failure(id=_safe_id(request_id), error=error_object(error))

    def _exception_answer(
        self, exc: Exception, method: str | None, request_id: object
    ) -> _Failure | None:
        if isinstance(exc, OrcaError):
            return self._failure(request_id, exc)
        log.error("rpc.internal_error", method=method, **describe_exception(exc))
        if request_id is _NO_ID:
            return None
        return _Failure(id=_safe_id(request_id), error=INTERNAL_ERROR)

    async def _handle_one(self, message: object) -> _Success | _Failure | None:
        request_id: object = _NO_ID
        method: str | None = None
        try:
            if not isinstance(message, dict):
                raise InvalidRequest(_NOT_AN_OBJECT)
            request_id = message.get("id", _NO_ID)
            method, raw_params = _check_envelope(message, request_id)
            if self._router.failure is not None and not self._router.serves_now(method):
                raise OrcaError(
                    f"orcad could not start ({self._router.failure}) and is exiting; "
                    "fix the cause (its log has the details) and start it again"
                )
            route = self._router.get(method)
            if route is None:
                raise MethodNotFound(f"unknown method {quoted(method)}")
            params = decode_params(route.params_type, raw_params)
            if route.is_async:
                result = await route.handler(params)  # type: ignore[misc]
            else:
                result = route.handler(params)
            # Encoded one by one: a result that cannot be encoded fails its own member only.
            result = msgspec.Raw(_encoder.encode(result))
        except InvalidRequest as exc:
            # Not a valid request, so not a notification either: always answered (JSON-RPC 2.0, 5).
            return self._failure(None if request_id is _NO_ID else request_id, exc)
        except Exception as exc:
            return self._exception_answer(exc, method, request_id)
        if request_id is _NO_ID:
            return None
        return _Success(id=_safe_id(request_id), result=result)


# the escape of half a UTF-16 surrogate pair, which JSON allows and no text holds alone
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_NOT_JSON = ParseError("the line is not valid JSON; send one JSON-RPC object per line")


def _undecodable(line: bytes, knows: Callable[[str], bool]) -> Reply:
    """The answer to a line msgspec cannot decode. A request that is JSON but holds half of a
    UTF-16 surrogate pair alone ("\\ud83d", as a string cut inside an emoji is encoded) is no
    text; it is answered as bad params, with its id, so that its client knows which request
    failed. Anything else is not JSON. `knows` tells the methods served."""
    if not _SURROGATE_ESCAPE.search(line):
        return encode_error(_NOT_JSON)
    try:  # the standard library's decoder keeps lone surrogates (and nesting is bounded)
        message = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return encode_error(_NOT_JSON)
    where = _lone_surrogate(message, "")
    if where is None:  # msgspec refused it for something else
        return encode_error(_NOT_JSON)
    if isinstance(message, list):
        return _batch_without_text(message, where, knows)
    return _encode(_surrogate_failure(message, where, knows))


def _surrogate_failure(
    message: object, where: str, knows: Callable[[str], bool]
) -> _Failure | None:
    """The answer to a message holding a lone surrogate at `where`: judged first as any other
    line is (not an object, not a JSON-RPC 2.0 request, an unknown method), so that the
    surrogate hides none of that; else bad params, to its id (none to a notification, as for
    any bad params)."""
    if not isinstance(message, dict):
        return _Failure(id=None, error=error_object(InvalidRequest(_NOT_AN_OBJECT)))
    request_id = message.get("id", _NO_ID)
    try:
        method, _ = _check_envelope(message, request_id)
    except InvalidRequest as exc:  # not a request, so not a notification either: answered
        return _Failure(
            id=_text_id(None if request_id is _NO_ID else request_id), error=error_object(exc)
        )
    if request_id is _NO_ID:
        return None
    if not knows(method):  # a name holding half a pair is quoted in escapes, as repr writes it
        unknown = MethodNotFound(f"unknown method {quoted(method)}")
        return _Failure(id=_text_id(request_id), error=error_object(unknown))
    # as other bad params name theirs; a key holding half a pair is named in escapes
    field = clipped(_escaped(where.removeprefix("params.") or "params"))
    error = InvalidParams(
        "the request holds half of a UTF-16 surrogate pair (such as \\ud83d) without the "
        f"other half, which is no text; send whole characters (field `{field}`)",
        field=field,
    )
    return _Failure(id=_text_id(request_id), error=error_object(error))


def _batch_without_text(batch: list[object], where: str, knows: Callable[[str], bool]) -> Reply:
    """The answer to a batch a member of which holds a lone surrogate: nothing in it is run
    (as for a batch over the limit), but each request is answered to its own id, so that its
    client is not left waiting for it: bad params for a member holding one, and for the others
    what they would get if they are no valid request, else that they were not run."""
    if len(batch) > limits.MAX_BATCH_REQUESTS:
        return encode_error(_TOO_MANY_IN_BATCH)
    culprit = where.partition("]")[0] + "]"  # `[3]` of `[3].params.prompt`
    not_run = InvalidRequest(
        f"nothing in this batch was run: its member {culprit} holds half of a UTF-16 surrogate "
        "pair without the other half, which is no text; send whole characters"
    )
    answers: list[_Failure] = []
    for member in batch:
        member_where = _lone_surrogate(member, "")
        if member_where is not None:
            answer = _surrogate_failure(member, member_where, knows)
        elif not isinstance(member, dict):
            answer = _Failure(id=None, error=error_object(InvalidRequest(_NOT_AN_OBJECT)))
        else:
            request_id = member.get("id", _NO_ID)
            try:
                _check_envelope(member, request_id)
            except InvalidRequest as exc:  # not a request, so not a notification either
                answer = _Failure(
                    id=_text_id(None if request_id is _NO_ID else request_id),
                    error=error_object(exc),
                )
            else:
                answer = (
                    None
                    if request_id is _NO_ID
                    else _Failure(id=_text_id(request_id), error=error_object(not_run))
                )
        if answer is not None:
            answers.append(answer)
    return _encoder.encode(answers) + b"\n" if answers else None


def _lone_surrogate(value: object, path: str) -> str | None:
    """The path of the first string in `value` (a key or a value) that holds a lone surrogate,
    as `messages[0].content`; None when there is none."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else str(key)
            if _SURROGATE.search(key):
                return inner
            found = _lone_surrogate(item, inner)
            if found is not None:
                return found
    if isinstance(value, list):
        for number, item in enumerate(value):
            found = _lone_surrogate(item, f"{path}[{number}]")
            if found is not None:
                return found
    return None


def _escaped(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud800`), which is text."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _text_id(request_id: object) -> RequestId:
    """`_safe_id`, and None for a string id that is no text itself."""
    safe = _safe_id(request_id)
    if isinstance(safe, str) and _SURROGATE.search(safe):
        return None
    return safe


_SURROGATE = re.compile("[\ud800-\udfff]")


def _safe_id(request_id: object) -> RequestId:
    return (
        request_id
        if isinstance(request_id, (int, str)) and not isinstance(request_id, bool)
        else None
    )


def _check_envelope(message: dict[str, Any], request_id: object) -> tuple[str, object]:
    if message.get("jsonrpc") != "2.0":
        raise InvalidRequest('"jsonrpc" must be "2.0"')
    extra = set(message) - _ENVELOPE_KEYS
    if extra:
        raise InvalidRequest(f"unknown request member {quoted(sorted(extra)[0])}")
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidRequest('"method" must be a non-empty string')
    if request_id is not _NO_ID and (
        isinstance(request_id, bool) or not isinstance(request_id, (int, str, type(None)))
    ):
        raise InvalidRequest('"id" must be a string, an integer or null')
    return method, message.get("params")
