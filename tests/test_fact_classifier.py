"""The offline extractor's fact classifier: what it reads, what it keeps, when it stays out."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from orcad.providers import fact_classifier
from orcad.providers.fact_classifier import SentenceJudge, classifier_digest, read_sentences
from orcad.providers.heuristic import (
    JUDGED_SENTENCES_MAX,
    HeuristicProvider,
    extract_facts,
    judged_text,
    prose_sentences,
)
from orcad.recall.embedding import Embeddings
from orcad.recall.local_models import BUILTIN_DIR
from orcad.secrets import redact

pytestmark = pytest.mark.inprocess

PLAIN_FACT = "the billing service owns the invoices table; nobody else writes to it"


def source(*user: str) -> str:
    return "\n\n".join(f"user: {text}\n\nassistant: OK." for text in user)


def facts(text: str, judge: Callable[[str], str | None] | None) -> list[tuple[str, str]]:
    return [(f.category, f.fact) for f in extract_facts(source(text), judge)]


@pytest.fixture(scope="module")
def builtin() -> Iterator[Embeddings]:
    yield Embeddings.load("builtin")


@pytest.fixture(scope="module")
def judge(builtin: Embeddings) -> SentenceJudge:
    return SentenceJudge(builtin, fact_classifier.load())


class Recording:
    """A judge that calls every sentence it is given a project fact, and keeps them."""

    model = "recording"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, sentence: str) -> str | None:
        self.seen.append(sentence)
        return "project"


# --- the shipped fit ---------------------------------------------------------------------------


def test_the_shipped_classifier_is_fitted_on_the_shipped_sentences_for_the_built_in_model() -> None:
    classifier = fact_classifier.load()
    assert classifier is not None
    described = (BUILTIN_DIR / "MODEL.txt").read_text(encoding="utf-8")
    model_id = next(line[3:].strip() for line in described.splitlines() if line.startswith("id:"))
    assert classifier.model_id == model_id
    # after a change to the sentences, the constants or the model: scripts/fit_fact_classifier.py
    assert classifier.digest == classifier_digest(model_id, fact_classifier.training_rows())


def test_the_training_sentences_are_labelled_and_hold_every_kind() -> None:
    labels = {label for label, _sentence in read_sentences()}
    assert labels == set(fact_classifier.LABELS)


def test_a_training_file_with_an_unknown_label_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "sentences.tsv"
    path.write_text("# a comment\nnone\tok thanks\nfacts\twe use pnpm\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"sentences\.tsv:3: "):
        read_sentences(path)


def test_a_damaged_classifier_file_is_no_classifier(tmp_path: Path) -> None:
    path = tmp_path / "fact_classifier.npz"
    path.write_bytes(b"PK\x03\x04 not a zip at all")
    assert fact_classifier.load(path) is None
    assert fact_classifier.load(path.with_name("missing.npz")) is None


# --- with the built-in model -------------------------------------------------------------------


def test_a_plainly_stated_fact_no_rule_keeps_is_kept_by_the_classifier(
    judge: SentenceJudge,
) -> None:
    assert facts(PLAIN_FACT, None) == []
    assert facts(PLAIN_FACT, judge) == [
        ("project", "The billing service owns the invoices table; nobody else writes to it.")
    ]
    assert judge.model.startswith("fact-classifier-")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("don't add comments that just restate what the code does", "feedback"),
        ("the on-call runbook lives in confluence under the OPS space", "reference"),
        ("I'm on a mac with fish shell so give me fish syntax when you show env vars", "user"),
    ],
)
def test_the_classifier_gives_each_kind(judge: SentenceJudge, text: str, kind: str) -> None:
    [(category, _fact)] = facts(text, judge)
    assert category == kind


@pytest.mark.parametrize(
    "text",
    [
        "can you cut down the mocks in these tests",
        "the deploy to netlify failed again, look at the logs",
        "thanks, that works now",
        "rename this variable to count and move it up",
    ],
)
def test_requests_reports_and_chatter_stay_out(judge: SentenceJudge, text: str) -> None:
    assert facts(text, judge) == []


@pytest.mark.parametrize(
    "text",
    [
        # each of these the built-in model judges a fact: personal data and a password the
        # redaction does not know as one
        "My email is jane.doe@acme-corp.com and my phone number is +1 415 555 0199.",
        "My social security number is 078-05-1120.",
        "My passport number is X1234567.",
        "My date of birth is 1985-03-14.",
        "My credit card ends in 4242 and expires 09/27.",
        "My home address is 12 Elm Street, Springfield.",
        "The shared Grafana account is ops@acme.io with pw Spring2024!",
        "The shared test account uses pw Winter2025 everywhere.",
    ],
)
def test_personal_data_and_passwords_are_never_kept(judge: SentenceJudge, text: str) -> None:
    assert facts(redact(text), judge) == []


def test_a_shared_contact_or_a_habit_is_still_kept(judge: SentenceJudge) -> None:
    kept = facts("Security reports go to security@acme.io.", judge)
    assert kept == [("reference", "Security reports go to security@acme.io.")]
    kept = facts("I read on my phone a lot so keep code blocks narrow.", judge)
    assert kept == [("user", "I read on my phone a lot so keep code blocks narrow.")]


def test_a_request_to_remember_a_password_the_redaction_misses_keeps_nothing() -> None:
    text = "Remember that the shared Grafana account is ops@acme.io with pw Spring2024."
    assert facts(redact(text), None) == []


def test_a_fact_said_after_a_request_is_kept_without_the_request(judge: SentenceJudge) -> None:
    text = "fix the webhook test. context: the payments team owns the stripe integration"
    assert facts(text, None) == []
    assert facts(text, judge) == [("project", "The payments team owns the stripe integration.")]


def test_with_another_model_the_classifier_stays_out_and_says_so() -> None:
    static = SentenceJudge(Embeddings.load("static"), fact_classifier.load())
    assert static(PLAIN_FACT) is None
    assert static.model == ""
    off = SentenceJudge(Embeddings.load("none"), fact_classifier.load())
    assert off(PLAIN_FACT) is None
    assert off.model == ""


def test_a_classifier_that_fails_leaves_the_rules_their_facts(builtin: Embeddings) -> None:
    classifier = fact_classifier.load()
    assert classifier is not None
    classifier.kinds = classifier.kinds[:, :-2]  # a bug's product: rows too short to multiply
    judge = SentenceJudge(builtin, classifier)
    assert judge(PLAIN_FACT) is None
    assert facts(f"{PLAIN_FACT}. we use pnpm.", judge) == [("project", "The project uses pnpm.")]


def test_without_a_classifier_file_the_judge_stays_out(builtin: Embeddings) -> None:
    judge = SentenceJudge(builtin, None)
    assert judge(PLAIN_FACT) is None
    assert judge.model == ""
    assert fact_classifier.sentence_judge("openai", builtin) is None


# --- what reaches the classifier ---------------------------------------------------------------


def test_questions_fragments_and_rule_facts_never_reach_the_classifier() -> None:
    judge = Recording()
    kept = facts(
        "is the db postgres 15? ok thanks. we use pnpm. btw staging refreshes every sunday",
        judge,
    )
    assert judge.seen == ["staging refreshes every sunday"]
    assert kept == [
        ("project", "The project uses pnpm."),
        ("project", "Staging refreshes every sunday."),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "what's the default branch",
        "do we deploy on fridays",
        "Add a --verbose flag to the CLI.",
        "set up a CI job for the docs",
        "can you make the cdn cloudflare",
        "let's keep the cache in redis",
        "explain git rebase -i like im five",
    ],
)
def test_questions_and_requests_without_their_marks_never_reach_the_classifier(
    text: str,
) -> None:
    judge = Recording()
    assert facts(text, judge) == []
    assert judge.seen == []


@pytest.mark.parametrize(
    "text",
    [
        "merge requests need two approvals from the platform team",
        "build artifacts go to the shared bucket",
        "push notifications go through firebase",
    ],
)
def test_a_verb_that_is_a_noun_here_still_reaches_the_classifier(text: str) -> None:
    judge = Recording()
    facts(text, judge)
    assert judge.seen == [text]


def test_a_hedge_or_a_credential_word_is_refused_before_the_classifier_reads_it() -> None:
    judge = Recording()
    assert facts("iirc the staging refresh runs weekly on sundays", judge) == []
    assert facts("the deploy token lives in the ci settings page", judge) == []
    assert judge.seen == []


def test_at_most_a_bounded_number_of_sentences_are_judged() -> None:
    seen: list[str] = []

    def judge(sentence: str) -> str | None:
        seen.append(sentence)
        return None

    text = " ".join(f"the service number {n} runs in region {n}." for n in range(100))
    assert facts(text, judge) == []
    assert len(seen) == JUDGED_SENTENCES_MAX


def test_questions_do_not_use_up_the_classifiers_bound() -> None:
    judge = Recording()
    questions = " ".join(f"is service {n} in region {n}?" for n in range(JUDGED_SENTENCES_MAX + 6))
    kept = facts(f"{questions} the billing service owns the invoices table.", judge)
    assert judge.seen == ["the billing service owns the invoices table."]
    assert kept == [("project", "The billing service owns the invoices table.")]


@pytest.mark.parametrize(
    "text",
    [
        "the prod db user is app_rw and its pass is Xk29ab77",
        "the admin console login is root with toor",
        "the jenkins admin user is admin and hunter2 gets you in",
        "alerts post to hooks.slack.com/services/T000/B000/XXXXXXXX",
        "the staging box username is deploy and it has sudo",
        "owners of the api " + "and the workers " * 40 + "are the platform team",
    ],
)
def test_what_could_not_be_kept_as_written_never_reaches_the_classifier(text: str) -> None:
    judge = Recording()
    assert facts(text, judge) == []
    assert judge.seen == []


def test_a_request_to_remember_that_no_rule_parses_is_judged_without_it() -> None:
    judge = Recording()  # the rules keep no body that starts with "my" or "I"
    assert facts("remember that my laptop is a mac with fish as its shell", judge) == [
        ("project", "My laptop is a mac with fish as its shell.")
    ]
    assert judge.seen == ["my laptop is a mac with fish as its shell"]


def test_e_g_and_i_e_do_not_end_a_sentence() -> None:
    text = "Our branch naming is <ticket>-<short-desc>, e.g. PAY-123-fix-refunds. Thanks!"
    assert prose_sentences(text) == [
        "Our branch naming is <ticket>-<short-desc>, e.g. PAY-123-fix-refunds.",
        "Thanks!",
    ]


def test_fillers_and_lead_ins_are_not_read_as_the_fact() -> None:
    assert judged_text("pls answer in british english") == "answer in british english"
    assert judged_text("context: the CDN is cloudflare R2") == "the CDN is cloudflare R2"
    assert judged_text("fix the test, fyi we pin node 20") == "we pin node 20"
    assert judged_text("is the db postgres 15?") is None
    assert judged_text("ok sure") is None


# --- the provider ------------------------------------------------------------------------------


async def test_a_slow_classifier_leaves_the_rules_their_facts_before_the_deadline() -> None:
    release = threading.Event()

    class Stuck(Recording):
        def __call__(self, sentence: str) -> str | None:
            release.wait(10.0)
            return None

    provider = HeuristicProvider(Stuck())
    started = trio.current_time()
    try:
        output = await provider.extract(
            source(f"{PLAIN_FACT}. we use pnpm."), deadline=started + 0.5
        )
        assert trio.current_time() - started < 0.5  # before the worker's own deadline
    finally:
        release.set()
    assert output == '{"category": "project", "fact": "The project uses pnpm."}'


async def test_the_provider_records_the_classifier_as_its_model(judge: SentenceJudge) -> None:
    provider = HeuristicProvider(judge)
    output = await provider.extract(source(PLAIN_FACT), deadline=trio.current_time() + 30.0)
    assert "billing service owns the invoices table" in output
    assert provider.model == judge.model != ""
    assert HeuristicProvider().model == ""
