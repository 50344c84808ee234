"""Secrets people paste in shapes the first rules missed: each with what must go and what
looks like it but must stay storable."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from orcad import secret_notes
from orcad.secrets import contains_secret, find_secrets, redact

pytestmark = pytest.mark.pure


def _redacted_to(text: str, password: str) -> str:
    return text.replace(password, "[REDACTED:password_statement]")


# ------------------------------------------- Chinese, Japanese and Korean sentences
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("我的密码是 Hunter2!", "Hunter2!"),
        ("数据库密码是 s3cr3t", "s3cr3t"),
        ("数据库密碼是 s3cr3t", "s3cr3t"),
        ("我的密码是Hunter2!\uff0c别告诉别人", "Hunter2!"),
        ("服务器的密码为 Tr0ub4dor&3。", "Tr0ub4dor&3"),
        ("密码是\uff1aP@ssw0rd2024\n用户名是 admin", "P@ssw0rd2024"),
        ("wifi密码是 84736251", "84736251"),
        ("密码是「Sakura2024」", "Sakura2024"),
        ("パスワードは Hunter2!", "Hunter2!"),
        ("パスワードは hunter22 です。", "hunter22"),
        ("비밀번호는 Abcd1234!입니다", "Abcd1234!"),
        ("管理员密码是 Adm1n#2024\uff0c用户名是 root", "Adm1n#2024"),
    ],
)
def test_a_password_stated_in_chinese_japanese_or_korean_is_redacted(
    text: str, password: str
) -> None:
    redacted = redact(text)
    assert redacted == _redacted_to(text, password)
    assert password not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "密码是必填项",
        "密码是 8 位以上",
        "密码是 base64 编码的",
        "密码是 PBKDF2 哈希过的",
        "密码是 argon2id 哈希的",
        "密码是 2024 年改的",
        "密码为空",
        "密码长度是 12",
        "密码是 ${DB_PASSWORD}",
        "密码是 <your-password>",
        "密码是 123",
        "パスワードは 8 文字以上です",
        "パスワードは password です",
        "비밀번호는 8자 이상입니다",
    ],
)
def test_sentences_about_a_password_in_chinese_japanese_or_korean_stay_storable(
    text: str,
) -> None:
    assert find_secrets(text) == []


# --------------------------------------------- keys of archives, backups, vaults, disks
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("the zip key is Arch1ve!22", "Arch1ve!22"),
        ("the encryption key for the backup is Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("zip key: Arch1ve!22", "Arch1ve!22"),
        ("the backup key is Backup#2024", "Backup#2024"),
        ("the 7z key is Sev3n&Zip", "Sev3n&Zip"),
        ("the rar key is R4r!files", "R4r!files"),
        ("the archive key was changed to Arch!ve2025", "Arch!ve2025"),
        ("the vault key is MyVault_2024", "MyVault_2024"),
        ("the disk key is D1sk#Crypt", "D1sk#Crypt"),
        ("the bitlocker key is BitL0cker!", "BitL0cker!"),
        ("the luks key is Luks#Pass9", "Luks#Pass9"),
        ("the decryption key is Decrypt0r!", "Decrypt0r!"),
        ("the backup encryption key is Tr0ub4dor&3 for now", "Tr0ub4dor&3"),
        ("the drive key is 3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"),
        ("our veracrypt key is Vera$Crypt7", "Vera$Crypt7"),
    ],
)
def test_a_key_chosen_for_an_archive_backup_vault_or_disk_is_redacted(
    text: str, password: str
) -> None:
    redacted = redact(text)
    assert redacted == _redacted_to(text, password)
    assert password not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "the primary key is user_id",
        "the sort key is created_at",
        "the zip key is in the vault",
        "the api key lives in 1Password",
        "use the F5 key",
        "the encryption key is AES-256",
        "the encryption key is aes256gcm",
        "the encryption key is secp256k1",
        "the encryption key is 256-bit",
        "the encryption key is rotated every 90 days",
        "the backup key is stored in KMS",
        "the backup key is alias/backup-key",
        "the vault key is kv/data/prod",
        "the archive key is projects/p/locations/global/keyRings/r",
        "the disk key is in the TPM",
        "the vault key is Ctrl+Shift+V",
        "the zip key is ZipCrypto",
        "the backup key is $BACKUP_KEY",
        "the zip key is <your-key>",
        "the disk encryption key is escrowed to Intune",
        "the backup key is the same as prod",
    ],
)
def test_keys_of_archives_and_disks_that_are_names_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------- a service's user/password with no spaces
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("nexus: admin/Nexus@2024", "Nexus@2024"),
        ("nexus: admin/Admin123", "Admin123"),
        ("grafana: admin/Gr4fana!", "Gr4fana!"),
        ("db: postgres/Pg$ecret9", "Pg$ecret9"),
        ("- jenkins: admin/Jenk1ns!2024", "Jenk1ns!2024"),
        ("vpn: jdoe/Vpn$ecure9.", "Vpn$ecure9"),
        ("mysql: root/MyR00t!pw", "MyR00t!pw"),
        ("sonar: admin/S0nar*qube", "S0nar*qube"),
        ("staging db: app_user/St4ging&db", "St4ging&db"),
        ("creds for nexus: admin/Nexus@2024", "Nexus@2024"),
        ("nexus: admin/Nexus@2024 (ask me for the rest)", "Nexus@2024"),
        ("access:\nnexus: admin/Nexus@2024\nthanks", "Nexus@2024"),
    ],
)
def test_a_service_pair_written_without_spaces_loses_its_password(text: str, password: str) -> None:
    redacted = redact(text)
    assert redacted == _redacted_to(text, password)
    assert password not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "ci: build/test",
        "paths: src/lib",
        "route: api/v2",
        "branch: feature/login-2024",
        "branch: feature/login-2024 is merged",
        "image: bitnami/redis:7.2",
        "image: redis/redis-stack@sha256:abc123",
        "deps: lodash/fp@4.17.21",
        "file: src/Button2.tsx",
        "url: example.com/page?id=42&x=1",
        "docs: setup/install#step-2",
        "date: 12/25/2024",
        "repo: acme/Widget2",
        "contact: team/ops2@corp.io",
        "cmd: a/b/C!x9",
        "mime: text/x-python3",
        "grafana: admin/${GF_PASSWORD}",
        "path: ~/notes/Todo2!",
        "ratio: 3/4",
    ],
)
def test_slashes_without_spaces_that_join_no_user_and_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------ a session cookie past 8 KiB of its header
_SESSION = "k2v9x7q1m3n8b4c6z0p5w2e7r9t1y3u5"
# a browser's tracking cookies, 12 KB of them, before the session's
_TRACKING = "; ".join(f"_t{index}=GA1.2.{1_000_000 + index}.1700000000" for index in range(400))


@pytest.mark.parametrize(
    "text",
    [
        f"Cookie: {_TRACKING}; sessionid={_SESSION}",
        f"cookie: {_TRACKING}; sessionid={_SESSION}; theme=dark\nnext line",
        f"Cookie:{_TRACKING}; PHPSESSID={_SESSION}",
        f"curl -H 'cookie: {_TRACKING}; sid={_SESSION}' https://app.example.com",
        f"curl -b '{_TRACKING}; session={_SESSION}' https://app.example.com",
        f"Set-Cookie: {_TRACKING}; user_session={_SESSION}",
        f"Cookie: {_TRACKING};sessionid={_SESSION}",
        f"Cookie: {_TRACKING}; laravel_session={_SESSION}%3D",
        f"GET / HTTP/1.1\nHost: x\nCookie: {_TRACKING}; auth_token={_SESSION}\n\n",
        f"Cookie: {_TRACKING}; {_TRACKING}; remember_me={_SESSION}",
        f"cookie: a=1 Cookie: {_TRACKING}; sid={_SESSION}",
    ],
)
def test_a_session_cookie_far_along_its_header_is_redacted(text: str) -> None:
    redacted = redact(text)
    assert _SESSION not in redacted
    assert "[REDACTED:session_cookie]" in redacted
    assert "_t399=GA1.2.1000399.1700000000" in redacted  # the tracking cookies stay


@pytest.mark.parametrize(
    "text",
    [
        f"Cookie: {_TRACKING}; theme=dark",
        f"Cookie: {_TRACKING}\nsessionid={_SESSION}",
        f"Cookie: {_TRACKING} and then the prose says session={_SESSION}",
        f"Cookie: {_TRACKING}; sessionid=1",
        f"Cookie: {_TRACKING}; session=<your-session-id>",
        f"Cookie: {_TRACKING}; session=; Max-Age=0",
        f"Cookie: {_TRACKING}; lang=en-GB; consent=yes",
        f"Cookie: {_TRACKING}; session_count=42",
        f"Cookie: {_TRACKING}, sessionid={_SESSION}",
        f"Cookie: {_TRACKING}; sessionid=not-a-token",
        f"the Cookie: header carried {_TRACKING}",
    ],
)
def test_cookie_headers_past_8_kib_without_a_session_stay_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------------------------- a text of slashes
class _Counting:
    """A compiled pattern that counts the searches and matches made with it."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls = 0

    def search(self, *arguments: Any) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.search(*arguments)

    def match(self, *arguments: Any) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.match(*arguments)


def test_a_text_of_slashes_is_passed_over_without_a_look_at_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # each slash was looked at in Python by two rules: 8 s for 2 MiB of "/" (a rule drawn with
    # them, a path's separators), where a user and password pair needs a name or a blank first
    value = _Counting(secret_notes._PAIR_VALUE)
    monkeypatch.setattr(secret_notes, "_PAIR_VALUE", value)
    slashes = "/" * 200_000 + " " + "a/b" * 20_000
    text = f"{slashes}\nlogin: admin / S3cretPass\njenkins: admin / Jenk1ns!2024\n{slashes}"
    started = time.process_time()  # the work's own time: a loaded machine's pauses are not
    redacted = redact(text)
    seconds = time.process_time() - started
    assert redacted == (
        f"{slashes}\nlogin: admin / [REDACTED:password_statement]\n"
        f"jenkins: admin / [REDACTED:password_statement]\n{slashes}"
    )
    assert value.calls <= 8  # the pairs' slashes, in each pass
    assert seconds < 0.5  # 2 s before


# ----------------------------------------------------- a token a line break cuts in two
_GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
_NPM = "npm_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
_TWILIO = "SK" + "0123456789abcdef0123456789ABCDEF"
_AWS_SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYq1w2e3r4t5y6"
_SENDGRID = "SG." + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7O" + "." + "Pq8Rs9Tu0Vw1Xy2Za3Bc4De5Fg6Hi7Jk8Lm9No0Pq1R"


def _wrapped(token: str, at: int, newline: str = "\n") -> str:
    return token[:at] + newline + token[at:]


@pytest.mark.parametrize(
    ("text", "token"),
    [
        (f"token:\n{_wrapped(_GITHUB, 24)}\nthanks", _GITHUB),
        (f"export GITHUB_TOKEN={_wrapped(_GITHUB, 14)}", _GITHUB),
        (f"here you go {_wrapped(_GITHUB, 30)} -- keep it safe", _GITHUB),
        (f"> {_wrapped(_GITHUB, 20)}", _GITHUB),
        (f"token {_wrapped(_GITHUB, 8, chr(13) + chr(10))} ok", _GITHUB),
        (f"npm token {_wrapped(_NPM, 30)} ok", _NPM),
        (f"//registry.npmjs.org/:_authToken={_wrapped(_NPM, 12)}\n", _NPM),
        (f"the key is {_wrapped(_TWILIO, 17)}.", _TWILIO),
        (f"SENDGRID_API_KEY={_wrapped(_SENDGRID, 40)}\nFROM=me", _SENDGRID),
        (f"{_wrapped(_GITHUB, 35)}", _GITHUB),
        (f"line one\n{_wrapped(_GITHUB, 4)}\nline three", _GITHUB),
        (f"AWS_SECRET_ACCESS_KEY={_wrapped(_AWS_SECRET, 22)}", _AWS_SECRET),
        (f"aws_secret_access_key={_wrapped(_AWS_SECRET, 30)}\nregion=us-east-1", _AWS_SECRET),
        (
            f"export AWS_SECRET_ACCESS_KEY={_wrapped(_AWS_SECRET, 5, chr(13) + chr(10))}",
            _AWS_SECRET,
        ),
    ],
)
def test_a_token_a_line_break_cuts_in_two_is_redacted(text: str, token: str) -> None:
    redacted = redact(text)
    assert not [at for at in range(len(token) - 5) if token[at : at + 6] in redacted]
    assert "[REDACTED:" in redacted
    assert contains_secret(text)  # so remember and the ledger refuse it


@pytest.mark.parametrize(
    "text",
    [
        "the token is rotated\nevery hour by the deploy job",
        "ghp_\nis the prefix of a classic token",
        "see ghp_tokens\nfor the list",
        "SKIP_TESTS=1\nabcdef0123456789abcdef0123456789",
        "npm_config_cache\n/home/user/.npm/_cacache/index-v5",
        "-----BEGIN CERTIFICATE-----\n"
        "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
        "RTESMBAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD\n"
        "-----END CERTIFICATE-----",
        "e3b0c44298fc1c149afbf4c8996fb924\n27ae41e4649b934ca495991b7852b855",
        "SK_LIVE_MODE is read from\nthe environment at start",
        "pattern_matching_enabled\nrecursive_descent_parser_v2",
        "a line that ends with a long identifier_name_here\nanother_identifier_that_starts",
        "API-VERSION-HEADER\nX-Request-Id-Propagation",
        "AWS_SECRET_ACCESS_KEY=${AWS_SECRET}\nAWS_REGION=us-east-1-and-more-words",
        "the secret access key is rotated\nquarterly_by_the_security_team_now",
    ],
)
def test_ordinary_lines_that_a_break_joins_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
    assert not contains_secret(text)


def test_a_whole_token_ending_its_line_keeps_the_next_lines_word() -> None:
    # the next line's run is another word, not the rest of the token
    text = f"{_GITHUB}\nNextLineWord and more"
    assert redact(text) == "[REDACTED:github_token]\nNextLineWord and more"


# ---------------------------------------- a code that opens a door, a gate, an alarm or a safe
@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("the door code is 4821", "4821"),
        ("Door code: 4821", "4821"),
        ("gate code: 4821#", "4821#"),
        ("the garage code is 4821.", "4821"),
        ("alarm code: 4821", "4821"),
        ("the safe combination is 12-34-56", "12-34-56"),
        ("the lockbox code is 0917, for the cleaner", "0917"),
        ("keypad code is 135790", "135790"),
        ("front door code: 7302", "7302"),
        ("the entry code is 4821*", "4821*"),
        ("access code: 55731", "55731"),
        ("the alarm code was changed to 9021", "9021"),
        ("Gate Code: 4821", "4821"),
        ("- door code: 4821\n- wifi: see the fridge", "4821"),
    ],
)
def test_a_code_that_opens_a_door_gate_alarm_or_safe_is_redacted(text: str, code: str) -> None:
    redacted = redact(text)
    assert redacted == _redacted_to(text, code)
    assert code not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "the door code is in the drawer",
        "the gate code is 4 digits",
        "error code: 4821",
        "exit code: 137",
        "status code: 404",
        "zip code: 90210",
        "area code: 415",
        "the access code is 4 characters long",
        "the door code has 6 digits",
        "the alarm code was reset in 2024",
        "gate code: 2024-01-05",
        "the entry code is 4821.5",
        "safe code: 12",
        "the door code is 4821 characters",
        "source code: 2048",
        "barcode: 4006381333931",
        "the keypad code is 1234 times too long",
    ],
)
def test_codes_that_open_nothing_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
