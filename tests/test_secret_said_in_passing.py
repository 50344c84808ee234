"""Credentials mentioned in passing in a chat, each next to the look-alikes its rule must leave:
a plain word a verb gives for a password, a login's `pass` after what it is for, and a user and
password either side of a slash after a verb or a word of credentials, a short generated
token or key stated in words, a pin stated after where it is set, a login's user then its
password in words, a passphrase of words joined by hyphens, a TOTP seed named after it,
a Wi-Fi passphrase given after where the network is, digits hidden inside a word right after
"password", and what a device unlocks with."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a plain word a verb gives for a password, ending its clause
        ("the password is bananabread, configure the test device", "bananabread"),
        ("my password is summer", "summer"),
        ("the password for the lab router is android.", "android"),
        ("the password is literally just summer", "summer"),
        ("the vpn passphrase is lighthouse", "lighthouse"),
        # a login's `pass` after what it is for: any password a verb gives
        ("remember the grafana admin pass is rex2019, i always forget it", "rex2019"),
        ("the admin panel pass is pa55word lol", "pa55word"),
        ("ok so the ftp pass is literally just summer", "summer"),
        ("the wifi pass for the iot vlan is blackcoffee, update the sensors", "blackcoffee"),
        ("the root pass is Kx9pL2mQ7v.", "Kx9pL2mQ7v"),
        # right after it, a value only a generator writes
        ("please memorize: prod db pass Kx9pL2mQ7vRz", "Kx9pL2mQ7vRz"),
        # a label of capitals, small letters and a digit right after a login's pass or pw
        ("nexus admin pw Nexus_Admin_9, set up the npm proxy repo", "Nexus_Admin_9"),
        ("just my account pass Tesla_Kz4, remember it", "Tesla_Kz4"),
        ("the root pw Kx9pL2mQ7vRz", "Kx9pL2mQ7vRz"),
        # a login's user, "and", then its pw
        ("the htpasswd user is monitor and pw duckduckgoose, generate the line", "duckduckgoose"),
    ],
)
def test_said_in_passing_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # what a password is like, whose or where it is
        "the password is fine, nothing to change",
        "the password is optional for local dev",
        "the password is useless without the key",
        "the password is mandatory on prod",
        "the password is yours to pick",
        "the password is different on staging",
        "the password is somewhere in the vault",
        "the password is temporary, rotate it",
        "the password is expiring soon",
        "the password is obligatory",
        "the password is separate",
        "the password is private",
        "the password is mypasswordhere",
        "the passphrase is unlocking slowly",
        "how a password is written, where a class is",
        "the password is stolen, rotate it",
        "the password is chosen.",
        # a plain word the clause goes on after
        "the password is android as usual",
        # other words between the name and its verb
        "the password timeout is forever",
        # `pass` for no login: a compiler's, a linter's, a ticket's; or said of a login's pass
        "the first pass is slow",
        "the lint pass is green now",
        "the compiler pass is flaky.",
        "a boarding pass is needed",
        "the admin pass is required",
        "the root pass is disabled",
        "the db pass is rotated nightly",
        "the ftp pass is somewhere",
        "the user pass is optional",
        "the ssh pass is sha256 hashed",
        "the admin pass is v2",
        "the admin pass OAuth2Flow.",
        "the admin pw reset_flow_2.",
        "the db pass v2.0-Rc1.",
        "the admin pw Nexus_Admin_9 page is slow",
        "the first pass Tokenize_Step_2.",
        "the db pass MaxConn100.",
        "the lint pass Kx9pL2mQ7vRz",
        "the user is bob and pw required.",
        "the user is bob and pw reset works",
    ],
)
def test_said_in_passing_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a user and a password either side of a slash, given by a verb or a credential word
        ("pls remember jenkins creds are admin / qwerty123 for when it breaks", "qwerty123"),
        ("sign in to the test tenant with qa-bot@acme.test / Marvin42", "Marvin42"),
        ("the teamcity guest acct is guest / rainbowkitten", "rainbowkitten"),
        ("dont forget, the printer web ui is admin / Oreo2022", "Oreo2022"),
        ("connect to the db with app / Snickers2021 and tell me the row count", "Snickers2021"),
        ("the admin panel takes admin / admin123, write a test that logs in", "admin123"),
        ("the mqtt broker wants user sensor / tulipgarden, write the client", "tulipgarden"),
        ("the old centos box takes root / r00tme, tar up /var/www", "r00tme"),
        ("the keycloak admin is admin / Marble-Canyon-8, create a realm", "Marble-Canyon-8"),
        ("prod rabbitmq admin is admin/Winter2023#", "Winter2023#"),
        ("the prod rabbitmq login is admin/Winter2023!", "Winter2023!"),
        ("the kali vm is root/toor.", "toor"),
    ],
)
def test_given_pair_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # choices, permissions, protocols, platforms and paths
        "the choice is read / write",
        "the account is read/write",
        "the user is read / execute",
        "the protocol is tcp/ip",
        "the ratio is 3/4",
        "the platform is linux/amd64",
        "the image is postgres/postgres16",
        "the branch is release/v2024",
        "the branch is feature/Login2FA",
        "the repo is acme/widget2",
        "the route is admin/settings",
        "the api is admin/users",
        "the owner is root/admin",
        "the login page is admin/login",
        "the mode is on/off",
        # ways to log in, stand-ins and stores
        "the login is username/password",
        "login with email/password",
        "the account takes email / password",
        "login is done with sso / okta",
        "connect with psql / pgadmin4",
        "the creds are in vault / 1password",
        "the account uses oauth2 / oidc",
        "the acct is prod / staging",
        "the account is admin / viewer",
        "the login is guest / readwrite",
        # a page, not a login: a final "!" alone marks no password with no blanks around the slash
        "see admin/Dashboard2024!",
        "the page is admin/Dashboard2024!",
        # a plain word the sentence goes on after
        "the teamcity guest acct is guest / rainbowkitten for now",
        # two things of a login's, not a user and a password
        "the login flow / Signup2 is next",
        "the login form / SignupPage2 redirect is broken",
        "the login page / LoginView2 component",
        "login screen / Screen2 mockup",
    ],
)
def test_given_pair_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a short token or key only a generator writes, after a verb or right after the name
        ("the jupyter token is Hk2vL9xQ7mRz, open the notebook", "Hk2vL9xQ7mRz"),
        ("twilio auth token W4tcNb8Yk1Hd and sid AC8f3b, send a test sms", "W4tcNb8Yk1Hd"),
        ("the grafana api key Fg0Js5UaOe3Rq7Lt is editor role", "Fg0Js5UaOe3Rq7Lt"),
        ("the access key is q7RtX2mK9w", "q7RtX2mK9w"),
    ],
)
def test_short_generated_key_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # names made of words, versions, hex digests, a value too short right after the name
        "the token ExpiresIn3600 field",
        "access token OAuth2Bearer",
        "the token type is JWTv2Token",
        "the token is RS256HS512",
        "access token TTL30Days1",
        "the api key is K8sCluster01",
        "auth token is stored in Redis6Cluster",
        "the access key is in AWS2Secrets",
        "the token v2RefreshFlow3 is deprecated",
        "auth token SHA256WithRSA",
        "the token is 3f9a8b7c1d2e",
        "the auth token is iOS17Build2",
        "api key q7RtX2mK9w",
        "the primary key is Xk2Lm9Pq4R",
    ],
)
def test_short_generated_key_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # a pin stated after where it is set, its clause ending or a chat's aside after it
        ("the default pin on the new routers is 123456 until we change them", "123456"),
        ("remember the pin on the conference room panel is 0000 lol", "0000"),
        ("my pin is 4821 btw", "4821"),
    ],
)
def test_pin_set_somewhere_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # a part's pin, where a part or circuit word is on its line
        "the pin on the header is 2048",
        "the default pin on the gpio header is 1234",
        "pin 12 of the GPIO header",
        "the pin on port three is 5000 volts",
        "the pin on the relay board is 3300",
        "the pin in the diagram is 1234",
    ],
)
def test_pin_set_somewhere_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # an account's usual name, then a password no word is, stated or after a login's "with"
        ("keep in mind the hp ilo console login is Administrator zaq12wsx", "zaq12wsx"),
        ("you can log into the pfsense box with admin Penguin_77", "Penguin_77"),
        ("ssh into the bastion with root Tr0ub4dor.", "Tr0ub4dor"),
        ("sign in to the portal with ops@acme.test hunter2go", "hunter2go"),
    ],
)
def test_login_user_then_password_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        # rights, roles, versions, a way to log in, a word the sentence goes on after
        "log in with admin rights2",
        "log in with admin privileges.",
        "connect to the db with admin role2",
        "log into grafana with admin v2.1",
        "log in with admin IAM2",
        "ssh in with root key_file",
        "connect with admin my_role",
        "sign in with google account2",
        "the login is root login2",
        "the login is admin today",
        "log into the box with admin Penguin_77 and then",
        # "and" after how one logs in, or after an account, joins no password to a user
        "the login is sso and AzureAD2.",
        "our login is google and Okta2 next quarter",
        "the login is slow and Chrome120 crashes",
        "the account is admin and Owner2 role",
    ],
)
def test_login_user_then_password_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # words joined by hyphens after "passphrase", with or without a number
        ("the age key passphrase is otter-kayak-moss, decrypt the file", "otter-kayak-moss"),
        ("remember the deploy key passphrase is ssh-pass-2024", "ssh-pass-2024"),
        ("the gpg passphrase is amber-falcon-river-stone.", "amber-falcon-river-stone"),
    ],
)
def test_joined_passphrase_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "the passphrase is aes-256-gcm",
        "the passphrase is valid-for-90-days",
        "the passphrase is key-file-based",
        "the passphrase is kebab-case-only",
        "the passphrase is per-user-config",
        "the passphrase is one-time-use",
        "the passphrase is end-to-end",
        "the passphrase is read-only-mode",
        "the passphrase is ask-the-team",
        "the passphrase is otter-kayak-moss and more",
        # a password's joined words still need a number
        "the password is otter-kayak-moss",
    ],
)
def test_joined_passphrase_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "put MFRGGZDFMZTWQ2LKNNWG23TPOA as the totp secret in the fixture",
            "MFRGGZDFMZTWQ2LKNNWG23TPOA",
        ),
        ("JBSWY3DPEHPK3PXP is our 2fa seed", "JBSWY3DPEHPK3PXP"),
        ("mfrggzdfmztwq2lk as the mfa key", "mfrggzdfmztwq2lk"),
    ],
)
def test_seed_named_after_it_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "ABCDEFGHIJKLMNOP as the totp secret",  # no digit: a word-run
        "use JBSWY3DPEHPK3PXP for the totp test",
        "JBSWY3DPEHPK3PXP as the totp library's example",
    ],
)
def test_seed_named_after_it_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("remember that the wifi in the cabin is Cheddar!88, i'll be there", "Cheddar!88"),
        ("the wifi for guests is Guest2024!", "Guest2024!"),
        ("the wlan at the lab is 'Lab#Net2024'", "Lab#Net2024"),
    ],
)
def test_wifi_where_it_is_then_passphrase_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "the wifi in building B2 is down",
        "the wifi in the lab is wpa2-enterprise",
        "the wifi at home is flaky!!",
        "the wifi on the 3rd floor is AX210.",
        "the wifi in the cabin is Cheddar!88 and more",
    ],
)
def test_wifi_where_it_is_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the zip is encrypted, password xkcd936battery, extract it", "xkcd936battery"),
        ("passphrase tiger42lily.", "tiger42lily"),
    ],
)
def test_digits_inside_a_word_after_password_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "password pbkdf2sha256,",
        "password length12chars.",
        "password abc12def",
        "password xkcd936battery hashing",
        "the password hunter22x.",
        "password Argon2id",
    ],
)
def test_digits_inside_a_word_after_password_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("note that the kiosk tablets unlock with monkey123", "monkey123"),
        ("unlock the phone with Tr0ub4dor.", "Tr0ub4dor"),
        ("the archive unlocks with 'Arch!ve2024'", "Arch!ve2024"),
    ],
)
def test_unlocked_with_is_redacted(text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "unlock with yubikey5",
        "unlock with sha256",
        "unlock it with fido2",
        "the vault unlocks with shamir2of3",
        "unlock with touchid",
        "unlock with python3.12",
        "unlock with windows11",
        "unlock with Ctrl+Alt+Del",
        "unlock with monkey123 and then",
    ],
)
def test_unlocked_with_look_alike_stays(text: str) -> None:
    assert find_secrets(text) == []
