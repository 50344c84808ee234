"""More secrets people paste in notes and chats: a user and password joined by a colon, each
with what must go and what looks like it but must stay storable."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import pytest

from orcad import secret_colon_pairs, secret_cut_values, secret_invisible
from orcad.secrets import contains_secret, find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure


def _assert_only_value_redacted(text: str, value: str) -> None:
    """`value` is gone from every output and nothing but it was taken."""
    redacted = redact(text)
    assert value not in redacted
    assert secret_kinds(text) == "password_statement"  # named, never the value
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
        ("user:pass admin:Hunter2!", "Hunter2!"),
        ("username:password -> deploy:Summer2024!", "Summer2024!"),
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
        "user:pass pairs such as admin:admin",
        "username:password format, e.g. user:email",
    ],
)
def test_colons_that_join_no_user_and_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "loaded credentials (pypi-AgEIcHlwaS5vcmchW8oUEx4NJMW_rDkF21OYdGPYAHm0mfiIKar2Qm4ZWGY"
        "bPy02n6_LOlSV8qDB_PASSWORD=3t",
        "login with ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8=x1 today",
    ],
)
def test_a_redaction_marker_after_a_credential_word_is_no_pair(text: str) -> None:
    """The text redacted once is read again: its marker, `[REDACTED:rule]`, stays whole."""
    redacted = redact(text)
    assert "[REDACTED:[REDACTED" not in redacted
    assert redacted.count("[REDACTED:") == 1


def test_a_colon_pair_without_a_credential_word_stays_storable() -> None:
    """A chosen-looking value after a colon is no credential unless a word announces one."""
    assert find_secrets("see release:Summer2024! for the changes") == []


# ------------------------------------------------------------ TOTP seeds and recovery codes
@pytest.mark.parametrize(
    ("text", "seed"),
    [
        ("TOTP seed: JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ("the 2fa seed is JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ("TOTP_SEED=JBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXP"),
        ("MFA secret key JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP", "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"),
        ("authenticator setup key: jbswy3dpehpk3pxp", "jbswy3dpehpk3pxp"),
        ("two-factor secret for admin = GEZDGNBVGY3TQOJQ", "GEZDGNBVGY3TQOJQ"),
        ("Google Authenticator code JBSWY3DPEHPK3PXP (keep it safe)", "JBSWY3DPEHPK3PXP"),
        ('2-step seed: "KRSXG5CTMVRXEZLU"', "KRSXG5CTMVRXEZLU"),
        ("the OTP secret, if you lose your phone: MFRGGZDFMZTWQ2LK", "MFRGGZDFMZTWQ2LK"),
        ("hotp seed GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ====", "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ===="),
    ],
)
def test_a_totp_seed_after_a_second_factor_word_is_redacted(text: str, seed: str) -> None:
    redacted = redact(text)
    assert seed not in redacted
    assert redacted == text.replace(seed, "[REDACTED:totp_seed]")
    assert secret_kinds(text) == "totp_seed"


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("recovery codes: 8f3k-2m9x 4j7d-1p0q 7h2k-9d3l", ["8f3k-2m9x", "4j7d-1p0q", "7h2k-9d3l"]),
        ("backup codes:\n1a2b3-c4d5e\n6f7g8-h9i0j\n", ["1a2b3-c4d5e", "6f7g8-h9i0j"]),
        ("GitHub recovery codes\n  a1b2c-d3e4f\n  g5h6i-j7k8l\n", ["a1b2c-d3e4f", "g5h6i-j7k8l"]),
        ("2FA backup codes: 12345678 87654321", ["12345678", "87654321"]),
        ("recovery code: 8f3k-2m9x", ["8f3k-2m9x"]),
        ("your backup code is a1b2c-d3e4f", ["a1b2c-d3e4f"]),
        (
            "Google backup verification codes:\n1. 1234 5678\n2. 8765 4321",
            ["1234 5678", "8765 4321"],
        ),
        (
            "BitLocker recovery key: 123456-234567-345678-456789-567890-678901-789012-890123",
            ["123456-234567-345678-456789-567890-678901-789012-890123"],
        ),
        ("scratch codes (authy): 8f3kq2m9 4j7d1p0q", ["8f3kq2m9", "4j7d1p0q"]),
        ("backup codes: - a1b2c-d3e4f - g5h6i-j7k8l", ["a1b2c-d3e4f", "g5h6i-j7k8l"]),
    ],
)
def test_recovery_and_backup_codes_are_redacted(text: str, codes: list[str]) -> None:
    redacted = redact(text)
    expected = text
    for code in codes:
        assert code not in redacted
        expected = expected.replace(code, "[REDACTED:recovery_codes]")
    assert redacted == expected
    assert secret_kinds(text) == "recovery_codes"


@pytest.mark.parametrize(
    "text",
    [
        "enable 2FA in settings",
        "error code: ABCD-1234",
        "recovery codes are shown once",
        "backup codes: 10 per account",
        "the TOTP implementation uses ABCDEFGHIJKLMNOPQRST",
        "2FA docs: see THEQUICKBROWNFOXJUMPS",
        "mfa with this code path works",
        "backup codes generated 2024-01-01",
        "recovery code sha256 hashed",
        "the otp module returns 123456 digits",
        "hotpot recipe JBSWY3DPEHPK3PXP",
        "backup code path is /var/backup/2024-01",
        "recovery key rotation every 90 days",
        "MFA_ENABLED=true OTP_ISSUER=ACME",
        "recovery codes\n\n1a2b3-c4d5e in another paragraph",
        "the backup code v2 release",
        "TOTP: RFC 6238, 30 s step",
        "backup codes: utf-8 encoded",
    ],
)
def test_words_about_second_factors_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------- a Chinese password after a space, or its sentence going on
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("密码 Hunter2!", "Hunter2!"),
        ("我的密码是 Hunter2! 别告诉别人", "Hunter2!"),
        ("密码是 s3cr3t 请保管好", "s3cr3t"),
        ("账号 admin 密码 admin123", "admin123"),
        ("wifi密码 Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("服务器密码 P@ssw0rd2024\n用户名 root", "P@ssw0rd2024"),
        ("密码是 Xk9#mm2 千万别外传", "Xk9#mm2"),
        ("数据库密码为 Db2024Pass 用户名是 root", "Db2024Pass"),
        ("パスワード Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("비밀번호 Abcd1234!", "Abcd1234!"),
        ("密码 84736251", "84736251"),
        ("我的密码是 Sakura2024 记得改", "Sakura2024"),
    ],
)
def test_a_cjk_password_after_a_space_or_before_more_of_its_sentence_is_redacted(
    text: str, password: str
) -> None:
    _assert_only_value_redacted(text, password)


@pytest.mark.parametrize(
    "text",
    [
        "密码是 base64 编码的",
        "密码是 Base64 编码的",
        "密码 base64 编码",
        "密码是 PBKDF2 哈希过的",
        "密码是 SHA256 哈希",
        "密码 sha256 加密存储",
        "密码 MD5 加密",
        "密码是 2024 年改的",
        "密码 8 位以上",
        "修改密码 请联系管理员",
        "重置密码 链接已发送",
        "密码 ${DB_PASSWORD}",
        "密码 <your-password>",
        "密码 123",
        "パスワード 8 文字以上です",
        "비밀번호 변경",
    ],
)
def test_cjk_sentences_about_a_password_with_spaces_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------- Spanish "clave" and German "Schlüssel"
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("la clave es Xk9#mm2pq", "Xk9#mm2pq"),
        ("la clave del wifi es Xk9#mm2pq", "Xk9#mm2pq"),
        ("clave: Xk9#mm2pq", "Xk9#mm2pq"),
        ("mi clave es Sol2024!", "Sol2024!"),
        ("clave wifi: Xk9#mm2pq", "Xk9#mm2pq"),
        ("La clave de la base de datos es Db2024!x", "Db2024!x"),
        ('la clave era "Verano2023!"', "Verano2023!"),
        ("Schlüssel: Xk9#mm2pq", "Xk9#mm2pq"),
        ("der WLAN-Schlüssel ist Xk9#mm2pq", "Xk9#mm2pq"),
        ("WLAN-Schlüssel: Sonnenblume2024", "Sonnenblume2024"),
        ("Der Schlüssel lautet: Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("Netzwerkschlüssel: Haus!Garten7", "Haus!Garten7"),
    ],
)
def test_a_chosen_password_after_clave_or_schluessel_is_redacted(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password)


@pytest.mark.parametrize(
    "text",
    [
        "la clave primaria es user_id",
        "la clave primaria es Usuario2024",
        "der Schlüssel ist im Tresor",
        "der Schlüssel ist zu kurz",
        "clave foránea",
        "la clave es AES-256",
        "la clave es config.yaml",
        "la clave es ${CLAVE}",
        "clave: valor",
        "Schlüssel: id_rsa.pub",
        "Primärschlüssel: kunde_id",
        "Fremdschlüssel: bestellung_id",
        "la clave para entender esto es Python3",
        "enclave: Xk9#mm2pq",
        "autoclave: Modelo2024x",
    ],
)
def test_keys_of_tables_and_locks_in_spanish_or_german_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ----------------------------------------------------- credential values a line break cuts
@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("DB_PASSWORD=\nXk9#mm2pqLw", ["Xk9#mm2pqLw"]),
        ("DB_PASSWORD=\r\nXk9#mm2pqLw\r\n", ["Xk9#mm2pqLw"]),
        ("password =\nhunter2024", ["hunter2024"]),
        ("client_secret:\nAbc123Def456Ghi789", ["Abc123Def456Ghi789"]),
        (
            "aws_secret_access_key =\nwJalrXUtnFEMI/K7MDENG/bPxRfiCYzzAMPLEKEYabc",
            ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzAMPLEKEYabc"],
        ),
        (
            "docker run --rm -e POSTGRES_USER=admin -e POSTGRES_DB=app -e POSTGRES_PASSWORD=\n"
            "Xk9#mm2pqLw -p 5432:5432 postgres:16",
            ["Xk9#mm2pqLw"],
        ),
        (
            "docker run --rm -e POSTGRES_USER=admin -e POSTGRES_PASSWORD=Xk9#mm2\n"
            "pqLw7 -p 5432:5432 postgres:16",
            ["Xk9#mm2", "pqLw7"],
        ),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPx\nRfiCYzzAMPLEKEYabc",
            ["wJalrXUtnFEMI/K7MDENG/bPx", "RfiCYzzAMPLEKEYabc"],
        ),
        ("export DB_PASSWORD=Xk9#mm\n2pqLw", ["Xk9#mm", "2pqLw"]),
        ("SESSION_SECRET=\nk8Jd2-Lq9Zr4Tb7Wn", ["k8Jd2-Lq9Zr4Tb7Wn"]),
        ("DB_PASSWORD=\nWGs5bW0ycHFMdw==", ["WGs5bW0ycHFMdw=="]),  # base64's padding
        ("SIGNING_SECRET=\nXk9mm2pqLw7=", ["Xk9mm2pqLw7="]),
        ("DB_PASSWORD=\nXk9#mm2=", ["Xk9#mm2="]),
    ],
)
def test_a_credential_value_a_line_break_cuts_is_redacted_whole(
    text: str, pieces: list[str]
) -> None:
    redacted = redact(text)
    assert contains_secret(text)
    for piece in pieces:
        assert piece not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "PASSWORD=\nDB_USER=admin",
        "DB_PASSWORD=\n\nDB_HOST=localhost",
        "PASSWORD=\n# set me",
        "SECRET_KEY=\nexport FOO=1",
        "PASSWORD=\ndone",
        "password=\n[section]",
        "DB_PASSWORD=\n${DB_PASSWORD}",
        "PASSWORD =\nall: build",
        "API_KEY=\nAPI_SECRET=",
        "x =\n    foo(bar)",
        "DB_PASSWORD=\n- item",
        "PASSWORD=\nEOF",
        "TOKEN=\n<your-token>",
        "class Password:\n    pass",
        "token =\nrefresh_token_v2",
        "DB_PASSWORD=\n127.0.0.1 db",
        "DB_PASSWORD=\nDB_PASSWORD=\nDB_HOST=db",
        "PASSWORD=\nSECRET_TOKEN=",
        "db.password=\nsmtp.password=",
        "password:\nAPI_KEY2=",
    ],
)
def test_settings_a_line_ends_empty_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
    assert not contains_secret(text)


# ------------------------------------------------------------------------------- cost
def test_settings_left_empty_line_after_line_are_not_searched_as_values() -> None:
    # each `NAME=` line was taken for the rest of the value above it: 110 us a line
    calls: list[str] = []

    def detect(setting: str) -> list[tuple[str, int, int]]:
        calls.append(setting)
        return []

    text = "DB_PASSWORD=\n" * 1_000 + "PASSWORD=\n" * 1_000 + "db.secret=\n" * 1_000
    assert list(secret_cut_values.find_cut_values(text, (), detect)) == []
    assert calls == []


class _CountingSearches:
    """A compiled pattern that counts the searches made with it."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls = 0

    def search(self, *arguments: Any) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.search(*arguments)


def test_ascii_text_is_not_searched_for_invisible_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every invisible character is outside ASCII; the search tried a class at each character
    invisible = _CountingSearches(secret_invisible._INVISIBLE)
    monkeypatch.setattr(secret_invisible, "_INVISIBLE", invisible)
    assert secret_invisible.visible_text("password reset mail\n" * 1_000) is None
    assert invisible.calls == 0
    monkeypatch.undo()  # a token a zero-width space splits is still found
    assert redact("token ghp_A1b2C3d4E5f6\u200bG7h8I9j0K1l2M3n4O5p6Q7r8") == (
        "token [REDACTED:github_token]"
    )


def test_a_colon_before_letters_alone_is_passed_over_without_a_look_at_its_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `curl -u user:pass` repeated: each colon's user was read in Python, 0.27 s a megabyte
    user = _CountingSearches(secret_colon_pairs._USER)
    monkeypatch.setattr(secret_colon_pairs, "_USER", user)
    text = "creds user:pass " * 1_000 + "creds admin:Hunter2!"
    assert redact(text) == "creds user:pass " * 1_000 + "creds admin:[REDACTED:password_statement]"
    assert user.calls <= 2  # the pair's colon, in each pass


# ----------------------------------------------------------- tokens over three lines or more
_GITHUB_PAT = (
    "github_pat_11ABCDEFG0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab"
)
_ANTHROPIC = (
    "sk-ant-api03-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz3Ab4Cd5Ef6Gh7Ij8Kl9Mn0Op1Qr2St3Uv4Wx5Yz6"
    "Ab7Cd8Ef9Gh0Ij1Kl2Mn3Op4-AAAAAA"
)
_SLACK = "xoxb-1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
_SENDGRID_KEY = "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"
_GITHUB_CLASSIC = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _wrapped_at(text: str, width: int, newline: str = "\n") -> str:
    return newline.join(text[at : at + width] for at in range(0, len(text), width))


@pytest.mark.parametrize(
    ("text", "token"),
    [
        (_wrapped_at("export GITHUB_TOKEN=" + _GITHUB_PAT, 30), _GITHUB_PAT),
        (_wrapped_at(_GITHUB_PAT, 30), _GITHUB_PAT),
        (_wrapped_at("token: " + _GITHUB_PAT, 40, "\r\n"), _GITHUB_PAT),
        (_wrapped_at(_ANTHROPIC, 40) + "\nthen restart", _ANTHROPIC),
        (_wrapped_at("ANTHROPIC_API_KEY=" + _ANTHROPIC, 40), _ANTHROPIC),
        (_wrapped_at("key " + _ANTHROPIC, 30) + " and more", _ANTHROPIC),
        (_wrapped_at("bot token " + _SLACK, 20), _SLACK),
        (_wrapped_at(_SENDGRID_KEY, 16), _SENDGRID_KEY),
        (_wrapped_at("gh " + _GITHUB_CLASSIC, 12), _GITHUB_CLASSIC),
        (_wrapped_at("> " + _GITHUB_PAT, 24), _GITHUB_PAT),
    ],
)
def test_a_token_three_lines_or_more_hold_is_redacted(text: str, token: str) -> None:
    assert len(text.splitlines()) >= 3
    redacted = redact(text)
    for line in re.sub(r"\[REDACTED:\w+\]", "", redacted).splitlines():
        assert not any(token[at : at + 6] in line for at in range(len(token) - 5))  # no piece


def _base64_lines(width: int) -> str:
    data = base64.b64encode(bytes(range(256)) * 3).decode()
    return _wrapped_at(data, width)


@pytest.mark.parametrize(
    "text",
    [
        "-----BEGIN CERTIFICATE-----\n" + _base64_lines(64) + "\n-----END CERTIFICATE-----",
        _base64_lines(76),
        _wrapped_at("".join(hashlib.sha256(bytes([n])).hexdigest() for n in range(20)), 32),
        _wrapped_at("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + "Ab1Cd2Ef3Gh4" * 20 + " me@host", 40),
        _wrapped_at("data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAA" * 20, 76),
        _wrapped_at("https://example.com/docs/api/v2/reference/tokens/sk-ant-admin/rotation", 30),
        _wrapped_at("the_quick_brown_fox_jumps_over_the_lazy_dog_" * 6, 30),
        "\n".join(hashlib.sha256(bytes([n])).hexdigest()[:40] for n in range(10)),
        _wrapped_at("node_modules/@scope/package-name/dist/esm/internal/sk-utilities/index.js", 25),
        "see ghp_ docs\n" + _base64_lines(13)[:400],
        _wrapped_at("xoxb-token-format-explained-in-the-slack-docs-for-bots-and-apps", 20),
    ],
)
def test_blocks_of_lines_of_one_width_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------- a password after the word and a space
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("password Hunter2!", "Hunter2!"),
        ("wifi password Xk9#mm2pq", "Xk9#mm2pq"),
        ("the admin password Tr0ub4dor&3.", "Tr0ub4dor&3"),
        ("root password P@ssw0rd2024", "P@ssw0rd2024"),
        ('db password "Xk9#mm2pq"', "Xk9#mm2pq"),
        ("password Summer2024!", "Summer2024!"),
        ("VPN password Vpn$ecure9, user jdoe", "Vpn$ecure9"),
        ("password Adm1nPass", "Adm1nPass"),
        ("Password Hunter2!\nthanks", "Hunter2!"),
        ("- staging db password Pg$tag1ng", "Pg$tag1ng"),
    ],
)
def test_a_chosen_password_after_the_word_and_a_space_is_redacted(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password)


@pytest.mark.parametrize(
    "text",
    [
        "password reset",
        "password manager v2",
        "password SecretStr",
        "password Argon2id",
        "password v2 flow",
        "the password Hunter2! is weak",
        "password sha256",
        "password hunter2",
        "password Optional[str]",
        "password_hash bcrypt$2b$12$abc",
        "reset password link expires in 24h.",
        "password 12345678",
        "password ${DB_PASSWORD}",
        "password <your-password>",
        "password 8-64 chars",
    ],
)
def test_words_after_password_that_are_no_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------ recovery codes in a block of code or a paragraph
@pytest.mark.parametrize(
    ("text", "codes"),
    [
        (
            "GitHub recovery codes:\n```\na1b2c-d3e4f\ng5h6i-j7k8l\n```",
            ["a1b2c-d3e4f", "g5h6i-j7k8l"],
        ),
        ("recovery codes:\n\n1a2b3-c4d5e\n6f7g8-h9i0j", ["1a2b3-c4d5e", "6f7g8-h9i0j"]),
        ("recovery codes:\n\n```text\na1b2c-d3e4f\n```", ["a1b2c-d3e4f"]),
        ("backup codes:\n~~~\n12345678\n87654321\n~~~", ["12345678", "87654321"]),
        ("Recovery codes (GitHub):\r\n```\r\na1b2c-d3e4f\r\n```", ["a1b2c-d3e4f"]),
        ("backup codes:\n```\n1. 1234 5678\n2. 8765 4321\n```", ["1234 5678", "8765 4321"]),
        ("scratch codes:\n\n8f3kq2m9 4j7d1p0q", ["8f3kq2m9", "4j7d1p0q"]),
        ("2FA backup codes:\n  ```\n  a1b2c-d3e4f\n  ```", ["a1b2c-d3e4f"]),
        ("recovery code:\n\n8f3k-2m9x", ["8f3k-2m9x"]),
        ("my recovery codes are:\n```\n8f3k-2m9x 4j7d-1p0q\n```", ["8f3k-2m9x", "4j7d-1p0q"]),
    ],
)
def test_recovery_codes_in_a_block_of_code_or_after_a_blank_line_are_redacted(
    text: str, codes: list[str]
) -> None:
    redacted = redact(text)
    for code in codes:
        assert code not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "recovery codes\n\n1a2b3-c4d5e in another paragraph",
        "recovery codes are shown once\n\n1a2b3-c4d5e is a ticket",
        "backup codes:\n\nsee the vault",
        "backup codes:\n```\nsee the vault\n```",
        "recovery codes:\n\n\n1a2b3-c4d5e",
        "backup codes:\n```python\nprint(codes)\n```",
        "recovery codes:\n\n- regenerate them in settings",
        "backup code path:\n```\n/var/backup/2024-01\n```",
        "scratch codes (none yet):\n\nTODO",
        "recovery codes:\n```\nv2-beta\n```",
    ],
)
def test_blocks_after_recovery_code_words_that_hold_no_codes_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
