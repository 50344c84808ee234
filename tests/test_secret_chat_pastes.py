"""Credentials pasted in chat that the detector once let through: token formats found by a
literal inside them or by a header's name, a vendor's key after its name, an htpasswd hash
with a note after it; with the look-alikes a developer types that must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import redact, secret_kinds

pytestmark = pytest.mark.pure

_FCM_KEY = (
    "AAAAZV1kLrh:APA91bb_saODzs1NVw9VYPTsCwQPuE3tJg2JsuIMbcQbN1kSqE-Pr5hLgqdehQuZEKWtDDLNU90bgXh1Dg"
    "cPhryNzGGzAGTM8YiRYp53sUoYvfJuqbjJlUUtLHFtvhxjc_joeP8Smg4g"
)
_FCM_KEY_2 = (
    "AAAAq8Jd0Wc:APA91bHs2kQ9xN4mT7vL1pR6zC3yB8wE5uA0dF2gH7jK4lM9nP1qS6tV3xW8yZ0aB5cD2eF7gH4iJ9kL"
    "1mN6oP3qR8sT0uV5wX2yZ7aB4cD9eF1gH6iJ3kL8mN0oP5qR2sT7uV4wX9yZ1a"
)


def _assert_only_value_redacted(text: str, value: str, kind: str) -> None:
    """`value` is gone and nothing but it was taken, named `kind`."""
    redacted = redact(text)
    assert value not in redacted
    assert secret_kinds(text) == kind
    assert redacted == text.replace(value, f"[REDACTED:{kind}]")


# ------------------------------------------------------------------------ token formats
@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        (f"Firebase server key {_FCM_KEY}", _FCM_KEY, "fcm_server_key"),
        (f"FCM_SERVER_KEY={_FCM_KEY_2}", _FCM_KEY_2, "fcm_server_key"),
        (f'headers = {{"Authorization": "key={_FCM_KEY_2}"}}', _FCM_KEY_2, "fcm_server_key"),
        (
            "braintree access_token$production$tcthe2qs5ev06wwi$2a3bd55ec78a2f247e08af40cd1b8c72",
            "access_token$production$tcthe2qs5ev06wwi$2a3bd55ec78a2f247e08af40cd1b8c72",
            "braintree_token",
        ),
        (
            'gateway = Gateway(access_token="access_token$sandbox$9x7k2m4q8w1e$0f9e8d7c6b5a4938'
            '27160f1e2d3c4b5a")',
            "access_token$sandbox$9x7k2m4q8w1e$0f9e8d7c6b5a493827160f1e2d3c4b5a",
            "braintree_token",
        ),
        (
            "Ocp-Apim-Subscription-Key: 5b468b7912212f8b1ff530f8030fee2b",
            "5b468b7912212f8b1ff530f8030fee2b",
            "credential_assignment",
        ),
        (
            'curl -H "Ocp-Apim-Subscription-Key: 0c7e4b2a9f1d46e3a8b5c9d2e7f1a3b6" https://x.azure-api.net/v1',
            "0c7e4b2a9f1d46e3a8b5c9d2e7f1a3b6",
            "credential_assignment",
        ),
        (
            "ocp-apim-subscription-key=9d2e7f1a3b60c7e4b2a9f1d46e3a8b5c",
            "9d2e7f1a3b60c7e4b2a9f1d46e3a8b5c",
            "credential_assignment",
        ),
        (
            "Mistral key: UpZuDDHo3WorUqLxHEzX9guCpbRPrpxB (MISTRAL_API_KEY)",
            "UpZuDDHo3WorUqLxHEzX9guCpbRPrpxB",
            "credential_assignment",
        ),
        (
            "the Cohere key is Qm7Rt2XvLp9KsW4nZb8YhD3cFj6GaE1u, rotate it monthly",
            "Qm7Rt2XvLp9KsW4nZb8YhD3cFj6GaE1u",
            "credential_assignment",
        ),
        (
            "Deepgram key: 7Hq2LmX9vR4kTz8WcN3pYb6DsF1gJ5aE",
            "7Hq2LmX9vR4kTz8WcN3pYb6DsF1gJ5aE",
            "credential_assignment",
        ),
    ],
)
def test_a_token_pasted_in_chat_is_redacted(text: str, value: str, kind: str) -> None:
    _assert_only_value_redacted(text, value, kind)


@pytest.mark.parametrize(
    "text",
    [
        "FCM legacy server keys start with AAAA and hold :APA91b after seven characters",
        "the registration token looked like APA91bHs2kQ9 then got cut off",
        "access_token$production$ is how a Braintree token starts",
        'token = f"access_token${env}${merchant}${secret}"',
        "send the Ocp-Apim-Subscription-Key header with every call",
        "Ocp-Apim-Subscription-Key: {{subscription_key}}",
        "Ocp-Apim-Subscription-Key: <your-key>",
        "Primary key: 4f1c2d9e8b7a6c5d4e3f2a1b0c9d8e7f",
        "Public key: AAAAC3NzaC1lZDI1NTE5AAAAIHq2LmX9vR4kTz8WcN3pYb6Ds",
        "SSH key: AAAAB3NzaC1yc2EAAAADAQABAAABgQC7Hq2LmX9vR4kTz8",
        "Idempotency key: 7c9e6679-7425-40de-944b-e07fc1f90ae7",
        "Sort key: createdAtTimestampDesc2",
        "Cache key: user-profile-v2-12345678",
        "Translation key: checkout.summary.TotalLabel2",
        "The Mistral key is stored in MISTRAL_API_KEY_FROM_VAULT",
        "Mistral key: see 1Password entry MistralProductionApiKey",
    ],
)
def test_token_look_alikes_stay(text: str) -> None:
    assert redact(text) == text


# ------------------------------------------- a user and a password with every character class
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("root/Toor!Lab99 on all lab VMs", "Toor!Lab99"),
        ("The ILO for server rack 3: Administrator / Il0Rack3!HP", "Il0Rack3!HP"),
        ("pfsense webui -> admin:pfS3nse!Fw", "pfS3nse!Fw"),
        ("Portainer: admin | P0rtainer!Ui2025", "P0rtainer!Ui2025"),
        ("rabbit: guest:Gu3st!Rabbit", "Gu3st!Rabbit"),
        ("quick one: the pgadmin login is pg@corp.io with Pg4dm1n!Web", "Pg4dm1n!Web"),
        (
            "1. Go to https://admin.corp.io\n2. Log in with `admin` / `Step!ByStep3`\n3. Save",
            "Step!ByStep3",
        ),
        ("the switch is sw-admin/Sw1tch#Core, telnet only", "Sw1tch#Core"),
        ("use ops.bot@corp.io with W1ki$Edit4 for the wiki", "W1ki$Edit4"),
        ('nas: "backup" / "Nas%Backup7"', "Nas%Backup7"),
        ("kibana elastic:Kib4na&Logs then open Discover", "Kib4na&Logs"),
        ("minio | minioadmin | M1nio*Store", "M1nio*Store"),
        ("jenkins\nci_user / Bu1ld^Night\n", "Bu1ld^Night"),
    ],
)
def test_a_user_and_a_password_of_every_character_class_is_redacted(
    text: str, password: str
) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


def test_each_pair_listed_under_a_heading_is_redacted() -> None:
    text = "creds for staging:\nadmin / St4ging!Adm\nreadonly / R3adOnly!Stg"
    assert redact(text) == (
        "creds for staging:\nadmin / [REDACTED:password_statement]\n"
        "readonly / [REDACTED:password_statement]"
    )


@pytest.mark.parametrize(
    "text",
    [
        "see docs/Setup.md and src/App.tsx for the layout",
        "git checkout origin/Feature#42-Login",
        "merged fix/Issue#1234Crash into main",
        "npm i packages/MyLib@2.0.1",
        "install @types/Node18@latest",
        "ratio is 3/4 and 16:9, scale 1:100",
        "on 12/03/2024 at 10:30 we deployed",
        "color:Red!important; margin:0",
        "if (a/Total!=Max2) return",
        "x = count/Scale2!=limit",
        "image: node:Hydrogen-18 and redis:7.2-alpine",
        "| name | Value!Ab12 |",
        "r/Python3! is a great subreddit",
        "admin/Winter2024! is what we tried first",
        "https://example.com/Docs!Ref2/page",
        "email me at jane@corp.io with Questions?",
        "replace foo with Bar!Baz2",
        "std::Vector<Int32!>",
        "the route is /api/V2!Beta/users",
        "deploy/Release@1.4.2",
        "user: admin / pass: see the vault entry",
        "login: admin / ${ADMIN_PASSWORD}",
        "path C:/Users/Admin!Dev1/Desktop",
        "tags: v1.2/Beta!RC3 rollout",
        "`a/b!c` is an odd path but legal",
        "s3://bucket/Key!Name2.json",
        "HR/Payroll uses Sheet #3",
        "logs at /var/log/App#Server2.log",
    ],
)
def test_look_alikes_of_a_user_and_password_pair_stay(text: str) -> None:
    assert redact(text) == text


# -------------------------------------------- a short name, an aside or a login before a value
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("ssh admin@10.0.0.5, pw Ssh!Comma9", "Ssh!Comma9"),
        ("mongo user is 'reporting', its pwd 'R3porting#M0'", "R3porting#M0"),
        ("vpn user jdoe pw Vpn#Road2 (expires friday)", "Vpn#Road2"),
        ("router at 192.168.1.1, pwd `R0uter$Home`", "R0uter$Home"),
        ("The old password, tigerLily#22, should be revoked", "tigerLily#22"),
        ("our new passphrase, 'Kite&Harbor9', goes live monday", "Kite&Harbor9"),
        ("password (case sensitive!): AbCdEf123$", "AbCdEf123$"),
        (
            "initial admin password (from /var/lib/jenkins/secrets/initialAdminPassword) is "
            "3f9c1e0a7b2d4c6e8f1a3b5c7d9e0f12",
            "3f9c1e0a7b2d4c6e8f1a3b5c7d9e0f12",
        ),
        ("the db password (prod, not staging) is Pr0d!Db2024", "Pr0d!Db2024"),
        ("the pass phrase is Xk9#mm2pq", "Xk9#mm2pq"),
        ("try logging in with tr0mb0ne-Velvet-31", "tr0mb0ne-Velvet-31"),
        ("sign in to the portal with Sunf1ower!Gate", "Sunf1ower!Gate"),
        ("ssh into the bastion with `b4sti0n-Key-77`, then hop", "b4sti0n-Key-77"),
        # where to in two words after "the" or a possessive
        ("log into the old jenkins with Kn1ght!Rider (user is ci) and grab it", "Kn1ght!Rider"),
        ("sign in to your work laptop with Summer#2024 then", "Summer#2024"),
        ("log into the old box as root with Tr0ub4dor&3", "Tr0ub4dor&3"),
    ],
)
def test_a_password_after_a_short_name_an_aside_or_a_login_is_redacted(
    text: str, password: str
) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("the pass phrase is 'blue whale jumps over 7 fences'", "blue whale jumps over 7 fences"),
        ('my passphrase is "seven red kites fly 42 miles"', "seven red kites fly 42 miles"),
    ],
)
def test_a_quoted_passphrase_with_a_number_inside_is_redacted(text: str, phrase: str) -> None:
    _assert_only_value_redacted(text, phrase, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "run pwd to see where you are",
        "cd $(pwd)/build && make",
        "echo `pwd`/Out#1",
        "pw reset link expired",
        "pwd --help prints the options",
        "the pw field is required",
        "new pw must have 12 characters, e.g. a symbol",
        "The old password, which expired, should be revoked",
        "the password, as I said, is in the vault",
        "password (required): see the vault",
        "password (optional): leave empty",
        "the password (see below) is rotated weekly",
        "password (min 8 chars, one digit) must be set",
        "the pass phrase is 'not set in this environment'",
        "the pass phrase is stored in 1Password",
        "the passphrase is 'in the vault since 2021'",
        "log in with sso",
        "sign in with Google",
        "log in with YubiKey-5C-NFC",
        "try logging in with GitHub-Enterprise-2",
        "connect with psql-16 and run the migration",
        "log in with your corp account",
        "log into the new portal with YubiKey-5C-NFC",
        "connect to the staging db with psql-16 and run it",
        "sign in to the test tenant with qa-bot@acme.test first",
        "log into the old jenkins with sso",
    ],
)
def test_look_alikes_of_short_names_asides_and_logins_stay(text: str) -> None:
    assert redact(text) == text


# ---------------------------------------------- words joined by hyphens with a number, stated
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("the password is blue-sky-42", "blue-sky-42"),
        ("our shared vpn password is purple-otter-cascade-91", "purple-otter-cascade-91"),
        ("Passphrase for the GPG key: river-Lantern-42-moss", "river-Lantern-42-moss"),
        ("the wifi password for the guest network is maple-cloud-7.", "maple-cloud-7"),
        ("fyi the kiosk password is now tulip-garden-2024, don't share", "tulip-garden-2024"),
        ("my passphrase was amber-fox-19-lake", "amber-fox-19-lake"),
    ],
)
def test_a_lower_case_passphrase_stated_with_a_verb_is_redacted(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "the password is sha-256 hashed",
        "the password hash is sha-256",
        "the password is aes-256-gcm encrypted at rest",
        "the password cipher is aes-256-cbc",
        "the password encoding is utf-8",
        "the password is base64-encoded",
        "the password is tls-1-3 only",
        "password: tls-cert-2024",
        "password: db-creds-v2",
        "the password is valid-for-90-days",
        "the password is min-length-12",
        "the password policy is nist-800-63b",
        "the password is at-least-12-chars",
        "the password field is user-pass-01",
        "the password secret is app-secret-2024",
        "the password is in vault-kv-2 under db",
        "the password is rotated every 30-60-90 days",
        "the password is stored as scrypt-n-16384",
    ],
)
def test_look_alikes_of_a_lower_case_passphrase_stay(text: str) -> None:
    assert redact(text) == text


# --------------------------------------------------------------- PINs and codes that open things
@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("the YubiKey PIV pin is 91827364", "91827364"),
        ("my yubikey pin: 402913", "402913"),
        ("smartcard pin is 7719", "7719"),
        ("Door code for the server room is 4417#", "4417#"),
        ("the gate code for the back lot is 2580", "2580"),
        ("garage keypad code 6093", "6093"),
        ("front door code 8842 if you get there first", "8842"),
        ("the lockbox combination is 3-7-1-9", "3-7-1-9"),
        ("safe combination: 4-12-33-8", "4-12-33-8"),
        # a lock's own code, a master or disarm code
        ("remember the smart lock master code is 950317", "950317"),
        ("the lock code is 950317", "950317"),
        ("the alarm panel disarm code is 2580#", "2580#"),
        ("the master code for the safe is 4417", "4417"),
        # a device's PIN with letters in it, given by a verb
        ("the kids' tablet pin is jellybean77 if you need to sideload the apk", "jellybean77"),
        ("the bitlocker pin on the demo laptop is Gh0st!Ship, remember it", "Gh0st!Ship"),
        ("the bitlocker PIN is Gh0st!Ship", "Gh0st!Ship"),
        ("my pin is Hunter42", "Hunter42"),
    ],
)
def test_a_pin_or_a_code_that_opens_something_is_redacted(text: str, code: str) -> None:
    _assert_only_value_redacted(text, code, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "error code 6093 from the keypad driver",
        "the garage keypad returned error code 6093",
        "exit code 137 means the container was OOM-killed",
        "HTTP status code 404 for /door",
        "zip code 90210",
        "the area code is 415",
        "line 6093 of door_controller.py",
        "the door code has 6 digits",
        "the gate code for the lab is in the wiki",
        "keypad code review 2024 notes",
        "the safe combination has 3-4 numbers",
        "the lockbox combination is on a sticky note",
        "the PIV pin is 6-8 digits",
        "yubikey pin retries: 3",
        "the yubikey pin policy was set in 2021 and is strict",
        "door code 4096 bytes buffer overflow",
        "gate code v2 released in 2023",
        "the master code review is 2024",
        "block code is 4096",
        "my pin is v2-beta1",
        "the pin for the build is numpy2.1",
        "the pin for requests is 2.31.0a1",
        "the data pin on the sensor board is gpio17",
        "the reset pin for the esp32 is gpio0a1",
        "the pin is GPIO17",
        "the tablet pin is jellybean",
        "the laptop pin is x86_64.",
    ],
)
def test_look_alikes_of_pins_and_access_codes_stay(text: str) -> None:
    assert redact(text) == text


# -------------------------------------------------------- backup codes after what they are for
def test_backup_codes_after_their_account_and_a_colon_are_redacted() -> None:
    text = "backup codes for the google admin account: 4829 1736, 9921 0475, 3318 6620"
    assert redact(text) == (
        "backup codes for the google admin account: [REDACTED:recovery_codes], "
        "[REDACTED:recovery_codes], [REDACTED:recovery_codes]"
    )


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("recovery codes for github: 1a2b3-c4d5e 9f8e7-d6c5b", ["1a2b3-c4d5e", "9f8e7-d6c5b"]),
        ("Backup codes of my okta account:\n4821 0093\n7731 5520", ["4821 0093", "7731 5520"]),
        ("2FA backup codes for jane@corp.io: 58213907 11470326", ["58213907", "11470326"]),
        # an aside before the colon
        ("here's a backup code in case: 4X7K-9QPM-2RTB-8WNZ", ["4X7K-9QPM-2RTB-8WNZ"]),
        ("backup codes, just in case: 4829 1736, 9921 0475", ["4829 1736", "9921 0475"]),
        ("backup code if you need it: 58213907", ["58213907"]),
    ],
)
def test_codes_listed_after_an_owner_are_redacted(text: str, codes: list[str]) -> None:
    redacted = redact(text)
    for code in codes:
        assert code not in redacted
    expected = text
    for code in codes:
        expected = expected.replace(code, "[REDACTED:recovery_codes]")
    assert redacted == expected


@pytest.mark.parametrize(
    "text",
    [
        "backup codes for the google admin account: ask IT",
        "backup codes for the google admin account are in 1Password",
        "recovery codes for 2 accounts: see the vault",
        "backup codes for the years 2019 2020 are archived",
        "backup codes for the team: 10 each, single use",
        "backup codes for v2: deprecated since 2023",
        "error codes for the api: 4001 4002 4003",
        "exit codes for the job: 0 1 137",
        "backup codes in the docs: 4829 1736",
        "backup codes if any: see the vault",
        "recovery codes in json: v2",
        "backup codes, just in case: none left",
    ],
)
def test_look_alikes_of_codes_after_an_owner_stay(text: str) -> None:
    assert redact(text) == text


# ------------------------------------------------------------ recovery phrases and unseal keys
_PHRASE_12 = "abandon ability able about above absent absorb abstract absurd abuse access accident"
_PHRASE_24 = (
    "legal winner thank year wave sausage worth useful legal winner thank yellow "
    "letter advice cage absurd amount doctor acoustic avoid letter advice cage above"
)


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        (f"seed phrase: {_PHRASE_12}", _PHRASE_12),
        (f"my recovery phrase is {_PHRASE_12}", _PHRASE_12),
        (f'SEED_PHRASE="{_PHRASE_24}"', _PHRASE_24),
        (f"the wallet's secret recovery phrase was {_PHRASE_24}.", _PHRASE_24),
        (f"Backup phrase for the ledger:\n{_PHRASE_12}\n", _PHRASE_12),
        # named by "seed" or "mnemonic" alone, or by its words: a wordlist's whole length
        (f"my test wallet seed is {_PHRASE_12}, remember it for the scripts", _PHRASE_12),
        (f"the seed for the ledger is {_PHRASE_24}.", _PHRASE_24),
        (f"the recovery words are {_PHRASE_12}", _PHRASE_12),
        (f"mnemonic is:\n{_PHRASE_24}\n", _PHRASE_24),
        (f"seed words: {_PHRASE_12}", _PHRASE_12),
    ],
)
def test_a_recovery_phrase_after_its_name_is_redacted(text: str, phrase: str) -> None:
    redacted = redact(text)
    assert phrase not in redacted
    assert redacted == text.replace(phrase, f"[REDACTED:{secret_kinds(text)}]")
    assert secret_kinds(text) in ("credential_assignment", "password_statement")


_UNSEAL_1 = "lsyiyw2iEVBtEncBHUr9W19d8dqFWBxbZ75En6SdYR/s"
_UNSEAL_2 = "T7hReFVeYa/vEyLyN3FaZx6xtq5E7YGWKSq3ylVPfQMH"
_UNSEAL_3 = "+F825iIzEY9aipG3Xin6g2l+zxNM2SoWEkZHW8cxWrFH"
_UNSEAL_4 = "gaeShR3Uj49/15S/tAhO7i9+vuGBw1eMox5uh4pEF9ch"


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        (f"unseal key 1: {_UNSEAL_1}", [_UNSEAL_1]),
        (f"Unseal Key 2: {_UNSEAL_2}\nUnseal Key 3: {_UNSEAL_3}", [_UNSEAL_2, _UNSEAL_3]),
        (
            f"the vault unseal keys are:\n{_UNSEAL_2}\n{_UNSEAL_3}\n{_UNSEAL_4}",
            [_UNSEAL_2, _UNSEAL_3, _UNSEAL_4],
        ),
        (f"unseal keys:\n- {_UNSEAL_4}\n- {_UNSEAL_1}\n\nthen run status", [_UNSEAL_4, _UNSEAL_1]),
        (f"the unseal key is {_UNSEAL_3}", [_UNSEAL_3]),
    ],
)
def test_unseal_keys_after_their_name_are_redacted(text: str, keys: list[str]) -> None:
    redacted = redact(text)
    expected = text
    for key in keys:
        assert key not in redacted
        expected = expected.replace(key, "[REDACTED:password_statement]")
    assert redacted == expected


@pytest.mark.parametrize(
    "text",
    [
        "seed phrase: twelve or twenty-four words from the BIP39 list",
        "my recovery phrase is written on paper in the safe",
        "the seed phrase is the only way to restore the wallet so keep it offline and away from",
        "recovery phrase length: 12 words",
        "the random seed is chosen per worker process using system entropy pool values mixed "
        "via hashing functions",
        "the seed is " + " ".join(_PHRASE_12.split()[:11]) + ".",
        f"the seed is {_PHRASE_12} plus some words a sentence goes on with",
        "seed words are test test test test test test test test test test test junk",
        "the seed is twelve random words from a list that only the owner keeps offline",
        "the words are " + _PHRASE_12 + ".",
        "unseal key 1: (hidden)",
        "unseal keys are printed once by vault operator init",
        "the unseal keys are:\nsplit between five admins\nand never stored",
        "unseal key shares: 5, threshold: 3",
        "unseal key: see ~/vault/unseal/key-1.txt",
        "vault operator unseal $UNSEAL_KEY_1",
    ],
)
def test_look_alikes_of_recovery_phrases_and_unseal_keys_stay(text: str) -> None:
    assert redact(text) == text


# ------------------------------------------------------------ French "c'est", a network's line
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("Le mot de passe wifi c'est Baguette2024", "Baguette2024"),
        ("le mot de passe du serveur c\u2019est Fromage!77", "Fromage!77"),
        ("WLAN: HomeNet_5G / key: Bananenbrot77", "Bananenbrot77"),
        ("wifi: Office-Guest | key: Kaffee2024!", "Kaffee2024!"),
        ("SSID: lab-net, key: Tr4nsistor42", "Tr4nsistor42"),
    ],
)
def test_a_french_statement_or_a_network_line_gives_its_password(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "le mot de passe c'est oublié",
        "le mot de passe c'est quoi déjà ?",
        "le mot de passe c'est obligatoire",
        "c'est le mot de passe Baguette2024 qui ne marche pas",
        "WLAN: HomeNet_5G / key: see the sticker",
        "WLAN: HomeNet_5G / key: WPA2-PSK",
        "wifi: Office-Guest | key: ask reception",
        "SSID: lab-net, key: none",
        "Network: 10.0.0.0/24 / key: primary",
        "cache: redis / key: user_id42",
    ],
)
def test_look_alikes_of_french_statements_and_network_lines_stay(text: str) -> None:
    assert redact(text) == text
