"""The offline heuristic extractor: what it keeps, what it refuses, and its output format."""

from __future__ import annotations

import json

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from orcad import limits
from orcad.providers.heuristic import (
    HeuristicProvider,
    extract_facts,
    heuristic_output,
    split_messages,
    third_person,
)

pytestmark = pytest.mark.pure


def facts(source: str) -> list[tuple[str, str]]:
    return [(f.category, f.fact) for f in extract_facts(source)]


def test_remember_that_gives_a_project_fact() -> None:
    source = "user: remember that this repository deploys with `make release`\n\nassistant: Noted."
    assert facts(source) == [("project", "This repository deploys with `make release`.")]
    assert heuristic_output(source) == json.dumps(
        {"category": "project", "fact": "This repository deploys with `make release`."}
    )


def test_stated_preference_gives_a_user_fact() -> None:
    assert facts("user: I prefer concise status updates") == [
        ("user", "The user prefers concise status updates.")
    ]


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        (
            "I always use tabs for indentation.",
            ("user", "The user always uses tabs for indentation."),
        ),
        ("i never push on fridays", ("user", "The user never pushes on fridays.")),
        (
            "I really dislike long commit messages.",
            ("user", "The user really dislikes long commit messages."),
        ),
        ("I don't like emoji in docs.", ("user", "The user does not like emoji in docs.")),
        ("I'd rather use poetry than pip.", ("user", "The user would rather use poetry than pip.")),
        (
            "My preference is small pull requests.",
            ("user", "The user's preference is small pull requests."),
        ),
        (
            "Please always run `ruff check` before committing.",
            ("feedback", "Always run `ruff check` before committing."),
        ),
        ("Never edit files under generated/.", ("feedback", "Never edit files under generated/.")),
        ("Don't ever force-push to main!", ("feedback", "Never force-push to main.")),
        ("From now on, answer in British English.", ("feedback", "Answer in British English.")),
        (
            "Remember to update the changelog with every release.",
            ("feedback", "Update the changelog with every release."),
        ),
        ("You should always add type hints.", ("feedback", "Always add type hints.")),
        ("We use pnpm, not npm.", ("project", "The project uses pnpm, not npm.")),
        (
            "We decided to drop Python 3.9 support.",
            ("project", "The team decided to drop Python 3.9 support."),
        ),
        (
            "We've agreed on squash merges only.",
            ("project", "The team agreed on squash merges only."),
        ),
        (
            "We never vendor dependencies.",
            ("project", "In this project, we never vendor dependencies."),
        ),
        (
            "We switched from pnpm to yarn.",
            ("project", "The project switched from pnpm to yarn."),
        ),
        (
            "We've migrated the database from MySQL to Postgres 16.",
            ("project", "The project migrated the database from MySQL to Postgres 16."),
        ),
        ("the rate limit is now 200 a minute", ("project", "The rate limit is now 200 a minute.")),
        (
            "Heads up: the API rate limit was raised to 500 requests a minute.",
            ("project", "The API rate limit was raised to 500 requests a minute."),
        ),
        ("Our default timeout is now 30 s.", ("project", "The default timeout is now 30 s.")),
        (
            "Our convention is to prefix branches with the ticket id.",
            ("project", "The project's convention is to prefix branches with the ticket id."),
        ),
        (
            "Deploys go through the staging pipeline first.",
            ("project", "Deploys go through the staging pipeline first."),
        ),
        (
            "This service is deployed by Argo CD.",
            ("project", "This service is deployed by Argo CD."),
        ),
        (
            "Keep in mind that the billing module is owned by another team.",
            ("project", "The billing module is owned by another team."),
        ),
        ("Remember that I prefer short answers.", ("user", "The user prefers short answers.")),
        (
            "The runbook is at https://wiki.example.com/runbooks/api.",
            ("reference", "The runbook is at https://wiki.example.com/runbooks/api."),
        ),
        (
            "Design docs live in `docs/design/`.",
            ("reference", "Design docs live in `docs/design/`."),
        ),
    ],
)
def test_each_rule(sentence: str, expected: tuple[str, str]) -> None:
    assert facts(f"user: {sentence}") == [expected]


@pytest.mark.parametrize(
    "source",
    [
        "user: Can you fix the failing test in parser.py?",
        "user: Do you remember that bug from last week?",
        "user: I fixed the import and the suite is green now.",
        "user: Run the tests.\n\nassistant: All 42 tests passed.",
        "user: Please refactor this function to be shorter.",
        "user: remember that my password is [REDACTED:password]",
        "user: remember that the deploy token lives in vault",
        "user: remember that I'm on call today",
        "user: For now, we use the mock server.",
        "user: I prefer this one.",
        "user: we switched to the other branch",
        "user: the build is now green",
        "user: the server is now up again",
        "user: the limit is now what?",
        "user: I always got that error.",
        "user: never mind",
        "user: the local docs are at http://localhost:8000/docs",
        "user: see https://github.com/org/repo/pull/12",
        "user: here is the log\n\n    Traceback (most recent call last):\n    remember that x",
        "user: ```\n# remember that the config is wrong\nwe use foo\n```",
        "user: $ echo remember that foo bar baz",
        "user: > I prefer tabs, said someone in the thread",
        "assistant: Remember that this repository deploys with `make release`. I prefer tabs.",
        "",
        "garbage without any role prefix, I prefer tabs",
    ],
)
def test_everything_else_is_nothing(source: str) -> None:
    assert heuristic_output(source) == "NOTHING"


def test_only_user_messages_count_and_blocks_continue_messages() -> None:
    source = (
        "user: Here is some context.\n\n"
        "We use Bazel for builds.\n\n"
        "assistant: We use Make, I think.\n\n"
        "user: I prefer dark themes."
    )
    assert split_messages(source)[0] == (
        "user",
        "Here is some context.\n\nWe use Bazel for builds.",
    )
    assert facts(source) == [
        ("project", "The project uses Bazel for builds."),
        ("user", "The user prefers dark themes."),
    ]


def test_list_items_and_several_sentences_per_line() -> None:
    source = (
        "user: Some rules:\n- we use uv. also, I prefer pytest over unittest.\n"
        "* Never commit secrets."
    )
    assert facts(source) == [
        ("project", "The project uses uv."),
        ("user", "The user prefers pytest over unittest."),
    ]  # "Never commit secrets." names a credential word, so it is refused


def test_at_most_eight_facts_and_no_duplicates() -> None:
    lines = [f"We use tool{i} for task{i}." for i in range(12)]
    source = "user: " + " ".join([*lines, "We use tool0 for task0."])
    found = extract_facts(source)
    assert len(found) == limits.EXTRACTOR_MAX_FACTS
    assert len({f.fact for f in found}) == len(found)


def test_facts_over_the_length_limit_are_dropped() -> None:
    long_body = "x " * 250
    assert heuristic_output(f"user: We use {long_body}") == "NOTHING"
    fitting = "y " * 180
    assert len(extract_facts(f"user: We use {fitting}")[0].fact) <= limits.EXTRACTOR_FACT_MAX_CHARS


@pytest.mark.parametrize(
    ("verb", "expected"),
    [
        ("use", "uses"),
        ("push", "pushes"),
        ("carry", "carries"),
        ("play", "plays"),
        ("go", "goes"),
        ("have", "has"),
    ],
)
def test_third_person(verb: str, expected: str) -> None:
    assert third_person(verb) == expected


message = st.builds(
    lambda role, words: f"{role}: {' '.join(words)}",
    st.sampled_from(["user", "assistant"]),
    st.lists(
        st.sampled_from(
            [
                "remember",
                "that",
                "I",
                "prefer",
                "we",
                "use",
                "always",
                "never",
                "decided",
                "to",
                "docs",
                "https://x.example/a",
                "?",
                ".",
                "\n",
                "```",
                "token",
                "tabs",
                "é",
                "`make`",
            ]
        )
        | st.text(max_size=12),
        max_size=60,
    ),
)


@given(st.lists(message, max_size=6).map("\n\n".join))
def test_output_is_always_in_the_strict_format(source: str) -> None:
    output = heuristic_output(source)
    if output == "NOTHING":
        return
    lines = output.split("\n")
    assert 1 <= len(lines) <= limits.EXTRACTOR_MAX_FACTS
    assert len(output.encode()) <= limits.EXTRACTOR_OUTPUT_MAX_BYTES
    for line in lines:
        item = json.loads(line)
        assert set(item) == {"category", "fact"}
        assert item["category"] in ("user", "feedback", "project", "reference")
        assert 1 <= len(item["fact"].strip()) <= limits.EXTRACTOR_FACT_MAX_CHARS


async def test_provider_wrapper_returns_the_same_output() -> None:
    provider = HeuristicProvider()
    source = "user: I prefer concise status updates"
    assert provider.name == "heuristic"
    assert await provider.extract(source, deadline=trio.current_time() + 1) == heuristic_output(
        source
    )


# plainly stated setup and conventions, without a request to remember (heuristic-v6)
@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        # a setup noun, then "is" and a name
        ("The database is Postgres 15.", ("project", "The database is Postgres 15.")),
        ("our default branch is master", ("project", "The default branch is master.")),
        ("Our CI is on GitHub Actions.", ("project", "The CI is on GitHub Actions.")),
        (
            "The staging environment is at https://staging.acme.dev.",
            ("project", "The staging environment is at https://staging.acme.dev."),
        ),
        ("The API port is 8080.", ("project", "The API port is 8080.")),
        ("Our main branch is called trunk.", ("project", "The main branch is called trunk.")),
        ("The main branch is protected.", ("project", "The main branch is protected.")),
        # ... or a lasting verb
        ("CI runs on Buildkite.", ("project", "CI runs on Buildkite.")),
        (
            "Staging lives at staging.example.com.",
            ("project", "Staging lives at staging.example.com."),
        ),
        (
            "The frontend talks to the backend through /api/v2.",
            ("project", "The frontend talks to the backend through /api/v2."),
        ),
        ("Versioning follows calver.", ("project", "Versioning follows calver.")),
        ("The API is written in Go 1.22.", ("project", "The API is written in Go 1.22.")),
        ("Releases are tagged with semver.", ("project", "Releases are tagged with semver.")),
        (
            "fyi the staging db was moved to db-staging-3",
            ("project", "The staging db was moved to db-staging-3."),
        ),
        # any subject, when the place is a path or a host
        (
            "Shared code lives in packages/common.",
            ("project", "Shared code lives in packages/common."),
        ),
        (
            "This is a monorepo managed with Nx.",
            ("project", "The project is a monorepo managed with Nx."),
        ),
        # conventions
        ("Tests must pass before merging.", ("project", "Tests must pass before merging.")),
        ("Every PR needs one approval.", ("project", "Every PR needs one approval.")),
        ("We target Python 3.11.", ("project", "The project targets Python 3.11.")),
        ("We're on Node 20.", ("project", "The project is on Node 20.")),
        ("We lint with eslint.", ("project", "In this project, we lint with eslint.")),
        (
            "We follow trunk-based development.",
            ("project", "In this project, we follow trunk-based development."),
        ),
        (  # "we deploy with": the preposition right after the verb
            "We deploy with Helm charts in deploy/helm.",
            ("project", "The team deploys with Helm charts in deploy/helm."),
        ),
        ("We deploy to Fly.io.", ("project", "The team deploys to Fly.io.")),
        # instructions
        ("Use yarn, not npm.", ("feedback", "Use yarn, not npm.")),
        ("use uv instead of pip", ("feedback", "Use uv instead of pip.")),
        (
            "Prefer composition over inheritance.",
            ("feedback", "Prefer composition over inheritance."),
        ),
        (
            "Use snake_case for database columns.",
            ("feedback", "Use snake_case for database columns."),
        ),
        ("Don't use default exports.", ("feedback", "Don't use default exports.")),
        ("Keep PRs under 400 lines.", ("feedback", "Keep PRs under 400 lines.")),
        ("Lint with ruff; format with black.", ("feedback", "Lint with ruff; format with black.")),
        # said in passing after a request
        (
            "add a test for the parser, btw CI runs on Buildkite",
            ("project", "CI runs on Buildkite."),
        ),
        (
            "Fix the import error. Our package manager is uv.",
            ("project", "The package manager is uv."),
        ),
    ],
)
def test_each_setup_rule(sentence: str, expected: tuple[str, str]) -> None:
    assert facts(f"user: {sentence}\n\nassistant: OK.") == [expected]


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Remember that our CI is on GitHub Actions.", "Our CI is on GitHub Actions."),
        ("remember that we deploy with make release", "We deploy with make release."),
    ],
)
def test_a_request_to_remember_keeps_its_own_words(sentence: str, expected: str) -> None:
    assert facts(f"user: {sentence}") == [("project", expected)]


def test_a_setup_fact_after_another_fact_is_kept_without_a_request() -> None:
    assert facts("user: We use pnpm. Also the staging database is db-staging-2.") == [
        ("project", "The project uses pnpm."),
        ("project", "The staging database is db-staging-2."),
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        # "is" and no name: the state of the thing now
        "The database is locked.",
        "The CI is red.",
        "The staging db is full.",
        "The cache is stale.",
        "The docs are outdated.",
        "The build is OK now.",
        "Staging is at 100% CPU.",
        "The main branch is 3 commits ahead.",
        "The database is migrated.",
        # no setup noun, or someone's own copy
        "This branch is called wip-login.",
        "My branch is called fix-auth.",
        "The function is called twice.",
        "The error is in src/app.py.",
        "The file lives in src/ now.",
        "The patch lives in /tmp/patch.diff.",
        "I'm on Python 3.11 locally.",
        "Staging is deployed with your change.",
        # trouble, a state of the work, a hedge, a question, a credential
        "The job runs on Buildkite and fails.",
        "CI runs on Buildkite but the lint job times out.",
        "The server is Ubuntu 22.04 on my machine.",
        "The CI is currently on the old runner.",
        "The database is slow again.",
        "Maybe staging lives at staging2.example.com.",
        "CI runs on Buildkite, I think.",
        "is the database postgres?",
        "Secrets management is Vault.",
        # about this piece of work only
        "The frontend uses React Query for this page.",
        "Use a set instead of a list here.",
        "Use Postgres instead of SQLite for this test.",
        "Use the second query instead of the first.",
        "Use Promise.all instead of the loop.",
        "Use map instead of this for loop.",
        "Prefer early returns over these nested ifs.",
        "Prefer the first one over the second.",
        "Use the existing helper for that.",
        "Don't use it.",
        "Avoid the global.",
        "Keep the function short.",
        "Deploy with the new image.",
        "Run the tests with pytest -x.",
        "Build with --release.",
        "Test with Python 3.12 too.",
        "Tests need fixing.",
        "The tests need to be rewritten.",
        "Tests should be faster.",
        "We're on the review step.",
        "We follow up next week.",
        "We target the end of the month.",
    ],
)
def test_setup_look_alikes_give_nothing(sentence: str) -> None:
    assert heuristic_output(f"user: {sentence}\n\nassistant: OK.") == "NOTHING"


# A credential the redaction did not recognise is still never kept: what the rules would keep in
# the user's own words is refused when it gives an account its password, a PIN, a door code or
# a pass, or (kept as written) speaks of logging in with a value
@pytest.mark.parametrize(
    ("sentence", "value"),
    [
        ("remember that the jenkins creds are admin / qwerty77 for the nightly job", "qwerty77"),
        ("keep in mind the teamcity guest account is guest / bluekitten", "bluekitten"),
        ("don't forget the printer web ui takes admin/Biscuit2022", "Biscuit2022"),
        ("remember the mail test login is qa@acme.test / Marvin42", "Marvin42"),
        ("remember the ftp pass is literally just autumn", "autumn"),
        ("remember the grafana admin pass is rex2019, i always forget it", "rex2019"),
        ("remember root on the old box is trustno1", "trustno1"),
        ("remember the nextcloud admin is Dexter2013", "Dexter2013"),
        ("remember the wifi in the lake house is Gouda!77", "Gouda!77"),
        ("remember the default pin on the new routers is 482913", "482913"),
        ("remember the server room door code is 7431", "7431"),
        ("keep in mind the vault recovery code is AB12-CD34-EF56", "AB12-CD34-EF56"),
        ("remember the console login is Administrator zaq12wsx", "zaq12wsx"),
        ("remember that you log into grafana with viewer and tulipgarden", "tulipgarden"),
        ("remember to sign in with ops and maplesyrup before the deploy", "maplesyrup"),
        ("remember the kiosk tablets unlock with monkey123", "monkey123"),
        ("Always log in to jenkins as admin / qwerty77.", "qwerty77"),
        ("remember the guest router key is 87654321", "87654321"),
        ("remember you log into the nas through the vpn as admin with Biscuit99", "Biscuit99"),
    ],
)
def test_a_credential_the_redaction_missed_is_not_kept(sentence: str, value: str) -> None:
    kept = extract_facts(f"user: {sentence}\n\nassistant: OK.")
    assert not any(value in fact.fact for fact in kept), kept


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("remember admin rights come from the eng-admins google group", "Admin rights come"),
        ("remember the router admin page is only reachable from the wired lan", "The router"),
        ("keep in mind iot devices go on their own vlan, not the main wifi", "Iot devices"),
        ("remember that we pin node 20 because of the canvas addon", "We pin node 20"),
        ("remember that the admin/ folder holds the back office pages", "The admin/ folder"),
        ("Always make sure the tests pass before you push.", "Always make sure the tests pass"),
        ("remember that grafana logins go through okta now", "Grafana logins go through okta"),
        ("keep in mind that on the wiki you sign in with your github account", "On the wiki"),
    ],
)
def test_access_talk_without_a_value_is_still_kept(sentence: str, expected: str) -> None:
    kept = extract_facts(f"user: {sentence}\n\nassistant: OK.")
    assert [fact.fact for fact in kept if fact.fact.startswith(expected)], kept
