"""JSON-RPC 2.0 dispatch: one line in, one line (or nothing) out.

Envelope validation is plain code; handlers are async and get decoded params Structs. This is
the only place where exceptions become error objects: OrcaError subclasses map to their code
and kind, anything else is logged with its traceback and answered with a bare -32603.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import structlog

from orcad.config import error_field_path, error_reason
from orcad.errors import (
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    OrcaError,
    ParseError,
)
from protocol.errors import ErrorCode, ErrorObject
from protocol.types import METHODS, Params, Result

Handler = Callable[[Any], Awaitable[Result]]
RequestId = int | str | None

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


_encoder = msgspec.json.Encoder()


class Router:
    """Method name -> (params type, handler). Methods not added answer -32601."""

    def __init__(self) -> None:
        self._routes: dict[str, tuple[type[Params], Handler]] = {}

    def add(self, method: str, handler: Handler) -> None:
        if method not in METHODS:
            raise ValueError(f"{method} is not a protocol method")
        if method in self._routes:
            raise ValueError(f"{method} is already routed")
        self._routes[method] = (METHODS[method][0], handler)

    def get(self, method: str) -> tuple[type[Params], Handler] | None:
        return self._routes.get(method)

    def methods(self) -> list[str]:
        return sorted(self._routes)


def error_object(error: OrcaError) -> ErrorObject:
    return ErrorObject(code=int(error.code), message=error.message, data=error.to_data())


INTERNAL_ERROR = ErrorObject(
    code=int(ErrorCode.INTERNAL),
    message="internal error in orcad; the daemon log has the details",
    data={"kind": "internal"},
)


def encode_error(error: OrcaError, request_id: RequestId = None) -> bytes:
    return _encoder.encode(_Failure(id=request_id, error=error_object(error))) + b"\n"


def decode_params(params_type: type[Params], raw: object) -> Params:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidParams("params must be a JSON object", field="params")
    try:
        return msgspec.convert(raw, params_type, strict=True)
    except msgspec.ValidationError as exc:
        field = error_field_path(exc)
        raise InvalidParams(
            f"invalid params: {error_reason(exc)}" + (f" (field `{field}`)" if field else ""),
            field=field or "params",
        ) from exc


class Dispatcher:
    def __init__(self, router: Router) -> None:
        self._router = router

    async def handle_line(self, line: bytes) -> bytes | None:
        """Answer one framed line: a response line, or None when nothing is owed."""
        try:
            message = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return encode_error(ParseError("the line is not valid JSON; send one JSON-RPC object per line"))
        if isinstance(message, list):
            if not message:
                return encode_error(InvalidRequest("an empty batch is not a request"))
            answers = [await self._handle_one(item) for item in message]
            present = [answer for answer in answers if answer is not None]
            if not present:
                return None
            return _encoder.encode(present) + b"\n"
        answer = await self._handle_one(message)
        if answer is None:
            return None
        return _encoder.encode(answer) + b"\n"

    async def _handle_one(self, message: object) -> _Success | _Failure | None:
        request_id: object = _NO_ID
        try:
            if not isinstance(message, dict):
                request_id = None  # owed an answer, with a null id
                raise InvalidRequest("a request must be a JSON object")
            request_id = message.get("id", _NO_ID)
            method, params = _check_envelope(message, request_id)
            route = self._router.get(method)
            if route is None:
                raise MethodNotFound(f"unknown method {method!r}")
            params_type, handler = route
            result = await handler(decode_params(params_type, params))
        except OrcaError as exc:
            if request_id is _NO_ID:
                return None
            return _Failure(id=_safe_id(request_id), error=error_object(exc))
        except Exception:
            method_name = message.get("method") if isinstance(message, dict) else None
            log.exception("rpc.internal_error", method=method_name if isinstance(method_name, str) else None)
            if request_id is _NO_ID:
                return None
            return _Failure(id=_safe_id(request_id), error=INTERNAL_ERROR)
        if request_id is _NO_ID:
            return None
        return _Success(id=_safe_id(request_id), result=result)


def _safe_id(request_id: object) -> RequestId:
    return request_id if isinstance(request_id, (int, str)) and not isinstance(request_id, bool) else None


def _check_envelope(message: dict[str, Any], request_id: object) -> tuple[str, object]:
    if message.get("jsonrpc") != "2.0":
        raise InvalidRequest('"jsonrpc" must be "2.0"')
    extra = set(message) - _ENVELOPE_KEYS
    if extra:
        raise InvalidRequest(f"unknown request member {sorted(extra)[0]!r}")
    method = message.get("method")
    if not isinstance(method, str) or not method:
        raise InvalidRequest('"method" must be a non-empty string')
    if request_id is not _NO_ID and (
        isinstance(request_id, bool) or not isinstance(request_id, (int, str, type(None)))
    ):
        raise InvalidRequest('"id" must be a string, an integer or null')
    return method, message.get("params")
