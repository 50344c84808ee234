"""App passwords in four groups of four letters, each with what must go and what looks like it
but must stay storable."""

from __future__ import annotations

import re

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure

_MARKER = re.compile(r"\[REDACTED:[a-z_]+\]")


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("App-Passwort: abcd efgh ijkl mnop", "abcd efgh ijkl mnop"),
        ("gmail app password qwzx hjkp vbnm rtyu", "qwzx hjkp vbnm rtyu"),
        ("the app password is abcd efgh ijkl mnop", "abcd efgh ijkl mnop"),
        ("App password for smtp: wxyz qrst uvop lkjh.", "wxyz qrst uvop lkjh"),
        ("Google app password (mail on the NAS) - fkzq mwpt hxlr dvny", "fkzq mwpt hxlr dvny"),
        ("app passwords: zxqv bnmh ytrw plkj for the relay", "zxqv bnmh ytrw plkj"),
        ("App-Passwort für Thunderbird lautet qwpz xkvn rtlm hjgb", "qwpz xkvn rtlm hjgb"),
        ("app-specific password is xmkq-vbzt-plwn-rjhc", "xmkq-vbzt-plwn-rjhc"),
        ("my app password = abcd efgh ijkl mnop", "abcd efgh ijkl mnop"),
        ("app password: abcd efgh ijkl mnop", "abcd efgh ijkl mnop"),
        # the groups run together, as pasted without their spaces
        ("the app password is fkzqmwpthxlrdvny for the relay", "fkzqmwpthxlrdvny"),
        ("gmail app password qwzxhjkpvbnmrtyu", "qwzxhjkpvbnmrtyu"),
        ("app-specific password is xmkqvbztplwnrjhc", "xmkqvbztplwnrjhc"),
        ("app password qaeiuoyzkwplmnbv", "qaeiuoyzkwplmnbv"),  # six vowels, drawn at random
    ],
)
def test_an_app_password_in_groups_is_redacted(text: str, password: str) -> None:
    redacted = redact(text)
    assert password not in redacted
    assert secret_kinds(text) != "" and password not in secret_kinds(text)
    assert _MARKER.sub("<>", redacted) == text.replace(password, "<>")


@pytest.mark.parametrize(
    "text",
    [
        "app password: this will work fine",
        "the app password form uses four text boxes",
        "app-specific password: xxxx-xxxx-xxxx-xxxx",
        "Create an app password, then sign in with it",
        "app passwords need 2-step verification turned on",
        "the app password must have been revoked",
        "App-Passwort: wird beim SMTP-Login verlangt",
        "app password: ABCD EFGH IJKL MNOP",  # shown in capitals: a mock-up, not Google's
        "app password flow: when user gets code then logs in",
        "app password rules: same rule sets took ages",
        "an app password is sixteen letters in four groups of four",
        "use the app password here; that will keep imap sync working",
        "app password responsibilities are the admin's",  # a word of 16 letters
        "app password internationalization",  # a longer one
        "app password qwzxhjkpvbnmrtyuq",  # 17 letters: not an app password
        "app password thiswillworkfinee",  # run together, but a common word among the groups
        "the app password caused a misunderstanding",
        "app password utcfromtimestamp",  # a name run together
        "app password like abcdefghijklmnop",  # the alphabet: an example
    ],
)
def test_words_after_app_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
