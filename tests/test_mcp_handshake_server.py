"""`orcactl mcp` started as an agent starts it, against a real daemon: the first start records
the SDK's answers to the handshake, the next gives them before the SDK has loaded, once each,
and the SDK then serves as if it had answered them itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.harness import DaemonProcess, OrcaEnv
from tests.hook_helpers import ORCACTL
from tests.test_mcp_handshake import INITIALIZED, TOOLS_LIST, VERSION, _initialize, _line

pytestmark = [pytest.mark.daemon, pytest.mark.slow]


def _cache_of(orca: OrcaEnv) -> Path:
    return Path(orca.env["HOME"]) / ".cache" / "orca" / "mcp-handshake.json"


def _raw_session(orca: OrcaEnv, cwd: Path, sent: bytes) -> list[Any]:
    """The server's answers to `sent`, written before it started, its stdin then closed."""
    done = subprocess.run(
        [ORCACTL, "mcp", "--cwd", str(cwd)],
        input=sent,
        capture_output=True,
        env=orca.env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_second_start_answers_as_the_first_and_once(
    orca_env: OrcaEnv, daemon: DaemonProcess, tmp_path: Path
) -> None:
    sent = (
        _initialize()
        + INITIALIZED
        + TOOLS_LIST
        + _line({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    )
    first = _raw_session(orca_env, tmp_path, sent)
    cache = json.loads(_cache_of(orca_env).read_text())
    assert set(cache["versions"]) == {VERSION}  # recorded from the SDK's own answers
    assert cache["versions"][VERSION]["tools/list"] == first[1]["result"]
    second = _raw_session(orca_env, tmp_path, sent)
    assert second == first  # each request answered once, with the SDK's answer
    assert [answer["id"] for answer in second] == [1, 2, 3]


async def test_the_sdk_client_gets_the_cached_tools_and_the_sdk_takes_over(
    orca_env: OrcaEnv, daemon: DaemonProcess, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=ORCACTL, args=["mcp", "--cwd", str(tmp_path)], env=orca_env.env
    )

    async def listed_and_recalled() -> tuple[list[str], str]:
        with open(orca_env.root / "mcp-stderr.log", "a") as errlog:  # noqa: ASYNC230
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = await session.list_tools()
                recalled = await session.call_tool("recall", {"prompt": "which database"})
        descriptions = [tool.description or "" for tool in tools.tools]
        return descriptions, recalled.content[0].text if recalled.content else ""

    first_descriptions, first_recall = await listed_and_recalled()
    cache_file = _cache_of(orca_env)
    cache = json.loads(cache_file.read_text())
    [version] = cache["versions"]
    # an answer only the cache can give: the client gets it, so the SDK had not answered
    cache["versions"][version]["tools/list"]["tools"][0]["description"] = "from the cache"
    cache_file.write_text(json.dumps(cache))
    descriptions, recalled = await listed_and_recalled()
    assert descriptions == ["from the cache", *first_descriptions[1:]]
    assert recalled == first_recall  # the SDK, initialized by the client's own request, serves
    # and the SDK's own answer replaced the one that differs, for the next start
    assert (
        json.loads(cache_file.read_text())["versions"][version]["tools/list"]["tools"][0][
            "description"
        ]
        == first_descriptions[0]
    )
    assert "Traceback" not in (orca_env.root / "mcp-stderr.log").read_text()
