"""Secrets in files and snippets pasted with nothing but their place to name them: OpenVPN's
two-line login file, a bearer token as a setting, Twilio's auth token after its account SID,
a Mattermost webhook's id, a Bitcoin key in Wallet Import Format, tab-separated rows under a
header or a line naming passwords, and a key file printed through sudo or doas."""

from __future__ import annotations

import pytest

from orcad.secrets import contains_secret, redact

pytestmark = pytest.mark.pure

KEY_LINE = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"

SECRETS = [
    ("auth-user-pass creds.txt\n# creds.txt\nvpnuser\nSPW8lZFt3x^Tfr", "SPW8lZFt3x^Tfr"),
    ("$ cat /etc/openvpn/auth.txt\nalice\nHq7!mZp2Lw9x", "Hq7!mZp2Lw9x"),
    ("client\n<auth-user-pass>\nalice\nHq7!mZp2Lw9x\n</auth-user-pass>", "Hq7!mZp2Lw9x"),
    (
        "bearer: CdR0iGfmDTGkHnUjzOX31BaVWtTiZmUpW643vIxC",
        "CdR0iGfmDTGkHnUjzOX31BaVWtTiZmUpW643vIxC",
    ),
    (
        '{"bearer": "CdR0iGfmDTGkHnUjzOX31BaVWtTiZmUpW643v"}',
        "CdR0iGfmDTGkHnUjzOX31BaVWtTiZmUpW643v",
    ),
    (
        "bearer = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.Zm9vYmFyYmF6cXV4'",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.Zm9vYmFyYmF6cXV4",
    ),
    (
        "client = Client('AC0123456789abcdef0123456789abcdef', 'c3dce30cce5564c2d09833846787dc2a')",
        "c3dce30cce5564c2d09833846787dc2a",
    ),
    (
        'const client = twilio("AC0123456789abcdef0123456789abcdef",\n'
        '  "c3dce30cce5564c2d09833846787dc2a");',
        "c3dce30cce5564c2d09833846787dc2a",
    ),
    ("https://chat.corp/hooks/n9m9tzhh0uz1wbtyjdb84h29ve", "n9m9tzhh0uz1wbtyjdb84h29ve"),
    (
        "WIF: 5iP38hnioDWi6Rz7dtauAuTTVvCLsuhgt4Z9JK4ypBd5EHsCvPh",
        "5iP38hnioDWi6Rz7dtauAuTTVvCLsuhgt4Z9JK4ypBd5EHsCvPh",
    ),
    (
        "wif = 'KwDiBf89QgGbjEhKnhXJuH7LrciVrZi3qYjgd9M7rFU73sVHnoWn'",
        "KwDiBf89QgGbjEhKnhXJuH7LrciVrZi3qYjgd9M7rFU73sVHnoWn",
    ),
    ("host user password\ngrafana\tadmin\tbVXo2%s7g3F9vn", "bVXo2%s7g3F9vn"),
    (
        "logins (host, user, password):\n"
        "grafana\tadmin\tbVXo2%s7g3F9vn\nkibana\telastic\tQw3rty!9zz",
        "Qw3rty!9zz",
    ),
    ("Test accounts, user and password:\nalice\tHq7!mZp2Lw9x", "Hq7!mZp2Lw9x"),
    *(
        (f"$ {prefix} /etc/ssl/private.key\n{KEY_LINE}", KEY_LINE)
        for prefix in (
            "sudo cat",
            "doas cat",
            "sudo -u www-data cat",
            "sudo -E cat",
            "sudo -- cat",
            "sudo -u root -- cat",
        )
    ),
    # the VPN's file as another user, as a key file is
    *(
        (f"$ {prefix} /etc/openvpn/auth.txt\nalice\nHq7!mZp2Lw9x", "Hq7!mZp2Lw9x")
        for prefix in ("sudo cat", "doas cat", "sudo -u root cat", "sudo -- cat")
    ),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_a_pasted_file_or_snippet_loses_its_secret(text: str, secret: str) -> None:
    assert contains_secret(text)
    assert secret not in redact(text)


ORDINARY = [
    "auth-user-pass /etc/openvpn/creds.txt\nauth-nocache\nverb 3",
    "auth-user-pass\nclient\ndev tun\nproto udp\nremote vpn.example.com 1194",
    "cat /etc/openvpn/server.conf\nport 1194\nproto udp",
    "the bearer: whoever holds the token",
    # a variable named so, given an attribute's path: its two dots are no JWT's
    'bearer = request.headers.get("Authorization")',
    "bearer = self.config.api_token",
    "bearer: settings.auth.bearer_token",
    "client = Client(account_sid, auth_token)",
    "see https://legacy.reactjs.org/docs/hooks/usesyncexternalstore",
    "git/hooks/pre-commit and .husky/hooks/commitmsgvalidation",
    "the wif format is described in BIP-0013",
    "grafana\tadmin\tbVXo2%s7g3F9vn",  # three cells and no header: nothing says which is one
    "results (pass rate):\ntest_a\tok\tv1.2",
    "name  pass  fail\ntest_a\t10\t2",
    # a line that names passwords by the way, not as its rows' last column
    "Password hashing options:\nalgorithm\targon2id\nmemory\t64MiB\niterations\t3",
    "Passwords (rules):\nlength\tMinLength12",
    "Test results for pwd module:\ntest_getpwnam\tPASSED\ttest_getpwuid\tOK2x",
    "$ sudo cat /etc/hostname\nbuildbox-eu-west-1-a7f3",
    f"$ sudo cat /etc/ssl/certs/server.pub\n{KEY_LINE}",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_beside_those_is_left_alone(text: str) -> None:
    assert redact(text) == text
