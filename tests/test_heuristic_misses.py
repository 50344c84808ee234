"""The offline extractor on the turns it used to miss, and on look-alikes it must not keep."""

from __future__ import annotations

import json

import pytest

from orcad.capture.source import build_source
from orcad.providers.heuristic import heuristic_output

pytestmark = pytest.mark.pure

_LOG = "\n".join(
    f"npm ERR! code ERESOLVE line {i} could not resolve dependency tree" for i in range(400)
)


def _facts(user_text: str) -> list[dict[str, str]]:
    source = build_source([("user", user_text), ("assistant", "Done. I fixed the lockfile.")])
    assert source is not None and not source.truncated
    output = heuristic_output(source.text)
    return [] if output == "NOTHING" else [json.loads(line) for line in output.splitlines()]


@pytest.mark.parametrize(
    "turn",
    [
        f"Here is the install log:\n```\n{_LOG}\nremember that we use pnpm",  # fence never closed
        f"Here is the install log:\n\n{_LOG}\n\nFix it and remember that we use pnpm",
        f"{_LOG}\nok, and remember that we use pnpm",
    ],
)
def test_a_request_to_remember_at_the_end_of_a_long_turn_is_kept(turn: str) -> None:
    assert len(turn.encode()) > 24 * 1024
    assert _facts(turn) == [{"category": "project", "fact": "The project uses pnpm."}]


def test_a_request_to_remember_after_32_kib_of_pasted_log_is_kept() -> None:
    turn = f"{_LOG}\n{_LOG}\nok, and remember that we use pnpm"
    source = build_source([("user", turn), ("assistant", "Done. I fixed the lockfile.")])
    assert source is not None and source.truncated  # over the 32 KiB bound
    output = heuristic_output(source.text)
    assert [json.loads(line) for line in output.splitlines()] == [
        {"category": "project", "fact": "The project uses pnpm."}
    ]


@pytest.mark.parametrize(
    ("sentence", "fact"),
    [
        ("our staging deploys go through ArgoCD", "The staging deploys go through ArgoCD."),
        ("All production releases go through the release train.", None),
        ("we deploy staging through ArgoCD", "The team deploys staging through ArgoCD."),
        (  # the older "we always" rule words it first
            "We always ship the docs via GitHub Pages.",
            "In this project, we always ship the docs via GitHub Pages.",
        ),
    ],
)
def test_deploy_routes_are_project_facts(sentence: str, fact: str | None) -> None:
    facts = _facts(sentence)
    assert facts and facts[0]["category"] == "project"
    if fact is not None:
        assert facts[0]["fact"] == fact


@pytest.mark.parametrize(
    "turn",
    [
        "I ran the tests and they failed again, so fix them",
        "the build fails when I run it with node 18",
        "Can you fix the bug and remember to run the tests?",  # a question: not a standing rule
        "my flaky staging deploys go through hell every friday, right now",  # transient
        f"Here is the code:\n```\nwe use = pnpm(); // remember that we use pnpm\n{_LOG}",
    ],
)
def test_look_alikes_give_nothing(turn: str) -> None:
    assert _facts(turn) == []


@pytest.mark.parametrize(
    "turn",
    [
        "We decided to use Redis, I guess, not sure.",
        "We use Redis, I think.",
        "We use Redis, probably.",
        "We decided to use Redis, maybe.",
        "We always deploy on Fridays, I believe.",
        "We use pnpm if I remember correctly.",
        "We use pnpm (not 100% sure).",
        "We use pnpm, IIRC.",
    ],
)
def test_a_claim_its_user_is_unsure_of_is_not_kept(turn: str) -> None:
    # spec, What Is Captured: unverified claims are rejected
    assert _facts(turn) == []


@pytest.mark.parametrize(
    "turn",
    [
        "Always use tabs. Actually, scratch that.",
        "Never use tabs. Never mind, tabs are fine.",
        "Always use tabs. Just kidding.",
        "Remember that we use pnpm. Wait, no.",
        "Never push to main. Oh wait, ignore that.",
        "We deploy with helm. Forget that, I was wrong.",
    ],
)
def test_a_fact_taken_back_in_the_next_sentence_is_not_kept(turn: str) -> None:
    assert _facts(turn) == []


def test_a_correction_keeps_what_it_corrects_to_and_drops_what_it_takes_back() -> None:
    assert _facts("Remember that we use pnpm. Wait, no, we use yarn.") == [
        {"category": "project", "fact": "The project uses yarn."}
    ]


@pytest.mark.parametrize(
    "turn",
    [
        "Always use tabs. Don't forget that the linter checks it.",
        "We use pnpm. I think that is all for now.",
        "Never force-push to main, since it breaks the mirrors.",
    ],
)
def test_a_fact_followed_by_other_words_is_still_kept(turn: str) -> None:
    assert len(_facts(turn)) >= 1


@pytest.mark.parametrize(
    "turn",
    [
        "We use pnpm. No wait, that was the old repo.",
        "We use pnpm. Not anymore though.",
        "We use pnpm. My mistake, that is wrong.",
        "Always squash merges. Sorry, I was wrong.",
        "We use helm. That's outdated.",
        "Remember that we use pnpm. Nope.",
    ],
)
def test_a_fact_said_to_be_wrong_or_outdated_in_the_next_sentence_is_not_kept(turn: str) -> None:
    assert _facts(turn) == []


@pytest.mark.parametrize(
    "turn",
    [
        "Remember that the build is broken.",
        "Remember that the tests are failing on main.",
        "Remember that the staging server is down.",
        "Remember that the PR is ready for review.",
        "We use the hotfix branch this sprint.",
        "We use a feature flag until the end of the week.",
    ],
)
def test_the_state_of_the_work_now_is_not_kept(turn: str) -> None:
    # spec, What Is Captured: transient task state is rejected
    assert _facts(turn) == []


@pytest.mark.parametrize(
    "turn",
    [
        "Never deploy when the build is broken.",
        "We always rebase the PR before merging.",
        "Remember that the nightly job is failing-safe by design.",
        "Remember that production deploys are frozen from Friday noon until Monday morning.",
    ],
)
def test_a_rule_about_such_a_state_is_still_kept(turn: str) -> None:
    assert len(_facts(turn)) == 1


@pytest.mark.parametrize(
    "turn",
    [
        "We use the Maybe type for optional values.",
        "We always wrap results in Maybe.",
        "Always handle possibly-null values.",
        "Never return maybe-values from handlers.",
    ],
)
def test_a_hedge_word_that_names_a_thing_does_not_refuse_the_fact(turn: str) -> None:
    assert len(_facts(turn)) == 1


# what the real `claude` binary's first turn gave: "This for the project: we use pnpm, ..." and
# no second fact
@pytest.mark.parametrize(
    ("turn", "facts"),
    [
        (
            "Remember this for the project: we use pnpm, never npm, for the web app. "
            "Also the staging database is db-staging-2.",
            [
                "The project uses pnpm, never npm, for the web app.",
                "The staging database is db-staging-2.",
            ],
        ),
        (
            "Remember this: the staging database is db-staging-2.",
            ["The staging database is db-staging-2."],
        ),
        (
            "remember for this repo that releases are cut on Tuesdays",
            ["Releases are cut on Tuesdays."],
        ),
        (
            "Keep in mind the following: deploys go through ArgoCD. And the cluster is eks-prod-3.",
            ["Deploys go through ArgoCD.", "The cluster is eks-prod-3."],
        ),
        ("Please remember to run the linter before pushing.", ["Run the linter before pushing."]),
    ],
)
def test_what_a_request_to_remember_is_for_is_not_kept_as_the_fact(
    turn: str, facts: list[str]
) -> None:
    assert [fact["fact"] for fact in _facts(turn)] == facts


@pytest.mark.parametrize(
    ("turn", "facts"),
    [
        # "this" names the fact's subject when no colon or comma follows it
        (
            "Remember this function returns None when empty.",
            ["This function returns None when empty."],
        ),
        # a sentence that goes on needs a request before it, and must be a statement (one that
        # names a part of the setup, "Also the staging database is db-staging-2.", is a fact of
        # its own: see test_heuristic.py)
        (
            "We use pnpm. Also the billing module is owned by another team.",
            ["The project uses pnpm."],
        ),
        ("Remember that we use pnpm. Also can you fix the build?", ["The project uses pnpm."]),
        ("Remember that we use pnpm. Also I'm off tomorrow.", ["The project uses pnpm."]),
    ],
)
def test_sentences_after_a_request_are_kept_only_when_they_go_on_with_it(
    turn: str, facts: list[str]
) -> None:
    assert [fact["fact"] for fact in _facts(turn)] == facts


@pytest.mark.parametrize(
    ("turn", "facts"),
    [
        # what a request says it is for needs a colon or "that" after it to be left out
        ("Remember in the app folder we use Vite.", ["In the app folder we use Vite."]),
        (
            "Remember about the project deadline, it is Friday.",
            ["About the project deadline, it is Friday."],
        ),
        # a sentence that asks for work does not go on with the request to remember
        ("Remember that we use pnpm. Also fix the lint errors.", ["The project uses pnpm."]),
        ("Remember that we use pnpm. And then run the tests.", ["The project uses pnpm."]),
        (
            "Don't forget to run the migrations. Also update the changelog.",
            ["Run the migrations."],
        ),
    ],
)
def test_a_request_keeps_its_words_and_work_asked_after_it_is_no_fact(
    turn: str, facts: list[str]
) -> None:
    assert [fact["fact"] for fact in _facts(turn)] == facts
