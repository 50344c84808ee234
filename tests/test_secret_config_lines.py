"""Credentials that settings and outputs name by a word and a space: LDAP's bindpw and rootpw,
SNMP community strings, an IPsec pre-shared key, a Digest response, and a password manager's
output below its command."""

from __future__ import annotations

import time

import pytest

from orcad.secrets import contains_secret, redact

pytestmark = pytest.mark.pure

SECRETS = [
    (
        "binddn cn=readonly,dc=acme,dc=com\nbindpw Z#H34xGqazCIMSe#L\nbase dc=acme,dc=com",
        "Z#H34xGqazCIMSe#L",
    ),
    ("rootpw   s3cr3t-Ldap!9", "s3cr3t-Ldap!9"),
    ("snmpwalk -v2c -c WGzRBkSs^5yz%QMl5 10.0.0.1 system", "WGzRBkSs^5yz%QMl5"),
    ("snmpget -v 2c -c 'Fw7community!' switch1 sysUpTime.0", "Fw7community!"),
    ("rocommunity 2k#mAtbkP8u73%C 10.0.0.0/24\nsyslocation rack4", "2k#mAtbkP8u73%C"),
    ("rwcommunity EohBiNxB1RaLX1", "EohBiNxB1RaLX1"),
    ('# /etc/ipsec.secrets\n%any 203.0.113.5 : PSK "w5VWfQh^+pbB4AvL7"', "w5VWfQh^+pbB4AvL7"),
    (
        'Authorization: Digest username="admin", realm="api", nonce="04c4b34955a3926f069d86edd25a'
        '62de", uri="/x", response="34a939f39a6cdb068c368d770cd7c988"',
        "34a939f39a6cdb068c368d770cd7c988",
    ),
    ("$ op item get 'Prod DB' --fields password\n#rt^mU_zsPS9N", "#rt^mU_zsPS9N"),
    ("$ op read op://Infra/postgres/password\nZRF!EfDA87#JtJB6XN", "ZRF!EfDA87#JtJB6XN"),
    ("$ bw get password github.com\nucsM8ayv64tZzKBK", "ucsM8ayv64tZzKBK"),
    ("$ pass show infra/postgres\nlaAlS8tLpL%U\nuser: root", "laAlS8tLpL%U"),
    ("$ gopass show -o websites/github.com/me\nBbO7f**_DPuENKmU4q", "BbO7f**_DPuENKmU4q"),
    # an entry at the store's top, which `show` names
    ("$ pass show github\nxK9#mQ2!vLp7Tz", "xK9#mQ2!vLp7Tz"),
    ("$ gopass show -o github\nxK9#mQ2!vLp7Tz", "xK9#mQ2!vLp7Tz"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_a_credential_named_by_a_word_and_a_space_is_redacted(text: str, secret: str) -> None:
    assert contains_secret(text)
    assert secret not in redact(text)


ORDINARY = [
    "snmpwalk -v2c -c public 192.168.1.10 system",
    "rocommunity public 10.0.0.0/16\nsyscontact ops@acme.io",
    "bindpw {{ ldap_bind_password }}\nbinddn cn=svc,dc=acme,dc=com",
    "conn office\n  authby=secret\n  left=%defaultroute",
    'WWW-Authenticate: Digest realm="api", qop="auth", nonce="04c4b34955a3926f069d86edd25a62de"',
    "$ pass insert infra/db\nEnter password for infra/db:",
    "$ pass git push\nEverything up-to-date",
    "$ pass show\nPassword Store\n└── github",
    "$ pass show github\nError: github is not in the password store.",
    "$ pass github\nrK9mQ2vLp7Tz",  # no `show` and no folder: `pass` may be any word
    "$ op signin\nEnter the password for dev@acme.io at my.1password.com:",
    "$ bw get password github.com\nNot found.",
    "the rootpw directive takes a hash; see slappasswd(8)",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_the_same_words_without_a_credential_are_left_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "$ op read op://" + "a" * 65_536,
        "$ gopass show " + "a/" * 32_768,
        "$ pass " + "a/" * 32_768,
        "$ op item get x" + " --fields password" * 4_096,
    ],
)
def test_a_long_password_manager_command_with_no_line_below_costs_linear_time(text: str) -> None:
    # each place the command's name could end was tried against the rest of the line: 6 s for
    # 64 KiB of `op read` with no line break after it
    started = time.process_time()
    assert redact(text) == text
    assert time.process_time() - started < 1.0
