"""The daemon's one error tree. Each class carries its JSON-RPC code and kind; only the RPC
edge turns them into error objects."""

from __future__ import annotations

from typing import Any, ClassVar

from protocol.errors import ErrorCode

# Of a client's string quoted in an error message, at most this many characters: a client may
# send one of megabytes, which its escapes would make several times larger again.
QUOTED_MAX_CHARS = 200


def quoted(value: str) -> str:
    """A client's string as an error message quotes it: its start only when it is long."""
    if len(value) <= QUOTED_MAX_CHARS:
        return repr(value)
    return f"{value[:QUOTED_MAX_CHARS]!r}... ({len(value)} characters)"


def clipped(text: str, limit: int = QUOTED_MAX_CHARS) -> str:
    """Text an answer shows that holds or names what a client sent (a field's path, a decoder's
    reason quoting a value): its start only when long, so that no answer outgrows its request."""
    return text if len(text) <= limit else f"{text[:limit]}..."


class OrcaError(Exception):
    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    kind: ClassVar[str] = "internal"

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def to_data(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.data}


class ParseError(OrcaError):
    code, kind = ErrorCode.PARSE_ERROR, "parse_error"


class InvalidRequest(OrcaError):
    code, kind = ErrorCode.INVALID_REQUEST, "invalid_request"


class MessageTooLarge(OrcaError):
    code, kind = ErrorCode.INVALID_REQUEST, "message_too_large"


class MethodNotFound(OrcaError):
    code, kind = ErrorCode.METHOD_NOT_FOUND, "method_not_found"


class InvalidParams(OrcaError):
    """Bad params; `field` names the offending field path (e.g. `limit`, `messages[0].role`)."""

    code, kind = ErrorCode.INVALID_PARAMS, "invalid_params"

    def __init__(self, message: str, *, field: str, **data: Any) -> None:
        super().__init__(message, field=field, **data)


class Busy(OrcaError):
    code, kind = ErrorCode.BUSY, "busy"


class StaleSession(OrcaError):
    code, kind = ErrorCode.STALE_SESSION, "stale_session"


class LeaseLost(OrcaError):
    code, kind = ErrorCode.LEASE_LOST, "lease_lost"


class ExtractionRejected(OrcaError):
    code, kind = ErrorCode.EXTRACTION_REJECTED, "extraction_rejected"


class Conflict(OrcaError):
    code, kind = ErrorCode.CONFLICT, "conflict"


class NotFound(OrcaError):
    code, kind = ErrorCode.NOT_FOUND, "not_found"


class Disabled(OrcaError):
    code, kind = ErrorCode.DISABLED, "disabled"


class StorageError(OrcaError):
    code, kind = ErrorCode.STORAGE, "storage"


class StartupError(Exception):
    """The daemon cannot start; the message says why and what to do. Exit status 1."""
