"""Doctor's checks of the models orcad calls: the extraction provider answers, and recall's
embedding model loads (or, with a daemon, what the daemon reports of it)."""

from __future__ import annotations

import base64
import os
import shutil
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from orcactl.commands.doctor_faults import Finding
from orcad.config import Config
from orcad.limits import DOCTOR_PROVIDER_TIMEOUT_S
from orcad.providers import is_loopback_url
from orcad.providers.openai_wire import shown_url, url_secrets
from orcad.secrets import redact, shorten_redacted
from protocol.types import EmbeddingStatus


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """urllib copies the Authorization header to wherever a redirect points: never follow one."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_REDIRECTS = urllib.request.build_opener(_RefuseRedirects)
# orcad reaches a loopback server directly, whatever proxy the environment names: so does this
_DIRECT = urllib.request.build_opener(_RefuseRedirects, urllib.request.ProxyHandler({}))


def check_provider(config: Config) -> Finding:
    extraction = config.extraction
    if extraction.provider == "heuristic":
        return Finding("provider", "ok", "heuristic extraction needs no provider")
    if extraction.provider == "command":
        program = extraction.command.argv[0]
        if shutil.which(program) is None:
            return Finding(
                "provider",
                "problem",
                f"extraction.command.argv[0] {program!r} {_not_runnable(program)}",
                "install it, or give its absolute path in [extraction.command] argv",
            )
        return Finding("provider", "ok", f"command {program!r} resolves to {shutil.which(program)}")
    openai = extraction.openai
    # httpx, which orcad loads for this provider: only then
    from orcad.providers.openai import url_problem  # noqa: PLC0415

    if (problem := url_problem(openai.base_url)) is not None:  # orcad would not build it
        return Finding(
            "provider",
            "problem",
            f"extraction.openai.base_url {shown_url(openai.base_url)!r} is not a valid URL "
            f"({problem})",
            "correct extraction.openai.base_url, e.g. http://127.0.0.1:8080/v1",
        )
    target = openai.base_url.rstrip("/") + "/models"
    url = shown_url(target)  # what the findings show: no credentials
    request = _models_request(target, os.environ.get(openai.api_key_env))
    secrets = tuple(filter(None, (os.environ.get(openai.api_key_env), *url_secrets(target))))
    try:
        opener = _DIRECT if is_loopback_url(target) else _NO_REDIRECTS
        with opener.open(request, timeout=DOCTOR_PROVIDER_TIMEOUT_S) as response:
            return Finding("provider", "ok", f"{url} answered {response.status}")
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:  # orcad does not follow redirects either
            location = _masked(exc.headers.get("Location") or "", secrets)
            return Finding(
                "provider",
                "problem",
                f"{url} answered {exc.code}, a redirect to {location!r}",
                "set extraction.openai.base_url to the final address",
            )
        if exc.code in (401, 403):
            return Finding(
                "provider",
                "problem",
                f"{url} refused the API key ({exc.code})",
                f"set {openai.api_key_env} to a valid key in orcad's environment",
            )
        return Finding(
            "provider",
            "problem",
            f"{url} answered {exc.code}",
            "check extraction.openai.base_url (it should end in /v1 for most servers)",
        )
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return Finding(
            "provider",
            "problem",
            f"{url} is unreachable: {reason}",
            "start the model server, or correct extraction.openai.base_url",
        )


def _not_runnable(program: str) -> str:
    """Why `program`, which shutil.which did not find, cannot be run. A name with a slash is
    a path: the command is run from it, and PATH is never searched."""
    if os.sep not in program:
        return "is not found on PATH"
    if not os.path.exists(program):
        return "does not exist"
    if os.path.isdir(program):
        return "is a directory"
    return "is not executable (chmod +x it)"


def _models_request(url: str, key: str | None) -> urllib.request.Request:
    """The GET of `url` orcad's client would make: credentials in the URL go as Basic
    authorization (as httpx sends them; urllib would take them for part of the host name),
    else the key as a bearer token."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        request = urllib.request.Request(url, method="GET")  # noqa: S310 - the configured one
        if key:
            request.add_header("Authorization", f"Bearer {key}")
        return request
    host = parts.netloc.rpartition("@")[2]
    plain = urlunsplit(parts._replace(netloc=host))
    request = urllib.request.Request(plain, method="GET")  # noqa: S310 - the configured one
    userinfo = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    request.add_header("Authorization", f"Basic {base64.b64encode(userinfo.encode()).decode()}")
    return request


def _masked(text: str, secrets: tuple[str, ...]) -> str:
    """`text` from the server (a redirect's Location), without the key or the URL's
    credentials it may echo, redacted whole and then shortened."""
    for secret in secrets:
        text = text.replace(secret, "[key]")
    return shorten_redacted(redact(text), 200)


def judge_embedding(embedding: EmbeddingStatus | None) -> Finding:
    """Recall's embedding model as the running daemon reports it."""
    if embedding is None:
        return Finding("embedding", "skipped", "the daemon does not report one")
    if embedding.state == "off":
        return Finding("embedding", "skipped", 'recall is lexical ([recall] embedding = "none")')
    if embedding.state == "unavailable":
        return Finding(
            "embedding",
            "problem",
            f"recall is lexical only: {embedding.reason}",
            embedding_fix(embedding.setting, embedding.reason or "") + ", then restart orcad",
        )
    if embedding.state == "loading":
        return Finding("embedding", "ok", f"{embedding.setting}: loading, just after start")
    detail = f"{embedding.model}: {embedding.embedded} records embedded"
    if embedding.pending:
        detail += f", {embedding.pending} pending (embedding in the background)"
    if embedding.reason:
        if embedding.setting == "endpoint":
            fix = (
                "make the server [recall.endpoint] base_url names answer (running, serving "
                "[recall.endpoint] model, given the key it needs); recall ranks by words while "
                "it fails, and orcad asks it again by itself, without a restart"
            )
        else:
            fix = (
                "recall ranks by words while the model fails; see orcad's log for the failure, "
                "and restart orcad if it goes on"
            )
        return Finding("embedding", "problem", f"{detail}; last failure: {embedding.reason}", fix)
    return Finding("embedding", "ok", detail)


def embedding_fix(setting: str, reason: str) -> str:
    """What to do when the model `setting` names cannot be loaded, for `reason`."""
    if setting == "builtin" or "onnxruntime cannot be imported" in reason:
        # the package's files damaged, or onnxruntime missing: "builtin" needs it too
        return 'reinstall orcad, or set [recall] embedding = "static" in config.toml'
    return 'fix [recall] embedding in config.toml, or set it to "builtin"'


def check_embedding_offline(config: Config) -> Finding:
    """Whether the configured embedding model loads, without a daemon."""
    from orcad.recall.embedders import EmbeddingUnavailable  # noqa: PLC0415 - numpy
    from orcad.recall.embedding import load_embedder  # noqa: PLC0415 - numpy

    setting = config.recall.embedding
    if setting == "none":
        return Finding("embedding", "skipped", 'recall is lexical ([recall] embedding = "none")')
    if setting == "endpoint":
        return Finding("embedding", "skipped", "an endpoint is checked by the running daemon")
    try:
        embedder = load_embedder(setting)
    except EmbeddingUnavailable as exc:
        return Finding(
            "embedding",
            "problem",
            f"{exc}; recall would be lexical only",
            embedding_fix(setting, str(exc)),
        )
    return Finding("embedding", "ok", f"{getattr(embedder, 'model_id', setting)} loads")
