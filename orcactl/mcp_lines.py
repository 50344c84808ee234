"""One line of `orcactl mcp`'s stdio, judged before the MCP SDK sees it, and one written.

A line the SDK cannot validate it drops without a word, and the client waits for its timeout.
`judge` says what each line is: a message to pass on; a JSON-RPC error to answer instead (a
line that is not JSON, nests too deep, holds what JSON-RPC cannot, or is no message the server
takes), sent to the request's id when that can be read; or nothing to answer (a blank line, a
malformed notification or response, which JSON-RPC never answers). A line too long to keep is
answered to the id its first bytes give it, when they are the start of a request that does.
"""

from __future__ import annotations

import json
import re
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


# What is kept of a line too long to keep: where a request's id is looked for (the Python
# MCP SDK writes it before the params, which make a line long)
KEPT_OF_A_LONG_LINE = 4096


@dataclass(frozen=True)
class TooLong:
    """A line longer than MAX_LINE_BYTES, of which only its first bytes were kept."""

    start: bytes


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


_SPACE = re.compile(rb"[ \t\n\r]*")
# a JSON string (its escapes checked as a JSON decoder checks them), an integer
_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
# the start of a JSON string that `start` ends in
_STRING_CUT = re.compile(
    rb'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*(?:\\(?:u[0-9a-fA-F]{0,3})?)?'
)
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]{0,17})")
_PAIRS = {ord("["): ord("]"), ord("{"): ord("}")}


class _NoJson(Exception):
    """What `start` holds is no JSON, whatever follows it."""


def _after_space(start: bytes, at: int) -> int:
    return _SPACE.match(start, at).end()  # type: ignore[union-attr]  # it matches anywhere


def _string_end(start: bytes, at: int) -> int | None:
    """Where the JSON string at `at` ends, None when `start` ends in it."""
    if string := _STRING.match(start, at):
        return string.end()
    if _STRING_CUT.fullmatch(start, at) is not None:
        return None
    raise _NoJson


def _value_end(start: bytes, at: int) -> int | None:
    """Where the JSON value at `at` ends, None when `start` ends first (its strings and
    brackets are checked here, the whole of it once it ends)."""
    closing: list[int] = []
    while at < len(start):
        byte = start[at]
        if byte == ord('"'):
            end = _string_end(start, at)
            if end is None:
                return None
            at = end
            if not closing:
                return at
            continue
        if byte in _PAIRS:
            closing.append(_PAIRS[byte])
        elif byte in (ord("]"), ord("}")):
            if not closing:
                return at
            if closing.pop() != byte:
                raise _NoJson
        elif not closing and byte in b", \t\n\r":
            return at
        at += 1
    return None


def _value(value: bytes) -> object:
    """A whole JSON value, as a JSON decoder reads it."""
    try:
        return json.loads(value.decode("utf-8"))
    except (ValueError, RecursionError):  # (a value nested too deep is no id either)
        raise _NoJson from None


def _scalar(value: object, text: bytes) -> str | int | None:
    """A string, or an integer written with at most 18 digits, as Python's; else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and _INTEGER.fullmatch(text):
        return value
    return None


def request_id_at_start(start: bytes) -> RequestId | None:
    """The id of the request whose line begins with `start`, read without the rest of it: the
    string or integer value of the top-level object's "id", when `start` holds that value
    whole and a string "method", and no "result" or "error" (a response is never answered)
    nor a name twice, and what it holds is JSON up to where it ends. None when `start` does
    not show all of that for certain."""
    try:
        return _request_id_at_start(start)
    except _NoJson:
        return None


def _request_id_at_start(start: bytes) -> RequestId | None:
    at = _after_space(start, 0)
    if start[at : at + 1] != b"{":
        return None
    members: dict[str, object] = {}
    at = _after_space(start, at + 1)
    while at < len(start):
        key_end = _string_end(start, at)
        if key_end is None:
            break
        name = _value(start[at:key_end])
        if name in members or name in ("result", "error"):
            return None
        at = _after_space(start, key_end)
        if at == len(start):
            break
        if start[at : at + 1] != b":":
            raise _NoJson
        value_at = _after_space(start, at + 1)
        end = _value_end(start, value_at)
        if end is None:
            break
        at = _after_space(start, end)
        if at == len(start):  # `start` may end in the value (a number cut short)
            break
        if start[at : at + 1] not in (b",", b"}"):
            raise _NoJson
        value = _value(start[value_at:end])
        members[str(name)] = (
            _scalar(value, start[value_at:end]) if name in ("id", "method") else None
        )
        if start[at : at + 1] == b"}":
            if _after_space(start, at + 1) != len(start):  # more than one value on the line
                raise _NoJson
            break
        at = _after_space(start, at + 1)
    if not isinstance(members.get("method"), str):
        return None
    return _answer_id(members.get("id"))


def judge(line: bytes | TooLong) -> JSONRPCMessage | Refused | None:
    """One line from the client: the message to pass on, or the answer that refuses it, or
    None when it is neither (a blank line, a malformed notification or response)."""
    if isinstance(line, TooLong):
        return _refused(request_id_at_start(line.start), INVALID_REQUEST, TOO_LONG)
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


def read_line(wire: BinaryIO) -> bytes | TooLong:
    """The next line (empty at the end of input), or for one longer than MAX_LINE_BYTES its
    first bytes, the rest read to its end without being kept."""
    line = wire.readline(MAX_LINE_BYTES + 1)
    if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
        return line
    start = line[:KEPT_OF_A_LONG_LINE]
    del line  # held no longer than it takes to see that it is too long
    while (rest := wire.readline(64 * 1024)) and not rest.endswith(b"\n"):
        pass
    return TooLong(start)
