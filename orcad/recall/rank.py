"""Hybrid recall ranking: lexical coverage and embedding cosine, a relevance floor, and
corrections before what they correct. Pure: no I/O.

Each candidate (an automatic fact or a deliberate record) has
- `coverage`: the share of the prompt's query terms it contains, each term weighted by how rare
  it is in the store it came from (idf), so that one common word ("test", "cap") says little and
  a prompt about something the store never mentions covers almost nothing;
- `cosine`: the cosine between the prompt's and the candidate's embeddings, or None when there
  is none (no model, or the candidate is not embedded yet).

With an embedding, relevance = cosine + lexical_weight * coverage, and two thresholds decide what
is injected: nothing at all unless the best candidate's relevance reaches the gate (does anything
stored fit this prompt?), and then every candidate whose relevance reaches the floor (which of them
fit?). A fact asked for in other words is often no closer to its prompt than the nearest fact is to
an unrelated prompt, so one threshold has to choose between the two; with a gate, a low floor keeps
those weak true matches when the prompt is about the project at all. The gate is the prompt's own
(orcad.recall.embedding.Embeddings.gates_for): the model's gate, raised by how likely the prompt is
to be about nothing a project stores (a classifier fitted on reference prompts of both kinds) and
lowered by its cosine with the nearest reference prompt about a project's own setup (each times its
weight), so "explain the CAP theorem" needs a close record, while "which phones must we support"
clears it with a weaker match. The numbers belong to the model (cosines of different models are on
different scales): the built-in model's are in its MODEL.txt, chosen by bench/calibrate_recall.py
on the labelled set of bench/eval_recall.py (docs/recall.md). A candidate without a
vector (its embedding failed) competes on its coverage alone and passes the floor and the gate when
it shares a term, so recall is lexical as before for it. A candidate holding a distinctive term
of the prompt opens the gate too: a word that general English does not have, that no reference
prompt about something else uses, and that only one or two stored texts contain names something
of this project ("kapt", "testcontainers"), so a pasted error that names it is about the project
however much it reads like a question about the code on screen; so does a name the prompt joins
from parts ("LGX_DRY_RUN", "ledger.tax.round_up") that such a text holds whole, though its parts
are words in general use. A candidate whose coverage
reaches the `lexical_gate` opens the gate on its words alone: in a small store, a prompt sharing
a distinctive word with one record ("which package manager does the frontend use?") may be no
closer to it in meaning than to a general question about a context manager. The lexical gate
is the prompt's own too, raised as the gate is, so "thanks, that worked" does not open it by
sharing "work" with a fact. Without an embedding the order is lexical, as before: every
candidate sharing a term, by coverage then recency, no floor.

Corrections first: a newer candidate that is a near-duplicate of an older one (most of their
significant words shared) is ranked just above it, whatever their own scores. Of candidates
alike in form (near-duplicates, or so once numbers are set aside, as records cut from one
template are) one is shown, the first: a correction, not what it corrects. But one holding a
term of the prompt that the shown one lacks (the component, or the old value, it names) is
shown too, below a newer one.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from orcad.limits import QUERY_MAX_CONSIDERED
from orcad.query import QUERY_READ_CHARS, is_weak_term, stem, stems, tokenize

NEAR_DUPLICATE = 0.5  # Jaccard of significant word stems from which two texts say the same
_NEWER_STEP = 1e-6  # how far above its older near-duplicate a correction is placed
# candidates looked at per entry shown: a correction is worded like what it corrects, so it
# scores close to it; the long tail of weak candidates is never compared
CONSIDERED_PER_SHOWN = 3
# records alike in form shown together, at most: the first (a correction, lifted above what it
# corrects); a second took a place that "other words" prompts' facts needed (docs/recall.md)
ALIKE_SHOWN = 1
# words besides numbers a text needs for its likeness without numbers to count: fewer, and two
# settings of one kind are alike ("API timeout is 30 seconds.", "DB timeout is 5 seconds.")
FORM_MIN_STEMS = 4
DISTINCTIVE_MATCHES = 2  # stored texts holding a term, at most, for it to be distinctive
DISTINCTIVE_LENGTH = 4  # characters of a distinctive term, at least
# a name joined from parts: "LGX_DRY_RUN", "ledger.tax.round_up", "infra/rules.sql", "pay-relay"
# (starting only where a word starts: a match tried inside a long word would read the rest of
# it again at each of its characters)
_COMPOUND = re.compile(r"(?<![^\W_])[^\W_]+(?:[_./-]+[^\W_]+)+")
_JOINS = "_./-"
_NAME_MAX = 128  # characters of a compound name, at most: a longer run is no name but a paste
_CODE_JOINS = frozenset("_./")  # joins only code uses; "-" joins English words too ("read-only")
# stored texts whose stems are kept between prompts: a pool is at most 3 x 16 texts a part, so
# this spans many prompts; a stored text's stems may take kilobytes, so not many more
TEXTS_CACHED = 4096
# texts whose mean a store's centre counts as a whole: fewer, and it counts part of their mean
# (n / (n + 16)), so that two or three facts are not each other's opposites
CENTRE_SHRINK = 16


class Candidate(NamedTuple):  # a tuple: recall builds one per stored fact, per prompt
    key: str
    text: str
    recorded_at: float  # unix seconds; newer wins among near-duplicates
    coverage: float  # 0..1
    cosine: float | None
    # the cosine measured from the store's centre (`centred_cosines`), which orders the
    # candidates in place of `cosine` when given; the gate and the floor still read `cosine`
    order_cosine: float | None = None


def idf(document_frequency: int, total: int) -> float:
    """A term's weight: terms in no document weigh most (the prompt is about something else)."""
    return math.log(1.0 + (total + 1) / (document_frequency + 0.5))


def query_weights(
    terms: Sequence[str], document_frequency: Mapping[str, int], total: int
) -> dict[str, float]:
    """Stemmed query term -> idf weight; `document_frequency` is keyed by the raw terms."""
    weights: dict[str, float] = {}
    for term in terms:
        key = stem(term)
        weight = idf(document_frequency.get(term, 0), total)
        weights[key] = max(weights.get(key, 0.0), weight)
    return weights


def coverage(
    stems_of_text: Iterable[str], weights: Mapping[str, float], total: float | None = None
) -> float:
    """The weighted share of query terms in the text; `total` is sum(weights) if known."""
    if total is None:
        total = sum(weights.values())
    if total <= 0:
        return 0.0
    found = stems_of_text if isinstance(stems_of_text, (set, frozenset)) else set(stems_of_text)
    return sum(weight for term, weight in weights.items() if term in found) / total


@functools.lru_cache(maxsize=TEXTS_CACHED)
def text_stems(text: str) -> frozenset[str]:
    """The stems of a stored text (cached: the same records come back prompt after prompt)."""
    return frozenset(stems(text))


@functools.lru_cache(maxsize=TEXTS_CACHED)
def significant_stems(text: str) -> frozenset[str]:
    return frozenset(token for token in text_stems(text) if not is_weak_term(token))


def compound_names(prompt: str) -> frozenset[str]:
    """The prompt's names joined from parts (`LGX_DRY_RUN`, `ledger.tax.round_up`,
    `pay-relay`), casefolded, with a letter and DISTINCTIVE_LENGTH to _NAME_MAX characters: the
    whole name, which its query terms ("lgx", "dry", "run") split into words in general use. The
    first QUERY_MAX_CONSIDERED of them, from as much of the prompt as its terms are read from."""
    text = prompt[:QUERY_READ_CHARS]
    if not any(join in text for join in _JOINS):
        return frozenset()
    names: dict[str, None] = {}  # in order of appearance
    for match in _COMPOUND.finditer(text):
        name = match.group().casefold()
        if DISTINCTIVE_LENGTH <= len(name) <= _NAME_MAX and any(char.isalpha() for char in name):
            names[name] = None
            if len(names) == QUERY_MAX_CONSIDERED:
                break
    return frozenset(names)


def distinctive_terms(
    terms: Iterable[str],
    document_frequency: Mapping[str, int],
    general: frozenset[str],
    names: Iterable[str] = (),
) -> frozenset[str]:
    """The stems of the query terms that name something of this store's own: held by one or
    two of its texts, with a letter and at least four characters, and neither the term nor its
    stem among the `general` words (orcad.recall.prompt_gate.general_words). And those of the
    prompt's compound `names` (`compound_names`) that do too: the rarest of the name's parts
    counted in `document_frequency` is held by one or two texts, and the name is joined by a
    character only code uses or has a part that is not a general word ("read-only" is English,
    "pay-relay" a name). A text holds such a name when it contains it whole
    (`holds_distinctive`)."""
    own = {
        stem(term)
        for term in terms
        if 0 < document_frequency.get(term, 0) <= DISTINCTIVE_MATCHES
        and len(term) >= DISTINCTIVE_LENGTH
        and any(char.isalpha() for char in term)
        and term not in general
        and stem(term) not in general
    }
    for name in names:
        parts = tokenize(name)
        counted = [document_frequency[part] for part in parts if part in document_frequency]
        if not counted or not 0 < min(counted) <= DISTINCTIVE_MATCHES:
            continue
        if not _CODE_JOINS.isdisjoint(name) or any(
            part not in general and stem(part) not in general for part in parts
        ):
            own.add(name)
    return frozenset(own)


def holds_distinctive(text: str, distinctive: frozenset[str]) -> bool:
    """Whether `text` holds one of `distinctive_terms`: a stem among its own, or a compound
    name within it, whole."""
    if not distinctive.isdisjoint(text_stems(text)):
        return True
    names = [name for name in distinctive if _COMPOUND.fullmatch(name)]
    if not names:
        return False
    folded = text.casefold()
    return any(holds_name(folded, name) for name in names)


def holds_name(folded: str, name: str) -> bool:
    """Whether casefolded `folded` holds compound `name` whole: not as part of a longer name
    ("db-prod-2" is not in "db-prod-20", "lab-results" not in "lab-results-v2"), which goes on
    with a word character or with a joining character followed by one (a name may end a
    sentence: "ledger.tax.round_up.")."""
    return name in folded and _whole_name(name).search(folded) is not None


@functools.lru_cache(maxsize=TEXTS_CACHED)
def _whole_name(name: str) -> re.Pattern[str]:
    joins = re.escape(_JOINS)
    return re.compile(rf"(?<!\w)(?<!\w[{joins}]){re.escape(name)}(?!\w)(?![{joins}]\w)")


@functools.lru_cache(maxsize=4 * TEXTS_CACHED)  # the same texts meet again prompt after prompt
def near_duplicates(first: str, second: str) -> bool:
    a, b = significant_stems(first), significant_stems(second)
    if not a or not b or min(len(a), len(b)) < NEAR_DUPLICATE * max(len(a), len(b)):
        return False  # (the Jaccard index is at most the ratio of the sizes)
    return len(a & b) / len(a | b) >= NEAR_DUPLICATE


def corrects(newer: str, older: str) -> bool:
    """Whether text `newer` reads as a correction of `older`: near-duplicates that differ only
    by what `newer` adds and by numbers ("line length of 100" and "line length of 120 since the
    style change"). Records cut from one template differ in their subject ("sensor-hub stores
    uploads on NFS", "timesheet-app stores uploads on NFS") and are not such a pair: of the
    pairs of near-duplicates among the records of each of the nine labelled sets
    (bench/eval_data*.py), 2 of 64,995 are, and 54 of their 67 corrections. Recall brings such
    a correction along with what it corrects, however far it is from the prompt (the ledger's
    `corrections_among`; the deliberate store's pairs, orcad.deliberate.corrections)."""
    kept = {found for found in significant_stems(older) if not found.isdecimal()}
    return kept <= significant_stems(newer) and near_duplicates(newer, older)


def corrections_among(texts: Sequence[str], recorded_at: Sequence[float]) -> list[list[int]]:
    """For each of `texts`, the places of the later ones that correct it (`corrects`): the
    near-duplicates of all pairs at once (`_related`), then each of those checked."""
    if not texts:
        return []
    pool = [
        Candidate(str(n), text, at, 0.0, None)
        for n, (text, at) in enumerate(zip(texts, recorded_at, strict=True))
    ]
    same = _related(pool).same
    return [
        [
            j
            for j in _bits(same[i])
            if recorded_at[j] > recorded_at[i] and corrects(texts[j], texts[i])
        ]
        for i in range(len(texts))
    ]


class Alike(NamedTuple):
    """Each candidate's near-duplicates in a pool, by key (`alike_in_pool`)."""

    # half or more of their significant word stems shared (`near_duplicates`): the texts say
    # the same, so the newer corrects the older
    same: dict[str, frozenset[str]]
    # the same, or so once numbers are set aside: records cut from one template ("restarts
    # every 6 hours", "every 27 hours") and the pairs of `same`; of these one is shown
    form: dict[str, frozenset[str]]


class _Related(NamedTuple):
    """`Alike` as ranking reads it: for each candidate of a pool, by its place there, a bit
    mask of the places of its near-duplicates (bit j: the candidate at j), so that asking which
    of them are shown, or left out, is one `&` of two ints."""

    same: list[int]
    form: list[int]


def alike_in_pool(pool: Sequence[Candidate]) -> Alike:
    """Each candidate's near-duplicates in `pool` (`Alike`; a key given twice has the
    near-duplicates of both, and is not its own)."""
    keys = [c.key for c in pool]
    related = _related(pool)

    def by_key(masks: list[int]) -> dict[str, frozenset[str]]:
        found: dict[str, set[str]] = {key: set() for key in keys}
        for key, mask in zip(keys, masks, strict=True):
            found[key].update(keys[j] for j in _bits(mask) if keys[j] != key)
        return {key: frozenset(alike) for key, alike in found.items()}

    return Alike(by_key(related.same), by_key(related.form))


def _related(pool: Sequence[Candidate]) -> _Related:
    """The near-duplicates of each candidate of `pool` (`_Related`): all pairs at once, as one
    product of the candidates' stem-incidence matrix with itself (the shared stems of each
    pair), and again without the columns of numbers. A text's stems come hashed from a cache,
    so that a pool's columns are one `np.unique`, and the pairs leave numpy as a bit mask per
    candidate: 0.06-0.1 ms for the pools of about 40 texts of bench/rank.py, where a dict of
    their stems and a set of keys per candidate took 0.2 ms (and comparing the pairs that
    shared a prefix stem took 0.05 ms for unlike texts but 0.4-0.55 ms for records alike in
    form)."""
    if not pool:
        return _Related([], [])
    hashed = [_stem_hashes(c.text) for c in pool]
    every = np.concatenate(hashed)
    columns, column_of = np.unique(every, return_inverse=True)
    incidence = np.zeros((len(pool), len(columns)), dtype=np.float32)
    rows = np.repeat(np.arange(len(pool)), [len(found) for found in hashed])
    incidence[rows, column_of] = 1.0
    same = _near(incidence)
    numbers = (every & 1).astype(np.bool_)
    if not numbers.any():
        masks = _masks(same)
        return _Related(masks, masks)
    incidence[rows[numbers], column_of[numbers]] = 0.0
    short = incidence.sum(axis=1) < FORM_MIN_STEMS
    incidence[short] = 0.0  # ("API timeout is 30 seconds." and "DB timeout is 5 seconds.")
    return _Related(_masks(same), _masks(same | _near(incidence)))


@functools.lru_cache(maxsize=TEXTS_CACHED)
def _stem_hashes(text: str) -> npt.NDArray[np.int64]:
    """The text's significant stems as their hashes (this process's), odd for a number and
    even for a word (cached: the same records come back prompt after prompt; one read-only
    array, 112 bytes and 8 a stem). Two stems that hash alike would count as one, a chance of
    about 2**-63 a pair with 64-bit hashes (2**-31 on a 32-bit build)."""
    found = list(significant_stems(text))
    hashes = np.fromiter(map(hash, found), dtype=np.int64, count=len(found))
    numbers = np.fromiter((token.isdecimal() for token in found), dtype=np.bool_, count=len(found))
    marked = (hashes & ~1) | numbers
    marked.setflags(write=False)
    return marked


def _near(incidence: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
    """Which pairs of rows of `incidence` (texts by their stems) share NEAR_DUPLICATE of the
    stems either holds (a text with no stem is near none)."""
    shared = incidence @ incidence.T  # exact: counts far below 2**24
    sizes = np.diag(shared)
    union = sizes[:, None] + sizes[None, :] - shared
    near: npt.NDArray[np.bool_] = (shared >= NEAR_DUPLICATE * union) & (shared > 0)
    np.fill_diagonal(near, val=False)
    return near


def _masks(near: npt.NDArray[np.bool_]) -> list[int]:
    """Each row of a square boolean matrix as an int whose bit j is its column j."""
    packed = np.packbits(near, axis=1, bitorder="little")
    words = np.zeros((len(packed), -(-packed.shape[1] // 8) * 8), dtype=np.uint8)
    words[:, : packed.shape[1]] = packed
    rows: list[list[int]] = words.view("<u8").tolist()  # 64 columns a word, lowest first
    if len(packed) <= 64:  # one word a row: a pool as recall ranks it
        return [row[0] for row in rows]
    return [sum(word << (64 * k) for k, word in enumerate(row)) for row in rows]


def _bits(mask: int) -> Iterator[int]:
    """The places of the set bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def relevance(candidate: Candidate, floor: float, lexical_weight: float) -> float:
    """Cosine plus `lexical_weight` times coverage; a coverage that is not a number counts as
    none, so that every score compares (ranking relies on a total order)."""
    covered = candidate.coverage if math.isfinite(candidate.coverage) else 0.0
    if candidate.cosine is None or not math.isfinite(candidate.cosine):
        # lexical as before (no vector, or a broken one): any shared term passes the floor
        return floor + lexical_weight * covered if covered > 0 else -1.0
    return candidate.cosine + lexical_weight * covered


def order_relevance(candidate: Candidate, floor: float, lexical_weight: float) -> float:
    """What orders a candidate: `relevance` with its `order_cosine` in place of its cosine,
    when it has both."""
    order = candidate.order_cosine
    if order is None or not math.isfinite(order) or candidate.cosine is None:
        return relevance(candidate, floor, lexical_weight)
    return relevance(candidate._replace(cosine=order), floor, lexical_weight)


class StoreCentre(NamedTuple):
    """A store's centre and what `centred_cosines` needs of each row: the mean of its rows,
    shrunk toward the origin by n / (n + CENTRE_SHRINK) (a few texts say little of what their
    store shares), each row's product with it and each row's distance from it."""

    point: npt.NDArray[np.float32]
    square: float  # the point's product with itself
    row_dots: npt.NDArray[np.float32]
    row_lengths: npt.NDArray[np.float32]

    def rows(self, places: npt.NDArray[np.intp]) -> StoreCentre:
        """The same centre, with only the rows at `places`, in that order."""
        return self._replace(row_dots=self.row_dots[places], row_lengths=self.row_lengths[places])

    @classmethod
    def of(cls, rows: npt.NDArray[np.float32], present: npt.NDArray[np.bool_]) -> StoreCentre:
        """The centre of the `present` rows of `rows` (the others get length 0)."""
        count = int(present.sum())
        point = np.zeros(rows.shape[1], dtype=np.float32)
        if count:
            point = (rows[present].mean(axis=0) * (count / (count + CENTRE_SHRINK))).astype(
                np.float32
            )
        lengths = np.linalg.norm(rows - point, axis=1).astype(np.float32)
        return cls(
            point=point,
            square=float(point @ point),
            row_dots=(rows @ point).astype(np.float32),
            row_lengths=np.where(present, lengths, 0.0).astype(np.float32),
        )


def centred_cosines(
    cosines: npt.NDArray[np.float32], query: npt.NDArray[np.float32], centre: StoreCentre
) -> npt.NDArray[np.float32]:
    """The cosines of `centre`'s rows with `query` (unit vectors; `cosines` their products),
    each vector measured from the centre: the texts of one store share a direction (their
    project's vocabulary and manner), and so do the prompts about it; without it, what tells
    the texts apart weighs more. A row at the centre, or a query there, gets 0."""
    offset = query - centre.point
    length = float(np.linalg.norm(offset))
    if length == 0.0:
        return np.zeros_like(cosines)
    products = cosines - centre.row_dots - float(centre.point @ query) + centre.square
    with np.errstate(divide="ignore", invalid="ignore"):
        centred = products / (centre.row_lengths * length)
    return np.where(centre.row_lengths > 0, centred, 0.0).astype(np.float32)


def rank(
    candidates: Sequence[Candidate],
    *,
    semantic: bool,
    limit: int,
    floor: float,
    lexical_weight: float,
    gate: float | None,
    lexical_gate: float | None = None,
    distinctive: frozenset[str] = frozenset(),
    asked: frozenset[str] = frozenset(),
    corrections: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """The candidates worth injecting, best first, at most `limit`.

    `semantic` says whether an embedding is in use (then the gate and the floor apply; a gate
    of None, or one at or below the floor, changes nothing); candidates are the union of
    lexical and nearest-vector matches, each once (a key given twice ranks as its first). A
    candidate holding one of the `distinctive` stems (`distinctive_terms`) opens the gate.
    `asked` holds the stems of the prompt's query terms and its compound names
    (`compound_names`): a candidate alike in form to one shown is left out only when it holds
    none of them (a number aside) that the shown one lacks, so a prompt about the production
    database keeps that record beside a newer one about staging worded the same (which ranks
    above it as a correction would: the prompt may name the value a correction replaced).
    `corrections` holds the keys of candidates brought along as later texts correcting others
    (`corrects`): they do not open the gate, and `limit` of them are compared with the rest
    however weak, so that one can rank above the older text it corrects.
    """
    unique: dict[str, Candidate] = {}
    for candidate in candidates:  # a key ranks once, as its first candidate
        unique.setdefault(candidate.key, candidate)
    if semantic:
        scored = {key: relevance(c, floor, lexical_weight) for key, c in unique.items()}
        ordering = {key: order_relevance(c, floor, lexical_weight) for key, c in unique.items()}
    else:
        scored = ordering = {key: c.coverage for key, c in unique.items() if c.coverage > 0}
    pool = sorted((c for c in unique.values() if c.key in scored), key=lambda c: -scored[c.key])
    considered = CONSIDERED_PER_SHOWN * limit
    beyond = [c for c in pool[considered:] if c.key in corrections][:limit] if corrections else []
    pool = pool[:considered]
    if (
        semantic
        and gate is not None
        and not any(
            scored[c.key] >= gate
            or ((c.cosine is None or not math.isfinite(c.cosine)) and c.coverage > 0)
            or (lexical_gate is not None and c.coverage >= lexical_gate)
            or holds_distinctive(c.text, distinctive)
            for c in pool
            if c.key not in corrections  # (brought along for another, not for the prompt)
        )
    ):
        return []  # (a correction's step below cannot lift the best over the gate)
    pool += beyond
    # a correction inherits the score of the older near-duplicate it corrects, plus a step,
    # for every older candidate that would be shown (which bounds the comparisons); lifting
    # changes what is shown, so until nothing moves (each lift goes to a newer candidate, so
    # this ends; the second round usually finds nothing)
    related = _related(pool)
    names = [name for name in asked if _COMPOUND.fullmatch(name)]
    named = [_named(c.text, asked, names) for c in pool]
    scores = [ordering[c.key] for c in pool]  # by place in the pool, as lifted
    floors = [scored[c.key] for c in pool]  # what the floor reads, lifted alike

    def in_order() -> list[int]:
        """The places in order, those under the floor (as lifted so far) left out: they take
        no place, and leave none of the others out as alike."""
        ordered = sorted(
            range(len(pool)), key=lambda i: (-scores[i], -pool[i].recorded_at, pool[i].key)
        )
        return [i for i in ordered if not semantic or floors[i] >= floor]

    lifted = True
    while lifted:
        lifted = False
        shown = _varied(pool, in_order(), limit, related, named)
        for older in sorted(shown, key=lambda i: pool[i].recorded_at):
            step = scores[older] + _NEWER_STEP
            for newer in _bits(related.same[older]):
                if pool[newer].recorded_at > pool[older].recorded_at:
                    if floors[newer] < floors[older] + _NEWER_STEP:
                        floors[newer] = floors[older] + _NEWER_STEP
                        lifted = True
                    if scores[newer] < step:
                        scores[newer] = step
                        lifted = True
    # the last round lifted nothing, so `shown` stands
    return [pool[i] for i in shown]


def _named(text: str, asked: frozenset[str], names: Sequence[str]) -> frozenset[str]:
    """What of `asked` `text` holds: its stems, numbers aside, and of its compound `names`
    those it holds whole ("db-prod-2", which the stems "db" and "prod" do not tell from
    "db-prod-1")."""
    held = {found for found in text_stems(text) & asked if not found.isdecimal()}
    if names:
        folded = text.casefold()
        held.update(name for name in names if holds_name(folded, name))
    return frozenset(held)


def _varied(
    pool: Sequence[Candidate],
    ordered: Sequence[int],
    limit: int,
    related: _Related,
    named: Sequence[frozenset[str]],
) -> list[int]:
    """At most `limit` of the places `ordered` in `pool`, in order, leaving out a candidate
    alike in form to ALIKE_SHOWN of those already taken that hold all it holds of the prompt
    (`named`: ten records cut from one template do not fill the block, and what a shown
    correction corrects is not shown beside it unless the prompt names what only it says), and
    one that a newer left-out candidate corrects and holds all it holds of the prompt (an
    outdated record is not shown without its correction, unless the prompt names what only it
    says)."""
    chosen: list[int] = []
    taken = 0  # the places chosen, as a bit mask
    left_out = 0
    for i in ordered:
        own = named[i]
        alike = related.form[i] & taken
        corrected_by = related.same[i] & left_out
        if (alike and _holding(alike, own, named) >= ALIKE_SHOWN) or (
            corrected_by
            and any(
                pool[j].recorded_at > pool[i].recorded_at and own <= named[j]
                for j in _bits(corrected_by)
            )
        ):
            left_out |= 1 << i
            continue
        chosen.append(i)
        taken |= 1 << i
        if len(chosen) == limit:
            break
    return chosen


def _holding(places: int, own: frozenset[str], named: Sequence[frozenset[str]]) -> int:
    """How many of the candidates at `places` (a bit mask) hold all of `own`."""
    if not own:
        return places.bit_count()
    return sum(1 for j in _bits(places) if own <= named[j])
