"""A second look at the rules for codes, phrases, foreign sentences and Wi-Fi notes: what a
review with fresh look-alikes found they took that is no one's secret, and close variants of
what they are for that they missed."""

from __future__ import annotations

import pytest

from orcad.secrets import redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    "text",
    [
        # a code right after its name, then more of the sentence: an example or a status
        "Access code 4821 in the OAuth flow is exchanged for a token",
        "OAuth access code 123456 in the test fixture",
        "alarm code 1002 for low battery",
        "keypad code 0000 on first boot",
        "entry code 2001 in the ledger",
        "keypad code 1234 if you use the demo kit",
        # published test phrases: one word over and over
        "mnemonic phrase: test test test test test test test test test test test junk",
        "Hardhat's default seed phrase is test test test test test test test test test test test "
        "junk",
        "seed phrase: abandon abandon abandon abandon abandon abandon abandon abandon abandon "
        "abandon abandon about",
        # codes of documentation and tests
        "backup codes for testing: 1234 5678 are rejected by the validator",
        "the recovery code format is XXXX-XXXX-XXXX",
        "error code: AB12-CD34-EF56-GH78",
        "backup code rotation is 2024-01-15",
        "recovery codes for the docs example: 1111 2222, 3333 4444",
        # French puts a name forward with "c'est X qui": no password is given
        "Le mot de passe c'est Vault2024 qui le gère",
        "le mot de passe c'est Keycloak2 qu'on utilise pour ça",
        # a network's line that gives how it authenticates
        "wlan: corp / key: 802.1X-EAP",
        "WIFI: Office, key: WPA2-Enterprise",
        # a workflow's actions and an image, pinned to a version or a commit
        "      - uses: actions/checkout@v4",
        "- uses: aws-actions/configure-aws-credentials@v4",
        "image: nginx/nginx@v4",
        "  uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683",
        # a cloud's region, an image, a cluster's namespace, said to be the password in jest
        "the password is us-east-1",
        "the password is node-18-alpine",
        "the password is kube-system-1",
        "the password is read-only-replica-3",
    ],
)
def test_look_alikes_stay(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("garage keypad code 6093", ["6093"]),
        ("locker code 4096.", ["4096"]),
        ("the door code is 4417 (new as of monday)", ["4417"]),
        ("my pin is 4821 (do not share)", ["4821"]),
        ("my 2fa backup codes are 4829 1736 and 9921 0475", ["4829 1736", "9921 0475"]),
        # a code of three groups or more, as a password manager gives one
        ("the bitwarden emergency recovery code is AB12-CD34-EF56-GH78", ["AB12-CD34-EF56-GH78"]),
        ("i only have this backup code 7F3K-9L2M-Q8VR left for it", ["7F3K-9L2M-Q8VR"]),
        (
            "recovery codes: 1a2b3-c4d5e-f6g7h, 9z8y7-x6w5v-u4t3s",
            ["1a2b3-c4d5e-f6g7h", "9z8y7-x6w5v-u4t3s"],
        ),
        (
            "seed phrase: abandon ability able about above absent absorb abstract absurd abuse "
            "access accident",
            [
                "abandon ability able about above absent absorb abstract absurd abuse access "
                "accident"
            ],
        ),
        (
            "> admin:$apr1$abcd1234$abcdefghijklmnopqrstuv",
            ["$apr1$abcd1234$abcdefghijklmnopqrstuv"],
        ),
        (
            "- admin:$apr1$abcd1234$abcdefghijklmnopqrstuv",
            ["$apr1$abcd1234$abcdefghijklmnopqrstuv"],
        ),
        ("Le mot de passe wifi c'est Baguette2024", ["Baguette2024"]),
        ("WLAN: HomeNet_5G / key: Bananenbrot77", ["Bananenbrot77"]),
    ],
)
def test_close_variants_are_redacted(text: str, values: list[str]) -> None:
    redacted = redact(text)
    for value in values:
        assert value not in redacted
    assert redacted.count("[REDACTED:") == len(values)
