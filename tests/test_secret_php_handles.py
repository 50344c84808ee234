"""PHP's database handles, which take a password by position: `new PDO($dsn, $user, X)`,
`new mysqli($host, $user, X, $db)`, `mysqli_connect()`, `mysqli_real_connect($link, ...)`."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact, secret_kinds

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("new PDO('mysql:host=db;dbname=app', 'app', 'Sup3rS3cret!')", "Sup3rS3cret!"),
        ("$pdo = new PDO($dsn, 'root', 'rootpass123');", "rootpass123"),
        (
            '$pdo = new PDO("pgsql:host=localhost;port=5432;dbname=app", "postgres", "s3cretpw");',
            "s3cretpw",
        ),
        ("$db = new PDO('mysql:host=localhost;dbname=test', $user, 'Passw0rd');", "Passw0rd"),
        (
            "$db = new \\PDO($dsn, $config['user'], 'Passw0rd', [PDO::ATTR_PERSISTENT => true]);",
            "Passw0rd",
        ),
        ("$conn = new mysqli('localhost', 'root', 'rootpass123', 'mydb');", "rootpass123"),
        ('$conn = mysqli_connect("localhost", "admin", "Adm1nPass", "shop");', "Adm1nPass"),
        ("$link = mysql_connect('localhost', 'root', 'toor');", "toor"),
        ("mysqli_real_connect($link, 'db', 'app', 'Sup3rS3cret', 'app');", "Sup3rS3cret"),
        (
            "$pdo = new PDO(\n    'mysql:host=db;dbname=app',\n    'app',\n    'Sup3rS3cret!'\n);",
            "Sup3rS3cret!",
        ),
    ],
)
def test_a_password_given_to_a_php_database_handle_is_redacted(text: str, password: str) -> None:
    redacted = redact(text)
    assert password not in redacted
    assert secret_kinds(text) == "credential_assignment"
    assert redacted == text.replace(f"{password}", "[REDACTED:credential_assignment]", 1)


@pytest.mark.parametrize(
    "text",
    [
        "$pdo = new PDO($dsn, $user, $pass);",
        "$pdo = new PDO($dsn, 'user', 'password');",
        "$pdo = new PDO($dsn, DB_USER, DB_PASS);",
        "$pdo = new PDO($dsn, getenv('DB_USER'), getenv('DB_PASS'));",
        "$pdo = new PDO('sqlite:/tmp/app.db');",
        "$pdo = new PDO($dsn, 'root', '');",
        "$conn = new mysqli($host, $user, $pass, $db);",
        "$pdo = new PDO($dsn, 'app', $_ENV['DB_PASSWORD']);",
        '$mysqli = new mysqli("localhost", "my_user", "my_password", "world");',
        "$pdo = new PDO($dsn, 'root', 'your_password');",
        "$pdo = new PDO('mysql:host=db', 'app');",
        "we moved from mysql_connect('localhost') to PDO last year",
    ],
)
def test_php_database_handles_without_a_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
