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
    'password = "hunter2"',
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
    "password: Password123",
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


def build() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    corpus = Corpus(SEED)
    build_secrets(corpus)
    build_lookalikes(corpus)
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
