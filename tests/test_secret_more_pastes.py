"""More secrets people paste in notes and chats: a user and password joined by a colon, each
with what must go and what looks like it but must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure


def _assert_only_value_redacted(text: str, value: str) -> None:
    """`value` is gone from every output and nothing but it was taken."""
    redacted = redact(text)
    assert value not in redacted
    assert value not in secret_kinds(text)
    assert redacted == text.replace(value, "[REDACTED:password_statement]")


# ------------------------------------------------------ a user and password joined by a colon
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("creds admin:Hunter2!", "Hunter2!"),
        ("login for staging is deploy:Summer2024!", "Summer2024!"),
        ("the staging login is ops:Deploy2024", "Deploy2024"),
        ("account svc_backup:Backup#2024 on the nas", "Backup#2024"),
        ("basic auth admin:P@ssw0rd for the dashboard", "P@ssw0rd"),
        ("Creds for grafana -> admin:Gr4fana!", "Gr4fana!"),
        ("logon jdoe:Winter2025!", "Winter2025!"),
        ("ssh login pi:Raspberry3!", "Raspberry3!"),
        ("creds (staging): deploy:s3cr3t-pass.", "s3cr3t-pass"),
        ("the router's login is 'root:Xk9#mm2pq'", "Xk9#mm2pq"),
        ("user/pass for the ftp box is backup:Xk9#mm2", "Xk9#mm2"),
        ("CREDENTIALS\tjenkins:Jenk1ns!2024", "Jenk1ns!2024"),
    ],
)
def test_a_user_and_password_joined_by_a_colon_lose_the_password(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password)


@pytest.mark.parametrize(
    "text",
    [
        "login to the db at localhost:5432",
        "creds are cached in redis:6379",
        "login to the registry, then pull python:3.12-slim",
        "auth image is node:20-alpine",
        "account settings use level:info",
        "the login ran at 12:30:45",
        "auth scope: read:user",
        "login, then install npm:lodash@4",
        "the account folder is C:\\Users\\me",
        "the auth code uses std::vector",
        "login from fe80::1ff:fe23:4567:890a",
        "auth ref: main:src/app.py",
        "login.ts error TS2345: Argument of type",
        "auth failed at file.js:12:5",
        "login image sha256:abcd1234ef",
        "auth scopes user:email repo",
        "account region prod:us-east-1",
        "creds env: production",
        "author admin:Hunter2!",
        "the account id is acct:12345abc",
        "creds are in the k8s secret ns:default",
    ],
)
def test_colons_that_join_no_user_and_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


def test_a_colon_pair_without_a_credential_word_stays_storable() -> None:
    """A chosen-looking value after a colon is no credential unless a word announces one."""
    assert find_secrets("see release:Summer2024! for the changes") == []
