"""One line of `orcactl mcp`'s stdio, judged before the MCP SDK sees it, and one written.

A line the SDK cannot validate it drops without a word, and the client waits for its timeout.
`judge` says what each line is: a message to pass on; a JSON-RPC error to answer instead (a
line that is not JSON, nests too deep, holds what JSON-RPC cannot, or is no message the server
takes), sent to the request's id when that can be read; or nothing to answer (a blank line, a
malformed notification or response, which JSON-RPC never answers). A line too long to keep is
read to its end without being kept, and answered to its request's id when that can be read.
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


@dataclass(frozen=True)
class TooLong:
    """A line longer than MAX_LINE_BYTES, which was read to its end but not kept: the id of
    the request it holds, when it could be read (RequestIdScanner)."""

    request_id: RequestId | None


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
# what a JSON string holds up to its closing quote, its escapes checked as a decoder checks them
_STRING_BODY = re.compile(rb'(?:[^"\\\x00-\x1f]+|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
# an escape a piece of the line ends in, whose rest is in the next piece
_ESCAPE_CUT = re.compile(rb"\\(?:u[0-9a-fA-F]{0,3})?")
# a number or true, false, null: it runs to the next space, comma, bracket or quote
_TOKEN = re.compile(rb'[^ \t\n\r,:\[\]{}"]*')
# inside an array or object only its strings and brackets are followed (the rest of a value
# kept whole is checked by a decoder; of a longer one it is not). One match passes over what
# holds no bracket but those of a flat array or object, and whole strings, at C speed: taken
# a string or bracket at a time, a list of many short strings or small objects ran past
# SCAN_MAX_STEPS. It stops at a bracket that opens or closes more than that, or at a string it
# cannot close (cut by the end of a piece, or holding what no string may), where the scanner
# takes a step. Possessive, it never backtracks into what it matched.
_STRING = rb'"(?:[^"\\\x00-\x1f]++|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*+"'
_FLAT = rb'(?:[^"\[\]{}]++|' + _STRING + rb")*+"
_PASSED_OVER = re.compile(
    rb'(?:[^"\[\]{}]++|' + _STRING + rb"|\[" + _FLAT + rb"\]|\{" + _FLAT + rb"\})*+"
)
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]{0,17})")
_PAIRS = {ord("["): ord("]"), ord("{"): ord("}")}
# what is kept of one member's name or value to decode it: an id or method longer than this is
# none the scanner reads, and a longer value is checked only for its strings and brackets
KEPT_OF_A_VALUE = 4096
KEPT_OF_A_NAME = 256
# steps (strings, brackets, pieces) the scanner takes on one line before it gives up on its id:
# a line of nothing but brackets must not hold the reading for seconds
SCAN_MAX_STEPS = 1_000_000


class _NoJson(Exception):
    """What was read of the line is no JSON, whatever follows it."""


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


class RequestIdScanner:
    """Reads the id of the request a line holds, piece by piece, keeping only a few bytes of
    it: the top-level object's "id" when it is a string or integer, with a string "method" and
    no "result" or "error" (a response is never answered), wherever in the object they stand
    (some clients write the id after the params, which make a line long). The last of a name
    given twice counts, as a JSON decoder reads it. What it reads must be JSON; inside a value
    too long to keep, only its strings and brackets are checked."""

    def __init__(self) -> None:
        self._expect = "object"  # object, name, colon, value, next, end, failed
        self._first_member = True
        self._carried = b""  # an escape cut at the end of a piece
        self._in_value = False  # a name or a value is being read (begun, not ended)
        self._in_string = False
        self._in_token = False
        self._closing: list[int] = []
        self._kept: bytearray | None = bytearray()  # None once longer than its bound
        self._kept_max = KEPT_OF_A_VALUE
        self._is_name = False
        self._name: str | None = None
        self._members: dict[str, object] = {}
        self._steps = 0

    def feed(self, piece: bytes) -> None:
        if self._expect == "failed":
            return
        data = self._carried + piece if self._carried else piece
        self._carried = b""
        try:
            self._scan(data)
        except _NoJson:
            self._expect = "failed"

    def request_id(self, *, whole: bool) -> RequestId | None:
        """The id of what was fed, None unless what it holds so far is JSON and shows that it
        is a request with that id; `whole`: what was fed is the whole line, which must then be
        one object and nothing more."""
        if self._expect == "failed" or (whole and self._expect != "end"):
            return None
        if "result" in self._members or "error" in self._members:
            return None
        if not isinstance(self._members.get("method"), str):
            return None
        return _answer_id(self._members.get("id"))

    def _step(self) -> None:
        self._steps += 1
        if self._steps > SCAN_MAX_STEPS:
            raise _NoJson

    def _scan(self, data: bytes) -> None:
        at = 0
        while at < len(data):
            self._step()
            if self._in_value:
                at = self._read_value(data, at)
                continue
            at = _SPACE.match(data, at).end()  # type: ignore[union-attr]  # it matches anywhere
            if at == len(data):
                return
            byte = data[at]
            expect = self._expect
            if expect == "object":
                if byte != ord("{"):
                    raise _NoJson
                self._expect = "name"
                at += 1
            elif expect == "name":
                if byte == ord("}") and self._first_member:
                    self._expect = "end"
                    at += 1
                elif byte == ord('"'):
                    self._begin(is_name=True)
                else:
                    raise _NoJson
            elif expect == "colon":
                if byte != ord(":"):
                    raise _NoJson
                self._expect = "value"
                at += 1
            elif expect == "value":
                self._begin(is_name=False)
            elif expect == "next":
                if byte == ord(","):
                    self._expect = "name"
                elif byte == ord("}"):
                    self._expect = "end"
                else:
                    raise _NoJson
                at += 1
            else:  # more than one value on the line
                raise _NoJson

    def _begin(self, *, is_name: bool) -> None:
        self._in_value = True
        self._is_name = is_name
        self._kept = bytearray()
        self._kept_max = KEPT_OF_A_NAME if is_name else KEPT_OF_A_VALUE
        self._in_string = self._in_token = False
        self._closing = []

    def _keep(self, part: bytes) -> None:
        if self._kept is not None:
            if len(self._kept) + len(part) > self._kept_max:
                self._kept = None
            else:
                self._kept += part

    def _read_value(self, data: bytes, at: int) -> int:
        """Read on in the name or value begun, to where it ends or `data` does."""
        begun = at
        if not self._in_string and not self._in_token and not self._closing:
            byte = data[at]  # its first byte
            if byte == ord('"'):
                self._in_string = True
                at += 1
            elif byte in _PAIRS:
                self._closing.append(_PAIRS[byte])
                at += 1
            else:
                self._in_token = True
        ended = False
        while at < len(data) and not ended:
            self._step()
            if self._in_token:
                at = _TOKEN.match(data, at).end()  # type: ignore[union-attr]  # matches anywhere
                if at < len(data):
                    self._in_token = False
                    ended = True
            elif self._in_string:
                at = _STRING_BODY.match(data, at).end()  # type: ignore[union-attr]
                if at == len(data):
                    break
                if data[at] == ord('"'):
                    self._in_string = False
                    at += 1
                    ended = not self._closing
                elif _ESCAPE_CUT.fullmatch(data, at) is not None:
                    self._carried = data[at:]  # the rest of the escape comes with the next piece
                    self._keep(data[begun:at])
                    return len(data)
                else:
                    raise _NoJson
            else:
                at = _PASSED_OVER.match(data, at).end()  # type: ignore[union-attr]
                if at == len(data):
                    break
                byte = data[at]
                at += 1
                if byte == ord('"'):
                    self._in_string = True
                elif byte in _PAIRS:
                    if len(self._closing) >= MAX_JSON_NESTING:
                        raise _NoJson
                    self._closing.append(_PAIRS[byte])
                elif self._closing.pop() != byte:
                    raise _NoJson
                else:
                    ended = not self._closing
        self._keep(data[begun:at])
        if ended:
            self._end()
        return at

    def _end(self) -> None:
        """A name or value has been read whole."""
        self._in_value = False
        kept = self._kept
        if self._is_name:
            self._expect = "colon"
            self._first_member = False
            name = _value(bytes(kept)) if kept is not None else None
            self._name = name if isinstance(name, str) else None
            if self._name in ("result", "error"):
                self._members[self._name] = None
            return
        self._expect = "next"
        if kept is None:  # too long to decode: only its strings and brackets were checked
            if self._name in ("id", "method"):
                self._members[self._name] = None
            return
        value = _value(bytes(kept))
        if self._name in ("id", "method"):
            self._members[self._name] = _scalar(value, bytes(kept))


def request_id_at_start(start: bytes) -> RequestId | None:
    """The id of the request whose line begins with `start`, read without the rest of it (see
    RequestIdScanner), None when `start` does not show it for certain."""
    scanner = RequestIdScanner()
    scanner.feed(start)
    return scanner.request_id(whole=False)


def judge(line: bytes | TooLong) -> JSONRPCMessage | Refused | None:
    """One line from the client: the message to pass on, or the answer that refuses it, or
    None when it is neither (a blank line, a malformed notification or response)."""
    if isinstance(line, TooLong):
        return _refused(line.request_id, INVALID_REQUEST, TOO_LONG)
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
    """The next line (empty at the end of input), or for one longer than MAX_LINE_BYTES the id
    its request gives, the line read to its end a piece at a time without being kept."""
    line = wire.readline(MAX_LINE_BYTES + 1)
    if len(line) <= MAX_LINE_BYTES or line.endswith(b"\n"):
        return line
    scanner = RequestIdScanner()
    scanner.feed(line)
    del line  # held no longer than it takes to see that it is too long
    while rest := wire.readline(64 * 1024):
        scanner.feed(rest)
        if rest.endswith(b"\n"):
            break
    return TooLong(scanner.request_id(whole=True))
