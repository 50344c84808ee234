"""Credentials that code and deployment files give by position or under a name held apart:
a container's environment (`name:` / `value:`), a call's user and password, `define(...)`, a
subscript's key, a shell default and a Terraform variable's default."""

from __future__ import annotations

import pytest

from orcad.secrets import redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("- name: DB_PASSWORD\n  value: Plain!K8sEnv", "Plain!K8sEnv"),
        (
            '        env:\n        - name: REDIS_PASSWORD\n          value: "EnvV4lue!Redis"',
            "EnvV4lue!Redis",
        ),
        ('{"name": "DB_PASSWORD", "value": "EcsTask!Def9"}', "EcsTask!Def9"),
        (
            '"environment": [{"name": "STRIPE_API_KEY",\n  "value": "rk9Qf2Lx7Vb3Nm8Tz4Wd6Hs1"}]',
            "rk9Qf2Lx7Vb3Nm8Tz4Wd6Hs1",
        ),
        ("define( 'DB_PASSWORD', 'Wp!Db2025pass' );", "Wp!Db2025pass"),
        (
            "define( 'AUTH_KEY', 'x9#Lp!2@qZ8&mN4^vB6*cX1%kJ7$hG3(' );",
            "x9#Lp!2@qZ8&mN4^vB6*cX1%kJ7$hG3(",
        ),
        ("app.config['SECRET_KEY'] = 'fl4sk-s3cr3t-k3y'", "fl4sk-s3cr3t-k3y"),
        ('os.environ["DB_PASSWORD"] = "Sub!Scr1pt"', "Sub!Scr1pt"),
        ('      DB_PASSWORD: "${DB_PASSWORD:-Default!Sh9}"', "Default!Sh9"),
        ('variable "db_password" {\n  default = "TfDefault!Pw9"\n}', "TfDefault!Pw9"),
        (
            'variable "db_password" {\n  type    = string\n  default = "TfDefault!Pw9"\n}',
            "TfDefault!Pw9",
        ),
        ("requests.get(url, auth=('admin', 'Adm!nReq9'))", "Adm!nReq9"),
        ('driver = GraphDatabase.driver(uri, auth=("neo4j", "Ne0Auth!x"))', "Ne0Auth!x"),
        ("auth = HTTPBasicAuth('svc', 'Basic!Http9')", "Basic!Http9"),
        ('new NetworkCredential("svcacct", "NetCred!42")', "NetCred!42"),
        ("smtp.login('reports@corp.io', 'SmtpL0gin!')", "SmtpL0gin!"),
        ('login("admin", "Sel3nium!Adm")  # test fixture for prod, oops', "Sel3nium!Adm"),
        ('jdbcTemplate: ds.setPassword("JavaDs!Pw1");', "JavaDs!Pw1"),
        ('jedis.auth("JedisAuth!1");', "JedisAuth!1"),
    ],
)
def test_a_credential_given_by_position_or_a_name_apart_is_redacted(text: str, value: str) -> None:
    redacted = redact(text)
    assert value not in redacted
    assert redacted == text.replace(value, "[REDACTED:credential_assignment]")


@pytest.mark.parametrize(
    "text",
    [
        "- name: DB_PASSWORD_FILE\n  value: /run/secrets/db",
        "- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db",
        '{"name": "LOG_LEVEL", "value": "debug"}',
        '{"name": "GITHUB_TOKEN", "value": "${{ secrets.GITHUB_TOKEN }}"}',
        "- name: API_KEY\n  value: my-service-name",  # a key's value must look generated
        "define('WP_DEBUG', true);",
        "app.config['SECRET_KEY'] = os.environ['SECRET_KEY']",
        "if config['password'] == 'x':",
        "${DB_PASSWORD:-}",
        "${DB_PASSWORD:-changeme}",
        'variable "db_password" {\n  type      = string\n  sensitive = true\n}',
        "auth=('user', 'pass')",
        'auth=("admin", "${ADMIN_PASSWORD}")',
        "login(username, password)",
        'login("user", "password")',
        "setPassword(password)",
        "session.auth = ('user', os.environ['PW'])",
        'x = data["token"] = "abc"',
        # a form's fields, widgets and translations; routes and schemes by position
        "widgets['password'] = 'PasswordInput'",
        "self.fields['password'] = 'CharField'",
        'translations["password"] = "Contraseña"',
        'labels["secret"] = "Geheimnis"',
        'router.login("/auth", "AuthController")',
        'i18n.login("en-US", "Sign in")',
        'client.auth("Bearer")',
        '{"name": "password", "value": "Enter password"}',
        '{"name":"new_password","value":"newPassword"}',
    ],
)
def test_names_and_calls_without_a_credential_stay_storable(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("zip -P Z1pSecret! archive.zip report.pdf", "Z1pSecret!", "password_flag"),
        ("7z -pS3cret!x a backup.7z dir", "S3cret!x", "password_flag"),
        (
            "mosquitto_pub -h broker.local -u sensor -P Mq77!Sensor -t temp -m 21",
            "Mq77!Sensor",
            "password_flag",
        ),
        (
            "mc alias set minio http://localhost:9000 minioadmin M1n10Secr3tKey!",
            "M1n10Secr3tKey!",
            "password_flag",
        ),
        ("WIFI:T:WPA;S:Cafe Luna;P:LunaCaf3!2025;;", "LunaCaf3!2025", "credential_assignment"),
        ("WIFI:S:My\\;Net;T:WPA;P:pa\\;ss123;H:false;;", "pa\\;ss123", "credential_assignment"),
    ],
)
def test_a_password_a_tool_takes_first_or_a_qr_code_holds_is_redacted(
    text: str, value: str, kind: str
) -> None:
    assert redact(text) == text.replace(value, f"[REDACTED:{kind}]")


@pytest.mark.parametrize(
    "text",
    [
        "zip -r out.zip dir",
        "mosquitto_sub -h broker -p 8883 -t sensors/#",  # -p: the port
        "mc alias set minio http://localhost:9000 $ACCESS_KEY $SECRET_KEY",
        "mc alias list",
        "generate a QR code with WIFI:T:WPA;S:<ssid>;P:<password>;;",
        "WIFI:T:nopass;S:Guest;;",
    ],
)
def test_those_tools_and_qr_strings_without_a_password_stay_storable(text: str) -> None:
    assert redact(text) == text
