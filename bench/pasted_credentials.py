"""Credentials as people type them to an agent: how many the secret detector redacts, and how
many the offline extractor would still keep in a fact.

Two sets (bench/pasted_credentials.tsv), each written by an author who never read the detector
or the extractor, nor the other set: 220 messages that mention a credential (a weak password, a
PIN, a door code, a token, a connection string; half of them asking to remember it, half in
passing inside a task), each with the exact value that must never be stored, and 120 messages
about access and security that hold no secret (SSO, VPN, where secrets are kept, where the
router is), which a memory should keep. Each set is split in two, alternate lines: rules were
written looking at the `dev` halves only; the `held` halves were only measured.

What it prints, per half:
- leaks whose value survives `redact` (it would then sit in the job's source on disk, and in a
  deliberate record or a `remember` fact saved from that text);
- leaks whose value the extractor keeps in a fact (rules and fact classifier, as the daemon runs
  by default; and the rules alone), after redaction, as the daemon extracts;
- benign messages the detector redacts (false positives) and those the extractor keeps a fact of.

Run: python -m bench.pasted_credentials [--set first|second] [--half dev|held] [--misses] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.heuristic_eval import builtin_judge, facts_of
from orcad.providers.fact_classifier import SentenceJudge
from orcad.secrets import redact

DATA = Path(__file__).with_name("pasted_credentials.tsv")
SETS = ("first", "second")
HALVES = ("dev", "held")


def load(which: str, half: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(value, message) leaks and (fact, message) benign messages of one set's half."""
    leaks: list[tuple[str, str]] = []
    benign: list[tuple[str, str]] = []
    lines = DATA.read_text(encoding="utf-8").splitlines()[1:]
    for line in lines:
        kind, row_set, row_half, label, message = line.split("\t")
        if (row_set, row_half) == (which, half):
            (leaks if kind == "leak" else benign).append((label, message))
    return leaks, benign


def evaluate(
    leaks: list[tuple[str, str]], benign: list[tuple[str, str]], judge: SentenceJudge
) -> dict[str, object]:
    survived: list[str] = []
    stored: list[str] = []
    stored_by_rules: list[str] = []
    for value, message in leaks:
        redacted = redact(message)
        if value in redacted:
            survived.append(message)
        if any(value in fact for fact in facts_of(redacted, judge)):
            stored.append(message)
        if any(value in fact for fact in facts_of(redacted)):
            stored_by_rules.append(message)
    redacted_benign = [message for _, message in benign if redact(message) != message]
    kept_benign = [message for _, message in benign if facts_of(redact(message), judge)]
    return {
        "leaks": len(leaks),
        "value_survives_redaction": survived,
        "value_kept_in_a_fact": stored,
        "value_kept_by_the_rules_alone": stored_by_rules,
        "benign": len(benign),
        "benign_redacted": redacted_benign,
        "benign_kept": len(kept_benign),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=SETS, help="one set (default: both)")
    parser.add_argument("--half", choices=HALVES, help="one half (default: both)")
    parser.add_argument("--misses", action="store_true", help="list every message counted")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    judge = builtin_judge()
    results = {
        f"{which} {half}": evaluate(*load(which, half), judge)
        for which in ([args.set] if args.set else SETS)
        for half in ([args.half] if args.half else HALVES)
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for half, result in results.items():
        leaks, benign = result["leaks"], result["benign"]
        print(f"{half}: {leaks} messages with a credential, {benign} without one")
        for key, total in (
            ("value_survives_redaction", leaks),
            ("value_kept_in_a_fact", leaks),
            ("value_kept_by_the_rules_alone", leaks),
            ("benign_redacted", benign),
        ):
            found = result[key]
            assert isinstance(found, list) and isinstance(total, int)
            print(f"  {key.replace('_', ' ')}: {len(found)} ({len(found) / total:.1%})")
            if args.misses:
                for message in found:
                    print(f"    {message!r}")
        print(f"  benign kept as a fact: {result['benign_kept']} of {benign}")


if __name__ == "__main__":
    main()
