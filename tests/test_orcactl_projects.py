"""orcactl's project commands against a real daemon where a project is damaged or has no memory:
each still shows what it can, names what is wrong and says what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.errors import RemoteError
from tests.external_worker import turn_params, wait_for
from tests.harness import DaemonProcess, OrcaEnv

pytestmark = pytest.mark.crash


def orcactl(orca_env: OrcaEnv, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orcactl", "--no-start", *args],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def committed_project(daemon: DaemonProcess, tmp_path: Path) -> tuple[Path, Path, str]:
    """A project with one committed job and its facts: (its cwd, its directory, the job id)."""
    cwd = tmp_path / "project"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    job_id = daemon.call("turn.completed", turn_params(session, "t1", "We use pnpm.")).job_id
    wait_for(lambda: daemon.call("jobs.list", {}).jobs[0].state == "committed")
    return cwd, daemon.orca.memory_root / "projects" / session.project.id, job_id


def test_inspect_of_a_damaged_ledger_shows_what_it_can_and_names_the_file(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    cwd, directory, job_id = committed_project(daemon, tmp_path)
    ledger = directory / "candidates.jsonl"
    with ledger.open("a") as damaged:
        damaged.write("{not a candidate\n")

    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 1, shown.stderr
    assert "Traceback" not in shown.stderr
    assert directory.name in shown.stdout and job_id in shown.stdout  # the project, its jobs
    assert "auto-memory.md" in shown.stdout and "index.sqlite3" in shown.stdout  # its files
    assert "The project uses pnpm." in shown.stdout  # the Markdown view as last written
    assert f"{ledger} is damaged" in shown.stdout + shown.stderr
    assert f"mv {ledger} {ledger}.damaged" in shown.stdout + shown.stderr  # what to do

    as_json = orcactl(daemon.orca, "inspect", "--project", directory.name, "--json")
    assert as_json.returncode == 1, as_json.stderr
    report = json.loads(as_json.stdout)  # one JSON document
    assert report["project"]["id"] == directory.name and report["project"]["corrupt"]
    assert report["ledger"] is None and report["index"] is None
    assert report["damaged_file"]["path"] == str(ledger)
    assert "mv " in report["damaged_file"]["fix"]
    assert [job["job_id"] for job in report["jobs"]] == [job_id]
    assert "auto-memory.md" in [file["name"] for file in report["files"]]
    assert "The project uses pnpm." in report["markdown_view"]["text"]


def test_inspect_of_a_damaged_ledger_without_its_markdown_view_says_so(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    cwd, directory, _job_id = committed_project(daemon, tmp_path)
    (directory / "candidates.jsonl").write_text("not a ledger\n")
    (directory / "auto-memory.md").unlink()
    (directory / "auto-memory.md").symlink_to(tmp_path / "elsewhere.md")

    as_json = orcactl(daemon.orca, "inspect", str(cwd), "--json")
    assert as_json.returncode == 1, as_json.stderr
    view = json.loads(as_json.stdout)["markdown_view"]
    assert view["text"] is None and "symbolic link" in view["problem"]
    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 1 and "symbolic link" in shown.stdout


def test_jobs_retry_of_a_damaged_job_names_its_file_not_an_unknown_job(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # `orcactl jobs` lists the job as DAMAGED; retrying it must say why it cannot be, not that
    # no such job exists
    _cwd, directory, job_id = committed_project(daemon, tmp_path)
    daemon.stop()
    job_file = directory / "jobs" / f"{job_id}.json"
    job_file.write_bytes(job_file.read_bytes()[:57])
    daemon.start()

    refused = orcactl(daemon.orca, "jobs", "retry", job_id)
    assert refused.returncode == 1, refused.stderr
    assert "unknown job" not in refused.stderr
    assert f"{job_file} is damaged" in refused.stderr and "move it out of jobs/" in refused.stderr
    with daemon.client() as client:
        try:
            client.call("jobs.retry", {"job_id": job_id})
        except RemoteError as exc:
            assert (exc.kind, exc.error.data["path"]) == ("storage", str(job_file))
        else:
            raise AssertionError("a damaged job was retried")
    assert len(job_file.read_bytes()) == 57  # left as found


def test_forget_from_a_directory_without_memory_finds_the_project_holding_the_fact(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # an id copied from `orcactl inspect --project` and forgotten from another directory
    _cwd, directory, _job_id = committed_project(daemon, tmp_path)
    [target] = daemon.call("projects.inspect", {"project_id": directory.name}).ledger.candidates
    elsewhere = tmp_path / "no-memory-here"
    elsewhere.mkdir()

    refused = orcactl(daemon.orca, "forget", target.id, "--cwd", str(elsewhere))
    assert refused.returncode == 1, refused.stderr
    assert f"--project {directory.name}" in refused.stderr  # where it is, and how to forget it
    held = daemon.call("projects.inspect", {"project_id": directory.name}).ledger.candidates
    assert [candidate.id for candidate in held] == [target.id]

    nowhere = "cand_" + "0" * 32  # in no ledger at all: already forgotten (README)
    for output in ((), ("--json",)):
        gone = orcactl(daemon.orca, "forget", nowhere, "--cwd", str(elsewhere), *output)
        assert gone.returncode == 0, gone.stderr
    assert (
        "already forgotten"
        in orcactl(daemon.orca, "forget", nowhere, "--cwd", str(elsewhere)).stdout
    )
    as_json = orcactl(daemon.orca, "forget", nowhere, "--cwd", str(elsewhere), "--json")
    assert json.loads(as_json.stdout)["removed"] is False


def test_forget_refused_from_a_directory_without_memory_says_what_was_searched(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    _cwd, directory, _job_id = committed_project(daemon, tmp_path)
    [target] = daemon.call("projects.inspect", {"project_id": directory.name}).ledger.candidates
    elsewhere = tmp_path / "no-memory-here"
    elsewhere.mkdir()
    refused = orcactl(daemon.orca, "forget", target.id, "--cwd", str(elsewhere))
    assert refused.returncode == 1, refused.stderr
    # the project asked of has no memory: it has no id to name, and none is left blank
    assert (
        f"{target.id} is not in the project asked of (it has no memory stored) but in project "
        f"{directory.name}"
    ) in refused.stderr


def test_inspect_lists_the_projects_damaged_job_files(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # `orcactl jobs` shows a job whose file is damaged; inspect of its project must too
    cwd, directory, job_id = committed_project(daemon, tmp_path)
    daemon.stop()
    job_file = directory / "jobs" / f"{job_id}.json"
    job_file.write_bytes(job_file.read_bytes()[:57])
    daemon.start()

    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 0, shown.stderr
    assert "jobs      1" in shown.stdout and f"{job_id}  DAMAGED  {job_file}" in shown.stdout
    as_json = json.loads(orcactl(daemon.orca, "inspect", str(cwd), "--json").stdout)
    assert [job["path"] for job in as_json["damaged_jobs"]] == [str(job_file)]
    assert as_json["jobs"] == []


def test_jobs_retry_of_an_unknown_job_points_at_orcactl_jobs(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    unknown = "job_" + "0" * 32
    refused = orcactl(daemon.orca, "jobs", "retry", unknown)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr == (
        f"orcactl: unknown job '{unknown}'; list jobs with `orcactl jobs` (not_found)\n"
    )
    with pytest.raises(RemoteError) as caught:  # other clients keep the wire's words
        daemon.call("jobs.retry", {"job_id": unknown})
    assert caught.value.error.message == f"unknown job '{unknown}'; list jobs with jobs.list"


def test_inspect_of_a_damaged_project_json_shows_the_project_names_the_file_and_exits_1(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    cwd, directory, job_id = committed_project(daemon, tmp_path)
    project_file = directory / "project.json"
    project_file.write_text("{not a project record")

    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 1, shown.stderr
    assert "Traceback" not in shown.stderr
    assert directory.name in shown.stdout and job_id in shown.stdout  # what it can show
    assert "The project uses pnpm." in shown.stdout  # the ledger, which reads
    assert f"{project_file} is not a valid project record" in shown.stdout
    assert f"mv {project_file} {project_file}.damaged" in shown.stdout  # what to do

    as_json = orcactl(daemon.orca, "inspect", "--project", directory.name, "--json")
    assert as_json.returncode == 1, as_json.stderr
    report = json.loads(as_json.stdout)  # one JSON document
    assert report["project"]["corrupt"] and report["ledger"]["candidates"]
    assert report["damaged_file"]["path"] == str(project_file)
    assert f"mv {project_file} {project_file}.damaged" in report["damaged_file"]["fix"]
    assert project_file.read_text() == "{not a project record"  # left as found


def test_a_path_holding_a_newline_stays_on_its_own_line_of_projects_and_inspect(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    cwd = tmp_path / "two\nlines"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})  # records the project's visit
    listed = orcactl(daemon.orca, "projects")
    assert listed.returncode == 0, listed.stderr
    assert "two\\x0alines" in listed.stdout and "\nlines" not in listed.stdout
    shown = orcactl(daemon.orca, "inspect", "--project", session.project.id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert [line for line in lines if line.startswith("last cwd")] == [
        f"last cwd  {str(cwd).replace(chr(10), chr(92) + 'x0a')}"
    ]
    assert not any(line.startswith("lines") for line in lines)
    # --json keeps the path as it is
    as_json = orcactl(daemon.orca, "inspect", "--project", session.project.id, "--json")
    assert json.loads(as_json.stdout)["project"]["last_seen_cwd"] == str(cwd)


def test_a_workspace_holding_a_newline_stays_on_its_line_of_memory_and_grants_listings(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # the record's line and the grant's broke in two at the newline, the rest of each on a
    # line of its own that read as another entry
    cwd = tmp_path / "two\nlines"
    cwd.mkdir()
    saved = orcactl(
        daemon.orca,
        "memory",
        "save",
        "we deploy with make",
        "--kind",
        "fact",
        "--workspace",
        "--approve",
        "workspace",
        "--cwd",
        str(cwd),
    )
    assert saved.returncode == 0, saved.stderr
    shown = str(cwd).replace("\n", "\\x0a")
    for listing in (("memory", "list"), ("memory", "search", "deploy")):
        listed = orcactl(daemon.orca, *listing, "--cwd", str(cwd))
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[0].split("  ")[2] == f"workspace {shown}"
        assert not any(line.startswith("lines") for line in listed.stdout.splitlines())
    grants = orcactl(daemon.orca, "grants", "list")
    assert grants.returncode == 0, grants.stderr
    [line] = grants.stdout.splitlines()
    assert f"  workspace  {shown}  since " in line
    # --json keeps the path as it is
    as_json = orcactl(daemon.orca, "memory", "list", "--cwd", str(cwd), "--json")
    assert json.loads(as_json.stdout)["records"][0]["workspace_root"] == str(cwd)


def test_inspect_shows_the_projects_explicit_facts_and_points_at_user_md(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # what orcad knows of a project: its ledger, and the facts kept with `remember --project`
    # (memory.md), which inspect did not show (a `cat` of the file was needed)
    cwd, directory, _job_id = committed_project(daemon, tmp_path)
    for args in (
        ("--project", "Releases are tagged from the amber-quay-17 branch."),
        ("Answer in British English.",),
    ):
        kept = orcactl(daemon.orca, "remember", "--cwd", str(cwd), *args)
        assert kept.returncode == 0, kept.stderr
    memory_md = directory / "memory.md"
    user_md = daemon.orca.memory_root / "user.md"

    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 0, shown.stderr
    assert "amber-quay-17" in shown.stdout and str(memory_md) in shown.stdout
    assert str(user_md) in shown.stdout  # a pointer to the user-wide facts ...
    assert "British English" not in shown.stdout  # ... not their content
    report = json.loads(orcactl(daemon.orca, "inspect", str(cwd), "--json").stdout)
    explicit = report["explicit"]
    assert "amber-quay-17" in explicit["text"] and explicit["path"] == str(memory_md)
    assert explicit["truncated"] is False and explicit["problem"] is None
    assert explicit["user_path"] == str(user_md)
    assert explicit["user_bytes"] == user_md.stat().st_size

    # a large file: the newest facts within the bound a new session is given
    facts = [f"- fact number {n:05d} of a long list kept by hand" for n in range(2000)]
    memory_md.write_text("\n".join(facts) + "\n", encoding="utf-8")
    explicit = json.loads(orcactl(daemon.orca, "inspect", str(cwd), "--json").stdout)["explicit"]
    assert explicit["truncated"] is True and len(explicit["text"].encode()) <= 8192
    assert facts[-1] in explicit["text"] and facts[0] not in explicit["text"]
    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert "older ones left out" in shown.stdout and facts[-1] in shown.stdout

    # a FIFO in its place is not waited on: said, and the rest still shown
    memory_md.unlink()
    os.mkfifo(memory_md)
    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 0, shown.stderr
    assert "not a regular file" in shown.stdout and directory.name in shown.stdout
    explicit = json.loads(orcactl(daemon.orca, "inspect", str(cwd), "--json").stdout)["explicit"]
    assert explicit["text"] == "" and "not a regular file" in explicit["problem"]


def test_inspect_of_a_damaged_ledger_still_shows_the_projects_explicit_facts(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # orcactl reads a damaged ledger's project from its files: memory.md's facts, which
    # inspect shows for a sound one, were left out
    cwd, directory, _job_id = committed_project(daemon, tmp_path)
    for args in (
        ("--project", "Releases are tagged from the amber-quay-17 branch."),
        ("Answer in British English.",),
    ):
        kept = orcactl(daemon.orca, "remember", "--cwd", str(cwd), *args)
        assert kept.returncode == 0, kept.stderr
    (directory / "candidates.jsonl").write_text("not a ledger\n")
    memory_md = directory / "memory.md"
    user_md = daemon.orca.memory_root / "user.md"

    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 1, shown.stderr
    assert "amber-quay-17" in shown.stdout and str(memory_md) in shown.stdout
    assert str(user_md) in shown.stdout and "British English" not in shown.stdout
    as_json = orcactl(daemon.orca, "inspect", str(cwd), "--json")
    assert as_json.returncode == 1, as_json.stderr
    explicit = json.loads(as_json.stdout)["explicit"]
    assert "amber-quay-17" in explicit["text"] and explicit["path"] == str(memory_md)
    assert explicit["truncated"] is False and explicit["problem"] is None
    assert (explicit["user_path"], explicit["user_bytes"]) == (str(user_md), user_md.stat().st_size)

    # the same bound as orcad's: the newest facts a new session is given
    facts = [f"- fact number {n:05d} of a long list kept by hand" for n in range(2000)]
    memory_md.write_text("\n".join(facts) + "\n", encoding="utf-8")
    explicit = json.loads(orcactl(daemon.orca, "inspect", str(cwd), "--json").stdout)["explicit"]
    assert explicit["truncated"] is True and len(explicit["text"].encode()) <= 8192
    assert facts[-1] in explicit["text"] and facts[0] not in explicit["text"]

    # a FIFO in its place is not waited on (orcactl would hang): said, nothing logged
    memory_md.unlink()
    os.mkfifo(memory_md)
    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 1 and "Traceback" not in shown.stderr, shown.stderr
    assert "not a regular file" in shown.stdout and "explicit.unreadable" not in shown.stdout
    assert shown.stderr == "", shown.stderr
    as_json = orcactl(daemon.orca, "inspect", str(cwd), "--json")
    explicit = json.loads(as_json.stdout)["explicit"]
    assert explicit["text"] == "" and "not a regular file" in explicit["problem"]


def test_inspect_gives_no_size_for_a_user_md_that_is_no_regular_file(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # a directory at user.md gives a new session no facts: its size (the directory's own,
    # 4096 bytes on most file systems) was shown as "bytes of facts every session is given"
    cwd, _directory, _job_id = committed_project(daemon, tmp_path)
    user_md = daemon.orca.memory_root / "user.md"
    user_md.mkdir()
    (user_md / "notes").write_text("x" * 100)

    report = json.loads(orcactl(daemon.orca, "inspect", str(cwd), "--json").stdout)
    assert report["explicit"]["user_path"] == str(user_md)
    assert report["explicit"]["user_bytes"] is None
    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 0, shown.stderr
    assert "bytes of facts" not in shown.stdout and str(user_md) in shown.stdout


def test_a_ledger_a_newer_orcad_wrote_is_named_so_and_never_to_be_moved_aside(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # an orcad run again after a newer one (a downgrade) meets that version's ledger: moving it
    # aside, the fix for a damaged one, would start the project's memory again for both
    cwd, directory, _ = committed_project(daemon, tmp_path)
    ledger = directory / "candidates.jsonl"
    newer = ledger.read_bytes().replace(
        b'"format":"orcad.candidates/1"', b'"format":"orcad.candidates/2","shards":1', 1
    )
    ledger.write_bytes(newer)

    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 1, shown.stderr
    said = shown.stdout + shown.stderr
    assert "Traceback" not in said
    assert f"{ledger} was written by a newer orcad" in said and "orcad.candidates/2" in said
    assert "is damaged" not in said and "mv " not in said

    session = daemon.call("session.open", {"cwd": str(cwd)})
    daemon.call("turn.completed", turn_params(session, "t2", "We use bazel."))
    checked = orcactl(daemon.orca, "doctor")
    assert checked.returncode == 1, checked.stderr
    assert "written by a newer orcad" in checked.stdout
    assert f"mv {ledger}" not in checked.stdout
    assert ledger.read_bytes() == newer  # held as it is, never rewritten in this format


def test_a_damaged_ledger_whose_words_claim_a_newer_orcad_is_still_to_be_moved_aside(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    # the problem quotes a field the header should not have: those words are no newer orcad's
    cwd, directory, _ = committed_project(daemon, tmp_path)
    ledger = directory / "candidates.jsonl"
    claim = f"{ledger} was written by a newer orcad".encode()
    damaged = ledger.read_bytes().replace(b"{", b'{"' + claim + b'":1,', 1)
    ledger.write_bytes(damaged)

    shown = orcactl(daemon.orca, "inspect", str(cwd))
    assert shown.returncode == 1, shown.stderr
    said = shown.stdout + shown.stderr
    assert "is damaged" in said and "move it aside" in said
    assert "do not move it aside" not in said
    assert ledger.read_bytes() == damaged
