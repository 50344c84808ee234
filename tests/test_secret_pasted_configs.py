"""Credentials in what developers paste from their configuration: a Go MySQL DSN, an SMTP URL
whose user is an email address, the tail of a private key whose start scrolled away, and a
Wi-Fi passphrase given for the network itself. Each goes; what only looks like one stays."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ('db, err := sql.Open("mysql", "root:GoDsnPw9@tcp(localhost:3306)/app")', "GoDsnPw9"),
        ("MYSQL_DSN=app:Go!Dsn9x@tcp(db:3306)/orders?parseTime=true", "Go!Dsn9x"),
        ('dsn := "svc:hunter22@tcp(10.0.0.7:3306)/billing"', "hunter22"),  # any password there
        ("DSN='app:Sock3t!pw@unix(/var/run/mysqld/mysqld.sock)/app'", "Sock3t!pw"),
        ('"reader:R3ad#only@tcp6([::1]:3306)/reports"', "R3ad#only"),
    ],
)
def test_the_password_of_a_go_mysql_dsn_is_redacted(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:url_credentials]")


@pytest.mark.parametrize(
    ("text", "password"),
    [
        (
            "EMAIL_URL=smtp://postmaster@mg.example.com:MgSmtpPw77@smtp.mailgun.org:587",
            "MgSmtpPw77",
        ),
        ("smtps://jane.doe@gmail.com:abcdwxyzefghijkl@smtp.gmail.com:465", "abcdwxyzefghijkl"),
        ("imap://ops@corp.example.org:Im4p!Pass@mail.corp.example.org/INBOX", "Im4p!Pass"),
    ],
)
def test_a_url_whose_user_is_an_email_address_loses_its_password(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:url_credentials]")


@pytest.mark.parametrize(
    "text",
    [
        "git+ssh://git@gitlab.example.com:2222/org/repo.git@v1.2.0",
        "ssh://git@github.com:22@mirror",
        "https://user@example.com:8443@x",
        'sql.Open("mysql", "user:password@tcp(127.0.0.1:3306)/test")',  # the docs' stand-in
        "mysql:host=db;dbname=app@tcp",
        "user@tcp(host) is the address form",
    ],
)
def test_addresses_without_a_password_stay(text: str) -> None:
    assert find_secrets(text) == []


KEY_TAIL = (
    "QyNTUxOQAAACBmZXJyaXMtd2hlZWwtc2V0dXAtZXhhbXBsZS1rZXkAAAAAAAAAAA\n"
    "AAAECIv8Tz9Yw3lkLmNoPqRsTuVwXyZa1B2c3D4e5F6g7H8i9J0k\n"
)


@pytest.mark.parametrize(
    ("before", "indent"),
    [
        ("the end of the key file:\n", ""),
        ("", ""),
        ("tls.key: |\n", "  "),
    ],
)
def test_the_tail_of_a_private_key_without_its_begin_line_is_redacted(
    before: str, indent: str
) -> None:
    tail = "".join(indent + line + "\n" for line in KEY_TAIL.splitlines())
    text = f"{before}{tail}{indent}-----END OPENSSH PRIVATE KEY-----\nthen the next step"
    redacted = redact(text)
    assert redacted == f"{before}[REDACTED:private_key_block]\nthen the next step"
    assert "AAAECIv8Tz9Yw3lk" not in redacted and "QyNTUxOQ" not in redacted
    assert secret_kinds(text) == "private_key_block"


@pytest.mark.parametrize(
    ("line_end", "quote"),
    [("\n", ""), ("\r\n", ""), ("\\n", '"'), ("\\r\\n", '"'), ("\\\\n", '\\"')],
)
@pytest.mark.parametrize("last", ["Aw==", "lPZP", "AAAAB3NzaC1yc2E"])
def test_the_tail_of_a_private_key_ending_in_a_short_line_is_redacted(
    line_end: str, quote: str, last: str
) -> None:
    # before: a key whose last line of base64 is shorter than 16 characters (an OpenSSH key's
    # often is) kept all of its lines above the END line; so did every key whose lines are
    # joined by escaped line breaks, as in a JSON string
    tail = line_end.join([*KEY_TAIL.splitlines(), last, "-----END OPENSSH PRIVATE KEY-----"])
    if quote:
        text = f'{{"key": {quote}{tail}{line_end}{quote}, "next": "step"}}'
        kept = f'{{"key": {quote}[REDACTED:private_key_block]{line_end}{quote}, "next": "step"}}'
    else:
        text = f"{tail}{line_end}then the next step"
        kept = f"[REDACTED:private_key_block]{line_end}then the next step"
    redacted = redact(text)
    assert redacted == kept
    assert last not in redacted and "QyNTUxOQ" not in redacted
    # a line of prose above the key's lines is not key material
    prose = f"the end of the key file:{line_end}{tail}{line_end}then the next step"
    assert redact(prose) == (
        f"the end of the key file:{line_end}[REDACTED:private_key_block]{line_end}"
        "then the next step"
    )


@pytest.mark.parametrize(
    "text",
    [
        "the file must end with -----END PRIVATE KEY----- and a newline",
        'assert pem.rstrip().endswith("-----END RSA PRIVATE KEY-----")',
        "footer:\n-----END EC PRIVATE KEY-----",
        "-----BEGIN CERTIFICATE-----\n"
        "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
        "-----END CERTIFICATE-----",
    ],
)
def test_an_end_line_with_no_key_material_above_it_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("the wifi is Kitten!2024", "Kitten!2024"),
        ("the office wifi is Kitten!2024, ask me if it changes", "Kitten!2024"),
        ("guest wi-fi is now Cafe#Latte42.", "Cafe#Latte42"),
        ("The WiFi is 'Blue#Heron42'", "Blue#Heron42"),
        ('our wlan is "Xk9#mm2pqLw" by the way', "Xk9#mm2pqLw"),
        ("wifi network is Hunter22!", "Hunter22!"),
    ],
)
def test_a_passphrase_given_for_the_wifi_itself_is_redacted(text: str, key: str) -> None:
    assert redact(text) == text.replace(key, "[REDACTED:password_statement]")


@pytest.mark.parametrize(
    "text",
    [
        "the wifi is down again",
        "the wifi is flaky!!!",
        "the wifi is WPA2-Enterprise",
        "the wifi is WPA2/WPA3 mixed mode",
        "the wifi is AX210.",
        "the wifi is 5GHz only",
        "the wifi is eduroam.",
        "the wifi is Kitten!2024 compatible",  # more words follow: not a value given
        "the wifi is $WIFI_PASS",
        "the wifi is <your-passphrase>",
    ],
)
def test_what_a_sentence_says_of_the_wifi_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("heslo je Praha2024!", "Praha2024!"),  # Czech
        ("heslo: Bratislava#7", "Bratislava#7"),  # Slovak
        ("a jelszó Budapest2024!", "Budapest2024!"),  # Hungarian
        ("kata sandinya adalah Jakarta@2024", "Jakarta@2024"),  # Indonesian
        ("kata sandi untuk server: Srv!2024x", "Srv!2024x"),
        ("Mật khẩu là Hanoi@2024", "Hanoi@2024"),  # Vietnamese
        ("κωδικός είναι Athens2024!", "Athens2024!"),  # Greek
        ("lösenordet är Sommar2024!", "Sommar2024!"),  # Swedish, "the password"
        ("hasło do bazy to Krakow2024!", "Krakow2024!"),  # Polish, "to" as the verb
    ],
)
def test_a_password_stated_in_more_languages_is_redacted(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_statement]")


@pytest.mark.parametrize(
    "text",
    [
        "heslo: povinné",  # required
        "heslo je příliš krátké",  # too short
        "jelszó: kötelező",
        "a jelszó túl rövid",
        "kata sandi: wajib",
        "kata sandi wajib diisi",
        "mật khẩu là bắt buộc",
        "κωδικός: λάθος",
        "lösenordet är för kort",
        "hasło to jest tajne",
    ],
)
def test_what_those_languages_say_of_a_password_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("db:\n  user: app\n  password: Summer-2024\n", "Summer-2024"),
        ("smtp:\n  password: Welcome.01", "Welcome.01"),
        ("[database]\npassword = Spring_2023", "Spring_2023"),
        ('ldap:\n  bind_password: "Autumn-2022"', "Autumn-2022"),
    ],
)
def test_a_capitalised_word_and_a_number_set_for_a_password_is_redacted(
    text: str, password: str
) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:credential_assignment]")


@pytest.mark.parametrize(
    "text",
    [
        "password_policy: Strict-90",
        "password_hash_algorithm: Argon-2019",
        "passwordSecretName: Vault-01",
        "secret_name: Prod-2024",
        "token_type: Bearer-01",
        "password: Win-10",  # a shorter word: a label
        "password: tls-cert-2024",
    ],
)
def test_a_label_set_beside_a_password_word_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("please remember net user Administrator W1nAdm!n /add", "W1nAdm!n"),
        ("I did `net user Administrator W1nAdm!n /add` on the build box", "W1nAdm!n"),
        ("run `net user svc_backup Bkp#2024x` first", "Bkp#2024x"),
        ('then net user deploy "open sesame" /add', "open sesame"),
    ],
)
def test_net_user_in_a_sentence_or_inline_code_loses_its_password(text: str, password: str) -> None:
    assert redact(text) == text.replace(password, "[REDACTED:password_flag]")


@pytest.mark.parametrize(
    "text",
    [
        "the net user command takes /add",
        "net user accounts are listed with /domain",
        "use net user name password /add",
        "net user bob * /add",
        "`net user` lists the accounts",
    ],
)
def test_sentences_about_net_user_stay(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (
            "gh secret set NPM_TOKEN --body 'npm_Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb'",
            "npm_Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz2Xc4Vb",
        ),
        ('gh secret set DB_PASSWORD -b"Hunter2!x"', "Hunter2!x"),
        ("gh secret set -e prod DEPLOY_KEY --body Zx9!kq2Lm#Tw --repo acme/app", "Zx9!kq2Lm#Tw"),
    ],
)
def test_the_body_of_a_github_secret_set_from_the_cli_is_redacted(text: str, value: str) -> None:
    assert redact(text) == text.replace(value, "[REDACTED:password_flag]")


@pytest.mark.parametrize(
    "text",
    [
        'gh secret set API_KEY --body "$API_KEY"',
        "gh secret set KEY -b $KEY",
        "gh secret set FOO < secret.txt",
        "echo $T | gh secret set X --body-file -",
        "gh secret set --help | grep -- --body",
        "gh variable set REGION --body us-east-1",
    ],
)
def test_a_github_secret_given_from_elsewhere_stays(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "token",
    [
        "dp.st.prd.q8Zr2vLx0pWnT5yU7iO9pA1sD3fG5hJ7kL9zX1cVbN",
        "dp.st.dev_us-1.q8Zr2vLx0pWnT5yU7iO9pA1sD3fG5hJ7kL9zX1cVbN",
        "dp.st.q8Zr2vLx0pWnT5yU7iO9pA1sD3fG5hJ7kL9zX1cVbN",
    ],
)
def test_a_doppler_service_token_naming_its_config_is_redacted(token: str) -> None:
    text = f"export DOPPLER_TOKEN={token}\ndoppler run -- npm start"
    assert redact(text) == text.replace(token, "[REDACTED:doppler_token]")
