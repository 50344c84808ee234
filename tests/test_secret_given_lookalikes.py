"""Look-alikes of a secret given in passing: a connect call's quoted arguments, a value after
"use" or "try", "the secret is ...", "the login is ...", an account's path that a "!" ends, a
value after "user@host with", and "password, it's now ...". A review with fresh look-alikes
found the rules for these took all of the following; none is a secret."""

from __future__ import annotations

import pytest

from orcad.secrets import redact

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    "text",
    [
        # connect calls: a DSN, a database, a client id, a signal and its handler
        "conn = cx_Oracle.connect('system', 'oracle', 'localhost:1521/XE')",
        "conn.connect('127.0.0.1', 'admin', 'MyDatabase2')",
        'mqtt.connect("broker.hivemq.com", "Sensor-A1")',
        "client.connect('broker.local', 'ClientId-7')",
        "amqp.connect('amqp://localhost', 'Queue#A1')",
        "button.connect('clicked', 'OnClick2')",
        "sig.disconnect('clicked', 'OnClick2')",
        "pool.connect('replica-1', 'ReadOnly2')",
        # "use" and "try": stacks, query strings, methods, cells, globs
        "use Java17&Gradle8",
        "use Kotlin2&Compose",
        "try Node18&Npm9",
        "use OAuth2&PKCE",
        "try pageSize=50&sortBy=name",
        "use userId=42&orderBy=createdAt as the query string",
        "use Math#atan2 instead of atan",
        "use Base64#strict_encode64 for the header",
        "use MyActivity$1 in the proguard rule",
        "use FullyQualifiedName~OrderTests2 to filter",
        "use Sheet1!A1 as the anchor",
        "use Test*Spec2 as the pattern",
        "use Hello!World2 as the test string",
        "try Sprint#Q1Plan2",
        # "the secret is": what a trick or a fix is, a stored secret's name
        "the secret to this bug is MyViewModel$1 holding a reference",
        "the secret to fast Rust builds is sccache&Mold2",
        "the secret is Redis7&Lua scripting",
        "the secret is HEAD~2 rebase",
        "The secret is node@v18 with corepack",
        "the secret sauce is S&P500 index funds",
        "Secret rotation failed for 3 items: ERR#E42x at step two",
        "the secret is Math#atan2",
        "the secret is kv-v2@vault",
        "GET api/Users?Page=2",
        "report/Summary?Year=2024",
        # "the login is" and "creds are": what a login or credentials are like
        "the login is returning HTTP401!",
        "the login is now Keycloak21!",
        "login is broken SSO-v2!",
        "the login is okta SSO-v2!",
        "creds are temporary STS&AssumeRole2",
        "the creds are aws-sso SSO&Profile2",
        # an account's page that a sentence's "!" ends
        "Visit admin/Reports2024!, then export.",
        "see admin/Dashboard2024!",
        "open user/Profile2024!",
        "check deploy/HelmChart3!",
        # a user at a host "with" an option
        "ssh pi@raspberrypi.local with X11Forwarding!",
        "ssh pi@raspberrypi.local with KeepAlive2!",
    ],
)
def test_given_in_passing_look_alikes_stay(text: str) -> None:
    assert redact(text) == text
