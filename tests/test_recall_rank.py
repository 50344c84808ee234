"""Hybrid ranking (orcad/recall/rank.py): the relevance floor and gate, corrections first, the
lexical mode without a model, and candidates without a vector."""

from __future__ import annotations

import random

import numpy as np
import pytest

from orcad.query import stem, stems
from orcad.recall.rank import (
    CENTRE_SHRINK,
    FORM_MIN_STEMS,
    NEAR_DUPLICATE,
    Candidate,
    StoreCentre,
    alike_in_pool,
    centred_cosines,
    compound_names,
    corrections_among,
    coverage,
    distinctive_terms,
    holds_distinctive,
    idf,
    near_duplicates,
    query_weights,
    rank,
    significant_stems,
)

pytestmark = pytest.mark.pure

FLOOR = 0.5
WEIGHT = 0.5


def cand(
    key: str, text: str, *, at: float = 0.0, cov: float = 0.0, cos: float | None = 0.0
) -> Candidate:
    return Candidate(key=key, text=text, recorded_at=at, coverage=cov, cosine=cos)


def keys(chosen: list[Candidate]) -> list[str]:
    return [c.key for c in chosen]


def ranked(
    pool: list[Candidate], limit: int = 6, semantic: bool = True, gate: float | None = None
) -> list[str]:
    chosen = rank(
        pool, semantic=semantic, limit=limit, floor=FLOOR, lexical_weight=WEIGHT, gate=gate
    )
    return keys(chosen)


def test_nothing_above_the_floor_injects_nothing() -> None:
    pool = [
        cand("a", "Caching is capped at 5 entries.", cov=0.3, cos=0.2),
        cand("b", "Deploys use make release.", cos=0.45),
    ]
    assert ranked(pool) == []  # 0.2 + 0.15 and 0.45: both under 0.5


def test_the_floor_is_inclusive_and_cosine_and_coverage_add() -> None:
    pool = [
        cand("a", "alpha", cos=0.5),
        cand("b", "beta", cos=0.3, cov=0.4),
        cand("c", "gamma", cos=0.49),
    ]
    assert ranked(pool) == ["a", "b"]  # b: 0.3 + 0.2 = 0.5 ties a at the floor; then by key


def test_below_the_gate_nothing_is_injected_though_candidates_pass_the_floor() -> None:
    pool = [cand("a", "alpha", cos=0.69), cand("b", "beta", cos=0.55)]
    assert ranked(pool, gate=0.7) == []  # the best (0.69) does not reach the gate
    assert ranked(pool, gate=0.69) == ["a", "b"]  # inclusive; then the floor decides


def test_past_the_gate_weaker_candidates_above_the_floor_come_along() -> None:
    pool = [
        cand("best", "alpha", cos=0.8),
        cand("weak", "beta", cos=0.51),  # would not pass a threshold of 0.7 on its own
        cand("under", "gamma", cos=0.49),
    ]
    assert ranked(pool, gate=0.7) == ["best", "weak"]


def test_a_gate_at_or_below_the_floor_changes_nothing() -> None:
    pool = [cand("a", "alpha", cos=0.45), cand("b", "beta", cos=0.6), cand("c", "gamma", cos=0.5)]
    assert ranked(pool, gate=0.3) == ranked(pool, gate=FLOOR) == ranked(pool) == ["b", "c"]


def test_records_cut_from_one_template_do_not_fill_the_block() -> None:
    templated = [
        cand(
            f"t{n}", f"The {name} database is MySQL 5.7 and is backed up weekly.", cos=0.9 - n / 100
        )
        for n, name in enumerate(["survey-engine", "lab-results", "fleet-tracker", "sensor-hub"])
    ]
    other = cand("other", "Ask before running destructive database commands.", cos=0.7)
    assert ranked([*templated, other], limit=2) == ["t0", "other"]
    assert ranked([*templated, other], limit=6) == ["t0", "other"]  # never the rest


def test_records_of_one_template_are_left_out_at_every_place_of_a_large_pool() -> None:
    # the copies come after 66 unlike records: each one's bit mask holds the first copy's
    # place past the 64 of a first word
    unlike = [
        cand(f"u{n}", f"Unit{n}a owns the unit{n}b job on unit{n}c.", cos=0.95 - n / 1000)
        for n in range(66)
    ]
    templated = [
        cand(f"t{n}", f"The queue worker of shard {n} restarts every night.", cos=0.8 - n / 1000)
        for n in range(10)
    ]
    assert ranked([*unlike, *templated], limit=80) == [*keys(unlike), "t0"]


def test_records_of_one_template_differing_in_numbers_are_alike_in_form() -> None:
    texts = [
        f"The {name} queue is drained by a worker that restarts every {hours} hours."
        for name, hours in (("quote-builder", 27), ("timesheet-app", 20), ("label-printer", 6))
    ]
    templated = [cand(f"t{n}", text, cos=0.9 - n / 100) for n, text in enumerate(texts)]
    # the numbers count: the first two share 5 of their 11 stems, under half
    assert not near_duplicates(texts[0], texts[1])
    other = cand("other", "Logs are shipped to Loki and kept for 14 days.", cos=0.5)
    assert ranked([*templated, other], limit=6) == ["t0", "other"]
    alike = alike_in_pool(templated)
    assert alike.same["t0"] == {"t2"}  # "6" is no stem: t0 and t2 share 5 of 10
    assert alike.form["t0"] == {"t1", "t2"}


def test_a_correction_ranks_first_when_a_template_pushed_what_it_corrects_down() -> None:
    templated = [
        cand(
            f"t{n}", f"The {name} database is MySQL 5.7 and is backed up weekly.", cos=0.9 - n / 100
        )
        for n, name in enumerate(["survey-engine", "lab-results", "fleet-tracker", "sensor-hub"])
    ]
    old = cand("old", "API tokens for customers expire after 90 days.", at=1.0, cos=0.6)
    new = cand("new", "API tokens for customers now expire after 30 days.", at=2.0, cos=0.55)
    # "old" is fifth by score but second once the template's copies are left out; its
    # correction takes its place
    assert ranked([*templated, old, new], limit=3) == ["t0", "new"]


def test_a_chain_of_corrections_is_shown_newest_first() -> None:
    first = cand("A", "Staging deploys go through job stage-deploy on the release branch.", at=4.0)
    second = cand(
        "B", "Staging deploys now go through workflow stage-deploy on the release branch.", at=5.0
    )
    third = cand("C", "Staging deploys now go through workflow ship-staging on main.", at=8.0)
    pool = [first._replace(cosine=0.63), second._replace(cosine=0.25), third._replace(cosine=0.54)]
    assert near_duplicates(first.text, second.text) and near_duplicates(second.text, third.text)
    assert not near_duplicates(first.text, third.text)
    # B is lifted above A, which it corrects, and C above B: C is shown, and neither of what
    # it corrects (B is alike to C; A is left out with B, which corrects it)
    assert rank(pool, semantic=True, limit=8, floor=0.2, lexical_weight=0.3, gate=None) == [pool[2]]
    # B alone corrects A: B is shown, first
    chosen = rank(pool[:2], semantic=True, limit=8, floor=0.2, lexical_weight=0.3, gate=None)
    assert chosen == [pool[1]]


def test_an_outdated_record_is_not_shown_when_its_correction_is_left_out() -> None:
    old = cand("O", "Nightly backups run at 02:00.", at=1.0, cos=0.29)
    new = cand("N", "Nightly backups run at 03:00 UTC, after the ETL.", at=2.0, cos=0.8)
    later = cand("T1", "Nightly backups now run at 04:00 UTC, after the ETL and vacuum.", at=4.0)
    other = cand("T2", "Nightly backups run at 03:30 UTC after the ETL on replicas.", at=3.0)
    pool = [old, new, later._replace(cosine=0.67), other._replace(cosine=0.61)]
    # T1 corrects N and is shown; T2, alike to T1, is left out, and so is N, which T1 corrects;
    # O, which N corrects, goes too
    chosen = rank(pool, semantic=True, limit=8, floor=0.2, lexical_weight=0.3, gate=None)
    assert keys(chosen) == ["T1"]


def test_a_correction_is_shown_and_not_what_it_corrects() -> None:
    old = cand("old", "Logs are shipped to Loki and kept for 14 days.", at=1.0, cos=0.8)
    new = cand("new", "Logs are shipped to Loki and are now kept for 30 days.", at=2.0, cos=0.7)
    third = cand("third", "Logs are shipped to Loki and kept for 60 days.", at=0.5, cos=0.75)
    other = cand("other", "Metrics are scraped by Prometheus.", at=0.1, cos=0.6)
    assert ranked([old, new, third, other]) == ["new", "other"]
    assert ranked([old, third, other]) == ["old", "other"]  # the newer of the two


def test_a_candidate_covering_the_lexical_gate_opens_the_gate_on_its_words() -> None:
    pool = [cand("words", "alpha", cos=0.2, cov=0.4), cand("meaning", "beta", cos=0.6)]
    chosen = rank(pool, semantic=True, limit=6, floor=FLOOR, lexical_weight=WEIGHT, gate=0.9)
    assert chosen == []  # best relevance 0.6 < 0.9, and no lexical gate
    opened = rank(
        pool, semantic=True, limit=6, floor=FLOOR, lexical_weight=WEIGHT, gate=0.9, lexical_gate=0.4
    )
    assert keys(opened) == ["meaning"]  # opened by "words" (0.4 >= 0.4), below the floor (0.4)
    below = rank(
        pool,
        semantic=True,
        limit=6,
        floor=FLOOR,
        lexical_weight=WEIGHT,
        gate=0.9,
        lexical_gate=0.41,
    )
    assert below == []


def test_a_distinctive_term_is_a_rare_name_general_words_do_not_have() -> None:
    general = frozenset({"gradle", "build", "memory", "cluster", "error"})
    frequency = {"kapt": 1, "gradle": 1, "build": 1, "clustering": 1, "g104": 2, "ktor": 3}
    frequency |= {"8080": 1, "jq": 1, "zqx": 1, "gosec": 2, "retrofit": 0}
    terms = [*frequency, "unseen"]
    # "gradle" and "build" are general; "clustering" stems to "cluster"; "ktor" is in 3 texts
    # (one more than DISTINCTIVE_MATCHES); "8080" has no letter; "jq" and "zqx" are shorter than
    # DISTINCTIVE_LENGTH (4, as "kapt"); "retrofit" and "unseen" are in no text
    assert distinctive_terms(terms, frequency, general) == {"kapt", "g104", "gosec"}


def test_a_candidate_holding_a_distinctive_term_opens_the_gate() -> None:
    error = cand("kapt", "The Gradle daemon needs -Xmx6g; less makes kapt fail.", cos=0.3, cov=0.5)
    other = cand("other", "Builds run on the shared runners.", cos=0.35)
    pool = [error, other]
    args = {"semantic": True, "limit": 6, "floor": 0.2, "lexical_weight": 0.0, "gate": 0.9}
    assert rank(pool, **args) == []  # best relevance 0.35 < 0.9
    assert keys(rank(pool, **args, distinctive=frozenset({"kapt"}))) == ["other", "kapt"]
    assert rank(pool, **args, distinctive=frozenset({"ktor"})) == []  # held by no candidate


def test_a_compound_name_is_the_prompt_s_name_joined_from_parts() -> None:
    prompt = (
        "what does LGX_DRY_RUN=1 do? see ledger.tax.round_up, x_y, v2.1 and the read-only pay-relay"
    )
    assert compound_names(prompt) == {
        "lgx_dry_run",
        "ledger.tax.round_up",
        "v2.1",
        "read-only",
        "pay-relay",
    }  # "x_y" is shorter than DISTINCTIVE_LENGTH
    assert compound_names("explain big O notation simply, e.g. for sorting") == frozenset()
    # a run far longer than a name is a paste; a paste of names gives its first 64 of them
    assert compound_names("a_" * 200 + "b") == frozenset()
    longest = "a" * 63 + "_" + "b" * 64  # 128 characters, the most a name may have
    assert compound_names(f"{longest} {longest}c") == {longest}
    pasted = compound_names(" ".join(f"src/mod_{n}/main.py" for n in range(1000)))
    assert len(pasted) == 64 and "src/mod_0/main.py" in pasted


def test_a_compound_name_is_distinctive_when_a_part_is_rare_and_it_is_no_english_word() -> None:
    general = frozenset({"dry", "run", "read", "only", "relay", "ledger", "tax", "round", "up"})
    frequency = {"lgx": 3, "dry": 1, "run": 28, "read": 1, "pay": 1, "relay": 5}
    frequency |= {"ledger": 5, "tax": 3, "round": 9, "up": 9, "v2": 1, "1": 1}
    names = ["lgx_dry_run", "dry-run", "read-only", "pay-relay", "ledger.tax.round_up", "zz-top"]
    # each term alone is not distinctive here: "lgx" is short, the others general or common
    assert distinctive_terms(frequency, frequency, general) == frozenset()
    # "lgx_dry_run" is joined as only code is and "dry" is in one text; "pay-relay" has a part
    # that is no general word; "dry-run" and "read-only" are English; every part of
    # "ledger.tax.round_up" is in three texts or more; no part of "zz-top" is in any text
    found = distinctive_terms(frequency, frequency, general, names)
    assert found == {"lgx_dry_run", "pay-relay"}


def test_a_text_holds_a_compound_name_only_whole() -> None:
    distinctive = frozenset({"lgx_dry_run"})
    assert holds_distinctive("`LGX_DRY_RUN=1` logs payloads without sending them.", distinctive)
    assert not holds_distinctive("A dry run of the lgx job logs payloads.", distinctive)
    assert holds_distinctive("Upgrades of kapt need a clean build.", frozenset({"kapt"}))
    # whole: not the start or the end of a longer name
    prod = frozenset({"db-prod-2"})
    assert not holds_distinctive("The db-prod-20 host runs Postgres 14.", prod)
    assert not holds_distinctive("The staging-db-prod-2 host runs Postgres 14.", prod)
    assert holds_distinctive("Back up db-prod-20 and db-prod-2 first.", prod)
    assert holds_distinctive("Start with the replica (db-prod-2).", prod)
    assert holds_distinctive("See ledger.tax.round_up.", frozenset({"ledger.tax.round_up"}))


def test_a_candidate_holding_a_compound_name_opens_the_gate() -> None:
    flag = cand("flag", "`LGX_DRY_RUN=1` logs outgoing payloads without sending them.", cos=0.3)
    words = cand(
        "words", "Every run of the dry sync writes lgx payloads to the audit table.", cos=0.35
    )
    args = {"semantic": True, "limit": 6, "floor": 0.2, "lexical_weight": 0.0, "gate": 0.9}
    assert rank([flag, words], **args) == []  # best relevance 0.35 < 0.9
    opened = rank([flag, words], **args, distinctive=frozenset({"lgx_dry_run"}))
    assert keys(opened) == ["words", "flag"]
    assert rank([words], **args, distinctive=frozenset({"lgx_dry_run"})) == []


def test_a_candidate_without_a_vector_that_shares_a_term_opens_the_gate() -> None:
    pool = [cand("words", "alpha", cov=0.2, cos=None), cand("near", "beta", cos=0.55)]
    assert ranked(pool, gate=0.9) == ["words", "near"]  # 0.5 + 0.1 (from the floor), then 0.55


def test_the_gate_does_not_apply_without_a_model() -> None:
    pool = [cand("a", "alpha", cov=0.1, cos=None)]
    assert ranked(pool, semantic=False, gate=0.99) == ["a"]


def test_order_is_by_relevance_then_newer_and_limited() -> None:
    words = ["apple", "brick", "cloud", "delta", "ember", "frost", "grain", "haven", "ivory"]
    pool = [cand(f"k{n}", words[n], at=n, cos=0.6 + (n % 3) / 10) for n in range(9)]
    assert ranked(pool, limit=4) == ["k8", "k5", "k2", "k7"]


def test_a_record_holding_what_the_prompt_names_is_shown_beside_a_newer_one_alike() -> None:
    args = {"semantic": True, "limit": 6, "floor": 0.2, "lexical_weight": 0.3, "gate": None}

    def asked(*terms: str) -> frozenset[str]:
        return frozenset(stem(term) for term in terms)

    # worded alike, about two things: the prompt names the older one's
    production = cand("prod", "The production database is Postgres 15 on db-prod-1.", at=1.0)
    staging = cand("stg", "The staging database is Postgres 15 on db-stg-1.", at=2.0)
    pool = [production._replace(cosine=0.8), staging._replace(cosine=0.78)]
    assert near_duplicates(production.text, staging.text)
    assert keys(rank(pool, **args, asked=asked("production", "database"))) == ["stg", "prod"]
    # naming neither, or nothing asked: the newer, as a correction, alone
    assert keys(rank(pool, **args, asked=asked("database"))) == ["stg"]
    assert keys(rank(pool, **args)) == ["stg"]
    # the old value named: the correction first, and what it corrects with it
    old = cand("old", "The frontend uses npm for packages and lockfiles.", at=1.0, cos=0.8)
    new = cand("new", "The frontend now uses pnpm for packages and lockfiles.", at=2.0, cos=0.7)
    assert keys(rank([old, new], **args, asked=asked("frontend", "still", "use", "npm"))) == [
        "new",
        "old",
    ]
    # a number is no name: asking for the old value gets the correction alone
    old = cand("old", "Logs are kept in Loki for 14 days.", at=1.0, cos=0.8)
    new = cand("new", "Logs are now kept in Loki for 30 days.", at=2.0, cos=0.7)
    assert keys(rank([old, new], **args, asked=asked("logs", "kept", "14", "days"))) == ["new"]
    # but a compound name holding one is: "db-prod-2" is not "db-prod-1"
    one = cand("p1", "The db-prod-1 host runs Postgres 14 with 64 GB of RAM.", at=2.0, cos=0.8)
    two = cand("p2", "The db-prod-2 host runs Postgres 16 with 128 GB of RAM.", at=1.0, cos=0.79)
    assert keys(rank([one, two], **args, asked=asked("db", "prod", "ram"))) == ["p1"]
    named = asked("db", "prod", "ram") | {"db-prod-2"}
    assert keys(rank([one, two], **args, asked=named)) == ["p1", "p2"]
    twenty = cand("p20", "The db-prod-20 host runs Postgres 14 with 64 GB of RAM.", at=2.0, cos=0.8)
    assert keys(rank([twenty, two], **args, asked=named)) == ["p20", "p2"]


def test_short_texts_differing_in_numbers_are_not_alike_in_form() -> None:
    pool = [cand("api", "API timeout is 30 seconds.", cos=0.7, at=1.0)]
    pool.append(cand("db", "DB timeout is 5 seconds.", cos=0.65, at=2.0))
    assert ranked(pool) == ["api", "db"]
    assert alike_in_pool(pool).form == {"api": frozenset(), "db": frozenset()}


def test_a_correction_ranks_just_above_the_older_fact_it_corrects() -> None:
    old = cand("old", "Python is pinned to 3.12 with uv; the lock file is uv.lock.", at=1, cos=0.9)
    new = cand(
        "new", "Python is now pinned to 3.13 with uv; the lock file is uv.lock.", at=2, cos=0.6
    )
    other = cand("other", "The lock file of the frontend is pnpm-lock.yaml.", at=3, cos=0.8)
    assert ranked([old, other, new]) == ["new", "other"]  # in place of what it corrects
    # a correction below the floor is still shown in its place
    below = cand("new", new.text, at=2, cos=0.1)
    assert ranked([old, below]) == ["new"]
    # an older text is never lifted above a newer near-duplicate
    assert ranked([cand("o", old.text, at=5, cos=0.2), cand("n", new.text, at=9, cos=0.9)]) == ["n"]


def test_near_duplicates_need_most_significant_words_shared() -> None:
    assert near_duplicates(
        "Logs are kept in Loki for 14 days.", "Logs are now kept in Loki for 30 days."
    )
    assert not near_duplicates(
        "Logs are kept in Loki for 14 days.", "Metrics are kept in Prometheus."
    )
    assert not near_duplicates("", "anything")


def alike_in_form(first: str, second: str) -> bool:
    """The pairwise reference of `Alike.form`: near-duplicates, or so without numbers."""
    if near_duplicates(first, second):
        return True
    a, b = ({t for t in significant_stems(text) if not t.isdecimal()} for text in (first, second))
    if min(len(a), len(b)) < FORM_MIN_STEMS:
        return False
    return bool(a & b) and len(a & b) >= NEAR_DUPLICATE * len(a | b)


def test_the_near_duplicates_found_in_a_pool_are_exactly_those_of_every_pair() -> None:
    # ranking counts the shared stems of every pair at once, as a product of an incidence
    # matrix; it must find exactly the pairs that comparing each pair finds, on pools of texts
    # overlapping by every share of their words
    rng = random.Random(7)
    pools_with_pairs = pools_without = 0
    words = [f"w{n}x" for n in range(40)] + ["deploy", "cache", "queue", "nightly", "replica"]
    words += ["14", "30", "2026", "8080"]  # numbers: alike in form without them
    for trial in range(300):
        base = rng.sample(words, rng.randint(1, 12))
        pool = []
        # every tenth pool is larger than 64, a place past the first word of a bit mask
        for n in range(rng.randint(65, 80) if trial % 10 == 0 else rng.randint(1, 30)):
            text = list(base)
            for _ in range(rng.randint(0, 8)):  # replace, drop or add words
                choice = rng.random()
                if choice < 0.4 and text:
                    text[rng.randrange(len(text))] = rng.choice(words)
                elif choice < 0.6 and len(text) > 1:
                    text.pop(rng.randrange(len(text)))
                else:
                    text.append(rng.choice(words))
            pool.append(cand(f"c{n}", " ".join(text)))
        pool.append(cand("empty", "the of and"))  # stop words only: no significant stem
        expected = {
            c.key: {o.key for o in pool if o.key != c.key and near_duplicates(c.text, o.text)}
            for c in pool
        }
        in_form = {
            c.key: {o.key for o in pool if o.key != c.key and alike_in_form(c.text, o.text)}
            for c in pool
        }
        alike = alike_in_pool(pool)
        assert {key: set(found) for key, found in alike.same.items()} == expected
        assert {key: set(found) for key, found in alike.form.items()} == in_form
        if any(expected.values()):
            pools_with_pairs += 1
        else:
            pools_without += 1
    assert pools_with_pairs > 100 and pools_without > 10  # both kinds were tried


def test_a_key_given_twice_in_a_pool_is_not_its_own_near_duplicate() -> None:
    text = "The staging database is Postgres 15 on the shared cluster."
    pool = [cand("a", text), cand("a", text), cand("b", text)]
    pair = {"a": frozenset({"b"}), "b": frozenset({"a"})}
    assert alike_in_pool(pool) == (pair, pair)
    assert alike_in_pool([]) == ({}, {})
    assert alike_in_pool([cand("solo", text)]) == ({"solo": frozenset()}, {"solo": frozenset()})


def test_without_a_model_the_order_is_lexical_with_no_floor() -> None:
    pool = [
        cand("a", "alpha", at=1, cov=0.1, cos=None),
        cand("b", "beta", at=2, cov=0.1, cos=None),
        cand("c", "gamma", cov=0.0, cos=None),
        cand("d", "delta", cov=0.9, cos=None),
    ]
    assert ranked(pool, semantic=False) == ["d", "b", "a"]


def test_a_candidate_without_a_vector_is_lexical_and_passes_when_it_shares_a_term() -> None:
    pool = [
        cand("lexical", "alpha beta", cov=0.05, cos=None),
        cand("silent", "gamma", cov=0.0, cos=None),
        cand("weak", "delta", cos=0.1),
    ]
    assert ranked(pool) == ["lexical"]


def test_coverage_weighs_rare_and_unknown_terms() -> None:
    frequency = {"deploy": 1, "the": 50, "cap": 0}
    weights = query_weights(["deploy", "the", "cap"], frequency, 100)
    assert weights["cap"] > weights["deploy"] > weights["the"]
    assert idf(0, 100) > idf(1, 100) > idf(50, 100)
    text = stems("Deploys are capped at three.")
    assert 0 < coverage(text, weights) < 1
    assert coverage(stems("nothing here"), weights) == 0.0
    assert coverage(text, {}) == 0.0


def test_a_candidate_whose_cosine_is_not_a_number_ranks_on_its_words() -> None:
    good = cand("good", "the frontend uses pnpm", cos=0.8)
    weak = cand("weak", "releases are cut on thursdays", cos=0.6)
    broken = cand("nan", "the frontend lints with eslint", cov=0.5, cos=float("nan"))
    assert ranked([broken, weak, good]) == ["good", "nan", "weak"]  # FLOOR + WEIGHT * 0.5
    silent = cand("inf", "another", cov=0.0, cos=float("inf"))
    assert ranked([silent, weak, good]) == ["good", "weak"]  # no shared term: not shown
    assert ranked([broken], gate=0.9) == ["nan"]  # opens the gate on its words, as without one


def test_a_coverage_that_is_not_a_number_counts_as_none() -> None:
    # its score must still compare, or the floor would no longer cut the order in one place
    first = cand("a", "deploy the frontend nightly", cos=0.9)
    broken = cand("nan", "cache queue worker shard", cov=float("nan"), cos=0.55)
    last = cand("c", "ledger tax round migration", cos=0.52)
    assert ranked([first, broken, last], limit=3) == ["a", "nan", "c"]
    below = cand("low", "cache queue worker shard", cov=float("nan"), cos=0.3)
    assert ranked([first, below, last], limit=2) == ["a", "c"]


def test_a_key_given_twice_ranks_once_as_its_first_candidate() -> None:
    first = cand("k", "the frontend uses pnpm", at=1, cos=0.9)
    again = cand("k", "the frontend uses pnpm now", at=2, cos=0.7)
    chosen = rank(
        [first, again, cand("o", "other", cos=0.6)],
        semantic=True,
        limit=6,
        floor=FLOOR,
        lexical_weight=WEIGHT,
        gate=None,
    )
    assert [(c.key, c.cosine) for c in chosen] == [("k", 0.9), ("o", 0.6)]


def test_the_centred_cosine_orders_while_the_gate_and_the_floor_read_the_cosine() -> None:
    pool = [
        cand("generic", "alpha", cos=0.8)._replace(order_cosine=0.1),
        cand("specific", "beta", cos=0.6)._replace(order_cosine=0.5),
        cand("under", "gamma", cos=0.45)._replace(order_cosine=0.9),  # under the floor
    ]
    assert ranked(pool) == ["specific", "generic"]
    assert ranked(pool, gate=0.8) == ["specific", "generic"]  # "generic" opens the gate
    assert ranked(pool, gate=0.81) == []  # no cosine reaches it, whatever orders them
    # without an order cosine (or with one that is no number) the cosine orders
    plain = [c._replace(order_cosine=None) for c in pool]
    assert ranked(plain) == ["generic", "specific"]
    broken = [c._replace(order_cosine=float("nan")) for c in pool]
    assert ranked(broken) == ["generic", "specific"]


def test_a_candidate_under_the_floor_takes_no_place_however_high_it_is_ordered() -> None:
    pool = [
        cand("under", "alpha", cos=0.45)._replace(order_cosine=0.9),
        cand("b", "beta", cos=0.8)._replace(order_cosine=0.5),
        cand("c", "gamma", cos=0.7)._replace(order_cosine=0.4),
    ]
    assert ranked(pool, limit=2) == ["b", "c"]


def test_a_correction_ranks_above_what_it_corrects_by_the_centred_cosine_too() -> None:
    old = cand("old", "Python is pinned to 3.12 with uv; the lock file is uv.lock.", at=1, cos=0.9)
    new = cand(
        "new", "Python is now pinned to 3.13 with uv; the lock file is uv.lock.", at=2, cos=0.1
    )
    other = cand("other", "The lock file of the frontend is pnpm-lock.yaml.", at=3, cos=0.8)
    pool = [
        old._replace(order_cosine=0.7),
        new._replace(order_cosine=0.2),
        other._replace(order_cosine=0.6),
    ]
    # lifted above the fact it corrects in the order, and past the floor with it
    assert ranked(pool) == ["new", "other"]


def unit_rows(count: int, dims: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dims)).astype(np.float32)
    rows[:, 0] += 2.0  # a direction the store's texts share
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_centred_cosines_are_the_cosines_of_the_vectors_less_the_shrunk_mean() -> None:
    rows = unit_rows(40, 16, seed=1)
    present = np.ones(40, dtype=bool)
    present[[3, 17]] = False  # no vector: zero rows, left out of the centre
    rows[~present] = 0.0
    query = unit_rows(1, 16, seed=2)[0]
    centre = StoreCentre.of(rows, present)
    point = rows[present].mean(axis=0) * (38 / (38 + CENTRE_SHRINK))
    assert np.allclose(centre.point, point, atol=1e-6)
    offset = query - point
    expected = [
        float((row - point) @ offset / (np.linalg.norm(row - point) * np.linalg.norm(offset)))
        for row in rows
    ]
    got = centred_cosines(rows @ query, query, centre)
    assert np.allclose(got[present], np.array(expected)[present], atol=1e-5)
    assert (got[~present] == 0).all()
    # the rows picked out of it, in that order, as recall takes its pool
    picked = np.array([30, 2, 9])
    some = centred_cosines((rows @ query)[picked], query, centre.rows(picked))
    assert np.allclose(some, got[picked])


def test_a_few_texts_are_centred_on_a_small_part_of_their_mean() -> None:
    rows = unit_rows(2, 8, seed=3)
    centre = StoreCentre.of(rows, np.ones(2, dtype=bool))
    assert np.allclose(centre.point, rows.mean(axis=0) * 2 / (2 + CENTRE_SHRINK))
    # two texts centred on their whole mean would point in opposite directions; shrunk, they
    # keep their own
    centred = centred_cosines(rows @ rows[0], rows[0], centre)
    assert centred[0] == pytest.approx(1.0, abs=1e-5) and centred[1] > -0.5
    assert (StoreCentre.of(rows, np.zeros(2, dtype=bool)).point == 0).all()  # none at all


def test_a_query_at_the_centre_orders_nothing_apart() -> None:
    rows = unit_rows(5, 8, seed=4)
    centre = StoreCentre.of(rows, np.ones(5, dtype=bool))._replace(point=rows[0].copy())
    assert (centred_cosines(rows @ rows[0], rows[0], centre) == 0).all()


def test_corrections_among_a_ledger_are_the_later_texts_that_add_to_an_earlier_one() -> None:
    texts = [
        "Logs are shipped to Loki and kept for 14 days.",  # corrected by 2, not by 1
        "Traces are shipped to Tempo and kept for 14 days.",  # another subject
        "Logs are shipped to Loki and are now kept for 30 days.",
        "Sensor-hub stores uploaded files on an NFS share.",
        "Timesheet-app stores uploaded files on an NFS share.",  # a sibling, not a correction
        "Logs are shipped to Loki and kept for 7 days.",  # older than what it would correct
    ]
    at = [1.0, 2.0, 3.0, 4.0, 5.0, 0.5]
    assert corrections_among(texts, at) == [[2], [], [], [], [], [0, 2]]
    assert corrections_among([], []) == []
