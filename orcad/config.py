"""config.toml: every key of ARCHITECTURE.md parsed and validated.

Unknown keys are reported (log and daemon.status), never silently ignored. A file that does not
parse, or a key with a bad value, is a startup error naming the key.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import msgspec

from orcad import limits
from orcad.errors import StartupError
from orcad.regular_files import NotARegularFile, read_regular_file

PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, le=limits.CONFIG_SECONDS_MAX)]


class OpenAIConfig(msgspec.Struct, frozen=True, kw_only=True):
    base_url: str = "http://127.0.0.1:11434/v1"
    model: str = "llama3.2"
    api_key_env: str = "OPENAI_API_KEY"
    connect_timeout_s: PositiveSeconds = 10.0
    idle_timeout_s: PositiveSeconds = 60.0  # longest silence between streamed chunks
    stream: bool = True
    temperature: Annotated[float, msgspec.Meta(ge=0, le=2)] = (
        0.0  # low: the output format is strict
    )


class CommandConfig(msgspec.Struct, frozen=True, kw_only=True):
    argv: Annotated[list[str], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["llm", "-m", "gpt-4o-mini"]
    )


class ExtractionConfig(msgspec.Struct, frozen=True, kw_only=True):
    provider: Literal["heuristic", "openai", "command"] = "heuristic"
    workers: Annotated[int, msgspec.Meta(ge=0, le=64)] = 2
    lease_s: Annotated[float, msgspec.Meta(ge=limits.LEASE_S_MIN, le=limits.CONFIG_SECONDS_MAX)] = (
        60.0
    )
    timeout_s: PositiveSeconds = 120.0
    max_retries: Annotated[int, msgspec.Meta(ge=0, le=100)] = limits.DEFAULT_MAX_RETRIES
    reschedule_s: PositiveSeconds = limits.DEFAULT_RESCHEDULE_S
    retry_base_s: Annotated[float, msgspec.Meta(ge=0, le=limits.CONFIG_SECONDS_MAX)] = (
        limits.DEFAULT_RETRY_BASE_S  # 0: at once
    )
    retry_max_s: PositiveSeconds = limits.DEFAULT_RETRY_MAX_S
    openai: OpenAIConfig = OpenAIConfig()
    command: CommandConfig = CommandConfig()


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    max_message_bytes: Annotated[int, msgspec.Meta(ge=1024)] = limits.DEFAULT_MAX_MESSAGE_BYTES
    max_connections: Annotated[int, msgspec.Meta(ge=1)] = limits.DEFAULT_MAX_CONNECTIONS
    idle_timeout_s: PositiveSeconds = limits.DEFAULT_IDLE_TIMEOUT_S
    send_timeout_s: PositiveSeconds = limits.DEFAULT_SEND_TIMEOUT_S
    request_line_timeout_s: PositiveSeconds = limits.DEFAULT_REQUEST_LINE_TIMEOUT_S
    max_buffered_bytes: Annotated[int, msgspec.Meta(ge=1024)] = limits.DEFAULT_MAX_BUFFERED_BYTES


class SessionsConfig(msgspec.Struct, frozen=True, kw_only=True):
    idle_expiry_s: PositiveSeconds = limits.DEFAULT_SESSION_IDLE_EXPIRY_S


class EmbeddingEndpointConfig(msgspec.Struct, frozen=True, kw_only=True):
    base_url: str = ""  # an OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: PositiveSeconds = 0.5  # per call; recall is lexical when it runs out


# the values of `[recall] embedding` that name no directory
EMBEDDING_NAMES = ("builtin", "static", "none", "endpoint")


class RecallConfig(msgspec.Struct, frozen=True, kw_only=True):
    # one of EMBEDDING_NAMES, or the absolute path (`~` allowed) of a local model directory
    embedding: Annotated[str, msgspec.Meta(min_length=1)] = "builtin"
    endpoint: EmbeddingEndpointConfig = EmbeddingEndpointConfig()


class Config(msgspec.Struct, frozen=True, kw_only=True):
    auto_memory: bool = True
    trusted_projects: list[str] = []
    extraction: ExtractionConfig = ExtractionConfig()
    server: ServerConfig = ServerConfig()
    sessions: SessionsConfig = SessionsConfig()
    recall: RecallConfig = RecallConfig()


class ProjectConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What a trusted project's `.orca/config.toml` may set."""

    auto_memory: bool | None = None


class LoadedConfig(msgspec.Struct, frozen=True, kw_only=True):
    config: Config
    path: str | None  # None when no file exists and defaults apply
    unknown_keys: list[str]


# msgspec ends a message with where it failed (` - at `$.a.b[0]``) and names a missing or
# unknown field whole between backticks; a name a client chose may hold backticks itself, so
# both are matched from the ends of the message, never up to the first backtick.
_AT_PATH = re.compile(r" - at `\$\.?([^`]*)`\Z")
_FIELD = re.compile(r"\AObject (?:contains unknown|missing required) field `(.*)`\Z", re.DOTALL)


def explain_validation_error(
    error: msgspec.ValidationError, data: object = None
) -> tuple[str, str]:
    """The dotted path of the field a msgspec validation error is about (`` for the root), and
    the message without its location. With the `data` that failed, an unknown top-level name
    that only looks like it has a location (`` a` - at `$.b ``) is named whole."""
    message = str(error)
    whole = _FIELD.match(message)
    if whole and isinstance(data, dict) and whole.group(1) in data:
        return whole.group(1), message
    at = _AT_PATH.search(message)
    reason, path = (message[: at.start()], at.group(1)) if at else (message, "")
    named = _FIELD.match(reason)
    if named:
        path = f"{path}.{named.group(1)}" if path else named.group(1)
    return path, reason


def find_unknown_keys(
    data: dict[str, Any], struct: type[msgspec.Struct], prefix: str = ""
) -> list[str]:
    """Keys in `data` that `struct` does not define, as dotted paths, recursing into tables."""
    unknown: list[str] = []
    fields = {f.name: f for f in msgspec.structs.fields(struct)}
    for key, value in data.items():
        path = f"{prefix}{key}"
        field = fields.get(key)
        if field is None:
            unknown.append(path)
        elif (
            isinstance(value, dict)
            and isinstance(field.type, type)
            and issubclass(field.type, msgspec.Struct)
        ):
            unknown.extend(find_unknown_keys(value, field.type, f"{path}."))
    return unknown


def likely_meant(unknown: str, struct: type[msgspec.Struct] = Config) -> str | None:
    """The known key an unknown dotted key is most likely a misspelling of (`auto_memroy`:
    `auto_memory`), among the keys of the same table; None when none is close."""
    *tables, name = unknown.split(".")
    kind: Any = struct
    for table in tables:
        fields = {f.name: f.type for f in msgspec.structs.fields(kind)}
        kind = fields.get(table)
        if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
            return None
    known = [f.name for f in msgspec.structs.fields(kind)]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return ".".join([*tables, close[0]]) if close else None


def _choices(struct: type[msgspec.Struct], key: str) -> list[str]:
    """The values a key of `struct` given as a dotted path may take, quoted as TOML writes
    them, when it takes only a few named ones (a Literal); else none."""
    kind: Any = struct
    for name in key.split("."):
        if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
            return []
        fields = {f.name: f.type for f in msgspec.structs.fields(kind)}
        if name not in fields:
            return []
        kind = fields[name]
    if get_origin(kind) is not Literal:
        return []
    return [f'"{value}"' for value in get_args(kind) if isinstance(value, str)]


def parse_config(
    text: str, source: str, struct: type[msgspec.Struct] = Config
) -> tuple[Any, list[str]]:
    """Parse TOML text into `struct`; return it with the unknown keys. Raises StartupError."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StartupError(f"{source}: not valid TOML: {exc}") from exc
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        raise StartupError(
            f"{source}: not valid TOML: arrays or tables nested too deeply"
        ) from None
    unknown = find_unknown_keys(data, struct)
    try:
        parsed = msgspec.convert(data, struct, strict=True)
    except msgspec.ValidationError as exc:
        key, reason = explain_validation_error(exc, data)
        choices = _choices(struct, key)
        if choices and reason.startswith("Invalid enum value"):
            reason += f"; it must be one of {', '.join(choices)}"
        raise StartupError(f"{source}: key `{key or '(top level)'}`: {reason}") from exc
    if isinstance(parsed, Config):
        _check_trusted_projects(parsed.trusted_projects, source)
        _check_embedding(parsed.recall.embedding, source)
        # a table the choices do not read (one left from another provider) stops nothing
        if parsed.extraction.provider == "command":
            _check_command_program(parsed.extraction.command.argv[0], source)
        if parsed.extraction.provider == "openai":
            _check_key_variable("extraction.openai.api_key_env", parsed.extraction.openai, source)
        if parsed.recall.embedding == "endpoint":
            _check_key_variable("recall.endpoint.api_key_env", parsed.recall.endpoint, source)
    return parsed, unknown


def _check_trusted_projects(roots: list[str], source: str) -> None:
    """Each trusted root must be a path the daemon can compare with a project's root: absolute
    (a relative one would be resolved against orcad's own working directory) and without a NUL
    (which no path holds, and which resolving a path refuses). Raises StartupError."""
    for root in roots:
        if "\0" in root:
            raise StartupError(
                f"{source}: key `trusted_projects`: {root!r} holds a NUL character, which no "
                "path can"
            )
        if not Path(root).is_absolute():
            raise StartupError(
                f"{source}: key `trusted_projects`: {root!r} is not an absolute path"
            )


def _check_embedding(setting: str, source: str) -> None:
    """A model directory must be absolute once `~` is expanded: a relative one would be looked
    up from orcad's working directory, which is `/` when orcactl or a service manager starts it
    and wherever the user was when they started it by hand, so one config would load the model
    or not depending on how orcad started (and `orcactl doctor` would look elsewhere again).
    A misspelt name (`Builtin`) is one such relative path. Raises StartupError."""
    if setting in EMBEDDING_NAMES:
        return
    problem = None
    if "\0" in setting:
        problem = "holds a NUL character, which no path can"
    else:
        try:
            if not Path(setting).expanduser().is_absolute():
                problem = "is not an absolute path"
        except RuntimeError:  # `~name` of no user this system knows
            problem = "names a home directory this system does not know"
    if problem is not None:
        names = ", ".join(f'"{name}"' for name in EMBEDDING_NAMES)
        raise StartupError(
            f"{source}: key `recall.embedding`: {setting!r} is none of {names}, and {problem}; "
            "give a model directory as an absolute path (or one starting with ~/)"
        )


# what a shell can export: the name of the variable that holds an API key
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_key_variable(
    key: str, settings: OpenAIConfig | EmbeddingEndpointConfig, source: str
) -> None:
    """api_key_env must name an environment variable, or be empty for none (a server on
    loopback needs no key). The value is never quoted: the likeliest mistake is the key itself
    pasted there (`sk-...`), which would otherwise be shown in every message about the variable
    it is not. Raises StartupError."""
    if settings.api_key_env and _VARIABLE_NAME.fullmatch(settings.api_key_env) is None:
        raise StartupError(
            f"{source}: key `{key}` is not the name of a variable (letters, digits and _, not "
            "starting with a digit); it names the environment variable that holds the API key, "
            "never the key itself"
        )


def _check_command_program(program: str, source: str) -> None:
    """The command provider's program is a name looked up on PATH or an absolute path. A
    relative path would be run from orcad's working directory (`/` when orcactl or a service
    manager starts it), though `orcactl provider test` and `doctor` find it from theirs, and no
    shell expands a `~`. Raises StartupError."""
    if program.startswith("~"):
        problem = "starts with ~, which no shell expands here"
    elif "/" in program and not program.startswith("/"):
        problem = "is a relative path, which would be run from orcad's working directory"
    else:
        return
    raise StartupError(
        f"{source}: key `extraction.command.argv`: its program {program!r} {problem}; give "
        "its absolute path, or a name found on PATH"
    )


def read_config_text(path: Path) -> str:
    """The text of a config file. A path that is not a regular file (a FIFO, a device, a
    directory) is refused with StartupError without waiting: reading a FIFO waits for a writer
    that may never come; so is one larger than CONFIG_FILE_MAX_BYTES, without reading it
    whole, and so is one that is not UTF-8, naming its line, and a symbolic link that leads
    nowhere. Raises FileNotFoundError and OSError as reading does."""
    limit = limits.CONFIG_FILE_MAX_BYTES
    try:
        data = read_regular_file(path, limit + 1)
    except NotARegularFile:
        raise StartupError(f"{path}: not a regular file") from None
    except FileNotFoundError:
        # a link kept for a file elsewhere (a dotfiles checkout) means settings were meant:
        # running on the defaults instead would turn automatic memory back on unsaid
        if not path.is_symlink():
            raise
        raise StartupError(
            f"{path}: a symbolic link to {os.readlink(path)}, which does not exist (a drive not "
            "mounted?); create what it names, or remove the link to use the defaults"
        ) from None
    if len(data) > limit:
        raise StartupError(f"{path}: larger than {limit} bytes, which no config file needs")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # its own words give a byte offset, not a line
        line = data.count(b"\n", 0, exc.start) + 1
        raise StartupError(
            f"{path}: not UTF-8 text, as TOML must be: line {line} holds the byte "
            f"0x{data[exc.start]:02x} (saved in another encoding, such as Latin-1?)"
        ) from None
    # a byte order mark (some Windows editors write one) is no part of TOML: read past it
    return text.removeprefix("\ufeff")


def load_config(path: Path) -> LoadedConfig:
    """Read the user config; a missing file means defaults."""
    try:
        text = read_config_text(path)
    except FileNotFoundError:
        return LoadedConfig(config=Config(), path=None, unknown_keys=[])
    except (OSError, UnicodeDecodeError) as exc:
        raise StartupError(f"{path}: cannot read: {exc}") from exc
    config, unknown = parse_config(text, str(path))
    return LoadedConfig(config=config, path=str(path), unknown_keys=unknown)
