"""Build the secret-detection corpora from a fixed seed.

Every value is fake: random characters with the right prefix, length and alphabet.
Run `python tests/corpus/make_corpus.py` to rewrite secrets.jsonl and lookalikes.jsonl;
the tests check that the checked-in files equal what this script produces.
Each line is a JSON object: {"rule", "secret", "text"} for secrets and {"kind", "text"}
for look-alikes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable
from pathlib import Path

SEED = 20240611
HERE = Path(__file__).parent
UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
BASE32 = UPPER + "234567"
BASE64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


class Corpus:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.secrets: list[dict[str, str]] = []
        self.lookalikes: list[dict[str, str]] = []

    def chars(self, alphabet: str, count: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(count))

    def mixed(self, alphabet: str, count: int) -> str:
        # random but guaranteed to mix letters and digits, like real generated keys
        while True:
            value = self.chars(alphabet, count)
            if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
                return value

    def secret(self, rule: str, value: str, text: str) -> None:
        assert value in text
        self.secrets.append({"rule": rule, "secret": value, "text": text})

    def lookalike(self, kind: str, text: str) -> None:
        self.lookalikes.append({"kind": kind, "text": text})


# Surroundings for a bare token: env files, shell, JSON, YAML, chat, code, logs.
CONTEXTS: tuple[str, ...] = (
    "{v}",
    "export {name}={v}",
    '{name}="{v}"',
    '{{"{lname}": "{v}", "region": "us-east-1"}}',
    "{lname}: {v}\nretries: 3",
    "here is the key I used yesterday: {v} -- can you check why the call fails?",
    "curl -sS https://api.example.com/v1/items -H 'X-Api-Key: {v}' | jq .",
    "settings = {{'{lname}': '{v}', 'debug': False}}",
    "2024-05-01T12:00:03Z INFO loaded credentials ({v}) from the keychain",
    "docker run -e {name}={v} ghcr.io/acme/worker:1.4.2",
    "| {lname} | `{v}` | production |",
    "<value>{v}</value>",
)


def in_context(corpus: Corpus, rule: str, value: str, name: str) -> None:
    template = corpus.rng.choice(CONTEXTS)
    corpus.secret(rule, value, template.format(v=value, name=name, lname=name.lower()))


def token_rules(corpus: Corpus) -> list[tuple[str, str, Callable[[], str]]]:
    c = corpus
    return [
        (
            "aws_access_key_id",
            "AWS_ACCESS_KEY_ID",
            lambda: c.rng.choice(["AKIA", "ASIA"]) + c.chars(BASE32, 16),
        ),
        ("gcp_api_key", "GOOGLE_API_KEY", lambda: "AIza" + c.chars(URLSAFE, 35)),
        (
            "github_token",
            "GITHUB_TOKEN",
            lambda: "gh" + c.rng.choice("pousr") + "_" + c.mixed(ALNUM, 36),
        ),
        (
            "github_token",
            "GH_PAT",
            lambda: "github_pat_" + c.mixed(ALNUM, 22) + "_" + c.mixed(ALNUM, 59),
        ),
        ("gitlab_token", "GITLAB_TOKEN", lambda: "glpat-" + c.mixed(URLSAFE, 20)),
        ("bitbucket_token", "BITBUCKET_APP_PASSWORD", lambda: "ATBB" + c.mixed(ALNUM, 32)),
        ("bitbucket_token", "ATLASSIAN_TOKEN", lambda: "ATATT3xFfGF0" + c.mixed(URLSAFE, 180)),
        (
            "slack_token",
            "SLACK_BOT_TOKEN",
            lambda: (
                c.rng.choice(["xoxb-", "xoxp-"])
                + c.chars(DIGITS, 12)
                + "-"
                + c.chars(DIGITS, 13)
                + "-"
                + c.mixed(ALNUM, 24)
            ),
        ),
        (
            "slack_token",
            "SLACK_APP_TOKEN",
            lambda: (
                "xapp-1-A"
                + c.chars(UPPER + DIGITS, 10)
                + "-"
                + c.chars(DIGITS, 13)
                + "-"
                + c.chars(HEX, 64)
            ),
        ),
        (
            "slack_webhook",
            "SLACK_WEBHOOK_URL",
            lambda: (
                "https://hooks.slack.com/services/T"
                + c.chars(UPPER + DIGITS, 8)
                + "/B"
                + c.chars(UPPER + DIGITS, 10)
                + "/"
                + c.mixed(ALNUM, 24)
            ),
        ),
        (
            "discord_webhook",
            "DISCORD_WEBHOOK",
            lambda: (
                "https://discord.com/api/webhooks/"
                + c.chars(DIGITS, 18)
                + "/"
                + c.mixed(URLSAFE, 68)
            ),
        ),
        ("discord_bot_token", "DISCORD_BOT", lambda: discord_bot_token(c)),
        (
            "telegram_bot_token",
            "TELEGRAM_BOT",
            lambda: c.chars(DIGITS, 10) + ":AA" + c.mixed(URLSAFE, 33),
        ),
        ("openai_api_key", "OPENAI_API_KEY", lambda: "sk-proj-" + c.mixed(URLSAFE, 156)),
        (
            "openai_api_key",
            "OPENAI_KEY",
            lambda: "sk-" + c.mixed(ALNUM, 20) + "T3BlbkFJ" + c.mixed(ALNUM, 20),
        ),
        (
            "anthropic_api_key",
            "ANTHROPIC_API_KEY",
            lambda: "sk-ant-api03-" + c.mixed(URLSAFE, 93) + "AA",
        ),
        (
            "stripe_secret_key",
            "STRIPE_SECRET_KEY",
            lambda: c.rng.choice(["sk_live_", "rk_live_", "sk_test_"]) + c.mixed(ALNUM, 99),
        ),
        ("stripe_secret_key", "STRIPE_WEBHOOK_SECRET", lambda: "whsec_" + c.mixed(ALNUM, 32)),
        ("twilio_api_key", "TWILIO_API_KEY", lambda: "SK" + c.mixed(HEX, 32)),
        ("twilio_account_sid", "TWILIO_ACCOUNT_SID", lambda: "AC" + c.mixed(HEX, 32)),
        (
            "sendgrid_api_key",
            "SENDGRID_API_KEY",
            lambda: "SG." + c.mixed(URLSAFE, 22) + "." + c.mixed(URLSAFE, 43),
        ),
        ("mailgun_api_key", "MAILGUN_API_KEY", lambda: "key-" + c.mixed(HEX, 32)),
        ("npm_token", "NPM_TOKEN", lambda: "npm_" + c.mixed(ALNUM, 36)),
        ("pypi_token", "PYPI_TOKEN", lambda: "pypi-AgEIcHlwaS5vcmc" + c.mixed(URLSAFE, 120)),
        ("huggingface_token", "HF_TOKEN", lambda: "hf_" + c.mixed(ALNUM, 34)),
        ("shopify_token", "SHOPIFY_ACCESS_TOKEN", lambda: "shpat_" + c.mixed(HEX, 32)),
        ("square_token", "SQUARE_TOKEN", lambda: "sq0atp-" + c.mixed(URLSAFE, 22)),
        ("square_token", "SQUARE_ACCESS_TOKEN", lambda: "EAAA" + c.mixed(URLSAFE, 60)),
        ("digitalocean_token", "DIGITALOCEAN_TOKEN", lambda: "dop_v1_" + c.mixed(HEX, 64)),
        ("heroku_api_key", "HEROKU_API_KEY", lambda: "HRKU-AA" + c.mixed(URLSAFE, 58)),
        ("doppler_token", "DOPPLER_TOKEN", lambda: "dp.pt." + c.mixed(ALNUM, 43)),
        ("jwt", "ID_TOKEN", lambda: jwt(c)),
        *more_token_rules(c),
    ]


def more_token_rules(c: Corpus) -> list[tuple[str, str, Callable[[], str]]]:
    bech32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
    upper_digits = UPPER + DIGITS
    lower_digits = LOWER + DIGITS
    return [
        ("age_secret_key", "AGE_KEY", lambda: "AGE-SECRET-KEY-1" + c.chars(bech32, 58)),
        ("vault_token", "VAULT_TOKEN", lambda: "hvs." + c.mixed(URLSAFE, 91)),
        ("vault_token", "VAULT_BATCH_TOKEN", lambda: "hvb." + c.mixed(URLSAFE, 138)),
        ("databricks_token", "DATABRICKS_TOKEN", lambda: "dapi" + c.mixed(HEX, 32)),
        ("sentry_token", "SENTRY_AUTH_TOKEN", lambda: "sntryu_" + c.mixed(HEX, 64)),
        (
            "sentry_token",
            "SENTRY_ORG_TOKEN",
            lambda: "sntrys_eyJpYXQiOjE3" + c.mixed(ALNUM, 120) + "_" + c.mixed(ALNUM, 43),
        ),
        ("linear_api_key", "LINEAR_API_KEY", lambda: "lin_api_" + c.mixed(ALNUM, 40)),
        (
            "grafana_token",
            "GRAFANA_SA_TOKEN",
            lambda: "glsa_" + c.mixed(ALNUM, 32) + "_" + c.mixed(HEX, 8),
        ),
        ("grafana_token", "GRAFANA_CLOUD_TOKEN", lambda: "glc_" + c.mixed(ALNUM + "+/", 120)),
        ("grafana_token", "GRAFANA_API_KEY", lambda: "eyJrIjoi" + c.mixed(ALNUM, 70)),
        ("pulumi_token", "PULUMI_ACCESS_TOKEN", lambda: "pul-" + c.mixed(HEX, 40)),
        (
            "postman_api_key",
            "POSTMAN_API_KEY",
            lambda: "PMAK-" + c.mixed(HEX, 24) + "-" + c.mixed(HEX, 34),
        ),
        ("rubygems_api_key", "GEM_HOST_API_KEY", lambda: "rubygems_" + c.mixed(HEX, 48)),
        (
            "notion_token",
            "NOTION_TOKEN",
            lambda: "ntn_" + c.chars(DIGITS, 11) + c.mixed(ALNUM, 35),
        ),
        ("notion_token", "NOTION_API_KEY", lambda: "secret_" + c.mixed(ALNUM, 43)),
        (
            "google_oauth_client_secret",
            "GOOGLE_CLIENT_SECRET",
            lambda: "GOCSPX-" + c.mixed(URLSAFE, 28),
        ),
        (
            "google_oauth_access_token",
            "GOOGLE_ACCESS_TOKEN",
            lambda: "ya29.a0" + c.mixed(URLSAFE, 150),
        ),
        ("alibaba_access_key_id", "ALIBABA_ACCESS_KEY_ID", lambda: "LTAI" + c.mixed(ALNUM, 20)),
        (
            "cloudflare_origin_ca_key",
            "CF_ORIGIN_CA_KEY",
            lambda: "v1.0-" + c.mixed(HEX, 24) + "-" + c.mixed(HEX, 146),
        ),
        (
            "dynatrace_token",
            "DT_API_TOKEN",
            lambda: "dt0c01." + c.mixed(upper_digits, 24) + "." + c.mixed(upper_digits, 64),
        ),
        ("fly_io_token", "FLY_API_TOKEN", lambda: "fo1_" + c.mixed(URLSAFE, 43)),
        ("fly_io_token", "FLY_DEPLOY_TOKEN", lambda: "fm2_" + c.mixed(BASE64, 180)),
        ("render_api_key", "RENDER_API_KEY", lambda: "rnd_" + c.mixed(ALNUM, 32)),
        ("supabase_token", "SUPABASE_ACCESS_TOKEN", lambda: "sbp_" + c.mixed(HEX, 40)),
        ("neon_api_key", "NEON_API_KEY", lambda: "napi_" + c.mixed(lower_digits, 64)),
        ("planetscale_token", "PLANETSCALE_TOKEN", lambda: "pscale_tkn_" + c.mixed(URLSAFE, 43)),
        ("scalingo_token", "SCALINGO_API_TOKEN", lambda: "tk-us-" + c.mixed(URLSAFE, 48)),
        (
            "terraform_cloud_token",
            "TFE_TOKEN",
            lambda: c.mixed(ALNUM, 14) + ".atlasv1." + c.mixed(URLSAFE, 67),
        ),
        (
            "onepassword_token",
            "OP_SERVICE_ACCOUNT_TOKEN",
            lambda: "ops_eyJ" + c.mixed(ALNUM + "+/", 300),
        ),
        (
            "tailscale_key",
            "TS_AUTHKEY",
            lambda: "tskey-auth-k" + c.mixed(ALNUM, 11) + "CNTRL-" + c.mixed(ALNUM, 33),
        ),
        (
            "sourcegraph_token",
            "SRC_ACCESS_TOKEN",
            lambda: "sgp_" + c.mixed(HEX, 16) + "_" + c.mixed(HEX, 40),
        ),
        ("buildkite_token", "BUILDKITE_API_TOKEN", lambda: "bkua_" + c.mixed(HEX, 40)),
        (
            "circleci_token",
            "CIRCLE_TOKEN",
            lambda: "CCIPAT_" + c.mixed(ALNUM, 22) + "_" + c.mixed(HEX, 40),
        ),
        ("docker_hub_token", "DOCKERHUB_TOKEN", lambda: "dckr_pat_" + c.mixed(URLSAFE, 27)),
        ("jfrog_token", "JFROG_API_KEY", lambda: "AKCp" + c.mixed(ALNUM, 69)),
        (
            "harness_token",
            "HARNESS_PAT",
            lambda: (
                "pat." + c.mixed(URLSAFE, 22) + "." + c.mixed(HEX, 24) + "." + c.mixed(ALNUM, 20)
            ),
        ),
        (
            "airtable_token",
            "AIRTABLE_PAT",
            lambda: "pat" + c.mixed(ALNUM, 14) + "." + c.mixed(HEX, 64),
        ),
        ("octopus_deploy_api_key", "OCTOPUS_API_KEY", lambda: "API-" + c.mixed(upper_digits, 26)),
        ("nuget_api_key", "NUGET_API_KEY", lambda: "oy2" + c.mixed(lower_digits, 43)),
        ("clojars_token", "CLOJARS_PASSWORD", lambda: "CLOJARS_" + c.mixed(lower_digits, 60)),
        ("deno_deploy_token", "DENO_DEPLOY_TOKEN", lambda: "ddp_" + c.mixed(ALNUM, 36)),
        ("prefect_api_key", "PREFECT_API_KEY", lambda: "pnu_" + c.mixed(ALNUM, 36)),
        ("readme_api_key", "README_API_KEY", lambda: "rdme_" + c.mixed(lower_digits, 70)),
        ("infracost_api_key", "INFRACOST_API_KEY", lambda: "ico-" + c.mixed(ALNUM, 32)),
        ("openrouter_api_key", "OPENROUTER_API_KEY", lambda: "sk-or-v1-" + c.mixed(HEX, 64)),
        ("groq_api_key", "GROQ_API_KEY", lambda: "gsk_" + c.mixed(ALNUM, 52)),
        ("xai_api_key", "XAI_API_KEY", lambda: "xai-" + c.mixed(ALNUM, 80)),
        ("perplexity_api_key", "PERPLEXITY_API_KEY", lambda: "pplx-" + c.mixed(ALNUM, 48)),
        ("replicate_token", "REPLICATE_API_TOKEN", lambda: "r8_" + c.mixed(ALNUM, 37)),
        (
            "langsmith_api_key",
            "LANGSMITH_API_KEY",
            lambda: "lsv2_pt_" + c.mixed(HEX, 32) + "_" + c.mixed(HEX, 10),
        ),
        (
            "pinecone_api_key",
            "PINECONE_API_KEY",
            lambda: "pcsk_" + c.mixed(ALNUM, 6) + "_" + c.mixed(ALNUM, 63),
        ),
        ("huggingface_token", "HF_ORG_TOKEN", lambda: "api_org_" + c.mixed(ALNUM, 34)),
        (
            "mailchimp_api_key",
            "MAILCHIMP_API_KEY",
            lambda: c.mixed(HEX, 32) + "-us" + str(c.rng.randint(1, 21)),
        ),
        (
            "brevo_api_key",
            "BREVO_API_KEY",
            lambda: "xkeysib-" + c.mixed(HEX, 64) + "-" + c.mixed(ALNUM, 16),
        ),
        (
            "resend_api_key",
            "RESEND_API_KEY",
            lambda: "re_" + c.mixed(ALNUM, 8) + "_" + c.mixed(ALNUM, 24),
        ),
        ("figma_token", "FIGMA_TOKEN", lambda: "figd_" + c.mixed(URLSAFE, 40)),
        ("typeform_token", "TYPEFORM_TOKEN", lambda: "tfp_" + c.mixed(ALNUM, 59)),
        (
            "contentful_token",
            "CONTENTFUL_MANAGEMENT_TOKEN",
            lambda: "CFPAT-" + c.mixed(URLSAFE, 43),
        ),
        ("dropbox_token", "DROPBOX_TOKEN", lambda: "sl.u." + c.mixed(URLSAFE, 150)),
        ("frameio_token", "FRAMEIO_TOKEN", lambda: "fio-u-" + c.mixed(URLSAFE, 64)),
        ("new_relic_key", "NEW_RELIC_API_KEY", lambda: "NRAK-" + c.mixed(upper_digits, 27)),
        (
            "mapbox_secret_token",
            "MAPBOX_SECRET_TOKEN",
            lambda: "sk.eyJ1Ijoi" + c.mixed(ALNUM, 60) + "." + c.mixed(URLSAFE, 22),
        ),
        ("adobe_client_secret", "ADOBE_CLIENT_SECRET", lambda: "p8e-" + c.mixed(ALNUM, 32)),
        ("shippo_token", "SHIPPO_API_TOKEN", lambda: "shippo_live_" + c.mixed(HEX, 40)),
        ("duffel_token", "DUFFEL_ACCESS_TOKEN", lambda: "duffel_test_" + c.mixed(URLSAFE, 43)),
        ("easypost_api_key", "EASYPOST_API_KEY", lambda: "EZAK" + c.mixed(ALNUM, 54)),
        (
            "flutterwave_key",
            "FLW_SECRET_KEY",
            lambda: "FLWSECK_TEST-" + c.mixed(HEX, 32) + "-X",
        ),
        (
            "plaid_access_token",
            "PLAID_ACCESS_TOKEN",
            lambda: "access-sandbox-" + str(uuid.UUID(int=c.rng.getrandbits(128), version=4)),
        ),
        (
            "azure_ad_client_secret",
            "AZURE_CLIENT_SECRET",
            lambda: (
                c.mixed(ALNUM, 3) + str(c.rng.randint(0, 9)) + "Q~" + c.mixed(ALNUM + "_~.-", 34)
            ),
        ),
        ("gitlab_token", "GITLAB_RUNNER_TOKEN", lambda: "glrt-" + c.mixed(URLSAFE, 20)),
        ("gitlab_token", "CI_REGISTRATION_TOKEN", lambda: "GR1348941" + c.mixed(URLSAFE, 20)),
    ]


def discord_bot_token(c: Corpus) -> str:
    user_id = base64.b64encode(c.chars(DIGITS, 18).encode()).decode()
    return user_id + "." + c.mixed(URLSAFE, 6) + "." + c.mixed(URLSAFE, 38)


def jwt(c: Corpus) -> str:
    def segment(document: dict[str, object]) -> str:
        raw = json.dumps(document, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    header = segment({"alg": "HS256", "typ": "JWT"})
    payload = segment({"sub": c.chars(DIGITS, 10), "name": c.chars(LOWER, 6), "iat": 1700000000})
    return f"{header}.{payload}.{c.mixed(URLSAFE, 43)}"


def pem_body(c: Corpus, lines: int, escaped: bool = False) -> str:
    separator = "\\n" if escaped else "\n"
    return separator.join(c.mixed(BASE64, 64) for _ in range(lines))


def add_private_keys(c: Corpus) -> None:
    for label in (
        "RSA PRIVATE KEY",
        "PRIVATE KEY",
        "EC PRIVATE KEY",
        "DSA PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
    ):
        for _ in range(3):
            body = pem_body(c, c.rng.randint(3, 12))
            block = f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"
            text = c.rng.choice(
                [
                    "{b}\n",
                    "$ cat ~/.ssh/id_deploy\n{b}\n$ ssh-add ~/.ssh/id_deploy",
                    "I pasted the key below, is the format right?\n\n{b}\n\nthanks",
                    "```\n{b}\n```",
                ]
            ).format(b=block)
            c.secret("private_key_block", body.splitlines()[0], text)
    for _ in range(4):
        body = pem_body(c, 6)
        label = "PGP PRIVATE KEY BLOCK"
        block = f"-----BEGIN {label}-----\n\n{body}\n=Ab3d\n-----END {label}-----"
        c.secret(
            "private_key_block", body.splitlines()[-1], f"gpg --export-secret-keys -a me\n{block}\n"
        )
    for _ in range(6):  # service-account JSON keeps the key on one line with escaped newlines
        body = pem_body(c, 8, escaped=True)
        key = f"-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----\\n"
        document = (
            '{\n  "type": "service_account",\n  "project_id": "acme-prod-4711",\n'
            f'  "private_key_id": "{c.chars(HEX, 40)}",\n  "private_key": "{key}",\n'
            f'  "client_email": "deployer@acme-prod-4711.iam.gserviceaccount.com"\n}}'
        )
        c.secret("private_key_block", body.split("\\n")[3], document)
    for _ in range(3):  # cut off mid-block, as a bounded source can be
        body = pem_body(c, 5)
        c.secret(
            "private_key_block", body.splitlines()[2], f"-----BEGIN RSA PRIVATE KEY-----\n{body}"
        )


def add_assignments(c: Corpus) -> None:
    names = (
        "DB_PASSWORD",
        "password",
        "POSTGRES_PASSWORD",
        "api_key",
        "apiKey",
        "client_secret",
        "SECRET_KEY",
        "auth_token",
        "accessToken",
        "refresh_token",
        "secret",
        "passwd",
        "SMTP_PASS" + "WORD",
        "x-api-key",
        "encryption_key",
        "credentials",
        "private_key",
        "token",
    )
    shapes = (
        "{n}={v}",
        '{n} = "{v}"',
        "{n}: {v}",
        '"{n}": "{v}",',
        "export {n}='{v}'",
        "const {n} = '{v}';",
        '  {n}: "{v}"',
        '[database]\n{n} = "{v}"\nport = 5432',
    )
    for index in range(36):
        name = names[index % len(names)]
        alphabet = c.rng.choice([ALNUM, ALNUM + "!@#%^&*-_", HEX, BASE64])
        value = c.mixed(alphabet, c.rng.randint(16, 48))
        c.secret("credential_assignment", value, c.rng.choice(shapes).format(n=name, v=value))
    for _ in range(6):
        value = c.mixed(BASE64, 40)
        shape = c.rng.choice(
            [
                "aws_secret_access_key = {v}",
                "AWS_SECRET_ACCESS_KEY={v}",
                '"SecretAccessKey": "{v}"',
            ]
        )
        c.secret("aws_secret_access_key", value, "[default]\n" + shape.format(v=value) + "\n")
    for _ in range(5):
        value = c.mixed(BASE64, 86) + "=="
        account = c.chars(LOWER, 10)
        text = (
            f"DefaultEndpointsProtocol=https;AccountName={account};AccountKey={value};"
            "EndpointSuffix=core.windows.net"
        )
        c.secret("azure_storage_key", value, text)
    for _ in range(2):
        value = c.mixed(BASE64, 43) + "="
        text = f"Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={value}"
        c.secret("azure_storage_key", value, text)


def add_urls_and_headers(c: Corpus) -> None:
    schemes = ("postgres", "postgresql", "mysql", "redis", "amqp", "mongodb+srv", "https", "ftp")
    for _ in range(14):
        password = c.mixed(ALNUM + "-_.~", c.rng.randint(10, 28))
        user = c.chars(LOWER, 6)
        url = (
            f"{c.rng.choice(schemes)}://{user}:{password}@db-{c.chars(LOWER, 4)}.internal:5432/app"
        )
        text = c.rng.choice(["DATABASE_URL={u}", "connect with `{u}` from the runner", "url: {u}"])
        c.secret("url_credentials", password, text.format(u=url))
    for _ in range(8):
        value = c.mixed(URLSAFE + ".~", c.rng.randint(24, 64))
        text = c.rng.choice(
            [
                'curl -H "Authorization: Bearer {v}" https://api.example.com/me',
                "Authorization: Bearer {v}",
                "requests.get(url, headers={{'Authorization': 'Bearer {v}'}})",
            ]
        )
        c.secret("authorization_header", value, text.format(v=value))
    for _ in range(4):
        value = base64.b64encode(f"{c.chars(LOWER, 6)}:{c.mixed(ALNUM, 14)}".encode()).decode()
        c.secret("authorization_header", value, f"Authorization: Basic {value}\nAccept: */*")


def build_secrets(c: Corpus) -> None:
    rules = token_rules(c)
    for rule, name, make in rules:
        for _ in range(5):
            in_context(c, rule, make(), name)
    for record in c.secrets:  # a webhook's secret is its id/token path, not the public host
        if record["rule"] == "discord_webhook":
            record["secret"] = record["secret"].removeprefix("https://discord.com/api/webhooks/")
    add_private_keys(c)
    add_assignments(c)
    add_urls_and_headers(c)
    add_chosen_passwords(c)


# Passwords people choose: low entropy, still secrets. The first ones are the issue's own.
KNOWN_PASSWORDS = (
    ("credential_assignment", "hunter2hunter2", "password=hunter2hunter2"),
    ("credential_assignment", "s3cr3tP4ss", "DB_PASSWORD=s3cr3tP4ss"),
    ("credential_assignment", "postgres123", "PGPASSWORD=postgres123"),
    ("credential_assignment", "mySuperSecret2024", "client_secret: 'mySuperSecret2024'"),
    (
        "password_statement",
        "Winter2024!",
        "the root password on the staging box is Winter2024!",
    ),
    (
        "netrc_password",
        "Sup3rS3cret!",
        "machine api.example.com login deploy password Sup3rS3cret!",
    ),
    ("password_flag", "Zx9!kq2Lm#Tw", "docker login -u deploy -p 'Zx9!kq2Lm#Tw' ghcr.io"),
    ("credential_assignment", "hunter2", 'password = "hunter2"'),
    ("credential_assignment", "Password123", "password: Password123"),
    ("credential_assignment", "qwertyuiop", "POSTGRES_PASSWORD=qwertyuiop"),
)
PASSWORD_WORDS = (
    "hunter",
    "Winter",
    "summer",
    "dragon",
    "Monkey",
    "sunshine",
    "Tr0ub4dor",
    "letmein",
    "Qwerty",
    "football",
    "Spring",
    "admin",
    "Passw0rd",
    "orange",
)


def chosen_password(c: Corpus) -> str:
    word = c.rng.choice(PASSWORD_WORDS)
    digits = str(c.rng.choice([1, 12, 123, 2023, 2024, 2025, 99, 7]))
    return word + digits + c.rng.choice(["", "!", "#", "$", "?", "@1"])


def add_chosen_passwords(c: Corpus) -> None:
    for rule, value, text in KNOWN_PASSWORDS:
        c.secret(rule, value, text)
    assignments = (
        "DB_PASSWORD={v}",
        "MYSQL_ROOT_PASSWORD={v}",
        "REDIS_PASSWORD={v}",
        "SMTP_PASS={v}",
        "MYSQL_PWD={v}",
        "KEYSTORE_PASSPHRASE={v}",
        "JWT_SECRET={v}",
        "  password: {v}",
        "client_secret: '{v}'",
        '"password": "{v}",',
        'password = "{v}"',
        "Server=db;Database=app;User Id=sa;Password={v};",
        "host=db.internal user=app password={v} dbname=app",
        "  db_pass: {v}\n  db_user: app",
        "app.secret = '{v}'",
        'admin_password: str = "{v}"',
    )
    for index in range(30):
        value = chosen_password(c)
        c.secret(
            "credential_assignment", value, assignments[index % len(assignments)].format(v=value)
        )
    flags = (
        "docker login -u bob -p {v} registry.example.com",
        "podman login quay.io --username bob --password '{v}'",
        "mysql -u root -p{v} app_production",
        "sshpass -p '{v}' ssh deploy@10.0.0.4",
        "redis-cli -h cache.internal -a {v} ping",
        "curl -u admin:{v} https://jenkins.internal/api/json",
        "./manage.py createsuperuser --password {v}",
        "pg_restore --dbname app --db-password {v} dump.sql",
    )
    for index in range(16):
        value = chosen_password(c)
        c.secret("password_flag", value, flags[index % len(flags)].format(v=value))
    netrc = (
        "machine {h} login {u} password {v}",
        "machine {h}\n  login {u}\n  password {v}\n",
        "default login {u} password {v}",
    )
    for index in range(9):
        value = chosen_password(c)
        host = f"{c.chars(LOWER, 6)}.example.com"
        c.secret(
            "netrc_password",
            value,
            netrc[index % len(netrc)].format(h=host, u=c.chars(LOWER, 5), v=value),
        )
    statements = (
        "the wifi password is {v}",
        "FYI the admin password for the staging db is {v} until Friday",
        "the root password on prod-db-2 was changed to {v}",
        "new passphrase is `{v}`, please update the vault",
        "db password for staging: {v}",
        "the password is now {v}.",
    )
    for index in range(12):
        value = chosen_password(c)
        c.secret("password_statement", value, statements[index % len(statements)].format(v=value))
    for _ in range(3):
        value = chosen_password(c).replace("@", "%40").replace("#", "%23").replace("?", "%3F")
        c.secret("url_credentials", value, f"postgres://app:{value}@db.internal:5432/app")
    for _ in range(3):
        key = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\n"
        body = pem_body(c, 2)
        mac = c.chars(HEX, 64)
        public = pem_body(c, 2)
        text = f"{key}Public-Lines: 2\n{public}\nPrivate-Lines: 2\n{body}\nPrivate-MAC: {mac}\n"
        c.secret("putty_private_key", body.splitlines()[0], text)


PROSE = (
    "We rotate the token weekly and keep the password reset flow behind SSO.",
    "The secret to fast builds is caching the dependency layer.",
    "Please don't paste your password into chat; use the vault link instead.",
    "Token budgets: the model accepts 200k tokens of context.",
    "Our API key rotation policy is documented in the security handbook.",
    "If the token expires, the client refreshes it silently.",
    "Set a strong passphrase when you generate the SSH key.",
    "The password field must be at least 12 characters long.",
    "Secrets are injected at deploy time from the secret manager, never committed.",
    "Use `gh auth login` instead of a personal access token when you can.",
    "The bearer of this message is authorised to pick up the parcel.",
    "GitHub tokens start with ghp_ and Slack bot tokens with xoxb-; both are scanned.",
    "Authorization: Bearer $TOKEN is how the docs show the header.",
    "JWTs have three parts and the header usually begins with eyJ.",
    "Private keys live in ~/.ssh and must be chmod 600.",
    "the access key id goes in the first field, the secret key in the second",
    "Keys are sorted by key length; see sort_key in utils for the comparator.",
    "The sk-learn alias is not a package; install scikit-learn.",
    "I reset my password twice today and the token still says expired.",
    "Store the credentials file outside the repository.",
)

PLACEHOLDERS = (
    "password=<your password>",
    "token: ${TOKEN}",
    "secret: changeme",
    'api_key = os.environ["X"]',
    "password: ********",
    "api_key: YOUR_API_KEY_HERE",
    "token: <redacted>",
    'SECRET_KEY = env("SECRET_KEY")',
    "password = getpass.getpass()",
    'token = request.headers["Authorization"]',
    "secret_key = settings.SECRET_KEY",
    "password_hash = bcrypt.hashpw(password, salt)",
    "max_tokens: 4096",
    'tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")',
    "sort_key = lambda item: item[1]",
    'cache_key = f"user:{uid}"',
    "password_min_length = 12",
    "auth_token_ttl_seconds: 86400",
    "secretName: prod-db-credentials",
    "DB_PASSWORD=${DB_PASSWORD:?missing}",
    "export GITHUB_TOKEN=$(gh auth token)",
    "token = None",
    "password: null",
    'api_key: "{{ vault_api_key }}"',
    "client_secret = config.get('oauth', 'client_secret')",
    "PASSWORD=example-password",
    "secret: true",
    "token_type: bearer",
    "key: value",
    "api_key = load_api_key(path)",
    "password = self.password",
    'access_token = response.json()["access_token"]',
    "postgres://user:password@localhost:5432/app",
    "redis://:${REDIS_PASSWORD}@cache:6379/0",
    "Authorization: Bearer <token>",
    "Authorization: Basic <base64 user:pass>",
    "--password-file /run/secrets/db_password",
    "secret_path: /etc/orcad/secrets/api.key",
    'private_key = Path("~/.ssh/id_ed25519").expanduser()',
    "token=GITHUB_TOKEN_2024",
    "secret: tls-cert-2024",
    "password: Optional[str] = None",
    "token: string;",
    "access_token: AccessTokenResponse",
    "secret: SecretStr",
    "api_key=self._settings.openai_api_key",
    "private_key: ed25519.Ed25519PrivateKey",
    "token: v1.2.3-alpha",
    "secret: prod-db-credentials-v2",
    "signing_key: kms://projects/acme/keys/signer",
    "api_key = ''",
)


def build_lookalikes(c: Corpus) -> None:
    for text in PROSE:
        c.lookalike("prose", text)
    for text in PLACEHOLDERS:
        c.lookalike("placeholder", text)
    for _ in range(20):
        sha = c.chars(HEX, 40)
        c.lookalike(
            "git_sha",
            c.rng.choice(
                [
                    "commit {s}\nAuthor: Dev <dev@example.com>",
                    "fixed in {s}",
                    "git cherry-pick {s}",
                    "HEAD is now at {short} Merge branch 'main'",
                    "parent: {s}",
                ]
            ).format(s=sha, short=sha[:7]),
        )
    for _ in range(16):
        value = str(uuid.UUID(int=c.rng.getrandbits(128), version=4))
        c.lookalike(
            "uuid",
            c.rng.choice(
                ['{{"request_id": "{u}"}}', "trace {u} finished in 42ms", "id: {u}"]
            ).format(u=value),
        )
    for _ in range(16):
        digest = hashlib.sha256(c.chars(ALNUM, 20).encode()).hexdigest()
        c.lookalike(
            "sha256",
            c.rng.choice(
                [
                    "{d}  dist/orcad-1.2.0.tar.gz",
                    "image: ghcr.io/acme/api@sha256:{d}",
                    '"integrity": "sha256-{d}"',
                    "checksum = {d}",
                ]
            ).format(d=digest),
        )
    sentences = [p for p in PROSE] + ["hello world, this is ordinary text for a test fixture"]
    for index in range(12):
        encoded = base64.b64encode(sentences[index % len(sentences)].encode()).decode()
        c.lookalike(
            "base64_text",
            c.rng.choice(["payload: {b}", "data:text/plain;base64,{b}", "{b}"]).format(b=encoded),
        )
    paths = (
        "/home/dev/projects/orcad/orcad/secrets.py",
        "~/.config/orcad/config.toml",
        "C:\\Users\\dev\\AppData\\Local\\orcad\\token_cache.json",
        "./tests/corpus/secrets.jsonl",
        "/var/lib/orcad/projects/4f1c/jobs/job-0001.json",
        "src/auth/password_reset/views.py",
        "/run/secrets/postgres_password",
        "node_modules/@aws-sdk/credential-providers/dist/index.js",
    )
    for path in paths:
        c.lookalike("path", f"open {path} and look at line 42")
    urls = (
        "https://github.com/python-trio/trio/blob/main/src/trio/_core/_run.py#L100",
        "git@github.com:acme/orcad.git",
        "https://dev@bitbucket.org/acme/orcad.git",
        "http://localhost:8080/api/v1/jobs?limit=20&state=queued",
        "https://example.com:8443/path/to/page?x=1#frag",
        "http://[::1]:9000/metrics",
        "https://docs.python.org/3/library/re.html#re.compile",
        "ssh://git@gitlab.com:2222/acme/orcad.git",
        "mailto:dev@example.com",
        "https://hooks.slack.com/services",
        "https://discord.com/api/webhooks",
        "https://user@example.com/login",
    )
    for url in urls:
        c.lookalike("url", f"see {url} for details")
    for prefix in ("mem", "job", "cand", "apr"):
        for _ in range(6):
            identifier = f"{prefix}_{c.chars(HEX, 32)}"
            c.lookalike(
                "project_id",
                c.rng.choice(
                    ['{{"id": "{i}", "state": "queued"}}', "approved {i}", "id={i}", "token: {i}"]
                ).format(i=identifier),
            )
    for _ in range(12):
        version = f"{c.rng.randint(0, 30)}.{c.rng.randint(0, 99)}.{c.rng.randint(0, 999)}"
        suffix = c.rng.choice(["", "-rc.1", "-beta.2+build.7", "+sha.5114f85"])
        c.lookalike("semver", f"bumped trio to {version}{suffix} in the lock file")
    for _ in range(6):
        body = pem_body(c, 5)
        label = c.rng.choice(["PUBLIC KEY", "CERTIFICATE", "PGP PUBLIC KEY BLOCK"])
        c.lookalike("public_pem", f"-----BEGIN {label}-----\n{body}\n-----END {label}-----")
    for _ in range(6):
        key = "AAAAB3NzaC1yc2EAAAADAQABAAABAQ" + c.chars(BASE64, 200)
        c.lookalike("ssh_public_key", f"ssh-rsa {key} dev@laptop")
    code = (
        "def find_secrets(text: str) -> list[SecretMatch]:",
        "for key, value in sorted(mapping.items(), key=lambda kv: kv[0]):",
        "if token.kind == TokenKind.IDENT and token.text == 'password':",
        "self._lease_token += 1  # fencing token",
        "color: #AC3f2e; background: #ffffff;",
        "SELECT id, secret_hash FROM api_keys WHERE revoked_at IS NULL;",
        "assert_eq!(tokens.len(), 12);",
        "npm install @anthropic-ai/sdk@0.24.3",
        "pip install huggingface_hub==0.23.0 && hf_transfer=1",
        "ghp_ prefix check: if value.startswith(('ghp_', 'gho_')):",
        "task-0f3a9b2c1d4e5f60718293a4b5c6d7e8 finished",
        "AKIA is the prefix of long-term AWS access key ids",
        "const isSecret = (name) => /secret|token|password/i.test(name);",
        "let token = lexer.next_token()?;",
        "password_strength_score: 3",
        "The build took 4m12s; cache key linux-x64-3f2a9c1d",
    )
    for text in code:
        c.lookalike("code", text)


# Ordinary writing about passwords: storable, none of it a credential.
PASSWORD_PROSE = (
    "password reset emails are sent by the auth service",
    "read PGPASSWORD from the environment",
    "The password policy is NIST-800-63b compliant.",
    "the password hash is computed with argon2id before storage",
    "users who forget their password get a reset link valid for 1h",
    "the password manager is 1Password; ask IT for an invite",
    "never log the password, even at debug level",
    "Passwords must be 12+ characters; the validator rejects the top 10k list.",
    "the password is stored in the vault under kv/prod/db",
    "the secret is mounted at /run/secrets by the orchestrator",
    "rotate the password every 90 days via the runbook",
    "the db password is in 1Password, vault Infra, item staging-db",
    "ask Sam for the password; it is not in the repo",
    "the password prompt appears twice when the keyring is locked",
    "the passphrase protects the key on disk; ssh-agent caches it",
    "the credentials are injected by the CI runner at build time",
    "password field is optional when SSO is enabled",
    "we moved password hashing from bcrypt to scrypt in v2.3",
    "the secret sauce is the retry queue, not the cache",
    "login fails when the password contains a colon; see issue 412",
    "machine learning models are retrained nightly; login to the dashboard to see them",
    "docker login with --password-stdin so the password is not in shell history",
    "the password was rotated yesterday and the old one revoked",
    "Set the password via the DB_PASSWORD environment variable.",
    "the admin password is whatever the bootstrap script printed",
    "the password is fine, nothing to change",
    "the password is optional for local dev",
    "the first pass is slow; the second pass is cleanup",
    "the admin pass is required on prod",
    "OAuth2 is a password alternative for the api",
    "a pasword is required on the signup form",
    "the admin pass on staging is required",
    "the pin for the build is numpy2.1",
    "the random seed is chosen per worker process using system entropy",
    "the account is disabled and Locked#2 shows in the audit log",
    "the client secret is Prod_Client_Secret_V2 in the vault",
    "the PIN is 4096 bytes long",
)
PASSWORD_CODE = (
    "conn = psycopg.connect(user=user, password=password, host=host)",
    'password = os.environ["DB_PASSWORD"]',
    "if not password:\n    raise ValueError('password required')",
    "def check_password(password: str) -> bool:",
    "self.password = password",
    "password = input('Password: ')",
    "password: str = Field(..., min_length=12)",
    'echo "$PASSWORD" | docker login -u bob --password-stdin ghcr.io',
    "mysql -u root -p app_production",
    "docker run -p 8080:80 -e PASSWORD_FILE=/run/secrets/pw nginx",
    "ssh -p 2222 deploy@10.0.0.4",
    "mkdir -p build/output && cp -p src/*.py build/output",
    "machine github.com login bob",
    "password: ${{ secrets.DB_PASSWORD }}",
    "password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256",
    "password: {{ .Values.postgresql.auth.password }}",
    "PGPASSWORD=$(cat /run/secrets/pg) psql -h db -U app",
    "client_secret: ${CLIENT_SECRET}",
    "secret: my-app-tls",
    "credentials: aws-prod-readonly",
    "secretKeyRef:\n  name: db-credentials\n  key: password",
    "password = kwargs.get('password')",
    "password: process.env.DB_PASSWORD,",
    "const password = await prompt({ type: 'password' });",
    'export DB_PASSWORD="$(vault kv get -field=password kv/db)"',
    "password=getpass()",
    "password = None  # set by the caller",
    'curl -u "$USER:$TOKEN" https://api.example.com',
    "redis-cli -h cache.internal ping",
    "sshpass -f ~/.sshpass ssh deploy@host",
    "password: str",
    "password: Optional[SecretStr] = None",
    "PASSWORD_HASHERS = ['django.contrib.auth.hashers.Argon2PasswordHasher']",
    "assert user.check_password('')",
    "password: null",
    "passwd: /etc/passwd",
    "--password-file=/run/secrets/db_password",
    "password = self.vault.read('db')['password']",
    "Pwd = config.Pwd",
    "bypass = True",
)
# Documentation about token formats: prefixes and stand-ins, never a token.
TOKEN_MENTIONS = (
    "AGE-SECRET-KEY-1",
    "hvs.",
    "hvb.",
    "dapi",
    "sntryu_",
    "sntrys_",
    "lin_api_",
    "glsa_",
    "glc_",
    "pul-",
    "PMAK-",
    "rubygems_",
    "ntn_",
    "secret_",
    "GOCSPX-",
    "ya29.",
    "LTAI",
    "v1.0-",
    "dt0c01.",
    "fo1_",
    "fm2_",
    "rnd_",
    "sbp_",
    "napi_",
    "pscale_tkn_",
    "tk-us-",
    ".atlasv1.",
    "ops_eyJ",
    "tskey-auth-",
    "sgp_",
    "bkua_",
    "CCIPAT_",
    "dckr_pat_",
    "AKCp",
    "pat.",
    "API-",
    "oy2",
    "CLOJARS_",
    "ddp_",
    "pnu_",
    "rdme_",
    "ico-",
    "sk-or-v1-",
    "gsk_",
    "xai-",
    "pplx-",
    "r8_",
    "lsv2_pt_",
    "pcsk_",
    "api_org_",
    "xkeysib-",
    "re_",
    "figd_",
    "tfp_",
    "CFPAT-",
    "sl.u.",
    "fio-u-",
    "NRAK-",
    "sk.eyJ",
    "p8e-",
    "shippo_live_",
    "duffel_test_",
    "EZAK",
    "FLWSECK_TEST-",
    "access-sandbox-",
    "glrt-",
    "GR1348941",
)


def build_password_lookalikes(c: Corpus) -> None:
    for text in PASSWORD_PROSE:
        c.lookalike("password_prose", text)
    for text in PASSWORD_CODE:
        c.lookalike("password_code", text)
    for prefix in TOKEN_MENTIONS:
        c.lookalike("token_prefix", f"tokens of this kind start with {prefix} and are scanned")
        filler = c.rng.choice(["X", "x", "0", "*"]) * c.rng.randint(24, 64)
        c.lookalike(
            "token_stand_in",
            c.rng.choice(["TOKEN={p}{f}", "e.g. `{p}{f}`", "{p}<your-token>"]).format(
                p=prefix, f=filler
            ),
        )
    for _ in range(10):
        c.lookalike("aws_example", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE in the docs")


def build_sas_signatures(c: Corpus) -> None:
    """Azure shared access signatures, and URLs with a sig= that is none (added last, so the
    records before them stay as they were)."""
    for _ in range(6):
        raw = c.mixed(BASE64, 43) + "="
        value = c.rng.choice([raw, raw.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")])
        url = (
            f"https://{c.chars(LOWER, 8)}.blob.core.windows.net/{c.chars(LOWER, 6)}/data.bin"
            f"?sp=r&st=2026-01-01T00:00:00Z&se=2026-02-01T00:00:00Z&spr=https&sv=2022-11-02"
            f"&sr=b&sig={value}"
        )
        text = c.rng.choice(['azcopy copy "{u}" ./data.bin', "SAS_URL={u}", "download from {u}"])
        c.secret("azure_sas_signature", value, text.format(u=url))
    for _ in range(4):
        c.lookalike(
            "sas_stand_in",
            c.rng.choice(
                [
                    "https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sig=<signature>",
                    "append &sig=... to the blob URL",
                    f"?sig={c.chars(HEX, 12)}&v=2",
                ]
            ),
        )


def build_registry_auths(c: Corpus) -> None:
    """base64 of user:password under an auth key (Docker, npm), and values that are not one."""
    for _ in range(6):
        user = c.chars(LOWER, c.rng.randint(4, 10))
        password = c.mixed(ALNUM + "!#%^*-_", c.rng.randint(10, 24))
        value = base64.b64encode(f"{user}:{password}".encode()).decode()
        shape = c.rng.choice(
            [
                '{{"auths": {{"registry.example.com": {{"auth": "{v}"}}}}}}',
                "//npm.example.com/:_auth={v}\nalways-auth=true",
                '"auth": "{v}",\n"email": "ci@example.com"',
            ]
        )
        c.secret("registry_auth", value, shape.format(v=value))
    for _ in range(4):
        words = base64.b64encode(c.rng.choice(["no colon here", "just-a-label"]).encode())
        c.lookalike(
            "auth_stand_in",
            c.rng.choice(['"auth": "required"', "_auth=${{NPM_AUTH}}", '"auth": "{w}"']).format(
                w=words.decode()
            ),
        )


def build_session_cookies(c: Corpus) -> None:
    """Session cookies in headers and curl commands, and cookies that hold no session."""
    names = ("sessionid", "session", "PHPSESSID", "JSESSIONID", "connect.sid", "user_session")
    for index in range(6):
        value = c.mixed(URLSAFE, c.rng.randint(24, 40))
        shape = c.rng.choice(
            [
                "curl 'https://app.example.com/api' -H 'cookie: _ga=GA1.1.17; {n}={v}'",
                "Cookie: {n}={v}; theme=dark",
                "Set-Cookie: {n}={v}; Path=/; Secure; HttpOnly",
                'curl -b "{n}={v}" https://app.example.com/api',
            ]
        )
        c.secret("session_cookie", value, shape.format(n=names[index], v=value))
    for _ in range(4):
        c.lookalike(
            "cookie_without_session",
            c.rng.choice(
                [
                    "Cookie: theme=dark; lang=en-GB; _ga=GA1.1.1234567890.1700000000",
                    "Set-Cookie: session=; Max-Age=0; Path=/",
                    "Cookie: sessionid=<your-session-id>",
                ]
            ),
        )


def build_yaml_blocks(c: Corpus) -> None:
    """YAML block scalars (`password: |` and the lines below) under a credential's name, and
    blocks under other names or holding prose."""
    for index in range(6):
        if index % 2:
            value = c.mixed(URLSAFE, 32)
            name = c.rng.choice(["api_key", "auth_token", "client_secret"])
        else:
            value, name = chosen_password(c), c.rng.choice(["password", "db_password", "passwd"])
        shape = c.rng.choice(
            [
                "{n}: |\n  {v}\nuser: app\n",
                "database:\n  {n}: >-\n    {v}\n  host: db.internal\n",
                "env:\n  - name: app\n    {n}: |-\n      {v}\n",
            ]
        )
        c.secret("credential_assignment", value, shape.format(n=name, v=value))
    for text in (
        "description: |\n  The password must be at least 12 characters.\n",
        "password: |\n  Ask ops for it.\n  It rotates monthly.\n",
        "password: |\n  ${DB_PASSWORD}\n",
        "password_policy: >\n  min-length-12\n",
        "token: |\n  refreshed every hour\n",
        "run: |\n  make test\n  make release\n",
    ):
        c.lookalike("yaml_block", text)


def build_batch_and_piped_passwords(c: Corpus) -> None:
    """`htpasswd -b FILE USER PASS` and `echo PASS | sudo -S`, and the same commands without
    a password."""
    shapes = (
        "htpasswd -b /etc/nginx/.htpasswd {u} {v}",
        "sudo htpasswd -bc /etc/apache2/.htpasswd {u} '{v}'",
        "htpasswd -nbB {u} {v} > traefik/users",
        "echo '{v}' | sudo -S systemctl restart nginx",
        "echo {v} | sudo -S -u {u} make install",
    )
    for index in range(10):
        value = chosen_password(c)
        text = shapes[index % len(shapes)].format(u=c.chars(LOWER, 5), v=value)
        c.secret("password_flag", value, text)
    for text in (
        "htpasswd -c /etc/nginx/.htpasswd admin",
        "htpasswd -B .htpasswd alice",
        "htpasswd -b .htpasswd alice $HTPASSWD",
        "echo 'export PATH=$PATH:/opt/bin' | sudo tee -a /etc/profile",
        'echo "$SUDO_PASS" | sudo -S true',
        "echo 1 | sudo tee /proc/sys/net/ipv4/ip_forward",
    ):
        c.lookalike("command_without_password", text)


def build_redis_passwords(c: Corpus) -> None:
    """Redis's requirepass and masterauth, and mentions of them that set nothing."""
    shapes = (
        "bind 127.0.0.1\nrequirepass {v}\nport 6379\n",
        "masterauth {v}",
        "redis-cli CONFIG SET requirepass '{v}'",
        "redis-server --requirepass {v} --appendonly yes",
    )
    for index in range(6):
        value = chosen_password(c)
        c.secret("credential_assignment", value, shapes[index % len(shapes)].format(v=value))
    for text in (
        "# requirepass foobared",
        "set requirepass in redis.conf and restart",
        "requirepass directive controls who may connect",
        "requirepass ${REDIS_PASSWORD}",
    ):
        c.lookalike("redis_setting", text)


def build_pgpass_lines(c: Corpus) -> None:
    """~/.pgpass lines, and colon-separated lines that are none."""
    shapes = (
        "{h}:5432:{d}:{u}:{v}",
        "*:*:*:{u}:{v}",
        "echo '{h}:5432:*:{u}:{v}' >> ~/.pgpass && chmod 600 ~/.pgpass",
        "localhost:5432:{d}:{u}:{v}\n{h}:6432:*:{u}:{v}",
    )
    for index in range(6):
        value = chosen_password(c).replace(":", "")
        host, database, user = f"{c.chars(LOWER, 6)}.internal", c.chars(LOWER, 4), c.chars(LOWER, 5)
        text = shapes[index % len(shapes)].format(h=host, d=database, u=user, v=value)
        c.secret("pgpass_password", value, text)
    for text in (
        "root:x:0:0:root:/root:/bin/bash",
        "nobody:*:-2:-2:Unprivileged User:/var/empty:/usr/bin/false",
        "2001:db8:85a3:8d3:1319",
        "12:30:45:67:8901",
        "hostname:port:database:username:password",
        "localhost:5432:*:postgres:${PGPASSWORD}",
    ):
        c.lookalike("colon_separated", text)


def build_settings_with_spaces(c: Corpus) -> None:
    """Unquoted environment settings whose value holds spaces, and settings of references."""
    words = ("keyboard cat", "open sesame", "correct horse battery staple", "blue monkey 42")
    shapes = ("SESSION_SECRET={v}", "export DB_PASSWORD={v}\nPORT=3000", "JWT_SECRET={v} # old")
    for index in range(6):
        value = words[index % len(words)] + c.rng.choice(["", " 7", "!"])
        c.secret("credential_assignment", value, shapes[index % len(shapes)].format(v=value))
    for text in (
        "SESSION_SECRET=$SESSION_SECRET node app.js",
        "SESSION_SECRET=<set me> # later",
        "export SECRET_FILE=/run/secrets/app",
    ):
        c.lookalike("setting_reference", text)


def build_joined_word_passwords(c: Corpus) -> None:
    """Passwords of letters alone, words run together, stated in a sentence; and sentences
    that describe a password with one long word."""
    words = ("correct", "horse", "battery", "staple", "purple", "monkey", "dishwasher", "velvet")
    shapes = ("my password is {v}", "the wifi password is {v}.", "FYI the admin password was {v}")
    for index in range(6):
        value = "".join(c.rng.sample(words, 3))
        c.secret("password_statement", value, shapes[index % len(shapes)].format(v=value))
    for text in (
        "the password is configurable.",
        "the password is unrecoverable",
        "the password is straightforward",
        "the password is PasswordManager",
        "the password is automatically generated",
    ):
        c.lookalike("password_described", text)


def build_other_language_passwords(c: Corpus) -> None:
    """Passwords after the word for password in other languages, and sentences about one."""
    shapes = (
        "Passwort: {v}",
        "Das Passwort für den Server ist {v}",
        "la contraseña es {v}",
        "mot de passe : {v}",
        "A senha do banco é {v}",
        "пароль: {v}",
        "密码\uff1a{v}",
        "wachtwoord = {v}",
    )
    for index in range(8):
        value = chosen_password(c)
        c.secret("password_statement", value, shapes[index % len(shapes)].format(v=value))
    for text in (
        "Passwort: siehe Wiki",
        "Passwortrichtlinie: mindestens 12 Zeichen",
        "la contraseña es incorrecta",
        "mot de passe oublié ?",
        "resenha: ótimo filme de 2024",
        "пароль неверный",
    ):
        c.lookalike("other_language", text)


def build_sql_passwords(c: Corpus) -> None:
    """SQL that creates or changes a user with a password, and SQL that gives none."""
    shapes = (
        "CREATE USER {u} IDENTIFIED BY '{v}';",
        "ALTER USER '{u}'@'%' IDENTIFIED WITH caching_sha2_password BY '{v}';",
        "CREATE ROLE {u} LOGIN PASSWORD '{v}';",
        "ALTER USER {u} WITH ENCRYPTED PASSWORD '{v}';",
        "SET PASSWORD FOR '{u}'@'localhost' = PASSWORD('{v}');",
    )
    for index in range(5):
        value = chosen_password(c).replace("'", "")
        c.secret("credential_assignment", value, shapes[index].format(u=c.chars(LOWER, 5), v=value))
    for text in (
        "CREATE USER app IDENTIFIED BY :password;",
        "ALTER ROLE app PASSWORD NULL;",
        "users are identified by their email address",
        "if not verify_password(password, user.hash):",
    ):
        c.lookalike("sql_without_password", text)


def build_argument_passwords(c: Corpus) -> None:
    """Commands that take a password as a plain argument or piped in, and the same commands
    without one."""
    shapes = (
        "echo '{u}:{v}' | sudo chpasswd",
        "net user {u} {v} /add",
        "rabbitmqctl add_user {u} {v}",
        "ldapadd -x -D cn={u},dc=example,dc=com -w {v} -f users.ldif",
        "mysqladmin -u {u} password {v}",
    )
    for index in range(5):
        value = chosen_password(c)
        c.secret("password_flag", value, shapes[index].format(u=c.chars(LOWER, 5), v=value))
    for text in (
        "net user admin /delete",
        "ldapsearch -x -D cn=admin -W -b dc=example,dc=com",
        "the net user count grew",
        "rabbitmqctl list_users",
    ):
        c.lookalike("command_without_password", text)


def build_cased_flag_passwords(c: Corpus) -> None:
    """Password flags whose other case means something else (sqlcmd -P, ssh-keygen -N), and
    the other case."""
    shapes = (
        "sqlcmd -S db.internal -U sa -P {v} -i migrate.sql",
        "bcp dbo.orders out orders.dat -S db -U sa -P {v} -c",
        "ssh-keygen -t ed25519 -N '{v}' -f deploy_key",
    )
    for index in range(3):
        value = chosen_password(c).replace("'", "")
        c.secret("password_flag", value, shapes[index].format(v=value))
    for text in (
        "sqlcmd -S db.internal -E -p 1 -i report.sql",
        "ssh-keygen -s ca_key -I deploy -n alice,bobby deploy_key.pub",
        "ssh-keygen -t ed25519 -N '' -f deploy_key",
    ):
        c.lookalike("cased_flag", text)


def build_passcodes(c: Corpus) -> None:
    """Passcodes (passwords of digits) set by name, and names that only mention one."""
    for shape in ("passcode: {v}", "DOOR_PASSCODE={v}", "alarm_passcode = '{v}'"):
        value = c.chars(DIGITS, c.rng.randint(4, 8))
        c.secret("credential_assignment", value, shape.format(v=value))
    for text in ("passcode_length: 6", "PASSCODE_DIGITS=6", "passcode = prompt_for_code()"):
        c.lookalike("passcode_setting", text)


def build_lower_case_settings_with_spaces(c: Corpus) -> None:
    """Config files' lower-case settings whose unquoted value is words and spaces, and
    settings whose words are prose or code."""
    words = ("open sesame", "correct horse battery", "keyboard cat", "blue monkey", "tiger lily")
    shapes = (
        "password = {v}",
        "[client]\nuser = app\npassword = {v}\n",
        "database:\n  db_password: {v}\n  host: db.internal\n",
        "smtp_pass: {v}  # rotated in March",
        "  - session_secret: {v}\n  - port: 3000",
        "admin_passphrase={v}",
    )
    for index in range(12):
        value = words[index % len(words)] + c.rng.choice(["", " 42", " 7!", " staple"])
        c.secret("credential_assignment", value, shapes[index % len(shapes)].format(v=value))
    for text in (
        "password = the one in the vault",
        "password: ask ops for it",
        "db_password: same as staging",
        "password: not set yet",
        "password = see 1Password",
        "password = user_password if user else default_password",
        "password = generate_password length: 12",
        "pw = pw + c",
        "pwd: Jim Meyering",
        "secret: db credentials prod",
    ):
        c.lookalike("setting_of_prose", text)


def build_foreign_single_word_passwords(c: Corpus) -> None:
    """A lone word given after the word for password and a colon in another language, and
    lone words there that describe the password."""
    shapes = (
        "Kennwort: {v}",
        "WLAN-Passwort: {v}",
        "mot de passe : {v}",
        "contraseña: {v}\nusuario: admin",
        "senha: {v}",
        "wachtwoord: {v}",
        "lösenord: {v}",
        "пароль: {v}",
    )
    words = (
        "geheim", "Sonnenblume", "soleil", "gatito", "saudade", "tulpen", "kanelbulle", "котик",
        "Bergkristall", "papillon", "mariposa", "fortaleza",
    )  # fmt: skip
    for index in range(12):
        value = words[index % len(words)]
        c.secret("password_statement", value, shapes[index % len(shapes)].format(v=value))
    for text in (
        "Passwort: erforderlich",
        "Kennwort: optional",
        "Passwort: falsch",
        "mot de passe : requis",
        "contraseña: incorrecta",
        "senha: obrigatória",
        "wachtwoord: verplicht",
        "пароль: неверный",
        "Passwort: siehe unten",
        "Das Passwort ist geheim",
    ):
        c.lookalike("other_language_described", text)


def build_stated_digit_passwords(c: Corpus) -> None:
    """Passwords and PINs of digits alone stated in a sentence, and numbers in sentences
    about a password that are settings or counts."""
    shapes = (
        "the wifi password is {v}",
        "FYI the door passcode is now {v}.",
        "the password for the guest network is {v}, ask at the desk",
        "my PIN is {v}",
        "the SIM PIN code is {v}.",
        "Card PIN: {v}",
        "the alarm password was changed to {v}",
        "new voicemail PIN is {v}; change it after the first call",
    )
    for index in range(8):
        value = c.chars(DIGITS, c.rng.randint(4, 10))
        c.secret("password_statement", value, shapes[index].format(v=value))
    for text in (
        "the password timeout is 3600",
        "password iterations is 100000",
        "the password is 1234 characters long",
        "the password was rotated in 2024",
        "the pin is 2048",
        "LED_PIN = 1234",
        "PIN 13 is the onboard LED",
        "the PIN is 4 digits long",
    ):
        c.lookalike("number_about_a_password", text)


def build_login_pairs(c: Corpus) -> None:
    """A user and password given as a pair or as `user NAME pass VALUE`, and pairs of words
    or paths after login, credentials or user."""
    shapes = (
        "login: {u} / {v}",
        "Login: {u}/{v}",
        "creds: {u}/{v}",
        "the default credentials are {u}/{v}.",
        "username & password: {u} / {v}",
        "user {u} pass {v}",
        "ssh in as user {u} password {v} then sudo",
        "| staging | login: {u}/{v} |",
    )
    for index in range(8):
        value = chosen_password(c).replace("/", "")
        text = shapes[index].format(u=c.chars(LOWER, 5), v=value)
        c.secret("password_statement", value, text)
    for text in (
        "login: see /docs/login",
        "login: GET/POST",
        "login: username/password",
        "login: email / phone",
        "credentials: user/pass",
        "creds: aws/gcp",
        "user admin password reset",
        "the user root password field is empty",
        "login: admin / ${ADMIN_PASSWORD}",
        "ftp.login() # default, i.e.: user anonymous, passwd anonymous@",
    ):
        c.lookalike("login_pair_of_words", text)


def build_comparisons_in_block_headers(c: Corpus) -> None:
    """A credential's name compared with a name or a constant in a block header, and with a
    literal."""
    for shape in ("if password == '{v}':", 'elif db_password == "{v}":', "if pwd == {v}:"):
        value = chosen_password(c).replace("'", "").replace('"', "")
        c.secret("credential_assignment", value, shape.format(v=value))
    for text in (
        "if token == Literal:",
        "if password == DEFAULT_PASSWORD:",
        "    elif token == Literal: return",
        "while secret == EMPTY_SECRET:",
        "    if pwd == DefaultPwd:",
        "if api_key == MissingApiKey:",
        "        if request.creation_token == creation_token:",
    ):
        c.lookalike("comparison_in_code", text)


def build_yaml_blocks_of_one_line(c: Corpus) -> None:
    """A block scalar of one line of words under a password's name: a passphrase, or prose."""
    words = ("open sesame", "correct horse battery staple", "blue monkey", "tiger lily")
    shapes = (
        "password: |\n  {v}\nhost: db\n",
        "database:\n  db_password: >-\n    {v}\n  user: app\n",
        "passphrase: |-\n  {v}\n",
    )
    for index in range(6):
        value = words[index % len(words)] + c.rng.choice(["", " 42", " 7!"])
        c.secret("credential_assignment", value, shapes[index % len(shapes)].format(v=value))
    for text in (
        "password: |\n  Use the one from the vault.\n",
        "db_password: >-\n    Ask ops for it.\nhost: db\n",
        "password: |\n  Stored in Vault under kv/prod/db.\n",
        "secret: |\n  Rotated monthly by the platform team.\n",
        "passphrase: >\n  See the runbook\n",
    ):
        c.lookalike("yaml_block_of_prose", text)


def build_lower_case_pins(c: Corpus) -> None:
    """A PIN written in lower case, someone's or something's or starting its line, and pins
    that are parts, GPIO lines, version pins and counts."""
    shapes = (
        "my pin is {v}",
        "the pin for the card is {v}",
        "pin: {v}",
        "my debit card pin is {v}, please don't put it in the notes",
        "your new pin is {v}.",
        "the sim pin: {v}",
        "door pin: {v}\nwifi: guest-network",
        "the pin to the safe is {v}",
        "- pin: {v}\n- puk: see the card",
        "my pin number is {v}",
        "the voicemail pin was changed to {v}.",
        "Pin: {v}",
        "our alarm pin is {v}; the gate opens with the fob",
        "bluetooth pairing pin: {v}",
        "hey, my bank pin is {v} if you need to check the statement",
        "the default pin is {v} until the first login",
    )
    for shape in shapes:
        value = c.chars(DIGITS, c.rng.randint(4, 8))
        c.secret("password_statement", value, shape.format(v=value))
    for text in (
        "pin the version to 4.2.1",
        "pin numpy<2",
        "pins 3 and 4",
        "pin 12 of the GPIO header",
        "the dependency is pinned at 2024",
        "pin requests==2.31.0 in requirements.txt",
        "we pin the base image to python:3.12-slim",
        "the LED is on pin 13",
        "led_pin: 13",
        "pin: 4.2.1",
        "pin: 13",
        "the pin count is 1024",
        "pin it to 1.26.4 for now, 2.0 breaks the build",
        "the pin for LED_BUILTIN is 13",
        "the pin is 2048",
        "gpio pin: 2048",
        "data pin is 4096 on the new board",
        "my pin is 4 digits long",
        "pinned at 2024.1 until the regression is fixed",
        "pin_memory: true",
        "pin 2 and pin 3 have 3300 ohm pull-ups",
        "spin: 2048",
        "repin: 2024",
        "the pin of the header is 4096",
    ):
        c.lookalike("pin_that_is_no_pin_code", text)


def build_foreign_words_after_a_verb(c: Corpus) -> None:
    """A lone word given after the word for password and the verb in German, French, Spanish,
    Portuguese, Italian and Dutch, and the adjectives and participles said of a password there."""
    for text, value in (
        ("Das Passwort ist Sonnenblume", "Sonnenblume"),
        ("das Passwort für den Server ist Bergkristall", "Bergkristall"),
        ("Das WLAN-Passwort ist Regenbogen.", "Regenbogen"),
        ("das passwort ist schmetterling", "schmetterling"),
        ("Das Kennwort lautet Apfelbaum.", "Apfelbaum"),
        ("Das Passwort war Schneeflocke, jetzt ist es anders", "Schneeflocke"),
        ("le mot de passe est tournesol", "tournesol"),
        ("Le mot de passe du wifi est papillon.", "papillon"),
        ("le mot de passe est framboise", "framboise"),
        ("le mot de passe est coccinelle", "coccinelle"),
        ("le mot de passe est croissant", "croissant"),
        ("la contraseña es girasol", "girasol"),
        ("La contraseña del router es mariposa.", "mariposa"),
        ("la contraseña es Margarita", "Margarita"),
        ("la contraseña es gatito", "gatito"),
        ("la contraseña era tortuga", "tortuga"),
        ("het wachtwoord is zonnebloem", "zonnebloem"),
        ("Het wachtwoord van de wifi is tulpen.", "tulpen"),
        ("het wachtwoord is appeltaart", "appeltaart"),
        ("la password è girasole", "girasole"),
        ("La password del wifi è farfalla.", "farfalla"),
        ("a senha é girassol", "girassol"),
        ("A senha do banco é saudade.", "saudade"),
    ):
        c.secret("password_statement", value, text)
    for text in (
        "das Passwort ist zu kurz",
        "Das Passwort ist falsch",
        "Das Passwort ist abgelaufen.",
        "Das Passwort ist ungültig",
        "Das Passwort ist erforderlich",
        "Das Passwort ist geheim",
        "Ihr Passwort ist veraltet",
        "Das Kennwort ist leer",
        "Das Passwort ist nicht korrekt",
        "Das Passwort ist identisch",
        "Das Passwort ist gespeichert",
        "Das neue Passwort ist sicher",
        "Das Passwort ist Pflicht",
        "Das Passwort war falsch.",
        "Das Passwort ist verschlüsselt",
        "Das Passwort ist schwach",
        "Das Passwort ist optional",
        "Das Passwort ist gesperrt",
        "Das Passwort ist unbekannt",
        "Das Passwort ist gültig",
        "Das Passwort ist zurückgesetzt",
        "Das Passwort ist eingestellt",
        "Das Passwort ist festgelegt",
        "Das Passwort ist lang genug",
        "Das Passwort ist inaktiv.",
        "Das Passwort ist Null",
        "Das Passwort ist richtig",
        "Das Passwort ist vergeben",
        "Das Passwort ist hinterlegt",
        "Das Passwort ist abgeschaltet",
        "le mot de passe est incorrect",
        "Le mot de passe est invalide",
        "le mot de passe est expiré",
        "le mot de passe est obligatoire",
        "le mot de passe est trop court",
        "Le mot de passe est vide",
        "le mot de passe est requis",
        "le mot de passe est erroné",
        "le mot de passe est faux",
        "le mot de passe est chiffré",
        "le mot de passe est sensible",
        "le mot de passe est identique",
        "le mot de passe est différent",
        "le mot de passe est inactif",
        "le mot de passe est bon",
        "le mot de passe est correct",
        "le mot de passe était incorrect",
        "le mot de passe est facultatif",
        "le mot de passe est défini",
        "le mot de passe est perdu",
        "le mot de passe est masqué",
        "le mot de passe est stocké",
        "le mot de passe est haché",
        "le mot de passe est temporaire",
        "le mot de passe est valide",
        "le mot de passe est modifiable",
        "la contraseña es obligatoria",
        "la contraseña es incorrecta",
        "la contraseña es inválida",
        "la contraseña es demasiado corta",
        "la contraseña es correcta",
        "la contraseña es requerida",
        "la contraseña es segura",
        "la contraseña es débil",
        "la contraseña es válida",
        "la contraseña es opcional",
        "la contraseña es nueva",
        "la contraseña es distinta",
        "la contraseña es igual",
        "la contraseña es errónea",
        "la contraseña era incorrecta",
        "la contraseña es temporal",
        "la contraseña es necesaria",
        "la contraseña es insuficiente",
        "la contraseña es diferente",
        "la contraseña es caducada",
        "a senha é obrigatória",
        "a senha é inválida",
        "a senha é incorreta",
        "a senha é fraca",
        "a senha é forte",
        "a senha é muito curta",
        "a senha é segura",
        "a senha é diferente",
        "a senha é errada",
        "a senha é opcional",
        "a senha é nova",
        "a senha é necessária",
        "a senha é válida",
        "a senha é criptografada",
        "la password è obbligatoria",
        "la password è errata",
        "la password è sbagliata",
        "la password è scaduta",
        "la password è corretta",
        "la password è vuota",
        "la password è troppo corta",
        "la password è richiesta",
        "la password è debole",
        "la password è sicura",
        "la password è valida",
        "la password è cambiata",
        "la password è memorizzata",
        "la password è crittografata",
        "la password è nascosta",
        "la password è opzionale",
        "la password è diversa",
        "la password è necessaria",
        "la password è obbligatorio",
        "la password è temporanea",
        "het wachtwoord is onjuist",
        "het wachtwoord is verlopen",
        "het wachtwoord is ongeldig",
        "het wachtwoord is verplicht",
        "het wachtwoord is te kort",
        "het wachtwoord is leeg",
        "het wachtwoord is gewijzigd",
        "het wachtwoord is fout",
        "het wachtwoord is verkeerd",
        "het wachtwoord is correct",
        "het wachtwoord is optioneel",
        "het wachtwoord is vereist",
        "het wachtwoord is geblokkeerd",
        "het wachtwoord is onbekend",
        "het wachtwoord is hoofdlettergevoelig",
        "het wachtwoord is opgeslagen",
        "het wachtwoord is versleuteld",
        "het wachtwoord is zwak",
        "het wachtwoord is tijdelijk",
        "het wachtwoord is veilig",
    ):
        c.lookalike("other_language_described_after_a_verb", text)


def build_passphrases_in_sentences(c: Corpus) -> None:
    """A passphrase of lower-case words given in a sentence, and sentences that say what a
    password is like or where it is in three words or more."""
    for text, value in (
        ("my password is correct horse battery staple", "correct horse battery staple"),
        ("the wifi password is purple monkey dishwasher", "purple monkey dishwasher"),
        ("FYI the admin password was orange tiger lamp", "orange tiger lamp"),
        ("the password for the router is blue whale sunset.", "blue whale sunset"),
        ("my passphrase is river stone candle moon", "river stone candle moon"),
        ("the vault passphrase is: velvet anchor piano", "velvet anchor piano"),
        ('ok so the password is "marble forest kitten"', "marble forest kitten"),
        (
            "the guest wifi password is happy yellow submarine, tell the visitors",
            "happy yellow submarine",
        ),
        ("my password is now copper rabbit winter", "copper rabbit winter"),
        ("the ssh key passphrase is tango lemon harbor", "tango lemon harbor"),
        ("the password is correct horse battery staple", "correct horse battery staple"),
        ("my password was changed to silver canyon echo", "silver canyon echo"),
    ):
        c.secret("password_statement", value, text)
    for text in (
        "the password is wrong",
        "the password is too short",
        "password is required",
        "the password is stored hashed",
        "the password is the same as before",
        "the password is case sensitive",
        "the password is sent in clear text",
        "the password is never stored anywhere",
        "the password is stored in the keychain",
        "the password is read from stdin",
        "the password is hashed with bcrypt",
        "the password is not echoed",
        "the password is too weak and too short",
        "the password is whatever you set during setup",
        "the password is valid for one hour",
        "the password is user supplied",
        "the password is plain text only",
        "the password is case insensitive here",
        "the password is randomly generated",
        "the password is shown below the form",
        "the password is optional for local connections",
        "the password is saved in plain text",
        "the password is set via environment variable",
        "the password is taken from the config file",
        "the password is ignored for socket auth",
        "the password is passed as an argument",
        "the password is empty by default",
        "the password is asked for interactively",
        "the password is provided by the user",
        "the password is encrypted at rest",
        "the password is admin password",
        "the password is pretty weak honestly",
        "the password is kept server side",
        "the password is prompted once per session",
        "the password is transmitted over https",
        "the password is checked against the hash",
        "the password is visible in process listings",
        "the password is visible in ps output",
        "the password is mandatory for remote access",
        "the password is compared in constant time",
        "the password is also required",
        "the password is derived from the master key",
        "the password is unique per user",
        "the password is managed by vault",
        "the password is part of the url",
        "the password is still the default one",
        "the password is different per environment",
        "the password is obviously wrong",
        "the password is verified server side",
        "the password is stored as sha256 hash",
        "the password is generated on first boot",
        "the password was reset last week",
        "the password was rotated yesterday",
        "the password is your login name",
        "the password is in the team vault",
        "the password is on the sticky note",
        "the password field is required",
        "the password policy requires twelve characters",
        "if the password is wrong twice, lock the account",
        "the password is what protects the account",
        "my password is way too short",
        "the password is same as username",
        "the password is root by default",
        "password is mandatory field",
        "password was incorrect try again",
        "the password is weak strong random",
    ):
        c.lookalike("password_described_in_words", text)


def build_pin_settings(c: Corpus) -> None:
    """A PIN set by a name that holds one, and names that end in pin for a GPIO line, a count or
    a version."""
    shapes = (
        "SIM_PIN={v}",
        "export PIN_CODE={v}",
        'card_pin = "{v}"',
        "[token]\nuser_pin = {v}\nlabel = signing",
        "PIN={v}",
        '{{"pin": "{v}", "user": "ana"}}',
        "so-pin: {v}",
        "pin_number: '{v}'",
        "DEFAULT_PIN={v} # factory setting",
    )
    for shape in shapes:
        value = c.chars(DIGITS, c.rng.randint(4, 8))
        c.secret("credential_assignment", value, shape.format(v=value))
    for text in (
        "LED_PIN = 1234",
        "pin_count = 1024",
        "gpio_pin: 2048",
        "pin_timeout_ms = 5000",
        "pinned: 2024",
        "ping: 1234",
        "pin = 13",
        "pin_length: 6",
        "PIN_RETRIES=3",
        "spin = 1234",
        "pin = 4.2.1",
        "max_pin = 9999",
        "pin_version: 2024",
        "pin: 2024-01-01",
        "pin: 12:30",
        "RESET_PIN = 4096",
    ):
        c.lookalike("pin_setting_of_no_pin_code", text)


def build_foreign_words_after_a_verb_and_a_colon(c: Corpus) -> None:
    """A lone word after the word for password, the verb and a colon, and describing words
    there."""
    for text, value in (
        ("Das Passwort lautet: Sonnenblume", "Sonnenblume"),
        ("das WLAN-Passwort ist: Regenbogen", "Regenbogen"),
        ("le mot de passe est : tournesol", "tournesol"),
        ("le mot de passe du wifi est : papillon.", "papillon"),
        ("la contraseña es: girasol", "girasol"),
        ("het wachtwoord is: zonnebloem", "zonnebloem"),
        ("la password è: girasole", "girasole"),
        ("a senha é: girassol", "girassol"),
    ):
        c.secret("password_statement", value, text)
    for text in (
        "Das Passwort ist: falsch",
        "Das Passwort ist: abgelaufen",
        "le mot de passe est : incorrect",
        "le mot de passe est : expiré",
        "la contraseña es: obligatoria",
        "het wachtwoord is: onjuist",
        "la password è: scaduta",
        "a senha é: fraca",
    ):
        c.lookalike("other_language_described_after_a_verb_and_a_colon", text)


def build_quoted_two_word_passphrases(c: Corpus) -> None:
    """A passphrase of two words in quotes in a sentence, and two quoted words that say what
    a password is like."""
    for text, value in (
        ('the password is "open sesame"', "open sesame"),
        ("my wifi password is 'tiger rose'.", "tiger rose"),
        ("the vault passphrase is `blue monkey`", "blue monkey"),
        ('FYI the admin password was "velvet anchor", change it', "velvet anchor"),
    ):
        c.secret("password_statement", value, text)
    for text in (
        'the password is "not set"',
        'the password is "too short"',
        'the password is "case sensitive"',
        'the error says the password is "too weak"',
        'the password is "same as username"',
        "the password is 'plain text'",
        'the password is "read only"',
    ):
        c.lookalike("password_described_in_quotes", text)


def build_test_logs(c: Corpus) -> None:
    """Test suites' logs, whose result lines start with PASS:, and a password given with PASS:
    outside one."""
    for shape in ("PASS: {v}", "USER: admin\nPASS: {v}\n"):
        value = chosen_password(c)
        c.secret("credential_assignment", value, shape.format(v=value))
    for text in (
        "PASS: addr2line\nPASS: ar long names\nFAIL: objdump -d\n",
        "PASS: gdb.base/break.exp: run to main\nPASS: gdb.base/break.exp: step\n",
        "============================================================================\n"
        "PASS: tests/test-parse.sh\nSKIP: tests/test-net.sh\nXFAIL: tests/test-old.sh\n",
        "Running ./gdb.ada/assign_1.exp ...\n  PASS: gdb.ada/assign_1.exp: set var $xxx to 1\n"
        "  UNSUPPORTED: gdb.ada/tasks.exp\n",
    ):
        c.lookalike("test_log", text)


BASE32 = string.ascii_uppercase + "234567"


def build_second_factors(c: Corpus) -> None:
    """TOTP seeds after a word that names a second factor, whole or in groups of four, and
    recovery codes after their words; and what mentions them but holds none."""
    for shape in (
        "TOTP seed: {v}",
        "the 2fa seed is {v}",
        "authenticator setup key {v} (scan the QR code instead)",
        "otp seed for the admin account: {v}",
    ):
        value = c.mixed(BASE32, c.rng.choice((16, 32)))
        c.secret("totp_seed", value, shape.format(v=value))
    for shape, lower in (("totp key: {v}", False), ("2FA setup key: {v}", True)):
        value = " ".join(c.mixed(BASE32, 4) for _ in range(8))
        value = value.lower() if lower else value
        c.secret("totp_seed", value, shape.format(v=value))
    for shape in (
        "recovery codes: {v} {w}",
        "GitHub recovery codes:\n{v}\n{w}\n",
        "backup codes\n- {v}\n- {w}",
        "your backup code is {v}",
    ):
        first, second = (
            c.mixed(string.ascii_lowercase + DIGITS, 5)
            + "-"
            + c.mixed(string.ascii_lowercase + DIGITS, 5)
            for _ in range(2)
        )
        c.secret("recovery_codes", first, shape.format(v=first, w=second))
    for text in (
        "enable 2FA in settings before the release",
        "recovery codes are shown once, store them in the vault",
        "error code: ABCD-1234",
        "totp key: JBSW EHPK PXPA BCDE",
        "the otp step is 30 seconds",
        "MFA devices: AB23 CD34",
    ):
        c.lookalike("second_factor_words", text)


def build_password_hashes(c: Corpus) -> None:
    """Hashes in htpasswd and shadow lines, and what names a hash but holds none."""
    crypt = "./" + ALNUM
    for shape, value in (
        ("admin:{v}", "$apr1$" + c.chars(crypt, 8) + "$" + c.chars(crypt, 22)),
        ("deploy:{v}", "$2y$05$" + c.chars(crypt, 53)),
        ("root:{v}:19000:0:99999:7:::", "$6$" + c.chars(crypt, 16) + "$" + c.chars(crypt, 86)),
        ("ops:{v}", "{SHA}" + c.chars(BASE64, 27) + "="),
    ):
        c.secret("password_hash", value, shape.format(v=value))
    for text in (
        "root:*:19000:0:99999:7:::",
        'fmt = "$6$%s$%s" % (salt, digest)',
        "bcrypt hashes start with $2b$12$ and a salt",
    ):
        c.lookalike("hash_words", text)


def build_chat_tokens(c: Corpus) -> None:
    """Token formats a literal inside or a `$` marks: FCM server keys and Braintree tokens."""
    for shape in ("FCM_SERVER_KEY={v}", "Firebase server key {v}"):
        value = "AAAA" + c.chars(URLSAFE, 7) + ":APA91b" + c.chars(URLSAFE, 134)
        c.secret("fcm_server_key", value, shape.format(v=value))
    for environment in ("production", "sandbox"):
        value = (
            f"access_token${environment}$" + c.chars(LOWER + DIGITS, 16) + "$" + c.chars(HEX, 32)
        )
        c.secret("braintree_token", value, f"BRAINTREE_ACCESS_TOKEN={value}")
    for text in (
        "FCM server keys hold :APA91b after AAAA and seven characters",
        "a Braintree token reads access_token$production$<merchant>$<hex>",
    ):
        c.lookalike("token_words", text)


def build_vendor_prefixed_tokens(c: Corpus) -> None:
    """Vendor tokens found by a prefix or shape of their own, each pasted bare in a chat line
    (no setting names it), and the same prefixes where nothing secret follows them."""

    def uid() -> str:
        return str(uuid.UUID(int=c.rng.getrandbits(128), version=4))

    upper_digits = UPPER + DIGITS
    tokens: list[tuple[str, str]] = [
        ("aws_session_token", "IQoJb3JpZ2luX2VjE" + c.mixed(BASE64, 400) + "="),
        ("aws_session_token", "FwoGZXIvYXdzE" + c.mixed(BASE64, 300)),
        ("tencent_secret_id", "AKID" + c.mixed(ALNUM, 32)),
        ("cloudflare_tunnel_token", "eyJhIjoi" + c.mixed(BASE64, 180) + "="),
        ("netlify_token", "nfp_" + c.mixed(ALNUM, 40)),
        ("vercel_token", "vcp_" + c.mixed(ALNUM, 56)),
        ("supabase_token", "sb_secret_" + c.mixed(URLSAFE, 31)),
        ("fly_io_token", "fm1r_" + c.mixed(BASE64, 140)),
        (
            "onepassword_secret_key",
            "-".join(
                ["A3", c.mixed(upper_digits, 6), c.mixed(upper_digits, 6)]
                + [c.mixed(upper_digits, 5) for _ in range(4)]
            ),
        ),
        ("gitlab_token", "glagent-" + c.mixed(URLSAFE, 50)),
        ("gitlab_token", "gloas-" + c.mixed(URLSAFE, 64)),
        ("gitlab_token", "glpat-" + c.mixed(URLSAFE, 36) + ".01." + c.mixed(LOWER + DIGITS, 7)),
        ("circleci_token", "CCIPRJ_" + c.mixed(ALNUM, 22) + "_" + c.mixed(HEX, 40)),
        ("sonarqube_token", "squ_" + c.mixed(HEX, 40)),
        ("intra42_client_secret", "s-s4t2ud-" + c.mixed(HEX, 64)),
        (
            "harness_token",
            "sat." + c.mixed(URLSAFE, 22) + "." + c.mixed(HEX, 24) + "." + c.mixed(ALNUM, 20),
        ),
        ("crates_io_token", "cio" + c.mixed(ALNUM, 29) + "Aa1"),
        ("elevenlabs_api_key", "sk_" + c.mixed(HEX, 48)),
        ("tavily_api_key", "tvly-dev-" + c.mixed(ALNUM, 32)),
        ("linear_api_key", "lin_oauth_" + c.mixed(HEX, 64)),
        ("slack_token", "xoxe.xoxp-1-" + c.mixed(upper_digits, 163)),
        ("new_relic_key", "NRII-" + c.mixed(URLSAFE, 32)),
        ("hubspot_token", "pat-na1-" + uid()),
        ("intercom_token", "dG9rOj" + c.mixed(BASE64, 54) + "="),
        ("posthog_api_key", "phx_" + c.mixed(ALNUM, 47)),
        ("honeycomb_api_key", "hcaik_01" + c.mixed(LOWER + DIGITS, 56)),
        ("axiom_token", "xaat-" + uid()),
        ("clickup_token", "pk_" + c.chars(DIGITS, 8) + "_" + c.mixed(upper_digits, 32)),
        ("flutterwave_key", "FLWSECK_TEST" + c.mixed(HEX, 12)),
        (
            "paddle_api_key",
            "pdl_live_apikey_"
            + c.mixed(LOWER + DIGITS, 26)
            + "_"
            + c.mixed(ALNUM, 22)
            + "_"
            + c.mixed(ALNUM, 3),
        ),
        ("facebook_access_token", "EAAG" + c.mixed(ALNUM, 180)),
        ("google_oauth_refresh_token", "1//0" + c.mixed(URLSAFE, 99)),
        ("clickhouse_api_key", "4b1d" + c.mixed(ALNUM, 36) + "Qz"),
        ("maxmind_license_key", c.mixed(ALNUM, 6) + "_" + c.mixed(ALNUM, 29) + "_mmk"),
        ("openshift_token", "sha256~" + c.mixed(URLSAFE, 43)),
        (
            "salesforce_access_token",
            "00D" + c.mixed(ALNUM, 15) + "!AQ" + c.mixed(ALNUM + "._", 96),
        ),
    ]
    shapes = (
        "here is the token I used yesterday {v} -- can you check why the call fails?",
        "curl -sS -H 'X-Client: {v}' https://api.example.com/v1/items | jq .",
        "tried `{v}` and it still returns 401",
    )
    for index, (rule, value) in enumerate(tokens):
        c.secret(rule, value, shapes[index % len(shapes)].format(v=value))
    key = c.chars(HEX, 32)
    dsn = f"https://{key}@o{c.chars(DIGITS, 6)}.ingest.sentry.io/{c.chars(DIGITS, 7)}"
    c.secret("sentry_dsn", key, f'Sentry.init({{ dsn: "{dsn}", tracesSampleRate: 0.2 }})')
    hook = c.chars(HEX, 32) + "/" + uid()
    c.secret(
        "teams_webhook",
        hook,
        f"POST https://acme.webhook.office.com/webhookb2/{uid()}@{uid()}/IncomingWebhook/{hook}",
    )
    for text in (
        "GitLab tokens start with glpat-, glagent- or gloas- and the runner's with glrt-",
        "the AWS session token (IQoJb3JpZ2luX2Vj...) expires after an hour",
        "SonarQube user tokens begin with squ_ and project ones with sqp_",
        "set SUPABASE_SECRET_KEY to the sb_secret_... key, not the sb_publishable_ one",
        "run `oc whoami -t` to print your sha256~ token",
        "1Password Secret Keys look like A3-XXXXXX-XXXXXX-XXXXX-XXXXX-XXXXX-XXXXX",
        "image: registry.example.com/app@sha256:" + c.chars(HEX, 64),
        "the sentry dsn looks like https://<key>@o0.ingest.sentry.io/<project>",
        "clone https://git@github.com/acme/app.git and push to https://gitlab.com/acme/app",
        "snake_case names like sk_" + c.chars(LOWER, 12) + "_" + c.chars(LOWER, 10) + " stay",
        "vcp_ tokens are Vercel's, nfp_ ones Netlify's, phx_ PostHog's",
        "the build id is 4b1d" + c.chars(HEX, 36),
        "commit 4b1d" + c.chars(HEX, 36),
        "cioSessionHandler and cio_client are names, not tokens",
        "read https://" + c.chars(HEX, 32) + "@example.com/docs for the details",
        "page 1//0 of the report, see the 2nd chapter",
        "tvly-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx is the placeholder in Tavily's docs",
        "EAAG is the prefix of a Graph API token; EAAGxxxxxxxx means a redacted one",
        "pat-na1-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
        "see hubspot docs: private app tokens (pat-na1-...) replaced API keys",
        "s-s4t2ud- prefixes the intra client secret",
    ):
        c.lookalike("vendor_prefixes", text)
    encoded = base64.b64encode(jwt(c).encode()).decode()
    c.secret("jwt", encoded, f"apiVersion: v1\nkind: Secret\ndata:\n  sa: {encoded}\n")
    not_a_jwt = base64.b64encode(base64.b64encode(c.chars(ALNUM, 90).encode())).decode()
    c.lookalike("vendor_prefixes", f"payload: ZXlK{not_a_jwt}")


def build_wallet_keys(c: Corpus) -> None:
    """A BIP32 extended private key (every key of the wallet derives from it), and its public
    counterpart, which may be shared."""
    base58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    for prefix in ("xprv9s21ZrQH143K", "tprv8ZgxMBicQKsP"):
        key = prefix + c.mixed(base58, 95)
        c.secret("bip32_private_key", key, f"restore the test wallet from {key} and resync")
        c.lookalike("bip32_public_key", f"watch-only wallet: xpub661MyMwAqRbc{c.mixed(base58, 95)}")


def build() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    corpus = Corpus(SEED)
    build_secrets(corpus)
    build_lookalikes(corpus)
    build_password_lookalikes(corpus)
    build_sas_signatures(corpus)
    build_registry_auths(corpus)
    build_session_cookies(corpus)
    build_yaml_blocks(corpus)
    build_batch_and_piped_passwords(corpus)
    build_redis_passwords(corpus)
    build_pgpass_lines(corpus)
    build_settings_with_spaces(corpus)
    build_joined_word_passwords(corpus)
    build_other_language_passwords(corpus)
    build_sql_passwords(corpus)
    build_argument_passwords(corpus)
    build_cased_flag_passwords(corpus)
    build_passcodes(corpus)
    build_lower_case_settings_with_spaces(corpus)
    build_foreign_single_word_passwords(corpus)
    build_stated_digit_passwords(corpus)
    build_login_pairs(corpus)
    build_comparisons_in_block_headers(corpus)
    build_yaml_blocks_of_one_line(corpus)
    build_lower_case_pins(corpus)
    build_foreign_words_after_a_verb(corpus)
    build_passphrases_in_sentences(corpus)
    build_pin_settings(corpus)
    build_foreign_words_after_a_verb_and_a_colon(corpus)
    build_quoted_two_word_passphrases(corpus)
    build_test_logs(corpus)
    build_second_factors(corpus)
    build_password_hashes(corpus)
    build_chat_tokens(corpus)
    build_vendor_prefixed_tokens(corpus)
    build_wallet_keys(corpus)
    return corpus.secrets, corpus.lookalikes


def render(records: list[dict[str, str]]) -> str:
    return "".join(json.dumps(record, sort_keys=True) + "\n" for record in records)


def main() -> None:
    secrets, lookalikes = build()
    (HERE / "secrets.jsonl").write_text(render(secrets), encoding="utf-8")
    (HERE / "lookalikes.jsonl").write_text(render(lookalikes), encoding="utf-8")
    print(f"{len(secrets)} secrets, {len(lookalikes)} look-alikes")


if __name__ == "__main__":
    main()
