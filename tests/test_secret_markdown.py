"""Credentials written in Markdown (a name in emphasis, a value in backticks) or in full-width
forms: what must go, and Markdown that looks like it but must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure

PASSWORD = "Xk9mm2pqLw77"
KEY = "Zq8vN3xLp0Rt5wYc"
TOKEN = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"


def full_width(text: str) -> str:
    return "".join(chr(ord(character) + 0xFEE0) for character in text)


# each was stored whole by `remember`, `memory.manage` and turn redaction
@pytest.mark.parametrize(
    ("text", "value"),
    [
        (f"**Password**: `{PASSWORD}`", PASSWORD),
        (f"**Password:** {PASSWORD}", PASSWORD),
        (f"*password*: {PASSWORD}", PASSWORD),
        (f"__password__ = {PASSWORD}", PASSWORD),
        (f"_password_: {PASSWORD}", PASSWORD),
        (f"`DB_PASSWORD`: `{PASSWORD}`", PASSWORD),
        (f"- **DB password**: {PASSWORD}", PASSWORD),
        (f"The root password: **{PASSWORD}**", PASSWORD),
        (f"**API_KEY**=`{KEY}`", KEY),
        (f"Staging DB: **Password**: `{PASSWORD}`", PASSWORD),
        (f"password\uff1a{PASSWORD}", PASSWORD),  # a full-width colon
        (f"notes\n\n**Passwort**: {PASSWORD}\n", PASSWORD),
        (f"my token {full_width(TOKEN)} for the CI", full_width(TOKEN)),
        (f"\u200b**Password**: `{PASSWORD}`", PASSWORD),  # and a character nobody sees
    ],
)
def test_a_credential_written_in_markdown_or_full_width_forms_is_found(
    text: str, value: str
) -> None:
    kind = secret_kinds(text)
    assert kind
    # the value alone is taken: the marks around it stay
    assert redact(text) == text.replace(value, f"[REDACTED:{kind}]")


def test_settings_in_markdown_on_several_lines_are_each_found_in_place() -> None:
    text = (
        "Deploy notes\n"
        f"- **Password**: `{PASSWORD}`\n"
        "- **Host**: `db.internal`\n"
        f"- **API key**: `{KEY}`\n"
    )
    redacted = redact(text)
    assert PASSWORD not in redacted and KEY not in redacted
    assert "- **Host**: `db.internal`" in redacted
    assert redacted.startswith("Deploy notes\n- **Password**: `[REDACTED:")


@pytest.mark.parametrize(
    "text",
    [
        "Use `password: str` in the model",
        "**Note**: the `sort_key` is `name`",
        "use __init__.py and _private_ helpers",
        "run `security find-generic-password -s foo -w`\nXk9#mm2pq",
        "**Password**: see the vault",
        "the `token` field is optional; **auth** happens upstream",
        "`API_KEY` is read from the environment",
        "def f(*args, **kwargs): pass",
    ],
)
def test_markdown_that_names_a_credential_without_one_stays_storable(text: str) -> None:
    assert find_secrets(text) == []
