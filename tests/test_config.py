"""config.toml parsing: every key validated, unknown keys reported, errors name the key."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from orcactl.commands.daemon import config_report
from orcad import limits
from orcad.auto_memory_switch import AutoMemorySwitch
from orcad.capture import leases, schedule
from orcad.capture.records import new_job
from orcad.config import Config, likely_meant, load_config, parse_config
from orcad.errors import StartupError

pytestmark = pytest.mark.pure


def test_defaults_match_the_architecture() -> None:
    config = Config()
    assert config.auto_memory is True
    assert config.extraction.provider == "heuristic"
    assert (config.extraction.workers, config.extraction.max_retries) == (2, 3)
    assert (
        config.extraction.lease_s,
        config.extraction.timeout_s,
        config.extraction.reschedule_s,
    ) == (60.0, 120.0, 30.0)
    assert config.server.max_message_bytes == 8 * 1024 * 1024
    assert (config.server.max_connections, config.server.idle_timeout_s) == (256, 600.0)
    assert config.server.send_timeout_s == 30.0


def test_every_key_parses() -> None:
    text = """
auto_memory = false
trusted_projects = ["/src/app"]
[extraction]
provider = "openai"
workers = 0
lease_s = 10
timeout_s = 20.5
max_retries = 5
reschedule_s = 1
[extraction.openai]
base_url = "http://127.0.0.1:8080/v1"
model = "m"
api_key_env = "KEY"
[extraction.command]
argv = ["extract", "--fast"]
[server]
max_message_bytes = 2048
max_connections = 3
idle_timeout_s = 1.5
send_timeout_s = 2.5
"""
    config, unknown = parse_config(text, "c.toml")
    assert unknown == []
    assert config.auto_memory is False
    assert config.extraction.workers == 0
    assert config.extraction.lease_s == 10.0
    assert config.extraction.openai.api_key_env == "KEY"
    assert config.extraction.command.argv == ["extract", "--fast"]
    assert config.server.max_connections == 3
    assert config.server.send_timeout_s == 2.5


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("auto_memory = 'yes'", "auto_memory"),
        ("[extraction]\nworkers = -1", "extraction.workers"),
        ("[extraction]\nprovider = 'gpt'", "extraction.provider"),
        ("[extraction]\nlease_s = 0", "extraction.lease_s"),
        ("[extraction.command]\nargv = []", "extraction.command.argv"),
        ("[server]\nmax_connections = 0", "server.max_connections"),
        ("trusted_projects = 'x'", "trusted_projects"),
    ],
)
def test_bad_values_name_the_key(text: str, key: str) -> None:
    with pytest.raises(StartupError, match=f"key `{key}"):
        parse_config(text, "c.toml")


def test_a_provider_name_it_does_not_know_is_answered_with_the_names_it_does() -> None:
    """A typo such as "openia" was answered `Invalid enum value 'openia'` alone, leaving the
    user to look the names up; the daemon's start and doctor say the same."""
    with pytest.raises(StartupError) as raised:
        parse_config('[extraction]\nprovider = "openia"\n', "c.toml")
    assert str(raised.value) == (
        "c.toml: key `extraction.provider`: Invalid enum value 'openia'; it must be one of "
        '"heuristic", "openai", "command"'
    )


# what makes each table read
_CHOOSING = {
    "extraction.openai": '[extraction]\nprovider = "openai"\n',
    "recall.endpoint": '[recall]\nembedding = "endpoint"\n',
}


@pytest.mark.parametrize("table", ["extraction.openai", "recall.endpoint"])
@pytest.mark.parametrize("value", ["sk-proj-Abc123XyZ789secretKEY0", "1KEY", "MY KEY"])
def test_api_key_env_must_name_a_variable_and_is_never_quoted(table: str, value: str) -> None:
    """The key pasted in place of its variable's name was shown in every message about the
    variable (`the environment variable sk-proj-... is not set`), in status and in the log."""
    with pytest.raises(StartupError, match=f"key `{table}.api_key_env`") as raised:
        parse_config(f"{_CHOOSING[table]}[{table}]\napi_key_env = {value!r}\n", "c.toml")
    assert not value or value not in str(raised.value)


def test_a_table_no_choice_reads_stops_nothing() -> None:
    """One left from another provider (`[extraction.command]` kept after a switch to openai)
    is not read, so it cannot be wrong: doctor names it as unread."""
    text = (
        '[extraction]\nprovider = "openai"\n'
        '[extraction.command]\nargv = ["./bin/extract"]\n'
        '[recall.endpoint]\napi_key_env = "sk-proj-Abc123"\n'
    )
    config, _unknown = parse_config(text, "c.toml")
    assert config.extraction.command.argv == ["./bin/extract"]


@pytest.mark.parametrize("table", ["extraction.openai", "recall.endpoint"])
def test_an_empty_api_key_env_reads_no_key(table: str) -> None:
    """No variable, no key: what a server on loopback needs (one elsewhere is refused by the
    provider, saying api_key_env is empty)."""
    config, _unknown = parse_config(f'[{table}]\napi_key_env = ""\n', "c.toml")
    section = config.extraction.openai if table == "extraction.openai" else config.recall.endpoint
    assert section.api_key_env == ""


@pytest.mark.parametrize("lease_s", ["1e-6", "0.01", "0.5"])
def test_a_lease_shorter_than_a_second_is_refused(lease_s: str) -> None:
    """A lease shorter than claiming and renewing take ran out under its worker: every job
    was exhausted, its turn never extracted."""
    with pytest.raises(StartupError, match=r"key `extraction\.lease_s`: Expected `float` >= 1\.0"):
        parse_config(f"[extraction]\nlease_s = {lease_s}\n", "c.toml")
    config, _unknown = parse_config("[extraction]\nlease_s = 1\n", "c.toml")
    assert config.extraction.lease_s == limits.LEASE_S_MIN


@pytest.mark.parametrize("program", ["./extract", "bin/extract", "~/bin/extract", "~"])
def test_the_command_program_must_be_on_path_or_absolute(program: str) -> None:
    with pytest.raises(StartupError, match=r"key `extraction\.command\.argv`: its program"):
        parse_config(
            f'[extraction]\nprovider = "command"\n[extraction.command]\nargv = [{program!r}]\n',
            "c.toml",
        )


@pytest.mark.parametrize("program", ["llm", "/usr/local/bin/llm", "my-extractor.sh"])
def test_a_command_program_on_path_or_absolute_is_taken(program: str) -> None:
    config, _unknown = parse_config(f"[extraction.command]\nargv = [{program!r}]\n", "c.toml")
    assert config.extraction.command.argv == [program]


@pytest.mark.parametrize("setting", ["models/minilm", "Builtin", "./model", "~nosuchuser9/m"])
def test_an_embedding_model_directory_must_be_absolute(setting: str) -> None:
    """A relative one was looked up from orcad's working directory (`/` when orcactl starts
    it), and a misspelt name is one: recall went lexical depending on how orcad started."""
    with pytest.raises(StartupError, match=r"key `recall\.embedding`: .* give a model directory"):
        parse_config(f"[recall]\nembedding = {setting!r}\n", "c.toml")


@pytest.mark.parametrize("setting", ["builtin", "static", "none", "endpoint", "/m", "~/m"])
def test_an_embedding_name_or_an_absolute_directory_is_taken(setting: str) -> None:
    config, _unknown = parse_config(f"[recall]\nembedding = {setting!r}\n", "c.toml")
    assert config.recall.embedding == setting


@pytest.mark.parametrize(
    "key",
    [
        "extraction.lease_s",
        "extraction.timeout_s",
        "extraction.reschedule_s",
        "extraction.retry_base_s",
        "extraction.retry_max_s",
        "server.idle_timeout_s",
        "sessions.idle_expiry_s",
    ],
)
def test_a_duration_is_at_most_a_year(key: str) -> None:
    """inf or 1e12 used to be taken; a job's next attempt (now + the wait) then could not be
    written as a date, and every failed attempt was an internal error."""
    table, name = key.split(".")
    config, _unknown = parse_config(f"[{table}]\n{name} = {limits.CONFIG_SECONDS_MAX!r}", "c")
    assert getattr(getattr(config, table), name) == limits.CONFIG_SECONDS_MAX
    for too_long in ("inf", "1e12", repr(math.nextafter(limits.CONFIG_SECONDS_MAX, math.inf))):
        with pytest.raises(StartupError, match=f"key `{key}`"):
            parse_config(f"[{table}]\n{name} = {too_long}", "c.toml")


def test_the_longest_waits_still_make_a_job_file() -> None:
    now = time.time()
    job = new_job(
        job_id="job_" + "1" * 32,
        project_id="p" * 64,
        session_id="s",
        turn_id="t1",
        source="user: hi",
        source_digest="0" * 64,
        source_bytes=8,
        source_truncated=False,
        now=now,
    )
    longest = schedule.retry_backoff(10**9, limits.CONFIG_SECONDS_MAX, limits.CONFIG_SECONDS_MAX, 1)
    assert longest == limits.CONFIG_SECONDS_MAX
    leased = leases.claim(job, owner="w", now=now, lease_s=limits.CONFIG_SECONDS_MAX, max_retries=3)
    assert leased.lease is not None
    failed = leases.fail(
        leased, token=leased.lease.token, now=now, error="down", max_retries=3, backoff_s=longest
    )
    assert failed.not_before_time() == pytest.approx(now + longest, abs=0.01)
    # the longest of each is honoured, not taken for a hand edit
    assert not leases.is_claimable(leased, now) and not leases.is_claimable(failed, now)


def test_invalid_toml_is_a_clear_error() -> None:
    with pytest.raises(StartupError, match="not valid TOML"):
        parse_config("[extraction\n", "c.toml")


def test_unknown_keys_are_listed_with_their_path() -> None:
    _config, unknown = parse_config(
        "x = 1\n[extraction]\ny = 2\n[extraction.openai]\nz = 3\n", "c.toml"
    )
    assert unknown == ["x", "extraction.y", "extraction.openai.z"]


def test_relative_trusted_project_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('trusted_projects = ["relative/dir"]\n')
    with pytest.raises(StartupError, match="trusted_projects"):
        load_config(path)


def test_a_trusted_project_holding_a_nul_is_refused(tmp_path: Path) -> None:
    # valid TOML; the daemon used to start with it, and every session.open then failed as an
    # internal error (resolving the path raised ValueError)
    path = tmp_path / "config.toml"
    path.write_text('trusted_projects = ["/srv/x\\u0000"]\n')
    with pytest.raises(StartupError, match=r"trusted_projects.*NUL"):
        load_config(path)


@pytest.mark.parametrize("root", ['"relative/dir"', '"/srv/x\\u0000"'])  # as TOML strings
def test_a_trusted_project_edited_in_wrong_while_orcad_runs_keeps_the_last_good_value(
    tmp_path: Path, root: str
) -> None:
    user, repo = tmp_path / "config.toml", tmp_path / "repo"
    (repo / ".orca").mkdir(parents=True)
    (repo / ".orca" / "config.toml").write_text("auto_memory = false\n")
    switch = AutoMemorySwitch(user, Config())
    user.write_text("auto_memory = true\n")
    assert switch.read(str(repo)) is True
    # a relative root was resolved against orcad's own working directory (a project there
    # got its own switch honoured); one holding a NUL failed every session.open
    user.write_text(f"auto_memory = false\ntrusted_projects = [{root}]\n")
    assert switch.read(str(repo)) is True  # the last good reading, whole


def test_a_typo_in_a_trusted_projects_config_is_said_once(tmp_path: Path) -> None:
    # `auto_memroy = false` left automatic memory on without a word anywhere
    import structlog.testing

    user, repo = tmp_path / "config.toml", tmp_path / "repo"
    (repo / ".orca").mkdir(parents=True)
    (repo / ".orca" / "config.toml").write_text("auto_memroy = false\n")
    user.write_text(f"trusted_projects = [{str(repo)!r}]\n")
    switch = AutoMemorySwitch(user, Config())
    with structlog.testing.capture_logs() as logs:
        assert switch.read(str(repo)) is True
        assert switch.read(str(repo)) is True  # a second session: not said again
    said = [entry for entry in logs if entry["event"] == "config.project_unknown_keys"]
    assert len(said) == 1
    assert said[0]["keys"] == ["auto_memroy"] and said[0]["known"] == ["auto_memory"]


def test_a_config_file_starting_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    # it was refused as `not valid TOML: Invalid statement (at line 1, column 1)`
    path = tmp_path / "config.toml"
    path.write_bytes(b"\xef\xbb\xbfauto_memory = false\n")
    assert load_config(path).config.auto_memory is False


def test_a_config_file_is_read_up_to_its_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    head = "auto_memory = false\n#"
    path.write_text(head + "x" * (limits.CONFIG_FILE_MAX_BYTES - len(head)), encoding="utf-8")
    assert load_config(path).config.auto_memory is False  # exactly the limit
    with path.open("a", encoding="utf-8") as file:
        file.write("x")
    with pytest.raises(StartupError, match=f"larger than {limits.CONFIG_FILE_MAX_BYTES} bytes"):
        load_config(path)


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    loaded = load_config(tmp_path / "absent.toml")
    assert loaded.path is None
    assert loaded.config == Config()


def test_trusted_project_config_wins_and_untrusted_is_ignored(tmp_path: Path) -> None:
    user = tmp_path / "config.toml"
    trusted, untrusted = tmp_path / "trusted", tmp_path / "untrusted"
    for root in (trusted, untrusted):
        (root / ".orca").mkdir(parents=True)
        (root / ".orca" / "config.toml").write_text("auto_memory = false\n")
    user.write_text(f"auto_memory = true\ntrusted_projects = [{str(trusted)!r}]\n")
    assert AutoMemorySwitch(user, Config()).read(str(trusted)) is False
    assert AutoMemorySwitch(user, Config()).read(str(untrusted)) is True
    user.write_text("auto_memory = false\n")
    assert AutoMemorySwitch(user, Config()).read(str(untrusted)) is False


def test_a_config_file_broken_later_keeps_its_last_good_auto_memory(tmp_path: Path) -> None:
    user, root = tmp_path / "config.toml", tmp_path / "repo"
    (root / ".orca").mkdir(parents=True)
    switch = AutoMemorySwitch(user, Config(auto_memory=True))  # as orcad started
    user.write_text("auto_memory = false\n")
    assert switch.read(str(root)) is False
    user.write_text("auto_memory = fa")  # half written
    assert switch.read(str(root)) is False
    user.write_text(f"auto_memory = true\ntrusted_projects = [{str(root)!r}]\n")
    (root / ".orca" / "config.toml").write_text("auto_memory = false\n")
    assert switch.read(str(root)) is False  # the trusted project's own says off
    (root / ".orca" / "config.toml").write_text("auto_memory = [")
    assert switch.read(str(root)) is False
    (root / ".orca" / "config.toml").unlink()  # gone: the user's value again
    assert switch.read(str(root)) is True


def _struct_keys(struct: type, prefix: str = "") -> set[str]:
    import msgspec

    keys: set[str] = set()
    for field in msgspec.structs.fields(struct):
        if isinstance(field.type, type) and issubclass(field.type, msgspec.Struct):
            keys |= _struct_keys(field.type, f"{prefix}{field.name}.")
        else:
            keys.add(f"{prefix}{field.name}")
    return keys


def test_readme_documents_every_config_key_with_its_default() -> None:
    import re
    import tomllib

    from tests.harness import REPO_ROOT

    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1]
    block = re.search(r"```toml\n(.*?)```", section, re.DOTALL)
    assert block is not None
    config, unknown = parse_config(block.group(1), "README.md")
    assert unknown == []
    assert config == Config(), "the README's example must show the defaults"
    data = tomllib.loads(block.group(1))

    def documented(table: dict, prefix: str = "") -> set[str]:
        keys: set[str] = set()
        for key, value in table.items():
            if isinstance(value, dict):
                keys |= documented(value, f"{prefix}{key}.")
            else:
                keys.add(f"{prefix}{key}")
        return keys

    assert documented(data) == _struct_keys(Config)


@pytest.mark.parametrize(
    ("unknown", "meant"),
    [
        ("auto_memroy", "auto_memory"),
        ("extraction.workerz", "extraction.workers"),
        ("extraction.openai.modle", "extraction.openai.model"),
        ("sessions.idle_expiry", "sessions.idle_expiry_s"),
        ("trusted_project", "trusted_projects"),
        ("colour", None),  # nothing close
        ("extraction.nope.model", None),  # no such table
        ("auto_memory.x", None),  # not a table
    ],
)
def test_an_unknown_key_names_the_key_it_likely_misspells(unknown: str, meant: str | None) -> None:
    assert likely_meant(unknown) == meant


def test_a_config_link_that_leads_nowhere_is_refused_not_taken_for_no_config(
    tmp_path: Path,
) -> None:
    # a config.toml kept elsewhere (a dotfiles checkout, a drive not mounted) and linked in was
    # read as no file at all: orcad ran on defaults, automatic memory on, without a word
    path = tmp_path / "config.toml"
    path.symlink_to(tmp_path / "dotfiles" / "orca.toml")
    with pytest.raises(StartupError) as refused:
        load_config(path)
    assert str(refused.value) == (
        f"{path}: a symbolic link to {tmp_path / 'dotfiles' / 'orca.toml'}, which does not "
        "exist (a drive not mounted?); create what it names, or remove the link to use the "
        "defaults"
    )
    shown = config_report(path, None)  # orcactl status: not "missing: defaults apply"
    assert (shown["exists"], shown["parses"], shown["error"]) == (True, False, str(refused.value))
    repo = tmp_path / "repo"
    repo.mkdir()
    switch = AutoMemorySwitch(path, Config())
    path.unlink()
    path.write_text("auto_memory = false\n")
    assert switch.read(str(repo)) is False
    path.unlink()
    path.symlink_to(tmp_path / "dotfiles" / "orca.toml")
    assert switch.read(str(repo)) is False  # the last good reading, not the defaults
    path.unlink()
    assert switch.read(str(repo)) is True  # a config removed: the defaults
