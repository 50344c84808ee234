"""Password hashes in htpasswd and shadow lines: what must go and what looks like one but must
stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure

_BCRYPT = "$2y$05$c4WoMPo3SXsafkva.HHa6uXQZWr7oboPiC2bT/r7q1BB8I2s0BRqC"
_APR1 = "$apr1$O3JMY.Tw$AdLnLjQ/5jXF9.MTp3gHv/"
_SHA512 = "$6$rounds=5000$Kd8Jf2Lq$Zq8p1R7Jx2Kd8Jf2Lq9Zr4Tb7Wn1Yc6Vd3Kd8Jf2Lq9Zr4Tb7Wn1Yc6Vd3K"
_SHA256 = "$5$Kd8Jf2Lq9Zr4Tb7W$Zq8p1R7Jx2Kd8Jf2Lq9Zr4Tb7Wn1Yc6Vd3Kd8Jf2Lq9"
_YESCRYPT = "$y$j9T$Kd8Jf2Lq9Zr4Tb7Wn1Yc6/$Zq8p1R7Jx2Kd8Jf2Lq9Zr4Tb7Wn1Yc6Vd3Kd8Jf2Lq9"
_SHA1 = "{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g="
_ARGON2 = (
    "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0$Zq8p1R7Jx2Kd8Jf2Lq9Zr4Tb7Wn1Yc6Vd3Kd8Jf2Lq9"
)
_MD5 = "$1$Kd8Jf2Lq$Zq8p1R7Jx2Kd8Jf2Lq9Zr4"


@pytest.mark.parametrize(
    ("text", "hashed"),
    [
        ("admin:" + _APR1, _APR1),
        ("deploy:" + _BCRYPT, _BCRYPT),
        ("root:" + _SHA512 + ":19000:0:99999:7:::", _SHA512),
        ("ops:" + _SHA1, _SHA1),
        ("$ cat .htpasswd\nadmin:" + _APR1 + "\nci:" + _BCRYPT + "\n", _APR1),
        ("  jdoe:" + _SHA256 + "\r\n", _SHA256),
        ("ubuntu:" + _YESCRYPT + ":19500:0:99999:7:::", _YESCRYPT),
        ("grafana:" + _ARGON2, _ARGON2),
        ("svc.backup@corp:" + _MD5, _MD5),
        ("basic_auth_users:\nadmin:" + _BCRYPT, _BCRYPT),
        ("traefik.http.middlewares.auth.basicauth.users\nuser:" + _APR1 + "  ", _APR1),
    ],
)
def test_a_hash_in_an_htpasswd_or_shadow_line_is_redacted(text: str, hashed: str) -> None:
    redacted = redact(text)
    assert hashed not in redacted
    assert "[REDACTED:password_hash]" in redacted
    assert secret_kinds(text) == "password_hash"


def test_every_line_of_an_htpasswd_file_loses_its_hash() -> None:
    text = "admin:" + _APR1 + "\nci:" + _BCRYPT + "\n"
    assert redact(text) == "admin:[REDACTED:password_hash]\nci:[REDACTED:password_hash]\n"


@pytest.mark.parametrize(
    "text",
    [
        "root:*:19000:0:99999:7:::",  # a locked account: no hash
        "daemon:!:19000::::::",
        'fmt = "$6$%s$%s" % (salt, digest)',
        "bcrypt hashes start with $2b$12$ and a salt",
        "the hash is $2y$10$ then 53 characters",
        "admin:$apr1$salt$",  # cut short
        "cost:$2y$4$tooshort",
        "url: https://example.com/$1$2",
        "echo $1$2$3",
        "key:{SHA}short=",
        "see:" + _BCRYPT[:-10],
        "sed -e 's/:$6$/:/'",
    ],
)
def test_what_is_no_hash_line_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


# A note pasted after the hash, on its line: the hash still ends at a blank.
@pytest.mark.parametrize(
    ("text", "hashed"),
    [
        (
            "admin:$apr1$QjPrfJWe$OgwB2iPju1K6zuuR9RhhA8  <- from .htpasswd",
            "$apr1$QjPrfJWe$OgwB2iPju1K6zuuR9RhhA8",
        ),
        ("admin:" + _APR1 + "  # from the old box", _APR1),
        ("deploy:" + _BCRYPT + " (the CI user)\nci:" + _MD5, _BCRYPT),
        ("svc:" + _SHA1 + "\t// rotated in March", _SHA1),
        ("  jdoe:" + _SHA256 + " <-- this one", _SHA256),
    ],
)
def test_a_hash_with_a_note_after_it_is_redacted(text: str, hashed: str) -> None:
    redacted = redact(text)
    assert redacted.startswith(text[: text.index(hashed)] + "[REDACTED:password_hash]")
    assert hashed not in redacted
    assert text.split(hashed, 1)[1].split("\n", maxsplit=1)[0] in redacted  # the note stays


@pytest.mark.parametrize(
    "text",
    [
        "admin:$apr1$salt$  <- the hash got cut off here",
        "admin:$apr1$QjPrfJWe$  # digest missing",
        'entry = f"{user}:$apr1${salt}${digest}"  # built at runtime',
        "the format is user:$2y$10$<53 characters> per line",
        "admin:" + _APR1 + "%s  # a template",
        "deploy:$2y$05$" + "x" * 20 + " <- too short for bcrypt",
        "root:$6$ (a sha512 crypt prefix)",
        "cost:$2y$4$tooshort then text",
    ],
)
def test_what_only_looks_like_a_noted_hash_stays(text: str) -> None:
    assert find_secrets(text) == []
