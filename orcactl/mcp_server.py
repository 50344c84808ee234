"""`orcactl mcp`: a stdio MCP server that gives the model orcad's memory tools.

Built on the official MCP Python SDK (`mcp`, on anyio). Each tool is one or two orcad calls made
through the synchronous protocol client in a worker thread, on one orcad session for the
server's lifetime (joined, not fenced, when `--session-id` names the agent's session). The
daemon's rules (scopes, approvals, secrets, limits) decide everything; a daemon error becomes an
MCP tool error carrying the daemon's message, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Annotated, Any, Literal

import anyio
import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    ToolAnnotations,
)
from pydantic import BaseModel, Field, ValidationError

import orcad
from orcactl.approval import already_so, shell_word
from orcactl.arguments import current_directory
from orcactl.connect import CommandError, connect, escape_raw_in_json, socket_path
from orcactl.hooks.common import bounded
from orcactl.hooks.runner import extraction_run
from orcactl.mcp_handshake import take_over
from orcactl.mcp_stdio import run_stdio
from orcad.control_characters import escape_control_characters
from orcad.errors import InvalidParams, quoted
from orcad.limits import (
    EXPLICIT_FACT_MAX_CHARS,
    MEMORY_CONTENT_MAX_CHARS,
    PENDING_APPROVALS_PER_SESSION,
)
from protocol.client import Client, DaemonUnavailable, ProtocolViolation
from protocol.errors import RemoteError

WRITE_RULE = (
    "Only keep what lasts: call this when the user explicitly asks you to remember something, "
    "or when they state a stable fact about themselves, their preferences or this project that "
    "will help in future sessions. Never store ordinary conversation, one-off task details, "
    "progress notes, duplicates, secrets or credentials, or your own guesses. Use workspace "
    "scope (is_global false) for anything about this repository; global only for what truly "
    "applies everywhere. After a change, tell the user what changed and in which scope."
)

INSTRUCTIONS = (
    "orca keeps the user's memory on this machine. memory_search lists or searches the "
    "deliberate records; memory_manage saves, updates or forgets them; remember appends an "
    "explicit fact loaded at every session start; recall shows what orca would recall for a "
    "prompt, the facts it extracted from earlier turns included. Recalled memory is "
    "historical: verify it against the repository before relying on it. " + WRITE_RULE
)

# Calls that change nothing, so sending one again after a lost connection is harmless.
READ_ONLY = frozenset({"memory.search", "recall", "session.open"})
CHANGES = frozenset({"memory.manage", "memory.approve", "remember"})
# Closing the session at exit waits no longer than this for orcad: a daemon that is stopped or
# stuck would otherwise hold the exit (on stdin's end, or SIGTERM) for a whole call's timeout,
# past the couple of seconds an agent waits before it kills its server.
CLOSE_TIMEOUT_S = 1.0
# Facts put to the user at once, at most: as orcad bounds a session's changes waiting for the
# user. Each question holds its call until the client answers it, and a client that never does
# (it may still read and send) held one more call in memory for every fact the model tried.
MAX_FACTS_ASKED = PENDING_APPROVALS_PER_SESSION
# Text to keep is refused past this (orcad's own limits are far lower and say so); text to
# search with is cut to its ends. Either way no request nears orcad's 8 MiB bound, past which
# it closes the connection instead of answering.
KEPT_TEXT_MAX_CHARS = 64 * 1024

# A change sent without an answer back: a model told it failed would make it a second time.
UNKNOWN_OUTCOME = (
    "orca: {why}, so whether the change was made is not known; look with memory_search (or in "
    "the memory files) before trying again"
)

DECISIONS = {  # a grant covers the scope of the change it is given on (orcad decides)
    "allow_once": "Apply this change once",
    "allow_session": "Apply, and apply this session's later changes to the same memory "
    "(this workspace's, or global) without asking",
    "allow_workspace": "Apply, and from now on apply later changes to the same memory without "
    "asking, from any session: this workspace's memory, or for a global change global memory "
    "from any workspace",
}


def _shown(text: str) -> str:
    """Text from the socket as a tool gives it to the agent, which shows it to the user: with
    control characters escaped, as orcad escapes what it stores, since what answered there may
    not be orcad."""
    return escape_control_characters(text)


def _tool_error(message: str) -> ToolError:
    """A tool error whose message may quote the daemon (or whatever answered on its socket)."""
    return ToolError(_shown(message))


class RememberChoice(BaseModel):
    """What the user is asked before an explicit fact is kept (normal mode)."""

    remember: bool = Field(default=True, strict=True, description="Keep this fact")


class ApprovalChoice(BaseModel):
    """What the user is asked when a memory change needs approval."""

    decision: Literal["allow_once", "allow_session", "allow_workspace"] = Field(
        default="allow_once",
        description="; ".join(f"{key}: {text}" for key, text in DECISIONS.items()),
    )


def refuse_in_extraction(method: str) -> None:
    """An agent CLI run as orca's extractor must not write the memory it feeds."""
    if method in CHANGES and extraction_run():
        raise _tool_error("orca: memory is not changed from inside an extraction run")


# What an orcad that does not know a field this orcactl sends is most likely: one still running
# from before an upgrade of the package.
ORCAD_OLDER = (
    "; the orcad answering may be older than this orcactl (upgraded while it ran): restart it"
)


@contextlib.contextmanager
def _as_tool_errors(method: str) -> Iterator[None]:
    """What went wrong reaching orcad for `method`, as a tool error the agent can show: for a
    change whose request may have reached orcad, that its outcome is not known."""
    try:
        yield
    except RemoteError as exc:
        older = exc.kind == "invalid_params" and "unknown field" in exc.error.message
        hint = ORCAD_OLDER if older else ""
        raise _tool_error(f"orca: {exc.error.message} ({exc.kind}){hint}") from None
    except TimeoutError as exc:
        if method in READ_ONLY:
            raise _tool_error(f"orca: orcad did not answer in time: {exc}") from None
        # the request may have reached it: the change may be made once it catches up
        raise _tool_error(UNKNOWN_OUTCOME.format(why="orcad did not answer in time")) from None
    except ConnectionError as exc:
        if method in READ_ONLY or isinstance(exc, (BrokenPipeError, DaemonUnavailable)):
            raise _tool_error(f"orca: cannot reach orcad: {exc}") from None
        # the request may have reached it: it may have made the change before it died
        raise _tool_error(
            UNKNOWN_OUTCOME.format(why=f"the connection to orcad was lost ({exc})")
        ) from None
    except (CommandError, OSError, DaemonUnavailable, ProtocolViolation) as exc:
        raise _tool_error(f"orca: cannot reach orcad: {exc}") from None
    except msgspec.MsgspecError as exc:
        raise _tool_error(f"orca: orcad sent an answer this server cannot read: {exc}") from None


class DaemonSession:
    """The server's orcad session: opened on first use, opened again if it expired.

    Each tool call connects anew: an idle server holds no connection the daemon could evict at
    its connection limit, and a daemon restarted between calls is simply reached again.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.cwd = args.cwd or current_directory()  # one removed under the agent: bad usage
        self.session_id: str = args.session_id or f"mcp:{secrets.token_hex(8)}"
        self.join = bool(args.session_id)
        self.ids: dict[str, Any] | None = None
        self.asks_user = True  # whether the session's mode has a change asked for (on open)
        self._client: Client | None = None
        self._lock = threading.Lock()

    def _open(self, client: Client) -> dict[str, Any]:
        opened = client.call(
            "session.open",
            {
                "cwd": self.cwd,
                "session_id": self.session_id,
                "mode": self.args.mode,
                "interactive": True,
                "join": True if self.ids is not None else self.join,
            },
        )
        self.ids = {"session_id": opened.session_id, "epoch": opened.epoch}
        # a joined session keeps the mode it was opened with (the agent's, through its hooks)
        self.asks_user = opened.mode == "normal" and opened.interactive and not opened.auto_approve
        return self.ids

    def open_blocking(self) -> None:
        """Open the session now, unless it is open: what a tool reads of it before a call."""
        with self._lock, _as_tool_errors("session.open"):
            try:
                if self.ids is None:
                    if self._client is None:
                        self._client = connect(self.args)
                    self._open(self._client)
            finally:
                self.close()

    def _checked(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        refuse_in_extraction(method)
        checked = dict(params)
        for name in ("prompt", "query"):
            if isinstance(checked.get(name), str):
                checked[name] = bounded(checked[name])
        for name in ("content", "text"):
            value = checked.get(name)
            if isinstance(value, str) and len(value) > KEPT_TEXT_MAX_CHARS:
                # named as orcad names it for text under this bound, limit and all
                what, limit = (
                    ("a memory record", MEMORY_CONTENT_MAX_CHARS)
                    if name == "content"
                    else ("a remembered fact", EXPLICIT_FACT_MAX_CHARS)
                )
                raise _tool_error(
                    f"orca: `{name}` has {len(value)} characters; {what} may have at most "
                    f"{limit}. Shorten it to one short statement"
                )
        return checked

    def call_blocking(self, method: str, params: dict[str, Any]) -> Any:
        params = self._checked(method, params)
        with self._lock, _as_tool_errors(method):
            try:
                return self._call(method, params)
            except (BrokenPipeError, ConnectionError) as exc:
                # Sending failed (nothing reached the daemon) or the call changes nothing:
                # once more on a new connection, to a daemon that restarted or closed ours.
                if not (isinstance(exc, BrokenPipeError) or method in READ_ONLY):
                    raise
                self.close()
                return self._call(method, params)
            finally:
                self.close()

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        if self._client is None:
            self._client = connect(self.args)
        ids = self.ids or self._open(self._client)
        try:
            return self._client.call(method, {**ids, **params})
        except RemoteError as exc:
            # only orcad's "this session is gone" names it in data; any other not_found (a
            # record, an approval) is the tool's answer
            gone = exc.kind == "not_found" and exc.data.get("session_id") == ids["session_id"]
            # A joined server is one of the agent's own processes, as its hooks are: the agent's
            # startup open (which may come after the server first joined) fences none of them.
            # orcad refuses a stale epoch before doing anything, so the call is simply made again.
            fenced = exc.kind == "stale_session" and self.join
            if not (gone or fenced):
                raise
        # The session expired or was closed while the server sat idle, or the agent opened it
        # anew: open (join) it again.
        ids = self._open(self._client)
        return self._client.call(method, {**ids, **params})

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        return await anyio.to_thread.run_sync(self.call_blocking, method, params)

    def close_session(self) -> None:
        """Close the session this server opened: housekeeping at exit, so a daemon that is not
        running is not started for it (nor is a session opened again to be closed), and one
        that does not answer is not waited for past `CLOSE_TIMEOUT_S`."""
        if self.ids is None or self.join:
            return
        try:
            with connect(self.args, start=False, timeout=CLOSE_TIMEOUT_S) as client:
                client.call("session.close", self.ids)
        except (CommandError, OSError, RemoteError, ProtocolViolation, msgspec.MsgspecError):
            pass  # the daemon expires sessions it no longer hears from

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _dump(value: Any) -> str:
    # the agent shows tool results to the user: nothing JSON leaves raw goes out raw
    return escape_raw_in_json(json.dumps(msgspec.to_builtins(value), ensure_ascii=False, indent=1))


async def _kept_already(session: DaemonSession, text: str, scope: str) -> str | None:
    """The file that holds the fact already, asked of orcad without writing (`check`), or None:
    not kept, or not known (an orcad from before `check`, a file it cannot read), and then the
    user is asked as before and the write says what is wrong."""
    try:
        result = await session.call("remember", {"text": text, "scope": scope, "check": True})
    except ToolError:
        return None
    return str(result.path) if result.already_kept else None


def _supports_elicitation(ctx: Context) -> bool:
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def _socket_words(session: DaemonSession) -> list[str]:
    """`--socket PATH` when this server was pointed at a daemon: the user's shell may not name
    it (integrate writes --socket, the agent may set ORCA_SOCKET)."""
    if getattr(session.args, "socket", None) or os.environ.get("ORCA_SOCKET"):
        return ["--socket", socket_path(session.args)]
    return []


def approve_command(session: DaemonSession, approval_id: str) -> str:
    # `--session-id=ID`: an id may start with "-", which argparse would take for an option
    words = ["orcactl", "memory", "approve", approval_id, f"--session-id={session.session_id}"]
    words += [*_socket_words(session), "--cwd", session.cwd, "--decision", "allow_once"]
    # a directory with spaces or quotes stays one argument, and one with a control character
    # is written in ANSI-C quotes, which _shown leaves as they are and a shell reads back
    return " ".join(map(shell_word, words))


def remember_command(session: DaemonSession, text: str, scope: str) -> str:
    """The orcactl command that keeps `text` as the user's own explicit fact."""
    words = ["orcactl", "remember", *_socket_words(session)]
    words += ["--project", "--cwd", session.cwd] if scope == "project" else []
    return " ".join(map(shell_word, [*words, "--", text]))


class OrcaServer(MCPServer):
    """The SDK's server, strict where a model's slip should be told, not passed over: an
    argument a tool does not take (`querry`) is refused, not ignored (the search would list the
    most recent records as if that was asked); arguments are refused in one line per field, with
    no link to pydantic's pages; a prompt (this server has none) is not found as bad params, not
    as an internal error with a traceback on stderr."""

    _parameters: dict[str, frozenset[str]] | None = None

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        context: Context[Any, Any] | None = None,
    ) -> GetPromptResult | InputRequiredResult:
        raise MCPError(INVALID_PARAMS, f"no prompt {quoted(name)}: orca offers tools only")

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if self._parameters is None:
            tools = await self.list_tools()
            self._parameters = {
                tool.name: frozenset(tool.input_schema.get("properties", ())) for tool in tools
            }
        taken = self._parameters.get(name)
        if taken is None:  # the SDK's answer names it raw, control characters and all
            raise ToolError(
                f"no tool {quoted(name)}: orca's tools are " + ", ".join(sorted(self._parameters))
            )
        unknown = sorted(set(arguments) - taken)
        if unknown:
            raise ToolError(
                f"{name} was not run: unknown argument{'s' if len(unknown) > 1 else ''} "
                + ", ".join(quoted(word) for word in unknown[:8])
                + (f" (and {len(unknown) - 8} more)" if len(unknown) > 8 else "")
                + "; it takes "
                + ", ".join(sorted(taken))
            )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            refused = "; ".join(
                ": ".join(filter(None, [".".join(map(str, error["loc"])), error["msg"]]))
                for error in exc.__cause__.errors(include_url=False, include_input=False)
            )
            raise ToolError(f"{name} was not run: {refused}") from exc.__cause__


def build_server(session: DaemonSession) -> OrcaServer:
    server = OrcaServer("orca", instructions=INSTRUCTIONS, version=orcad.__version__)
    facts_asked = [0]  # questions of `remember` the client has not answered yet

    @server.tool(
        description="Search the user's deliberate memory records visible from this workspace, "
        "best match first; omit query to list the most recent. Read-only.",
        annotations=ToolAnnotations(
            title="Search memory", read_only_hint=True, open_world_hint=False
        ),
        structured_output=False,
    )
    async def memory_search(
        query: Annotated[
            str | None, Field(description="free text; at most 12 terms are used")
        ] = None,
        limit: Annotated[int, Field(strict=True, ge=1, le=20, description="1 to 20 records")] = 8,
    ) -> str:
        params: dict[str, Any] = {"limit": limit}
        if query is not None:
            params["query"] = query
        result = await session.call("memory.search", params)
        return _dump(result.records) if result.records else "No records."

    @server.tool(
        description="Save, update or forget one deliberate memory record. save needs content, "
        "kind and is_global; update needs id and content or kind; forget needs id. " + WRITE_RULE,
        annotations=ToolAnnotations(
            title="Change memory",
            read_only_hint=False,
            destructive_hint=True,
            open_world_hint=False,
        ),
        structured_output=False,
    )
    async def memory_manage(  # noqa: PLR0917  (the tool's arguments)
        action: Literal["save", "update", "forget"],
        ctx: Context,
        id: Annotated[str | None, Field(description="mem_... id, for update and forget")] = None,
        content: Annotated[str | None, Field(description="the record's text: one fact")] = None,
        kind: Literal["preference", "fact", "workflow", "decision"] | None = None,
        # strict: "yes" or 1 must not widen a change to every workspace
        is_global: Annotated[
            bool | None, Field(strict=True, description="true: every workspace")
        ] = None,
    ) -> str:
        params: dict[str, Any] = {"action": action}
        for name, value in (
            ("id", id),
            ("content", content),
            ("kind", kind),
            ("is_global", is_global),
        ):
            if value is not None:
                params[name] = value
        result = await session.call("memory.manage", params)
        if result.outcome == "pending_approval" and result.approval_id is not None:
            waiting = _shown(
                f"Pending approval: {result.summary} Nothing has changed yet. The user can "
                f"approve it with: {approve_command(session, result.approval_id)}"
            )
            if not _supports_elicitation(ctx):
                return waiting
            try:
                answer = await ctx.elicit(
                    _shown(f"{result.summary} Allow this memory change?"), ApprovalChoice
                )
            except (MCPError, ValueError):  # the client failed to ask, or answered off-schema
                return waiting
            decision = answer.data.decision if answer.action == "accept" else "deny"
            result = await session.call(
                "memory.approve", {"approval_id": result.approval_id, "decision": decision}
            )
        # a save or update to text the memory already holds changed nothing because the memory
        # already says it: done, as for orcactl (exit 0) and the remember tool, not a failure
        if result.outcome == "denied" and not already_so(result, params):
            # orcad's summary already opens with "Nothing changed": said once
            raise _tool_error(f"orca: {result.summary}")
        return _shown(str(result.summary))

    @server.tool(
        description="Keep an explicit fact that is loaded at the start of every session: scope "
        "'project' (this project's memory.md) or 'user' (user.md, every project). Use it only "
        "when the user asks you to remember something. " + WRITE_RULE,
        annotations=ToolAnnotations(title="Remember", read_only_hint=False, open_world_hint=False),
        structured_output=False,
    )
    async def remember(
        text: Annotated[str, Field(min_length=1, description="the fact, in one sentence")],
        ctx: Context,
        scope: Literal["user", "project"] = "project",
    ) -> str:
        refuse_in_extraction("remember")  # before the user is asked anything
        # (the detector loads at the first fact, not with the server: 0.1 s of its start)
        from orcad.explicit import format_fact  # noqa: PLC0415

        try:  # what orcad would refuse (a secret, a text too long) is not put to the user,
            # nor printed in a command for them to paste into their shell's history
            format_fact(text)
        except InvalidParams as exc:
            raise _tool_error(f"orca: not remembered: {exc}") from None
        await anyio.to_thread.run_sync(session.open_blocking)
        asked = session.asks_user
        if asked and (kept := await _kept_already(session, text, scope)) is not None:
            # nothing to agree to: the user is not asked about a fact the file holds
            return _shown(f"Already kept as a {scope} fact in {kept}; nothing was written.")
        if asked:  # normal mode: the user agrees first, as to a memory change
            where = (
                "a user fact, loaded at the start of every session in every project"
                if scope == "user"
                else "a fact of this project, loaded at the start of every session in it"
            )
            command = remember_command(session, text, scope)
            if not _supports_elicitation(ctx):
                raise _tool_error(
                    f"orca: not remembered: in normal mode a fact is kept once the user agrees, "
                    f"and this client cannot ask. The user can keep it with: {command}"
                )
            if facts_asked[0] >= MAX_FACTS_ASKED:
                raise _tool_error(
                    f"orca: not remembered: {MAX_FACTS_ASKED} facts already wait for the user's "
                    f"answer; try again once they are answered. The user can keep it with: "
                    f"{command}"
                )
            facts_asked[0] += 1
            try:
                answer = await ctx.elicit(
                    _shown(f"Remember this as {where}? {text}"), RememberChoice
                )
            except (MCPError, ValueError):  # the client failed to ask, or answered off-schema
                raise _tool_error(
                    f"orca: not remembered: the question to the user failed. The user can keep "
                    f"it with: {command}"
                ) from None
            finally:
                facts_asked[0] -= 1
            if answer.action != "accept" or not answer.data.remember:
                raise _tool_error("orca: not remembered: declined by the user")
        # orcad keeps it in a normal session only when the user was asked: a session opened
        # again meanwhile (expired, fenced) may be in another mode than the one judged here.
        # True is orcad's default, so it goes unsaid: an orcad still running from before
        # `asked` existed (the package upgraded under it) refuses the field it does not know.
        params: dict[str, Any] = {"text": text, "scope": scope}
        if not asked:
            params["asked"] = False
        result = await session.call("remember", params)
        if result.already_kept:
            return _shown(f"Already kept as a {scope} fact in {result.path}; nothing was written.")
        return _shown(f"Remembered as a {scope} fact in {result.path}.")

    @server.tool(
        description="What orca recalls for a prompt: automatic and deliberate memory, framed as "
        "historical claims to verify. Read-only.",
        annotations=ToolAnnotations(title="Recall", read_only_hint=True, open_world_hint=False),
        structured_output=False,
    )
    async def recall(prompt: Annotated[str, Field(min_length=1)]) -> str:
        turn_id = "mcp-" + secrets.token_hex(8)
        result = await session.call("recall", {"turn_id": turn_id, "prompt": prompt})
        return _shown(str(result.context)) or "Nothing recalled for this prompt."

    return server


def _close_then_exit(session: DaemonSession) -> Callable[[int, FrameType | None], None]:
    """A handler of SIGTERM and SIGHUP: the session this server opened is closed, then the
    process ends. Codex ends its MCP servers with SIGTERM, which left the session open until
    orcad's idle expiry."""

    def handler(_signum: int, _frame: FrameType | None) -> None:
        session.close_session()
        os._exit(0)

    return handler


def run(args: argparse.Namespace) -> int:
    session = DaemonSession(args)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _close_then_exit(session))
    # stdout carries the MCP protocol itself, written by the transport on its own descriptor;
    # orcactl's terminal-safe wrappers are for a terminal.
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    try:
        server = build_server(session)
        run_stdio(server, take_over())
    finally:
        session.close_session()
        session.close()
    return 0
