"""Calibrate recall's lexical weight, floor, gate, unrelated and project weights and lexical
gate on labelled sets (bench/eval_data.py and bench/eval_data_fresh.py by default: two
projects, written apart).

In process, without a daemon: every fact, correction and distractor is embedded with the chosen
model, and for each prompt the ranking module (orcad/recall/rank.py) ranks the candidates
recall would fetch (the automatic part: the 128 ledger facts, top 6; the deliberate part: facts
plus 1,000 distractors in a real deliberate store, whose bm25 search gives the lexical half as
the daemon's does, top 8; and a new user's small store: the prompt's wanted facts and three
others, top 6; each part ranked for twice what it shows, as recall fetches) for a grid of
settings; a prompt meets only the stores of its own set. These rankings miss or find the same
facts as the daemon's on all nine labelled sets, to within one prompt a part
(`python -m bench.why_recall` against `python -m bench.eval_recall`). A prompt's gate is `gate +
unrelated_weight x the probability that it is about nothing a project stores - project_weight x
its cosine with the nearest of orcad/recall/project_prompts.txt`, as the daemon computes it
(`Embeddings.gates_for`; the probability comes from a logistic regression over the prompt's
vector, its cosines with the nearest prompt of each set and its words, fitted on
orcad/recall/unrelated_prompts.txt against the project prompts, none of them within cosine
0.75 of a labelled prompt: tests/test_recall_eval.py); a candidate covering at least the lexical
gate (raised by the same unrelated_weight x probability) of the prompt's weighted terms opens it
on its words alone,
and so does one holding a distinctive term of the prompt (`rank.distinctive_terms`: a name
of the store's own that general words do not have).
Settings whose gate plus unrelated weight reaches 1 + w (the best relevance there is) are left
out, so that no prompt is closed even to a record that fits it closely.
Prints the best setting at each unrelated and project weight and the chosen one's neighbours
(hit@k of the "shares" and "other" classes, the share of "none" prompts left empty, in the set
that leaves the fewest). The chosen setting keeps "shares" hit@6 >= 0.95 (or its best) in the
automatic part and >= 0.9 in the small store, has a lexical weight of at least
MIN_LEXICAL_WEIGHT, leaves at least 85% of the "none" prompts of each set empty in the
automatic and deliberate parts (or as many as any setting does), and among those finds the
most "other" facts in those parts. With --folds 2, it also chooses on half of the prompts and
scores the other half; with --score check, it scores the chosen setting and the model's own on
bench/eval_data_check.py, which no choice ever sees.

    .venv/bin/python -m bench.calibrate_recall [--model DIR] [--sets main,fresh] [--folds 2]
        [--score check]
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_recall import Labelled
from orcad.deliberate.queries import DuplicateRecord, StoredRecord, insert_record, new_record_id
from orcad.deliberate.schema import open_database
from orcad.deliberate.vectors import hybrid_search
from orcad.limits import RECALL_AUTOMATIC_MAX_ENTRIES, RECALL_DELIBERATE_MAX_RECORDS
from orcad.query import derive_query_terms, distinct_terms, stem, stems
from orcad.recall import rank
from orcad.recall.deliberate import NEAREST_PER_SHOWN
from orcad.recall.embedding import load_embedder
from orcad.recall.local_models import BUILTIN_DIR
from orcad.recall.prompt_gate import (
    PROJECT_PROMPTS,
    UNRELATED_PROMPTS,
    GateReferences,
    general_words,
    read_prompts,
)
from orcad.recall.service import AUTOMATIC_FETCH, DELIBERATE_FETCH

# per kind of match, as recall fetches (the nearest deliberate records: NEAREST_PER_SHOWN times)
POOL = 16
# A prompt that shares one distinctive word with a fact in other forms ("deploying" for
# "deploys") has a cosine of about 0.4 with it; below this weight its words cannot lift it over
# the gate, and a small store (where this set's 128 facts do not reach) then answers nothing.
MIN_LEXICAL_WEIGHT = 0.3
# For the same reason the coverage that opens the gate on words alone is at most 0.4: in a
# store of 71 records, "which package manager does the frontend use?" covers 0.44 of the one
# record about the frontend, and is closer to "what is a context manager" than to it.
LEXICAL_GATES = (None, 0.3, 0.35, 0.4)  # None first: without one, when it does as well


class DeliberateLexical:
    """The deliberate part's lexical half as the daemon finds it: `docs` in a real deliberate
    store (a temporary SQLite file), searched by `hybrid_search` without a vector, so that a
    prompt's terms are the most selective 12 by the store's own counts and its lexical
    candidates the POOL best by bm25 (ranked by coverage instead, main's deliberate "other
    words" came to 0.635 in process against 0.757 through the daemon)."""

    WORKSPACE = "calibration"

    def __init__(self, docs: list[tuple[str, str]], directory: Path) -> None:
        self.connection = open_database(directory / "memory.sqlite3")
        self.connection.execute("PRAGMA synchronous = OFF")  # a scratch copy
        self.place: dict[str, int] = {}  # record id -> index in docs
        for number, (_id, text) in enumerate(docs):
            record = StoredRecord(
                id=new_record_id(),
                kind="fact",
                content=text,
                workspace_id=self.WORKSPACE,
                workspace_root="/",
                created_at=float(number),
                updated_at=float(number),
            )
            try:
                insert_record(self.connection, record)
            except DuplicateRecord:  # the same text twice: the daemon keeps one
                continue
            self.place[record.id] = number

    def search(self, prompt: str) -> tuple[list[str], dict[str, int], int, list[int]]:
        """The prompt's terms, their record counts, the records in all, and the indices of
        the lexical candidates, best first."""
        found = hybrid_search(
            self.connection, self.WORKSPACE, distinct_terms(prompt), None, None, POOL, [None]
        )
        lexical = [self.place[item.record.id] for item in found.found]
        return found.terms, found.frequency, found.total, lexical

    def close(self) -> None:
        self.connection.close()


def part_candidates(docs, matrix, doc_stems, prompt, query, *, nearest=POOL, store=None):  # type: ignore[no-untyped-def]
    """The candidates recall ranks for `prompt`: the `nearest` vectors and the POOL best
    lexical matches, by coverage, each with its cosine measured from the centre of `docs` to
    order it, as the automatic part's are; or with `store` (a DeliberateLexical of `docs`) as
    the deliberate part finds them."""
    if store is None:
        terms = derive_query_terms(prompt)
        frequency = {t: sum(1 for s in doc_stems if stem(t) in s) for t in terms}
        total, lexical = len(docs), None
    else:
        terms, frequency, total, lexical = store.search(prompt)
    weights = rank.query_weights(terms, frequency, total)
    cosines = matrix @ query
    order = None
    if store is None:
        present = np.ones(len(matrix), dtype=bool)
        order = rank.centred_cosines(cosines, query, rank.StoreCentre.of(matrix, present))
    covered = [rank.coverage(s, weights) for s in doc_stems]
    # the pool recall builds: the nearest vectors and the best lexical matches
    closest = np.argsort(-cosines)[:nearest]
    if lexical is None:
        lexical = [
            i for i in sorted(range(len(docs)), key=lambda i: -covered[i])[:POOL] if covered[i] > 0
        ]
    names = rank.compound_names(prompt)
    distinctive = rank.distinctive_terms(terms, frequency, general_words(), names)
    return (
        distinctive,
        frozenset(weights) | names,
        [
            rank.Candidate(
                key=f"{i}",
                text=docs[i][1],
                recorded_at=float(i),
                coverage=covered[i],
                cosine=float(cosines[i]),
                order_cosine=None if order is None else float(order[i]),
            )
            for i in sorted({*map(int, closest), *lexical})
        ],
    )


# (entries shown, entries ranked): each part ranks twice what it shows, as recall fetches (its
# caps then keep the first), so that records left out as alike leave room for others
AUTOMATIC = (RECALL_AUTOMATIC_MAX_ENTRIES, AUTOMATIC_FETCH)
DELIBERATE = (RECALL_DELIBERATE_MAX_RECORDS, DELIBERATE_FETCH)
WEIGHTS = tuple(w for w in (0.0, 0.1, 0.2, 0.3, 0.5, 0.7) if w >= MIN_LEXICAL_WEIGHT)
FLOORS = [round(float(f), 2) for f in np.arange(0.1, 0.7, 0.02)]
GATES = [round(float(g), 2) for g in np.arange(-2.0, 0.8, 0.04)]
UNRELATED_WEIGHTS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
PROJECT_WEIGHTS = (0.0, 0.5, 0.75, 1.0, 1.25, 1.5)
EMPTY_TARGET = 0.85  # of unrelated prompts left empty, in both parts
SHARES_TARGET = 0.95  # of prompts sharing a word with their fact, found in the automatic part
# in a small store the gate costs more of those: there every term is rare, so a shared word
# weighs little, and a prompt is as close to a general question as to the fact (with the
# unrelated prompts alone, 0.95 there left the "other" class near 0.08)
SMALL_SHARES_TARGET = 0.9
FIGURES = (
    *("auto_shares", "auto_other", "auto_none", "deli_shares", "deli_other", "deli_none"),
    *("smal_shares", "smal_other", "smal_none"),
)
SETTING_KEYS = ("weight", "floor", "gate", "unrelated", "project")
SMALL_STORE_OTHERS = 3  # facts beside the wanted ones in a prompt's small store


class Outcomes:
    """Per (lexical weight, floor): for every prompt and part, whether its ranking (before the
    gate) holds a wanted fact, or for an unrelated prompt anything, its best relevance and
    coverage, and whether a candidate holding a distinctive term opens the gate. The gate only
    decides whether that ranking is shown, so the gate grid costs no ranking."""

    def __init__(self, prepared, closeness, classes, groups, pairs=None):  # type: ignore[no-untyped-def]
        """Ranked at every (lexical weight, floor) of `pairs` (default: the whole grid)."""
        self.closeness = closeness  # (P(unrelated), closeness to the project prompts)
        self.classes = classes
        self.groups = groups  # each prompt's labelled set
        self.prepared = prepared
        self.table = {}
        for weight, floor in pairs or itertools.product(WEIGHTS, FLOORS):
            self.rank_all(weight, floor)

    def rank_all(self, weight, floor):  # type: ignore[no-untyped-def]
        """Every prompt ranked at this lexical weight and floor (self.table's entry)."""
        if (weight, floor) not in self.table:
            entry = {}
            for name, ((shown, fetch), prompts) in self.prepared.items():
                found, best, covered, opened = [], [], [], []
                for cls, wanted, docs, (distinctive, asked, candidates) in prompts:
                    ranked = rank.rank(
                        candidates,
                        semantic=True,
                        limit=fetch,
                        floor=floor,
                        lexical_weight=weight,
                        gate=None,
                        asked=asked,
                    )[:shown]
                    ids = {docs[int(c.key)][0] for c in ranked}
                    found.append(bool(ids) if cls == "none" else bool(ids & set(wanted)))
                    considered = sorted(
                        candidates, key=lambda c: -rank.relevance(c, floor, weight)
                    )[: rank.CONSIDERED_PER_SHOWN * fetch]  # what rank() looks at
                    best.append(
                        rank.relevance(considered[0], floor, weight) if considered else -1.0
                    )
                    covered.append(max((c.coverage for c in considered), default=0.0))
                    opened.append(
                        any(rank.holds_distinctive(c.text, distinctive) for c in considered)
                    )
                entry[name] = tuple(map(np.array, (found, best, covered, opened)))
            self.table[weight, floor] = entry
        return self.table[weight, floor]

    def figures(self, setting, subset):  # type: ignore[no-untyped-def]
        weight, floor, gate, unrelated, project, lexical_gate = setting
        row = {
            "weight": weight,
            "floor": floor,
            "gate": gate,
            "unrelated": unrelated,
            "project": project,
            "lexical_gate": lexical_gate,
        }
        bar = gate + unrelated * self.closeness[0] - project * self.closeness[1]
        # as Embeddings.gates_for: the lexical gate rises with the prompt's gate
        lexical_bar = (
            np.inf if lexical_gate is None else lexical_gate + unrelated * self.closeness[0]
        )
        for name, (found, best, covered, opened) in self.rank_all(weight, floor).items():
            shown = found & ((best >= bar) | (covered >= lexical_bar) | opened)
            for cls in ("shares", "other"):
                row[f"{name[:4]}_{cls}"] = round(
                    float(shown[subset & (self.classes == cls)].mean()), 3
                )
            # unrelated prompts left empty: in the set that leaves the fewest (each set is a
            # different project, and a setting must hold for each one, not on average)
            empty = [
                1 - shown[mask].mean()
                for group in np.unique(self.groups)
                if (mask := subset & (self.classes == "none") & (self.groups == group)).any()
            ]
            row[f"{name[:4]}_none"] = round(float(min(empty)), 3)
        return row


def choose(outcomes, subset, empty_target=EMPTY_TARGET):  # type: ignore[no-untyped-def]
    """Every setting's figures on `subset`, and the chosen one (see the module docstring)."""
    rows = [
        outcomes.figures((weight, floor, gate, unrelated, project, lexical_gate), subset)
        for weight in WEIGHTS
        for floor in FLOORS
        for unrelated in UNRELATED_WEIGHTS
        for project in PROJECT_WEIGHTS
        for gate in GATES
        for lexical_gate in LEXICAL_GATES
        # without them, a gate below the floor is none
        if unrelated > 0 or project > 0 or gate >= floor - 1e-9
        # a prompt surely about nothing stored (and near no project prompt) can still be
        # answered by a record that fits it closely enough: its gate stays under the best
        # relevance there is (a cosine of 1 and every term covered)
        if gate + unrelated < 1 + weight
    ]
    targets = {"auto_shares": SHARES_TARGET, "smal_shares": SMALL_SHARES_TARGET}
    shares = {k: min(target, max(r[k] for r in rows)) for k, target in targets.items()}
    feasible = [r for r in rows if all(r[k] >= v for k, v in shares.items())]
    reach = min(empty_target, max(min(r["auto_none"], r["deli_none"]) for r in feasible))
    quiet = [r for r in feasible if min(r["auto_none"], r["deli_none"]) >= reach]

    def merit(r: dict[str, float]) -> tuple[float, ...]:
        return (
            r["auto_other"] + r["deli_other"],
            r["deli_shares"],
            r["auto_none"] + r["deli_none"],
            r["gate"],
            r["floor"],
        )

    return rows, quiet, max(quiet, key=merit), merit


def prepare(labelled: Labelled, embedder, references):  # type: ignore[no-untyped-def]
    """One labelled set's prompt classes, closeness to the reference prompts (P(unrelated),
    cosine with the nearest project prompt), and every prompt's candidates in each part."""
    everything = [(i, t) for i, _c, _k, t in labelled.all_facts()]
    prompts = labelled.prompts
    parts = {
        "automatic": (everything, AUTOMATIC, POOL),
        "deliberate": (
            [("x", t) for t in labelled.distractors] + everything,
            DELIBERATE,
            int(NEAREST_PER_SHOWN * POOL),
        ),
    }
    queries = embedder.embed([prompt for _cls, prompt, _wanted in prompts])
    # as Embeddings.gates_for: how likely each prompt is to be about nothing a project stores,
    # and its closeness to the nearest project prompt
    nearest = references.nearest(queries)
    asked = [prompt for _cls, prompt, _wanted in prompts]
    closeness = (references.probability(queries, asked, nearest), np.maximum(0.0, nearest[:, 1]))
    classes = np.array([cls for cls, _prompt, _wanted in prompts])
    prepared = {}
    for name, (docs, top, fetched) in parts.items():
        matrix = embedder.embed([t for _i, t in docs])
        doc_stems = [stems(t) for _i, t in docs]
        with tempfile.TemporaryDirectory(prefix="orcad-calibrate-") as scratch:
            store = DeliberateLexical(docs, Path(scratch)) if name == "deliberate" else None
            try:
                prepared[name] = (
                    top,
                    [
                        (
                            cls,
                            wanted,
                            docs,
                            part_candidates(
                                docs, matrix, doc_stems, prompt, query, nearest=fetched, store=store
                            ),
                        )
                        for (cls, prompt, wanted), query in zip(prompts, queries, strict=True)
                    ],
                )
            finally:
                if store is not None:
                    store.close()
    # a new user's store: each prompt against its wanted facts and a few others, where every
    # term is rare and a prompt shares one word with the fact it wants
    chance = random.Random(1)
    small = []
    for (cls, prompt, wanted), query in zip(prompts, queries, strict=True):
        others = chance.sample([i for i, _t in everything if i not in wanted], SMALL_STORE_OTHERS)
        docs = [(i, t) for i, t in everything if i in wanted or i in others]
        matrix = embedder.embed([t for _i, t in docs])
        doc_stems = [stems(t) for _i, t in docs]
        small.append((cls, wanted, docs, part_candidates(docs, matrix, doc_stems, prompt, query)))
    prepared["small"] = (AUTOMATIC, small)
    return classes, closeness, prepared


def gather(names, embedder, references):  # type: ignore[no-untyped-def]
    """The labelled sets `names` prepared together: Outcomes' arguments, each prompt's group
    the place of its set in `names`."""
    sets = [prepare(Labelled.named(name), embedder, references) for name in names]
    classes = np.concatenate([c for c, _n, _p in sets])
    groups = np.concatenate([np.full(len(c), number) for number, (c, _n, _p) in enumerate(sets)])
    closeness = [np.concatenate([n[i] for _c, n, _p in sets]) for i in (0, 1)]
    prepared = {
        part: (sets[0][2][part][0], [row for _c, _n, p in sets for row in p[part][1]])
        for part in sets[0][2]
    }
    return prepared, closeness, classes, groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(BUILTIN_DIR))
    parser.add_argument("--folds", type=int, choices=(1, 2), default=1)
    parser.add_argument(
        "--sets",
        default="main,fresh",
        help="labelled sets to choose on, comma-separated (main, fresh, check)",
    )
    parser.add_argument(
        "--empty",
        type=float,
        default=EMPTY_TARGET,
        help="share of each set's unrelated prompts a setting must leave empty in both parts "
        f"(default {EMPTY_TARGET})",
    )
    parser.add_argument(
        "--score",
        default="",
        help="also score the chosen setting and the model's own on these sets (e.g. check), "
        "which the choice never sees",
    )
    args = parser.parse_args()
    embedder = load_embedder(args.model)
    assert embedder is not None
    texts = read_prompts(UNRELATED_PROMPTS), read_prompts(PROJECT_PROMPTS)
    references = GateReferences(embedder.embed(texts[0]), embedder.embed(texts[1]), texts)

    def gathered(names: str):  # type: ignore[no-untyped-def]
        return gather(names.split(","), embedder, references)

    prepared, closeness, classes, groups = gathered(args.sets)
    outcomes = Outcomes(prepared, closeness, classes, groups)
    everyone = np.ones(len(classes), dtype=bool)
    rows, quiet, best, merit = choose(outcomes, everyone, args.empty)
    for unrelated in UNRELATED_WEIGHTS:
        for project in PROJECT_WEIGHTS:
            candidates = [
                r for r in quiet if (r["unrelated"], r["project"]) == (unrelated, project)
            ]
            if candidates:
                print(f"best at weights {unrelated} / {project}:", max(candidates, key=merit))
    keys = list(rows[0])
    print(" ".join(f"{k:>12}" for k in keys))
    for r in rows:
        same = all(
            r[k] == best[k] for k in ("weight", "floor", "unrelated", "project", "lexical_gate")
        )
        if (same and round(r["gate"] * 100) % 4 == 0) or r is best:
            print(" ".join(f"{r[k]!s:>12}" for k in keys) + ("  <- chosen" if r is best else ""))
    print("chosen:", best)
    if args.folds == 2:
        # every other prompt of each class: choose on one half, score on the other
        halves = np.zeros(len(classes), dtype=bool)
        for cls in set(classes):
            halves[np.flatnonzero(classes == cls)[::2]] = True
        for name, fit in (("first", halves), ("second", ~halves)):
            _rows, _quiet, chosen, _merit = choose(outcomes, fit, args.empty)
            setting = tuple(chosen[k] for k in SETTING_KEYS)
            held = outcomes.figures((*setting, chosen["lexical_gate"]), ~fit)
            print(f"chosen on the {name} half:", chosen)
            print("   scored on the other half:", {k: held[k] for k in FIGURES})
    own = (
        embedder.lexical_weight,
        embedder.floor,
        embedder.gate,
        embedder.unrelated_weight,
        embedder.project_weight,
        embedder.lexical_gate,
    )
    for name in filter(None, args.score.split(",")):
        scored = Outcomes(*gathered(name))
        chosen_setting = tuple(best[k] for k in (*SETTING_KEYS, "lexical_gate"))
        for label, setting in (("chosen", chosen_setting), ("the model's", own)):
            figures = scored.figures(setting, np.ones(len(scored.classes), dtype=bool))
            print(f"{label} setting on {name}:", {k: figures[k] for k in FIGURES})


if __name__ == "__main__":
    main()
