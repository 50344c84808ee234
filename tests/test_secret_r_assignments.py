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
