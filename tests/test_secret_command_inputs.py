"""Passwords a command reads from its input or takes as a literal to protect, and a Wi-Fi
network's key, each with what must go and what looks like it but must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure

_RAW_KEY = "4900fcf48c6de89c76a5cd6571b6875eb3d8aa56f349987106c4f918e3c9e2d2"  # made up


def _assert_only_value_redacted(text: str, value: str) -> None:
    """`value` is gone from every output and nothing but it was taken."""
    redacted = redact(text)
    assert value not in redacted
    assert value not in secret_kinds(text)
    assert redacted == text.replace(value, "[REDACTED:password_flag]")


# ------------------------------------------------ piped into a command that reads its input
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("echo Xk9mm2pqLw | docker login --username admin --password-stdin", "Xk9mm2pqLw"),
        ("echo 'Xk9#mm2pq' | podman login -u a --password-stdin quay.io", "Xk9#mm2pq"),
        ("echo -n Hunter2pass | helm registry login reg.io -u me --password-stdin", "Hunter2pass"),
        ("printf '%s' 'Xk9mm2pqLw' | oras login -u me --password-stdin reg.io", "Xk9mm2pqLw"),
        ('printf "%s\\n" S3cr3t! | skopeo login --password-stdin -u me reg.io', "S3cr3t!"),
        ("echo Xk9mm2pqLw | passwd --stdin root", "Xk9mm2pqLw"),
        ('echo "Xk9mm2pqLw" | sudo passwd --stdin deploy', "Xk9mm2pqLw"),
        ("$ echo hunter22 | docker login -u me --password-stdin\nLogin Succeeded", "hunter22"),
        ("run: echo Pa55word | buildah login -u ci --password-stdin reg.io", "Pa55word"),
        ("echo -e 'Tr0ub4dor&3' | docker login --password-stdin -u bob", "Tr0ub4dor&3"),
        ("echo Adm1n#2024 | docker --config /tmp/c login --password-stdin", "Adm1n#2024"),
        ('$pw = ConvertTo-SecureString "Xk9mm2pqLw" -AsPlainText -Force', "Xk9mm2pqLw"),
        ("ConvertTo-SecureString -String 'P@ssw0rd!' -AsPlainText -Force", "P@ssw0rd!"),
    ],
)
def test_a_password_piped_or_made_a_secure_string_is_redacted(text: str, password: str) -> None:
    assert password not in redact(text)
    assert password not in secret_kinds(text)
    assert "[REDACTED:password_flag]" in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        'echo "$CR_PAT" | docker login ghcr.io -u USER --password-stdin',
        "cat pw.txt | docker login --password-stdin",
        "echo $(pass show reg) | docker login --password-stdin",
        "echo ${TOKEN} | docker login -u me --password-stdin",
        "echo hello | wc -l\ndocker login --password-stdin",  # not piped into it
        "aws ecr get-login-password | docker login --username AWS --password-stdin 1.dkr.ecr",
        "echo <password> | docker login --password-stdin",
        "use --password-stdin instead of -p",
        "ConvertTo-SecureString $env:PW -AsPlainText -Force",
        'ConvertTo-SecureString "$secret" -AsPlainText -Force',
        "Read-Host -AsSecureString | ConvertFrom-SecureString",
        "passwd --stdin reads the new password from standard input",
    ],
)
def test_input_that_names_where_the_password_is_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------------------------- a Wi-Fi network's key
@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('psk="Xk9mm2pqLw"', "Xk9mm2pqLw"),
        (
            'network={\n    ssid="HomeNet"\n    psk="correct horse battery"\n}',
            "correct horse battery",
        ),
        ('\tpsk="BlueMango$42"\r\n', "BlueMango$42"),
        ("psk=" + _RAW_KEY, _RAW_KEY),
        ("wpa_passphrase HomeNet Xk9mm2pqLw", "Xk9mm2pqLw"),
        ('wpa_passphrase "Home Net" "Xk9 mm2pq Lw"', "Xk9 mm2pq Lw"),
        ("sudo wpa_passphrase lab-5g Sommar2024 >> /etc/wpa_supplicant.conf", "Sommar2024"),
        ("nmcli con modify HomeNet wifi-sec.psk Xk9mm2pqLw", "Xk9mm2pqLw"),
        ("nmcli c add type wifi ssid Lab 802-11-wireless-security.psk 'Lab#2024!'", "Lab#2024!"),
        (
            "nmcli connection modify office wifi-sec.key-mgmt wpa-psk wifi-sec.psk Off1ce!",
            "Off1ce!",
        ),
        ('psk = "purplemonkey"', "purplemonkey"),
    ],
)
def test_a_wifi_key_is_redacted(text: str, key: str) -> None:
    _assert_only_value_redacted(text, key)


@pytest.mark.parametrize(
    "text",
    [
        'psk="<your-passphrase>"',
        "psk=${WIFI_PSK}",
        'psk="short"',  # a WPA passphrase has 8 characters or more
        "key_mgmt=WPA-PSK",
        "the psk is derived from the passphrase",
        "wpa_passphrase <ssid> <passphrase>",
        "wpa_passphrase SSID",
        "nmcli con modify HomeNet wifi-sec.key-mgmt wpa-psk",
        "nmcli con modify HomeNet wifi-sec.psk-flags 1",
        "psk=" + _RAW_KEY[:62],  # no raw key: 62 hex digits
        "# psk=is set below",
    ],
)
def test_wifi_words_without_a_key_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
