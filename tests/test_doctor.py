"""`orcactl doctor`: each problem it claims to find is made to happen here, and found."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from orcactl.commands.doctor_files import FILE_SCAN_LIMIT
from orcactl.commands.doctor_models import judge_embedding
from orcad.capture import jobstore, ledger, projections, projects
from orcad.capture.records import AttemptError, new_job
from protocol.errors import RemoteError
from protocol.types import EmbeddingStatus
from tests.external_worker import wait_for
from tests.harness import DaemonProcess, OrcaEnv
from tests.test_orcactl_daemon import UNBUILDABLE_PROVIDER
from tests.test_unreadable_ledger import ROOTS_OVERRIDES, DaemonAsAUser

pytestmark = pytest.mark.daemon

PROJECT_ID = "a" * 64


def doctor(
    orca: OrcaEnv, *args: str, env: dict[str, str] | None = None
) -> tuple[int, list[dict[str, Any]]]:
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", "doctor", "--json", *args],
        env=orca.env if env is None else env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    report = json.loads(result.stdout)
    assert report["ok"] == (result.returncode == 0), result.stderr
    return result.returncode, report["findings"]


def problems(findings: list[dict[str, Any]], check: str) -> list[dict[str, Any]]:
    return [f for f in findings if f["check"] == check and f["status"] == "problem"]


def only_problem(findings: list[dict[str, Any]], check: str) -> dict[str, Any]:
    found = [f for f in findings if f["status"] == "problem"]
    assert [f["check"] for f in found] == [check], found
    assert found[0]["fix"]
    return found[0]


@pytest.fixture
def project_dir(orca_env: OrcaEnv) -> Iterator[Path]:
    """A project directory as the daemon leaves it (it runs with umask 077)."""
    directory = orca_env.memory_root / "projects" / PROJECT_ID
    old_umask = os.umask(0o077)
    try:
        projects.ensure_directories(directory)
        yield directory
    finally:
        os.umask(old_umask)


@pytest.fixture
def model_server() -> Iterator[tuple[str, list[int]]]:
    """A loopback HTTP server standing in for an OpenAI-compatible endpoint; the test sets the
    status code /v1/models answers with."""
    answer = [200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(answer[0] if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"data": []}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", answer
    server.shutdown()
    server.server_close()


def write_exhausted_job(project_dir: Path, job_id: str) -> None:
    """A job that gave up after four attempts, as the daemon leaves one."""
    job = new_job(
        job_id=job_id,
        project_id=PROJECT_ID,
        session_id="s",
        turn_id="t",
        source="user: hello",
        source_digest="0" * 64,
        source_bytes=11,
        source_truncated=False,
        now=time.time(),
    )
    jobstore.write_job(project_dir, msgspec.structs.replace(job, state="exhausted", attempts=4))


def test_a_healthy_setup_has_no_problems(orca_env: OrcaEnv, daemon: DaemonProcess) -> None:
    status, findings = doctor(orca_env)
    assert status == 0, findings
    socket_finding = next(f for f in findings if f["check"] == "socket")
    assert socket_finding["status"] == "ok"
    assert f"pid {daemon.proc.pid}" in socket_finding["detail"]  # type: ignore[union-attr]


def test_doctor_beside_a_running_daemon_loads_no_embedding_model_code(
    orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    # The daemon answers for the embedding model: doctor's own checks of the memory root must
    # not pull in numpy and the embedders, a fifth of a second before any check runs.
    code = (
        "import sys\n"
        "from orcactl.entry import main\n"
        "sys.argv = ['orcactl', 'doctor', '--json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'onnxruntime'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout


def test_human_output_names_the_fix(orca_env: OrcaEnv) -> None:
    (orca_env.root / "run").chmod(0o755)
    result = subprocess.run(
        [sys.executable, "-m", "orcactl", "doctor"],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert f"[FAIL] runtime dir: directory {orca_env.root / 'run'} has mode 0755" in result.stdout
    assert f"       fix: chmod 700 {orca_env.root / 'run'}" in result.stdout
    assert result.stdout.rstrip().endswith("1 problem(s) found.")


def test_socket_open_to_others(orca_env: OrcaEnv, daemon: DaemonProcess) -> None:
    orca_env.socket.chmod(0o666)
    status, findings = doctor(orca_env)
    assert status == 1
    assert "mode 0666" in only_problem(findings, "socket")["detail"]


def test_socket_that_nobody_answers(orca_env: OrcaEnv) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(orca_env.socket))
    stale.close()  # the file stays, nothing listens: what a killed daemon leaves
    status, findings = doctor(orca_env)
    assert status == 1
    assert "nothing answers" in only_problem(findings, "socket")["detail"]


def test_a_socket_path_too_long_for_a_unix_socket_is_a_problem(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # it said "does not exist yet (created at start)", no problems found: orcad cannot bind there
    long_socket = tmp_path / ("s" * 120) / "orcad.sock"
    orca_env.extra_env["ORCA_SOCKET"] = str(long_socket)
    status, findings = doctor(orca_env)
    assert status == 1
    finding = only_problem(findings, "socket")
    assert finding["detail"].startswith(f"no orcad can listen on {long_socket}: its path is ")
    assert "shorter" in finding["fix"]
    # the path came from ORCA_SOCKET: XDG_RUNTIME_DIR has nothing to do with it
    assert "XDG_RUNTIME_DIR" not in finding["fix"], finding["fix"]
    # given by --socket, with ORCA_SOCKET unset and a short XDG_RUNTIME_DIR
    env = orca_env.env
    del env["ORCA_SOCKET"]
    _status, findings = doctor(orca_env, "--socket", str(long_socket), env=env)
    finding = only_problem(findings, "socket")
    assert finding["detail"].startswith(f"no orcad can listen on {long_socket}: its path is ")
    assert "XDG_RUNTIME_DIR" not in finding["fix"], finding["fix"]


def test_a_runtime_directory_too_long_for_its_socket_names_xdg_runtime_dir(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    runtime = tmp_path / ("r" * 120)
    runtime.mkdir(mode=0o700)
    orca_env.extra_env["XDG_RUNTIME_DIR"] = str(runtime)
    env = orca_env.env
    del env["ORCA_SOCKET"]
    _status, findings = doctor(orca_env, env=env)
    finding = only_problem(findings, "socket")
    assert "shorter XDG_RUNTIME_DIR" in finding["fix"], finding["fix"]


def test_a_socket_path_too_long_still_has_its_runtime_directory_checked(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # the socket's problem ended the checks: a runtime directory orcad would refuse went unsaid
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    runtime = tmp_path / ("s" * 120)
    runtime.symlink_to(real)
    orca_env.extra_env["ORCA_SOCKET"] = str(runtime / "orcad.sock")
    status, findings = doctor(orca_env)
    assert status == 1
    problems = {f["check"]: f["detail"] for f in findings if f["status"] == "problem"}
    assert set(problems) == {"socket", "runtime dir"}, findings
    assert "symbolic link" in problems["runtime dir"]


@pytest.mark.parametrize("make", ["directory", "regular file"])
def test_a_directory_or_file_where_the_socket_goes_is_named_not_called_unanswered(
    orca_env: OrcaEnv, make: str
) -> None:
    # connecting there is refused as at a dead daemon's socket; it said "exists but nothing
    # answers (Connection refused)" and sent the user to restart orcad, which refuses it too
    orca_env.socket.parent.mkdir(parents=True, exist_ok=True)
    if make == "directory":
        orca_env.socket.mkdir()
    else:
        orca_env.socket.write_text("")
    status, findings = doctor(orca_env)
    assert status == 1
    finding = only_problem(findings, "socket")
    assert finding["detail"] == (
        f"{orca_env.socket} is a {make}, not a socket: orcad refuses to start over it"
    )
    assert finding["fix"].startswith(f"mv {orca_env.socket} {orca_env.socket}.aside")


@pytest.mark.parametrize("depth", ["its directory", "a directory above it"])
def test_a_file_in_place_of_the_sockets_directory_is_a_problem_found_not_a_failure(
    orca_env: OrcaEnv, tmp_path: Path, depth: str
) -> None:
    # ORCA_SOCKET set under a regular file: doctor stopped at `[Errno 20] Not a directory`
    # and reported nothing of the other checks
    not_a_directory = tmp_path / "notes.txt"
    not_a_directory.write_text("")
    runtime = not_a_directory if depth == "its directory" else not_a_directory / "run"
    sock = runtime / "orcad.sock"
    status, findings = doctor(orca_env, env={**orca_env.env, "ORCA_SOCKET": str(sock)})
    assert status == 1
    finding = only_problem(findings, "runtime dir")
    assert str(runtime) in finding["detail"] and "not a directory" in finding["detail"].lower()
    assert "ORCA_SOCKET" in finding["fix"]
    assert {f["check"] for f in findings} >= {"config", "disk"}  # the other checks ran


def test_a_runtime_directory_orcad_cannot_write_is_a_problem_not_all_clear(
    orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # mode 0500: private, so it was "is yours, mode 0700" and "clients start it on demand",
    # while every start failed with Permission denied on the lock file beside the socket
    runtime = tmp_path / "locked-run"
    runtime.mkdir(mode=0o500)
    env = {**orca_env.env, "ORCA_SOCKET": str(runtime / "orcad.sock")}
    argv = [sys.executable, "-m", "orcactl", "doctor", "--json"]
    if os.geteuid() == 0:  # root writes anywhere: drop that, as a user has it
        if shutil.which("capsh") is None:
            pytest.skip("needs capsh to run doctor as root without overriding permissions")
        drop = "--drop=cap_dac_override,cap_dac_read_search"
        argv = ["capsh", drop, "--", "-c", 'exec "$0" "$@"', *argv]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    findings = json.loads(result.stdout)["findings"]
    assert result.returncode == 1, findings
    found = only_problem(findings, "runtime dir")
    assert found["detail"] == (
        f"{runtime} is not writable (mode 0500); orcad cannot make its socket there"
    )
    assert found["fix"] == f"chmod 700 {runtime}"
    assert [f for f in findings if f["check"] == "socket"] == []  # not "start it on demand"


@pytest.mark.parametrize(
    "answer",
    [
        b"hello, this is not orcad\n",
        # another JSON-RPC server: an error object where orcad's ping result would be
        b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no such method"}}\n',
    ],
)
def test_socket_answering_outside_the_protocol(orca_env: OrcaEnv, answer: bytes) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(orca_env.socket))
    orca_env.socket.chmod(0o600)
    listener.listen()

    def answer_junk() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(answer)

    server = threading.Thread(target=answer_junk, daemon=True)
    server.start()
    try:
        status, findings = doctor(orca_env)
    finally:
        server.join(timeout=10)
        listener.close()
    assert status == 1
    assert "not orcad protocol 1" in only_problem(findings, "socket")["detail"]


def test_runtime_dir_that_is_a_symlink(orca_env: OrcaEnv, tmp_path: Path) -> None:
    run = orca_env.root / "run"
    run.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    run.symlink_to(tmp_path / "elsewhere")
    status, findings = doctor(orca_env)
    assert status == 1
    assert "symbolic link" in only_problem(findings, "runtime dir")["detail"]


def test_memory_files_readable_by_others(orca_env: OrcaEnv, project_dir: Path) -> None:
    user_md = orca_env.memory_root / "user.md"
    user_md.write_text("- prefers tabs\n")
    user_md.chmod(0o644)
    status, findings = doctor(orca_env)
    assert status == 1
    found = only_problem(findings, "memory")
    assert found["detail"] == f"file {user_md} has mode 0644; others can read it"
    assert found["fix"] == f"chmod 600 {user_md}"


@pytest.mark.parametrize("fault", ["lock link", "file for jobs/"])
def test_something_in_place_of_a_projects_lock_or_jobs_directory(
    orca_env: OrcaEnv, project_dir: Path, tmp_path: Path, fault: str
) -> None:
    # orcad cannot lock a project through a symbolic link, nor capture a turn without jobs/:
    # doctor says so before a turn fails, and its fix, run as written, clears it
    if fault == "lock link":
        (tmp_path / "elsewhere").write_text("")
        (project_dir / projects.LOCK_FILE).symlink_to(tmp_path / "elsewhere")
        named = project_dir / projects.LOCK_FILE
    else:
        (project_dir / projects.JOBS_DIR).rmdir()
        (project_dir / projects.JOBS_DIR).write_text("")
        (project_dir / projects.JOBS_DIR).chmod(0o600)
        named = project_dir / projects.JOBS_DIR
    status, findings = doctor(orca_env)
    assert status == 1
    found = only_problem(findings, "memory")
    assert str(named) in found["detail"]
    command = found["fix"].split("  (")[0].split()
    assert command[0] in ("rm", "mv") and command[1] == str(named), found["fix"]
    subprocess.run(command, check=True)
    status, findings = doctor(orca_env)
    assert problems(findings, "memory") == [], findings


def test_a_jobs_directory_reached_through_a_link_is_no_problem(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # orcad captures turns through such a link; moving it aside, as doctor told, hid the jobs
    cwd = tmp_path / "repo"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    jobs = orca_env.memory_root / "projects" / session.project.id / projects.JOBS_DIR
    (tmp_path / "jobs-elsewhere").mkdir(mode=0o700)

    def linked() -> bool:  # the opened project's work in the background may make it again
        with contextlib.suppress(FileNotFoundError):
            jobs.rmdir()
        try:
            jobs.symlink_to(tmp_path / "jobs-elsewhere")
        except FileExistsError:
            return False
        return True

    wait_for(linked)
    params = {
        "session_id": session.session_id,
        "epoch": session.epoch,
        "turn_id": "t1",
        "outcome": "succeeded",
        "verifier": "passed",
        "transcript_committed": True,
        "messages": [{"role": "user", "content": "We deploy from main."}],
    }
    job_id = daemon.call("turn.completed", params).job_id
    assert (jobs / f"{job_id}.json").is_file()
    findings = doctor(orca_env)[1]
    assert problems(findings, "memory") == [], findings


def test_a_directory_in_place_of_a_projects_lock_file(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # orcad cannot lock a project through a directory any more than through a link: doctor
    # says so, and its fix, run as written, lets the project be locked again
    cwd = tmp_path / "repo"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    lock = orca_env.memory_root / "projects" / session.project.id / projects.LOCK_FILE
    lock.unlink(missing_ok=True)
    lock.mkdir(mode=0o700)
    remember = {"session_id": session.session_id, "epoch": session.epoch, "scope": "project"}
    with pytest.raises(RemoteError):
        daemon.call("remember", {**remember, "text": "We deploy from main."})
    daemon.stop()
    found = only_problem(doctor(orca_env)[1], "memory")
    assert str(lock) in found["detail"], found
    subprocess.run(["sh", "-c", found["fix"].split("  (")[0]], check=True, capture_output=True)
    status, findings = doctor(orca_env)
    assert (status, problems(findings, "memory")) == (0, []), findings
    daemon.start()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    remember = {"session_id": session.session_id, "epoch": session.epoch, "scope": "project"}
    daemon.call("remember", {**remember, "text": "We deploy from main."})


@pytest.mark.parametrize("fault", ["lock link", "file for jobs/", "open mode"])
def test_a_fix_in_a_memory_root_whose_path_has_a_space_runs_as_written(
    tmp_path: Path, fault: str
) -> None:
    # a home such as "/Users/Jo Smith": the command doctor prints, pasted into a shell, must
    # act on the file it names, not on "/Users/Jo" and a path relative to where it is run
    (tmp_path / "my orca").mkdir()
    orca = OrcaEnv(tmp_path / "my orca")
    directory = orca.memory_root / "projects" / PROJECT_ID
    old_umask = os.umask(0o077)
    try:
        projects.ensure_directories(directory)
    finally:
        os.umask(old_umask)
    if fault == "lock link":
        (directory / projects.LOCK_FILE).symlink_to(tmp_path / "elsewhere")
    elif fault == "open mode":
        directory.chmod(0o755)
    else:
        (directory / projects.JOBS_DIR).rmdir()
        (directory / projects.JOBS_DIR).write_text("")
        (directory / projects.JOBS_DIR).chmod(0o600)
    found = only_problem(doctor(orca)[1], "memory")
    command = found["fix"].split("  (")[0]
    subprocess.run(["sh", "-c", command], check=True, cwd=tmp_path, capture_output=True)
    status, findings = doctor(orca)
    assert (status, problems(findings, "memory")) == (0, []), findings


def test_memory_root_open_to_others(orca_env: OrcaEnv, project_dir: Path) -> None:
    orca_env.memory_root.chmod(0o755)
    status, findings = doctor(orca_env)
    assert status == 1
    assert str(orca_env.memory_root) in only_problem(findings, "memory")["detail"]


def test_a_state_database_not_yet_created_is_not_called_sound(orca_env: OrcaEnv) -> None:
    state_db = orca_env.memory_root / "daemon-state.sqlite3"
    status, findings = doctor(orca_env)
    assert status == 0
    details = [f["detail"] for f in findings if f["check"] == "databases"]
    assert f"{state_db} does not exist yet" in details
    assert f"{state_db} is sound" not in details


def test_a_file_in_place_of_the_memory_root_is_named_as_no_directory(orca_env: OrcaEnv) -> None:
    # it was "private to you" (or "chmod 600" it, had its mode been open) while orcad could not
    # start on it
    orca_env.home.mkdir(exist_ok=True)
    orca_env.memory_root.write_text("not a directory")
    orca_env.memory_root.chmod(0o600)
    status, findings = doctor(orca_env)
    assert status == 1
    [found] = problems(findings, "memory")
    assert found["detail"] == f"{orca_env.memory_root} is not a directory; orcad cannot start"
    assert found["fix"].startswith(f"mv {orca_env.memory_root} {orca_env.memory_root}.aside")


@pytest.mark.parametrize("points_to", ["a drive not mounted", "itself"])
def test_a_memory_root_linked_to_nowhere_is_a_problem(orca_env: OrcaEnv, points_to: str) -> None:
    # a link to an unmounted drive (or a loop of links) was "does not exist yet", ok, while
    # orcad could not start on it
    orca_env.home.mkdir(exist_ok=True)
    target = orca_env.root / "drive" / "memory"
    orca_env.memory_root.symlink_to(target if points_to != "itself" else orca_env.memory_root)
    status, findings = doctor(orca_env)
    assert status == 1
    [found] = problems(findings, "memory")
    assert found["detail"].startswith(f"{orca_env.memory_root} is a symbolic link to ")
    assert found["detail"].endswith(
        "which does not exist (a drive not mounted?) or leads back to the link; orcad cannot start"
    )
    assert f"remove the link {orca_env.memory_root}" in found["fix"]


def test_a_database_directory_under_a_link_to_nowhere_is_a_problem(orca_env: OrcaEnv) -> None:
    link = orca_env.root / "linked"
    link.symlink_to(orca_env.root / "drive")
    orca_env.extra_env["ORCA_CONFIG_DIR"] = str(link / "config")
    status, findings = doctor(orca_env)
    assert status == 1
    assert only_problem(findings, "database")["detail"].startswith(
        f"{link} is a symbolic link to {orca_env.root / 'drive'}, which does not exist"
    )


def test_a_database_directory_that_cannot_be_created_is_a_problem(orca_env: OrcaEnv) -> None:
    blocker = orca_env.root / "a-file"
    blocker.write_text("in the way")
    orca_env.extra_env["ORCA_CONFIG_DIR"] = str(blocker / "config")
    status, findings = doctor(orca_env)
    assert status == 1
    assert only_problem(findings, "database")["detail"] == (
        f"{blocker / 'config'} cannot be created: {blocker} is not a directory; deliberate "
        "memory fails with a storage error"
    )


def test_config_dir_set_to_the_database_file_is_fixed_by_the_variable_not_by_moving_it(
    orca_env: OrcaEnv,
) -> None:
    # ORCA_CONFIG_DIR names the database's directory; set to the database itself, the fix was
    # `mv .../memory.sqlite3 .../memory.sqlite3.aside`: the user's memory moved away from its
    # -wal, and a new empty database made in its place
    orca_env.deliberate_db.write_bytes(b"SQLite format 3\x00")
    orca_env.deliberate_db.chmod(0o600)
    env = {**orca_env.env, "ORCA_CONFIG_DIR": str(orca_env.deliberate_db)}
    status, findings = doctor(orca_env, env=env)
    assert status == 1
    found = only_problem(findings, "database")
    assert found["detail"].startswith(f"{orca_env.deliberate_db} is not a directory")
    assert not found["fix"].startswith("mv ")
    assert f"ORCA_CONFIG_DIR={orca_env.config_dir}" in found["fix"]


def test_config_dir_set_to_another_file_is_fixed_by_the_variable(orca_env: OrcaEnv) -> None:
    notes = orca_env.root / "notes.txt"
    notes.write_text("mine")
    status, findings = doctor(orca_env, env={**orca_env.env, "ORCA_CONFIG_DIR": str(notes)})
    assert status == 1
    found = only_problem(findings, "database")
    assert found["fix"] == f"set ORCA_CONFIG_DIR to a directory: {notes} is not one"


def test_deliberate_database_readable_by_others(orca_env: OrcaEnv) -> None:
    orca_env.deliberate_db.write_bytes(b"")
    orca_env.deliberate_db.chmod(0o640)
    status, findings = doctor(orca_env)
    assert status == 1
    assert str(orca_env.deliberate_db) in only_problem(findings, "database")["detail"]


def test_a_fifo_in_place_of_the_deliberate_database_is_named_not_waited_on(
    orca_env: OrcaEnv,
) -> None:
    # opened read-only, a FIFO would hold doctor until some process wrote to it
    os.mkfifo(orca_env.deliberate_db, 0o600)
    status, findings = doctor(orca_env)
    assert status == 1
    [found] = problems(findings, "databases")
    assert found["detail"].startswith(f"{orca_env.deliberate_db} is not a regular file"), found
    assert f"mv {orca_env.deliberate_db} " in found["fix"], found


def test_config_that_does_not_parse(orca_env: OrcaEnv) -> None:
    orca_env.write_config("[extraction\nprovider = 'heuristic'\n")
    status, findings = doctor(orca_env)
    assert status == 1
    assert "not valid TOML" in only_problem(findings, "config")["detail"]


def test_config_with_unknown_keys(orca_env: OrcaEnv) -> None:
    orca_env.write_config("auto_memroy = false\n[extraction]\nworkerz = 3\n")
    status, findings = doctor(orca_env)
    assert status == 1
    assert (
        "unknown keys: auto_memroy, extraction.workerz"
        in only_problem(findings, "config")["detail"]
    )
    # it said only "correct their spelling", and the user had to find the key in the README
    fix = only_problem(findings, "config")["fix"]
    assert fix.endswith(
        "(auto_memroy: did you mean auto_memory?; "
        "extraction.workerz: did you mean extraction.workers?)"
    ), fix


def test_openai_provider_reachable(orca_env: OrcaEnv, model_server: tuple[str, list[int]]) -> None:
    url, _answer = model_server
    orca_env.write_config(
        f'[extraction]\nprovider = "openai"\n[extraction.openai]\nbase_url = "{url}"\n'
    )
    status, findings = doctor(orca_env)
    assert status == 0, findings
    assert (
        next(f for f in findings if f["check"] == "provider")["detail"]
        == f"{url}/models answered 200"
    )


def test_openai_provider_refusing_the_key(
    orca_env: OrcaEnv, model_server: tuple[str, list[int]]
) -> None:
    url, answer = model_server
    answer[0] = 401
    orca_env.write_config(
        f'[extraction]\nprovider = "openai"\n[extraction.openai]\nbase_url = "{url}"\n'
    )
    status, findings = doctor(orca_env)
    assert status == 1
    assert "refused the API key (401)" in only_problem(findings, "provider")["detail"]


def test_the_provider_check_never_sends_the_key_through_a_redirect(orca_env: OrcaEnv) -> None:
    """A redirect may point at any host; the key goes only to the configured endpoint."""
    key = "sk-doctor-3f9a1c7e5b2d4f6a8c0e"
    seen_by_target: list[str | None] = []

    class Target(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen_by_target.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    target = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Target)
    target_url = f"http://127.0.0.1:{target.server_address[1]}/elsewhere"

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", target_url)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    endpoint = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    servers = [target, endpoint]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        orca_env.write_config(
            '[extraction]\nprovider = "openai"\n[extraction.openai]\n'
            f'base_url = "http://127.0.0.1:{endpoint.server_address[1]}/v1"\n'
            'api_key_env = "ORCA_TEST_DOCTOR_KEY"\n'
        )
        orca_env.extra_env["ORCA_TEST_DOCTOR_KEY"] = key
        status, findings = doctor(orca_env)
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
    assert key not in str(seen_by_target)
    assert status == 1
    assert "redirect" in only_problem(findings, "provider")["detail"]


def test_openai_provider_unreachable(orca_env: OrcaEnv) -> None:
    closed = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens on this port now
    orca_env.write_config(
        f'[extraction]\nprovider = "openai"\n[extraction.openai]\nbase_url = "http://127.0.0.1:{port}/v1"\n'
    )
    status, findings = doctor(orca_env)
    assert status == 1
    assert "is unreachable" in only_problem(findings, "provider")["detail"]


def test_openai_provider_with_a_query_in_its_base_url(
    orca_env: OrcaEnv, model_server: tuple[str, list[int]]
) -> None:
    """doctor asked `{base_url}/models`, the path in the query, and showed the query."""
    base_url, _statuses = model_server
    orca_env.write_config(
        '[extraction]\nprovider = "openai"\n[extraction.openai]\n'
        f'base_url = "{base_url}?api-key=tok-0123"\n'
    )
    status, findings = doctor(orca_env)
    assert status == 1
    found = only_problem(findings, "provider")
    assert "has a query or a fragment" in found["detail"]
    assert "tok-0123" not in json.dumps(findings)


def test_a_config_that_does_not_parse_judges_no_provider_or_model(orca_env: OrcaEnv) -> None:
    """The defaults were judged in its place: 'heuristic extraction needs no provider' and
    the built-in model loading, ok, for a file that asks for an endpoint."""
    orca_env.write_config(
        '[extraction]\nprovider = "openai"\nworkers = "two"\n[recall]\nembedding = "endpoint"\n'
    )
    status, findings = doctor(orca_env)
    assert status == 1
    assert "extraction.workers" in only_problem(findings, "config")["detail"]
    judged = {f["check"]: f for f in findings if f["check"] in ("provider", "embedding")}
    assert judged["provider"]["status"] == "skipped", judged
    assert judged["embedding"]["status"] == "skipped", judged
    assert "config file is not valid" in judged["provider"]["detail"]


def test_a_provider_table_written_out_without_its_provider_is_named(orca_env: OrcaEnv) -> None:
    """[extraction.openai] filled in and `provider = "openai"` forgotten ran the heuristic,
    and doctor said only that the heuristic needs no provider."""
    orca_env.write_config(
        '[extraction.openai]\nbase_url = "http://127.0.0.1:8080/v1"\nmodel = "qwen"\n'
        '[recall.endpoint]\nbase_url = "http://127.0.0.1:8080/v1"\nmodel = "nomic"\n'
    )
    _status, findings = doctor(orca_env)
    [config] = [f for f in findings if f["check"] == "config"]
    assert (
        '[extraction.openai] is set but unused (provider is "heuristic", not "openai")'
        in (config["detail"])
    )
    assert (
        '[recall.endpoint] is set but unused (embedding is "builtin", not "endpoint")'
        in (config["detail"])
    )
    orca_env.write_config('[extraction]\nprovider = "openai"\n[extraction.openai]\nmodel = "q"\n')
    _status, findings = doctor(orca_env)
    [config] = [f for f in findings if f["check"] == "config"]
    assert "unused" not in config["detail"]


def test_command_provider_not_on_path(orca_env: OrcaEnv) -> None:
    orca_env.write_config(
        '[extraction]\nprovider = "command"\n'
        '[extraction.command]\nargv = ["no-such-llm-tool", "-m", "x"]\n'
    )
    status, findings = doctor(orca_env)
    assert status == 1
    assert "'no-such-llm-tool' is not found on PATH" in only_problem(findings, "provider")["detail"]


def test_corrupt_and_missing_indexes(orca_env: OrcaEnv, project_dir: Path) -> None:
    written = ledger.Ledger(revision=3)
    ledger.write_ledger(project_dir, written)
    projections.write_index(project_dir, written)
    status, findings = doctor(orca_env)
    assert status == 0, findings
    assert (
        next(f for f in findings if f["check"] == "index")["detail"]
        == f"project {PROJECT_ID}: index current"
    )

    projections.index_path(project_dir).write_bytes(b"this is not a database" * 100)
    status, findings = doctor(orca_env)
    assert status == 1
    assert only_problem(findings, "index")["detail"] == f"project {PROJECT_ID}: index is corrupt"

    projections.index_path(project_dir).unlink()
    status, findings = doctor(orca_env)
    assert only_problem(findings, "index")["detail"] == f"project {PROJECT_ID}: index is missing"


def test_exhausted_and_stuck_jobs(orca_env: OrcaEnv, project_dir: Path) -> None:
    def job(job_id: str, created: float) -> Any:
        return new_job(
            job_id=job_id,
            project_id=PROJECT_ID,
            session_id="s",
            turn_id="t",
            source="x",
            source_digest="0" * 64,
            source_bytes=1,
            source_truncated=False,
            now=created,
        )

    now = time.time()
    exhausted = msgspec.structs.replace(
        job("job_" + "1" * 32, now),
        state="exhausted",
        attempts=4,
        errors=[
            AttemptError(
                at="2026-11-30T07:00:00.000Z", attempt=4, worker="w", message="provider timed out"
            )
        ],
    )
    stuck = job("job_" + "2" * 32, now - 3 * 3600)  # queued three hours ago, never touched since
    fresh = job("job_" + "3" * 32, now)
    for record in (exhausted, stuck, fresh):
        jobstore.write_job(project_dir, record)
    status, findings = doctor(orca_env)
    assert status == 1
    details = sorted(f["detail"] for f in problems(findings, "jobs"))
    assert details == [
        f"job job_{'1' * 32} (project {PROJECT_ID}) gave up after 4 attempts: provider timed out",
        f"job job_{'2' * 32} (project {PROJECT_ID}) has been pending with no progress for 180 min",
    ]


def test_low_disk_space(orca_env: OrcaEnv) -> None:
    status, findings = doctor(orca_env, "--min-free-mb", str(2**40))
    assert status == 1
    assert only_problem(findings, "disk")["detail"].startswith("only ")


def test_features_the_daemon_does_not_offer_are_skipped(
    orca_env: OrcaEnv, daemon: DaemonProcess
) -> None:
    """With a daemon running, projects and jobs come from it; a method it lacks is skipped."""
    offered = {}
    for method in ("projects.list", "jobs.list"):
        try:
            daemon.call(method, {})
            offered[method] = True
        except Exception as exc:  # RemoteError -32601 when the feature is not installed
            assert getattr(exc, "code", None) == -32601, exc
            offered[method] = False
    status, findings = doctor(orca_env)
    assert status == 0, findings
    for check, method in (("index", "projects.list"), ("jobs", "jobs.list")):
        finding = next(f for f in findings if f["check"] == check)
        if offered[method]:
            assert finding["status"] == "ok"
        else:
            assert finding == {
                "check": check,
                "status": "skipped",
                "detail": f"the daemon does not offer {method}",
                "fix": "",
            }
    assert os.path.exists(orca_env.socket)


def test_running_daemon_reports_exhausted_jobs_and_broken_indexes(
    orca_env: OrcaEnv, project_dir: Path, daemon_factory: list[DaemonProcess]
) -> None:
    """The same problems, found through the daemon's projects.* and jobs.list when it runs."""
    written = ledger.Ledger(revision=2)
    ledger.write_ledger(project_dir, written)
    projections.index_path(project_dir).write_bytes(b"this is not a database" * 100)
    write_exhausted_job(project_dir, "job_" + "4" * 32)
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    process.start()
    status, findings = doctor(orca_env)
    assert status == 1
    assert "pid" in next(f for f in findings if f["check"] == "socket")["detail"]
    jobs = problems(findings, "jobs")
    assert [f["detail"] for f in jobs] == [
        f"job job_{'4' * 32} (project {PROJECT_ID}) gave up after 4 attempts"
    ]
    index = [f for f in findings if f["check"] == "index"]
    assert len(index) == 1
    assert index[0]["detail"] == f"project {PROJECT_ID}: index is corrupt"


def test_the_fix_for_an_exhausted_job_runs_it_again_and_clears_the_problem(
    orca_env: OrcaEnv, project_dir: Path, daemon_factory: list[DaemonProcess]
) -> None:
    """The fix said to "forget or re-run the turn", neither of which a user can do to a job:
    `orcactl jobs retry` is what runs an exhausted job again."""
    job_id = "job_" + "5" * 32
    write_exhausted_job(project_dir, job_id)
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    process.start()
    status, findings = doctor(orca_env)
    assert status == 1
    [problem] = problems(findings, "jobs")
    command = f"orcactl jobs retry {job_id}"
    assert command in problem["fix"], problem
    retried = subprocess.run(
        [sys.executable, "-m", "orcactl", *command.split()[1:]],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert retried.returncode == 0, retried.stderr
    deadline = time.monotonic() + 30
    while True:  # the heuristic provider commits it at once; doctor then finds nothing
        status, findings = doctor(orca_env)
        if not problems(findings, "jobs") or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert problems(findings, "jobs") == []


def test_an_embedding_model_that_cannot_load(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"\x08\x07 not a graph")
    (broken / "vocab.txt").write_text("[UNK]\n")
    orca_env.write_config(f'[recall]\nembedding = "{broken}"\n')
    status, findings = doctor(orca_env)  # no daemon: doctor loads the model itself
    assert status == 1
    found = only_problem(findings, "embedding")
    assert "onnxruntime cannot load" in found["detail"]
    assert found["fix"] == 'fix [recall] embedding in config.toml, or set it to "builtin"'

    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    deadline = time.monotonic() + 30
    while daemon.call("daemon.status").embedding.state == "loading":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    status, findings = doctor(orca_env)  # as the daemon reports it
    found = only_problem(findings, "embedding")
    assert "recall is lexical only: onnxruntime cannot load" in found["detail"]
    assert found["fix"].startswith('fix [recall] embedding in config.toml, or set it to "builtin"')


def test_the_builtin_model_unavailable_points_at_the_static_one() -> None:
    finding = judge_embedding(
        EmbeddingStatus(
            state="unavailable", setting="builtin", reason="onnxruntime cannot be imported"
        )
    )
    assert finding.status == "problem" and "onnxruntime cannot be imported" in finding.detail
    assert 'set [recall] embedding = "static"' in finding.fix


@pytest.mark.parametrize("setting", ["endpoint", "builtin"])
def test_a_model_that_failed_since_it_loaded_is_a_problem_with_a_fix(setting: str) -> None:
    """An embedding endpoint that answered 500 was a [FAIL] with no fix line, the one problem
    doctor showed without saying what to do."""
    finding = judge_embedding(
        EmbeddingStatus(
            state="ready",
            setting=setting,
            model="endpoint-emb" if setting == "endpoint" else "minilm",
            reason="embedding endpoint http://127.0.0.1:9/v1/embeddings answered 500",
        )
    )
    assert finding.status == "problem" and "last failure: embedding endpoint" in finding.detail
    if setting == "endpoint":
        assert finding.fix.startswith("make the server [recall.endpoint] base_url names answer")
    else:
        assert finding.fix.startswith("recall ranks by words while the model fails")


def test_the_provider_check_shows_neither_the_key_nor_the_urls_credentials(
    orca_env: OrcaEnv,
) -> None:
    """Credentials in base_url reach the server as Basic authorization, as orcad sends them
    (not as part of the host name), and are not shown; nor is a key that a redirect's
    Location quotes back."""
    key = "sk-doctor-7c1e9a3f5b2d4e6a8c0f"
    password = "S3cretPassw0rd9"

    class Endpoint(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            authorization = self.headers.get("Authorization", "")
            if authorization.startswith("Basic "):
                self.send_response(200)
            else:
                self.send_response(302)
                self.send_header("Location", f"http://elsewhere.invalid/?auth={authorization}")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    endpoint = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    port = endpoint.server_address[1]
    orca_env.extra_env["ORCA_TEST_DOCTOR_KEY"] = key
    config = '[extraction]\nprovider = "openai"\n[extraction.openai]\nbase_url = "{}"\n'
    config += 'api_key_env = "ORCA_TEST_DOCTOR_KEY"\n'
    try:
        orca_env.write_config(config.format(f"http://deploy:{password}@127.0.0.1:{port}/v1"))
        _, with_credentials = doctor(orca_env)
        orca_env.write_config(config.format(f"http://127.0.0.1:{port}/v1"))
        _, with_key = doctor(orca_env)
    finally:
        endpoint.shutdown()
        endpoint.server_close()
    [reached] = [f for f in with_credentials if f["check"] == "provider"]
    assert reached["status"] == "ok", reached
    assert reached["detail"] == f"http://[credentials]@127.0.0.1:{port}/v1/models answered 200"
    redirected = only_problem(with_key, "provider")["detail"]
    assert "a redirect to 'http://elsewhere.invalid/?auth=Bearer [key]'" in redirected
    assert key not in redirected


def test_the_provider_check_reaches_a_loopback_server_directly_as_orcad_does(
    orca_env: OrcaEnv, model_server: tuple[str, list[int]]
) -> None:
    """A proxy named for the outside (nothing listens on port 9) is not asked for a server on
    this machine: orcad does not ask it either."""
    url, _ = model_server
    for variable in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        orca_env.extra_env[variable] = "http://127.0.0.1:9"
    orca_env.write_config(
        f'[extraction]\nprovider = "openai"\n[extraction.openai]\nbase_url = "{url}"\n'
    )
    env = {k: v for k, v in orca_env.env.items() if k.lower() != "no_proxy"}
    _, findings = doctor(orca_env, env=env)
    [provider] = [f for f in findings if f["check"] == "provider"]
    assert provider["status"] == "ok", provider
    assert provider["detail"] == f"{url}/models answered 200"


def test_a_command_given_by_path_is_said_missing_or_not_executable(orca_env: OrcaEnv) -> None:
    """A path is not looked up on PATH: doctor says what is wrong with the file."""
    script = orca_env.root / "extract.sh"
    script.write_text("#!/bin/sh\necho NOTHING\n")
    script.chmod(0o644)
    details = []
    for argv0 in (script, orca_env.root / "missing.sh"):
        orca_env.write_config(
            f'[extraction]\nprovider = "command"\n[extraction.command]\nargv = ["{argv0}"]\n'
        )
        _, findings = doctor(orca_env)
        details.append(only_problem(findings, "provider")["detail"])
    assert details == [
        f"extraction.command.argv[0] '{script}' is not executable (chmod +x it)",
        f"extraction.command.argv[0] '{orca_env.root / 'missing.sh'}' does not exist",
    ]


def turn(session: Any, turn_id: str, text: str) -> dict[str, Any]:
    return {
        "session_id": session.session_id,
        "epoch": session.epoch,
        "turn_id": turn_id,
        "outcome": "succeeded",
        "verifier": "passed",
        "transcript_committed": True,
        "messages": [{"role": "user", "content": text}],
    }


IN_PLACE = {
    "file for project": "is not a directory (a file is in its place)",
    "link to nowhere for project": "which leads nowhere",
    "link to a file for project": "which is not a directory",
    "file for projects": "is not a directory (a file is in its place)",
    "link to nowhere for projects": "which leads nowhere",
}


def plant_fault(odd: Path, fault: str, tmp_path: Path) -> None:
    """Put at `odd` what `fault` names: a file or a link in place of a directory, or a
    forgotten-jobs.json that is a FIFO, torn, or (readable and whole but) unreadable."""
    if fault.startswith(("file", "link")):
        shutil.rmtree(odd)
        if fault.startswith("file"):
            odd.write_text("not a directory\n")
            odd.chmod(0o600)
        elif fault.startswith("link to nowhere"):
            odd.symlink_to(tmp_path / "unmounted" / "projects")
        else:
            (tmp_path / "a file").write_text("not a directory\n")
            odd.symlink_to(tmp_path / "a file")
    elif fault == "fifo list":
        os.mkfifo(odd, 0o600)  # never waited on
    else:
        odd.write_text('{"job_ids": ["job_' if fault == "torn list" else '{"job_ids": []}')
        odd.chmod(0 if fault == "unreadable list" else 0o600)


@pytest.mark.parametrize("running", [False, True], ids=["stopped", "running"])
@pytest.mark.parametrize("fault", ["torn list", "fifo list", *IN_PLACE])
def test_what_orcad_refuses_in_a_project_is_named_whether_or_not_it_runs(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path, fault: str, running: bool
) -> None:
    # a damaged forgotten-jobs.json, or no directory where the project's (or projects/) is,
    # refuses the project's turns; doctor said so only through what a running daemon had
    # recorded, a link that leads nowhere the daemon called "File exists", and doctor's index
    # check said of a file at projects/ only that it could not run
    cwd = tmp_path / "repo"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    directory = orca_env.memory_root / "projects" / session.project.id
    odd = directory if fault in IN_PLACE else directory / jobstore.FORGOTTEN_JOBS_FILE
    if fault.endswith("for projects"):
        odd = directory.parent
    plant_fault(odd, fault, tmp_path)
    refused = remote_error_of(daemon, turn(session, "t1", "We deploy from main."))
    if not running:
        daemon.stop()
    status, findings = doctor(orca_env)
    assert status == 1
    found = [f for f in problems(findings, "memory") if str(odd) in f["detail"]]
    assert len(found) == 1, findings
    # what is wrong and what to do, in the daemon's own words
    assert found[0]["detail"].startswith(f"{odd} is ")
    assert found[0]["fix"] and found[0]["fix"] in refused
    said = found[0]["detail"].split("; no turn")[0].removesuffix(".")
    assert said in refused, (said, refused)
    if fault in IN_PLACE:
        assert IN_PLACE[fault] in said, said
        # the memory check names it: the index check does not send the user to chmod files
        # that cannot be there, nor does projects.list call them unreadable
        assert problems(findings, "index") == [], findings
        if running and fault.endswith("for project"):  # when it still lists the project
            for listed in daemon.call("projects.list").projects:
                assert listed.corrupt and listed.problem.startswith(said), listed
        odd.rename(f"{odd}.not-a-directory")  # as it says
    else:
        odd.unlink()
    findings = doctor(orca_env)[1]
    assert problems(findings, "memory") == [], findings


def doctor_as_orcad(orca: OrcaEnv, *args: str) -> subprocess.CompletedProcess[str]:
    """orcactl doctor run as orcad runs (DaemonAsAUser): root's overrides of permissions
    dropped, so a file orcad may not read is one doctor may not read either."""
    prefix = ["setpriv", "--bounding-set", ROOTS_OVERRIDES] if os.geteuid() == 0 else []
    return subprocess.run(
        [*prefix, sys.executable, "-m", "orcactl", "doctor", "--min-free-mb", "0", *args],
        env=orca.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "fault", ["torn list", "fifo list", "unreadable list", "file for jobs", *IN_PLACE]
)
def test_a_refusal_orcad_recorded_stops_failing_doctor_once_its_cause_is_fixed(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path, fault: str
) -> None:
    # the daemon's recent errors keep what a turn was refused for until orcad restarts: doctor
    # beside it named the cause twice (the memory check, and the daemon check with the recorded
    # fault), and once the cause was fixed as it said, went on failing with the recorded fault
    daemon = DaemonAsAUser(orca_env)
    daemon_factory.append(daemon)
    daemon.start()
    cwd = tmp_path / "repo"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    directory = orca_env.memory_root / "projects" / session.project.id
    odd = {
        "file for jobs": directory / projects.JOBS_DIR,
        "file for projects": directory.parent,
        "link to nowhere for projects": directory.parent,
    }.get(fault, directory if fault in IN_PLACE else directory / jobstore.FORGOTTEN_JOBS_FILE)
    plant_fault(odd, fault, tmp_path)
    with pytest.raises(RemoteError) as caught:
        daemon.call("turn.completed", turn(session, "t1", "We deploy from main."))
    assert caught.value.code == -32017
    recorded = [e.message for e in daemon.call("daemon.status").recent_errors]
    assert any(str(odd) in message for message in recorded), recorded

    done = doctor_as_orcad(orca_env, "--json")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1
    failed = [f for f in json.loads(done.stdout)["findings"] if f["status"] == "problem"]
    assert [f["check"] for f in failed] == ["memory"], failed  # named once, as it is now
    assert str(odd) in failed[0]["detail"]
    text = doctor_as_orcad(orca_env)
    assert text.returncode == 1
    assert [line for line in text.stdout.splitlines() if str(odd) in line and "FAIL" in line] == [
        f"[FAIL] memory: {failed[0]['detail']}"
    ], text.stdout

    # fixed as doctor says
    if fault == "unreadable list":
        assert "chmod" in failed[0]["fix"]
        odd.chmod(0o600)
    else:
        assert "move it aside" in failed[0]["fix"] or "mv " in failed[0]["fix"], failed
        odd.rename(f"{odd}.aside")
    done = doctor_as_orcad(orca_env, "--json")
    assert "Traceback" not in done.stderr, done.stderr
    findings = json.loads(done.stdout)["findings"]
    assert done.returncode == 0, [f for f in findings if f["status"] != "ok"]
    said = [f for f in findings if f["check"] == "daemon" and "crashes recorded" in f["detail"]]
    assert len(said) == 1 and "1 recorded about files in the memory root" in said[0]["detail"], said
    text = doctor_as_orcad(orca_env)
    assert (text.returncode, text.stdout.splitlines()[-1]) == (0, "No problems found.")
    # the daemon's record is history, still listed by daemon.status (orcactl status)
    listed = [e.message for e in daemon.call("daemon.status").recent_errors]
    assert any(str(odd) in message for message in listed), listed
    # and the project's turns are taken again
    session = daemon.call("session.open", {"cwd": str(cwd)})
    assert daemon.call("turn.completed", turn(session, "t2", "We deploy from main.")).job_id


def test_a_damaged_project_file_orcad_recorded_stops_failing_doctor_once_moved_aside(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # a session opened in a project whose project.json is damaged records the fault until
    # orcad restarts: doctor named the file twice (the index check, and the daemon check with
    # the recorded fault), and went on failing once the file was moved aside as it said
    cwd = tmp_path / "repo"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    project_file = orca_env.memory_root / "projects" / session.project.id / "project.json"
    project_file.write_bytes(b"\xff{ not a project record\n")
    daemon.call("session.open", {"cwd": str(cwd)})
    kinds = [e.kind for e in daemon.call("daemon.status").recent_errors]
    assert "project_metadata_corrupt" in kinds, kinds
    status, findings = doctor(orca_env)
    assert status == 1
    failed = [f for f in findings if f["status"] == "problem"]
    assert [f["check"] for f in failed] == ["index"], failed  # named once, as it is now
    assert str(project_file) in failed[0]["fix"], failed
    move = failed[0]["fix"].split("(")[0].strip()
    assert move.startswith("mv "), move
    subprocess.run(["sh", "-c", move], check=True)  # as it says
    status, findings = doctor(orca_env)
    assert status == 0, [f for f in findings if f["status"] != "ok"]
    kinds = [e.kind for e in daemon.call("daemon.status").recent_errors]
    assert "project_metadata_corrupt" in kinds, kinds  # still listed: it happened
    daemon.call("session.open", {"cwd": str(cwd)})
    assert project_file.is_file()  # written again, as the fix says
    assert doctor(orca_env)[0] == 0


@pytest.mark.parametrize("fault", ["link", "directory"])
def test_a_lock_file_orcad_could_not_use_stops_failing_doctor_once_removed(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path, fault: str
) -> None:
    # a project's .lock that is a symbolic link or a directory refuses its turns, and the fault
    # stays recorded until orcad restarts: doctor named it twice (the memory check, and the
    # daemon check with the recorded fault), and went on failing once it was removed
    cwd = tmp_path / "repo"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    lock = orca_env.memory_root / "projects" / session.project.id / projects.LOCK_FILE
    lock.unlink()
    if fault == "link":
        (tmp_path / "elsewhere").write_text("")
        lock.symlink_to(tmp_path / "elsewhere")
    else:
        lock.mkdir(mode=0o700)
    ids = {"session_id": session.session_id, "epoch": session.epoch}
    remember = {**ids, "text": "we deploy on Tuesdays", "scope": "project"}
    with pytest.raises(RemoteError) as caught:
        daemon.call("remember", remember)
    assert caught.value.code == -32017
    recorded = [e.message for e in daemon.call("daemon.status").recent_errors]
    assert any(f"cannot lock {lock}" in message for message in recorded), recorded
    status, findings = doctor(orca_env)
    assert status == 1
    failed = [f for f in findings if f["status"] == "problem"]
    assert [f["check"] for f in failed] == ["memory"], failed  # named once, as it is now
    assert failed[0]["detail"].startswith(str(lock)), failed
    assert failed[0]["fix"].startswith(("rm ", "mv ")), failed
    command = failed[0]["fix"].split("  (")[0]
    subprocess.run(["sh", "-c", command], check=True)  # as it says
    status, findings = doctor(orca_env)
    assert status == 0, [f for f in findings if f["status"] != "ok"]
    listed = [e.message for e in daemon.call("daemon.status").recent_errors]
    assert any(f"cannot lock {lock}" in message for message in listed), listed  # it happened
    daemon.call("remember", remember)  # orcad makes the file again
    assert lock.is_file() and not lock.is_symlink()


def remote_error_of(daemon: DaemonProcess, params: dict[str, Any]) -> str:
    with pytest.raises(RemoteError) as caught:
        daemon.call("turn.completed", params)
    assert (caught.value.code, caught.value.data["reason"]) == (-32017, "corrupt")
    return caught.value.error.message


@pytest.mark.parametrize("running", [False, True], ids=["stopped", "running"])
@pytest.mark.parametrize("name", ["orcad.pid", "orcad.pid.tmp"])
def test_a_directory_at_the_pid_file_is_named_whether_or_not_orcad_runs(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], name: str, running: bool
) -> None:
    # a directory there stops every start; with none running, nothing else said so
    process = DaemonProcess(orca_env)
    daemon_factory.append(process)
    process.start()
    if not running:
        process.stop()
    odd = orca_env.memory_root / name
    if odd.exists():
        odd.unlink()
    odd.mkdir(mode=0o700)
    status, findings = doctor(orca_env)
    assert status == 1
    found = only_problem(findings, "memory")
    assert found["detail"].startswith(f"{odd}: it is a directory"), found
    if running:
        process.stop()
    refused = DaemonProcess(orca_env)
    daemon_factory.append(refused)
    refused.spawn()
    assert refused.proc is not None and refused.proc.wait(timeout=30) == 1
    said = refused.stderr()
    assert found["fix"] in said and found["detail"].split("; orcad refuses")[0] in said, said
    subprocess.run(["sh", "-c", found["fix"].split("(")[1].split(")")[0]], check=True)
    assert problems(doctor(orca_env)[1], "memory") == []


def test_fifos_at_the_pid_file_and_its_temporary_file_do_not_hold_doctor(
    orca_env: OrcaEnv,
) -> None:
    # orcad replaces both (nothing to report); doctor must only look at them, never read them
    orca_env.memory_root.mkdir(mode=0o700, parents=True)
    for name in ("orcad.pid", "orcad.pid.tmp"):
        os.mkfifo(orca_env.memory_root / name, 0o600)
    findings = doctor(orca_env)[1]  # within its 60 s, or the run fails
    assert problems(findings, "memory") == [], findings


@pytest.mark.parametrize("linked", ["projects", "project"])
def test_a_link_to_a_directory_in_place_of_a_projects_directory_is_used(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path, linked: str
) -> None:
    # the user's choice (memory kept on another disk): turns are captured through it
    cwd = tmp_path / "repo"
    cwd.mkdir()
    session = daemon.call("session.open", {"cwd": str(cwd)})
    directory = orca_env.memory_root / "projects" / session.project.id
    place = directory.parent if linked == "projects" else directory
    elsewhere = tmp_path / "elsewhere"
    place.rename(elsewhere)
    place.symlink_to(elsewhere)
    daemon.call("turn.completed", turn(session, "t1", "We deploy from main."))
    wait_for(lambda: daemon.call("projects.list").projects[0].candidates)
    assert any((elsewhere if linked == "project" else elsewhere / directory.name).iterdir())
    daemon.stop()
    findings = doctor(orca_env)[1]
    assert problems(findings, "memory") == [] and problems(findings, "index") == [], findings


def test_a_lock_file_past_the_files_doctor_walks_is_still_named(
    daemon: DaemonProcess, orca_env: OrcaEnv, tmp_path: Path
) -> None:
    # doctor walks at most FILE_SCAN_LIMIT entries of the memory root (a project's jobs/ keeps
    # a file per turn), and leaves the fault orcad recorded for a .lock it could not use to the
    # memory check: a .lock in a project walked after that many was named by neither
    locks = []
    for name in ("one", "two"):
        cwd = tmp_path / name
        cwd.mkdir()
        session = daemon.call("session.open", {"cwd": str(cwd)})
        directory = orca_env.memory_root / "projects" / session.project.id
        jobs = directory / projects.JOBS_DIR
        wait_for(jobs.is_dir)
        for number in range(FILE_SCAN_LIMIT + 1):  # as many turns as doctor walks, and one
            (jobs / f"turn-{number}.tmp-kept").touch(mode=0o600)
        lock = directory / projects.LOCK_FILE
        lock.unlink(missing_ok=True)
        lock.mkdir(mode=0o700)
        remember = {"session_id": session.session_id, "epoch": session.epoch}
        with pytest.raises(RemoteError):
            daemon.call("remember", {**remember, "scope": "project", "text": "We use uv."})
        locks.append(lock)
    recorded = [e.message for e in daemon.call("daemon.status").recent_errors]
    assert all(any(f"cannot lock {lock}" in m for m in recorded) for lock in locks), recorded
    status, findings = doctor(orca_env)
    assert status == 1, findings
    named = [f["detail"] for f in problems(findings, "memory")]
    for lock in locks:
        assert [d for d in named if d.startswith(f"{lock} ")], (lock, named)


def test_extraction_stopped_stays_named_after_newer_faults_push_its_record_out(
    orca_env: OrcaEnv, daemon_factory: list[DaemonProcess], tmp_path: Path
) -> None:
    # a hosted endpoint whose key variable orcad's environment lacks: no worker runs until
    # orcad restarts, but doctor named it only through the fault recorded at start, which 20
    # newer faults push out of the list while extraction stays stopped
    orca_env.write_config(UNBUILDABLE_PROVIDER)
    daemon = DaemonProcess(orca_env)
    daemon_factory.append(daemon)
    daemon.start()

    def named(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [f for f in problems(findings, "daemon") if "ORCA_TEST_UNSET_KEY" in f["detail"]]

    status, findings = doctor(orca_env)
    assert status == 1
    [stopped] = named(findings)  # once, not again for its recorded fault
    assert "extraction is stopped" in stopped["detail"] and "restart orcad" in stopped["fix"]
    for number in range(21):  # each project's torn forgotten-jobs.json: a fault of its own
        cwd = tmp_path / f"repo{number}"
        cwd.mkdir()
        session = daemon.call("session.open", {"cwd": str(cwd)})
        torn = orca_env.memory_root / "projects" / session.project.id / "forgotten-jobs.json"
        torn.write_text('{"job_ids": ["job_')
        remote_error_of(daemon, turn(session, "t1", "We deploy from main."))
    kinds = [error.kind for error in daemon.call("daemon.status").recent_errors]
    assert "provider_config" not in kinds, kinds
    status, findings = doctor(orca_env)
    assert status == 1
    assert len(named(findings)) == 1, findings
    shown = subprocess.run(
        [sys.executable, "-m", "orcactl", "doctor"],
        env=orca_env.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "extraction is stopped" in shown.stdout and "ORCA_TEST_UNSET_KEY" in shown.stdout


def test_a_fault_naming_no_file_stops_failing_doctor_once_not_met_for_a_while() -> None:
    # a connection that failed once, or a crashed task that was restarted, stayed a doctor
    # problem until orcad restarted: nothing on disk judges it again, and orcad records it anew
    # (with its new time) each time it meets it, so one not met lately is history
    from orcactl.commands.doctor_faults import UNMET_FAULT_EXPIRY_S, judge_daemon_errors
    from orcad.clock import format_time
    from protocol.types import RecentError

    now = 1_800_000_000.0
    connection = "a connection failed unexpectedly and was closed; the daemon log has the details"
    crashed = "task capture.workers crashed (RuntimeError); it was restarted"
    unwritable = "cannot write /home/u/.orca/memory/projects/p/jobs/j.json: Permission denied"

    def judged(at: float, kind: str, message: str) -> list[Any]:
        error = RecentError(at=format_time(at), kind=kind, message=message)
        return judge_daemon_errors([error], now=now)

    for kind, message in (("connection", connection), ("background_crashed", crashed)):
        fresh = judged(now - 60, kind, message)
        assert [f.status for f in fresh] == ["problem"], fresh  # met a minute ago: present
        at_edge = judged(now - UNMET_FAULT_EXPIRY_S + 1, kind, message)
        assert [f.status for f in at_edge] == ["problem"], at_edge
        old = judged(now - UNMET_FAULT_EXPIRY_S - 1, kind, message)
        assert [f.status for f in old] == ["ok"], old
        assert "1 naming no file, recorded over 15 minutes ago" in old[0].detail, old
    # a fault naming a file no other check judges stays until it is dealt with
    old_file = judged(now - 86400, "storage", unwritable)
    assert [f.status for f in old_file] == ["problem"], old_file
    # a time in no form doctor reads is taken as now
    odd = judge_daemon_errors([RecentError(at="yesterday", kind="connection", message=connection)])
    assert [f.status for f in odd] == ["problem"], odd


def test_a_fault_recorded_before_the_clock_was_set_back_stops_failing_doctor() -> None:
    # a fault stamped ahead of now was met before the wall clock was set back, and not since
    # (orcad would have stamped it anew with the clock as it is): it must not fail doctor for
    # as long as the clock was off, while a clock a few minutes off is taken as it is
    from orcactl.commands.doctor_faults import UNMET_FAULT_EXPIRY_S, judge_daemon_errors
    from orcad.clock import format_time
    from protocol.types import RecentError

    now = 1_800_000_000.0
    connection = "a connection failed unexpectedly and was closed; the daemon log has the details"
    for ahead, status in ((60, "problem"), (UNMET_FAULT_EXPIRY_S - 1, "problem"), (86400, "ok")):
        error = RecentError(at=format_time(now + ahead), kind="connection", message=connection)
        judged = judge_daemon_errors([error], now=now)
        assert [f.status for f in judged] == [status], (ahead, judged)
