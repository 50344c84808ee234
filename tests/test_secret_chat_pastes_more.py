"""More credentials pasted in chat that the detector let through: a secret stated with a verb,
a password said again "now" after its name and a comma, a value of every character class
given with "use", "with" or "try", credentials stated as a user and a password after "creds
are", a password after a user at an address and "with", one passed by position to a connect
call, and an account's password whose only symbol is a final "!"; with the look-alikes a
developer types that must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import redact
from tests.test_secret_chat_pastes import _assert_only_value_redacted

pytestmark = pytest.mark.pure


# ------------------------------------------- a password said "now" after its name and a comma
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("i changed the staging db password, it's now Hunter2!xyz", "Hunter2!xyz"),
        ("sudo with my password, it's now Tr1cky#Pass", "Tr1cky#Pass"),
        ("the db password changed, it is now Tr1cky#Pass", "Tr1cky#Pass"),
        ("reset the vpn password, it\u2019s now Vpn2024$Blue.", "Vpn2024$Blue"),
        ("the wifi password, which is now Cafe!Latte42, is on the fridge", "Cafe!Latte42"),
        ("my jira password, it's still Sprint#2024x", "Sprint#2024x"),
    ],
)
def test_a_password_said_now_after_its_name_and_a_comma_is_redacted(
    text: str, password: str
) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "I changed the password, it's now required to be 12 characters",
        "the admin password, it's now stored in 1Password",
        "the password changed, it is now rotated every 90 days",
        "the password, it's now hashed with Argon2id",
        "reset your password, it's now possible from the login page",
        "the db password changed, it is now in vault at secret/db",
        "the password policy changed, it is now NIST-800-63b",
        "my password, it's still the same as before",
    ],
)
def test_sentences_about_a_password_said_now_stay(text: str) -> None:
    assert redact(text) == text


# ------------------------------------- a password stated with "also", "again" or "probably"
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("and my sudo password is also Blue#Train4471", "Blue#Train4471"),
        ("the wifi password is also Hx9#kq2Lm", "Hx9#kq2Lm"),
        ("after the reset the password is again Sprint#2024x", "Sprint#2024x"),
        ("the db password is probably Tr1cky#Pass, try it", "Tr1cky#Pass"),
        ("the vpn password is likely Vpn2024$Blue", "Vpn2024$Blue"),
        ("the root password is usually Winter2024!xq", "Winter2024!xq"),
    ],
)
def test_a_password_stated_with_also_again_or_probably_is_redacted(
    text: str, password: str
) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "the password is also hashed with argon2",
        "the password is also stored in the vault",
        "the password is again required after 5 minutes",
        "the password is probably wrong",
        "the password is likely expired",
        "the password is usually 12 characters",
        "the password is also UTF8-Encoded",
    ],
)
def test_sentences_about_a_password_with_also_again_or_probably_stay(text: str) -> None:
    assert redact(text) == text


# --------------------------------------------------- a secret stated with a verb, chosen-looking
@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the staging db secret is Hunter2!xyz", "Hunter2!xyz"),
        ("the webhook secret is now Hook#Sign2024", "Hook#Sign2024"),
        ("our shared secret was Tr1cky#Pass, rotate it", "Tr1cky#Pass"),
        ("The RADIUS shared secret is R4dius!Lab.", "R4dius!Lab"),
        ("client secret for the sso app is 'Sso$Client9x'", "Sso$Client9x"),
        ("the jwt signing secret is Jwt#Sign3r!", "Jwt#Sign3r!"),
        # a generator's letters and digits joined to a word
        ("the radius shared secret is Zq8vR2mX_radius, remember it", "Zq8vR2mX_radius"),
        ("the secret for the hook is hook-Kx9pL2mQ-prod", "hook-Kx9pL2mQ-prod"),
    ],
)
def test_a_chosen_secret_stated_with_a_verb_is_redacted(text: str, secret: str) -> None:
    _assert_only_value_redacted(text, secret, "credential_assignment")


@pytest.mark.parametrize(
    "text",
    [
        "the secret is caching",
        "the secret is to restart it",
        "the secret is in vault",
        "the secret is rotated monthly",
        "the secret is `db-creds`",
        "the secret is `db-creds-2024`",
        "the secret is stored as k8s/secret-v2 in the cluster",
        "the secret is named DB_PASSWORD_2 in GitHub Actions",
        "the secret is ${{ secrets.DEPLOY_KEY }}",
        "the secret is $SECRET2_VALUE",
        "the secret is <your-secret-here>",
        "the secret is owned by ops@corp2.io",
        "the secret is Python3!",
        "the secret is https://vault.corp.io/v1/secret2",
        "The secret to fast builds is ccache!",
        "the secret is x^2+Y3 applied twice",
        "the client secret is Prod_Client_Secret_V2.",
        "the secret is stored in AWS_Secrets_Manager_2.",
        "the secret is v1.2.3-Rc4.",
        "the secret is named OAuth2Client_SecretV2.",
        "the secret is ProdDb2Main_v2 now.",
    ],
)
def test_sentences_about_a_secret_stay(text: str) -> None:
    assert redact(text) == text


# ------------------ a value of every character class given with "use", "with" or "try"
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("use Hunter2!xyz for the staging db", "Hunter2!xyz"),
        ("try Tr1cky#Pass to log in if the other one fails", "Tr1cky#Pass"),
        ("try 'Adm1n$Box' for sudo", "Adm1n$Box"),
        ("use `N4s#Share` for the nas and the admin user", "N4s#Share"),
        ("just use 'Qw3rty!Lab' for all the lab vms.", "Qw3rty!Lab"),
        ("Use Grafana#Ops7 for the dashboards", "Grafana#Ops7"),
    ],
)
def test_a_value_of_every_class_given_with_a_verb_is_redacted(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "use Python3! for scripts",
        "use C#10 for this",
        "use -O2 for speed",
        "use UTF-8 for the files",
        "use Node@18 for the build",
        "use React!",
        "use Ctrl+Shift+F5 for a hard reload",
        "try it with O(n^2) Memory first",
        "use x^2+Y3 as the curve",
        "use ops.Bot2@corp.io for the wiki",
        "use a!=B2 in the filter",
        "try #Channel1 for alerts",
        "with $HOME/Bin2 on the path",
        "use Feature#42-Login as the branch name",
        "use lodash@4.17.21 with React",
        "deal with it, Tom2!",
        "swap foo with Bar!Baz2 in the config",
        "because Hunter2!xyz is what the docs show",
    ],
)
def test_values_after_a_verb_that_are_no_password_stay(text: str) -> None:
    assert redact(text) == text


# ------------------------------ a password after "with" following a user at an address
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("ssh root@10.0.0.5 with Winter2024!", "Winter2024!"),
        ("ssh admin@nas.lan with Summer2023!", "Summer2023!"),
        ("ssh pi@192.168.1.20 with Raspberry2024! then run the script", "Raspberry2024!"),
        ("sftp deploy@files.corp.io with Deploy2025!, port 2222", "Deploy2025!"),
    ],
)
def test_a_password_after_a_user_at_an_address_and_with_is_redacted(
    text: str, password: str
) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "ssh root@10.0.0.5 with tmux2024!",
        "ssh root@10.0.0.5 with verbose!",
        "ssh root@10.0.0.5 with ProxyJump!",
        "connect to admin@nas.lan with SSHv2 only",
        "ping root@10.0.0.5 with Ubuntu2204",
        "mail bob@corp.io with Questions!",
        "ssh pi@10.0.0.7 with Pi2024!",
    ],
)
def test_words_after_a_user_at_an_address_and_with_stay(text: str) -> None:
    assert redact(text) == text


# ------------------------------ an account's password whose only symbol is a final "!"
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("login: admin/Winter2024!", "Winter2024!"),
        ("the router is admin / Summer2023!", "Summer2023!"),
        ("root:Toor2024Lab!", "Toor2024Lab!"),
        ("db login postgres/Postgres2024!\nthen restart the service", "Postgres2024!"),
        ("the sql creds (sa/Sql2019Server!)", "Sql2019Server!"),
        ("ec2-user | Amazon2Linux!", "Amazon2Linux!"),
        ("portal login guest/Welcome2024!, then change it", "Welcome2024!"),
    ],
)
def test_an_account_password_ending_in_a_bang_is_redacted(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "r/Python3!",
        "see docs/Setup2!",
        "I love r/Python3 and r/Golang2024!",
        "admin/Dash2!",
        "admin/winter2024!",
        "admin/WINTER2024!",
        "admin/Settings!",
        "git checkout fix/Login2024!",
        "the page is /admin/Users2024!",
        "test/Integration!",
        "ops/Release2024!",
        "admin/Welcome2024! is what the old docs said",
        "see admin/Dashboard2024!",
        "Visit admin/Reports2024!, then export.",
    ],
)
def test_pairs_ending_in_a_bang_that_are_no_credentials_stay(text: str) -> None:
    assert redact(text) == text


# ---------------------------------- a user and a password stated after "creds are", "login is"
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("staging db creds are admin Hunter2!xyz", "Hunter2!xyz"),
        ("the jenkins credentials are ci-bot Jenk1ns#CI, don't share", "Jenk1ns#CI"),
        ("prod creds is root 'Pr0d$Root' for now", "Pr0d$Root"),
        ("grafana login is admin Graf4na!Ops.", "Graf4na!Ops"),
        ("the creds are now deploy Deploy2024X", "Deploy2024X"),
        ("my vpn credentials are jdoe@corp.io Vpn#2024pass", "Vpn#2024pass"),
        # an account or an admin, where it is, then any user and "and" or "with"
        (
            "the dev account on the lims is labtech2 with Sequoia#Rings, pull the ids",
            "Sequoia#Rings",
        ),
        ("plex admin is jon and Plex4Life! , remember that", "Plex4Life!"),
        ("the admin for the wiki is alice and Wiki2024.", "Wiki2024"),
        ("the account on the nas is backup, with Bkp!2024x", "Bkp!2024x"),
    ],
)
def test_a_user_and_password_stated_after_creds_are_is_redacted(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password, "password_statement")


@pytest.mark.parametrize(
    "text",
    [
        "the creds are in vault under secret/db",
        "creds are rotated every 90d",
        "the creds are admin only for v2",
        "the login is broken since v1.2.3",
        "login is via sso2 now",
        "the creds are the same as prod",
        "creds are stored encrypted with KMS2",
        "the credentials are valid for 24h",
        "login is admin and the password is in 1Password",
        "creds are admin admin",
        "the login is admin2 today",
        "creds are ${DB_USER} ${DB_PASS2}",
        "the admin is jon and Plex4Life crashes",
        "the admin page is vue and React18.",
        "the account is mine and Locked2FA.",
        "the account is disabled and Locked#2 shows",
        "the admin is bob and the rest of the team",
        "the account is shared with Team#2 folks",
        "the admin for the wiki is alice and bob.",
    ],
)
def test_sentences_about_creds_stay(text: str) -> None:
    assert redact(text) == text


# ------------------------------------ a password passed by position to a connect call
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("ssh.connect(host, 22, 'admin', 'Ssh4dm!nX')", "Ssh4dm!nX"),
        ('client.connect("10.0.0.5", 22, "root", "Toor2024!Lab")', "Toor2024!Lab"),
        ("db = MySQLdb.connect('localhost', 'root', 'Secr3t#Db', 'shop')", "Secr3t#Db"),
        ("conn = pymysql.connect(\n    'db.local', 'app', 'App!Pass42', 'app'\n)", "App!Pass42"),
        ("ftp.connect(host); ftp.login('ftpuser', 'Ftp#2024x')", "Ftp#2024x"),
    ],
)
def test_a_password_passed_to_a_connect_call_is_redacted(text: str, password: str) -> None:
    _assert_only_value_redacted(text, password, "credential_assignment")


@pytest.mark.parametrize(
    "text",
    [
        "ssh.connect(host, 22, username, password)",
        "ssh.connect(host, 22, 'admin', password)",
        "db = sqlite3.connect('app.db')",
        "conn = psycopg2.connect('dbname=test user=postgres')",
        "engine.connect('default', 'shop')",
        "client.connect('broker.local', 1883, 60)",
        "signal.connect('clicked', 'on_click')",
        "ssh.connect(host, 22, 'admin', os.environ['SSH_PASSWORD'])",
        "ssh.connect(host, 22, 'admin', '<password>')",
        "db.connect('localhost', 'root', '', 'shop')",
        "redis.connect('cache.local', 'db0', 'utf-8')",
        "self.connection('admin', 'Ssh4dm!nX')",
    ],
)
def test_connect_calls_without_a_password_stay(text: str) -> None:
    assert redact(text) == text
