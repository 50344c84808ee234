"""Secrets a developer types in a chat that were once missed, each next to the look-alikes its
rule must leave: a password from the top of the leaked lists after a verb, a password in
capitalised words joined by dots with a number, a password said again in a sentence of its
own after a change, a quoted passphrase that ends its sentence, a label set "to" or after
"now", a pair a verb of logging in gives in a sentence that goes on, credentials stated after
"are:", a Wi-Fi passphrase after the word and a space, a vendor's key named in lower case,
a vault's unseal key of another length, and a service account key file's key id."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a password from the top of the leaked lists, given by a verb
        ("the password is letmein", "letmein"),
        ("my password was qwerty.", "qwerty"),
        ("the root password is toor", "toor"),
        ("the password for the router is admin", "admin"),
        ("the master password is monkey, don't tell", "monkey"),
        # capitalised words joined by dots, the last with a number glued to it
        ("password: Gato.Negro77", "Gato.Negro77"),
        ("the password is Gato.Negro77", "Gato.Negro77"),
        ("secret: Kestrel.Harbor.Moss1987", "Kestrel.Harbor.Moss1987"),
        # said again in a sentence of its own after a change
        ("the db password changed. It is now Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("the password changed. It's now hunter22x", "hunter22x"),
        # a quoted passphrase that ends its sentence after the quote
        ("The password is 'orange-juice-17'.", "orange-juice-17"),
        ('the password is "blue-sky-42"', "blue-sky-42"),
        # a word of time between the name and its verb; a label or joined words set "to"
        ("the password now is Zebra-Stripe-3", "Zebra-Stripe-3"),
        ("the password still is letmein", "letmein"),
        ("I changed my password to Zebra-Stripe-3", "Zebra-Stripe-3"),
        ("I changed my password to purple-otter-42.", "purple-otter-42"),
        # a pair a verb of logging in gives, its sentence going on
        ("log in with admin / S3cretPass! on the dashboard", "S3cretPass!"),
        ("login with admin / S3cretPass1 on the dashboard", "S3cretPass1"),
        ("log into the kiosk using kiosk/K1osk#pw and check", "K1osk#pw"),
        # credentials stated after the verb and a colon
        ("the creds are: admin Xk9#mQ2!pL", "Xk9#mQ2!pL"),
        ("the login is: admin Graf4na!Ops", "Graf4na!Ops"),
        # after "passphrase" and a space, as after "password"
        ("wifi passphrase purple-otter-cascade-91", "purple-otter-cascade-91"),
        ("wi-fi password purple-otter-cascade-91.", "purple-otter-cascade-91"),
        # a vendor whose keys have no prefix, named in lower case
        ("mistral key: 7xYq2Lm9Pz4Rt8Vw3Nb6Kc1Jh5Gf0Ds", "7xYq2Lm9Pz4Rt8Vw3Nb6Kc1Jh5Gf0Ds"),
        ("the cohere key is Xk2Lm9Pq4Rs7Tv1Wx3Yz5Ab8Cd0Ef6Gh", "Xk2Lm9Pq4Rs7Tv1Wx3Yz5Ab8Cd0Ef6Gh"),
        # a vault's unseal key in base64 of another length than 44
        (
            "Unseal Key 2: Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8=",
            "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5d2FsZG8=",
        ),
        # a Google Cloud service account key file's key id
        (
            '"private_key_id": "8f3a2b1c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a",',
            "8f3a2b1c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a",
        ),
        (
            "private_key_id: 8f3a2b1c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a",
            "8f3a2b1c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a",
        ),
    ],
)
def test_typed_secret_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # a lone word after the verb: what a password is like, or a word the clause goes on after
        "the password is required",
        "the password is incorrect.",
        "the password is whatever you set during install",
        "the password is admin-only",
        "the password is letmein and the user is bob",
        "password timeout is admin",
        "the password is shadow-copied",
        # dotted names in code: a class and its attribute, a palette, a version
        "password: Config.Timeout",
        "password: Settings.MaxRetries",
        "password: Version.V2",
        "password: self.Password12",
        "password: config.db_password",
        "token: Colors.Red50",
        # a sentence of its own after a change that says what the password is like now
        "the password field moved. It is now required",
        "the password was rotated. It is now in vault",
        "the password flow changed. It is now SSO-only",
        "the db password changed. It is now stored hashed",
        "the password changed. It is now longer",
        # quoted labels and words
        "the password is 'required'.",
        "the password is 'aes-256-gcm'.",
        "the password is 'valid-for-90-days'",
        "the password is 'tls-cert-2024'.",
        'the password is "blue-sky-42" for now',
        # a word of time, or a label set "to" that names or describes another thing
        "the password now is required",
        "the password now is UTF8-Encoded",
        "I set the password to tls-cert-2024",
        "set the password to Base64-Encoded",
        "change the password to Zebra-Stripe-3 before the demo",
        "set the password to min-length-12",
        "I set the password to v1.2.3-Beta",
        # a verb of logging in with words that are no password, the sentence going on
        "log in with admin / admin on the dashboard",
        "log in with sso / okta on the dashboard",
        "log in with google / github on the site",
        "login with email / password on the form",
        "log in with user/Dashboard to see it",
        "log in with admin / readonly and then",
        # what credentials or a login are like, after a colon
        "the creds are: admin and ops",
        "creds are: temporary STS&AssumeRole2",
        "the creds are: see vault",
        "the login is: returning HTTP401!",
        # after "passphrase" and a space: its prompt, its rules, a cipher, a label
        "the passphrase prompt appears twice",
        "wifi passphrase is on the fridge",
        "wifi passphrase min-length-12",
        "wifi password WPA2-Enterprise",
        "network password aes-256-gcm",
        "wifi passphrase purple-otter-cascade-91 for guests",
        "passphrase SecretStr",
        "passphrase purple-otter-cascade-91",
        # a structure's key in lower case, a vendor's key that is no key's shape
        "sort key: createdAtDesc2",
        "flag key: enableCheckoutRedesign2024xyzQ1",
        "mistral key: enableCheckoutRedesign2024",
        "mistral key: see 1Password",
        "mistral key rotation is quarterly",
        # unseal keys: shares and threshold, letters of no key, base64 of no whole bytes
        "unseal keys: five shares, threshold three",
        "Unseal Key 3: abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuv",
        # a hex digest under another name, a key id's placeholders
        '"commit_id": "8f3a2b1c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a"',
        '"private_key_id": "<key-id>"',
        '"private_key_id": "${PRIVATE_KEY_ID}"',
        "the private_key_id field is 40 hex digits",
    ],
)
def test_typed_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []
