"""Passwords and keys a command printed, pasted below it, each with what must go and what looks
like it but must stay storable."""

from __future__ import annotations

import base64
import random

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure


def _assert_only_value_redacted(text: str, value: str, kind: str) -> None:
    """`value` is gone from every output and nothing but it was taken."""
    assert secret_kinds(text) == kind  # named, never the value
    assert redact(text) == text.replace(value, f"[REDACTED:{kind}]")


# ----------------------------------------------------- macOS keychain: security ... -w
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("security find-generic-password -s foo -w\nXk9#mm2pq", "Xk9#mm2pq"),
        ("$ security find-generic-password -a me -s github -w\nXk9#mm2pq\n$ ls", "Xk9#mm2pq"),
        ("% security find-internet-password -s example.com -w\r\nhunter22\r\n", "hunter22"),
        ("security find-generic-password -w -s foo\nS3cr3t!", "S3cr3t!"),
        ("me@mac ~ % security find-generic-password -s 'db prod' -w\nPg$tag1ng\n", "Pg$tag1ng"),
        ("```\n$ security find-generic-password -s npm -w\nTr0ub4dor&3\n```", "Tr0ub4dor&3"),
        ("security find-generic-password -a $USER -s api -w\n8f3kQz9LmXw2Pb7R", "8f3kQz9LmXw2Pb7R"),
        ("security  find-generic-password -l 'Wi-Fi' -w\n84736251", "84736251"),
        ("security find-internet-password -a bob -s git.corp -w  \nWinter2025!\nok", "Winter2025!"),
        # a password of two parts joined as a path's names are, or ending in a colon
        ("security find-generic-password -s db -w\nSummer/2024", "Summer/2024"),
        ("security find-generic-password -s db -w\nab12/cd34\n", "ab12/cd34"),
        ("security find-generic-password -s db -w\nAbc1\\Def2", "Abc1\\Def2"),
        ("security find-generic-password -s db -w\nWinter-2024:", "Winter-2024:"),
        ("security find-generic-password -s db -w\nPw2024:\n", "Pw2024:"),
    ],
)
def test_a_password_the_keychain_printed_is_redacted(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password, "password_flag")


@pytest.mark.parametrize(
    "text",
    [
        "security find-generic-password -s foo -w\nThis prints the password to stdout.",
        "security find-generic-password -s foo -w\n```",
        "PW=$(security find-generic-password -s foo -w)\necho $PW",
        "security find-generic-password -s foo -w | pbcopy\nXk9#mm2pq",
        "if security find-generic-password -s foo -w\nthen",
        "security find-generic-password -s foo -w\ndone",
        "security find-generic-password -s foo -g\nXk9#mm2pq",
        "security find-generic-password -s foo -w\nsecurity: SecKeychainSearchCopyNext: The "
        "specified item could not be found in the keychain.",
        "security find-generic-password -s foo -w\n$?",
        "security find-generic-password -s foo -w\nget_password.sh",
        "security find-generic-password -s foo -w\n<password>",
        "run `security find-generic-password -s foo -w`\nXk9#mm2pq",
        "security find-generic-password -s github -w\nOutput:\nthe token",
        "security find-generic-password -s github -w\nNote:",
        "security find-generic-password -s github -w\nsrc/main.py",
        "security find-generic-password -s github -w\nbuild/",
        "security find-generic-password -s github -w\nC:\\Users\\me",
        "security find-generic-password -s github -w\n/usr/local/bin/gh",
        "security find-generic-password -s github -w\nsrc/main2.py",
        "security find-generic-password -s github -w\ndocs/api/v2",
    ],
)
def test_what_follows_a_keychain_command_that_is_no_output_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


# ---------------------------------------------------------------- heroku auth:token
UUID = "3f1b2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
HRKU = "HRKU-AAbbCCddEEffGGhhIIjjKKllMMnnOOppQQrr"


@pytest.mark.parametrize(
    ("text", "token"),
    [
        (f"heroku auth:token\n{UUID}", UUID),
        (f"$ heroku auth:token\n{UUID}\n$ git push heroku main", UUID),
        (f"$ heroku auth:token\n{HRKU}\n", HRKU),
        (
            "$ heroku auth:token\n \u203a   Warning: token will expire 01/01/2027\n"
            " \u203a   Use heroku authorizations:create to generate a long-term token\n"
            f"{HRKU}\n$",
            HRKU,
        ),
        (f"heroku auth:token\r\n{UUID}\r\n", UUID),
        (f"heroku auth:token --json\n{UUID}", UUID),
        (f"```\nheroku auth:token\n  {UUID}\n```", UUID),
        (f"heroku auth:token\n ▸    Warning: token will expire\n{UUID}", UUID),
        (f"~/app $ heroku auth:token\n{UUID.upper()}", UUID.upper()),
    ],
)
def test_a_token_heroku_printed_is_redacted(text: str, token: str) -> None:
    _assert_only_value_redacted(text, token, "heroku_api_key")


@pytest.mark.parametrize(
    "text",
    [
        "heroku auth:token\nprints your token",
        f"heroku auth:token | pbcopy\n{UUID}",
        f"export HEROKU_API_KEY=$(heroku auth:token)\n{UUID}",
        f"heroku auth:token\n\nrequest id {UUID}",
        f"heroku auth:tokens\n{UUID}",
        f"heroku auth:whoami\n{UUID}",
        f"heroku apps:info\nid: {UUID}",
        f"heroku auth:token\nthe app id is {UUID}",
        "heroku auth:token\n<your-token>",
        f"request {UUID} failed\nheroku auth:token",
    ],
)
def test_what_follows_heroku_auth_token_that_is_no_token_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


# ----------------------------------------------------- az storage account keys list
_RANDOM = random.Random(20261204)
KEY1 = base64.b64encode(bytes(_RANDOM.randrange(256) for _ in range(64))).decode()
KEY2 = base64.b64encode(bytes(_RANDOM.randrange(256) for _ in range(64))).decode()
CREATED = "2024-01-01T00:00:00.000000+00:00"
TABLE_HEAD = (
    "CreationTime                      KeyName    Permissions    Value\n"
    "--------------------------------  ---------  -------------  " + "-" * 88 + "\n"
)


def _json_keys(*keys: str) -> str:
    objects = [
        f'  {{\n    "creationTime": "{CREATED}",\n    "keyName": "key{number}",\n'
        f'    "permissions": "FULL",\n    "value": "{key}"\n  }}'
        for number, key in enumerate(keys, start=1)
    ]
    return "[\n" + ",\n".join(objects) + "\n]"


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        (_json_keys(KEY1, KEY2), (KEY1, KEY2)),
        ("$ az storage account keys list -g rg -n acct\n" + _json_keys(KEY1), (KEY1,)),
        (f'{{"keyName": "key1", "permissions": "FULL", "value": "{KEY1}"}}', (KEY1,)),
        (f'[{{"keyName":"key2","permissions":"FULL","value":"{KEY2}"}}]', (KEY2,)),
        (f'{{"keyName": "kerb1", "permissions": "FULL", "value": "{KEY1}"}}', (KEY1,)),
        (
            f"{TABLE_HEAD}{CREATED}  key1       FULL           {KEY1}\n"
            f"{CREATED}  key2       FULL           {KEY2}",
            (KEY1, KEY2),
        ),
        (
            f"KeyName Value{' ' * 84}Permissions\n------- -----\nkey1    {KEY1} Full\n"
            f"key2    {KEY2} Full",
            (KEY1, KEY2),
        ),
        (f'"keys": [{{"keyName": "key1", "value": "{KEY2}", "permissions": "Full"}}]', (KEY2,)),
        (f'{{\n  "KeyName": "key1",\n  "Value": "{KEY1}"\n}}', (KEY1,)),
    ],
)
def test_storage_account_keys_listed_are_redacted(text: str, keys: tuple[str, ...]) -> None:
    redacted = redact(text)
    expected = text
    for key in keys:
        expected = expected.replace(key, "[REDACTED:azure_storage_key]")
    assert redacted == expected
    assert secret_kinds(text) == "azure_storage_key"


@pytest.mark.parametrize(
    "text",
    [
        '{"keyName": "key1", "permissions": "FULL", "value": "<storage-key>"}',
        '{"keyName": "key1", "value": "***"}',
        f'{{"keyName": "key1", "integrity": "sha512-{KEY1}"}}',
        f'{{"keyName": "signing", "value": "sha512-{KEY1}"}}',
        '{"keyName": "key1", "value": "' + "A" * 86 + '=="}',
        f'"integrity": "sha512-{KEY1}"',  # a package lock's digest, no keyName
        f"{TABLE_HEAD}{CREATED}  key1       FULL           $STORAGE_KEY",
        '"keyName": "key1" is the primary key; rotate it with az storage account keys renew',
        "KeyName   Permissions\n--------  -----------\nkey1      FULL\nkey2      FULL",
        f'{{"keyName": "key1", "value": "{KEY1[:44]}"}}',
    ],
)
def test_key_listings_without_a_storage_key_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
