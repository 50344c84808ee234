"""R assigns with `<-`: a quoted password so assigned is redacted, a call or a name is not."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    "text",
    ['password <- "Sup3rS3cret"', "db_password <- 'Sup3rS3cret'"],
)
def test_a_password_assigned_with_an_arrow_is_redacted(text: str) -> None:
    assert redact(text) == text.replace("Sup3rS3cret", "[REDACTED:credential_assignment]")


@pytest.mark.parametrize(
    "text",
    [
        'password <- readline(prompt = "Password: ")',
        'password <- Sys.getenv("DB_PASSWORD")',
        "password <- NULL",
        "password <- pw",
        "if (password <- 3) x",
    ],
)
def test_an_arrow_assigning_no_literal_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "password <- creds$password",
        "secret <- config$secret",
        "pass <- df$passed",
        "pwd <- params$wd",
        'password <- config::get("db")$password',
        "password <- fetchPassword user",  # Haskell's do notation binds with <- too
    ],
)
def test_an_arrow_assigning_code_stays_storable(text: str) -> None:
    # after <- an unquoted value is code (R's $ reads a list's member): a literal is quoted
    assert find_secrets(text) == []


def test_an_arrow_assigning_a_token_unquoted_is_still_redacted() -> None:
    text = "token <- ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    assert "ghp_" not in redact(text)
