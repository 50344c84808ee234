"""Secrets as people paste them from their files, code and chats: a password given before "to
log into", codes of a recovery list that hold no digit, a Russian password after what it is for
with no verb, a token cut into literals that code joins, a credential given to a setter or named
by an XML attribute, a presigned URL's signature, keys named for what they sign; and an ARN that
names a secret, which must stay."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact
from tests.secret_helpers import gone

pytestmark = pytest.mark.pure


# ------------------------------------------------------------------ "use X to log into"
@pytest.mark.parametrize(
    "text",
    [
        "Use Bw5^0mhn45Pq to log into the router admin page.",
        "use `Vx8#pLm2qR` to sign into the portal",
    ],
)
def test_a_password_used_to_log_into_something_is_redacted(text: str) -> None:
    gone(text, "Bw5^0mhn45Pq", "Vx8#pLm2qR")


def test_a_way_of_logging_into_something_stays() -> None:
    text = "use SSO to log into the dashboard, or try gh-cli to login"
    assert redact(text) == text


# ---------------------------------------------------------------- recovery codes
def test_a_listed_recovery_code_with_no_digit_goes_with_the_others() -> None:
    codes = ["a41fe-0c2d9", "77b0e-d31aa", "bcdfe-acbde", "5e2c1-9ab04"]
    text = "GitHub recovery codes\n" + "\n".join(codes) + "\n"
    gone(text, *codes)
    # the first listed too, once a code of its shape follows it
    gone("recovery codes:\n" + "\n".join(codes[2:]), "bcdfe-acbde", "5e2c1-9ab04")


@pytest.mark.parametrize(
    "text",
    [
        "backup codes: read-only mode for now",
        "recovery codes: see-above",
        "recovery codes:\n4f1a2-c9d0e\nfixes-issue-12 landed",
    ],
)
def test_words_after_recovery_codes_stay(text: str) -> None:
    redacted = redact(text)
    assert "read-only" in redacted or "see-above" in redacted or "fixes-issue-12" in redacted


# --------------------------------------------------------- Russian, no verb after the owner
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("пароль от сервера Tk0u9L!94p", "Tk0u9L!94p"),
        ("пароль для входа в админку Qw7#pass9x", "Qw7#pass9x"),
        ("пароль від пошти Kx9!mm2pq", "Kx9!mm2pq"),
    ],
)
def test_a_russian_password_after_what_it_is_for_is_redacted(text: str, password: str) -> None:
    gone(text, password)


@pytest.mark.parametrize(
    "text",
    ["пароль от почты сбросили вчера", "пароль для входа должен быть длиннее 12 символов"],
)
def test_russian_prose_about_a_password_stays(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------------------------ joined literals
@pytest.mark.parametrize(
    "text",
    [
        'TOKEN = ("ghp_Pz3kQ8vRmT2wXy7LbN4c"\n         "J5dHa9sKe1fUo6iV0gYq")',
        'const key = "sk_live_51Hq8ZkLmN2pQ" +\n    "rS3tUv4WxY5zAb6Cd7Ef8Gh";',
        "$token = 'glpat-' . 'Xy7LbN4cJ5dHa9sKe1fU';",
    ],
)
def test_a_token_cut_into_literals_that_code_joins_is_redacted(text: str) -> None:
    redacted = redact(text)
    for piece in ("Pz3kQ8vRmT2w", "J5dHa9sKe1fU", "51Hq8ZkLmN2pQ", "rS3tUv4WxY5z", "Xy7LbN4cJ5dH"):
        assert piece not in redacted, redacted


@pytest.mark.parametrize(
    "text",
    [
        'msg = ("connection refused by "\n       "the upstream server")',
        'print("abcd" "efgh")',
        'url = "https://api.example.com/v1/" + "users/" + user_id',
    ],
)
def test_joined_literals_of_no_token_stay(text: str) -> None:
    assert redact(text) == text


# ------------------------------------------------------------------------------- an ARN
@pytest.mark.parametrize(
    "text",
    [
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf",
        "SecretId: arn:aws:secretsmanager:us-east-1:123456789012:secret:rds!cluster-1a2b3c",
    ],
)
def test_the_arn_of_a_stored_secret_stays(text: str) -> None:
    assert find_secrets(text) == []


# ---------------------------------------------------------------- setters in code
@pytest.mark.parametrize(
    "text",
    [
        'os.environ.setdefault("DB_PASSWORD", "Rk7!vQm2pLx9")',
        'monkeypatch.setenv("API_TOKEN", "q8ZrT3vLm2Xy7PbN4cJ5dHa9sKe1")',
        'std::env::set_var("DATABASE_PASSWORD", "Rk7!vQm2pLx9");',
        'System.setProperty("db.password", "Rk7!vQm2pLx9");',
        't.Setenv("DB_PASSWORD", "Rk7!vQm2pLx9")',
        'props.put("password", "Rk7!vQm2pLx9");',
    ],
)
def test_a_credential_given_to_a_setter_after_its_name_is_redacted(text: str) -> None:
    gone(text, "Rk7!vQm2pLx9", "q8ZrT3vLm2Xy7PbN4cJ5dHa9sKe1")


@pytest.mark.parametrize(
    "text",
    [
        'form.set("password", "Enter your password")',
        'i18n.set("password", "Passwort")',
        'os.environ.setdefault("DB_PASSWORD_FILE", "/run/secrets/db")',
        'monkeypatch.setenv("API_TOKEN", "test-token")',
        'config.set("timeout", "Rk7!vQm2pLx9")',
    ],
)
def test_a_setter_given_no_credential_stays(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------------------------- XML by attribute
@pytest.mark.parametrize(
    "text",
    [
        '<property name="hibernate.connection.password">Rk7!vQm2pLx9</property>',
        '<entry key="password">Rk7!vQm2pLx9</entry>',
        '<param name="password" value="Rk7!vQm2pLx9"/>',
        '<string name="google_api_key">q8ZrT3vLm2Xy7PbN4cJ5dHa9sKe1</string>',
    ],
)
def test_an_xml_credential_named_by_an_attribute_is_redacted(text: str) -> None:
    gone(text, "Rk7!vQm2pLx9", "q8ZrT3vLm2Xy7PbN4cJ5dHa9sKe1")


@pytest.mark.parametrize(
    "text",
    [
        '<string name="password_hint">Enter your password</string>',
        '<string name="password">Password</string>',
        '<property name="password" value="${db.password}"/>',
    ],
)
def test_xml_naming_a_credential_without_one_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        # Spring's expression language and Ruby's interpolation read the value from elsewhere
        '<property name="password" value="#{systemProperties[\'db.password\']}"/>',
        '<entry key="password">#{environment.DB_PASSWORD}</entry>',
        "password: \"#{ENV['DB_PASSWORD']}\"",
    ],
)
def test_a_credential_read_by_an_expression_stays(text: str) -> None:
    assert find_secrets(text) == []


def test_a_password_holding_an_expressions_marks_is_redacted() -> None:
    gone("<password>Xk9#{mQ2}vL7</password>", "Xk9#{mQ2}vL7")


# ------------------------------------------------------------ presigned URLs, keys
@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="
            "8a1f03c9d2e7b6540f9e1c2d3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a",
            "8a1f03c9d2e7b6540f9e1c2d3b4a",
        ),
        (
            "https://d111.cloudfront.net/v.mp4?Expires=1767225600&Signature=kX9mZ2pQ~rT5vW8y"
            "B1nC4dF7gH0jK3lM6oP9qS2uV5xY8zA1bD4eG7hJ0kL3nO6rU9wZ2&Key-Pair-Id=K2JCJMDEHXQW5F",
            "kX9mZ2pQ~rT5vW8yB1nC4dF7",
        ),
        ("FERNET_KEY=aNC2CMWCcX6Htot3qyA2OhnyKDCfqwVGAHOWlfOQK4o=", "aNC2CMWCcX6Htot3qyA2"),
        ("PresharedKey = t1KgZbhmFKf/WV8CBIHofZCRCwiInuxaPmxEUSNj93I=", "t1KgZbhmFKf/WV8CBIHo"),
    ],
)
def test_a_presigned_urls_signature_and_named_keys_are_redacted(text: str, value: str) -> None:
    gone(text, value)


def test_a_signature_parameter_in_prose_stays() -> None:
    text = "see https://x.example/?signature=required-field-name and the FERNET_KEY docs"
    assert find_secrets(text) == []


# ----------------------------------------------------------- a wallet's extended key
def test_a_bip32_extended_private_key_is_redacted() -> None:
    key = (
        "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRN"
        "NU3TGtRBeJgk33yuGBxrMPHi"
    )
    assert redact(f"master key {key} for the test wallet") == (
        "master key [REDACTED:bip32_private_key] for the test wallet"
    )
    # the public key it pairs with may be shared
    xpub = key.replace("xprv", "xpub")
    assert find_secrets(xpub) == []
