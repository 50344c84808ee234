"""Provider token formats the secret detector knows: one row per format, data only.

Each row: rule name, trigger literals (any must occur in one of the text's long unbroken
runs), the pattern, and whether the match must sit on word boundaries. Patterns start with a
literal so the regex engine can skip ahead, and use single greedy character classes (no
nesting). Where a more specific format shares a prefix with a broader one (sk-or-v1- and sk-),
the specific row comes first: on equal spans the earlier row names the match.
"""

from __future__ import annotations

TokenRule = tuple[str, tuple[str, ...], str, bool]

_CLOUD: tuple[TokenRule, ...] = (
    (
        "aws_access_key_id",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}+",
        True,
    ),
    ("gcp_api_key", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])", True),
    ("google_oauth_client_secret", ("GOCSPX-",), r"GOCSPX-[A-Za-z0-9_\-]{28}", True),
    (
        "google_oauth_refresh_token",
        ("1//0",),
        r"1//0[A-Za-z0-9_\-]{40,512}+(?![A-Za-z0-9_\-])",
        True,
    ),
    # ClickHouse Cloud's API secret: 4b1d and 38 characters, never all lower-case hex
    (
        "clickhouse_api_key",
        ("4b1d",),
        r"4b1d(?=[A-Za-z0-9]{0,37}[A-Z])[A-Za-z0-9]{38}",
        True,
    ),
    (
        "google_oauth_access_token",
        ("ya29.",),
        r"ya29\.[A-Za-z0-9_\-]{30,2048}+(?![A-Za-z0-9_\-])",
        True,
    ),
    (
        "azure_storage_key",
        ("AccountKey=", "SharedAccessKey="),
        r"(?:Account|SharedAccess)Key=([A-Za-z0-9+/]{40,100}={0,2})",
        False,
    ),
    ("alibaba_access_key_id", ("LTAI",), r"LTAI[A-Za-z0-9]{20}", True),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), r"do[opr]_v1_[a-f0-9]{64}", True),
    ("heroku_api_key", ("HRKU-",), r"HRKU-[A-Za-z0-9_\-]{60,70}+(?![A-Za-z0-9_\-])", True),
    (
        "cloudflare_origin_ca_key",
        ("v1.0-",),
        r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
        True,
    ),
    ("databricks_token", ("dapi",), r"dapi[a-f0-9]{32}(?:-[0-9]{1,2})?", True),
    (
        "dynatrace_token",
        ("dt0c01.",),
        r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
        True,
    ),
    ("fly_io_token", ("fo1_",), r"fo1_[A-Za-z0-9_\-]{43}", True),
    ("fly_io_token", ("fm2_",), r"fm2_[A-Za-z0-9+/=_\-]{60,2000}+", True),
    ("fly_io_token", ("fm1a_", "fm1r_"), r"fm1[ar]_[A-Za-z0-9+/=_\-]{60,2000}+", True),
    ("render_api_key", ("rnd_",), r"rnd_[A-Za-z0-9]{32}", True),
    ("supabase_token", ("sbp_",), r"sbp_[a-f0-9]{40}", True),
    # the secret API key (the publishable one, sb_publishable_, ships in front ends)
    (
        "supabase_token",
        ("sb_secret_",),
        r"sb_secret_[A-Za-z0-9_\-]{24,64}+(?![A-Za-z0-9_\-])",
        True,
    ),
    ("neon_api_key", ("napi_",), r"napi_[a-z0-9]{64}", True),
    (
        "planetscale_token",
        ("pscale_tkn_", "pscale_pw_", "pscale_oauth_"),
        r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-=.]{32,64}+(?![A-Za-z0-9_\-=.])",
        True,
    ),
    ("scalingo_token", ("tk-us-",), r"tk-us-[A-Za-z0-9_\-]{48}", True),
    ("pulumi_token", ("pul-",), r"pul-[a-f0-9]{40}", True),
    (
        "vault_token",
        ("hvs.", "hvb.", "hvr."),
        r"hv[sbr]\.[A-Za-z0-9_\-]{24,400}+(?![A-Za-z0-9_\-])",
        True,
    ),
    # Vault's tokens before 1.10: `s.` and 24 characters, with a digit and both cases
    (
        "vault_token",
        ("s.",),
        r"s\.(?=[A-Za-z0-9]{0,23}[0-9])(?=[A-Za-z0-9]{0,23}[A-Z])(?=[A-Za-z0-9]{0,23}[a-z])"
        r"[A-Za-z0-9]{24}(?![A-Za-z0-9_\-.])",
        True,
    ),
    # AWS STS session tokens: base64 of a binary header every such token begins with
    (
        "aws_session_token",
        ("IQoJb3JpZ2luX2Vj",),
        r"IQoJb3JpZ2luX2Vj[A-Za-z0-9+/]{100,8192}+={0,2}",
        True,
    ),
    ("aws_session_token", ("FwoGZXIvYXdzE",), r"FwoGZXIvYXdzE[A-Za-z0-9+/]{100,8192}+={0,2}", True),
    ("tencent_secret_id", ("AKID",), r"AKID[A-Za-z0-9]{32}", True),
    # cloudflared's tunnel token: base64 of {"a":"<account>","t":"<tunnel>","s":"<secret>"}
    (
        "cloudflare_tunnel_token",
        ("eyJhIjoi",),
        r"eyJhIjoi[A-Za-z0-9+/]{100,1024}+={0,2}",
        True,
    ),
    ("netlify_token", ("nfp_",), r"nfp_[A-Za-z0-9]{36,48}", True),
    (
        "vercel_token",
        ("vcp_", "vci_", "vca_", "vcr_", "vck_"),
        r"vc[pciark]_[A-Za-z0-9]{24,80}+(?![A-Za-z0-9_])",
        True,
    ),
    # a service token names its config between its kind and the token (dp.st.prd.…)
    (
        "doppler_token",
        ("dp.",),
        r"dp\.(?:pt|st(?:\.[a-z0-9_\-]{2,35})?|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}",
        True,
    ),
    (
        "onepassword_token",
        ("ops_eyJ",),
        r"ops_eyJ[A-Za-z0-9+/]{100,4000}+={0,3}",
        True,
    ),
    # a 1Password account's Secret Key (with the password, it opens the account)
    (
        "onepassword_secret_key",
        ("A3-",),
        r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        True,
    ),
    (
        "age_secret_key",
        ("AGE-SECRET-KEY-1",),
        r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
        True,
    ),
    # a BIP32 extended private key: every key of a wallet derives from it (tprv: testnet's)
    ("bip32_private_key", ("xprv",), r"xprv[1-9A-HJ-NP-Za-km-z]{107,108}+", True),
    ("bip32_private_key", ("tprv",), r"tprv[1-9A-HJ-NP-Za-km-z]{107,108}+", True),
    (
        "tailscale_key",
        ("tskey-",),
        r"tskey-(?:api|auth|client|webhook|scim)-[A-Za-z0-9]{6,20}-[A-Za-z0-9]{20,64}",
        True,
    ),
)

_CODE_HOSTS: tuple[TokenRule, ...] = (
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"gh[pousr]_[A-Za-z0-9]{36,251}+(?![A-Za-z0-9_])",
        True,
    ),
    ("github_token", ("github_pat_",), r"github_pat_[A-Za-z0-9_]{50,255}", True),
    (
        "gitlab_token",
        (
            "glpat-",
            "gldt-",
            "glrt-",
            "glptt-",
            "glcbt-",
            "glimt-",
            "glft-",
            "glsoat-",
            "glagent-",
            "gloas-",
            "glffct-",
        ),
        # a routable token (GitLab 17) runs on past its payload: .<version><crc>
        r"gl(?:pat|dt|rt|ptt|cbt|imt|ft|soat|agent|oas|ffct)-[A-Za-z0-9_\-]{20,300}+"
        r"(?:\.[0-9a-z]{2}\.?[0-9a-z]{7})?(?![A-Za-z0-9_\-])",
        True,
    ),
    ("gitlab_token", ("GR1348941",), r"GR1348941[A-Za-z0-9_\-]{20,64}+(?![A-Za-z0-9_\-])", True),
    (
        "bitbucket_token",
        ("ATBB", "ATCTT", "ATATT"),
        r"AT(?:BB|CTT|ATT)[A-Za-z0-9_=.\-]{28,255}+(?![A-Za-z0-9_=.\-])",
        True,
    ),
    ("sourcegraph_token", ("sgp_",), r"sgp_(?:[a-fA-F0-9]{16}_)?[a-f0-9]{40}", True),
    ("buildkite_token", ("bkua_",), r"bkua_[a-f0-9]{40}", True),
    ("circleci_token", ("CCIPAT_", "CCIPRJ_"), r"CCIP(?:AT|RJ)_[A-Za-z0-9]{22}_[a-f0-9]{40}", True),
    # 42's intra API client secret
    ("intra42_client_secret", ("s-s4t2",), r"s-s4t2(?:ud|af)-[a-f0-9]{64}", True),
    ("sonarqube_token", ("squ_", "sqp_", "sqa_"), r"sq[upa]_[a-f0-9]{40}", True),
    (
        "docker_hub_token",
        ("dckr_pat_", "dckr_oat_"),
        r"dckr_(?:pat|oat)_[A-Za-z0-9_\-]{27,40}+(?![A-Za-z0-9_\-])",
        True,
    ),
    ("jfrog_token", ("AKCp",), r"AKCp[A-Za-z0-9]{69}", True),
    ("jfrog_token", ("cmVmdGtu",), r"cmVmdGtu[A-Za-z0-9]{56}", True),
    (
        "harness_token",
        ("pat.",),
        r"pat\.[A-Za-z0-9_\-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}",
        True,
    ),
    (
        "harness_token",
        ("sat.",),
        r"sat\.[A-Za-z0-9_\-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}",
        True,
    ),
    ("airtable_token", ("pat",), r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}", True),
    ("octopus_deploy_api_key", ("API-",), r"API-[A-Z0-9]{26}", True),
    ("npm_token", ("npm_",), r"npm_[A-Za-z0-9]{36}", True),
    # crates.io: cio and 32 characters of mixed case and digits
    (
        "crates_io_token",
        ("cio",),
        r"cio(?=[A-Za-z0-9]{0,31}[0-9])(?=[A-Za-z0-9]{0,31}[A-Z])(?=[A-Za-z0-9]{0,31}[a-z])"
        r"[A-Za-z0-9]{32}",
        True,
    ),
    ("pypi_token", ("pypi-AgE",), r"pypi-AgE[A-Za-z0-9_\-]{50,400}+(?![A-Za-z0-9_\-])", True),
    ("rubygems_api_key", ("rubygems_",), r"rubygems_[a-f0-9]{48}", True),
    ("nuget_api_key", ("oy2",), r"oy2[a-z0-9]{43}", True),
    ("clojars_token", ("CLOJARS_",), r"CLOJARS_[a-z0-9]{60}", True),
    ("deno_deploy_token", ("ddp_",), r"ddp_[A-Za-z0-9]{36}", True),
    ("prefect_api_key", ("pnu_",), r"pnu_[A-Za-z0-9]{36}", True),
    ("readme_api_key", ("rdme_",), r"rdme_[a-z0-9]{70}", True),
    ("infracost_api_key", ("ico-",), r"ico-[A-Za-z0-9]{32}", True),
    ("postman_api_key", ("PMAK-",), r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", True),
)

_AI: tuple[TokenRule, ...] = (
    (
        "anthropic_api_key",
        ("sk-ant-",),
        r"sk-ant-[a-z0-9]{2,12}-[A-Za-z0-9_\-]{40,200}+(?![A-Za-z0-9_\-])",
        True,
    ),
    ("openrouter_api_key", ("sk-or-v1-",), r"sk-or-v1-[a-f0-9]{64}", True),
    (
        "openai_api_key",
        ("sk-",),
        r"sk-(?<![A-Za-z0-9_\-]sk-)(?:(?:proj|svcacct|admin|None)-)?[A-Za-z0-9_\-]{32,200}+(?![A-Za-z0-9_\-])",
        True,
    ),
    ("huggingface_token", ("hf_",), r"hf_[A-Za-z0-9]{34,40}", True),
    ("huggingface_token", ("api_org_",), r"api_org_[A-Za-z0-9]{34}", True),
    ("groq_api_key", ("gsk_",), r"gsk_[A-Za-z0-9]{52}", True),
    ("xai_api_key", ("xai-",), r"xai-[A-Za-z0-9]{80}", True),
    ("perplexity_api_key", ("pplx-",), r"pplx-[A-Za-z0-9]{48}", True),
    ("replicate_token", ("r8_",), r"r8_[A-Za-z0-9]{37}", True),
    (
        "langsmith_api_key",
        ("lsv2_pt_", "lsv2_sk_"),
        r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
        True,
    ),
    ("elevenlabs_api_key", ("sk_",), r"sk_[a-f0-9]{48}", True),
    ("tavily_api_key", ("tvly-",), r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{32}", True),
    ("pinecone_api_key", ("pcsk_",), r"pcsk_[A-Za-z0-9]{4,8}_[A-Za-z0-9]{50,80}", True),
)

_MESSAGING: tuple[TokenRule, ...] = (
    # (a configuration token carries xoxe. before its own prefix: xoxe.xoxp-1-...)
    (
        "slack_token",
        ("xox",),
        r"xox(?:e\.xox)?[abeoprs]-[0-9A-Za-z\-]{10,250}+(?![0-9A-Za-z\-])",
        True,
    ),
    ("slack_token", ("xapp-",), r"xapp-[0-9]-[0-9A-Za-z\-]{20,250}+(?![0-9A-Za-z\-])", True),
    (
        "slack_webhook",
        ("hooks.slack.com/",),
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/]{20,200}",
        False,
    ),
    # Mattermost's incoming webhook, which takes Slack's payload: its id, 26 small letters and
    # digits, is all it asks (a path of words, a docs page on React's hooks, holds no digit)
    (
        "slack_webhook",
        ("/hooks/",),
        r"/hooks/((?=[a-z]{0,25}[0-9])[a-z0-9]{26})(?![A-Za-z0-9_\-])",
        False,
    ),
    (
        "discord_webhook",
        ("/api/webhooks/",),
        r"/api/webhooks/([0-9]{15,21}/[A-Za-z0-9_\-]{60,80})(?![A-Za-z0-9_\-])",
        False,
    ),
    ("twilio_api_key", ("SK",), r"SK[0-9a-fA-F]{32}", True),
    ("twilio_account_sid", ("AC",), r"AC[0-9a-f]{32}", True),
    ("sendgrid_api_key", ("SG.",), r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", True),
    ("mailgun_api_key", ("key-",), r"key-[0-9a-f]{32}", True),
    ("brevo_api_key", ("xkeysib-",), r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", True),
    ("resend_api_key", ("re_",), r"re_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}", True),
    ("linear_api_key", ("lin_api_",), r"lin_api_[A-Za-z0-9]{40}", True),
    ("linear_api_key", ("lin_oauth_",), r"lin_oauth_[a-f0-9]{64}", True),
    ("notion_token", ("ntn_",), r"ntn_[0-9]{11}[A-Za-z0-9]{35}", True),
    ("notion_token", ("secret_",), r"secret_[A-Za-z0-9]{43}", True),
    # the same, as people copy one by hand or make one up for a test: 40 to 50 characters with
    # a digit, a capital and a small letter (no identifier runs so long without a `_`)
    (
        "notion_token",
        ("secret_",),
        r"secret_(?=[a-z0-9]{0,49}[A-Z])(?=[A-Z0-9]{0,49}[a-z])(?=[A-Za-z]{0,49}[0-9])"
        r"[A-Za-z0-9]{40,50}+(?![A-Za-z0-9])",
        True,
    ),
    ("figma_token", ("figd_",), r"figd_[A-Za-z0-9_\-]{40}", True),
    ("typeform_token", ("tfp_",), r"tfp_[A-Za-z0-9_\-.=]{59}", True),
    ("contentful_token", ("CFPAT-",), r"CFPAT-[A-Za-z0-9_\-]{43}", True),
    (
        "dropbox_token",
        ("sl.",),
        r"sl\.(?:u\.)?[A-Za-z0-9_\-=]{130,1400}+(?![A-Za-z0-9_\-=])",
        True,
    ),
    ("frameio_token", ("fio-u-",), r"fio-u-[A-Za-z0-9_\-=]{64}", True),
    (
        "sentry_token",
        ("sntryu_",),
        r"sntryu_[a-f0-9]{64}",
        True,
    ),
    ("sentry_token", ("sntrys_",), r"sntrys_[A-Za-z0-9+/=_]{60,600}+", True),
    ("grafana_token", ("glsa_",), r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", True),
    ("grafana_token", ("glc_",), r"glc_[A-Za-z0-9+/]{32,400}+={0,2}", True),
    ("grafana_token", ("eyJrIjoi",), r"eyJrIjoi[A-Za-z0-9]{50,100}+={0,2}", True),
    ("new_relic_key", ("NRAK-",), r"NRAK-[A-Z0-9]{27}", True),
    ("new_relic_key", ("NRII-",), r"NRII-[A-Za-z0-9_\-]{32}", True),
    (
        "hubspot_token",
        ("pat-na", "pat-eu", "pat-ap"),
        r"pat-(?:na|eu|ap)[0-9]-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        True,
    ),
    # Intercom's access tokens are base64 of "tok:..."
    ("intercom_token", ("dG9rOj",), r"dG9rOj[A-Za-z0-9+/]{40,200}+={0,2}", True),
    ("posthog_api_key", ("phx_",), r"phx_[A-Za-z0-9]{40,50}", True),
    (
        "honeycomb_api_key",
        ("hcaik_", "hcxik_", "hcamk_", "hcxmk_"),
        r"hc[ax][im]k_[A-Za-z0-9]{20,80}+(?![A-Za-z0-9_])",
        True,
    ),
    (
        "axiom_token",
        ("xaat-", "xapt-"),
        r"xa[ap]t-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        True,
    ),
    ("clickup_token", ("pk_",), r"pk_[0-9]{6,12}_[A-Z0-9]{32}", True),
    # a Teams channel's incoming webhook: anyone holding the URL posts to the channel
    (
        "teams_webhook",
        ("IncomingWebhook/",),
        r"IncomingWebhook/([a-f0-9]{32}/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        r"(?:/V2[A-Za-z0-9_\-]{20,100}+)?)",
        False,
    ),
    (
        "mapbox_secret_token",
        ("sk.eyJ",),
        r"sk\.eyJ[A-Za-z0-9_\-]{20,200}+\.[A-Za-z0-9_\-]{20,100}+",
        True,
    ),
    ("adobe_client_secret", ("p8e-",), r"p8e-[A-Za-z0-9]{32}", True),
)

_PAYMENTS: tuple[TokenRule, ...] = (
    (
        "stripe_secret_key",
        ("sk_live_", "sk_test_"),
        r"sk_(?:live|test)_[A-Za-z0-9]{16,99}+(?![A-Za-z0-9_])",
        True,
    ),
    (
        "stripe_secret_key",
        ("rk_live_", "rk_test_"),
        r"rk_(?:live|test)_[A-Za-z0-9]{16,99}+(?![A-Za-z0-9_])",
        True,
    ),
    ("stripe_secret_key", ("whsec_",), r"whsec_[A-Za-z0-9+/]{32,100}+(?![A-Za-z0-9_])", True),
    (
        "shopify_token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        True,
    ),
    (
        "square_token",
        ("sq0atp-", "sq0csp-"),
        r"sq0(?:atp-[0-9A-Za-z_\-]{22}|csp-[0-9A-Za-z_\-]{43})",
        True,
    ),
    ("square_token", ("EAAA",), r"EAAA[A-Za-z0-9_\-+]{60,1024}+(?![A-Za-z0-9_\-+])", True),
    (
        "shippo_token",
        ("shippo_live_", "shippo_test_"),
        r"shippo_(?:live|test)_[a-f0-9]{40}",
        True,
    ),
    (
        "duffel_token",
        ("duffel_test_", "duffel_live_"),
        r"duffel_(?:test|live)_[A-Za-z0-9_\-=]{43}",
        True,
    ),
    ("easypost_api_key", ("EZAK", "EZTK"), r"EZ[AT]K[A-Za-z0-9]{54}", True),
    ("flutterwave_key", ("FLWSECK",), r"FLWSECK(?:_TEST)?-[a-f0-9]{32}-X", True),
    # its encryption key: the same head and 12 hex digits
    ("flutterwave_key", ("FLWSECK",), r"FLWSECK(?:_TEST)?-?[a-f0-9]{12}", True),
    (
        "paddle_api_key",
        ("pdl_live_apikey_", "pdl_sdbx_apikey_"),
        r"pdl_(?:live|sdbx)_apikey_[a-z0-9]{26}_[A-Za-z0-9]{22}_[A-Za-z0-9]{3}",
        True,
    ),
    # Meta's Graph API access tokens (EAAA is Square's, above): mixed-case letters and digits,
    # never a hex digest printed in capitals (a SHA-512 from Get-FileHash or certutil), whose
    # first 25 characters, unlike a token's, are all A-F and digits
    (
        "facebook_access_token",
        ("EAA",),
        r"EAA[B-Z](?=[A-F0-9]{0,24}+[G-Za-z])[A-Za-z0-9]{100,1024}+(?![A-Za-z0-9_\-+])",
        True,
    ),
    (
        "plaid_access_token",
        ("access-production-", "access-sandbox-", "access-development-"),
        r"access-(?:sandbox|development|production)-"
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        True,
    ),
    (
        "jwt",
        ("eyJ",),
        r"eyJ[A-Za-z0-9_\-]{10,8192}+\.[A-Za-z0-9_\-]{10,8192}+\.[A-Za-z0-9_\-]{16,8192}+",
        True,
    ),
)

TOKEN_RULES: tuple[TokenRule, ...] = (*_CLOUD, *_CODE_HOSTS, *_AI, *_MESSAGING, *_PAYMENTS)

# Token alphabets with - or _ (or a short prefix) can also spell ordinary names: these must
# not read as words or labels (kebab-case flags, snake_case identifiers).
WORDY_RULES = frozenset(
    {
        "openai_api_key",
        "anthropic_api_key",
        "slack_token",
        "gitlab_token",
        "bitbucket_token",
        "pypi_token",
        "heroku_api_key",
        "square_token",
        "jwt",
        "google_oauth_access_token",
        "vault_token",
        "notion_token",
        "octopus_deploy_api_key",
        "resend_api_key",
        "adobe_client_secret",
        "docker_hub_token",
        "planetscale_token",
        "dropbox_token",
        "fly_io_token",
        "sentry_token",
        "grafana_token",
        "typeform_token",
        "frameio_token",
        "supabase_token",
        "google_oauth_refresh_token",
    }
)

# Formats whose distinctive literal sits inside the token, after a fixed-length head: found by
# searching for the literal and matching from `head` characters before it (a pattern that
# starts with a character class would make the regex engine try every position).
# (rule name, literal, head length, pattern)
ANCHORED_RULES: tuple[tuple[str, str, int, str], ...] = (
    (
        "terraform_cloud_token",
        ".atlasv1.",
        14,
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,70}+(?![A-Za-z0-9_\-=])",
    ),
    (
        "mailchimp_api_key",
        "-us",
        32,
        r"(?<![A-Za-z0-9])[a-f0-9]{32}-us[0-9]{1,2}(?![A-Za-z0-9])",
    ),
    # MaxMind's license key: 6 characters, _, 29 more, and _mmk
    (
        "maxmind_license_key",
        "_mmk",
        36,
        r"(?<![A-Za-z0-9_])[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk(?![A-Za-z0-9_])",
    ),
    # Firebase Cloud Messaging's legacy server key: AAAA and 7 characters, then :APA91b and
    # about 134 more (the colon ends the text's run, so the literal is the run after it)
    (
        "fcm_server_key",
        "APA91b",
        12,
        r"(?<![A-Za-z0-9_\-])AAAA[A-Za-z0-9_\-]{7}:APA91b[A-Za-z0-9_\-]{100,200}+(?![A-Za-z0-9_\-])",
    ),
)
