"""Passwords in a table's password column: Markdown tables and CSV or TSV exports."""

from __future__ import annotations

import pytest

from orcad.secrets import redact

pytestmark = pytest.mark.pure

KIND = "[REDACTED:password_statement]"


@pytest.mark.parametrize(
    ("text", "passwords"),
    [
        (
            "| service | user | password |\n|---|---|---|\n"
            "| grafana | admin | Tbl!Grafana1 |\n| kibana | elastic | `Tbl!Kibana2` |",
            ["Tbl!Grafana1", "Tbl!Kibana2"],
        ),
        (
            "CSV export of test users:\nemail,password\nqa1@corp.io,Qa1!Test\nqa2@corp.io,Qa2!Test",
            ["Qa1!Test", "Qa2!Test"],
        ),
        ("user\tpass\nbob\tS3cret!x\n", ["S3cret!x"]),
        ("| user | pass |\n|---|---|\n| bob | S3cret!x |", ["S3cret!x"]),
        ("user,secret\nbob,Xk9!mm2q", ["Xk9!mm2q"]),
        ("id;login;pwd\r\n1;bob;Pw!d2024\r\n", ["Pw!d2024"]),
        ("  | host | Password |\n  | :--- | ---: |\n  | db1 | 83920175 |", ["83920175"]),
    ],
)
def test_the_password_column_of_a_table_is_redacted(text: str, passwords: list[str]) -> None:
    expected = text
    for password in passwords:
        expected = expected.replace(password, KIND)
    assert redact(text) == expected


def test_a_table_of_many_rows_is_redacted_to_its_last_row() -> None:
    rows = "".join(f"user{n},Pw!{n:04d}x\n" for n in range(1000))
    redacted = redact("user,password\n" + rows)
    assert redacted.count(KIND) == 1000 and "Pw!0999x" not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "| user | password |\n|---|---|\n| admin | see vault |\n| bob | (in 1Password) |",
        "| field | type |\n|---|---|\n| password | string |",
        "| user | password |\n| admin | Xk9!mm2q |",  # no separator row: not a table
        "email,password_hash\nx@y.z,abc",
        "id,name,password\n1,bob\n",  # a row of another shape ends the table
        "username, password and email are required\nsee the docs, then log in",
        # a test report's Pass column, a docs table of secrets' names (no user column)
        "| Test | Pass | Time |\n|---|---|---|\n| unit | 2048 | 120ms |",
        "test,pass,fail,duration\nunit,1043,2,3s",
        "| Player | Pass |\n|---|---|\n| Kane | 2012 |",
        "| Name | Secret |\n|---|---|\n| api | aws/prod-key2 |\n| gh | gh_token_v2 |",
        "name\tpass\nunit-tests\t1043\n",
    ],
)
def test_tables_without_a_password_in_that_column_stay_storable(text: str) -> None:
    assert redact(text) == text


def test_a_row_after_the_table_is_not_read_as_one_of_its_rows() -> None:
    text = "id,name,password\n1,bob,P4ss!word\n\nsomething,else,Here1!x"
    assert redact(text) == text.replace("P4ss!word", KIND)


@pytest.mark.parametrize(
    "text",
    [
        "| User | Secret |\n|---|---|\n| deploy-bot | DEPLOY_TOKEN |",
        "| Service | User | Secret |\n|---|---|---|\n| db | app | db-password |",
        "| User | Secret |\n|---|---|\n| ci-bot | ci-bot-token |",
        "| Account | Secret |\n|---|---|\n| prod | stored-in-vault |",
    ],
)
def test_a_secret_column_of_names_stays_storable(text: str) -> None:
    assert redact(text) == text
