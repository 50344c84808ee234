"""Vendor token formats known by a prefix or a shape of their own: each is redacted wherever
it is pasted (a chat line, an env file, JSON, a curl command), and the same prefixes in prose,
documentation placeholders, short ids, hashes and UUIDs stay as written."""

from __future__ import annotations

import base64
import json
import random
import string
import uuid

import pytest

from orcad.secrets import find_secrets, redact

pytestmark = pytest.mark.pure

_RANDOM = random.Random(20261206)
_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_LOWER_DIGITS = string.ascii_lowercase + string.digits
_HEX = "0123456789abcdef"
_URLSAFE = _ALNUM + "-_"
_BASE64 = _ALNUM + "+/"


def _chars(alphabet: str, count: int) -> str:
    """Random characters of `alphabet`, with a digit and a letter when it has both."""
    while True:
        value = "".join(_RANDOM.choice(alphabet) for _ in range(count))
        digits = any(char.isdigit() for char in alphabet)
        letters = any(char.isalpha() for char in alphabet)
        if (not digits or any(char.isdigit() for char in value)) and (
            not letters or any(char.isalpha() for char in value)
        ):
            return value


def _uuid() -> str:
    return str(uuid.UUID(int=_RANDOM.getrandbits(128), version=4))


TOKENS: list[tuple[str, str]] = [
    ("aws_session_token", "IQoJb3JpZ2luX2VjEJr" + _chars(_BASE64, 600) + "="),
    ("aws_session_token", "FwoGZXIvYXdzEBYaD" + _chars(_BASE64, 280)),
    ("tencent_secret_id", "AKID" + _chars(_ALNUM, 32)),
    ("cloudflare_tunnel_token", "eyJhIjoi" + _chars(_BASE64, 180) + "="),
    ("netlify_token", "nfp_" + _chars(_ALNUM, 40)),
    ("vercel_token", "vcp_" + _chars(_ALNUM, 56)),
    ("supabase_token", "sb_secret_" + _chars(_URLSAFE, 31)),
    ("fly_io_token", "fm1a_" + _chars(_BASE64, 140)),
    (
        "onepassword_secret_key",
        "A3-" + "-".join(_chars(_UPPER_DIGITS, n) for n in (6, 6, 5, 5, 5, 5)),
    ),
    (
        "onepassword_secret_key",
        "A3-" + "-".join(_chars(_UPPER_DIGITS, n) for n in (6, 11, 5, 5, 5)),
    ),
    ("gitlab_token", "glagent-" + _chars(_URLSAFE, 50)),
    ("gitlab_token", "gloas-" + _chars(_URLSAFE, 64)),
    ("gitlab_token", "glffct-" + _chars(_URLSAFE, 20)),
    ("gitlab_token", "glpat-" + _chars(_URLSAFE, 36) + ".01." + _chars(_LOWER_DIGITS, 7)),
    ("gitlab_token", "glrt-t1_" + _chars(_URLSAFE, 27) + ".01" + _chars(_LOWER_DIGITS, 7)),
    ("circleci_token", "CCIPRJ_" + _chars(_ALNUM, 22) + "_" + _chars(_HEX, 40)),
    ("sonarqube_token", "squ_" + _chars(_HEX, 40)),
    ("sonarqube_token", "sqp_" + _chars(_HEX, 40)),
    ("intra42_client_secret", "s-s4t2af-" + _chars(_HEX, 64)),
    (
        "harness_token",
        "sat." + ".".join((_chars(_URLSAFE, 22), _chars(_HEX, 24), _chars(_ALNUM, 20))),
    ),
    ("crates_io_token", "cio" + _chars(_ALNUM, 29) + "Xy7"),
    ("elevenlabs_api_key", "sk_" + _chars(_HEX, 48)),
    ("tavily_api_key", "tvly-dev-" + _chars(_ALNUM, 32)),
    ("tavily_api_key", "tvly-" + _chars(_ALNUM, 32)),
    ("linear_api_key", "lin_oauth_" + _chars(_HEX, 64)),
    ("slack_token", "xoxe.xoxb-1-" + _chars(_UPPER_DIGITS, 164)),
    ("new_relic_key", "NRII-" + _chars(_URLSAFE, 32)),
    ("hubspot_token", "pat-eu1-" + _uuid()),
    ("intercom_token", "dG9rOj" + _chars(_BASE64, 54) + "="),
    ("posthog_api_key", "phx_" + _chars(_ALNUM, 47)),
    ("honeycomb_api_key", "hcaik_01" + _chars(_LOWER_DIGITS, 56)),
    ("axiom_token", "xapt-" + _uuid()),
    ("clickup_token", "pk_" + _chars(string.digits, 8) + "_" + _chars(_UPPER_DIGITS, 32)),
    ("flutterwave_key", "FLWSECK_TEST" + _chars(_HEX, 12)),
    (
        "paddle_api_key",
        "pdl_sdbx_apikey_"
        + "_".join((_chars(_LOWER_DIGITS, 26), _chars(_ALNUM, 22), _chars(_ALNUM, 3))),
    ),
    ("facebook_access_token", "EAAJ" + _chars(_ALNUM, 190)),
    ("google_oauth_refresh_token", "1//0g" + _chars(_URLSAFE, 98)),
    ("clickhouse_api_key", "4b1d" + _chars(_ALNUM, 36) + "Zq"),
    ("maxmind_license_key", _chars(_ALNUM, 6) + "_" + _chars(_ALNUM, 29) + "_mmk"),
    ("openshift_token", "sha256~" + _chars(_URLSAFE, 43)),
    ("salesforce_access_token", "00D" + _chars(_ALNUM, 15) + "!AQ" + _chars(_ALNUM + "._", 96)),
    ("salesforce_access_token", "00D" + _chars(_ALNUM, 12) + "!AQ" + _chars(_ALNUM + "._", 96)),
    # a Notion secret copied by hand a character short or long, an access key id with digits
    # base32 has not (as people make one up for a test)
    ("notion_token", "secret_Lm7vQ2xR9pWz4TcNb8Yk1Hd6Fg0Js5UaOe3Rq7Lt2V"),
    ("notion_token", "secret_Lm7vQ2xR9pWz4TcNb8Yk1Hd6Fg0Js5UaOe3Rq7Lt2Vx9"),
    ("aws_access_key_id", "AKIAQW3RTZ7LMP9XK2VN"),
]

# Where nothing names the token, the whole of it goes and nothing else.
_BARE = (
    "here's the token I used yesterday {v} -- can you check why the call fails?",
    "curl -sS -H 'X-Client: {v}' https://api.example.com/v1/items | jq .",
    "tried `{v}` again and still get a 401",
)
# Where a setting names it, the value goes (under whichever rule's name).
_NAMED = ("export SERVICE_TOKEN={v}", '{{"service_token": "{v}", "region": "us-east-1"}}')


@pytest.mark.parametrize(("kind", "token"), TOKENS, ids=[kind for kind, _ in TOKENS])
@pytest.mark.parametrize("shape", _BARE)
def test_a_vendor_token_pasted_bare_is_redacted_whole(kind: str, token: str, shape: str) -> None:
    text = shape.format(v=token)
    assert redact(text) == shape.format(v=f"[REDACTED:{kind}]")


@pytest.mark.parametrize(("kind", "token"), TOKENS, ids=[kind for kind, _ in TOKENS])
@pytest.mark.parametrize("shape", _NAMED)
def test_a_vendor_token_in_a_setting_is_redacted(kind: str, token: str, shape: str) -> None:
    text = shape.format(v=token)
    redacted = redact(text)
    assert token not in redacted
    assert redacted.startswith(text[:10])


def test_a_sentry_dsn_loses_its_key_and_keeps_its_host() -> None:
    key = _chars(_HEX, 32)
    for dsn in (
        f"https://{key}@o4506123.ingest.sentry.io/4506123456789",
        f"https://{key}@o4506123.ingest.us.sentry.io/4506123456789",
        f"https://{key}@sentry.internal.example.com:9000/42",
        f"https://{key}@sentry.example.com/prefix/42",
    ):
        for shape in ("SENTRY_DSN={v}", 'Sentry.init({{ dsn: "{v}" }})', "dsn is {v}, fine"):
            text = shape.format(v=dsn)
            assert redact(text) == text.replace(key, "[REDACTED:sentry_dsn]")


def test_a_telegram_token_glued_to_bot_in_an_api_url_is_redacted() -> None:
    token = "6123456789:AA" + _chars(_URLSAFE, 33)
    for text in (
        f"telegram bot url https://api.telegram.org/bot{token}/sendMessage, post there",
        f"curl -s https://api.telegram.org/bot{token}/getUpdates | jq .",
    ):
        redacted = redact(text)
        assert token not in redacted
        assert "https://api.telegram.org/bot[REDACTED:telegram_bot_token]" in redacted
    # a word glued to the digits is still no token's start, nor is a longer number
    for text in (
        "robot6123456789:AA" + _chars(_URLSAFE, 33),
        "/bot612345678901:AA" + _chars(_URLSAFE, 33),
    ):
        assert redact(text) == text


def test_a_teams_webhook_loses_what_lets_anyone_post() -> None:
    hook = _chars(_HEX, 32) + "/" + _uuid()
    url = f"https://acme.webhook.office.com/webhookb2/{_uuid()}@{_uuid()}/IncomingWebhook/{hook}"
    text = f"curl -H 'Content-Type: application/json' -d '{{\"text\": \"hi\"}}' {url}"
    assert redact(text) == text.replace(hook, "[REDACTED:teams_webhook]")
    v2 = url + "/V2" + _chars(_URLSAFE, 40)
    assert "IncomingWebhook/[REDACTED:teams_webhook]" in redact(f"webhook: {v2}")


@pytest.mark.parametrize(
    "text",
    [
        # the prefixes named in prose and docs
        "GitLab tokens start with glpat-, glagent- or gloas-; runner ones with glrt-",
        "the AWS session token (IQoJb3JpZ2luX2Vj...) expires after an hour",
        "SonarQube user tokens begin with squ_ and project ones with sqp_",
        "set SUPABASE_SECRET_KEY to the sb_secret_... key, never the sb_publishable_ one",
        "run `oc whoami -t` to print your sha256~ token",
        "1Password Secret Keys look like A3-XXXXXX-XXXXXX-XXXXX-XXXXX-XXXXX-XXXXX",
        "vcp_ tokens are Vercel's, nfp_ ones Netlify's, phx_ PostHog's, tvly- Tavily's",
        "tvly-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx is the placeholder in the docs",
        "pat-na1-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
        "EAAG is how a Graph API token starts; EAAGxxxxxxxx marks a redacted one",
        "the intra secret starts with s-s4t2ud- or s-s4t2af-",
        "the sentry dsn looks like https://<key>@o0.ingest.sentry.io/<project>",
        "page 1//0 of the report, then the 2nd chapter",
        "NRII- keys insert events; NRJS- ones are the browser agent's",
        "sk_live_... and sk_test_... are Stripe's, sk_ alone is ElevenLabs'",
        # hashes, digests, UUIDs and ids next to the same words
        "image: registry.example.com/app@sha256:" + "5" + _chars(_HEX, 63),
        "sha256~ is not sha256: " + _chars(_HEX, 64),
        "commit 4b1d" + _chars(_HEX, 36),
        "the build id is 4b1d" + _chars(_HEX, 38),
        "squ_ " + _chars(_HEX, 40),
        "hubspot portal " + _uuid() + " (pat-na1 region)",
        "axiom dataset xaat " + _uuid(),
        "sk_" + "a" * 48,
        "sk_" + "_".join(("user", "session", "cache", "key", "for", "the", "api")),
        "cioSessionHandlerFactoryBuilderImpl and cio_client are names",
        "read https://" + _chars(_HEX, 32) + "@example.com/docs for the details",
        "git clone https://" + _chars(_HEX, 32) + "@github.com/acme/app.git",
        "sb_secret_key_for_the_service_role is the setting's name",
        "gitlab_agent_token: glagent-name-of-the-agent-config",
        "AKIDS are the Tencent ids; AKID alone is too short",
        "secret_ManagerClientFactoryBuilderProviderImplementation is a class",
        "secret_" + "a1" * 21 + " is all small letters and digits",
        "AKIA" + "X" * 15 + " is a short id",
        # base64 that merely starts with a token's letters
        "data:application/octet-stream;base64,EAAB"
        + _chars(_BASE64, 40)
        + "+/"
        + _chars(_BASE64, 40),
        "salesforce org 00D5g000004ABCD!",
        "Maxmind license key: YOUR_LICENSE_KEY_mmk",
    ],
)
def test_prefixes_in_prose_placeholders_and_hashes_stay(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == text


def _tunnel_token() -> str:
    document = {
        "a": _chars(_HEX, 32),
        "t": _uuid(),
        "s": base64.b64encode(_RANDOM.randbytes(32)).decode(),
    }
    return base64.b64encode(json.dumps(document, separators=(",", ":")).encode()).decode()


def _compact_base64(document: dict[str, object]) -> str:
    return base64.b64encode(json.dumps(document, separators=(",", ":")).encode()).decode()


@pytest.mark.parametrize(
    "text",
    [
        # SHA-512 digests printed in capitals (Get-FileHash, certutil) that start EAAB..EAAF
        "Algorithm : SHA512\nHash      : EAAB"
        + _chars(_HEX, 124).upper()
        + "\nPath      : C:\\a.zip",
        "certutil -hashfile app.zip SHA512\nSHA512 hash of app.zip:\nEAAF"
        + _chars(_HEX, 124).upper()
        + "\nCertUtil: -hashfile command completed successfully.",
        # base64 of compact JSON whose first key is "a": a test's fixture, a cursor
        "expect(btoa(JSON.stringify(state))).toBe('"
        + _compact_base64(
            {"a": "hello world", "b": [1, 2, 3], "c": {"nested": True, "n": "x" * 30}}
        )
        + "')",
        "next_cursor="
        + _compact_base64(
            {
                "a": "after",
                "id": 123456789,
                "sort": "created_at",
                "filter": "state:open author:me label:bug",
            }
        )
        + "&limit=50",
        # placeholders with a key no one was given
        "Sentry.init({ dsn: 'https://00000000000000000000000000000000@o0.ingest.sentry.io/0' })",
        "SENTRY_DSN=https://ffffffffffffffffffffffffffffffff@sentry.example.com/1",
        "sid=00D5g000004XyZa!AQ" + "x" * 80,
    ],
)
def test_digests_fixtures_and_placeholders_sharing_a_head_stay(text: str) -> None:
    assert find_secrets(text) == []


def test_a_tunnel_token_and_a_graph_token_with_a_digest_like_start_are_still_redacted() -> None:
    tunnel = _tunnel_token()
    assert redact(f"cloudflared tunnel run --token {tunnel}") == (
        "cloudflared tunnel run --token [REDACTED:cloudflare_tunnel_token]"
    )
    graph = "EAAB" + "9F3C" + _chars(_ALNUM, 120)
    assert redact(f"access_token={graph}") != f"access_token={graph}"
    assert graph not in redact(f"the token is {graph} ok")


# Formats with no prefix of their own (an Azure DevOps PAT is 52 characters of base32) go when
# a setting names them by the short name for a personal access token.
_PAT = _chars(string.ascii_lowercase + "234567", 52)


@pytest.mark.parametrize(
    "text",
    [
        f"AZURE_DEVOPS_PAT={_PAT}",
        f"export AZURE_DEVOPS_EXT_PAT={_PAT}",
        f'GITHUB_PAT: "{_PAT}"',
        f'gitlab_pat = "{_PAT}"',
        f'{{"ado_pat": "{_PAT}"}}',
    ],
)
def test_a_value_set_to_a_pat_name_is_redacted(text: str) -> None:
    assert redact(text) == text.replace(_PAT, "[REDACTED:credential_assignment]")


@pytest.mark.parametrize(
    "text",
    [
        "PATH=/usr/local/bin:/usr/bin",
        'xpath=//div[@id="main"]',
        f"compat={_PAT}",
        f"spat={_PAT}",
        'pattern = r"[a-z0-9]{52}"',
        "pat: $(System.AccessToken)",
        "PAT=<your personal access token>",
        "GITHUB_PAT=changeme",
        "PAT_EXPIRY=2025-01-01",
        "pat_scope = repo,read:org",
        "AZURE_DEVOPS_PAT=${{ secrets.AZURE_DEVOPS_PAT }}",
    ],
)
def test_pat_names_without_a_generated_value_stay(text: str) -> None:
    assert find_secrets(text) == []


@pytest.mark.parametrize(
    "text",
    [
        '_INIT_FACTORY_PAT = "__attr_factory_%s"',
        "_editable_fname_finder_py_pat = '__editable___*_*finder.py'",
        'DATE_PAT = r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})"',
        "url_pat = 'https://example.com/v2/items/{item_id}/parts'",
    ],
)
def test_patterns_named_pat_in_code_stay(text: str) -> None:
    assert find_secrets(text) == []


def _jwt() -> str:
    def part(document: dict[str, str]) -> str:
        encoded = base64.urlsafe_b64encode(json.dumps(document).encode()).decode()
        return encoded.rstrip("=")

    header = part({"alg": "RS256", "kid": _chars(_URLSAFE, 20)})
    claims = part({"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:ci:deploy"})
    return f"{header}.{claims}.{_chars(_URLSAFE, 86)}"


@pytest.mark.parametrize("newline", ["", "\n"])
@pytest.mark.parametrize(
    "shape",
    [
        "apiVersion: v1\nkind: Secret\ndata:\n  sa: {v}\n  namespace: Y2k=\n",
        "here's the encoded one {v} from the pipeline",
        '{{"deployToken": "{v}"}}',
    ],
)
def test_a_jwt_encoded_again_in_base64_is_redacted(shape: str, newline: str) -> None:
    encoded = base64.b64encode((_jwt() + newline).encode()).decode()
    text = shape.format(v=encoded)
    assert redact(text) == shape.format(v="[REDACTED:jwt]")


@pytest.mark.parametrize(
    "document",
    [
        {"a": 1, "name": "a config, not a token", "padding": "x" * 40},
        {"alg": "none", "note": "a header alone, no claims nor signature"},
    ],
)
def test_base64_of_other_base64_json_stays(document: dict[str, object]) -> None:
    inner = base64.urlsafe_b64encode(json.dumps(document).encode()).decode()
    text = "payload: " + base64.b64encode(inner.encode()).decode()
    assert text.startswith("payload: ZXlK")
    assert find_secrets(text) == []
