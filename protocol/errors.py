"""JSON-RPC error codes and kinds of protocol 1 (the README's "The protocol")."""

from __future__ import annotations

import enum
from typing import Any

import msgspec


class ErrorCode(enum.IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL = -32603
    BUSY = -32001
    STALE_SESSION = -32010
    LEASE_LOST = -32011
    EXTRACTION_REJECTED = -32012
    CONFLICT = -32013
    NOT_FOUND = -32014
    DISABLED = -32016
    STORAGE = -32017


# data.kind values, each with the one code it travels with.
KIND_CODES: dict[str, ErrorCode] = {
    "parse_error": ErrorCode.PARSE_ERROR,
    "invalid_request": ErrorCode.INVALID_REQUEST,
    "message_too_large": ErrorCode.INVALID_REQUEST,
    "method_not_found": ErrorCode.METHOD_NOT_FOUND,
    "invalid_params": ErrorCode.INVALID_PARAMS,
    "internal": ErrorCode.INTERNAL,
    "busy": ErrorCode.BUSY,
    "stale_session": ErrorCode.STALE_SESSION,
    "lease_lost": ErrorCode.LEASE_LOST,
    "extraction_rejected": ErrorCode.EXTRACTION_REJECTED,
    "conflict": ErrorCode.CONFLICT,
    "not_found": ErrorCode.NOT_FOUND,
    "disabled": ErrorCode.DISABLED,
    "storage": ErrorCode.STORAGE,
}


class ErrorObject(msgspec.Struct, frozen=True, omit_defaults=True):
    code: int
    message: str
    data: dict[str, Any] = {}

    @property
    def kind(self) -> str:
        kind = self.data.get("kind")
        return kind if isinstance(kind, str) else "unknown"


class RemoteError(Exception):
    """An error object the daemon answered with, raised by the clients."""

    def __init__(self, error: ErrorObject) -> None:
        super().__init__(f"{error.message} [{error.code} {error.kind}]")
        self.error = error

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def kind(self) -> str:
        return self.error.kind

    @property
    def data(self) -> dict[str, Any]:
        return self.error.data
