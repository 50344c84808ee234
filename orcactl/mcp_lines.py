"""One line of `orcactl mcp`'s stdio, judged before the MCP SDK sees it, and one written.

A line the SDK cannot validate it drops without a word, and the client waits for its timeout.
`judge` says what each line is: a message to pass on; a JSON-RPC error to answer instead (a
line that is not JSON, nests too deep, holds what JSON-RPC cannot, or is no message the server
takes), sent to the request's id when that can be read; or nothing to answer (a blank line, a
malformed notification or response, which JSON-RPC never answers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)

from orcad.limits import DEFAULT_MAX_MESSAGE_BYTES, MAX_JSON_NESTING
from protocol.framing import json_nesting_exceeds

# Twice orcad's request bound: text too long for orcad still reaches the tool that says so.
MAX_LINE_BYTES = 2 * DEFAULT_MAX_MESSAGE_BYTES

TOO_DEEP = (
    f"Invalid Request: the line nests arrays or objects more than {MAX_JSON_NESTING} levels "
    "deep; no MCP message does"
)
NOT_UNICODE = (
    "Invalid Request: the line holds what no JSON-RPC message can: a string with a lone "
    "surrogate escape (\\ud800 to \\udfff unpaired), or a number that is out of range or not "
    "finite"
)
NOT_A_MESSAGE = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
NOT_JSON = "Parse error: the line is not JSON; send one JSON-RPC message per line"
NOT_UTF8 = "Parse error: the line is not UTF-8, which JSON is sent in"
NOT_ENCODABLE = "Internal error: the answer could not be written as JSON"
TOO_LONG = (
    f"Invalid Request: the line is longer than {MAX_LINE_BYTES // 2**20} MiB and was not kept; "
    "no MCP message for this server is that long"
)


@dataclass(frozen=True)
class Refused:
    """A line that goes no further: `answer` is written back to the client instead."""

    answer: JSONRPCError


def _refused(request_id: RequestId | None, code: int, message: str) -> Refused:
    error = ErrorData(code=code, message=message)
    return Refused(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _lenient(text: str) -> Any:
    """What Python's own JSON reading makes of a line msgspec refused (it takes lone
    surrogates, NaN and numbers out of range), or None when it is not JSON either."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _answer_id(value: object) -> RequestId | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return value
    return None


def _refuse(value: object, message: str) -> Refused | None:
    """The answer to a JSON line that is no message the server takes: to its id when it is a
    request whose id can be read; none to a notification or a response (JSON-RPC answers
    neither); to a null id otherwise."""
    if isinstance(value, dict):
        if "method" in value and "id" not in value:
            return None
        if "method" not in value and ("result" in value or "error" in value):
            return None
        return _refused(_answer_id(value.get("id")), INVALID_REQUEST, message)
    return _refused(None, INVALID_REQUEST, message)


def judge(line: bytes | None) -> JSONRPCMessage | Refused | None:
    """One line from the client (None: one too long to keep): the message to pass on, or the
    answer that refuses it, or None when it is neither (a blank line, a malformed notification
    or response)."""
    if line is None:
        return _refused(None, INVALID_REQUEST, TOO_LONG)
    try:  # not as the SDK reads it: it replaces what is not UTF-8, so that a request is
        # answered to an id it was not sent with, and a tool keeps text it was not given
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return _refused(None, PARSE_ERROR, NOT_UTF8)
    if not text.strip():
        return None
    if json_nesting_exceeds(line, MAX_JSON_NESTING):  # before any decoder recurses into it
        return _refuse(_lenient(text), TOO_DEEP)
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        lenient = _lenient(text)
        if lenient is None:
            return _refused(None, PARSE_ERROR, NOT_JSON)
        return _refuse(lenient, NOT_UNICODE)
    try:
        # validated as the SDK validates it: the line is now known to decode
        message = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValueError:
        return _refuse(value, NOT_A_MESSAGE)
    if isinstance(message, JSONRPCNotification) and "id" in value:
        # a request whose id is no string or integer (null, true, 1.5): the SDK would take it
        # as a notification, its extra member ignored, and never answer it
        return _refuse(value, NOT_A_MESSAGE)
    return message


def encoded(message: JSONRPCMessage) -> bytes | None:
    """The message as a line, or for an answer that JSON cannot hold an error in its place."""
    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError:
        if not isinstance(message, (JSONRPCResponse, JSONRPCError)):
            return None
        failed = JSONRPCError(
            jsonrpc="2.0",
            id=message.id,
            error=ErrorData(code=INTERNAL_ERROR, message=NOT_ENCODABLE),
        )
        text = failed.model_dump_json(by_alias=True, exclude_unset=True)
    return text.encode("utf-8") + b"\n"


def read_line(wire: BinaryIO) -> bytes | None:
    """The next line (empty at the end of input), or None for one longer than MAX_LINE_BYTES,
    which is read to its end without being kept."""
    line = wire.readline(MAX_LINE_BYTES + 1)
    if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
        return line
    del line  # held no longer than it takes to see that it is too long
    while (rest := wire.readline(64 * 1024)) and not rest.endswith(b"\n"):
        pass
    return None
