"""A generated password whose first character is `-` or `%`, as a password manager's are now
and then: taken where the same value without that character is, while flags, formats, paths
and variables that start so stay."""

from __future__ import annotations

import pytest

from orcad.secrets import contains_secret, redact

pytestmark = pytest.mark.pure

SECRETS = [
    ("spring:\n  datasource:\n    password: -IdlM8fy8y_esUm", "-IdlM8fy8y_esUm"),
    ('db_password = "-RTYj0-ElAbZmLxyUu"\nregion = "eu-west-1"', "-RTYj0-ElAbZmLxyUu"),
    ('db_password = "%jDfOv0#d3SEpK"', "%jDfOv0#d3SEpK"),
    ("ERROR connect failed: host=db user=app password=%shRHw!!pE7Q", "%shRHw!!pE7Q"),
    (
        "La contraseña de la base de datos es -RM2+Gu1VFzXi8_x y el usuario es app.",
        "RM2+Gu1VFzXi8_x",
    ),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_a_password_starting_with_a_mark_is_redacted(text: str, secret: str) -> None:
    assert contains_secret(text)
    assert secret not in redact(text)


ORDINARY = [
    "JAVA_OPTS=-Xmx4096m -XX:+UseG1GC",
    "password: --no-auth",
    'password = "%s" % pw',
    "PASSWORD=%DB_PASSWORD%",
    "password: -",
    "CFLAGS=-I/usr/include/python3.11",
    "token = '%2Fusr%2Flocal%2Fbin'",
    "secret: -DskipTests",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_flags_formats_and_variables_stay(text: str) -> None:
    assert redact(text) == text
