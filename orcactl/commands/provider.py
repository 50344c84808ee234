"""`orcactl provider test [TEXT]`: one extraction with the configured provider, in-process.

No daemon is involved: the command reads the user config, builds the provider exactly as orcad
would, sends one redacted sample and prints the raw output, the facts the strict parser accepts
and the time taken. Exit status 0 when the output would commit, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import trio

from orcactl.arguments import (
    ignores_global_options,
    positive_seconds,
    text_or_stdin,
    utf8_text,
)
from orcactl.connect import EXIT_ERROR, EXIT_OK, EXIT_USAGE, CommandError, print_json
from orcad import limits
from orcad.capture.output import MalformedOutput, parse_extractor_output
from orcad.config import Config, load_config
from orcad.errors import StartupError
from orcad.paths import resolve_paths
from orcad.providers import Provider, ProviderConfigError, build_provider
from orcad.providers.base import ProviderError
from orcad.providers.openai_wire import shown_url
from orcad.secrets import redact, secret_kinds
from protocol.types import ExtractedFact

SAMPLE_SOURCE = (
    "user: Remember that this repository deploys with `make release`. "
    "I prefer concise status updates.\n\n"
    "assistant: Noted: deploys go through `make release`, and I will keep updates short."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    provider = subparsers.add_parser("provider", help="check the configured extraction provider")
    actions = provider.add_subparsers(dest="provider_command", metavar="ACTION", required=True)
    test = actions.add_parser(
        "test",
        help="run one extraction on a sample and show the raw output, facts and time",
        description=(
            "Run one extraction with the provider configured in config.toml (no daemon needed). "
            "TEXT is sent as a user message unless it already starts with 'user:' or "
            "'assistant:'; '-' reads it from stdin; without TEXT a built-in sample is used. "
            "The text is redacted first, as captured turns are."
        ),
    )
    test.add_argument("text", nargs="?", metavar="TEXT", type=utf8_text, help="the sample exchange")
    test.add_argument("--json", action="store_true", help="print one JSON object")
    test.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="S",
        help="deadline in seconds (default: timeout_s)",
    )
    test.set_defaults(run=run)
    ignores_global_options(test, "--socket", "--no-start")  # no daemon is asked


def sample_source(text: str | None) -> str:
    """The redacted, bounded source a captured turn with this text would produce."""
    if text is None:
        source = redact(SAMPLE_SOURCE)
    else:
        text = text_or_stdin(text, utf8_text).strip()
        if not text:
            raise CommandError("TEXT is empty", EXIT_USAGE)
        # redacted as a captured message is, before its role label: a rule that needs its
        # line to start with the name ("pin: 4821") must see it do so
        source = (
            redact(text) if text.startswith(("user:", "assistant:")) else f"user: {redact(text)}"
        )
    encoded = source.encode("utf-8")[: limits.SOURCE_MAX_BYTES]
    return encoded.decode("utf-8", errors="ignore")


def user_config() -> Config:
    try:
        return load_config(resolve_paths().config_file).config
    except StartupError as exc:
        raise CommandError(str(exc)) from None


def configured_provider() -> tuple[Config, Provider]:
    """The provider orcad would build: the offline one with the fact classifier over the
    configured recall model (loaded at its first sentence, as in the daemon)."""
    # numpy and the model's modules only for this command, not for every orcactl start
    from orcad.providers.fact_classifier import sentence_judge  # noqa: PLC0415
    from orcad.recall.embedding import Embeddings  # noqa: PLC0415

    config = user_config()
    judge = sentence_judge(config.extraction.provider, Embeddings.configured(config.recall))
    if judge is not None:  # loaded now, as the daemon has it loaded: not in the time shown
        judge.embeddings.load_blocking()
    try:
        return config, build_provider(config.extraction, os.environ, judge)
    except ProviderConfigError as exc:
        raise CommandError(f"cannot use provider {config.extraction.provider!r}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    try:
        config, provider = configured_provider()
    except CommandError as exc:
        if not args.json:
            raise
        # --json promises one JSON object: the same report, with nothing run
        print_json(
            {
                "provider": None,
                "model": None,
                "prompt_version": None,
                "source": None,
                "elapsed_s": None,
                "raw_output": None,
                "raw_output_cut_from": None,
                "facts": None,
                "refused": [],
                "error": str(exc),
            }
        )
        return exc.status
    source = sample_source(args.text)
    timeout_s = args.timeout if args.timeout is not None else config.extraction.timeout_s
    report: dict[str, Any] = {
        "provider": provider.name,
        # a command provider's model is its command line, which may carry a key: redacted as
        # orcad records it in provenance and shows it in `orcactl status`
        "model": redact(provider.model),
        "prompt_version": getattr(provider, "prompt_version", None),
        "source": source,
    }
    started = time.perf_counter()
    try:
        output = trio.run(_extract_once, provider, source, timeout_s)
    except ProviderError as exc:
        report.update(
            elapsed_s=time.perf_counter() - started,
            raw_output=None,
            raw_output_cut_from=None,
            facts=None,
            refused=[],
        )
        report["error"] = exc.message + _hint(exc.message, config, timeout_s)
        return _finish(report, args.json)
    # a JSON answer can carry a lone surrogate (an escaped \ud800) that no output can encode:
    # shown as that escape; the parser below says why such output fails
    shown = output.encode("utf-8", "backslashreplace").decode("utf-8")
    report.update(elapsed_s=time.perf_counter() - started, **_bounded(shown))
    try:
        facts = parse_extractor_output(output)
    except MalformedOutput as exc:
        report.update(
            facts=None, refused=[], error=f"the output would be a failed attempt: {exc.reason}"
        )
    else:
        report.update(_sorted_facts(facts), error=None)
    return _finish(report, args.json)


def _bounded(shown: str) -> dict[str, Any]:
    """The raw output as far as orcad would take it (EXTRACTOR_OUTPUT_MAX_BYTES), cut between
    characters, with its whole size in bytes when it was cut (else None)."""
    encoded = shown.encode("utf-8")
    if len(encoded) <= limits.EXTRACTOR_OUTPUT_MAX_BYTES:
        return {"raw_output": shown, "raw_output_cut_from": None}
    kept = encoded[: limits.EXTRACTOR_OUTPUT_MAX_BYTES].decode("utf-8", "ignore")
    return {"raw_output": kept, "raw_output_cut_from": len(encoded)}


def _sorted_facts(facts: list[ExtractedFact]) -> dict[str, list[dict[str, str]]]:
    """The facts orcad would keep, and those it would refuse as secrets (by kind, never the
    value: the merge drops them, so a model that writes keys into facts keeps nothing)."""
    kept, refused = [], []
    for fact in facts:
        kinds = secret_kinds(fact.fact)
        if kinds:
            refused.append({"category": fact.category, "kinds": kinds})
        else:
            kept.append({"category": fact.category, "fact": fact.fact})
    return {"facts": kept, "refused": refused}


async def _extract_once(provider: Provider, source: str, timeout_s: float) -> str:
    return await provider.extract(source, deadline=trio.current_time() + timeout_s)


def _hint(message: str, config: Config, timeout_s: float) -> str:
    extraction = config.extraction
    if extraction.provider == "openai" and " was silent for more than " in message:
        return (
            f"\nA server quiet for longer (reading a long prompt before its first token, "
            f"loading its model) needs a longer extraction.openai.idle_timeout_s "
            f"(now {extraction.openai.idle_timeout_s:g} s)."
        )
    if message.startswith("timed out: no complete answer from ") or (
        extraction.provider == "command" and " did not finish within " in message
    ):
        return (
            f"\nA slower model needs a longer extraction.timeout_s (now "
            f"{extraction.timeout_s:g} s; this test gave it {timeout_s:g} s: --timeout S "
            f"tries another)."
        )
    if extraction.provider == "openai" and "cannot connect" in message:
        return (
            f"\nIs the model server running? extraction.openai.base_url is "
            f"{shown_url(config.extraction.openai.base_url)}"
        )
    if config.extraction.provider == "command" and "cannot run" in message:
        return (
            "\nCheck extraction.command.argv: its first word must be a program on PATH or the "
            "absolute path of one."
        )
    return ""


def _finish(report: dict[str, Any], as_json: bool) -> int:
    status = EXIT_OK if report["error"] is None else EXIT_ERROR
    if as_json:
        print_json(report)
        return status
    model = f" ({report['model']})" if report["model"] else ""
    print(f"provider: {report['provider']}{model}, prompt {report['prompt_version']}")
    print(f"time: {report['elapsed_s']:.3f} s")
    if report["raw_output"] is not None:
        print("raw output:")
        for line in (report["raw_output"] or "(empty)").splitlines() or ["(empty)"]:
            print(f"  {line}")
        if report.get("raw_output_cut_from") is not None:
            print(
                f"  [cut: the output is {report['raw_output_cut_from']} bytes, over the "
                f"{limits.EXTRACTOR_OUTPUT_MAX_BYTES}-byte limit; only its first "
                f"{limits.EXTRACTOR_OUTPUT_MAX_BYTES} bytes are shown]"
            )
    if report["facts"] is not None:
        print(f"parsed facts: {len(report['facts'])}" + ("" if report["facts"] else " (NOTHING)"))
        for fact in report["facts"]:
            print(f"  {fact['category']:<9} {fact['fact']}")
    if report["refused"]:
        print(f"refused as secrets (orcad would not keep them): {len(report['refused'])}")
        for fact in report["refused"]:
            print(f"  {fact['category']:<9} ({fact['kinds']})")
    if report["error"] is not None:
        print(f"orcactl: {report['error']}", file=sys.stderr)
    return status
