"""JSON-RPC 2.0 envelopes for clients: encode requests, decode responses."""

from __future__ import annotations

from typing import Any

import msgspec

from protocol.errors import ErrorObject


class Request(msgspec.Struct, frozen=True):
    method: str
    params: Any
    id: int | str | None


class Notification(msgspec.Struct, frozen=True):
    method: str
    params: Any


class Response(msgspec.Struct, frozen=True):
    id: int | str | None
    jsonrpc: str = "2.0"
    result: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))
    error: ErrorObject | None = None


encoder = msgspec.json.Encoder()
response_decoder = msgspec.json.Decoder(Response)
responses_decoder = msgspec.json.Decoder(list[Response])


def params_object(params: Any) -> Any:
    """The params a client sends: `{}` for none, anything else as given, for orcad to judge
    (params are an object: an array is refused, as it once was only when it was not empty)."""
    return {} if params is None else params


def encode_line(message: Request | Notification) -> bytes:
    """One message as a newline-terminated JSON-RPC 2.0 line."""
    return b'{"jsonrpc":"2.0",' + encoder.encode(message)[1:] + b"\n"
