"""The openai provider against a real scripted chat-completions server on loopback."""

from __future__ import annotations

import base64
import email.utils
import gzip
import importlib.util
import json
import socket
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from orcad import limits
from orcad.capture.output import MalformedOutput, parse_extractor_output
from orcad.config import ExtractionConfig, OpenAIConfig
from orcad.providers import ProviderConfigError, build_provider, prompt
from orcad.providers.base import ProviderError
from orcad.providers.openai import OpenAIProvider
from orcad.providers.openai_wire import error_reason, request_body
from tests.fake_openai import (
    Behaviour,
    FakeOpenAI,
    completion_json,
    disconnect_mid_stream,
    endless_body,
    endless_stream,
    gzipped,
    junk,
    ok,
    sse_event,
    stall_before_headers,
    status,
    streamed,
)

pytestmark = pytest.mark.inprocess

KEY_VARIABLE = "ORCA_TEST_EXTRACTOR_KEY"
KEY = "sk-test-5e1f0c9a7b3d4e2f8a6c1b0d9e7f3a2c"
SOURCE = "user: remember that this repository deploys with `make release`\n\nassistant: Noted."
ANSWER = '{"category": "project", "fact": "This repository deploys with `make release`."}'
OTHER_TOKEN = "ghp_" + "Qm8vT2pL9xR4nK7sW1zY6bH3cJ5fD0gA9eK2"  # not the configured key


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as running:
        yield running


def make_provider(
    server: FakeOpenAI, *, stream: bool = True, idle: float = 1.0, key: str | None = KEY
) -> OpenAIProvider:
    settings = OpenAIConfig(
        base_url=server.base_url,
        model="test-model",
        api_key_env=KEY_VARIABLE,
        connect_timeout_s=2.0,
        idle_timeout_s=idle,
        stream=stream,
    )
    environ = {KEY_VARIABLE: key} if key is not None else {}
    provider = build_provider(ExtractionConfig(provider="openai", openai=settings), environ)
    assert isinstance(provider, OpenAIProvider)
    return provider


async def extract(provider: OpenAIProvider, within: float = 5.0) -> str:
    return await provider.extract(SOURCE, deadline=trio.current_time() + within)


async def failure(provider: OpenAIProvider, within: float = 5.0) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await extract(provider, within)
    return caught.value


async def test_streamed_answer_is_reassembled_and_request_is_exact(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, chunk_chars=2))
    assert await extract(make_provider(server)) == ANSWER
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    expected = request_body(
        "test-model", prompt.render_messages(SOURCE), stream=True, temperature=0.0
    )
    assert request.body == expected
    assert request.json()["messages"][1]["content"].endswith(SOURCE)
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["accept"] == "text/event-stream"


async def test_server_that_does_not_stream_is_read_as_one_answer(server: FakeOpenAI) -> None:
    server.script(ok(ANSWER))
    assert await extract(make_provider(server)) == ANSWER


async def test_stream_disabled_asks_for_one_json_answer(server: FakeOpenAI) -> None:
    server.script(ok("NOTHING"))
    assert await extract(make_provider(server, stream=False)) == "NOTHING"
    assert server.requests[0].json()["stream"] is False


async def test_silence_longer_than_idle_timeout_fails(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, stall_after_first_s=10.0))
    error = await failure(make_provider(server, idle=0.3))
    assert "silent for more than 0.3 s" in error.message
    assert error.retry_after is None


async def test_silence_before_any_byte_counts_as_idle_when_streaming(server: FakeOpenAI) -> None:
    server.script(stall_before_headers(10.0))
    error = await failure(make_provider(server, idle=0.3))
    assert "silent" in error.message


async def test_stall_shorter_than_idle_timeout_succeeds(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, stall_after_first_s=0.3))
    assert await extract(make_provider(server, idle=2.0)) == ANSWER


async def test_keepalives_do_not_extend_the_overall_deadline(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, stall_after_first_s=10.0, keepalive_every_s=0.1))
    error = await failure(make_provider(server, idle=1.0), within=0.8)
    assert error.message.startswith("timed out")


async def test_answer_slower_than_deadline_fails_though_never_idle(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, chunk_chars=1, gap_s=0.05))  # ~75 pieces, ~3.7 s in all
    error = await failure(make_provider(server, idle=1.0), within=0.8)
    assert error.message.startswith("timed out")


async def test_http_500_records_status_and_reason(server: FakeOpenAI) -> None:
    server.script(status(500, "model crashed\nwhile loading"))
    error = await failure(make_provider(server))
    assert (
        error.message
        == f"HTTP 500 from {server.base_url}/chat/completions: model crashed while loading"
    )
    assert error.retry_after is None


async def test_429_carries_retry_after_seconds(server: FakeOpenAI) -> None:
    server.script(status(429, "slow down", retry_after="7"))
    error = await failure(make_provider(server))
    assert "HTTP 429" in error.message
    assert error.retry_after == 7.0


async def test_503_carries_retry_after_http_date(server: FakeOpenAI) -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    server.script(status(503, "overloaded", retry_after=when))
    error = await failure(make_provider(server))
    assert error.retry_after is not None
    assert 100 < error.retry_after <= 121


async def test_retry_after_on_other_statuses_is_ignored(server: FakeOpenAI) -> None:
    server.script(status(500, "boom", retry_after="7"))
    assert (await failure(make_provider(server))).retry_after is None


async def test_error_reason_never_echoes_the_key(server: FakeOpenAI) -> None:
    server.script(status(401, f"Incorrect API key provided: {KEY}"))
    error = await failure(make_provider(server))
    assert KEY not in error.message
    assert "[key]" in error.message


@pytest.mark.parametrize(
    "url", ["ftp://deploy:hunter2@127.0.0.1/v1", "http://deploy:hunter2@127.0.0.1:99999/v1"]
)
def test_a_base_url_refused_at_start_is_shown_without_its_credentials(url: str) -> None:
    """The message is logged and listed in daemon.status: a password too plain for the
    redactor to know must not be in it."""
    settings = OpenAIConfig(base_url=url)
    with pytest.raises(ProviderConfigError) as caught:
        build_provider(ExtractionConfig(provider="openai", openai=settings), {})
    assert "hunter2" not in str(caught.value)
    assert "deploy:" not in str(caught.value)
    assert "[credentials]@127.0.0.1" in str(caught.value)


def test_an_empty_api_key_env_is_no_key_on_loopback_and_named_elsewhere() -> None:
    loopback = OpenAIConfig(base_url="http://127.0.0.1:8080/v1", api_key_env="")
    provider = build_provider(ExtractionConfig(provider="openai", openai=loopback), {"": "x"})
    assert isinstance(provider, OpenAIProvider)
    remote = OpenAIConfig(base_url="https://api.example.com/v1", api_key_env="")
    with pytest.raises(ProviderConfigError) as caught:
        build_provider(ExtractionConfig(provider="openai", openai=remote), {})
    assert str(caught.value).startswith("extraction.openai.api_key_env is empty, and ")


async def test_https_to_a_plain_http_server_says_what_tls_found(server: FakeOpenAI) -> None:
    """httpx under trio raises a ConnectError with no text of its own; the TLS error under it
    says what happened."""
    settings = OpenAIConfig(base_url=server.base_url.replace("http://", "https://"))
    provider = build_provider(ExtractionConfig(provider="openai", openai=settings), {})
    assert isinstance(provider, OpenAIProvider)
    error = await failure(provider)
    assert error.message.startswith(f"cannot connect to {provider.url}: [SSL")
    assert "ConnectError" not in error.message


def echo_authorization(handler: Any, state: FakeOpenAI) -> None:
    """A 500 whose body quotes the Authorization header the request came with."""
    echoed = f"rejected credentials {handler.headers.get('Authorization')}".encode()
    handler.send_fixed(500, echoed, "text/plain", {})


@pytest.mark.parametrize("password", ["hunter2", "Tr0ub4dor3-horse-battery"])
async def test_credentials_in_the_base_url_are_never_shown_or_echoed(
    server: FakeOpenAI, password: str
) -> None:
    """httpx sends a URL's user name and password as Basic authorization: neither they nor
    that header's token, which a server may quote back, is in the error kept in the job."""
    server.script(echo_authorization, stall_before_headers(10.0))
    base_url = server.base_url.replace("http://", f"http://deploy:{password}@")
    settings = OpenAIConfig(base_url=base_url, connect_timeout_s=2.0, idle_timeout_s=0.3)
    provider = build_provider(ExtractionConfig(provider="openai", openai=settings), {})
    assert isinstance(provider, OpenAIProvider)
    token = base64.b64encode(f"deploy:{password}".encode()).decode()
    errors = [await failure(provider), await failure(provider)]
    assert server.requests[0].headers["authorization"] == f"Basic {token}"
    assert "rejected credentials Basic [key]" in errors[0].message
    assert "silent for more than 0.3 s" in errors[1].message
    for error in errors:
        assert "http://[credentials]@127.0.0.1:" in error.message
        assert password not in error.message and token not in error.message
    assert password not in repr(provider)


@pytest.mark.parametrize("stream", [True, False])
async def test_an_error_inside_a_200_answer_never_echoes_the_key(
    server: FakeOpenAI, stream: bool
) -> None:
    """Some gateways answer 200 with an error object; its message must not carry the key."""
    error_object = json.dumps({"error": {"message": f"key {KEY} is not allowed for this model"}})
    if stream:
        server.script(junk(f"data: {error_object}\n\n".encode(), "text/event-stream"))
    else:
        server.script(junk(error_object.encode(), "application/json"))
    error = await failure(make_provider(server, stream=stream))
    assert "not allowed" in error.message
    assert KEY not in error.message and "[key]" in error.message
    assert KEY not in repr(error.__cause__) and KEY not in repr(error.__context__)


def redirect(code: int, location: str) -> Behaviour:
    """A redirect whose body is a well-formed completion, as a misconfigured proxy might send."""

    def respond(handler: Any, state: FakeOpenAI) -> None:
        body = completion_json(ANSWER)
        handler.send_fixed(code, body, "application/json", {"Location": location})

    return respond


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
async def test_a_redirect_is_a_failed_attempt_and_is_not_followed(
    server: FakeOpenAI, code: int
) -> None:
    server.script(redirect(code, f"{server.base_url}/elsewhere/chat/completions"))
    error = await failure(make_provider(server))  # before: its body was taken as the answer
    assert error.message == (
        f"HTTP {code} from {server.base_url}/chat/completions: "
        f"redirect to {server.base_url}/elsewhere/chat/completions not followed"
    )
    assert [request.path for request in server.requests] == ["/v1/chat/completions"]


async def test_any_status_outside_2xx_is_a_failed_attempt(server: FakeOpenAI) -> None:
    server.script(lambda handler, state: handler.send_fixed(300, b"", "text/plain", {}))
    error = await failure(make_provider(server))
    assert error.message == f"HTTP 300 from {server.base_url}/chat/completions: Multiple Choices"


async def test_a_secret_in_an_error_body_is_redacted_before_the_reason_is_cut(
    server: FakeOpenAI,
) -> None:
    server.script(status(401, "bad credentials " + "x" * 170 + " " + OTHER_TOKEN))
    error = await failure(make_provider(server))
    assert "Qm8v" not in error.message  # before: the first 15 characters of the token were kept
    assert "bad credentials" in error.message


async def test_the_key_in_a_long_error_inside_a_200_answer_is_masked_before_the_cut(
    server: FakeOpenAI,
) -> None:
    error_object = json.dumps({"error": {"message": "x" * 185 + " " + KEY}})
    server.script(junk(error_object.encode(), "application/json"))
    error = await failure(make_provider(server, stream=False))
    assert KEY[:12] not in error.message  # before: the key's start survived the cut


async def test_a_secret_cut_by_the_error_body_limit_is_dropped(server: FakeOpenAI) -> None:
    body = b"\n" * (4096 - 20) + OTHER_TOKEN.encode()  # the read limit cuts the token
    server.script(lambda handler, state: handler.send_fixed(502, body, "text/plain", {}))
    error = await failure(make_provider(server))
    assert "ghp_" not in error.message
    assert error.message == f"HTTP 502 from {server.base_url}/chat/completions: Bad Gateway"


async def test_a_secret_quoted_by_a_protocol_error_is_redacted_before_the_cut(
    server: FakeOpenAI,
) -> None:
    def bad_header(handler: Any, state: FakeOpenAI) -> None:
        line = b"y" * 145 + b" " + OTHER_TOKEN.encode()  # no colon: an illegal header line
        handler.wfile.write(b"HTTP/1.1 200 OK\r\n" + line + b"\r\n\r\n")
        handler.close_connection = True

    server.script(bad_header)
    error = await failure(make_provider(server))
    assert "illegal header line" in error.message
    assert "Qm8v" not in error.message  # before: the first 20 characters of the token were kept


async def test_junk_body_fails(server: FakeOpenAI) -> None:
    server.script(junk())
    error = await failure(make_provider(server))
    assert "not JSON" in error.message


async def test_junk_event_stream_fails(server: FakeOpenAI) -> None:
    server.script(junk(b"data: {{{ nonsense\n\n", content_type="text/event-stream"))
    error = await failure(make_provider(server))
    assert "not JSON" in error.message


async def test_junk_model_text_is_returned_for_the_parser_to_reject(server: FakeOpenAI) -> None:
    server.script(streamed("Sure! Here are some facts you might like."))
    assert await extract(make_provider(server)) == "Sure! Here are some facts you might like."


DEEP_JSON = b"[" * 5000  # nested past the JSON decoder's recursion limit


@pytest.mark.parametrize("stream", [True, False])
async def test_json_nested_too_deep_is_not_json(server: FakeOpenAI, stream: bool) -> None:
    if stream:
        server.script(junk(b"data: " + DEEP_JSON + b"\n\n", "text/event-stream"))
    else:
        server.script(junk(DEEP_JSON, "application/json"))
    error = await failure(make_provider(server, stream=stream))  # before: RecursionError
    assert "not JSON" in error.message


async def test_an_error_body_nested_too_deep_keeps_the_status_and_retry_after(
    server: FakeOpenAI,
) -> None:
    body = DEEP_JSON[:4000]  # within the error body's read limit
    server.script(
        lambda handler, state: handler.send_fixed(
            429, body, "application/json", {"Retry-After": "7"}
        )
    )
    error = await failure(make_provider(server))  # before: RecursionError, status lost
    assert error.message.startswith(f"HTTP 429 from {server.base_url}/chat/completions: ")
    assert error.retry_after == 7.0


async def test_disconnect_mid_stream_fails(server: FakeOpenAI) -> None:
    server.script(disconnect_mid_stream(ANSWER))
    error = await failure(make_provider(server))
    assert "broke off" in error.message


async def test_stream_that_ends_without_finishing_fails(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, finish_reason=None, send_done=False))
    error = await failure(make_provider(server))
    assert "ended before the answer was complete" in error.message


async def test_finish_reason_without_done_marker_is_complete(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, send_done=False))
    assert await extract(make_provider(server)) == ANSWER


# an emoji's UTF-16 halves, as separate characters: what a server escaping UTF-16 sends
ROCKET_HALVES = "\ud83d\ude80"


async def test_an_emoji_whose_halves_come_in_two_events_is_one_character(
    server: FakeOpenAI,
) -> None:
    answer = '{"category": "project", "fact": "Release tags end in ' + ROCKET_HALVES + '."}'
    server.script(streamed(answer, chunk_chars=1))  # one half per event
    output = await extract(make_provider(server))
    [fact] = parse_extractor_output(output)
    assert fact.fact == "Release tags end in \U0001f680."


async def test_a_lone_surrogate_in_a_stream_is_output_the_parser_refuses(
    server: FakeOpenAI,
) -> None:
    answer = '{"category": "project", "fact": "We deploy ' + ROCKET_HALVES[0] + ' with make."}'
    server.script(streamed(answer))
    output = await extract(make_provider(server))
    with pytest.raises(MalformedOutput, match="not valid UTF-8"):
        parse_extractor_output(output)


async def test_answer_cut_off_at_token_limit_fails(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, finish_reason="length"))
    error = await failure(make_provider(server))
    assert "cut off" in error.message


async def test_runaway_answer_is_stopped_at_the_output_limit(server: FakeOpenAI) -> None:
    server.script(streamed("x" * 20_000, chunk_chars=1000))
    error = await failure(make_provider(server))
    assert "grew past 16384 bytes" in error.message


async def test_endless_runaway_stream_fails_at_the_output_limit_not_the_deadline(
    server: FakeOpenAI,
) -> None:
    server.script(endless_stream(piece=sse_event("x" * 1000)))
    error = await failure(make_provider(server), within=10.0)
    assert "grew past 16384 bytes" in error.message


async def test_broken_event_followed_by_endless_keepalives_fails_at_once(
    server: FakeOpenAI,
) -> None:
    server.script(endless_stream(first=b"data: {not json\n\n"))
    error = await failure(make_provider(server), within=10.0)
    assert "not JSON" in error.message


async def test_event_that_never_ends_fails_before_it_fills_memory(server: FakeOpenAI) -> None:
    server.script(endless_stream(piece=b"data: " + b"x" * 60_000 + b"\n"))
    error = await failure(make_provider(server), within=10.0)
    assert "event larger than" in error.message


async def test_answer_done_before_the_server_falls_silent_is_returned(
    server: FakeOpenAI,
) -> None:
    server.script(streamed(ANSWER, hold_open_s=10.0))
    assert await extract(make_provider(server, idle=0.3)) == ANSWER


async def test_finished_answer_without_done_marker_survives_a_silent_server(
    server: FakeOpenAI,
) -> None:
    server.script(streamed(ANSWER, send_done=False, hold_open_s=10.0))
    assert await extract(make_provider(server, idle=0.3)) == ANSWER


async def test_unreachable_endpoint_says_so() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1", api_key_env=KEY_VARIABLE)
    provider = build_provider(ExtractionConfig(provider="openai", openai=settings), {})
    with pytest.raises(ProviderError, match=r"cannot connect to http://127\.0\.0\.1"):
        await provider.extract(SOURCE, deadline=trio.current_time() + 5)


async def test_cancellation_propagates_and_is_not_a_failure(server: FakeOpenAI) -> None:
    server.script(streamed(ANSWER, stall_after_first_s=10.0))
    provider = make_provider(server, idle=5.0)
    with trio.move_on_after(0.3) as scope:
        await extract(provider)
    assert scope.cancelled_caught


async def test_loopback_server_without_key_gets_no_authorization(server: FakeOpenAI) -> None:
    server.script(ok("NOTHING"))
    provider = make_provider(server, key=None)
    assert await extract(provider) == "NOTHING"
    assert "authorization" not in server.requests[0].headers
    assert "unset" in repr(provider)


def test_repr_never_shows_the_key() -> None:
    settings = OpenAIConfig(base_url="http://127.0.0.1:1/v1", api_key_env=KEY_VARIABLE)
    provider = build_provider(
        ExtractionConfig(provider="openai", openai=settings), {KEY_VARIABLE: KEY}
    )
    assert KEY not in repr(provider)
    assert KEY not in str(provider)


@pytest.mark.parametrize("url", ["https://api.example.com/v1", "http://10.1.2.3:8000/v1"])
def test_hosted_endpoint_without_key_is_a_config_error(url: str) -> None:
    settings = OpenAIConfig(base_url=url, api_key_env=KEY_VARIABLE)
    with pytest.raises(ProviderConfigError, match=KEY_VARIABLE):
        build_provider(ExtractionConfig(provider="openai", openai=settings), {KEY_VARIABLE: " "})


@pytest.mark.parametrize(
    "url", ["http://localhost:11434/v1", "http://[::1]:8080/v1", "http://127.0.0.2/v1"]
)
def test_loopback_endpoints_need_no_key(url: str) -> None:
    settings = OpenAIConfig(base_url=url, api_key_env=KEY_VARIABLE)
    assert build_provider(ExtractionConfig(provider="openai", openai=settings), {}).name == "openai"


def test_base_url_must_be_http() -> None:
    settings = OpenAIConfig(base_url="ftp://127.0.0.1/v1")
    with pytest.raises(ProviderConfigError, match="not an http"):
        build_provider(ExtractionConfig(provider="openai", openai=settings), {})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:abc/v1",  # before: httpx.InvalidURL on every attempt, then exhausted
        "http://127.0.0.1:99999/v1",
        "http://[::1/v1",  # before: ValueError from build_provider, and orcad would not start
        "http://[zz]/v1",
        "http://127.0.0.1\x00/v1",
    ],
)
def test_a_base_url_no_request_can_be_sent_to_is_a_config_error(url: str) -> None:
    settings = OpenAIConfig(base_url=url)
    with pytest.raises(
        ProviderConfigError, match=r"extraction\.openai\.base_url .* is not a valid"
    ):
        build_provider(ExtractionConfig(provider="openai", openai=settings), {})


@pytest.mark.parametrize("pasted", [KEY + "\u2026", KEY[:10] + "\u00a0" + KEY[10:], "\u200b" + KEY])
def test_a_key_no_http_header_can_carry_is_a_config_error(pasted: str) -> None:
    # before: UnicodeEncodeError on every attempt (and orcactl blamed the directory's name)
    settings = OpenAIConfig(base_url="https://api.example.com/v1", api_key_env=KEY_VARIABLE)
    with pytest.raises(ProviderConfigError, match=f"{KEY_VARIABLE} .* not ASCII") as raised:
        build_provider(ExtractionConfig(provider="openai", openai=settings), {KEY_VARIABLE: pasted})
    assert KEY[:8] not in str(raised.value) and KEY[-8:] not in str(raised.value)


NO_SOCKSIO = importlib.util.find_spec("socksio") is None


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HTTPS_PROXY", "bogus://proxy.example:3128"),  # before: ValueError on every attempt
        ("HTTPS_PROXY", "http://proxy.example:port"),  # before: httpx.InvalidURL
        ("SSL_CERT_FILE", "/nonexistent/ca.pem"),  # before: FileNotFoundError
        pytest.param(
            "ALL_PROXY",
            "socks5://127.0.0.1:1080",  # before: ImportError (socksio is optional)
            marks=pytest.mark.skipif(not NO_SOCKSIO, reason="socksio is installed"),
        ),
    ],
)
def test_an_environment_no_http_client_can_be_made_in_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, value)
    settings = OpenAIConfig(base_url="https://api.example.com/v1", api_key_env=KEY_VARIABLE)
    with pytest.raises(ProviderConfigError, match=r"cannot make an HTTP client") as raised:
        build_provider(ExtractionConfig(provider="openai", openai=settings), {KEY_VARIABLE: KEY})
    assert variable in str(raised.value) or "SSL_CERT_FILE" in str(raised.value)


def test_a_proxy_variable_is_no_concern_of_a_loopback_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "bogus://proxy.example:3128")
    monkeypatch.setenv("HTTP_PROXY", "bogus://proxy.example:3128")
    settings = OpenAIConfig(base_url="http://127.0.0.1:1/v1")
    build_provider(ExtractionConfig(provider="openai", openai=settings), {})  # never used there


async def test_long_error_body_is_cut_to_a_short_reason(server: FakeOpenAI) -> None:
    server.script(status(502, "bad gateway " * 2000))
    error = await failure(make_provider(server))
    assert error.message.startswith(
        f"HTTP 502 from {server.base_url}/chat/completions: bad gateway"
    )
    assert len(error.message) < 300


async def test_endless_unstreamed_body_fails_at_the_size_limit_not_the_deadline(
    server: FakeOpenAI,
) -> None:
    server.script(endless_body())
    error = await failure(make_provider(server, stream=False), within=10.0)
    assert "larger than 65536 bytes" in error.message


async def test_oversized_unstreamed_answer_fails(server: FakeOpenAI) -> None:
    server.script(ok("y" * 100_000))
    error = await failure(make_provider(server))
    assert "larger than" in error.message


async def test_the_answer_is_asked_for_uncompressed(server: FakeOpenAI) -> None:
    # a compressed body is read past its size bound: a few KiB inflate to gigabytes
    server.script(gzipped(completion_json(ANSWER)))
    assert await extract(make_provider(server, stream=False)) == ANSWER
    assert server.requests[0].headers["accept-encoding"] == "identity"


async def test_a_compressed_answer_that_was_not_asked_for_is_refused(server: FakeOpenAI) -> None:
    server.script(gzipped(b"\0" * 50_000_000, unasked=True))
    error = await failure(make_provider(server, stream=False))
    assert "gzip" in error.message


async def test_a_compressed_error_body_is_not_inflated(server: FakeOpenAI) -> None:
    # an error's body was read through httpx's inflating reader before any check: 50 KB of
    # gzip held 50 MB in memory at once to quote 512 bytes of it as the reason
    bomb = gzip.compress(b"\0" * 50_000_000)

    def respond(handler: Any, _state: FakeOpenAI) -> None:
        handler.send_fixed(500, bomb, "text/plain", {"Content-Encoding": "gzip"})

    server.script(respond)
    tracemalloc.start()
    try:
        error = await failure(make_provider(server, stream=False))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error.message.startswith(f"HTTP 500 from {server.base_url}/chat/completions")
    assert peak < 5_000_000


THINKING = "<think>\nThe user wants the deploy command kept. {not json}\n</think>\n\n"


@pytest.mark.parametrize("stream", [True, False])
async def test_a_reasoning_models_leading_think_block_is_dropped(
    server: FakeOpenAI, stream: bool
) -> None:
    server.script(streamed(THINKING + ANSWER, chunk_chars=7) if stream else ok(THINKING + ANSWER))
    text = await extract(make_provider(server, stream=stream))
    assert text.strip() == ANSWER
    assert parse_extractor_output(text)[0].fact == "This repository deploys with `make release`."


def thinking_of(total_bytes: int) -> str:
    """A leading think block that makes THINK + ANSWER exactly `total_bytes` of UTF-8."""
    frame = len(b"<think>\n\n</think>\n") + len(ANSWER.encode())
    return (
        "<think>\n"
        + "é" * ((total_bytes - frame) // 2)
        + "x" * ((total_bytes - frame) % 2)
        + "\n</think>\n"
    )


@pytest.mark.parametrize("stream", [True, False])
async def test_a_think_block_counts_towards_the_answer_limit_however_it_arrives(
    server: FakeOpenAI, stream: bool
) -> None:
    # the README's promise, for a server that streams and one that answers in one piece alike
    # (a server may ignore stream: true): the block and the answer share the 16 KiB
    limit = limits.EXTRACTOR_OUTPUT_MAX_BYTES
    for total, fits in ((limit, True), (limit + 1, False)):
        content = thinking_of(total) + ANSWER
        assert len(content.encode()) == total
        server.script(streamed(content, chunk_chars=512) if stream else ok(content))
        provider = make_provider(server, stream=stream)
        if fits:
            assert (await extract(provider)).strip() == ANSWER
        else:
            assert f"past {limit} bytes" in (await failure(provider)).message


async def test_a_think_block_that_never_closes_fails(server: FakeOpenAI) -> None:
    server.script(ok("<think>\nstill thinking " + ANSWER))
    error = await failure(make_provider(server))
    assert "<think>" in error.message


async def test_only_a_leading_think_block_is_dropped(server: FakeOpenAI) -> None:
    # after the answer has begun, the strict format decides: the parser rejects this
    server.script(ok(ANSWER + "\n<think>more</think>"))
    text = await extract(make_provider(server))
    assert text == ANSWER + "\n<think>more</think>"
    with pytest.raises(MalformedOutput):
        parse_extractor_output(text)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"upstream failed: token sk-abc", "upstream failed: token"),  # the cut word is dropped
        (b"upstream failed ", "upstream failed"),  # the cut fell between words
        (b"x" * 20, ""),
    ],
)
def test_a_body_cut_at_the_read_limit_loses_the_word_cut_through(body: bytes, reason: str) -> None:
    assert error_reason(body, whole=False) == reason


def test_the_word_cut_through_is_found_in_linear_time() -> None:
    # one long word and a space: a pattern anchored at the end retried the word from each of
    # its characters (a 4 KiB body took 0.1 s, on the event loop; this one took seconds)
    # CPU time: what the work costs, not how long a loaded machine paused it
    started = time.process_time()
    assert error_reason(b"x" * 65_535 + b" ", whole=False).startswith("xxx")  # nothing cut
    assert time.process_time() - started < 1.0
