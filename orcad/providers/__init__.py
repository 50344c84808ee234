"""Extraction providers: build the one the configuration names.

The API key of the `openai` provider comes from the environment variable `api_key_env` names,
never from a file. A server on a loopback address (a local llama.cpp, vLLM, Ollama or LM Studio)
usually needs no key, so an unset or empty variable means "send no Authorization header" there;
for any other host it is a configuration error, because a hosted API would only answer 401.
So is a base URL no request can be sent to, or an environment (proxy variables, SSL_CERT_FILE)
in which no HTTP client can be made: found once here, instead of failing every attempt.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from orcad.config import ExtractionConfig
from orcad.providers.base import Provider, ProviderError

if TYPE_CHECKING:
    from orcad.providers.heuristic import FactJudge

__all__ = [
    "Provider",
    "ProviderConfigError",
    "ProviderError",
    "api_key_problem",
    "build_provider",
    "is_loopback_url",
]


class ProviderConfigError(Exception):
    """The configured provider cannot be used; the message names the key and what to do."""


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key_problem(key: str) -> str | None:
    """Why no HTTP header can carry this API key, or None. Never quotes the key: the HTTP
    library's own error would, as `Illegal header value b'Bearer <key>'`, in every message and
    log line that reports the failure."""
    if not key.isascii():
        return (
            "holds a character that is not ASCII, which no HTTP header can carry (a pasted "
            "ellipsis, a non-breaking or zero-width space?)"
        )
    if any(ord(character) < 0x20 or character == "\x7f" for character in key):
        return (
            "holds a control character, which no HTTP header can carry (a line break inside "
            "it, from a key pasted over two lines?)"
        )
    return None


def build_provider(
    config: ExtractionConfig, environ: Mapping[str, str], judge: FactJudge | None = None
) -> Provider:
    """The provider the configuration names; the offline one judges with `judge` (the fact
    classifier over recall's model), when given."""
    # Imported on demand so that the pure modules of this package never pull in trio or httpx.
    if config.provider == "heuristic":
        from orcad.providers.heuristic import HeuristicProvider  # noqa: PLC0415

        return HeuristicProvider(judge)
    if config.provider == "command":
        from orcad.providers.command import CommandProvider  # noqa: PLC0415

        if any("\x00" in word for word in config.command.argv):  # no process can be given it
            raise ProviderConfigError(
                "extraction.command.argv holds a NUL character (\\u0000); remove it"
            )
        return CommandProvider(config.command.argv)
    from orcad.providers.openai import OpenAIProvider, url_problem  # noqa: PLC0415
    from orcad.providers.openai_wire import shown_url  # noqa: PLC0415

    settings = config.openai
    if (problem := url_problem(settings.base_url)) is not None:
        raise ProviderConfigError(
            f"extraction.openai.base_url {shown_url(settings.base_url)!r} is not a valid URL "
            f"({problem}); "
            "use e.g. http://127.0.0.1:8080/v1"
        )
    parts = urlsplit(settings.base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ProviderConfigError(
            f"extraction.openai.base_url {shown_url(settings.base_url)!r} is not an http(s) URL; "
            "use e.g. http://127.0.0.1:8080/v1"
        )
    loopback = is_loopback_url(settings.base_url)
    api_key = environ.get(settings.api_key_env, "").strip() or None
    if api_key is None and not loopback and not settings.api_key_env:
        raise ProviderConfigError(
            f"extraction.openai.api_key_env is empty, and {parts.hostname} is not a loopback "
            "address, so it needs an API key: set api_key_env to the name of the environment "
            "variable that holds it"
        )
    if api_key is None and not loopback:
        raise ProviderConfigError(
            f"the environment variable {settings.api_key_env} (extraction.openai.api_key_env) is "
            f"not set, and {parts.hostname} is not a loopback address, so it needs an API key: "
            f"export {settings.api_key_env} in orcad's environment, or name another variable"
        )
    if api_key is not None and (problem := api_key_problem(api_key)) is not None:
        raise ProviderConfigError(
            f"the API key in {settings.api_key_env} {problem}; set the variable again"
        )
    # Proxy variables are for reaching the outside; a loopback server is always reached directly.
    provider = OpenAIProvider(settings, api_key=api_key, trust_env=not loopback)
    if (problem := provider.client_problem()) is not None:
        raise ProviderConfigError(
            f"cannot make an HTTP client for {shown_url(settings.base_url)} in orcad's environment "
            f"({problem}); check its proxy variables (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY) and "
            "SSL_CERT_FILE / SSL_CERT_DIR"
        )
    return provider
