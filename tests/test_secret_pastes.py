"""Secrets people paste in shapes the first rules missed: each with what must go and what
looks like it but must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact

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
