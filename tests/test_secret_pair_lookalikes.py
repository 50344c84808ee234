"""Look-alikes of a user and password pasted as a pair, and of a vendor's key: links to a line
of a file, wiki pages, file names with `&`, words set side by side in prose, issue-tracker
qualifiers, and the camel-case names of flags, messages and handlers. A review with fresh
look-alikes found the pair and vendor-key rules took all of these; none is a secret."""

from __future__ import annotations

import pytest

from orcad.secrets import redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    "text",
    [
        # a file's line, a page's anchor
        "see src/app.tsx#L42",
        "the bug is in lib/parser.ts#L42-L57",
        "check server/Main.java#L88 for the NPE",
        "diff: web/Page.vue#L12 vs web/Page.vue#L19",
        "[API](src/Api.ts#L10-L20)",
        "[setup guide](guide/Setup.md#Step-2)",
        "the anchor is wiki/Home#Section-2",
        "see wiki/FAQ#Q1-Install in the repo",
        "confluence/Runbook#Step3-Restart",
        "Notion: Eng/Onboarding#Week1",
        "jdoe/Dotfiles2#readme",
        "git log dev/Sprint12#Retro",
        "git checkout main/Release-2.0!Hotfix3",
        # file and folder names
        "mv notes/Meeting&Notes2024.md archive/",
        "vim config/Dev&Test1.yaml",
        "data/Sales%Q1_2024.csv",
        "Go to Settings/Privacy&Security2 in Chrome",
        # words side by side in prose, formulas, menus
        "Sales / Marketing&Ops2 headcount",
        "iOS/Android&Web2 parity",
        "Acme/Widget2!Pro is the product name",
        "movies/Star Wars/Episode4!Remastered",
        "Dashboard | Settings | Users&Roles2",
        "ping jane@acme.io with Q3&Q4Plan",
        "reach me at jane@acme.io with Questions?2",
        # qualifiers and tags
        "FIXME:Race1&Lock issue",
        "milestone:Q3&Release2",
        "Ticket:ABC-123!Blocker",
        "iam:PassRole#Policy2",
        "topic:Orders2#partition",
        "title:Hello!World2",
        "nginx:1.25&Alpine3",
        "Owner:Team-A&B2",
        "reply to ops@corp.io with Logs2024!",
        # names of flags, messages, handlers and keys of a keyboard
        "Flag key: enableCheckoutRedesign2024",
        "Message key: loginErrorInvalidEmail2",
        "Query key: useInfiniteProjects2Query",
        "Metric key: httpRequestDurationSeconds2",
        "Locale key: checkoutButtonLabelV2",
        "Kafka key: OrderCreatedEvent2024",
        "Feature key: NewCheckoutFlowV2Beta",
        "Enter key: submitFormOnEnterPress2",
        "Escape key: handleEscapeKeyPress2",
        "Ctrl key: isCtrlKeyPressedNow1",
        # a product or a browser to log in with
        "try logging in with Okta2FA",
        "try logging in with Firefox128!",
        "log in with AzureAD-B2C",
    ],
)
def test_pair_and_key_look_alikes_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "password"),
    [
        # (the pairs these rules were written for are test_secret_chat_pastes.py's; these
        # are a user no account is named, announced on the line or the one above)
        ("creds for staging:\nreadonly / R3adOnly!Stg", "R3adOnly!Stg"),
        ("login for the wiki: jdoe/Wiki#Acc3ss", "Wiki#Acc3ss"),
        ("vpn creds\njsmith | Vpn#Acc3ss", "Vpn#Acc3ss"),
        ("ssh account: deploy:Dep1oy&Ship", "Dep1oy&Ship"),
        (
            "Mistral key: UpZuDDHo3WorUqLxHEzX9guCpbRPrpxB (MISTRAL_API_KEY)",
            "UpZuDDHo3WorUqLxHEzX9guCpbRPrpxB",
        ),
        ("Cohere key: Zq4Lk9WmPx2Rt7Vn3Bc8Hd1Yf6Gs", "Zq4Lk9WmPx2Rt7Vn3Bc8Hd1Yf6Gs"),
    ],
)
def test_pairs_and_vendor_keys_still_go(text: str, password: str) -> None:
    redacted = redact(text)
    assert password not in redacted
    assert redacted.count("[REDACTED:") == 1
