"""Database passwords given to tools and drivers: Oracle's JDBC URL, cqlsh, cypher-shell,
neo4j-admin and mssql-cli, and the look-alikes of each that must stay storable."""

from __future__ import annotations

import pytest

from orcad.secrets import find_secrets, redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("text", "password", "kind"),
    [
        ("jdbc:oracle:thin:scott/Tiger123@db:1521:ORCL", "Tiger123", "url_credentials"),
        (
            "url: jdbc:oracle:thin:app/S3cr3t!@//db.corp:1521/PROD",
            "S3cr3t!",
            "url_credentials",
        ),
        (
            "spring.datasource.url=jdbc:oracle:thin:hr/hr2024@localhost:1521/XEPDB1",
            "hr2024",
            "url_credentials",
        ),
        ('jdbc:oracle:oci:app/"We!rd@pw"@PROD', "We!rd@pw", "url_credentials"),
        ("cqlsh -u cassandra -p Sup3rS3cret db", "Sup3rS3cret", "password_flag"),
        ("cqlsh db.local 9042 -u admin -p 'Sup3r S3cret'", "Sup3r S3cret", "password_flag"),
        (
            "cypher-shell -a bolt://db:7687 -u neo4j -p Sup3rS3cret",
            "Sup3rS3cret",
            "password_flag",
        ),
        ("neo4j-admin set-initial-password Sup3rS3cret", "Sup3rS3cret", "password_flag"),
        ("neo4j-admin dbms set-initial-password Sup3rS3cret", "Sup3rS3cret", "password_flag"),
        ("mssql-cli -S db -U sa -P Sup3rS3cret", "Sup3rS3cret", "password_flag"),
    ],
)
def test_a_password_given_to_a_database_tool_is_redacted(
    text: str, password: str, kind: str
) -> None:
    assert redact(text) == text.replace(password, f"[REDACTED:{kind}]")


@pytest.mark.parametrize(
    "text",
    [
        "jdbc:oracle:thin:@//db.corp:1521/PROD",
        "jdbc:oracle:thin:@db:1521:ORCL",
        "jdbc:oracle:thin:${DB_USER}/${DB_PASS}@db:1521:ORCL",
        "jdbc:oracle:thin:user/password@host:1521:sid",
        "jdbc:oracle:thin:<user>/<password>@host:1521:sid",
        "jdbc:oracle:thin:scott/tiger@myhost:1521:orcl",
        "mssql-cli -S db -U sa -P",
        "mssql-cli -S db -U sa -p",
        "cqlsh -p",
        "cqlsh --help shows -p for the password",
        "neo4j-admin set-initial-password $NEO4J_PASSWORD",
    ],
)
def test_database_tools_without_a_password_stay_storable(text: str) -> None:
    assert find_secrets(text) == []
