"""Secret detection and redaction: corpus recall, look-alike precision, properties, linearity."""

from __future__ import annotations

import base64
import json
import re
import runpy
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orcad import secret_assignments, secret_formats
from orcad.secret_pins import find_pin_settings
from orcad.secret_values import looks_random
from orcad.secrets import (
    _NEED_AN_OPERATOR,
    _RULES,
    RULE_NAMES,
    SecretMatch,
    _always,
    _long_runs,
    _open_rules,
    contains_secret,
    find_secrets,
    redact,
    shorten_redacted,
)

pytestmark = pytest.mark.pure

CORPUS = Path(__file__).parent / "corpus"


def load(name: str) -> list[dict[str, str]]:
    with (CORPUS / name).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


SECRETS = load("secrets.jsonl")
LOOKALIKES = load("lookalikes.jsonl")


def test_checked_in_corpus_is_what_the_generator_produces() -> None:
    generator = runpy.run_path(str(CORPUS / "make_corpus.py"))
    secrets, lookalikes = generator["build"]()
    assert secrets == SECRETS
    assert lookalikes == LOOKALIKES
    assert len(SECRETS) >= 400
    assert len({record["rule"] for record in SECRETS}) >= 50
    assert len(LOOKALIKES) >= 400


@pytest.mark.parametrize("record", SECRETS, ids=lambda record: record["rule"])
def test_every_corpus_secret_is_caught_and_removed(record: dict[str, str]) -> None:
    text, secret = record["text"], record["secret"]
    matches = find_secrets(text)
    assert contains_secret(text)
    assert record["rule"] in {match.rule for match in matches}
    at = text.index(secret)
    assert any(m.start <= at and at + len(secret) <= m.end for m in matches)
    redacted = redact(text)
    assert secret not in redacted
    assert f"[REDACTED:{record['rule']}]" in redacted


def test_corpus_exercises_every_rule() -> None:
    found = {match.rule for record in SECRETS for match in find_secrets(record["text"])}
    assert found == set(RULE_NAMES)


def test_lookalike_false_positive_rate() -> None:
    flagged = [record for record in LOOKALIKES if contains_secret(record["text"])]
    rate = len(flagged) / len(LOOKALIKES)
    print(f"\nfalse positives: {len(flagged)}/{len(LOOKALIKES)} = {rate:.2%}")
    for record in flagged:
        print("  flagged:", record["kind"], repr(record["text"][:120]))
    assert rate <= 0.02


@pytest.mark.parametrize(
    "text",
    [
        "we rotate the token weekly",
        "the password reset flow sends an email",
        "password=<your password>",
        "token: ${TOKEN}",
        "secret: changeme",
        'api_key = os.environ["X"]',
        "max_tokens: 4096",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "mem_0123456789abcdef0123456789abcdef",
        "https://example.com/path?query=1",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n"
        "-----END PUBLIC KEY-----",
    ],
)
def test_named_lookalikes_are_left_alone(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == text


# The passwords people paste: a credential whatever its entropy (each keeps its context).
CHOSEN_PASSWORDS = {
    "password=hunter2hunter2": "hunter2hunter2",
    "DB_PASSWORD=s3cr3tP4ss": "s3cr3tP4ss",
    "PGPASSWORD=postgres123": "postgres123",
    "client_secret: 'mySuperSecret2024'": "mySuperSecret2024",
    "the root password on the staging box is Winter2024!": "Winter2024",
    "machine build.example.com login ci password Sup3rS3cret!": "Sup3rS3cret!",
    "docker login -p 'Zx9!kq2Lm#Tw' registry.example.com": "Zx9!kq2Lm#Tw",
    'password = "hunter2"': "hunter2",
    "password: Password123": "Password123",
    "POSTGRES_PASSWORD=postgres": "postgres",
    "Server=db;User Id=sa;Password=Str0ng!Pass;": "Str0ng!Pass",
    "mysql -u root -pS3cret!x app": "S3cret!x",
    "curl -u admin:Adm1nPass https://jenkins.internal": "Adm1nPass",
    "--password 'open sesame 42'": "open sesame 42",
    "the wifi password is Tr0ub4dor&3": "Tr0ub4dor&3",
    'password: str = "hunter2x"': "hunter2x",
    "vault login --password letmeinnow": "letmeinnow",
    'db_password: Optional[str] = "Hunter22"': "Hunter22",
    # passphrases: words joined as a label would be, but capitalised or long and many
    "password: Orbit-Lantern-Velvet-9": "Orbit-Lantern-Velvet-9",
    "passphrase: Orbit-Lantern-Velvet-9": "Orbit-Lantern-Velvet-9",
    "secret: Orbit-Lantern-Velvet-9": "Orbit-Lantern-Velvet-9",
    "the passphrase is Orbit-Lantern-Velvet-9": "Orbit-Lantern-Velvet-9",
    "password: correct-horse-battery-staple": "correct-horse-battery-staple",
    # found by an adversarial review: passwords given in words without "is" after the name
    "log in with the password letmein2024": "letmein2024",
    "use password Sup3rS3cret! to connect": "Sup3rS3cret!",
    "the admin password is: qwerty": "qwerty",
    "the root password was: toor.": "toor",
    "the pin code password is: 4921": "4921",
    "wifi password: correcthorse": "correcthorse",
    "Guest wifi password: Sunflower\nssid: office": "Sunflower",
    # a passcode is a password of digits
    "passcode: 839201": "839201",
    "DOOR_PASSCODE=4921": "4921",
    # letters alone, long and run together: a password, however ordinary its characters
    "my password is correcthorsebatterystaple": "correcthorsebatterystaple",
    "the wifi password is letmeinplease.": "letmeinplease",
    "log in with the password hunter2?": "hunter2",
    "vault login --password 'option' now": "option",  # quoted: a value, whatever the word
    "mytool --password optionsX9": "optionsX9",
}
# Keys and tokens stated in words count when their value looks generated.
STATED_KEYS = {
    "the api key is 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c": "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
    "the token is kT9vQ2mX8pL4nR7sW1zY6bH3cJ5fD0gA": "kT9vQ2mX8pL4nR7sW1zY6bH3cJ5fD0gA",
    "The client secret for prod is qP3xV8nK2mL7wR4t.": "qP3xV8nK2mL7wR4t",
    "our access key was set to AK7Q2M9X4L8P3N6R": "AK7Q2M9X4L8P3N6R",
}


@pytest.mark.parametrize("text", CHOSEN_PASSWORDS, ids=range(len(CHOSEN_PASSWORDS)))
def test_chosen_passwords_are_secrets(text: str) -> None:
    assert contains_secret(text)
    assert CHOSEN_PASSWORDS[text] not in redact(text)


@pytest.mark.parametrize("text", STATED_KEYS, ids=range(len(STATED_KEYS)))
def test_keys_stated_in_words_are_secrets(text: str) -> None:
    assert contains_secret(text)
    assert STATED_KEYS[text] not in redact(text)


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "log in with the password letmein2024 first",
            "log in with the password [REDACTED:password_statement] first",
        ),
        (
            "the admin password is: qwerty.",
            "the admin password is: [REDACTED:password_statement].",
        ),
        ("wifi password: correcthorse", "wifi password: [REDACTED:password_statement]"),
        (
            "the api key is 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c, rotate it",
            "the api key is [REDACTED:credential_assignment], rotate it",
        ),
        (
            "the token is kT9vQ2mX8pL4nR7sW1zY6bH3cJ5fD0gA",
            "the token is [REDACTED:credential_assignment]",
        ),
    ],
)
def test_stated_credentials_lose_only_their_value(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "password reset emails are sent by the auth service",
        "read PGPASSWORD from the environment",
        "password: ${DB_PASSWORD}",
        "password = $DB_PASSWORD",
        "password: <your-password>",
        'password = os.environ["DB_PASSWORD"]',
        "password: ***",
        "password: changeme",
        "PASSWORD=example-password",
        "connect(user=user, password=password)",
        "password: str",
        "password: Optional[str] = None",
        'password: str = ""',
        "bypass: bool = True",
        "secret: my-app-tls",
        "password: tls-cert-2024",
        "password: X-Forwarded-For",
        "password: staging-api-token",
        "password = get_user_password_from_vault",
        "the password hasher is Microsoft.AspNetCore.Identity",
        "docker run -p 8080:80 nginx",
        "the password is stored in the vault under kv/prod/db",
        "AKIAIOSFODNN7EXAMPLE",
        "lin_api_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        # sentences about passwords, keys and tokens that state none
        "the password is stored in the vault",
        "the password is hashed with argon2",
        "the password is required",
        "the password is: required",
        "the password is: stored in the vault",
        "the password is: hashed",
        "the token is refreshed every hour",
        "the api key is read from the environment",
        "the api key is in 1password",
        "the api key is sha256-hashed",
        "the secret is Base64-encoded",
        "the primary key is 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
        "the cache key is user_profile_settings_v2",
        "the token is stored in GITHUB_TOKEN_FILE_PATH",
        "log in with the password manager",
        "log in with the password you chose",
        "use the password from the vault",
        "the password field is empty",
        "wifi password: see the office wiki",
        "wifi password: ask the front desk",
        "wifi password: unchanged",
        "hashed password: bcrypt",
        "ssh password: disabled",
        "password expires: never",
        "password: qwerty",
        "private password: SecretStr;",
        "val password: CharArray",
        "def login(user, password: str):",
        "    password: Secret",
        "the password is configurable.",
        "the password is unrecoverable",
        "the password is alphanumeric",
        "the password is straightforward",
        "the password is untrustworthy",
        "the password is PasswordManager",
        "the password is mypasswordhere",
        "the password is automatically generated",
        "passcode: required",
        "passcode_length: 6",
        "passcode = get_code()",
        "passcode: 12",
        "PASSCODE_DIGITS=6",
        # a question about the password: its mark ends the question, not a chosen value
        "how long are users signed in before they have to enter their password again?",
        "Do users need to type the password twice?",
        "is the password correct?",
        # a comparison in a block header: the colon ends the line of code, not the name
        "if token == other.token:",
        "    if password == form.password:",
        "elif session.token == claim.token: return",
        # prose about a password flag: the word after it names the flag, not its value
        "information can be provided via the --username and --password options",
        "use --password-stdin instead of the --password option.",
        "pass the --password flag to set it, or the --secret argument",
        "the --passphrase parameter is deprecated; use the --password switch instead",
        # type annotations: a union, or a default after the type
        "    password: _PasswordType | None = None",
        "    private_key: Ed25519PrivateKey | Ed448PrivateKey",
        "    api_token: Token_v2 = field(default=None)",
        # commands named after passwd, and prose where a command's password would go
        "chpasswd reads user:password pairs from stdin",
        "smbpasswd is: smb-tool2",
        "rabbitmqctl add_user admin then set_permissions",
        "bcp out with -P from the vault",
    ],
)
def test_password_lookalikes_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "my password is correct horse battery staple",
            "my password is [REDACTED:password_statement]",
        ),
        (
            "the wifi password is purple monkey dishwasher.",
            "the wifi password is [REDACTED:password_statement].",
        ),
        (
            "the password for the router is blue whale sunset, ask if it fails",
            "the password for the router is [REDACTED:password_statement], ask if it fails",
        ),
        (
            'ok so the password is "marble forest kitten"',
            'ok so the password is "[REDACTED:password_statement]"',
        ),
        (
            "the vault passphrase is: velvet anchor piano",
            "the vault passphrase is: [REDACTED:password_statement]",
        ),
    ],
)
def test_a_passphrase_of_words_stated_in_a_sentence_is_redacted(text: str, redacted: str) -> None:
    # only words run together counted ("correcthorsebatterystaple"): spaced, the first word
    # was read as one describing the password, and the phrase was kept
    assert redact(text) == redacted


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "pw for the jenkins admin: Jenk1ns!2024",
            "pw for the jenkins admin: [REDACTED:password_statement]",
        ),
        ("the pw is Jenk1ns!2024", "the pw is [REDACTED:password_statement]"),
        ("My pw is Qz7!pLm2, keep it", "My pw is [REDACTED:password_statement], keep it"),
    ],
)
def test_a_password_stated_under_its_short_name_is_redacted(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "the pw is too short",
        "the pw is stored hashed",
        "pw reset link expires in 3600",
        "the pw field is required",
        "my pw is in the vault",
        "pw for the db is in vault",
        "the pw timeout is 3600",
        "the pw is changeme",
        "PW is a power-of-two width",
        "the kpw is 4000",
        "bcrypt.hashpw(pw, salt)",
    ],
)
def test_sentences_about_a_pw_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# "the wifi key is X": a network's key is the password its owner chose (the password's value
# in each case is what must go)
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("the wifi key is BlueMango$42", "BlueMango$42"),
        ("wifi key is BlueMango$42", "BlueMango$42"),
        ("The WiFi key is Sunflower#88", "Sunflower#88"),
        ("the wifi key: BlueMango$42", "BlueMango$42"),
        ("wifi key: Hx7!pqLm", "Hx7!pqLm"),
        ("our network key is Orch1d-Lake", "Orch1d-Lake"),
        ("the WPA key is tr0pical_Storm", "tr0pical_Storm"),
        ("the wpa2 key is Lemon&Lime2023", "Lemon&Lime2023"),
        ("the guest wifi key is Welcome2Guest!", "Welcome2Guest!"),
        ("the router key is Admin#4471", "Admin#4471"),
        ("the office wifi key is now Cactus!2025", "Cactus!2025"),
        ("the hotspot key is hot5pot-Key", "hot5pot-Key"),
        ("fyi the wifi key is BlueMango$42 if you need it", "BlueMango$42"),
        ("the wireless key is Tiger77!", "Tiger77!"),
        ("the network key for the lab is P1neapple!", "P1neapple!"),
        ("the wifi key was changed to GreenApple@9", "GreenApple@9"),
    ],
)
def test_a_network_key_stated_in_a_note_is_redacted(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_statement]")


@pytest.mark.parametrize(
    "text",
    [
        "the cache key is user_id",
        "the primary key is user_id",
        "the dict key is name",
        "the key is to retry with backoff",
        "the sort key is created_at",
        "the wifi key is stored in the vault",
        "the wifi key is on the fridge",
        "the partition key is tenant-id",
        "the key is user:42",
        "the foreign key is order_id",
        "the wifi key is WPA2",
        "the config key is log.level",
        "the registry key is HKLM\\Software\\Foo",
        "the redis key is session:abc123",
        "the S3 key is logs/2024/01.gz",
        "the translation key is home.title",
        "the hotkey is Ctrl+Shift+P",
        "the wifi key is 8 characters long",
        "the wifi key is Awesome!",
        "network key: eth0-Primary",
        "the router key is F5 to reboot",
        "the key for the wifi is on the router",
    ],
)
def test_keys_that_are_names_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# "jenkins: admin / X": a service, then its user and password either side of a spaced slash
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("jenkins: admin / Jenk1ns!2024", "Jenk1ns!2024"),
        ("grafana: admin / Gr4fana!", "Gr4fana!"),
        ("Jenkins: admin / Jenk1ns!2024", "Jenk1ns!2024"),
        ("staging db: postgres / Pg$tag1ng", "Pg$tag1ng"),
        ("rabbitmq: guest / Gu3st!mq", "Gu3st!mq"),
        ("router: admin / R0uter#1", "R0uter#1"),
        ("sonarqube: admin / S0nar!qube", "S0nar!qube"),
        ("- jenkins: admin / Jenk1ns!2024", "Jenk1ns!2024"),
        ("mysql: root / MyR00t!pw", "MyR00t!pw"),
        ("portainer: admin / P0rtainer#1", "P0rtainer#1"),
        ("the jenkins box: admin / Jenk1ns!2024", "Jenk1ns!2024"),
        ("vpn: jdoe / Vpn$ecure9", "Vpn$ecure9"),
        ("pgadmin: admin@example.com / Pg4dmin!", "Pg4dmin!"),
        ("minio: minioadmin / M1nio#secret", "M1nio#secret"),
        ("access for the demo:\njenkins: admin / Jenk1ns!2024\nthanks", "Jenk1ns!2024"),
        ("note: jenkins: admin / Jenk1ns!2024", "Jenk1ns!2024"),
        ("The team noted grafana: admin / Gr4fana!Adm", "Gr4fana!Adm"),
    ],
)
def test_a_service_user_and_password_pair_is_redacted(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_statement]")


@pytest.mark.parametrize(
    "text",
    [
        "jenkins: src / main",
        "ratio: 3 / 4",
        "paths: src/main",
        "jenkins: build / test / deploy",
        "branch: feature / login-v2",
        "jenkins: admin / operators",
        "grafana: dashboards / alerts",
        "result: pass / fail",
        "jenkins: 2.414 / 2.415",
        "version: v1.2 / v1.3",
        "date: 12/05/2024",
        "score: 9.5/10",
        "k8s: apps/v1",
        "options: -O2 / -O3",
        "layout: left / right-2col",
        "node: x86_64 / arm64",
        "endpoint: GET /api/v1",
        "compare: foo.py / bar.py",
        "image: bitnami/redis:7.2",
        "mime: text/x-python3",
        "units: m / s^2",
        "shortcut: Ctrl / Cmd+Shift+P",
        "status: done / Great!!",
        "ratio: good / Bad-Ugly!",
        "grafana: admin / ${GF_PASSWORD}",
        "jenkins: admin / changeme1!",
    ],
)
def test_slashes_that_join_no_user_and_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# "login admin pw X": a login's user, then the password under a short name
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("jenkins login admin pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("login admin pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("grafana login admin pass Gr4fana!", "Gr4fana!"),
        ("login root pw R00t!prod", "R00t!prod"),
        ("login admin, pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("Login admin pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("login jdoe pwd Vpn$ecure9", "Vpn$ecure9"),
        ("jenkins login is admin pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("login as admin pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("login admin / pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("username admin pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("user admin pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("login admin passwd Adm1n_2024", "Adm1n_2024"),
        ("jenkins - login admin pw Jenk1ns!2024", "Jenk1ns!2024"),
        ("login admin pw hunter2", "hunter2"),
        # a colon later on the line makes the words before it read as a note's: still a login's
        ("login jdoe pwd Vpn$ecure9 for the region: us-east-1", "Vpn$ecure9"),
        ("grafana login admin pass Gr4fana#1 on the host: grafana.internal", "Gr4fana#1"),
    ],
)
def test_a_login_and_its_pw_are_redacted(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_statement]")


@pytest.mark.parametrize(
    "text",
    [
        "login admin page",
        "login admin page pw reset",
        "the login page pw field",
        "login admin pw reset flow",
        "login admin pw field is v2",
        "login flow pw step",
        "login admin pw hashed",
        "login admin pw 2fa",
        "login admin pw required",
        "login via sso pw optional",
        "login admin pw incorrect",
        "login admin pw ****",
        "login admin pw <redacted>",
        "login admin pw $PASS",
        "login admin pw see vault",
        "login admin pw from 1password",
        "login admin pw in .env",
        "login admin pw ${JENKINS_PW}",
        "login test pw test",
        "login anonymous pw me@example.org",
        "login admin pw Really?!",
        "login with user admin pass on prompt",
    ],
)
def test_logins_without_a_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# "pass for jenkins: X": `pass` alone names a password said for something, or before its verb
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("pass for jenkins: Jenk1ns!2024", "Jenk1ns!2024"),
        ("Pass for jenkins: Jenk1ns!2024", "Jenk1ns!2024"),
        ("pass for the staging db: Stag1ng#db", "Stag1ng#db"),
        ("pass for grafana: Gr4fana!", "Gr4fana!"),
        ("pass for the vpn is Vpn$ecure9", "Vpn$ecure9"),
        ("pass for admin: Adm1n_2024", "Adm1n_2024"),
        ("the pass for jenkins is Jenk1ns!2024", "Jenk1ns!2024"),
        ("pass for the wifi: BlueMango$42", "BlueMango$42"),
        ("my pass for gitlab: G1tlab#rocks", "G1tlab#rocks"),
        ("pass for root on prod: R00t!prod", "R00t!prod"),
        ("the pass is Jenk1ns!2024", "Jenk1ns!2024"),
        ("the jenkins pass is Jenk1ns!2024", "Jenk1ns!2024"),
        ("admin pass is Adm1n_2024.", "Adm1n_2024"),
        ("pass for jenkins: Jenk1ns!2024, user admin", "Jenk1ns!2024"),
        # where a login's pass is, then its verb
        ("the mysql root pass on the game server is Tq9-wolf-Lantern", "Tq9-wolf-Lantern"),
        ("the wifi pass at the cabin is Lake!House7", "Lake!House7"),
        ("admin pass in prod is Rex-2019-Q", "Rex-2019-Q"),
    ],
)
def test_a_pass_for_something_is_redacted(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_statement]")


@pytest.mark.parametrize(
    "text",
    [
        "pass for now: we skip the flaky test",
        "pass for jenkins: green",
        "pass for the build: all 42 tests",
        "second pass for lint: ruff",
        "the first pass is parsing",
        "pass for jenkins: 3/4 stages",
        "we pass for the ci: py3.12",
        "pass the token to the client",
        "pass for mypy: 0 errors",
        "the pass is optional",
        "pass for stage-2: ok",
        "this pass is O(n)",
        "the compiler pass is -O2",
        "pass for x86_64: done",
        "the boarding pass is 12B",
        "pass for v1.2.3: ok",
        "third pass: v2.0-rc1",
        "the second pass is len(x)",
        "PASS for test_foo: 12.5ms",
        "pass for the demo: Awesome!",
        "this pass is LLVM-17",
        "the second pass for x86 is SSA-based",
        "the pass is x86-64-only here",
        "the admin pass on staging is required",
        "the first pass on the file is slow",
        "the ssh pass in the vault is sha256-Hashed",
        "the lint pass on ci is v2-Fast",
        "the root pass on prod is Rex-2019-Q and more",
        "the db pass in prod is v1.2.3-Beta",
    ],
)
def test_passes_that_are_no_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "the password is wrong",
        "the password is too short",
        "password is required",
        "the password is stored hashed",
        "the password is the same as before",
        "the password is sent in clear text",
        "the password is case sensitive",
        "the password is user supplied",
        "the password is pretty weak honestly",
        "the password is weak strong random",
        "the password is still the default one",
        "my password is correct horse battery staple and more words follow",
    ],
)
def test_sentences_saying_what_a_password_is_like_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ('the password is "open sesame"', 'the password is "[REDACTED:password_statement]"'),
        (
            "my wifi password is 'tiger rose'.",
            "my wifi password is '[REDACTED:password_statement]'.",
        ),
        # in quotes, the sentence may go on after the words
        (
            'passphrase for the gpg key is "autumn leaves fall" with the spaces',
            'passphrase for the gpg key is "[REDACTED:password_statement]" with the spaces',
        ),
        (
            "the wifi password is 'tiger rose' btw",
            "the wifi password is '[REDACTED:password_statement]' btw",
        ),
    ],
)
def test_a_passphrase_of_two_words_in_quotes_is_redacted(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        'the password is "not set"',
        'the password is "too short"',
        'the password is "case sensitive"',
        "the password is open sesame and more",
        'the passphrase is "not yet set" until monday',
        'the passphrase is "stored in vault" for now',
        'the passphrase is "the usual one" you know',
        "my passphrase is 'short and weak' but ok",
        'the password is "too short" they said',
    ],
)
def test_two_quoted_words_saying_what_a_password_is_like_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("the wifi password is 84736251", "the wifi password is [REDACTED:password_statement]"),
        (
            "FYI the door passcode is now 4821.",
            "FYI the door passcode is now [REDACTED:password_statement].",
        ),
        (
            "the password for the guest network is 55512345, ask at the desk",
            "the password for the guest network is [REDACTED:password_statement], ask at the desk",
        ),
        ("my PIN is 4821", "my PIN is [REDACTED:password_statement]"),
        ("the SIM PIN code is 904417.", "the SIM PIN code is [REDACTED:password_statement]."),
        ("Card PIN: 7302", "Card PIN: [REDACTED:password_statement]"),
        # a chat's aside after the digits
        (
            "the sim PIN for the test phone is 48213957 actually no wait",
            "the sim PIN for the test phone is [REDACTED:password_statement] actually no wait",
        ),
        ("my PIN is 4821 iirc", "my PIN is [REDACTED:password_statement] iirc"),
    ],
)
def test_a_password_of_digits_stated_in_a_sentence_is_redacted(text: str, redacted: str) -> None:
    # a stated value had to mix letters with digits or symbols: digits alone were kept
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "the password timeout is 3600",
        "password iterations is 100000",
        "the password is 1234 characters long",
        "the password was rotated in 2024",
        "the password is 123",
        "the pin is 2048",
        "LED_PIN = 1234",
        "PIN 13 is the onboard LED",
        "the PIN is 4 digits long",
        "the PIN is 4096 bytes long",
        "the PIN is 1234 digits",
        "the PIN length is 6 though",
    ],
)
def test_numbers_in_sentences_about_a_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("my pin is 4821", "my pin is [REDACTED:password_statement]"),
        (
            "the pin for the card is 0917",
            "the pin for the card is [REDACTED:password_statement]",
        ),
        ("pin: 55731", "pin: [REDACTED:password_statement]"),
        ("your new pin is 4821.", "your new pin is [REDACTED:password_statement]."),
        ("my bank card pin is 0000", "my bank card pin is [REDACTED:password_statement]"),
        ("the sim pin: 1234", "the sim pin: [REDACTED:password_statement]"),
        (
            "- pin: 55731\n- puk: on the card",
            "- pin: [REDACTED:password_statement]\n- puk: on the card",
        ),
        ("Pin: 4821", "Pin: [REDACTED:password_statement]"),
        ("pin code: 55731", "pin code: [REDACTED:password_statement]"),
        (
            "the pin to the safe is 4821, do not share",
            "the pin to the safe is [REDACTED:password_statement], do not share",
        ),
        (
            "my pin number was changed to 90210",
            "my pin number was changed to [REDACTED:password_statement]",
        ),
    ],
)
def test_a_pin_in_lower_case_that_is_someones_is_redacted(text: str, redacted: str) -> None:
    # only PIN in capitals counted: "my pin is 4821" was kept as written
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "pin the version to 4.2.1",
        "pin numpy<2",
        "pins 3 and 4",
        "pin 12 of the GPIO header",
        "the dependency is pinned at 2024",
        "the pin is 2048",
        "gpio pin: 2048",
        "led pin is 2048",
        "pin: 4.2.1",
        "my pin is 4821.5",
        "my pin is 4 digits long",
        "spin: 1234",
        "the pin count is 1024",
        "the pin of the header is 4096",
    ],
)
def test_pins_that_are_parts_versions_or_counts_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("SIM_PIN=4821", "SIM_PIN=[REDACTED:credential_assignment]"),
        ("PIN=4821", "PIN=[REDACTED:credential_assignment]"),
        ("export PIN_CODE=0917", "export PIN_CODE=[REDACTED:credential_assignment]"),
        ('card_pin = "4821"', 'card_pin = "[REDACTED:credential_assignment]"'),
        ("user_pin = 123456", "user_pin = [REDACTED:credential_assignment]"),
        ('{"pin": "4821"}', '{"pin": "[REDACTED:credential_assignment]"}'),
        ("so-pin: 87654321", "so-pin: [REDACTED:credential_assignment]"),
    ],
)
def test_a_pin_set_by_a_name_that_holds_one_is_redacted(text: str, redacted: str) -> None:
    # no assignment rule knew pin: `SIM_PIN=4821` was kept as written
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "LED_PIN = 1234",
        "gpio_pin: 2048",
        "pin_count = 1024",
        "pin_timeout_ms = 5000",
        "max_pin = 9999",
        "pin = 13",
        "pin = 4.2.1",
        "pin: 2024-01-01",
        "spin = 1234",
    ],
)
def test_settings_named_after_a_gpio_pin_or_a_count_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("login: admin / S3cretPass", "login: admin / [REDACTED:password_statement]"),
        ("Login: deploy/Hunter2024!", "Login: deploy/[REDACTED:password_statement]"),
        ("user admin pass hunter2", "user admin pass [REDACTED:password_statement]"),
        (
            "ssh in as user ops password Tr0ub4dor&3 then sudo",
            "ssh in as user ops password [REDACTED:password_statement] then sudo",
        ),
        ("creds: root/toor", "creds: root/[REDACTED:password_statement]"),
        (
            "the default credentials are admin/admin123.",
            "the default credentials are admin/[REDACTED:password_statement].",
        ),
        (
            "username & password: grafana / Gr4fana!",
            "username & password: grafana / [REDACTED:password_statement]",
        ),
    ],
)
def test_a_user_and_password_given_as_a_pair_lose_the_password(text: str, redacted: str) -> None:
    # only `credentials: root/toor` was caught, by the whole value's symbols: a pair after
    # login, creds or user and pass, and `user NAME pass VALUE`, were kept in the clear
    assert redact(text) == redacted
    assert find_secrets("credentials: root/toor")


@pytest.mark.parametrize(
    "text",
    [
        "login: see /docs/login",
        "login: GET/POST",
        "login: username/password",
        "login: email / phone",
        "login: SSO/LDAP",
        "credentials: user/pass",
        "creds: aws/gcp",
        "login: oauth/oidc then redirect",
        "user admin password reset",
        "the user root password field is empty",
        "user name password form",
        "login: admin / ${ADMIN_PASSWORD}",
        "user admin pass <password>",
        "ftp.login() # default, i.e.: user anonymous, passwd anonymous@",
    ],
)
def test_pairs_of_words_after_login_or_user_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "if token == Literal:",
        "if password == DEFAULT_PASSWORD:",
        "    elif token == Literal: return",
        "while secret == EMPTY_SECRET:",
        "    if pwd == DefaultPwd:",
        "if api_key == MissingApiKey:",
    ],
)
def test_a_comparison_with_a_name_in_a_block_header_stays_storable(text: str) -> None:
    # the colon that ends the header was read as part of the value, which then no longer
    # looked like a name: `Literal:` passed for key material, `DEFAULT_PASSWORD:` for a password
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [("if password == Hunter2024:", "Hunter2024"), ("if password == 's3cret':", "s3cret")],
)
def test_a_comparison_with_a_literal_in_a_block_header_is_a_secret(text: str, value: str) -> None:
    redacted = redact(text)
    assert value not in redacted
    assert redacted.endswith("]:") or redacted.endswith("]':")


def test_a_value_after_a_name_is_a_secret_unless_a_type_follows_it() -> None:
    # what tells an annotation from a credential is what follows the value, not its shape
    assert [m.rule for m in find_secrets("password: S3cr3t_Pass")] == ["credential_assignment"]
    assert [m.rule for m in find_secrets("password: S3cr3t_Pass\nhost: db")] == [
        "credential_assignment"
    ]
    assert find_secrets("password: S3cr3t_Pass | None = None") == []


def test_assignment_redacts_only_the_value() -> None:
    text = 'DB_PASSWORD="q8Zr2vLx0pWn7TgK"\nDB_HOST=db.internal'
    assert redact(text) == 'DB_PASSWORD="[REDACTED:credential_assignment]"\nDB_HOST=db.internal'


# An AWS session token is about 400 to 1,000 characters; a cut at a finder's length bound must
# not leave its tail (or, quoted, the whole of it) in the text.
LONG_VALUE = (
    "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDx7Pz3Vq9mK2nL8rT5wYbC1dE4fG6hJ0kM"
    "3pQ7sU9vX2yZ4aB6cD8eF0gH2iJ4kL6mN8oP0qR2sT4uV6wX8yZ0aB2cD4eF6gH8iJ0kL2mN4oP6qR8sT0uV2wX"
) * 5


@pytest.mark.parametrize(
    "template",
    [
        "AWS_SESSION_TOKEN={}",
        "aws_session_token = {}",
        'aws_session_token = "{}"',
        '{{"token": "{}"}}',
        "export DB_PASSWORD='{}'",
        "--password {}",
        "the api key is {}",
    ],
)
def test_values_longer_than_a_finder_bound_are_redacted_whole(template: str) -> None:
    text = template.format(LONG_VALUE)
    redacted = redact(text)
    assert "[REDACTED:" in redacted
    for piece in (LONG_VALUE[:24], LONG_VALUE[-24:], LONG_VALUE[300:324]):
        assert piece not in redacted


@pytest.mark.parametrize(
    "name",
    [
        "SECRET_KEY_BASE",  # Rails
        "API_KEY_PROD",
        "STRIPE_SECRET_KEY_LIVE",
        "DB_PASSWORD_PROD",
        "DB_PASS_STAGING",
        "GITHUB_TOKEN_2",
        "AUTH_TOKEN_V2",
        "db-password-dev",
    ],
)
def test_credential_names_with_an_environment_or_version_suffix_are_secrets(name: str) -> None:
    value = "Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA"
    assert redact(f"{name}={value}") == f"{name}=[REDACTED:credential_assignment]"


@pytest.mark.parametrize(
    "text",
    [
        "TOKEN_URL=https://auth.example.com/oauth/token",
        "PASSWORD_HASH_ROUNDS=12",
        "KEY_ID=abc123",
        "PASSWORD_MIN_LENGTH=12",
        "SECRET_NAME=prod-db-credentials",
        "DB_PASSWORD_FILE=/run/secrets/db_password",
    ],
)
def test_names_that_only_mention_a_credential_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [  # Maven's settings.xml, .NET's app.config, Spring and Jenkins XML
        (
            "<server><id>nexus</id><username>deploy</username>"
            "<password>Hunter2024!</password></server>",
            "<server><id>nexus</id><username>deploy</username>"
            "<password>[REDACTED:credential_assignment]</password></server>",
        ),
        (
            "<Password>correcthorse</Password>",
            "<Password>[REDACTED:credential_assignment]</Password>",
        ),
        (
            "<db.password>s3cr3tP4ss</db.password>",
            "<db.password>[REDACTED:credential_assignment]</db.password>",
        ),
        (
            "<apiToken>Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA</apiToken>",
            "<apiToken>[REDACTED:credential_assignment]</apiToken>",
        ),
        (
            '<add key="ApiKey" value="Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA" />',
            '<add key="ApiKey" value="[REDACTED:credential_assignment]" />',
        ),
        (
            '<add key="SmtpPassword" value="Hunter2024" />',
            '<add key="SmtpPassword" value="[REDACTED:credential_assignment]" />',
        ),
    ],
)
def test_credentials_in_xml_elements_and_settings_are_secrets(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "<password>${env.NEXUS_PASSWORD}</password>",
        "<password>{DESede}encrypted</password>",
        "<token>refresh</token>",
        "<passwordPolicy>strict</passwordPolicy>",
        '<add key="ApiKeyHeader" value="X-Api-Key" />',
        '<add key="PasswordMinLength" value="12" />',
        "<secret>my-app-tls</secret>",
    ],
)
def test_xml_that_only_mentions_a_credential_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "signature",
    [
        "k2v9x7q1m3n8b4c6z0p5w2e7r9t1y3u5Qm8vT2pL9xR4%3D",
        "Ab1%2Fx7q1m3n8b4c6z0p5w2e7r9t1y3u5Qm8vT2p%2BL9x%3D",  # an early %2F ends a long run
        "k2v9x7q1m3n8b4c6z0p5w2e7r9t1y3u5Qm8vT2pL9xR4=",
    ],
)
def test_azure_sas_signature_is_redacted(signature: str) -> None:
    url = (
        "https://acme.blob.core.windows.net/backups/db.bak?sp=r&st=2026-01-01T00:00:00Z"
        f"&se=2026-02-01T00:00:00Z&spr=https&sv=2022-11-02&sr=b&sig={signature}"
    )
    redacted = redact(f'azcopy copy "{url}" ./db.bak')
    assert signature not in redacted
    assert '&sig=[REDACTED:azure_sas_signature]"' in redacted
    assert "acme.blob.core.windows.net/backups/db.bak?sp=r" in redacted


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (  # ~/.docker/config.json; the value is base64 of "deploy:Hunter2024!"
            '{"auths": {"registry.example.com": {"auth": "ZGVwbG95Okh1bnRlcjIwMjQh"}}}',
            "ZGVwbG95Okh1bnRlcjIwMjQh",
        ),
        (  # .npmrc
            "//npm.example.com/:_auth=ZGVwbG95Okh1bnRlcjIwMjQh\nalways-auth=true",
            "ZGVwbG95Okh1bnRlcjIwMjQh",
        ),
        ("auth: ZGVwbG95Okh1bnRlcjIwMjQh", "ZGVwbG95Okh1bnRlcjIwMjQh"),
    ],
)
def test_base64_user_and_password_under_an_auth_key_is_redacted(text: str, value: str) -> None:
    redacted = redact(text)
    assert value not in redacted
    assert "[REDACTED:registry_auth]" in redacted


@pytest.mark.parametrize(
    "text",
    [
        '"auth": "required"',
        "auth: oauth2",
        '"auth": "Ym9ndXMgdmFsdWUgd2l0aG91dCBjb2xvbg=="',  # base64, but of no user:password
        "_auth=${NPM_AUTH}",
    ],
)
def test_auth_keys_without_credentials_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("DB_PW=Hunter2024", "Hunter2024"),
        ("LDAP_BIND_PW='Tr0ub4dor&3'", "Tr0ub4dor&3"),
        ("pw: Tr0ub4dor&3", "Tr0ub4dor&3"),
        (  # a wallet's recovery phrase: whoever has it has the funds
            'MNEMONIC="abandon ability able about above absent absorb abstract absurd abuse"',
            "absent absorb abstract absurd abuse",
        ),
        (
            "mnemonic: abandon ability able about above absent absorb abstract absurd abuse\n"
            "network: mainnet",
            "absent absorb abstract absurd abuse",
        ),
    ],
)
def test_pw_names_and_recovery_phrases_are_secrets(text: str, value: str) -> None:
    redacted = redact(text)
    assert value not in redacted
    assert "[REDACTED:credential_assignment]" in redacted
    assert "network: mainnet" in redact(text + "\nnetwork: mainnet")


class LookBackCounter(str):
    """A text that counts how many characters its line-start searches cover."""

    searched = 0

    def rfind(self, sub: str, start: int | None = None, end: int | None = None) -> int:
        first, last, _ = slice(start, end).indices(len(self))
        LookBackCounter.searched += max(0, last - first)
        return super().rfind(sub, start, end)


@pytest.mark.parametrize("setting", ["password=hunter2 ", "PASSWORD=hunter2 ", "PASS: x "])
def test_settings_on_one_line_look_back_a_bounded_way(setting: str) -> None:
    # each `pass` name searched back to the text's start for its line's: 7 s for 1.7 MB
    LookBackCounter.searched = 0
    text = LookBackCounter(setting * 5_000)
    assert redact(text) == redact(setting * 5_000)
    assert LookBackCounter.searched <= 5_000 * 130


def test_a_value_a_text_repeats_is_judged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # a page of settings judged every value anew: 6 s for 2 MiB of `MNEMONIC=`
    judged: list[str] = []

    def counting(value: str) -> bool:
        judged.append(value)
        return looks_random(value)

    monkeypatch.setattr(secret_assignments, "looks_random", counting)
    text = "password=hunter2 api_key=Qm8vT2pL9xR4nK7sW1zY6 " * 2_000
    redacted = "password=[REDACTED:credential_assignment] api_key=[REDACTED:credential_assignment] "
    assert redact(text) == redacted * 2_000
    assert sorted(set(judged)) == ["Qm8vT2pL9xR4nK7sW1zY6", "hunter2"]
    assert len(judged) <= 4  # once in each finder that reads it


def test_a_line_of_recovery_phrase_names_costs_linear_time() -> None:
    # each name took the rest of its line as its phrase and judged it whole: quadratic, 64 s
    # for 100 KB of `MNEMONIC=`
    text = "MNEMONIC=" * 4_500
    started = time.process_time()  # the work's own time: a loaded machine's pauses are not
    redact(text)
    assert time.process_time() - started < 1.0
    phrase = " ".join(["abandon", "ability", "able", "about", "above", "absent"] * 4)
    line = f"MNEMONIC={phrase}\nnetwork: mainnet"
    assert redact(line) == "MNEMONIC=[REDACTED:credential_assignment]\nnetwork: mainnet"


@pytest.mark.parametrize(
    "text",
    [
        "MNEMONIC=cable sample absent zoo example vivid trust ocean replace coin mind glass",
        'MNEMONIC="cable sample absent zoo example vivid trust ocean replace coin mind glass"',
        "mnemonic: cable sample absent zoo example vivid trust ocean replace coin mind glass",
    ],
)
def test_a_recovery_phrase_holding_a_placeholder_word_is_redacted(text: str) -> None:
    # sample, example and replace are words of the BIP39 list, and also marks of an example
    # value: a phrase holding one of them was judged a placeholder and kept in the clear
    assert "vivid" not in redact(text)


@pytest.mark.parametrize(
    "text", ["MNEMONIC=your twelve word recovery phrase here", "mnemonic: <replace me>"]
)
def test_a_recovery_phrase_placeholder_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "comment", ["# TODO: move it to the vault", "# the example wallet", "# yours, replace it"]
)
def test_a_recovery_phrase_stops_at_its_comment(comment: str) -> None:
    # the phrase ran to the end of its line: a comment naming a placeholder mark (todo,
    # example, your, replace) made the whole phrase a placeholder, left in the clear
    phrase = "abandon ability able about above absent absorb abstract absurd abuse access acid"
    for text in (f"MNEMONIC={phrase}  {comment}", f"  mnemonic: {phrase} {comment}\nx: 1"):
        redacted = redact(text)
        assert "absorb" not in redacted
        assert comment in redacted


@pytest.mark.parametrize(
    "text",
    ["pwd = os.getcwd()", "cd $PWD", "npw = 3", "mnemonic: str", "mnemonic = generate()"],
)
def test_pw_and_mnemonic_lookalikes_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "password: |\n  hunter2longvalue\nhost: db",
            "password: |\n  [REDACTED:credential_assignment]\nhost: db",
        ),
        (
            "db:\n  password: >-\n    Sup3rLongSecret\n  user: app\n",
            "db:\n  password: >-\n    [REDACTED:credential_assignment]\n  user: app\n",
        ),
        (
            "  - name: x\n    client_secret: |-\n      qP3xV8nK2mL7wR4t\n",
            "  - name: x\n    client_secret: |-\n      [REDACTED:credential_assignment]\n",
        ),
        (  # a token wrapped over lines goes whole
            "api_key: |\n  3f9a8b7c6d5e4f3a\n  2b1c0d9e8f7a6b5c\nregion: eu\n",
            "api_key: |\n  [REDACTED:credential_assignment]\nregion: eu\n",
        ),
    ],
)
def test_credentials_in_yaml_block_scalars_are_redacted(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "description: |\n  The password must be 12 characters\n",
        "password: |\n  Use the one from the vault.\n  Ask ops.\n",
        "password: |\n  ${DB_PASSWORD}\n",
        "password_policy: |\n  min length 12\n",
        "token: |\n  refreshed every hour\n",
        "bypass: |\n  hunter2longvalue\n",
        "password: |\nhost: x",
        "run: |\n  make test\n",
    ],
)
def test_yaml_blocks_without_a_credential_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "password: |\n  Use the one from the vault.\n",
        "db_password: >-\n    Ask ops for it.\nhost: db\n",
        "password: |\n  Stored in Vault under kv/prod/db.\n",
        "secret: |\n  Rotated monthly by the platform team.\n",
        "passphrase: >\n  See the runbook\n",
    ],
)
def test_a_yaml_block_of_one_line_of_prose_stays_storable(text: str) -> None:
    # one line of prose in a block under a password's name passed for a password, since a
    # block's value is a literal (several lines of it were already told apart)
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("password: |\n  open sesame 42\nhost: db\n", "open sesame 42"),
        ("db_password: >-\n    correct horse battery staple\n", "correct horse battery staple"),
        ("password: |\n  Hunter 2024!\n", "Hunter 2024!"),
    ],
)
def test_a_yaml_block_of_one_line_of_words_is_a_password(text: str, value: str) -> None:
    redacted = redact(text)
    assert value not in redacted
    assert "[REDACTED:credential_assignment]" in redacted


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("requirepass s3cretRedis!", "requirepass [REDACTED:credential_assignment]"),
        (
            "bind 127.0.0.1\nmasterauth letmeinplease\nport 6379",
            "bind 127.0.0.1\nmasterauth [REDACTED:credential_assignment]\nport 6379",
        ),
        (
            "redis-cli CONFIG SET requirepass 'Hunter2pass'",
            "redis-cli CONFIG SET requirepass '[REDACTED:credential_assignment]'",
        ),
        (
            "redis-server --requirepass Hunter2pass --port 6380",
            "redis-server --requirepass [REDACTED:credential_assignment] --port 6380",
        ),
    ],
)
def test_redis_passwords_are_redacted(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "# requirepass foobared",
        "requirepass foobared",
        "set requirepass in redis.conf",
        "requirepass directive controls who may connect",
        "requirepass <password>",
        "requirepass ${REDIS_PASSWORD}",
        'requirepass ""',
    ],
)
def test_redis_settings_without_a_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "localhost:5432:mydb:postgres:S3cretPw",
            "localhost:5432:mydb:postgres:[REDACTED:pgpass_password]",
        ),
        (
            "*:*:*:replicator:hunter2pass\ndb.internal:5432:app:app:pa\\:ss1",
            "*:*:*:replicator:[REDACTED:pgpass_password]\n"
            "db.internal:5432:app:app:[REDACTED:pgpass_password]",
        ),
        (
            "echo 'db.internal:5432:app:deploy:Hunter2024' >> ~/.pgpass",
            "echo 'db.internal:5432:app:deploy:[REDACTED:pgpass_password]' >> ~/.pgpass",
        ),
    ],
)
def test_pgpass_lines_lose_their_password(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "root:x:0:0:root:/root:/bin/bash",
        "docker:x:999:alice",
        "fe80::1:2:3:4",
        "00:1a:2b:3c:4d:5e",
        "10:20:30:40:5000",
        "localhost:5432:*:postgres:$PGPASSWORD",
        "localhost:5432:*:*:<password>",
        "the format is hostname:port:database:username:password",
    ],
)
def test_colon_separated_lines_that_are_no_pgpass_entry_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("SESSION_SECRET=keyboard cat", "SESSION_SECRET=[REDACTED:credential_assignment]"),
        (
            "export DB_PASSWORD=correct horse battery staple # rotated\nPORT=3000",
            "export DB_PASSWORD=[REDACTED:credential_assignment] # rotated\nPORT=3000",
        ),
        (
            "  - SESSION_SECRET: open sesame 42\n  - PORT: 3000",
            "  - SESSION_SECRET: [REDACTED:credential_assignment]\n  - PORT: 3000",
        ),
        (
            "password: hunter2x and more\nuser: app",
            "password: [REDACTED:credential_assignment]\nuser: app",
        ),
        ('SESSION_SECRET="keyboard cat"', 'SESSION_SECRET="[REDACTED:credential_assignment]"'),
        (  # not a setting of its own line: code goes on after the value
            "if password == hunter2x and ok:",
            "if password == [REDACTED:credential_assignment] and ok:",
        ),
        (
            "DB_PASSWORD=hunter2; echo done",
            "DB_PASSWORD=[REDACTED:credential_assignment]; echo done",
        ),
        (  # a command run with the setting keeps its flags and paths
            "PGPASSWORD=S3cretPass psql -h db.internal app",
            "PGPASSWORD=[REDACTED:credential_assignment] psql -h db.internal app",
        ),
        (
            "DB_PASSWORD=hunter2 ./run.sh --verbose",
            "DB_PASSWORD=[REDACTED:credential_assignment] ./run.sh --verbose",
        ),
    ],
)
def test_an_unquoted_setting_loses_its_whole_value_spaces_included(
    text: str, redacted: str
) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "SESSION_SECRET=$SESSION_SECRET node app.js",
        "SESSION_SECRET=<set me> # later",
        "export SECRET_FILE=/run/secrets/app",
    ],
)
def test_settings_with_a_reference_and_words_after_it_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("password = open sesame 42", "password = [REDACTED:credential_assignment]"),
        (
            "db_password: correct horse battery\nhost: db",
            "db_password: [REDACTED:credential_assignment]\nhost: db",
        ),
        (
            "[client]\npassword = blue monkey 42  # rotated\nuser = app",
            "[client]\npassword = [REDACTED:credential_assignment]  # rotated\nuser = app",
        ),
        (
            "  - session_secret: keyboard cat",
            "  - session_secret: [REDACTED:credential_assignment]",
        ),
    ],
)
def test_a_lower_case_setting_of_several_words_is_a_secret(text: str, redacted: str) -> None:
    # an unquoted lower-case value was judged by its first word alone, read as a variable
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "password = the one in the vault",
        "password: ask ops for it",
        "db_password: same as staging",
        "password: not set yet",
        "password = see 1Password",
        "password = user_password if user else default_password",
        "password = generate_password length: 12",
        "secret: db credentials prod",
        "Password: rotated every quarter",
        "pw = pw + c",
        "pwd: Jim Meyering",
    ],
)
def test_a_lower_case_setting_of_prose_or_code_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Passwort: geheimnis2024", "geheimnis2024"),
        ("Das Passwort ist Geheim2024!", "Geheim2024!"),
        ("Datenbankpasswort: s3cret!x", "s3cret!x"),
        ("La contraseña es Secreto123", "Secreto123"),
        ("mot de passe: motdepasse42", "motdepasse42"),
        ("A senha é Brasil2024", "Brasil2024"),
        (
            "\u041f\u0430\u0440\u043e\u043b\u044c: \u0421\u0435\u043a\u0440\u0435\u04422024",
            "\u0421\u0435\u043a\u0440\u0435\u04422024",
        ),
        ("密码\uff1aabc12345", "abc12345"),
        ("パスワード: hunter2x", "hunter2x"),
        ("비밀번호: abcd1234", "abcd1234"),
        ("wachtwoord: Welkom01", "Welkom01"),
        ("hasło: Tajne2024", "Tajne2024"),
    ],
)
def test_passwords_after_the_word_in_other_languages_are_redacted(text: str, value: str) -> None:
    redacted = redact(text)
    assert value not in redacted
    assert "[REDACTED:password_statement]" in redacted


@pytest.mark.parametrize(
    "text",
    [
        "Passwort: siehe Wiki",
        "Passwort: erforderlich",
        "Passwortrichtlinie: mindestens 12 Zeichen",
        "Das Passwort ist falsch",
        "Passwort vergessen?",
        "Passwort isolated1",
        "resenha: ótimo filme 2024",
        "la contraseña es incorrecta",
        "mot de passe oublié",
        "пароль неверный",
        "Passwort-Manager: KeePassXC",
        "Kennwort: ********",
        "Passwort: <Ihr Passwort>",
        "contraseña: ${DB_PASS}",
    ],
)
def test_other_languages_mentioning_a_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Kennwort: geheim", "Kennwort: [REDACTED:password_statement]"),
        ("mot de passe : soleil", "mot de passe : [REDACTED:password_statement]"),
        ("contraseña: gatito", "contraseña: [REDACTED:password_statement]"),
        ("WLAN-Passwort: Sonnenblume.", "WLAN-Passwort: [REDACTED:password_statement]."),
        ("senha: saudade\nusuário: ana", "senha: [REDACTED:password_statement]\nusuário: ana"),
        ("wachtwoord: tulpen", "wachtwoord: [REDACTED:password_statement]"),
        ("пароль: котик", "пароль: [REDACTED:password_statement]"),
    ],
)
def test_a_single_word_after_the_word_in_other_languages_is_a_password(
    text: str, redacted: str
) -> None:
    # only a value mixing letters with digits or symbols counted: a word was let through
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "Passwort: erforderlich",
        "Kennwort: optional",
        "Passwort: vergessen?",
        "Passwort: falsch",
        "mot de passe : requis",
        "mot de passe : oublié",
        "contraseña: incorrecta",
        "contraseña: obligatoria",
        "senha: obrigatória",
        "wachtwoord: verplicht",
        "пароль: неверный",
        "Passwort: siehe unten",
        "Das Passwort ist geheim",
    ],
)
def test_a_word_describing_the_password_in_other_languages_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Das Passwort ist Sonnenblume", "Das Passwort ist [REDACTED:password_statement]"),
        (
            "das Passwort für den Server ist Bergkristall.",
            "das Passwort für den Server ist [REDACTED:password_statement].",
        ),
        ("le mot de passe est tournesol", "le mot de passe est [REDACTED:password_statement]"),
        ("la contraseña es girasol", "la contraseña es [REDACTED:password_statement]"),
        ("het wachtwoord is zonnebloem", "het wachtwoord is [REDACTED:password_statement]"),
        ("la password è girasole", "la password è [REDACTED:password_statement]"),
        (
            "La password del wifi è farfalla.",
            "La password del wifi è [REDACTED:password_statement].",
        ),
        ("la password è Girasole2024", "la password è [REDACTED:password_statement]"),
        ("a senha é girassol", "a senha é [REDACTED:password_statement]"),
    ],
)
def test_a_single_word_after_the_word_in_other_languages_and_a_verb_is_a_password(
    text: str, redacted: str
) -> None:
    # only a word after a colon counted: after a verb, a word was let through
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "das Passwort ist zu kurz",
        "Das Passwort ist abgelaufen.",
        "Das Passwort ist hinterlegt",
        "Das Passwort ist Pflicht",
        "Das Passwort ist geheim",
        "le mot de passe est incorrect",
        "le mot de passe est expiré",
        "le mot de passe est sensible",
        "la contraseña es obligatoria",
        "la contraseña es distinta",
        "la password è scaduta",
        "la password è temporanea",
        "het wachtwoord is verlopen",
        "het wachtwoord is opgeslagen",
        "a senha é fraca",
        "the password era began",
    ],
)
def test_a_word_describing_the_password_after_a_verb_in_other_languages_stays_storable(
    text: str,
) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("Das Passwort lautet: Sonnenblume", "Das Passwort lautet: [REDACTED:password_statement]"),
        (
            "le mot de passe du wifi est : papillon.",
            "le mot de passe du wifi est : [REDACTED:password_statement].",
        ),
        ("la contraseña es: girasol", "la contraseña es: [REDACTED:password_statement]"),
        ("la password è: girasole", "la password è: [REDACTED:password_statement]"),
    ],
)
def test_a_single_word_after_a_verb_and_a_colon_in_other_languages_is_a_password(
    text: str, redacted: str
) -> None:
    # the verb before the colon was read as a word between the name and its value
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    ["Das Passwort ist: abgelaufen", "le mot de passe est : expiré", "la password è: scaduta"],
)
def test_a_describing_word_after_a_verb_and_a_colon_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


def test_a_test_suites_log_stays_storable() -> None:
    # each `PASS: name` line was read as a password setting, PASS being an upper-case name
    log = (
        "Running ./gdb.base/break.exp ...\n"
        "PASS: gdb.base/break.exp: run to main\n"
        "  PASS: gdb.base/break.exp: step over\n"
        "FAIL: gdb.base/break.exp: finish\n"
        "PASS: addr2line\n"
        "DB_PASS: s3cr3tP4ss\n"
    )
    assert redact(log) == log.replace("s3cr3tP4ss", "[REDACTED:credential_assignment]")


def test_a_short_test_log_of_two_outcomes_stays_storable() -> None:
    # no line names a test by a path or three words: the outcomes show it is a log
    log = "PASS: addr2line\nPASS: ar long names\nFAIL: objdump -d\n"
    assert find_secrets(log) == []


@pytest.mark.parametrize(
    "log",
    [
        # go test -v: each result line carries the test's time
        "=== RUN   TestLogin\n=== RUN   TestLogin/admin\n"
        "    --- PASS: TestLogin/admin (0.00s)\n--- PASS: TestLogin (0.01s)\n"
        "=== RUN   TestLogout\n--- PASS: TestLogout (0.12s)\nPASS\n"
        "ok  \tgithub.com/acme/auth\t0.135s\n",
        "--- PASS: TestParseConfig2 (0.00s)\n",
        # make check: short names, one outcome, and Automake's summary
        "PASS: t0001\nPASS: test_utf8\nPASS: sha256sum\n"
        "============================================================================\n"
        "# TOTAL: 3\n# PASS:  3\n# SKIP:  0\n# XFAIL: 0\n# FAIL:  0\n# XPASS: 0\n# ERROR: 0\n",
    ],
)
def test_a_go_or_automake_log_of_passes_stays_storable(log: str) -> None:
    assert find_secrets(log) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("PASS: hunter2", "PASS: [REDACTED:credential_assignment]"),
        # neither the dashes of a Go result without its time nor a total without the summary's
        # next line make a test log
        ("--- PASS: Monkey123\n", "--- PASS: [REDACTED:credential_assignment]\n"),
        (
            "# TOTAL: 3\nUSER: admin\nPASS: hunter2x\n",
            "# TOTAL: 3\nUSER: admin\nPASS: [REDACTED:credential_assignment]\n",
        ),
        # two lines of two outcomes are too few to be a log
        (
            "PASS: Monkey123\nFAIL: try the other one\n",
            "PASS: [REDACTED:credential_assignment]\nFAIL: try the other one\n",
        ),
        ("USER: admin\nPASS: hunter2\n", "USER: admin\nPASS: [REDACTED:credential_assignment]\n"),
        # logins listed one after another are no test log, whatever their number
        (
            "USER: admin\nPASS: Monkey123\n\nUSER: deploy\nPASS: sunshine7!\nPASS: 2nd-try\n",
            "USER: admin\nPASS: [REDACTED:credential_assignment]\n\nUSER: deploy\n"
            "PASS: [REDACTED:credential_assignment]\nPASS: [REDACTED:credential_assignment]\n",
        ),
    ],
)
def test_a_password_given_with_pass_outside_a_test_log_is_redacted(
    text: str, redacted: str
) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "CREATE USER app IDENTIFIED BY 'S3cretPass';",
            "CREATE USER app IDENTIFIED BY '[REDACTED:credential_assignment]';",
        ),
        (
            "CREATE USER 'app'@'%' IDENTIFIED WITH mysql_native_password BY 'S3cretPass';",
            "CREATE USER 'app'@'%' IDENTIFIED WITH mysql_native_password BY "
            "'[REDACTED:credential_assignment]';",
        ),
        (
            "GRANT ALL ON db.* TO 'app'@'localhost' IDENTIFIED BY 'S3cretPass';",
            "GRANT ALL ON db.* TO 'app'@'localhost' IDENTIFIED BY "
            "'[REDACTED:credential_assignment]';",
        ),
        (
            "CREATE USER app\n  IDENTIFIED BY 'S3cretPass'\n  DEFAULT TABLESPACE users;",
            "CREATE USER app\n  IDENTIFIED BY '[REDACTED:credential_assignment]'\n"
            "  DEFAULT TABLESPACE users;",
        ),
        (
            "ALTER USER scott IDENTIFIED BY tiger2024;",
            "ALTER USER scott IDENTIFIED BY [REDACTED:credential_assignment];",
        ),
        (
            "CREATE ROLE app LOGIN PASSWORD 'S3cretPass';",
            "CREATE ROLE app LOGIN PASSWORD '[REDACTED:credential_assignment]';",
        ),
        (
            "SET PASSWORD FOR 'root'@'localhost' = PASSWORD('S3cretPass');",
            "SET PASSWORD FOR 'root'@'localhost' = PASSWORD('[REDACTED:credential_assignment]');",
        ),
    ],
)
def test_passwords_in_sql_user_statements_are_redacted(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "GRANT ALL ON db.* TO 'app'@'%' IDENTIFIED BY PASSWORD '*6BB4837EB74329105EE45';",
        "CREATE USER app IDENTIFIED BY :password;",
        "CREATE USER app IDENTIFIED BY '${DB_PASSWORD}';",
        "ALTER ROLE app PASSWORD NULL;",
        "CREATE ROLE app LOGIN PASSWORD %s",
        "the user is identified by their email",
        # prose naming what identifies a thing, quoted: no statement creates a user
        "Load and return a dynamic library identified by 'name'.",
        "Each job is identified by 'job_id' in the table.",
        'the package is identified by "numpy" on PyPI',
        "hash_password(password)",
        "verify_password('hunter22')",
    ],
)
def test_sql_without_a_password_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        (
            "https://acme.firebaseio.com/users.json?auth=Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA9eK2",
            "https://acme.firebaseio.com/users.json?auth=[REDACTED:credential_assignment]",
        ),
        (
            "https://api.example.com/v1/geocode?q=Paris&key=Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA",
            "https://api.example.com/v1/geocode?q=Paris&key=[REDACTED:credential_assignment]",
        ),
    ],
)
def test_generated_key_or_auth_in_a_url_query_is_redacted(url: str, redacted: str) -> None:
    assert redact(url) == redacted


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/search?key=value&sort=asc",
        "https://example.com/cache?key=user_profile_settings_v2",
        "https://example.com/login?auth=sso",
    ],
)
def test_plain_key_or_auth_in_a_url_query_stays(url: str) -> None:
    assert find_secrets(url) == []


def test_url_credentials_keep_user_and_host() -> None:
    text = "postgres://app:Zq81xLpW0v@db.internal:5432/prod"
    assert redact(text) == "postgres://app:[REDACTED:url_credentials]@db.internal:5432/prod"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [  # passwords with the characters people choose, pasted unescaped from a .env file
        (
            "mongodb://admin:P@ssw0rd!@mongo:27017",
            "mongodb://admin:[REDACTED:url_credentials]@mongo:27017",
        ),
        (
            "postgres://app:Secr3t@Pass2024@db.internal:5432/prod",
            "postgres://app:[REDACTED:url_credentials]@db.internal:5432/prod",
        ),
        (
            "DATABASE_URL=mysql://app:xK9#mP2vL7@127.0.0.1/prod",
            "DATABASE_URL=mysql://app:[REDACTED:url_credentials]@127.0.0.1/prod",
        ),
        (
            "redis://default:ab?cd1234@redis:6379/0",
            "redis://default:[REDACTED:url_credentials]@redis:6379/0",
        ),
        (
            "postgres://app:q8Zr/2vLx+0pWn@db/prod?sslmode=require",
            "postgres://app:[REDACTED:url_credentials]@db/prod?sslmode=require",
        ),
    ],
)
def test_url_passwords_with_reserved_characters_are_redacted_whole(
    text: str, redacted: str
) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "ssh://git@github.com:org/repo.git",
        "see https://example.com/a:b@c for the user:password@host form",
        "https://api.example.com/v1/users/@me",
        "https://host/x?next=https://other/y@z",
    ],
)
def test_urls_without_a_password_stay_as_they_are(text: str) -> None:
    assert redact(text) == text


SESSION = "k2v9x7q1m3n8b4c6z0p5w2e7r9t1y3u5"


@pytest.mark.parametrize(
    "text",
    [  # "Copy as cURL" from a browser, and the headers of a response
        f"curl 'https://app.example.com/api' -H 'cookie: _ga=GA1.1.17; sessionid={SESSION}'",
        f'curl -b "session={SESSION}" https://app.example.com/api',
        f"curl --cookie 'connect.sid=s%3A{SESSION}.Qm8vT2pL9xR4' https://x",
        f"Cookie: PHPSESSID={SESSION}; theme=dark",
        f"Cookie: JSESSIONID={SESSION.upper()}",
        f"Set-Cookie: user_session={SESSION}; path=/; secure; HttpOnly",
        f"Cookie: laravel_session={SESSION}%3D",
    ],
)
def test_session_cookies_are_redacted(text: str) -> None:
    redacted = redact(text)
    assert SESSION not in redacted and SESSION.upper() not in redacted
    assert "[REDACTED:session_cookie]" in redacted


def test_cookie_headers_on_one_line_judge_each_pair_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # each header's pairs were read to 8 KiB on, so a line of headers judged every pair about
    # 190 times: 15 s for 200 KB (the Stop hook waits 20 s for the whole turn)
    judged: list[str] = []

    def counting(value: str) -> bool:
        judged.append(value)
        return looks_random(value)

    monkeypatch.setattr(secret_formats, "looks_random", counting)
    text = f"cookie: session={SESSION} " * 2_000
    assert redact(text) == "cookie: session=[REDACTED:session_cookie] " * 2_000
    assert len(judged) <= 2 * 2_000 * 2  # once a header, in each of redaction's two passes


@pytest.mark.parametrize(("cut", "found"), [(20, (8_192, 8_256)), (40, (8_172, 8_236))])
def test_a_cookie_value_a_header_window_cuts_is_judged_as_cut(
    cut: int, found: tuple[int, int]
) -> None:
    # the second header's 8 KiB end inside the value: that part is judged, and the rest of the
    # run it cut goes with it
    head = f"cookie: a=1 Cookie: {'x' * (8_192 - len('; sid=') - cut)}; sid="
    assert find_secrets(head + SESSION * 2 + " tail") == [SecretMatch("session_cookie", *found)]


@pytest.mark.parametrize(
    "text",
    [
        "Cookie: theme=dark; lang=en-GB; _ga=GA1.1.1234567890.1700000000",
        "Set-Cookie: session=; Max-Age=0; path=/",
        "the session cookie is HttpOnly; its name is sessionid",
        "Cookie: sessionid=<your-session-id>",
    ],
)
def test_cookies_without_a_session_value_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "header",
    [  # Django REST framework, GitHub's older form, Gitea, GoDaddy, Zendesk-style
        "Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
        "authorization: token Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA",
        "Authorization: sso-key Qm8vT2pL9xR4nK7sW:1zY6bH3cJ5fD0gA9eK2",
        '-H "Authorization: ApiKey Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA"',
    ],
)
def test_authorization_header_with_any_scheme_loses_its_credential(header: str) -> None:
    redacted = redact(header)
    assert "[REDACTED:authorization_header]" in redacted
    assert "Qm8vT2pL9xR4nK7sW" not in redacted and "9944b09199c62bcf" not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Token <your-token>",
        "Authorization: Token ${API_TOKEN}",
        "the Authorization: Token header is required",
    ],
)
def test_authorization_header_without_a_credential_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (
            "mongosh -u admin -p Hunter2024 --authenticationDatabase admin",
            "mongosh -u admin -p [REDACTED:password_flag] --authenticationDatabase admin",
        ),
        (
            "mongodump --host db -u admin -p 'Hunter 2024' --out /backup",
            "mongodump --host db -u admin -p '[REDACTED:password_flag]' --out /backup",
        ),
        (
            "keytool -importcert -keystore app.jks -storepass Hunter2024",
            "keytool -importcert -keystore app.jks -storepass [REDACTED:password_flag]",
        ),
        (
            "zip -r -P Hunter2024 backup.zip data/",
            "zip -r -P [REDACTED:password_flag] backup.zip data/",
        ),
        ("7z a -pHunter2024 backup.7z data/", "7z a -p[REDACTED:password_flag] backup.7z data/"),
        (
            "smbclient //nas/share -U bob%Hunter2024",
            "smbclient //nas/share -U bob%[REDACTED:password_flag]",
        ),
        (
            "openssl enc -aes-256-cbc -k Hunter2024 -in db.sql -out db.enc",
            "openssl enc -aes-256-cbc -k [REDACTED:password_flag] -in db.sql -out db.enc",
        ),
        (
            "htpasswd -b /etc/nginx/.htpasswd admin Adm1nPass",
            "htpasswd -b /etc/nginx/.htpasswd admin [REDACTED:password_flag]",
        ),
        (
            "sudo htpasswd -bB -C 12 .htpasswd alice 'S3cret pass' && nginx -s reload",
            "sudo htpasswd -bB -C 12 .htpasswd alice '[REDACTED:password_flag]' && nginx -s reload",
        ),
        (
            "htpasswd -nb admin hunter2 > auth",
            "htpasswd -nb admin [REDACTED:password_flag] > auth",
        ),
        (
            "echo 'Hunter2pass' | sudo -S apt-get update",
            "echo '[REDACTED:password_flag]' | sudo -S apt-get update",
        ),
        (
            "echo -n hunter2pass | sudo -u deploy -kS systemctl restart app",
            "echo -n [REDACTED:password_flag] | sudo -u deploy -kS systemctl restart app",
        ),
        ("echo 'root:Hunter2024' | chpasswd", "echo 'root:[REDACTED:password_flag]' | chpasswd"),
        ("chpasswd <<< 'app:S3cretPass'", "chpasswd <<< 'app:[REDACTED:password_flag]'"),
        (
            "C:\\> net user admin P@ssw0rd12 /add",
            "C:\\> net user admin [REDACTED:password_flag] /add",
        ),
        (
            "rabbitmqctl add_user app S3cretPass",
            "rabbitmqctl add_user app [REDACTED:password_flag]",
        ),
        (
            "ldapsearch -x -D cn=admin -w S3cretPass -b dc=example",
            "ldapsearch -x -D cn=admin -w [REDACTED:password_flag] -b dc=example",
        ),
        (
            "mysqladmin -u root password S3cretPass",
            "mysqladmin -u root password [REDACTED:password_flag]",
        ),
        (
            "sqlcmd -S db -U sa -P S3cretPass -Q 'select 1'",
            "sqlcmd -S db -U sa -P [REDACTED:password_flag] -Q 'select 1'",
        ),
        (
            "bcp dbo.t out t.dat -S db -U sa -PS3cretPass -c",
            "bcp dbo.t out t.dat -S db -U sa -P[REDACTED:password_flag] -c",
        ),
        (
            "ssh-keygen -t ed25519 -N 'S3cretPass' -f key",
            "ssh-keygen -t ed25519 -N '[REDACTED:password_flag]' -f key",
        ),
        (
            "security unlock-keychain -p Keychain-Unlock-8 needs to run before signing",
            "security unlock-keychain -p [REDACTED:password_flag] needs to run before signing",
        ),
        (
            "security create-keychain -p ci-pass build.keychain",
            "security create-keychain -p [REDACTED:password_flag] build.keychain",
        ),
        (
            "security add-generic-password -a me -s svc -w S3cret!pw",
            "security add-generic-password -a me -s svc -w [REDACTED:password_flag]",
        ),
    ],
)
def test_more_command_line_passwords_are_redacted(text: str, redacted: str) -> None:
    assert redact(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "mongod --port 27017 -p",
        "run mongo in docker: docker run -d -p 27017:27017 mongo:7",
        "login to the box, then docker run -p 127.0.0.1:8080:80/tcp nginx",
        "zip -r backup.zip data/ -x '*.tmp'",
        "7z x -o/tmp/out backup.7z",
        "keytool -list -keystore app.jks",
        "smbclient -L //nas -U bob",
        "openssl req -new -key server.key -out server.csr",
        "htpasswd -c /etc/nginx/.htpasswd admin",
        "htpasswd -B /etc/nginx/.htpasswd admin",
        "htpasswd -D .htpasswd alice",
        "htpasswd -b .htpasswd alice $PASSWORD",
        "use htpasswd -b to give the password on the command line",
        "echo hello | sudo tee /etc/motd",
        "echo 'deb http://deb.example.com stable main' | sudo tee -a /etc/apt/sources.list",
        'echo "$SUDO_PASSWORD" | sudo -S true',
        "echo whoami | sudo -s",
        "echo $USER:$PASS | chpasswd",
        "net user admin *",
        "net user admin /delete",
        "the net user count grew",
        "ldapsearch -x -D cn=admin -W -b dc=example",
        "rabbitmqctl add_user app $RABBIT_PASS",
        "mysqladmin -u root -p password",
        "sqlcmd -S db -E -p 1",
        "ssh-keygen -s ca -I id -n alice,bobby key.pub",
        "ssh-keygen -t ed25519 -N '' -f key",
        "bcp dbo.t out t.dat -S db -T -c",
        'security unlock-keychain -p "$KEYCHAIN_PASSWORD" build.keychain',
        "security find-generic-password -s svc -w",
        "security find-generic-password -w -s svc",
        "security unlock-keychain build.keychain",
    ],
)
def test_command_lines_without_a_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


def test_private_key_block_is_redacted_whole() -> None:
    body = (
        "MIIEowIBAAKCAQEAy8Dbv8prpJ/0kKhlGeJYozo2t60EG8L0561g13R29LvMR5hy\n"
        "vGZlGJpmn65+A4xHXInJYiPuKzrKUnApeLZ+vw1HocOAZtWK0z3r26uA8kQYOKX9"
    )
    text = f"before\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\nafter"
    assert redact(text) == "before\n[REDACTED:private_key_block]\nafter"


ENCODED_KEY = base64.b64encode(
    b"-----BEGIN RSA PRIVATE KEY-----\n"
    b"MIIEowIBAAKCAQEAy8Dbv8prpJ/0kKhlGeJYozo2t60EG8L0561g13R29LvMR5hy\n"
    b"vGZlGJpmn65+A4xHXInJYiPuKzrKUnApeLZ+vw1HocOAZtWK0z3r26uA8kQYOKX9\n"
    b"-----END RSA PRIVATE KEY-----\n"
).decode()


@pytest.mark.parametrize(
    "template",
    [  # a kubeconfig, a Kubernetes TLS secret, a CI variable
        "users:\n- name: admin\n  user:\n    client-key-data: {}\n",
        "data:\n  tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t\n  tls.key: {}\n",
        "SSH_PRIVATE_KEY_B64={}",
    ],
)
def test_base64_encoded_private_key_is_redacted_whole(template: str) -> None:
    redacted = redact(template.format(ENCODED_KEY))
    assert ENCODED_KEY[:20] not in redacted and ENCODED_KEY[-20:] not in redacted
    assert "[REDACTED:private_key_block]" in redacted


def test_base64_encoded_certificate_is_not_a_secret() -> None:
    certificate = base64.b64encode(
        b"-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n"
    ).decode()
    assert find_secrets(f"client-certificate-data: {certificate}") == []


def test_overlapping_detections_are_merged_into_one_span() -> None:
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    text = f'GITHUB_TOKEN="{token}"'
    assert find_secrets(text) == [SecretMatch("github_token", 14, 14 + len(token))]


@pytest.mark.parametrize(
    "text",
    [
        "-----BEGIN PRIVATE KEY-----sk-0a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q",
        "AUTHORIZATION:BASIC 00000KEY=ACCOUNTKEY=001234A=",
    ],
)
def test_replacements_that_change_a_neighbour_are_scanned_again(text: str) -> None:
    once = redact(text)
    assert once.count("[REDACTED:") == 2
    assert redact(once) == once


# ------------------------------------------------------------------ properties
FRAGMENTS = (
    "AKIA",
    "ASIA",
    "ghp_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xapp-1-",
    "sk-",
    "sk-proj-",
    "sk-ant-api03-",
    "sk_live_",
    "SG.",
    "key-",
    "npm_",
    "pypi-AgE",
    "hf_",
    "shpat_",
    "dop_v1_",
    "HRKU-",
    "dp.pt.",
    "eyJ",
    "AIza",
    "AccountKey=",
    "SK",
    "AC",
    "EAAA",
    "ATBB",
    ":AA",
    "-----BEGIN PRIVATE KEY-----",
    "-----END PRIVATE KEY-----",
    "\n",
    "\\n",
    "://",
    "@",
    ":",
    "password",
    "token",
    "secret",
    "api_key",
    "=",
    ": ",
    '"',
    "'",
    "Bearer ",
    "Authorization: Basic ",
    "[REDACTED:jwt]",
    "[",
    "]",
    ".",
    "-",
    "_",
    " ",
    "Zq81xLpW0vA7",
    "0123456789abcdef",
    "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5",
    "MTk4NjIyNDgzNDcxOTI1MjQ4",
    "1234567890",
    "ABCDEFGHIJKLMNOP",
    "q8Zr2vLx0pWn7TgKq8Zr2vLx0pWn7TgKq8Zr2vLx",
    "postgres",
    "İ",
    "hvs.",
    "lin_api_",
    "AGE-SECRET-KEY-1",
    " is ",
    "the password ",
    "machine h login u ",
    "docker login -p ",
    "mysql -p",
    "--password ",
    "Q~",
    "Winter2024!",
    " is: ",
    "with the password ",
    "wifi password: ",
    "the api key is ",
    "the token is ",
    "qwerty",
)
mixed_text = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=40).map("".join)
any_text = st.text(max_size=300) | mixed_text


@settings(max_examples=400, deadline=None)
@given(any_text)
def test_matches_are_in_bounds_sorted_and_disjoint(text: str) -> None:
    matches = find_secrets(text)
    previous_end = 0
    for match in matches:
        assert previous_end <= match.start < match.end <= len(text)
        assert match.rule in RULE_NAMES
        previous_end = match.end
    assert contains_secret(text) == bool(matches)


@settings(max_examples=400, deadline=None)
@given(any_text)
def test_redaction_is_idempotent_and_leaves_nothing_detectable(text: str) -> None:
    once = redact(text)
    assert redact(once) == once
    assert not contains_secret(once)
    if not find_secrets(text):
        assert once == text


# A PIN set by name, as one pattern tried at every character: what find_pin_settings, which
# looks only where "pin" is, must find.
_PIN_SETTING_WHOLE = re.compile(
    r"(?<![a-z0-9_\-.$@])(?:(?P<owner>sim|card|atm|bank|debit|credit|user|admin|default|door|"
    r"alarm|voicemail|unlock|wps|bluetooth|pairing|smartcard|security|so)[_\-.]?)?"
    r"pin(?P<code>[_\-.]?(?:code|number))?(?P<name_quote>[\"']?)[ \t]{0,8}(?P<op>=|:)[ \t]{0,8}"
    r"(?P<quote>[\"']?)(?P<value>[0-9]{4,12}+)(?P=quote)(?![0-9a-z_\-:/]|\.[0-9])"
)
PIN_BEFORE = (
    "",
    " ",
    "x",
    "led_",
    "gpio",
    "sim_",
    "SIM-",
    "card.",
    "so_",
    "also_",
    "$",
    "@",
    "my ",
)
PIN_NAMES = ("pin", "PIN", "pin_code", "pinnumber", "pin-code", "pins", "spin", "typing")
PIN_AFTER = ("", "'", '"', " ", ":", "=")
PIN_VALUES = ("4821", "123456789012", "98", "4.2.1", "2024-01-01", "4821x", '"4821"', "'0917'")
pin_setting = st.tuples(
    st.sampled_from(PIN_BEFORE),
    st.sampled_from(PIN_NAMES),
    st.sampled_from(PIN_AFTER),
    st.sampled_from(("=", ":", " = ", ": ", " ")),
    st.sampled_from(PIN_VALUES),
    st.sampled_from(("", " ", ".", "\n", "/x", ":", ". next")),
).map("".join)


@settings(max_examples=1500, deadline=None)
@given(st.lists(pin_setting | st.sampled_from(PIN_BEFORE), min_size=1, max_size=4).map("".join))
def test_pin_settings_are_what_the_whole_pattern_finds(text: str) -> None:
    lowered = text.lower()
    expected = [
        match.span("value")
        for match in _PIN_SETTING_WHOLE.finditer(lowered)
        if match["op"] == "=" or match["owner"] or match["code"] or match["name_quote"]
    ]
    assert list(find_pin_settings(text, lowered)) == expected


run_text = st.text(alphabet="aZ09_-.+/= \n\t\u00e9\u20ac\ud800x", max_size=120) | any_text


@settings(max_examples=600, deadline=None)
@given(run_text)
def test_long_runs_are_what_a_regex_finds(text: str) -> None:
    # The byte-level scan that gates the token rules must agree with the plain definition.
    expected = " ".join(re.findall(r"[A-Za-z0-9_\-.+/=]{15,}", text))
    assert _long_runs(text) == expected


def test_only_always_open_rules_run_without_a_long_run() -> None:
    # _open_rules skips every gated rule when the text has no long run: each gate must agree.
    gated = [name for name, _, gate in _RULES if gate is not _always]
    assert gated
    assert all(not gate("") for _, _, gate in _RULES if gate is not _always)


def _rules_by_each_gate(text: str) -> list[str]:
    """What `_open_rules` must answer: every rule whose own gate opens, in the rules' order."""
    runs = _long_runs(text)
    if len(runs) > 4_096:
        runs = " ".join(set(runs.split(" ")))
    has_operator = "=" in text or ":" in text or "<-" in text  # R's assignment too
    return [
        name
        for name, finder, gate in _RULES
        if gate(runs) and (has_operator or finder not in _NEED_AN_OPERATOR)
    ]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([record["text"] for record in [*SECRETS, *LOOKALIKES]]), run_text)
@example("ASIAQJXXVBOTHD2WTFLH", "<-")  # R's assignment opens the rules an operator does
def test_the_rules_opened_by_trigger_are_those_each_gate_opens(corpus: str, noise: str) -> None:
    # _open_rules looks the triggers of every rule up at once instead of asking each gate
    for text in (corpus, noise, noise + " " + corpus):
        assert [name for name, _ in _open_rules(text)] == _rules_by_each_gate(text)


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


def test_a_token_gate_asks_for_the_start_its_finder_needs() -> None:
    # the jwt gate looked for its pattern from every eyJ of a run, 8 KiB on from each (15 s
    # for 2 MiB of eyJeyJ...): it asks for the start boundary the finder asks for, so a token
    # glued to a word no longer opens the rule
    glued = "x" + JWT
    assert "jwt" not in [name for name, _ in _open_rules(glued)]
    assert find_secrets(glued) == []
    assert "jwt" in [name for name, _ in _open_rules("token " + JWT)]
    assert redact("token " + JWT) == "token [REDACTED:jwt]"


token_text = st.lists(
    st.sampled_from(["eyJ", "EAAA", "sk-", "ghp_", "xoxb-", ".", "-", "_", " ", "x", "A1b2", JWT]),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(token_text)
def test_a_token_rule_that_finds_a_token_has_its_gate_open(text: str) -> None:
    runs = _long_runs(text)
    for name, finder, gate in _RULES:
        if next(finder(text, text.lower()), None) is not None and gate is not _always:
            assert gate(runs), name


def test_rules_said_to_need_an_operator_find_nothing_without_one() -> None:
    # _open_rules skips them for text with neither `=` nor `:`; on every corpus text (secrets
    # and look-alikes), taking those two characters away must leave them nothing to find.
    texts = [record["text"] for record in [*SECRETS, *LOOKALIKES]]
    assert _NEED_AN_OPERATOR
    found_with = 0
    for text in texts:
        lowered = text.lower()
        found_with += sum(1 for finder in _NEED_AN_OPERATOR for _ in finder(text, lowered))
        bare = text.replace("=", " ").replace(":", " ")
        assert not [span for finder in _NEED_AN_OPERATOR for span in finder(bare, bare.lower())]
    assert found_with > 0  # the corpus does exercise these rules


# ------------------------------------------------------------- linear time
ADVERSARIAL = {
    "one letter": "a" * 100_000,
    "capitals": "A" * 100_000,
    "key headers without end": "-----BEGIN PRIVATE KEY-----" * 4_000,
    "scheme markers": "://" * 33_000,
    "userinfo without at": "x://" + "a:" * 50_000,
    "userinfo at signs": "x://a:" + "b@" * 50_000,
    "assignment operators": 'password="' * 10_000,
    "assignment keys": "api_key=" * 12_500,
    "prefix repeats": "sk-" * 33_000 + "ghp_" * 25_000,
    "dashed prefix repeats": "xoxb-" * 20_000 + "ATBB-" * 20_000 + "glpat-" * 16_000,
    "long jwt head": "eyJ" + "a" * 100_000,
    "digits before colon": "1" * 100_000 + ":AA",
    "bearer repeats": "Bearer " * 14_000,
    "dotted runs": ("M" * 25 + ".") * 4_000,
    "stated passwords": "the password for the box is " * 4_000,
    "said passwords": "the wifi password is: " * 4_000,
    "passwords given with": "log in with the password " * 4_000,
    "stated keys": "the api key for the box is " * 4_000,
    "stated tokens": "the token is: the token " * 4_000,
    "long words after a name": ("token " + "a" * 40 + " ") * 2_000,
    "netrc words": "machine login password " * 5_000,
    "login flags": "docker login -u x " * 6_000 + "-p",
    "curl users": "curl -u a " * 10_000 + ":",
    "long flags": "--password --password-file " * 4_000,
    "azure tildes": "abc1Q~" * 15_000,
    "putty headers": "PuTTY-User-Key-File-2: x\n" * 4_000,
    "xml elements": "<password>" * 10_000,
    "xml settings": 'key="password" value="' * 5_000,
    "settings of words": "password = the one in\n" * 4_500,
    "foreign words after a colon": "Kennwort: " * 10_000,
    "stated PINs": "the PIN is " * 9_000,
    "login pairs": "login: a / " * 9_000,
    "user and pass words": "user admin pass " * 6_000,
    "comparisons in block headers": "if token == Literal:\n" * 4_800,
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_inputs_complete(text: str) -> None:
    matches = find_secrets(text)
    redacted = redact(text)
    if text.startswith("-----BEGIN"):
        assert len(matches) == 4_000
        assert redacted == "[REDACTED:private_key_block]" * 4_000
    else:
        assert matches == []
        assert redacted == text


def test_unterminated_key_block_loses_its_body() -> None:
    lines = "\n".join(["MIIEowIBAAKCAQEAy8Dbv8prpJ0kKhlGeJYozo2t60EG8L0561g13R29LvMR5hy"] * 3)
    text = f"-----BEGIN RSA PRIVATE KEY-----\n{lines}"
    assert redact(text) == "[REDACTED:private_key_block]"


@pytest.mark.parametrize("last", ["lPZP", "Aw==", "AQAB/x+9"])
def test_unterminated_key_block_loses_its_short_last_line_too(last: str) -> None:
    # a key's last line of base64 is shorter than the others; cut off before its END line, it
    # was left after the marker, a piece of the key in plain sight
    lines = "\n".join(["MIIEowIBAAKCAQEAy8Dbv8prpJ0kKhlGeJYozo2t60EG8L0561g13R29LvMR5hy"] * 3)
    text = f"-----BEGIN RSA PRIVATE KEY-----\n{lines}\n{last}"
    assert redact(text) == "[REDACTED:private_key_block]"
    assert redact(f"{text}\n\nThanks, that is all") == (
        "[REDACTED:private_key_block]\n\nThanks, that is all"
    )
    escaped = text.replace("\n", "\\n")  # as a JSON string carries it
    assert redact(f'{{"key": "{escaped}", "n": 1}}') == (
        '{"key": "[REDACTED:private_key_block]", "n": 1}'
    )
    # a line of prose right below the body is not key material
    assert redact(f"{text[: -len(last) - 1]}\n{last} was the end") == (
        f"[REDACTED:private_key_block]\n{last} was the end"
    )


@pytest.mark.parametrize(
    ("escaped", "ends"),
    [
        ("\\r\\n", ["", "\\r\\n"]),  # a JSON string of a key with Windows line ends
        ("\\\\n", ["", "\\\\n"]),  # a JSON string inside a JSON string
        ("\\\\r\\\\n", ["", "\\\\r\\\\n"]),
    ],
)
def test_unterminated_key_block_with_escaped_line_breaks_loses_all_of_its_body(
    escaped: str, ends: list[str]
) -> None:
    # before: with \r\n escaped, the key's short last line was left after the marker; with
    # line breaks escaped twice (\\n), the whole body was
    lines = ["MIIEowIBAAKCAQEAy8Dbv8prpJ0kKhlGeJYozo2t60EG8L0561g13R29LvMR5hy"] * 3
    text = escaped.join(["-----BEGIN RSA PRIVATE KEY-----", *lines, "Aw=="])
    for end in ends:
        quote = '\\"' if escaped.startswith("\\\\") else '"'
        redacted = redact(f'{{"key": {quote}{text}{end}{quote}, "n": 1}}')
        assert redacted == f'{{"key": {quote}[REDACTED:private_key_block]{end}{quote}, "n": 1}}'
        assert "Aw==" not in redacted and "MIIE" not in redacted


@pytest.mark.parametrize(
    ("label", "headers"),
    [
        ("RSA PRIVATE KEY", ["Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-128-CBC,3F17F5316E2BAC89"]),
        ("PGP PRIVATE KEY BLOCK", ["Version: GnuPG v1", "Comment: backup of my signing key"]),
    ],
)
@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\\n"])
def test_unterminated_key_block_with_header_lines_loses_its_body(
    label: str, headers: list[str], line_end: str
) -> None:
    # before: a cut-off block whose BEGIN line is followed by header lines (an encrypted PEM
    # key, an armored PGP key) kept every line of its body: only base64 was taken below BEGIN
    lines = ["MIIEowIBAAKCAQEAy8Dbv8prpJ0kKhlGeJYozo2t60EG8L0561g13R29LvMR5hy"] * 3
    text = line_end.join([f"-----BEGIN {label}-----", *headers, "", *lines, "=lPZP"])
    assert redact(f"{text}{line_end}") == f"[REDACTED:private_key_block]{line_end}"
    # header lines with no blank line and key material below them are left as they are
    prose = line_end.join([f"-----BEGIN {label}-----", *headers, "NotBase64ButLongWords: x"])
    assert redact(prose) == line_end.join(
        ["[REDACTED:private_key_block]", *prose.split(line_end)[1:]]
    )


def test_module_imports_without_trio_or_sqlite() -> None:
    probe = "import sys, orcad.secrets; print(sorted({'trio', 'sqlite3'} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    assert result.stdout.strip() == "[]"


def test_shortening_redacted_text_never_splits_a_marker() -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    text = redact(f"a {token} b {token} c")
    assert text == "a [REDACTED:github_token] b [REDACTED:github_token] c"
    for max_chars in range(1, len(text) + 2):
        for keep_end in (False, True):
            short = shorten_redacted(text, max_chars, keep_end=keep_end)
            assert len(short) <= max(max_chars, 1)
            kept = short.strip("…")
            assert kept in text
            assert kept.count("[") == kept.count("]")  # whole markers or none
    assert shorten_redacted(text, 20) == "a …"
    assert shorten_redacted(text, 3, keep_end=True) == "… c"


INVISIBLE = ["\u200b", "\u00ad", "\u2060", "\ufeff", "\u200d"]


@pytest.mark.parametrize("invisible", INVISIBLE)
def test_a_token_split_by_a_character_no_reader_sees_is_still_found(invisible: str) -> None:
    # a page or a chat puts a zero-width space or a soft hyphen in a long word so it can wrap;
    # copied with the token, it is shown whole and still works once taken out
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    text = f"CI pushes with {token[:12]}{invisible}{token[12:]} for now"
    assert contains_secret(text)
    assert [match.rule for match in find_secrets(text)] == ["github_token"]
    assert redact(text) == "CI pushes with [REDACTED:github_token] for now"


def test_invisible_characters_alone_are_no_secret() -> None:
    text = "wrap\u00adpable words and a zero\u200bwidth space, nothing else"
    assert not contains_secret(text)
    assert find_secrets(text) == [] and redact(text) == text


@pytest.mark.parametrize("blank", [" ", "\t", "\\n"])
def test_a_cut_off_key_block_followed_by_a_long_blank_run_costs_linear_time(blank: str) -> None:
    # its header lines' pattern gave back the run one character at a time and read the rest of
    # it again at each: quadratic, 10 s for 64 KiB of spaces after the BEGIN line
    text = "deploy key:\n-----BEGIN OPENSSH PRIVATE KEY-----" + blank * 65_536 + "\nthe rest"
    started = time.process_time()  # the work's own time: a loaded machine's pauses are not
    redacted = redact(text)
    assert time.process_time() - started < 1.0
    assert redacted.endswith("\nthe rest") and "BEGIN OPENSSH" not in redacted


# Real keys, made for these tests with openssl, ssh-keygen and gpg and used for nothing else
PRIVATE_KEYS = {
    path.name: path.read_text()
    for path in sorted((Path(__file__).parent / "corpus" / "private_keys").iterdir())
}


def _key_lines(key: str) -> list[str]:
    """The lines of a key that hold key material (its base64 and the headers' values)."""
    return [line for line in key.splitlines() if line and not line.startswith("-----")]


@pytest.mark.parametrize("name", PRIVATE_KEYS)
def test_real_keys_are_redacted_whole_however_they_are_pasted(name: str) -> None:
    key = PRIVATE_KEYS[name].strip()
    lines = key.splitlines()
    before, after = "Here is the key, keep it safe:", "That is all of it, thanks."
    pasted = {
        "whole": (f"{before}\n{key}\n{after}", f"{before}\n[REDACTED:private_key_block]\n{after}"),
        "json": (
            json.dumps({"note": before, "key": key + "\n", "then": after}),
            json.dumps({"note": before, "key": "[REDACTED:private_key_block]\n", "then": after}),
        ),
        "yaml": (
            "tls:\n  key: |\n" + "".join(f"    {line}\n" for line in lines) + "  port: 443\n",
            "tls:\n  key: |\n    [REDACTED:private_key_block]\n  port: 443\n",
        ),
        "no END": (
            "\n".join([before, *lines[:-1]]) + "\n",
            f"{before}\n[REDACTED:private_key_block]\n",
        ),
        "no BEGIN": (
            "\n".join([*lines[len(lines) // 2 :], after]),
            f"[REDACTED:private_key_block]\n{after}",
        ),
    }
    for how, (text, expected) in pasted.items():
        redacted = redact(text)
        leaked = [line for line in _key_lines(key) if len(line) >= 8 and line in redacted]
        if how == "no BEGIN":  # the lines above the pasted part were never there
            assert redacted == expected, (how, redacted)
            continue
        assert leaked == [], (how, leaked)
        assert redacted == expected, (how, redacted)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # two markers named in prose: only the BEGIN line goes, the words between stay
            "The file starts with -----BEGIN RSA PRIVATE KEY----- and ends with "
            "-----END RSA PRIVATE KEY----- so check both.",
            "The file starts with [REDACTED:private_key_block] and ends with "
            "-----END RSA PRIVATE KEY----- so check both.",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nthen a line of prose\n"
            "-----END OPENSSH PRIVATE KEY-----\nand after that the rest",
            "[REDACTED:private_key_block]\nthen a line of prose\n"
            "-----END OPENSSH PRIVATE KEY-----\nand after that the rest",
        ),
        (  # a label no key is written with, and no key after it
            "Look for -----BEGIN HELLO WORLD PRIVATE KEY----- in the docs",
            "Look for -----BEGIN HELLO WORLD PRIVATE KEY----- in the docs",
        ),
        (  # a long word is no key material, above an END line or below a BEGIN line
            "we renamed it\nSomeVeryLongIdentifierName\n-----END PRIVATE KEY-----\nok",
            "we renamed it\nSomeVeryLongIdentifierName\n-----END PRIVATE KEY-----\nok",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY----- internationalization matters",
            "[REDACTED:private_key_block] internationalization matters",
        ),
        (  # a "Name: value" line and a long word below it are not a key's headers and body
            "The header is:\n-----BEGIN RSA PRIVATE KEY-----\nSummary: we rotate keys monthly\n\n"
            "ConfigurationManagement is the next topic",
            "The header is:\n[REDACTED:private_key_block]\nSummary: we rotate keys monthly\n\n"
            "ConfigurationManagement is the next topic",
        ),
    ],
)
def test_prose_around_key_markers_is_kept(text: str, expected: str) -> None:
    # before: everything between a BEGIN and an END line went, prose or not; any capitalised
    # words made a BEGIN line; and a long word above an END line or below a BEGIN line went too
    assert redact(text) == expected


@pytest.mark.parametrize("name", PRIVATE_KEYS)
def test_a_real_key_between_markers_named_in_prose_still_goes(name: str) -> None:
    key = PRIVATE_KEYS[name].strip()
    text = f"Keys begin with -----BEGIN FOO PRIVATE KEY----- like this one:\n{key}\nend."
    redacted = redact(text)
    assert [line for line in _key_lines(key) if len(line) >= 8 and line in redacted] == []
    assert redacted.endswith("[REDACTED:private_key_block]\nend."), redacted


@pytest.mark.parametrize("name", PRIVATE_KEYS)
def test_the_tail_of_a_real_key_in_a_json_string_after_other_text_goes(name: str) -> None:
    # The lines above an END line, pasted after other text in a JSON string: the n of the \n
    # above the top line was read as part of it, so when that line held the only digits of
    # the tail (one full line and a short last one) the tail was taken for a long word and kept
    lines = PRIVATE_KEYS[name].strip().splitlines()
    for start in range(1, len(lines) - 1):
        part = lines[start:]
        text = json.dumps({"log": "pasted:\n" + "\n".join(part) + "\n"})
        redacted = redact(text)
        base64_lines = [line for line in part if re.fullmatch(r"[A-Za-z0-9+/=]{16,}", line)]
        assert [line for line in base64_lines if line in redacted] == [], (start, redacted)


def test_a_key_last_line_of_letters_and_padding_above_its_end_line_goes() -> None:
    # the last line of an OpenSSH key made for this test: no digit, "+" or "/" by chance
    text = "gjcXbtiqicLAkAAAAEdTJAaAECAwQFBgc=\n-----END OPENSSH PRIVATE KEY-----\nthat is all"
    assert redact(text) == "[REDACTED:private_key_block]\nthat is all"


@pytest.mark.parametrize("name", PRIVATE_KEYS)
def test_a_cut_real_key_in_json_with_escaped_slashes_goes(name: str) -> None:
    # PHP's json_encode writes "/" as "\/": each line of a key with a "/" in it was taken to
    # end there, so a key cut before its END line or pasted from its middle was kept
    lines = PRIVATE_KEYS[name].strip().splitlines()
    base64_lines = [line for line in lines if re.fullmatch(r"[A-Za-z0-9+/=]{16,}", line)]
    for cut in range(2, len(lines) - 1):
        for part in (lines[:cut], lines[cut:]):
            text = json.dumps({"log": "x\n" + "\n".join(part) + "\n"}).replace("/", "\\/")
            redacted = redact(text).replace("\\/", "/")
            assert [line for line in base64_lines if line in redacted] == [], (cut, redacted)


def test_a_key_marker_named_in_prose_is_judged_on_its_own_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # whether key material follows a marker was looked for in the whole text, once for every
    # text with "PRIVATE KEY" in it: a quarter of a second for 2 MiB that names one in prose
    pattern = secret_formats._KEY_MATERIAL
    looked_at: list[int] = []

    class Counting:
        def finditer(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> object:
            looked_at.append(min(endpos, len(text)) - pos)
            return pattern.finditer(text, pos, endpos)

    monkeypatch.setattr(secret_formats, "_KEY_MATERIAL", Counting())
    lines = base64.b64encode(bytes(range(256)) * 3).decode()
    text = (
        "Never paste the -----BEGIN RSA PRIVATE KEY----- block, nor what comes before "
        "-----END RSA PRIVATE KEY----- in it.\n" + f"digest = {lines!r}\n" * 1_000
    )
    marker = "-----BEGIN RSA PRIVATE KEY-----"  # a key's own label: the marker alone goes
    assert redact(text) == text.replace(marker, "[REDACTED:private_key_block]")
    assert sum(looked_at) < 200


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="aB1+/=-\\n \n", max_size=120),
    st.lists(st.tuples(st.integers(0, 130), st.integers(0, 130)), max_size=12),
    st.integers(0, 60),
)
def test_key_material_is_found_alike_near_a_marker_and_in_the_whole_text(
    text: str, questions: list[tuple[int, int]], left: int
) -> None:
    # the answers looked for between two places alone are those from the whole text's runs,
    # before and after what may be looked at a question at a time runs out
    runs = [
        run.span()
        for run in secret_formats._KEY_MATERIAL.finditer(text)
        if secret_formats._NOT_ONLY_LETTERS.search(run.group())
    ]
    material = secret_formats._KeyMaterial(text)
    material._left = left
    for asked_start, asked_stop in questions:
        start = min(asked_start, len(text))
        stop = min(max(asked_start, asked_stop), len(text))
        expected = any(start <= run_start and run_end <= stop for run_start, run_end in runs)
        assert material.within(start, stop) == expected, (start, stop)


@pytest.mark.parametrize("labels", ["same", "each its own"])
def test_begin_markers_named_before_far_end_lines_read_the_text_once(labels: str) -> None:
    # each BEGIN line with no key material below it looked for its END line again from there:
    # 3,000 of them named before the END line of a 750 KB text took 0.44 s
    looked_at: list[int] = []

    class Counting(str):
        def find(self, sub: str, start: int = 0, *rest: int) -> int:  # type: ignore[override]
            looked_at.append(len(self) - start)
            return super().find(sub, start, *rest)

    prose = "the ledger keeps memory per project and recalls entries before each turn. " * 3
    names = ["RSA"] * 300 if labels == "same" else [f"K{number}" for number in range(300)]
    named = "".join(f"-----BEGIN {name} PRIVATE KEY----- {prose}\n" for name in names)
    ends = "".join(f"-----END {name} PRIVATE KEY-----\n" for name in dict.fromkeys(names))
    text = Counting(named + ends)
    spans = list(secret_formats.find_private_keys(text, text.lower()))
    # a key's own label alone is a marker; other labels are markers only above key material
    assert len(spans) == (300 if labels == "same" else 0)
    assert sum(looked_at) < 2 * len(text)


def test_an_end_line_whose_dashes_begin_another_is_found() -> None:
    key = (CORPUS / "private_keys" / "rsa.pem").read_text(encoding="utf-8")
    body = key.split("-----BEGIN RSA PRIVATE KEY-----")[1].split("-----END")[0]
    text = f"-----BEGIN X PRIVATE KEY-----{body}-----END Y PRIVATE KEY-----END X PRIVATE KEY-----"
    assert find_secrets(text + " after") == [SecretMatch("private_key_block", 0, len(text))]
