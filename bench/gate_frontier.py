"""How far the gate can go: the trade between "other words" facts found and unrelated prompts
left empty that every setting of the gate makes on labelled sets, and how many sets any
setting brings to all of recall's targets.

In process, as bench/calibrate_recall.py ranks (the same candidates, with the model's own
lexical weight and floor): every setting of the gate, `gate + unrelated_weight x f(P) -
project_weight x closeness to the nearest project prompt`, with or without a lexical gate, over
a grid wider than the calibration's. For each share of unrelated prompts left empty (the mean
over the sets of the lower of the two parts), it prints the most "other words" facts any
setting finds (the mean over the sets and both parts) while it finds at least 95% of the
"shares words" facts in both parts of every set; and for each setting, how many sets meet all
of the targets the gate decides (in both parts: shares words >= 0.95, other words >= 0.75,
unrelated prompts left empty >= 0.85; stale-first is the ranking's). The model's own setting is
placed on the same scale, with the probability itself as recall uses it. f is the probability
(`--form linear`, as recall computes the gate), or its logit (clipped to [-4, 6] and divided
by 4) or its square root, to see whether another shape of the gate would trade better.

It chooses nothing: it shows whether a setting of the gate could meet the targets the
calibration's choice misses (docs/recall.md, "How far the gate can go"). Each set takes about
ten seconds to prepare, and the grid a few more.

    .venv/bin/python -m bench.gate_frontier [--sets main,fresh,...] [--form linear] [--json]
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as `python bench/<name>.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.calibrate_recall import PROJECT_WEIGHTS, Outcomes, gather
from orcad.recall.embedding import load_embedder
from orcad.recall.local_models import BUILTIN_DIR
from orcad.recall.prompt_gate import (
    PROJECT_PROMPTS,
    UNRELATED_PROMPTS,
    GateReferences,
    read_prompts,
)

# every labelled set but the newest, which judges changes rather than showing what they could do
DEFAULT_SETS = "main,fresh,check,fourth,fifth,sixth,seventh,eighth"
TARGETS = {"shares": 0.95, "other": 0.75, "none": 0.85}  # in both parts of a set
GATES = [round(float(g), 2) for g in np.arange(-3.0, 1.2, 0.04)]
UNRELATED_WEIGHTS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
LEXICAL_GATES = (None, 0.3, 0.4, 0.5, 0.6)
EMPTY_STEPS = (0.75, 0.775, 0.8, 0.825, 0.85, 0.875, 0.9)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.clip(np.log(p / (1 - p)), -4.0, 6.0) / 4.0


FORMS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "linear": lambda p: p,
    "logit": _logit,
    "sqrt": np.sqrt,
}


def set_figures(outcomes: Outcomes, setting: tuple[Any, ...]) -> dict[str, float]:
    """One set's figures at `setting` (Outcomes.figures' keys), with `met`: whether every
    target holds in both parts."""
    row = outcomes.figures(setting, np.ones(len(outcomes.classes), dtype=bool))
    row["met"] = all(
        row[f"{part}_{cls}"] >= target
        for part in ("auto", "deli")
        for cls, target in TARGETS.items()
    )
    return row


def summary(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    """Over sets: mean "other words" found (both parts), mean of each set's lower share of
    unrelated prompts left empty, the lowest "shares words" of any set and part, sets meeting
    every target."""
    return {
        "other": float(np.mean([(r["auto_other"] + r["deli_other"]) / 2 for r in rows])),
        "empty": float(np.mean([min(r["auto_none"], r["deli_none"]) for r in rows])),
        "lowest_shares": float(min(min(r["auto_shares"], r["deli_shares"]) for r in rows)),
        "met": sum(bool(r["met"]) for r in rows),
    }


def grid(weight: float, floor: float, form: str) -> list[tuple[Any, ...]]:
    top = float(FORMS[form](np.array([0.999]))[0])  # f of a prompt surely about nothing stored
    return [
        (weight, floor, gate, unrelated, project, lexical_gate)
        for gate, unrelated, project, lexical_gate in itertools.product(
            GATES, UNRELATED_WEIGHTS, PROJECT_WEIGHTS, LEXICAL_GATES
        )
        # as the calibration's grid: a prompt surely about nothing stored can still be answered
        # by a record that fits it closely, and without weights a gate below the floor is none
        if gate + unrelated * top < 1 + weight and (unrelated > 0 or project > 0 or gate >= floor)
    ]


def described(setting: Sequence[Any]) -> str:
    _weight, _floor, gate, unrelated, project, lexical_gate = setting
    lexical = "no lexical gate" if lexical_gate is None else f"lexical gate {lexical_gate}"
    return f"gate {gate}, unrelated {unrelated}, project {project}, {lexical}"


def frontier(names: Sequence[str], model: str, form: str) -> dict[str, Any]:
    embedder = load_embedder(model)
    assert embedder is not None
    texts = read_prompts(UNRELATED_PROMPTS), read_prompts(PROJECT_PROMPTS)
    references = GateReferences(embedder.embed(texts[0]), embedder.embed(texts[1]), texts)
    weight, floor = embedder.lexical_weight, embedder.floor
    sets, shaped = {}, {}
    for name in names:
        prepared, closeness, classes, groups = gather([name], embedder, references)
        sets[name] = Outcomes(prepared, closeness, classes, groups, pairs=[(weight, floor)])
        # the same rankings, the gate's probability put through the form
        shaped[name] = copy.copy(sets[name])
        shaped[name].closeness = [FORMS[form](closeness[0]), closeness[1]]
    own = (
        weight,
        floor,
        embedder.gate,
        embedder.unrelated_weight,
        embedder.project_weight,
        embedder.lexical_gate,
    )
    own_rows = {name: set_figures(outcomes, own) for name, outcomes in sets.items()}
    settings = []
    for setting in grid(weight, floor, form):
        rows = [set_figures(outcomes, setting) for outcomes in shaped.values()]
        settings.append((setting, summary(rows)))
    steps = []
    for empty in EMPTY_STEPS:
        held = [
            (s, f)
            for s, f in settings
            if f["empty"] >= empty and f["lowest_shares"] >= TARGETS["shares"]
        ]
        if held:
            setting, figures = max(held, key=lambda sf: (sf[1]["other"], sf[1]["empty"]))
            steps.append({"empty_at_least": empty, "setting": list(setting), **figures})
    most = max(f["met"] for _s, f in settings)
    best: dict[tuple[float, float], dict[str, Any]] = {}  # one setting per trade
    for s, f in sorted(settings, key=lambda sf: -(sf[1]["other"] + sf[1]["empty"])):
        if f["met"] == most and len(best) < 5:
            best.setdefault((f["other"], f["empty"]), {"setting": list(s), **f})
    return {
        "sets": list(names),
        "form": form,
        "lexical_weight": weight,
        "floor": floor,
        "model_setting": {
            "setting": list(own),
            "sets": own_rows,
            **summary(list(own_rows.values())),
        },
        "frontier": steps,
        "most_sets_meeting_every_target": most,
        "settings_meeting_most": list(best.values()),
        "settings": len(settings),
    }


def report(result: dict[str, Any]) -> None:
    names = result["sets"]
    print(
        f"{len(names)} sets ({', '.join(names)}), gate form {result['form']}, lexical weight "
        f"{result['lexical_weight']}, floor {result['floor']}; {result['settings']} settings"
    )
    own = result["model_setting"]
    print(f"\nthe model's setting: {described(own['setting'])}")
    print(f"  {'set':8} {'shares a/d':>12} {'other a/d':>12} {'empty a/d':>12}  every target")
    for name, r in own["sets"].items():
        print(
            f"  {name:8} {r['auto_shares']:>5.3f}/{r['deli_shares']:<5.3f}"
            f"  {r['auto_other']:>5.3f}/{r['deli_other']:<5.3f}"
            f"  {r['auto_none']:>5.3f}/{r['deli_none']:<5.3f}  {'met' if r['met'] else '-'}"
        )
    print(
        f"  mean other words {own['other']:.3f}, mean empty {own['empty']:.3f}, "
        f"sets meeting every target {own['met']} of {len(names)}"
    )
    print(
        '\nthe trade: the most "other words" found at each share of unrelated prompts left '
        'empty,\nwith "shares words" >= 0.95 in both parts of every set'
    )
    print(f"  {'empty >=':>8} {'other':>6} {'empty':>6}  sets meeting every target  setting")
    for step in result["frontier"]:
        print(
            f"  {step['empty_at_least']:>8.3f} {step['other']:>6.3f} {step['empty']:>6.3f}"
            f"  {step['met']:>25}  {described(step['setting'])}"
        )
    print(
        f"\nthe most sets any setting brings to every target: "
        f"{result['most_sets_meeting_every_target']} of {len(names)}"
    )
    for row in result["settings_meeting_most"]:
        print(f"  other {row['other']:.3f}, empty {row['empty']:.3f}: {described(row['setting'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=DEFAULT_SETS, help=f"default {DEFAULT_SETS}")
    parser.add_argument("--model", default=str(BUILTIN_DIR))
    parser.add_argument("--form", choices=sorted(FORMS), default="linear")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = frontier(args.sets.split(","), args.model, args.form)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)


if __name__ == "__main__":
    main()
