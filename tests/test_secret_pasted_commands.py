"""Passwords on command lines as people paste them: HTTPie's -a, `echo user:X | base64` and
what it printed, ipmitool's -P and Net-SNMP's -A and -X after the flags of their other case."""

from __future__ import annotations

import time

import pytest

from orcad.secrets import find_secrets, redact
from tests.secret_helpers import gone

pytestmark = pytest.mark.pure


# ------------------------------------------------------------------------------- HTTPie
@pytest.mark.parametrize(
    "text",
    [
        "http -a ops:Qm4!zTr8vLw2 GET https://registry.corp/v2/_catalog",
        "https --auth=deploy:Qm4!zTr8vLw2 POST api.corp/jobs name=nightly",
        "$ http --verify=no -a 'ops:Qm4!zTr8vLw2' :8080/health",
    ],
)
def test_httpies_auth_flag_loses_its_password(text: str) -> None:
    redacted = gone(text, "Qm4!zTr8vLw2")
    assert "[REDACTED:password_flag]" in redacted


@pytest.mark.parametrize(
    "text",
    [
        "http -a ops:$PASSWORD GET https://registry.corp/v2/_catalog",
        "http -a ops GET https://registry.corp/v2/_catalog",  # it prompts
        "see https://example.com -a link:here",
    ],
)
def test_httpies_auth_flag_without_a_password_stays(text: str) -> None:
    assert find_secrets(text) == []


# ------------------------------------------------------------- echo user:X | base64
def test_a_pair_piped_to_base64_and_what_it_printed_are_redacted() -> None:
    text = "$ echo -n 'ci:Hn3!pLq8wZx' | base64\nY2k6SG4zIXBMcTh3Wng=\n"
    redacted = gone(text, "Hn3!pLq8wZx", "Y2k6SG4zIXBMcTh3Wng=")
    assert redacted.startswith("$ echo -n 'ci:[REDACTED:")


@pytest.mark.parametrize(
    "text",
    [
        "echo -n user:$PASS | base64",
        "echo Y2k6SG4zIXBMcTh3Wng= | base64 -d",
        "printf 'ci:%s' \"$TOKEN\" | base64 --decode",
    ],
)
def test_base64_of_a_variable_or_decoding_stays(text: str) -> None:
    assert find_secrets(text) == []


# ----------------------------------------------------------- ipmitool, Net-SNMP v3
@pytest.mark.parametrize(
    "text",
    [
        "ipmitool -I lanplus -H 10.0.0.9 -p 623 -U ADMIN -P Zm1R%Ty02 power status",
        "snmpwalk -v3 -u mon -l authPriv -a SHA -A 'Zm1R%Ty02' -x AES -X Zm1R%Ty02 10.0.0.1",
    ],
)
def test_ipmitool_and_snmp_passphrase_flags_lose_their_values(text: str) -> None:
    gone(text, "Zm1R%Ty02")


@pytest.mark.parametrize(
    "text",
    [
        "snmpget -v3 -l authPriv -a SHA -x AES -u mon 10.0.0.1 sysUpTime.0",
        "snmpwalk -v2c -c public -A 10.0.0.1",  # a flag left without its value: the agent
    ],
)
def test_snmp_protocol_flags_and_the_agents_address_stay(text: str) -> None:
    assert find_secrets(text) == []


def test_a_pair_of_words_piped_to_base64_stays() -> None:
    text = 'echo -n "hello:world" | base64\naGVsbG86d29ybGQ=\n'
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        # how OAuth guides show a token endpoint's Basic header being made
        'echo -n "client_id:client_secret" | base64',
        "echo -n 'CLIENT_ID:CLIENT_SECRET' | base64 -w0",
        'echo -n "user@example.com:api_token" | base64',
        'echo -n "consumer_key:consumer_secret" | base64',
    ],
)
def test_a_pair_of_placeholder_names_piped_to_base64_stays(text: str) -> None:
    assert find_secrets(text) == []


def test_a_password_written_with_dashes_is_redacted_though_it_names_one() -> None:
    gone("echo -n 'ci:super-secret-password' | base64", "super-secret-password")


# ------------------------------------------------------------- a key file printed
@pytest.mark.parametrize(
    "text",
    [
        "$ cat config/master.key\nfd68ae2981334f8041df118b6f1d6922\n",
        "cat ~/.vault-token\ns.Xk9mm2pqLw77QrT5abCD",
        "PS> type C:\\keys\\deploy_token.txt\nq8ZrT3vLm2Xy7PbN4cJ5dHa9sKe1",
    ],
)
def test_what_cat_printed_of_a_key_file_is_redacted(text: str) -> None:
    value = text.rstrip("\n").rsplit("\n", 1)[1]
    assert redact(text) == text.replace(value, "[REDACTED:credential_assignment]")


@pytest.mark.parametrize(
    "text",
    [
        "cat README.md\nInstallation_instructions_here",
        "cat keys.txt\nsee-the-vault-for-details",
        "cat /etc/hostname\nweb-01.prod.acme.internal",
        "cat api.key | pbcopy\nq8ZrT3vLm2Xy7PbN4cJ5dHa9sKe1",
    ],
)
def test_what_cat_printed_of_another_file_or_elsewhere_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "name",
    ["public.key", "/etc/wireguard/server_public.key", "key.pub", "signing-key.pub", "pub.key"],
)
def test_what_cat_printed_of_a_public_key_file_stays(name: str) -> None:
    # WireGuard's guides make public.key beside private.key and print it to share it
    text = f"$ cat {name}\nbXlQdWJsaWNLZXlJc05vdEFTZWNyZXRBdEFsbDEyMz0=\n"
    assert find_secrets(text) == []
    private = text.replace(name, name.replace("public", "private").replace("pub", "private"))
    assert redact(private) != private


def test_a_line_naming_cat_at_every_word_costs_linear_time() -> None:
    # each name was read back to its line's start to see whether a command started there:
    # 8.6 s for 512 KiB of "cat cat …" on one line
    text = "cat " * 131_072 + "\n"
    started = time.process_time()
    assert redact(text) == text
    assert time.process_time() - started < 1.5
