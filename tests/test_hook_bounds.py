"""What a hook sends orcad, as the request encodes it: bounded in bytes, not in characters, so a
turn of emoji (4 bytes each) or control characters (6, escaped) still fits orcad's 8 MiB request
bound and is captured, keeping each message's ends, the first and the newest; and half an emoji
arrives as U+FFFD."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orcactl.hooks import common
from orcactl.hooks.wire import encode_json
from tests.harness import DaemonProcess, OrcaEnv
from tests.hook_helpers import ClaudeTranscript, run_hook

pytestmark = pytest.mark.daemon

# Characters of every encoded size: 1 byte, 2 (é, an escaped quote), 4 (an emoji), 6 (a
# control character, escaped), and a lone surrogate (half an emoji an agent passed on).
CHARACTERS = ["a", "é", '"', "\\", "\n", "\U0001f600", "\x01", "\ud83d"]
RUNS = st.lists(
    st.tuples(st.sampled_from(CHARACTERS), st.integers(min_value=1, max_value=120_000)),
    min_size=1,
    max_size=8,
)


def _size(value: object) -> int:
    return len(encode_json(value))


@given(RUNS)
@settings(max_examples=80, deadline=None)
def test_a_text_is_bounded_by_its_encoded_size_keeping_its_ends(
    runs: list[tuple[str, int]],
) -> None:
    text = "".join(character * count for character, count in runs)
    cut = common.bounded(text)
    assert _size(cut) <= common.SEND_TEXT_MAX_BYTES
    if cut == text:
        assert _size(text) <= common.SEND_TEXT_MAX_BYTES
        return
    head, mark, tail = cut.partition(common.CUT_MARK)
    assert mark and text.startswith(head) and text.endswith(tail)
    assert _size(cut) > common.SEND_TEXT_MAX_BYTES - 32  # the room is used, not wasted


def test_a_turn_is_bounded_by_its_encoded_size_keeping_the_first_and_the_newest() -> None:
    limit = common.SEND_TEXT_MAX_BYTES
    long = "a" * limit + "MIDDLE" + "z" * limit
    (cut,) = common.bounded_messages([{"role": "user", "content": long}])
    assert _size(cut["content"]) <= limit and "MIDDLE" not in cut["content"]
    assert cut["content"].startswith("a") and cut["content"].endswith("z")
    for character in ("x", "\U0001f600", "\x01"):
        many = [{"role": "user", "content": "first " + character * limit}]
        many += [{"role": "assistant", "content": f"{n} " + character * limit} for n in range(20)]
        kept = common.bounded_messages(many)
        assert sum(_size(message) for message in kept) <= common.SEND_TURN_MAX_BYTES
        assert kept[0]["content"].startswith("first")
        assert kept[-1]["content"].startswith("19 ") and 2 < len(kept) < len(many)
    small = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert common.bounded_messages(small) == small  # under every bound: unchanged


@pytest.mark.parametrize("character", ["\U0001f600", "\x01"], ids=["emoji", "control"])
def test_a_turn_of_wide_characters_reaches_orcad_and_is_captured(
    tmp_path: Path, orca_env: OrcaEnv, daemon: DaemonProcess, character: str
) -> None:
    session = "5e0d1c2b-3a49-4867-9a0b-1c2d3e4f5a6b"
    project = tmp_path / "repo"
    project.mkdir()
    log = ClaudeTranscript(tmp_path / "claude" / f"{session}.jsonl", session, str(project))
    log.user("Print the table, and remember that we use pnpm.")
    for _ in range(9):  # 2.3 M characters, 9 MiB of emoji or 14 MiB of escapes
        log.text(character * (256 * 1024 - 10))
    payload = log.payload("Stop", stop_hook_active=False)
    run = run_hook(orca_env, "claude-code", "Stop", payload)
    assert (run.status, run.stdout, run.stderr) == (0, "", "")
    jobs = [job for job in daemon.call("jobs.list", {}).jobs if session in job.session_id]
    assert len(jobs) == 1
    assert not (orca_env.memory_root / "agent-hooks.jsonl").exists()


def test_half_an_emoji_is_encoded_as_u_fffd_and_two_halves_that_meet_as_the_emoji() -> None:
    assert encode_json({"t": "a\ud83db"}) == '{"t": "a\ufffdb"}'.encode()
    assert encode_json("\ud83d" + "\ude00") == '"\U0001f600"'.encode()
    assert encode_json("x\ude00\ud83d") == '"x\ufffd\ufffd"'.encode()


def test_half_an_emoji_in_a_turn_reaches_orcad_as_u_fffd(
    tmp_path: Path, orca_env: OrcaEnv, daemon_factory: list[DaemonProcess]
) -> None:
    orca_env.write_config("[extraction]\nworkers = 0\n")  # the job waits to be claimed here
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    session = "4d3c2b1a-0f9e-4d8c-8b7a-6f5e4d3c2b1a"
    project = tmp_path / "repo"
    project.mkdir()
    log = ClaudeTranscript(tmp_path / "claude" / f"{session}.jsonl", session, str(project))
    log.user("Deploy it \ud83d please, and remember that we use pnpm.")  # JSON: "\ud83d"
    log.text("Deployed; noted that you use pnpm.")
    payload = log.payload("Stop", stop_hook_active=False)
    run = run_hook(orca_env, "claude-code", "Stop", payload)
    assert (run.status, run.stderr) == (0, "")
    source = daemon.call("jobs.claim", {"worker": "reader"}).job.source
    assert "Deploy it \ufffd please" in source
