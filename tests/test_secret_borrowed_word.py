"""The English word "password" in a Spanish, French, German, Italian or Portuguese sentence,
before that language's verb ("el password es X"), and R's `<-` assignment."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("el password es Xk9#mPq2", "Xk9#mPq2"),
        ("el password del servidor es Xk9#mPq2", "Xk9#mPq2"),
        ("le password est Soleil2024", "Soleil2024"),
        ("das Password ist Geheim2024", "Geheim2024"),
        ("la password è Girasole2024", "Girasole2024"),
        ("o password é Mudar@123", "Mudar@123"),
    ],
)
def test_the_english_word_before_another_languages_verb_gives_a_password(
    text: str, password: str
) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_statement]")


@pytest.mark.parametrize(
    "text",
    [
        "el password es obligatorio",
        "das Password ist abgelaufen",
        "the password est. value is unknown",
        "password es un campo requerido",
        "le password est trop court",
    ],
)
def test_the_english_word_before_a_describing_word_stays_storable(text: str) -> None:
    assert find_secrets(text) == []
