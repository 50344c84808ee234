"""The hook process: read the agent's JSON on stdin, call orcad, answer on stdout, exit.

A hook never breaks the agent. Whatever goes wrong (orcad down and not startable in time, an
error answer, a transcript it cannot read) it answers with no context, writes one line on
stderr, records the problem for `orcactl status` / `doctor`, and exits 0. Input it cannot read
exits 1, which both agents treat as a non-blocking error; it never exits 2 (their "block").
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from typing import TYPE_CHECKING, NamedTuple

from orcactl.hooks.common import HookContext, HookInputError
from orcactl.hooks.failures import abandon_record, record_failure, recording
from orcactl.hooks.wire import DaemonError, Unreachable, socket_path
from orcad.control_characters import escape_to_one_line

if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

AGENTS = ("claude-code", "codex")
INPUT_MAX_BYTES = 16 * 1024 * 1024
EXIT_OK = 0
EXIT_BAD_INPUT = 1  # non-blocking for both agents (2 would block the prompt or the stop)
# Seconds a hook may take, within the timeouts `orcactl integrate` writes for each event.
BUDGET_S = {"SessionStart": 8.0, "UserPromptSubmit": 8.0, "SessionEnd": 5.0}
# an agent that gives an event less time than that: Codex ends SessionEnd after 3 s
AGENT_BUDGET_S = {("codex", "SessionEnd"): 2.5}
DEFAULT_BUDGET_S = 20.0  # Stop: reading a transcript and making the job durable
# Of its budget, how much a hook waits for the agent to finish writing and close stdin.
INPUT_SHARE = 0.5
# How long the watchdog's own record waits for the problem log's lock: the hook's time is spent,
# and Codex ends SessionEnd half a second after its budget.
WATCHDOG_LOCK_TIMEOUT_S = 0.2
# Set to 1 in the environment of an extraction command: its own agent run must not be captured.
RECURSION_GUARD = "ORCA_EXTRACTION"

USAGE = (
    "usage: orcactl hook {claude-code|codex} EVENT [--socket PATH] [--home DIR] "
    "[--config-dir DIR] [--no-start] < hook-input.json"
)


def extraction_run() -> bool:
    """Whether orca's `command` provider started this process (it sets ORCA_EXTRACTION=1, as
    README says); any other value, 0 or empty, is not an extraction run."""
    return os.environ.get(RECURSION_GUARD) == "1"


def _agent_module(agent: str) -> ModuleType:
    if agent == "claude-code":
        from orcactl.hooks import claude_code  # noqa: PLC0415

        return claude_code
    from orcactl.hooks import codex  # noqa: PLC0415

    return codex


class HookArguments(NamedTuple):
    agent: str
    event: str
    socket: str | None
    start: bool
    home: str | None  # --home: ORCA_HOME for this hook (and an orcad it starts)
    config_dir: str | None  # --config-dir: ORCA_CONFIG_DIR likewise


# the options that take a value, and what they call it
VALUE_OPTIONS = {"--socket": "PATH", "--home": "DIR", "--config-dir": "DIR"}


def _parse_args(argv: list[str]) -> HookArguments:
    positional: list[str] = []
    values: dict[str, str] = {}
    took: list[tuple[str, str]] = []  # (option, "agent" or "event"): a hook's word it may have
    start = True
    items = iter(argv)
    for item in items:
        name, equals, value = item.partition("=")
        if name in VALUE_OPTIONS:
            what = VALUE_OPTIONS[name]
            if not equals:
                given = next(items, None)
                # `--home --no-start`: the next option is no path (it was taken for one)
                if given is None or given.startswith("--"):
                    raise HookInputError(f"{name} needs a {what}")
                if not given:  # `--home "$UNSET"`: not the default in disguise
                    raise HookInputError(f'{name} needs a {what}, and "" gives none')
                value = given
                took.append((name, "event" if positional else "agent"))
            elif not value:  # as orcactl's own --socket: not the default in disguise
                raise HookInputError(f"{name} needs a {what}, and {name}= gives none")
            values[name] = value
        elif item == "--no-start":
            start = False
        elif item == "--json":
            continue  # accepted as by every orcactl command: the answer is JSON anyway
        elif item.startswith("-"):
            raise HookInputError(f"unknown option {item}")
        else:
            positional.append(item)
    for name, word in took:
        if _option_took_a_word(word, values[name], positional):
            raise HookInputError(
                f"{name} took {values[name]!r} as its {VALUE_OPTIONS[name]}, leaving the hook "
                f"without its {word}; give {name} a {VALUE_OPTIONS[name]} "
                f"({USAGE.removeprefix('usage: ')})"
            )
    if len(positional) != 2 or positional[0] not in AGENTS:
        raise HookInputError(USAGE)
    return HookArguments(
        positional[0],
        positional[1],
        values.get("--socket"),
        start,
        values.get("--home"),
        values.get("--config-dir"),
    )


def _option_took_a_word(took: str, value: str, positional: list[str]) -> bool:
    """Whether a hook is one word short because an option took it: the agent in `orcactl hook
    --socket codex Stop`, the event in `orcactl hook codex --socket Stop`. Named as such
    rather than with a bare usage line."""
    if len(positional) != 1:
        return False
    if took == "agent":
        return value in AGENTS and positional[0] not in AGENTS
    return positional[0] in AGENTS


def pin_paths(home: str | None, config_dir: str | None) -> None:
    """ORCA_HOME and ORCA_CONFIG_DIR as the options give them, absolute, for everything this
    process reads or starts (an orcad started here serves that memory)."""
    for name, option, value in (
        ("ORCA_HOME", "--home", home),
        ("ORCA_CONFIG_DIR", "--config-dir", config_dir),
    ):
        if value:
            try:
                os.environ[name] = os.path.abspath(os.path.expanduser(value))
            except OSError:  # relative, in a directory since removed
                raise HookInputError(
                    f"{option} {value} is relative and the current directory is gone"
                ) from None


_said = False  # the hook has written its line on stderr


def _say(line: str) -> None:
    """One line for the agent's log on stderr. Never on stdout, which holds only the answer
    (print(file=None), what a closed stderr gives, would write there), and a stderr that fails
    does not stop the answer. Control characters and newlines are escaped: the line may quote
    whatever answered on the socket, and the agent may show its hooks' stderr on a terminal."""
    global _said  # noqa: PLW0603  (read by the watchdog, a signal handler)
    _said = True
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(f"orcactl hook: {escape_to_one_line(line)}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _print_answer(agent: str, event: str, answer: dict[str, Any] | None) -> None:
    """The answer on stdout. One that cannot be written (the agent closed the pipe, a full
    disk) is a problem said and recorded as any other: the context it held is lost."""
    signal.setitimer(signal.ITIMER_REAL, 0)  # answering now: the watchdog must not answer too
    if answer is None:
        return
    if sys.stdout is None:  # started with stdout closed (orcactl.entry put /dev/null there)
        if answer:  # an empty answer ({}, Codex's) loses nothing
            message = "cannot write the answer: the hook was started with stdout closed"
            _say(f"orca memory lost: {message}")
            record_failure(agent, event, "output", message)
        return
    # ASCII escapes: valid JSON whatever the locale's encoding and whatever the daemon sent
    try:
        sys.stdout.write(json.dumps(answer, ensure_ascii=True) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        message = f"cannot write the answer: {getattr(exc, 'strerror', None) or exc}"
        _say(f"orca memory lost: {message}")
        record_failure(agent, event, "output", message)
        _drop_stdout()


def _drop_stdout() -> None:
    """Nothing more for a stdout that failed: the buffered answer is not written again as
    Python exits, which would print its own error and exit 120."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    sys.stdout = None


def _arm_watchdog(
    agent: str, event: str, answer: dict[str, Any] | None, budget: float, started: float
) -> None:
    """Whatever blocks (a peer that trickles bytes, a file that never ends), the hook answers
    with no context and exits 0 when its budget, from `started` (time.monotonic), is spent,
    before the agent's own timeout."""

    def expire(_signum: int, _frame: object) -> None:
        # A signal handler: it may come in the middle of anything, writing stderr, importing a
        # module, recording a problem under its lock. Nothing it meets may escape as a traceback
        # or keep it past the agent's timeout: the answer first, then the line unless the hook
        # said one, the record unless one is under way, and exit 0 whatever happens.
        try:
            if answer is not None:
                with contextlib.suppress(OSError):  # stdout closed: nobody reads an answer
                    os.write(1, (json.dumps(answer) + "\n").encode())
            message = f"gave up after its {budget:g} s budget"
            if not _said:
                with contextlib.suppress(OSError):
                    line = f"orcactl hook: {escape_to_one_line(f'orca memory skipped: {message}')}"
                    os.write(2, (line + "\n").encode("utf-8", "replace"))
            if recording():
                abandon_record()
            else:
                record_failure(
                    agent, event, "timeout", message, lock_timeout=WATCHDOG_LOCK_TIMEOUT_S
                )
        finally:
            os._exit(EXIT_OK)

    signal.signal(signal.SIGALRM, expire)
    # a signal mask is inherited: an agent's thread that blocks SIGALRM and starts the hook
    # would hold the watchdog off for good
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGALRM])
    signal.setitimer(signal.ITIMER_REAL, max(0.01, started + budget - time.monotonic()))


def process_age(most: float) -> float:
    """Seconds since this process was started, at most `most`: the agent's timeout runs from
    then, and on busy cores Python may take a second and more to reach the hook. 0 where the
    system does not say (Linux's /proc gives the start in clock ticks since boot)."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        ticks = int(fields[19])  # starttime: field 22, the 20th after the command's name
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
    return min(max(age, 0.0), most)


def _read_input(deadline: float) -> dict[str, Any]:
    """The hook input, read until the agent closes stdin, within `deadline` (monotonic)."""
    if sys.stdin is None:  # started with stdin closed
        raise HookInputError("the hook has no stdin to read its input from")
    descriptor = sys.stdin.fileno()
    chunks: list[bytes] = []
    size = 0
    while True:
        # past the deadline, what the agent has written (and its end) is still read: a hook slow
        # to start finds its whole input waiting
        left = max(0.0, deadline - time.monotonic())
        if not select.select([descriptor], [], [], left)[0]:
            raise HookInputError("the agent did not finish writing the hook input (stdin open)")
        chunk = os.read(descriptor, 1 << 16)
        if not chunk:
            break
        size += len(chunk)
        if size > INPUT_MAX_BYTES:
            raise HookInputError(f"hook input over {INPUT_MAX_BYTES >> 20} MiB")
        chunks.append(chunk)
    try:
        payload = json.loads(b"".join(chunks))
    except RecursionError:
        raise HookInputError("hook input is nested too deeply") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's own advice is no use to a user
            raise HookInputError(
                f"hook input holds a number of over {sys.get_int_max_str_digits()} digits"
            ) from None
        raise HookInputError(f"hook input is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise HookInputError("hook input is not a JSON object")
    return payload


def _check_event(payload: dict[str, Any], event: str, events: dict[str, Any]) -> None:
    """The input's own `hook_event_name`, which both agents send, names an event this hook
    handles otherwise (a `Stop` input given to the `UserPromptSubmit` hook): a hook registered
    under the wrong event, refused rather than read as the wrong thing."""
    named = payload.get("hook_event_name")
    if isinstance(named, str) and named in events and events[named] is not events[event]:
        raise HookInputError(f"the hook input is for {named}, not {event}")


def run(argv: list[str]) -> int:
    if any(item in ("-h", "--help") for item in argv):
        print(USAGE)
        print("Reads the agent's hook JSON on stdin; answers in the agent's hook output format.")
        return EXIT_OK
    try:
        agent, event, explicit_socket, start, home, config_dir = _parse_args(argv)
        pin_paths(home, config_dir)
    except HookInputError as exc:
        _say(str(exc))
        return EXIT_BAD_INPUT
    module = _agent_module(agent)
    handler = module.EVENTS.get(event)
    if handler is None:
        known = ", ".join(module.EVENTS)
        _say(f"{agent} has no event {event!r} (known: {known})")
        return EXIT_BAD_INPUT
    if extraction_run():
        _print_answer(agent, event, module.empty_answer(event))  # an extraction run: never captured
        return EXIT_OK
    budget = AGENT_BUDGET_S.get((agent, event), BUDGET_S.get(event, DEFAULT_BUDGET_S))
    started = time.monotonic() - process_age(budget * INPUT_SHARE)
    _arm_watchdog(agent, event, module.empty_answer(event), budget, started)
    try:
        payload = _read_input(started + budget * INPUT_SHARE)
    except (HookInputError, OSError) as exc:
        _say(str(exc))
        record_failure(agent, event, "bad_input", str(exc))
        _print_answer(agent, event, module.empty_answer(event))
        return EXIT_BAD_INPUT
    # a little before the watchdog, so that an answer in time is the hook's own
    deadline = started + budget * 0.9
    try:
        _check_event(payload, event, module.EVENTS)
        chosen = bool(explicit_socket or os.environ.get("ORCA_SOCKET"))
        context = HookContext(
            agent, event, socket_path(explicit_socket), deadline, start, chosen=chosen
        )
        answer = handler(payload, context)
    except HookInputError as exc:
        _say(str(exc))
        record_failure(agent, event, "bad_input", str(exc))
        _print_answer(agent, event, module.empty_answer(event))
        return EXIT_BAD_INPUT
    except (Unreachable, DaemonError, OSError, ValueError) as exc:
        kind = exc.kind if isinstance(exc, DaemonError) else "unreachable"
        if isinstance(exc, (OSError, ValueError)) and not isinstance(exc, Unreachable):
            kind = "connection"
        _say(f"orca memory skipped: {exc}")
        record_failure(agent, event, kind, str(exc))
        answer = module.empty_answer(event)
    except Exception as exc:  # a hook never breaks the agent, nor shows a traceback
        # the type only: an unexpected error's text might quote the turn
        _say(f"orca memory skipped: {type(exc).__name__}")
        record_failure(agent, event, "internal", type(exc).__name__)
        answer = module.empty_answer(event)
    _print_answer(agent, event, answer)
    return EXIT_OK
