"""Secrets once stored in clear: pairs listed under a credential word, each with what must go
and what looks like it but must stay storable."""

from __future__ import annotations

import time

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure


def _assert_only_values_redacted(text: str, values: tuple[str, ...], kind: str) -> None:
    """Every value is gone from every output and nothing but them was taken."""
    redacted = redact(text)
    expected = text
    for value in values:
        assert value not in redacted
        expected = expected.replace(value, f"[REDACTED:{kind}]")
    assert redacted == expected
    assert secret_kinds(text) == kind  # named, never a value


# ------------------------------------------- pairs listed, numbered, under a credential word
@pytest.mark.parametrize(
    ("text", "passwords"),
    [
        ("creds:\n1. admin:Hunter2!\n2. ops:Deploy2024", ("Hunter2!", "Deploy2024")),
        ("creds:\n- admin:Hunter2!\n- ops:Deploy2024", ("Hunter2!", "Deploy2024")),
        ("logins\n1) root:Xk9#mm2pq\n2) deploy:Summer2024!", ("Xk9#mm2pq", "Summer2024!")),
        ("Credentials:\n  1. jdoe:Winter2025!\n", ("Winter2025!",)),
        (
            "db accounts\n* app:Pg$tag1ng\n* ro:Read0nly!\n* admin:Adm1n#2024",
            ("Pg$tag1ng", "Read0nly!", "Adm1n#2024"),
        ),
        ("staging creds\r\n1. admin:Hunter2!\r\n2. ops:Deploy2024\r\n", ("Hunter2!", "Deploy2024")),
        (
            "auth for the vms:\n10. pi:Raspberry3!\n11. ubuntu:Ubuntu#22",
            ("Raspberry3!", "Ubuntu#22"),
        ),
        ("user/pass list\n• alice:Alic3!pw\n• bob:B0b$ecret", ("Alic3!pw", "B0b$ecret")),
        (
            "creds\n1. a:Abcd123!\n2. b:Bcde234!\n3. c:Cdef345!\n4. d:Defg456!",
            ("Abcd123!", "Bcde234!", "Cdef345!", "Defg456!"),
        ),
        ("the login for jenkins\n\t1. jenkins:Jenk1ns!2024.", ("Jenk1ns!2024",)),
        ("account list:\n1. svc_backup:Backup#2024\n2. svc_ci:C1pipe!", ("Backup#2024", "C1pipe!")),
    ],
)
def test_pairs_listed_under_a_credential_word_are_redacted(
    text: str, passwords: tuple[str, ...]
) -> None:
    _assert_only_values_redacted(text, passwords, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "release notes\n1. admin:Hunter2!\n2. ops:Deploy2024",  # no credential word above
        "steps:\n1. run:Build2024\n2. deploy:Stage3!",  # no word announcing a credential
        "login flow\n1. open localhost:5432\n2. sign in",
        "account settings\n1. region:us-east-1\n2. zone:eu-west-2",
        "creds\n1. sha256:abcdef123456\n2. md5:0123456789ab",
        "login\n1. main:src/app.py\n2. test:tests/test_app.py",
        "auth\n1. npm:lodash@4\n2. pypi:requests2",
        "credentials\n1. 12:30:45\n2. 13:45:00",
        "login\n1. user:pass\n2. admin:admin",
        "creds\n1. python:3.12-slim\n2. node:20-alpine",
        "creds\n1. see the vault\n2. ops:Deploy2024",  # the list is broken by prose
        "login page\n1. error:Timeout3\n2. warning:Retry2x",
    ],
)
def test_pairs_listed_elsewhere_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


def test_a_pair_after_a_blank_line_in_the_list_stays_storable() -> None:
    text = "creds:\n1. admin:Hunter2!\n\n2. ops:Deploy2024"
    assert redact(text) == "creds:\n1. admin:[REDACTED:password_statement]\n\n2. ops:Deploy2024"


# ------------------------------------ seeds in groups over lines, or after "two-factor" alone
@pytest.mark.parametrize(
    ("text", "seed"),
    [
        ("totp key: JBSW Y3DP\nEHPK 3PXP", "JBSW Y3DP\nEHPK 3PXP"),
        ("two-factor: JBSW Y3DP EHPK 3PXP", "JBSW Y3DP EHPK 3PXP"),
        ("two factor key: GEZD GNBV GY3T QOJQ", "GEZD GNBV GY3T QOJQ"),
        ("2-step verification key: jbsw y3dp ehpk 3pxp", "jbsw y3dp ehpk 3pxp"),
        ("Two-Factor secret JBSW Y3DP EHPK 3PXP MFZW 63LT", "JBSW Y3DP EHPK 3PXP MFZW 63LT"),
        ("MFA seed: JBSW Y3DP\r\nEHPK 3PXP\r\n", "JBSW Y3DP\r\nEHPK 3PXP"),
        ("otp secret JBSW\nY3DP\nEHPK\n3PXP", "JBSW\nY3DP\nEHPK\n3PXP"),
        ("2FA key (admin): jbsw y3dp ehpk\n  3pxp mfzw 63lt", "jbsw y3dp ehpk\n  3pxp mfzw 63lt"),
        ("totp: GEZD GNBV\nGY3T QOJQ. done", "GEZD GNBV\nGY3T QOJQ"),
        ("two-factor backup seed for github: KRUG S4ZA MFRW 2ZLT", "KRUG S4ZA MFRW 2ZLT"),
        ("the authenticator setup key is JBSW Y3DP EHPK\n3PXP\nthanks", "JBSW Y3DP EHPK\n3PXP"),
    ],
)
def test_a_grouped_seed_over_lines_or_after_two_factor_is_redacted(text: str, seed: str) -> None:
    _assert_only_values_redacted(text, (seed,), "totp_seed")


@pytest.mark.parametrize(
    "text",
    [
        "two-factor auth is on\nAB2C DE3F GH4I JK5L",  # the groups start on no seed word's line
        "totp key: JBSW Y3DP\n\nEHPK 3PXP",  # a blank line between
        "two-factor: TODO FIXME NOTE DONE",  # no digit
        "two-factor codes: 1234 5678 9012 3456",  # no letter
        "2-step: see the wiki\nAB2C DE3F GH4I JK5L",
        "two-factor: JBSW Y3DP\nehpk 3pxp",  # two cases
        "scale factor 2 of AB2C DE3F GH4I JK5L",  # a factor, not a second one
        "two-factor: ABC2 DEF3\nGHI",
        "MFA ids: AB2C-DE3F-GH4I-JK5L",
        "the mfa step runs on AB2C\nDE3F",
        "totp window 30 ABCD EFGH\nIJKL MNOP",
    ],
)
def test_groups_that_are_no_seed_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------- a password after the foreign word and a space, the sentence going on
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("Passwort Geheim2024! und Benutzer admin", "Geheim2024!"),
        ("contraseña Xk9#mm2 para el servidor", "Xk9#mm2"),
        ("пароль Qwerty#123 для входа", "Qwerty#123"),
        ("senha Mudar@123 para o banco", "Mudar@123"),
        ("mot de passe Soleil$2024 pour le wifi", "Soleil$2024"),
        ("wachtwoord Welkom01! voor de router", "Welkom01!"),
        ("hasło Tajne#2024 do serwera", "Tajne#2024"),
        ("lösenord Sommar&2024 till databasen", "Sommar&2024"),
        ("Kennwort 'Pg$tag1ng' für die Datenbank", "Pg$tag1ng"),
        ("WLAN-Passwort Sonne%42 im Büro", "Sonne%42"),
        ("şifre Ankara*06 sunucu için", "Ankara*06"),
        ("salasana Kissa~99 palvelimelle", "Kissa~99"),
    ],
)
def test_a_foreign_spaced_password_the_sentence_goes_on_after_is_redacted(
    text: str, password: str
) -> None:
    _assert_only_values_redacted(text, (password,), "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "Passwort Base64 kodiert und gespeichert",  # no symbol
        "contraseña UTF-8 codificada en la base",
        "Passwort SHA-256 Hash wird gespeichert",
        "mot de passe C#7 utilisé partout",  # no letter but the C, too short
        "contraseña git@github.com:org/repo2 del proyecto",  # an address
        "Passwort admin1@example.com ändern lassen",
        "senha 2+2=4 sempre foi assim",
        "hasło a+b=c2 jest wzorem",
        "Passwort isolated1 wird getestet",
        "Passwort Argon2id wird verwendet",
        "mot de passe #1 du classement",
        "contraseña $HOME2 del usuario",
        "Passwort Hunter2 und Benutzer admin",  # no symbol, the sentence goes on
    ],
)
def test_a_foreign_spaced_value_the_sentence_goes_on_after_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


# -------------------------------- a word alone after a short password line is no value's rest
@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("PASSWORD=Xk9#mm2\nfi", "fi"),
        ('if [ -z "$X" ]; then\n  DB_PASSWORD=Xk9#mm2\nfi\n', "fi"),
        ("for h in a b; do\nPASSWORD=Hunter2!\ndone", "done"),
        ("cat <<EOF\nDB_PASSWORD=Pg$tag1ng\nEOF", "EOF"),
        ("case $1 in\nprod) PASSWORD=S3cr3t!x ;;\nesac", "esac"),
        ("export PASSWORD=Xk9#mm2\nexit", "exit"),
        ("password: Tr0ub4dor&3\nend", "end"),
        ("DB_PASSWORD=Xk9#mm2pq\nEND", "END"),
        ("secret = Xk9#mm2pq\nthen", "then"),
        ("ADMIN_PASSWORD=Adm1n#2024\r\nfi\r\n", "fi"),
        ("api_secret: Xk9#mm2pq\nok", "ok"),
    ],
)
def test_a_word_alone_after_a_short_password_line_stays(text: str, kept: str) -> None:
    redacted = redact(text)
    assert redacted.endswith((f"\n{kept}", f"\n{kept}\n", f"\r\n{kept}\r\n"))
    assert "[REDACTED:credential_assignment]" in redacted


@pytest.mark.parametrize(
    ("text", "rest"),
    [
        ("PASSWORD=Xk9#mm\n2pqLw", "2pqLw"),
        ("PASSWORD=Xk9#mm\npqLw", "pqLw"),
        ("DB_PASSWORD=Hunter\n2024!", "2024!"),
        ("SECRET=Xk9#mm\n2pqLw\n", "2pqLw"),
        ("password: Tr0ub4\ndor&3", "dor&3"),
        ("ADMIN_PASSWORD=Adm1n#\r\n2024\r\n", "2024"),
        ("DB_PASSWORD=Xk9#mm2\nPq", "Pq"),
        ("PASSWORD=Xk9#mm\nx7", "x7"),
        ("client_secret = Sup3r\nSecret!", "Secret!"),
        ("-e POSTGRES_PASSWORD=Xk9#mm2pqLw7-long-enough-for-a-terminal-line\nabc", "abc"),
    ],
)
def test_the_rest_of_a_cut_password_alone_on_its_line_is_redacted(text: str, rest: str) -> None:
    last_line = redact(text).splitlines()[-1]
    assert rest not in last_line
    assert last_line.startswith("[REDACTED:")


# ----------------------------------------------- a seed under a setting's name is named a seed
@pytest.mark.parametrize(
    ("text", "seed"),
    [
        ("MFA_SECRET=JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ("otp_secret: JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ('MFA_SECRET="JBSWY3DPEHPK3PXP"', "JBSWY3DPEHPK3PXP"),
        ("otp_secret: 'GEZDGNBVGY3TQOJQ'", "GEZDGNBVGY3TQOJQ"),
        ("MFA_SECRET=JBSWY3DPEHPK3PXP # base32", "JBSWY3DPEHPK3PXP"),
        ('{"totp_secret": "JBSWY3DPEHPK3PXP"}', "JBSWY3DPEHPK3PXP"),
        ("TWO_FACTOR_SECRET=JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ("export MFA_SECRET=JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ('OTP_SECRET_KEY = "GEZDGNBVGY3TQOJQ"', "GEZDGNBVGY3TQOJQ"),
        ("mfa_secret: jbswy3dpehpk3pxp", "jbswy3dpehpk3pxp"),
        ("AUTHENTICATOR_SECRET=JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ("2FA_SECRET=JBSWY3DPEHPK3PXPMFZW63LT", "JBSWY3DPEHPK3PXPMFZW63LT"),
    ],
)
def test_a_seed_under_a_setting_name_is_named_a_seed(text: str, seed: str) -> None:
    _assert_only_values_redacted(text, (seed,), "totp_seed")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("MFA_SECRET=hunter2pass", "credential_assignment"),  # too short for a seed
        ("OTP_SECRET=Xk9#mm2pqLw!", "credential_assignment"),  # no base32
        ("OTP_SECRET=JBSWY3DPEHPK3PXP1890", "credential_assignment"),
        ("totp_secret: Tr0ub4dor&3", "credential_assignment"),
        ("MFA_SECRET=abcdefghijklmnop", "credential_assignment"),  # no digit
        ("MFA_ENABLED=true", None),
        ("TOTP_PERIOD=30", None),
        ("mfa_secret_length: 160", None),
        ("MFA_SECRET=${MFA_SECRET}", None),
        ("OTP_SECRET=changeme", None),
        ("TOTP_ISSUER=ACMECORP2024ISSUER", None),
    ],
)
def test_other_values_under_a_second_factor_name_keep_their_kind(
    text: str, kind: str | None
) -> None:
    assert [match.rule for match in find_secrets(text)] == ([kind] if kind else [])


# ------------------------------- a PIN stated after "the pin", or after its owner and a space
@pytest.mark.parametrize(
    ("text", "pin"),
    [
        ("the pin is 4821", "4821"),
        ("the pin is 0000", "0000"),
        ("The pin: 7302", "7302"),
        ("ok so the pin is 4821 if you need it", "4821"),
        ("sim pin 0000", "0000"),
        ("SIM PIN 0000", "0000"),
        ("my pin 4821", "4821"),
        ("card pin 7302.", "7302"),
        ("the phone pin 123456", "123456"),
        ("default pin 1357, puk on the card", "1357"),
        ("debit card pin 9317\n", "9317"),
        ("the pin was 55731.", "55731"),
    ],
)
def test_a_pin_stated_after_the_pin_or_after_its_owner_is_redacted(text: str, pin: str) -> None:
    _assert_only_values_redacted(text, (pin,), "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "pin the version to 4.2.1",
        "pinned to 4821",
        "pin 22 of the header",
        "GPIO pin 4",
        "pin numpy==1.26",
        "the pin is 13",
        "the pin is 2048",  # a size or a count, as a power of two
        "on the gpio header the pin is 2047",
        "the pull-up on the pin is 4700",
        "sim pin 1234 of the modem",  # the sentence goes on
        "the pin count is 1024",
        "Pin 4821",  # nobody's
        "the pin 4821 is broken",
        "the pin is 2024-01-01",
    ],
)
def test_pins_that_are_parts_or_numbers_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------------ long lines and the breaks between them
def test_breaks_between_long_lines_cost_linear_time() -> None:
    # a line longer than the 256 characters read back from a break was read from the text's
    # start instead, copied whole at each break: 3.6 s for 2 MB of 281-character lines
    line = "word " * 52 + "Xk9mm2pqLwAbcdefghij\n"
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    text = line * 7_000 + "word " * 60 + token[:20] + "\n" + token[20:] + " end\n"
    started = time.process_time()
    redacted = redact(text)
    seconds = time.process_time() - started
    assert redacted.endswith("word [REDACTED:github_token] end\n")  # read joined, as before
    assert seconds < 1.5
