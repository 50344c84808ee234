"""`orcactl mcp`'s first answers, given before the MCP SDK has loaded.

An agent lists a new MCP server's tools once, as it starts, and does not wait long for them:
`codex exec` sends its first model request about a second after starting its servers, with
whatever tools were listed by then. `orcactl mcp` took most of a second to import the SDK (and
orcactl's own modules), and longer on a busy machine, so orca's tools were missing from that
request. The answers to `initialize` and `tools/list` depend only on the code that gives them
and on the protocol version the client asks for. So the server keeps the SDK's own answers in
a cache file (`Recorder`), and the next start answers those two requests and `ping` from it
on a thread of its own (`EarlyAnswers`, started by orcactl.entry before anything slow is
imported) while the SDK loads.

Clients of the protocol's stateless revision (Claude Code) send no `initialize`: each request
carries the protocol version and the client's name and capabilities in its `_meta`. Their
`server/discover`, `tools/list`, `prompts/list` and `resources/list` are answered from the cache
in the same way, each by the version it names. Their `subscriptions/listen` opens a stream that
stays open, which the SDK serves once it has loaded; but Claude Code sends nothing more until
the stream is acknowledged, so the acknowledgement the SDK gave the same request before is
written at once (and the SDK's own, when it comes, is recorded and not sent), and the lines
after it are still read.

Once the SDK has loaded, everything read from stdin so far goes to it as if it were read just
then (`Handover.read`): it is initialized by the client's own `initialize`, and its answers to
the requests already answered are dropped rather than sent twice. They are recorded as well:
an answer that differs from the cached one (the cache of an older orcactl whose files kept
their size and time) replaces it for the next start. Any line the thread does not answer
itself ends its reading: that line and all after it wait for the SDK, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import select
import stat
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import msgspec

from orcad.limits import MAX_JSON_NESTING
from orcad.regular_files import read_regular_file
from protocol.framing import json_nesting_exceeds

CACHE_NAME = "mcp-handshake.json"
CACHE_FORMAT = 1
CACHE_MAX_BYTES = 1 << 20
# the cached answers written before the SDK takes over stay far below a pipe's usual buffer
# (64 KiB on Linux), so that writing them seldom waits on a client; one that does not read them
# holds only the thread writing them (the SDK's writing waits for it, under the stall deadline)
EARLY_ANSWERS_MAX_BYTES = 32 * 1024
# initialize, tools/list and a ping or two; or the stateless revision's discovery (Claude Code
# sends server/discover twice) and three lists; anything else waits
EARLY_ANSWERS_MAX = 8
EARLY_LINE_MAX_BYTES = 64 * 1024  # a longer line waits for the SDK, which bounds it
READ_CHUNK = 64 * 1024
# the answers cached for a protocol version: of a revision with the `initialize` handshake, or
# of the stateless one, whose every request names its version in `_meta`
HANDSHAKE_METHODS = ("initialize", "tools/list")
STATELESS_METHODS = ("server/discover", "tools/list", "prompts/list", "resources/list")
# of those, what every stateless client asks for as it starts: the MCP SDK's own Client asks
# for no prompts or resources, Claude Code for both, which are kept once it has asked
STATELESS_REQUIRED = ("server/discover", "tools/list")
STATELESS_PASSED_OVER = "subscriptions/listen"  # left to the SDK; the lines after it are read
STATELESS_PASSED_OVER_MAX = 2
# the subscriptions' acknowledgements kept for a version, each for the notifications one asked
# for: the latest recorded, as many as fit beside its answers in EARLY_ANSWERS_MAX_BYTES
ACKNOWLEDGEMENTS_MAX = 4
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"  # what first answers a subscription
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"  # which one, in the `_meta` of that
# the `_meta` members of a stateless request; it must carry the first three
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT = "io.modelcontextprotocol/clientInfo"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
# what the cached answers are made of: a change to any of these files (a new orcactl, a new
# SDK) is a new key, and the SDK's answers are recorded again at the next start
OWN_FILES = ("mcp_server.py", "mcp_stdio.py", "mcp_lines.py", "mcp_handshake.py")
LIBRARIES = ("mcp", "mcp_types", "pydantic", "pydantic_core")
REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})


def cache_file() -> Path:
    import platformdirs  # noqa: PLC0415  (only where the cache is read or written)

    return platformdirs.user_cache_path("orca") / CACHE_NAME


def code_key() -> str | None:
    """What the answers depend on: Python's version and the size and modification time of
    orcactl's MCP modules and of the libraries that shape the answers (their files, and their
    directories, which change when a file is added or removed). None when one is missing."""
    parts = [sys.version]
    paths = [Path(__file__).with_name(name) for name in OWN_FILES]
    for name in LIBRARIES:
        try:
            spec = importlib.util.find_spec(name)  # finds the package without importing it
        except (ImportError, ValueError):
            return None
        if spec is None or spec.origin is None:
            return None
        paths += [Path(spec.origin), Path(spec.origin).parent]
    for path in paths:
        try:
            status = os.stat(path)
        except OSError:
            return None
        parts.append(f"{path}\0{status.st_mtime_ns}\0{status.st_size}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


# by protocol version: the result of each of HANDSHAKE_METHODS, or of STATELESS_METHODS
Answers = dict[str, dict[str, Any]]


def methods_of(results: dict[str, Any]) -> tuple[str, ...]:
    """The methods a version's answers must hold: the stateless revision's once any is there.
    Its entry may also hold the rest of STATELESS_METHODS and, under STATELESS_PASSED_OVER, the
    acknowledgements recorded for subscriptions, by the notifications each asked for
    (`filter_key`)."""
    return STATELESS_REQUIRED if "server/discover" in results else HANDSHAKE_METHODS


def _answered_methods(results: dict[str, Any]) -> tuple[str, ...]:
    """The methods a version's entry holds answers to (its acknowledgements apart)."""
    return tuple(method for method in results if method != STATELESS_PASSED_OVER)


def filter_key(params: object) -> str | None:
    """The notifications a `subscriptions/listen` asks for, as the text that keys its recorded
    acknowledgement; None when its params are no object holding them."""
    if not isinstance(params, dict) or not isinstance(params.get("notifications"), dict):
        return None
    try:
        return json.dumps(params["notifications"], sort_keys=True, separators=(",", ":"))
    except ValueError:
        return None


def acknowledgement_line(subscription: int | str, recorded: dict[str, Any]) -> bytes:
    """The acknowledgement of the subscription `subscription` (its request's id), as the SDK
    wrote it for the same request before: `recorded` is its params without that id."""
    meta = {**recorded.get("_meta", {}), SUBSCRIPTION_ID: subscription}
    params = {"_meta": meta, **{name: value for name, value in recorded.items() if name != "_meta"}}
    message = {"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": params}
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def load_answers(key: str) -> Answers:
    """The cached answers recorded under `key`; none when the file is missing, damaged, of
    another key, or holds answers too long to write before the SDK takes over."""
    try:  # never waited on: a FIFO or a device there is no cache
        if not _private(cache_file()):
            return {}
        data = read_regular_file(cache_file(), CACHE_MAX_BYTES + 1)
        document = json.loads(data) if len(data) <= CACHE_MAX_BYTES else None
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(document, dict) or document.get("format") != CACHE_FORMAT:
        return {}
    versions = document.get("versions")
    if document.get("key") != key or not isinstance(versions, dict):
        return {}
    answers: Answers = {}
    for version, results in versions.items():
        if not isinstance(results, dict):
            continue
        methods = methods_of(results)
        stateless = methods == STATELESS_REQUIRED
        extra = {*STATELESS_METHODS, STATELESS_PASSED_OVER} if stateless else set()
        if not set(methods) <= set(results) <= set(methods) | extra:
            continue
        if not all(isinstance(results[method], dict) for method in results):
            continue
        acknowledgements = results.get(STATELESS_PASSED_OVER, {})
        if not all(_acknowledgement(params) for params in acknowledgements.values()):
            continue
        if _fits(results):
            answers[version] = results
    return answers


def _acknowledgement(params: object) -> bool:
    """Whether a recorded acknowledgement's params can make its line (acknowledgement_line
    adds the subscription's id to their `_meta`, which must then be an object)."""
    return isinstance(params, dict) and isinstance(params.get("_meta", {}), dict)


def _fits(results: dict[str, Any]) -> bool:
    """Whether a version's answers and acknowledgements, written as lines, are short enough
    to be written before the SDK takes over (EARLY_ANSWERS_MAX_BYTES)."""
    acknowledgements = results.get(STATELESS_PASSED_OVER, {})
    try:
        size = sum(len(_answer_line(0, results[method])) for method in _answered_methods(results))
        size += sum(len(acknowledgement_line(0, p)) for p in acknowledgements.values())
    except ValueError:  # what no answer line can carry (a lone surrogate)
        return False
    return size <= EARLY_ANSWERS_MAX_BYTES


def _private(path: Path) -> bool:
    """Whether the cache and its directory are the user's and closed to other users' writes.
    What the cache holds is handed to the agent as orca's own (the server's instructions, the
    tools' descriptions, which a model follows): a cache directory another user can write in
    (an XDG_CACHE_HOME in a shared place) could hold anyone's words."""
    uid = os.getuid()
    file, directory = path.lstat(), path.parent.stat()
    if file.st_uid != uid or directory.st_uid != uid:
        return False
    return not (file.st_mode | directory.st_mode) & stat.S_IWOTH


def save_answers(key: str, answers: Answers) -> None:
    """Write the cache whole, atomically; a cache that cannot be written is only slower."""
    path = cache_file()
    document = {"format": CACHE_FORMAT, "key": key, "versions": answers}
    with contextlib.suppress(OSError, ValueError):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temporary = tempfile.mkstemp(prefix=f".{CACHE_NAME}.", dir=path.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                json.dump(document, file, ensure_ascii=False, separators=(",", ":"))
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _answer_line(request_id: int | str, result: dict[str, Any]) -> bytes:
    answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
    text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"  # UnicodeEncodeError (a ValueError) for a surrogate


def id_key(request_id: object) -> str:
    """A request id as text that tells 1 from "1"."""
    return json.dumps(request_id)


def _plain_id(value: object) -> TypeGuard[int | str]:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _asked_version(params: object) -> str | None:
    """The protocol version an `initialize` asks for, when its params are what the SDK takes."""
    if not isinstance(params, dict):
        return None
    version, capabilities = params.get("protocolVersion"), params.get("capabilities")
    if not isinstance(version, str) or not isinstance(capabilities, dict):
        return None
    if not _plain_client(params.get("clientInfo")) or not _plain_meta(params):
        return None
    return version if _plain_capabilities(capabilities) else None


def _stated_version(params: object) -> str | None:
    """The protocol version a request of the stateless revision names in its `_meta`, when its
    params hold nothing else and its `_meta` only what the SDK takes (a progress token
    besides)."""
    if params is None or not isinstance(params, dict) or set(params) != {"_meta"}:
        return None
    meta = params["_meta"]
    if not isinstance(meta, dict) or not _plain_meta(params):
        return None
    if not set(meta) <= {META_VERSION, META_CLIENT, META_CAPABILITIES, "progressToken"}:
        return None
    version, capabilities = meta.get(META_VERSION), meta.get(META_CAPABILITIES)
    if not isinstance(version, str) or not isinstance(capabilities, dict):
        return None
    if not _plain_client(meta.get(META_CLIENT)) or not _plain_capabilities(capabilities):
        return None
    return version


def _plain_client(client: object) -> bool:
    """Whether a client's name and version are of the types the SDK takes, as far as told here."""
    if not isinstance(client, dict):
        return False
    if not isinstance(client.get("name"), str) or not isinstance(client.get("version"), str):
        return False
    if any(not isinstance(client.get(name, ""), (str, type(None))) for name in TEXT_FIELDS):
        return False
    return client.get("icons") is None  # a list of icons, each of several fields


# The members of an `initialize`'s params the SDK checks the types of (members it does not
# know it ignores), as far as they are checked here; a request with any other value in them is
# left to the SDK, which may refuse it: an answer from the cache would accept it.
TEXT_FIELDS = ("title", "description", "websiteUrl")  # of clientInfo: text, or null
OPTIONAL_OBJECTS = {  # of capabilities: an object of these optional objects, or null
    "sampling": ("context", "tools"),
    "elicitation": ("form", "url"),
}


def _optional(value: object, kind: type) -> bool:
    return value is None or isinstance(value, kind)


def _plain_capabilities(capabilities: dict[str, Any]) -> bool:
    """Whether the client's capabilities are of the types the SDK takes, as far as told here;
    False also for what is not checked here (`tasks`)."""
    for name, value in capabilities.items():
        if value is None:
            continue
        if name in ("experimental", "extensions"):
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                return False
        elif name == "roots":
            if not isinstance(value, dict) or not _optional(value.get("listChanged"), bool):
                return False
        elif name in OPTIONAL_OBJECTS:
            members = OPTIONAL_OBJECTS[name]
            if not isinstance(value, dict) or not all(
                _optional(value.get(member), dict) for member in members
            ):
                return False
        elif name == "tasks":
            return False
    return True


def _plain_meta(params: dict[str, Any]) -> bool:
    """Whether `params` has no `_meta`, or one the SDK takes: an object whose progress token,
    if any, is a string or an integer."""
    if "_meta" not in params:
        return True
    meta = params["_meta"]
    return isinstance(meta, dict) and (
        "progressToken" not in meta or _plain_id(meta["progressToken"])
    )


def _no_arguments(message: dict[str, Any]) -> bool:
    """A request with no params, or only `_meta` (a progress token, which a cached answer
    needs no progress for)."""
    if "params" not in message:
        return True
    params = message["params"]
    return isinstance(params, dict) and set(params) <= {"_meta"} and _plain_meta(params)


@dataclass
class Handover:
    """What the SDK takes over: every byte read from stdin, the ids of the requests answered
    already, and the cache as it was found; `ended` when stdin's end was read too (a terminal's
    end of input, Ctrl-D, is read once: the SDK would wait for another)."""

    read: bytes = b""
    answered: set[str] = field(default_factory=set)
    acknowledged: set[str] = field(default_factory=set)  # subscriptions, by their request's id
    key: str | None = None
    known: Answers = field(default_factory=dict)
    ended: bool = False
    # set once the early answers are all written: one to a client that does not read them yet
    # may still be, and nothing else may be written before it
    written: threading.Event | None = None


class EarlyAnswers:
    """Answers `initialize`, `tools/list` and `ping` from the cache on a thread of its own, or
    the stateless revision's discovery and lists, until a line it does not answer (other than
    a `subscriptions/listen` it passes over), or until `take_over`."""

    def __init__(self, key: str, known: Answers, wire_in: int = 0, wire_out: int = 1) -> None:
        self.key, self.known = key, known
        self.wire_in, self.wire_out = wire_in, wire_out
        self.read = bytearray()
        self.answered: set[str] = set()
        self.acknowledged: set[str] = set()
        self.version: str | None = None  # asked for by `initialize`
        self.stateless = False  # a request of the stateless revision was answered
        self.passed_over = 0  # its `subscriptions/listen` requests left to the SDK
        self.ended = False
        self.written = threading.Event()
        self._lock = threading.Lock()  # held to read stdin or to take a line, and to stop that
        self._stopping = False
        self._stop_read, self._stop_write = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="mcp early answers", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def take_over(self) -> Handover:
        """Stop reading and answering, at once, and hand over. An answer still being written
        (to a client that does not read it) is not waited for here: the SDK's writing waits
        for it (`Handover.written`), where serving can give up on such a client."""
        with self._lock:
            self._stopping = True
            if not self.written.is_set():  # the thread has not closed the pipe yet
                with contextlib.suppress(OSError):
                    os.write(self._stop_write, b"x")
            return Handover(
                bytes(self.read),
                set(self.answered),
                set(self.acknowledged),
                self.key,
                self.known,
                self.ended,
                self.written,
            )

    def _serve(self) -> None:
        try:
            self._answer_lines()
        finally:
            with self._lock:
                for descriptor in (self._stop_read, self._stop_write):
                    os.close(descriptor)
                self.written.set()

    def _answer_lines(self) -> None:
        poller = select.poll()
        poller.register(self.wire_in, select.POLLIN)
        poller.register(self._stop_read, select.POLLIN)
        pending = b""  # read, not yet a whole line
        try:
            while True:
                ready = dict(poller.poll())
                with self._lock:
                    if self._stopping or self._stop_read in ready:
                        return
                    chunk = os.read(self.wire_in, READ_CHUNK)
                    if not chunk:
                        self.ended = True  # the SDK is told: a terminal's end is read only once
                        return
                    self.read += chunk
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    line, pending = pending[: end + 1], pending[end + 1 :]
                    with self._lock:  # a line taken after take_over is the SDK's to answer
                        answer = None if self._stopping else self._answer(line)
                    if answer is None:
                        return  # this line and the rest wait for the SDK
                    self._write(answer)
                if len(pending) > EARLY_LINE_MAX_BYTES:
                    return
        except OSError:
            return  # stdin or stdout failed: the SDK meets the same failure

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wire_out, view) :]

    def _answer(self, line: bytes) -> bytes | None:
        """The answer to write for `line`, b"" for a line that needs none (a blank one, the
        client's `notifications/initialized`), or None when the SDK must answer it."""
        if not line.strip():
            return b""
        # read as strictly as the SDK's own reading (orcactl.mcp_lines.judge) or more: a line
        # it would refuse is left to it, which answers in its own words
        if json_nesting_exceeds(line, MAX_JSON_NESTING):
            return None
        try:
            message = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None
        if not set(message) <= REQUEST_KEYS:
            return None
        method = message.get("method")
        if method == "notifications/initialized" and "id" not in message:
            return b"" if self.version is not None and _no_arguments(message) else None
        request_id = message.get("id")
        if not _plain_id(request_id) or id_key(request_id) in self.answered:
            return None
        if method == STATELESS_PASSED_OVER:
            # a second subscription of the same id is the SDK's to acknowledge: it drops its
            # own acknowledgement of that id only once (`Handover.acknowledged`)
            if id_key(request_id) in self.acknowledged or not self._passes_over(message):
                return None
            return self._acknowledgement(request_id, message)  # the SDK serves the stream
        if len(self.answered) >= EARLY_ANSWERS_MAX:
            return None
        result = self._result(method, message)
        if result is None:
            return None
        self.answered.add(id_key(request_id))
        return _answer_line(request_id, result)  # the cache's answers were checked to encode

    def _passes_over(self, message: dict[str, Any]) -> bool:
        """Whether a `subscriptions/listen` may wait for the SDK while later lines are answered:
        a stateless client's, the first few. Its params (which notifications) are the SDK's
        to judge; only the version they name is read here."""
        if self.version is not None or self.passed_over >= STATELESS_PASSED_OVER_MAX:
            return False
        params = message.get("params")
        if (
            not isinstance(params, dict)
            or self._stateless_answers({"_meta": params.get("_meta")}) is None
        ):
            return False
        self.passed_over += 1
        return True

    def _acknowledgement(self, request_id: int | str, message: dict[str, Any]) -> bytes:
        """The acknowledgement the SDK gave this subscription's filter before, if recorded; the
        SDK's own, once it has loaded, is then not sent (`Handover.acknowledged`)."""
        params = message["params"]
        answers = self._stateless_answers({"_meta": params.get("_meta")}) or {}
        recorded = answers.get(STATELESS_PASSED_OVER, {}).get(filter_key(params) or "")
        if recorded is None or len(self.answered) >= EARLY_ANSWERS_MAX:
            return b""
        self.acknowledged.add(id_key(request_id))
        return acknowledgement_line(request_id, recorded)

    def _stateless_answers(self, params: object) -> dict[str, Any] | None:
        """The cached answers for the version a stateless request names, if of that revision."""
        version = _stated_version(params)
        answers = self.known.get(version) if version is not None else None
        return answers if answers is not None and "server/discover" in answers else None

    def _result(self, method: object, message: dict[str, Any]) -> dict[str, Any] | None:
        if method in STATELESS_METHODS and self.version is None:
            answers = self._stateless_answers(message.get("params"))
            if answers is None or method not in answers:  # (one its recording client never asked)
                return None
            self.stateless = True
            return dict(answers[str(method)])
        if method == "initialize" and self.version is None and not self.stateless:
            version = _asked_version(message.get("params"))
            if version is None or version not in self.known:
                return None
            self.version = version
            return dict(self.known[version]["initialize"])
        if self.version is None or not _no_arguments(message):
            return None
        if method == "tools/list":
            return dict(self.known[self.version]["tools/list"])
        if method == "ping":
            return {}
        return None


_early: EarlyAnswers | None = None


# `orcactl mcp`'s options (orcactl.commands.agents), and orcactl's own before the command
MCP_FLAGS = ("--json", "--no-start")
MCP_VALUE_OPTIONS = ("--cwd", "--mode", "--session-id", "--home", "--config-dir", "--socket")
MCP_MODES = ("normal", "plan", "auto", "yolo")


def serves_with(options: list[str]) -> bool:
    """Whether `orcactl mcp` given `options` is sure to get as far as serving: each option
    written in full, with a value its parser takes, and a working directory it can use. An
    answer from the cache tells the client the server is up; one given before a usage error
    (`--cwd` naming a directory since removed, a misspelt option, `--help`) would be a server
    that answered and then exited, where argparse alone says what is wrong."""
    values: dict[str, str] = {}
    index = 0
    while index < len(options):
        name, equals, value = options[index].partition("=")
        if name in MCP_FLAGS and not equals:
            index += 1
            continue
        if name not in MCP_VALUE_OPTIONS:
            return False
        if not equals:
            if index + 1 >= len(options):
                return False
            index += 1
            value = options[index]
        if value.startswith("-"):  # argparse may take it for an option
            return False
        values[name] = value
        index += 1
    return _values_taken(values)


def _directory_or_none(path: str) -> bool:
    return os.path.isdir(path) or not os.path.lexists(path)


def _values_taken(values: dict[str, str]) -> bool:
    try:
        for name in ("--socket", "--home", "--config-dir", "--cwd"):
            if name in values:
                path = os.path.abspath(os.path.expanduser(values[name]))
                path.encode("utf-8")
                if not values[name] or (name == "--cwd" and not os.path.isdir(path)):
                    return False
                # a file for a directory: orcactl.arguments.directory_path refuses it
                if name in {"--home", "--config-dir"} and not _directory_or_none(path):
                    return False
        if "--cwd" not in values:
            os.getcwd().encode("utf-8")
    except (OSError, UnicodeEncodeError):  # a relative path, or none, in a directory removed
        return False
    if values.get("--mode", "normal") not in MCP_MODES:
        return False
    if "--session-id" in values:
        from protocol.types import CLIENT_ID_MAX_CHARS, NO_CONTROL_CHARACTERS  # noqa: PLC0415

        session_id = values["--session-id"]
        if not 1 <= len(session_id) <= CLIENT_ID_MAX_CHARS:
            return False
        if not re.match(NO_CONTROL_CHARACTERS, session_id):
            return False
        try:
            session_id.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def answer_early(options: list[str]) -> None:
    """Start answering from the cache, when it holds answers for this code and `options` are
    sure to be served (`serves_with`). Called before the slow imports, with descriptors 0 and 1
    the client's."""
    global _early  # noqa: PLW0603  (one per process, taken over by the server once)
    if not serves_with(options):
        return
    key = code_key()
    known = load_answers(key) if key is not None else {}
    if key is None or not known or _early is not None:
        return
    _early = EarlyAnswers(key, known)
    _early.start()


def take_over() -> Handover:
    """Stop the early answers, if any were started, and hand their reading over to the SDK."""
    global _early
    if _early is not None:
        early, _early = _early, None
        return early.take_over()
    key = code_key()
    return Handover(key=key, known=load_answers(key) if key is not None else {})


# --- recorded before an agent's first session -----------------------------------------------

# What each agent first writes to an MCP server it starts: Codex 0.171 asks for 2025-06-18 with
# `initialize`; Claude Code 2.1.332 speaks the stateless revision, and subscribes to these
# notifications.
AGENT_HANDSHAKE_VERSIONS = {"codex": "2025-06-18"}
AGENT_STATELESS_VERSIONS = {"claude-code": "2026-07-28"}
AGENT_SUBSCRIPTIONS = {
    "claude-code": {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
    }
}
WARM_UP_MAX_S = 15.0  # a wrapper given as --orcactl that never answers holds integrate no longer


def warm_up_lines(agent: str) -> list[dict[str, Any]]:
    """The requests whose answers `agent`'s first session would ask a new server for."""
    client = {"name": "orcactl-integrate", "version": "1"}
    if agent in AGENT_STATELESS_VERSIONS:
        meta = {
            META_VERSION: AGENT_STATELESS_VERSIONS[agent],
            META_CLIENT: client,
            META_CAPABILITIES: {},
        }
        messages = [
            {"jsonrpc": "2.0", "id": number, "method": method, "params": {"_meta": meta}}
            for number, method in enumerate(STATELESS_METHODS)
        ]
        if agent in AGENT_SUBSCRIPTIONS:
            listen = {"_meta": meta, "notifications": AGENT_SUBSCRIPTIONS[agent]}
            messages.insert(
                1,
                {
                    "jsonrpc": "2.0",
                    "id": "listen",
                    "method": STATELESS_PASSED_OVER,
                    "params": listen,
                },
            )
        return messages
    initialize = {
        "protocolVersion": AGENT_HANDSHAKE_VERSIONS[agent],
        "capabilities": {},
        "clientInfo": client,
    }
    return [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ]


def warm_up(orcactl: str, agent: str, env: dict[str, str]) -> bool:
    """Start `orcactl mcp` once as `agent` would and let it record its answers, so that the
    agent's first session is answered from the cache too; whether the cache holds them now
    (when not, the first session is only slower). The server is stopped once it has written
    every answer and acknowledgement, each recorded before it is written: a subscription
    would keep it running."""
    import subprocess  # noqa: PLC0415  (only integrate runs this)

    messages = warm_up_lines(agent)
    expected = {message["id"] for message in messages if "id" in message}
    before = _cache_identity()
    try:
        with subprocess.Popen(
            [orcactl, "mcp", "--no-start"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=tempfile.gettempdir(),
        ) as server:
            assert server.stdin is not None and server.stdout is not None
            try:
                server.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
                server.stdin.flush()
                _read_until_answered(server.stdout, expected)
            finally:
                server.kill()
    except (OSError, ValueError, RecursionError, TimeoutError):  # (a line nested too deep)
        return False
    version = AGENT_STATELESS_VERSIONS.get(agent) or AGENT_HANDSHAKE_VERSIONS[agent]
    key = _recorded_key()
    # the cache holds one orcactl's answers: this one's, or those the warm-up has just written
    # (another installation's, given as --orcactl); another's left from before, which a write
    # that failed kept, are not what this orcactl will answer from
    if key is None or (key != code_key() and _cache_identity() in (None, before)):
        return False
    return version in load_answers(key)


def _read_until_answered(stdout: Any, expected: set[object]) -> None:
    """Read the server's lines until every request of `expected` is answered (a subscription
    by its acknowledgement); TimeoutError after WARM_UP_MAX_S, ValueError when it stops or
    writes a line that is not JSON, RecursionError for one nested too deep to read."""
    import time  # noqa: PLC0415

    deadline = time.monotonic() + WARM_UP_MAX_S
    pending = b""
    while expected:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stdout], [], [], left)[0]:
            raise TimeoutError("orcactl mcp did not answer")
        chunk = os.read(stdout.fileno(), READ_CHUNK)
        if not chunk:
            raise ValueError("orcactl mcp stopped")
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if not isinstance(message, dict):
                continue
            if _plain_id(message.get("id")):
                expected.discard(message.get("id"))
            params = message.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            subscription = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
            if message.get("method") == ACKNOWLEDGED and _plain_id(subscription):
                expected.discard(subscription)


def _recorded_key() -> str | None:
    """The key the cache's answers were recorded under (that of the orcactl that wrote them,
    which may be another installation than this one); None when there is no such cache."""
    try:
        if not _private(cache_file()):
            return None
        document = json.loads(read_regular_file(cache_file(), CACHE_MAX_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return None
    key = document.get("key") if isinstance(document, dict) else None
    return key if isinstance(key, str) else None


def _cache_identity() -> tuple[int, int, int] | None:
    """The cache file as a write leaves it (each writes a new file in its place); None when
    there is none."""
    try:
        status = os.stat(cache_file())
    except OSError:
        return None
    return status.st_dev, status.st_ino, status.st_mtime_ns


class Recorder:
    """Keeps the SDK's answers to `initialize` and `tools/list` for the protocol version the
    client asked for, or to the stateless revision's discovery and lists for the version they
    name (and its acknowledgements of subscriptions, by the notifications asked for), and
    writes them to the cache once all are known and differ from it."""

    def __init__(self, key: str | None, known: Answers) -> None:
        self.key = key
        self.known = known
        self.version: str | None = None  # asked for by `initialize`
        # request id key -> (the version a stateless request names, or None, and its method)
        self._asked: dict[str, tuple[str | None, str]] = {}
        self._results: dict[str | None, dict[str, Any]] = {}  # by the same version, or None
        self._listens: dict[str, tuple[str, str]] = {}  # id key -> (version, filter_key)

    def asked(self, request_id: object, method: str, params: object) -> None:
        if self.key is None:
            return
        if method == STATELESS_PASSED_OVER:
            meta = params.get("_meta") if isinstance(params, dict) else None
            stated, notifications = _stated_version({"_meta": meta}), filter_key(params)
            if stated is not None and notifications is not None:
                self._listens[id_key(request_id)] = (stated, notifications)
        elif method in STATELESS_METHODS and (stated := _stated_version(params)) is not None:
            self._asked[id_key(request_id)] = (stated, method)
        elif method == "initialize" and self.version is None:
            version = _asked_version(params)
            if version is not None:
                self.version = version
                self._asked[id_key(request_id)] = (None, method)
        elif method == "tools/list" and (
            params is None or (isinstance(params, dict) and set(params) <= {"_meta"})
        ):
            self._asked[id_key(request_id)] = (None, method)

    def wants(self, request_id: object) -> bool:
        """Whether the answer to `request_id` is one to keep (the handshake's, not yet kept)."""
        return id_key(request_id) in self._asked

    def answered(self, request_id: object, result: object) -> None:
        asked = self._asked.pop(id_key(request_id), None)
        if asked is None or not isinstance(result, dict) or self.key is None:
            return
        stated, method = asked
        self._results.setdefault(stated, {})[method] = result
        self._save(stated)

    def acknowledged(self, params: object) -> str | None:
        """Keep the SDK's acknowledgement of a subscription (a notification's `params`);
        the id key of the subscription it acknowledges, when it names one."""
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(params, dict) or not isinstance(meta, dict):
            return None
        subscription = meta.get(SUBSCRIPTION_ID)
        if not _plain_id(subscription):
            return None
        listen = self._listens.pop(id_key(subscription), None)
        if listen is not None and self.key is not None:
            version, notifications = listen
            kept_meta = {name: value for name, value in meta.items() if name != SUBSCRIPTION_ID}
            recorded = {**params, "_meta": kept_meta} if kept_meta else dict(params)
            if not kept_meta:
                del recorded["_meta"]
            results = self._results.setdefault(version, {})
            results.setdefault(STATELESS_PASSED_OVER, {})[notifications] = recorded
            self._save(version)
        return id_key(subscription)

    def _save(self, stated: str | None) -> None:
        """Write the answers kept for `stated` (None: the handshake's) once complete."""
        results = self._results[stated]
        version = self.version if stated is None else stated
        methods = HANDSHAKE_METHODS if stated is None else STATELESS_REQUIRED
        if version is None or self.key is None or not set(methods) <= set(results):
            return
        known = self.known.get(version, {})
        entry = {method: results[method] for method in methods}
        if stated is not None:  # the lists this client did not ask for, as another recorded them
            for method in STATELESS_METHODS:
                if method in results or method in known:
                    entry[method] = results.get(method, known.get(method))
        acknowledgements = dict(known.get(STATELESS_PASSED_OVER, {}))
        for notifications, recorded in results.get(STATELESS_PASSED_OVER, {}).items():
            acknowledgements.pop(notifications, None)
            acknowledgements[notifications] = recorded  # the latest last
        # each filter a client asked for adds one: the oldest go, so that the entry is never
        # one too long to be answered from (which would cost every client its early answers)
        while acknowledgements and (
            len(acknowledgements) > ACKNOWLEDGEMENTS_MAX
            or not _fits({**entry, STATELESS_PASSED_OVER: acknowledgements})
        ):
            del acknowledgements[next(iter(acknowledgements))]
        if stated is not None and acknowledgements:
            entry[STATELESS_PASSED_OVER] = acknowledgements
        if known != entry:
            # read again just before it is replaced: a server started beside this one (another
            # agent, asking for another version) may have recorded its answers meanwhile
            self.known = {**load_answers(self.key), version: entry}
            save_answers(self.key, self.known)
