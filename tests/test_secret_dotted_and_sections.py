"""Passwords with dots in them, and unquoted values in an INI file's section (.pypirc, my.cnf):
what must go, and the dotted names and settings of code that look like them but must stay."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("password: my.S3cret.pass", "my.S3cret.pass"),
        ("db password: my.S3cret.pass", "my.S3cret.pass"),
        ("DB_PASSWORD=my.S3cret.pass", "my.S3cret.pass"),
        ("password = my.S3cret.pass", "my.S3cret.pass"),
        ('"password": "my.S3cret.pass"', "my.S3cret.pass"),
        ("db_password: Sup3r.Secret", "Sup3r.Secret"),
        ("spring.datasource.password=my.S3cret.pass", "my.S3cret.pass"),
        ("PGPASSWORD=s3cr3t.pw psql -h db -U app", "s3cr3t.pw"),
        ("sshpass -p 'Xk9.mPq2' ssh root@host", "Xk9.mPq2"),
        ("docker login -u me -p Xk9.mPq2", "Xk9.mPq2"),
        ("curl -u admin:Xk9.mPq2 https://api.example.com", "Xk9.mPq2"),
        ("keytool -storepass Xk9.mPq2 -list", "Xk9.mPq2"),
        ("openssl pkcs12 -export -passout pass:Xk9.mPq2 -out a.p12", "Xk9.mPq2"),
        ("vault login -method=userpass username=me password=Xk9.mPq2", "Xk9.mPq2"),
        ("Driver={ODBC Driver 17};Server=db;UID=sa;PWD=Sup3r.S3cret;", "Sup3r.S3cret"),
        ("WP password: Xk9.mPq2", "Xk9.mPq2"),
        ("the password is my.S3cret.pass", "my.S3cret.pass"),
    ],
)
def test_a_password_with_dots_in_it_is_redacted(text: str, password: str) -> None:
    redacted = redact(text)
    assert password not in redacted
    assert "[REDACTED:" in redacted


@pytest.mark.parametrize(
    "text",
    [
        "password: config.dbPassword",
        "password = settings.DB_PASSWORD",
        "password: process.env.DB_PASSWORD,",
        "password = self.mContext.password",
        "password = aws.S3Client.password",
        "the password hasher is Microsoft.AspNetCore.Identity",
        'PASSWORD_HASHERS = ["django.contrib.auth.hashers.Argon2PasswordHasher"]',
        "password: cfg.oauth2.secret",
        "password = i18n.login.password",
        "password: Md5.hexdigest",
        "password = utf8mb4.password",
        "the password is stored in settings.py",
        "password: this.mPwd2",
        "password: props.iOS17.password",
        "password = Config.Db2Password",
        "password: opts.h264Encoder.key",
        "password = userId2.value",
    ],
)
def test_a_dotted_name_for_a_password_stays_storable(text: str) -> None:
    assert find_secrets(text) == []


# -------------------------------------------------------------------- INI files' sections
@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("[pypi]\nusername = me\npassword = hunter2.long.value", "hunter2.long.value"),
        ("[pypi]\nusername: me\npassword: hunter22", "hunter22"),
        (
            "[distutils]\nindex-servers = pypi\n\n[pypi]\n"
            "repository = https://upload.pypi.org/legacy/\n"
            "username = alice\npassword = hunter2.long.value\n",
            "hunter2.long.value",
        ),
        ("[testpypi]\nusername = alice\npassword = correct.horse.battery", "correct.horse.battery"),
        ("[client]\nuser = root\npassword = rootpass", "rootpass"),
        ("[database]\n; production\nhost = db\n\npassword = s3cretpass", "s3cretpass"),
        ("[security]\nadmin_user = admin\nadmin_password = grafana.admin", "grafana.admin"),
    ],
)
def test_an_unquoted_password_in_an_ini_section_is_redacted(text: str, password: str) -> None:
    redacted = redact(text)
    assert password not in redacted
    assert redacted == text.replace(password, "[REDACTED:credential_assignment]")


@pytest.mark.parametrize(
    "text",
    [
        "def connect():\n    password = cfg.password",
        "x = [a]\npassword = cfg.password",
        "[pypi]\npassword = %(PYPI_PASSWORD)s",
        "[pypi]\npassword = ${PYPI_PASSWORD}",
        "[pypi]\npassword =",
        "[pypi]\npassword = none",
        "[mysqld]\nvalidate_password = FORCE_PLUS_PERMANENT",
        "[mysqld]\ndefault_authentication_plugin = mysql_native_password",
        "[mysqld]\nvalidate_password.policy = MEDIUM",
        "[pypi]\nusername = me\nimport os\npassword = cfg.password",
        "[pypi]\npassword = /run/secrets/pypi",
    ],
)
def test_settings_and_code_near_a_section_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
