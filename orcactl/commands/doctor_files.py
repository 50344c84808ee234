"""Doctor's checks of files and directories: the memory root and the database's directory are
private to the user, nothing stands in place of a project's lock file or jobs directory, the
configuration parses with known keys, and the disk has room."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from orcactl.approval import shell_word
from orcactl.commands.doctor_faults import Finding
from orcad.config import (
    CommandConfig,
    Config,
    EmbeddingEndpointConfig,
    OpenAIConfig,
    likely_meant,
    load_config,
)
from orcad.errors import StartupError, StorageError
from orcad.paths import Paths

FILE_SCAN_LIMIT = 10000  # entries looked at under the memory root


def judge_private(check: str, path: Path, info: os.stat_result, uid: int) -> list[Finding]:
    """A path must be ours and closed to group and others."""
    kind = "directory" if stat.S_ISDIR(info.st_mode) else "file"
    mode = stat.S_IMODE(info.st_mode)
    found = []
    if info.st_uid != uid:
        found.append(
            Finding(
                check,
                "problem",
                f"{path} is owned by uid {info.st_uid}, not you ({uid})",
                f"chown {uid} {shell_word(str(path))}  (or remove it and let orcad recreate it)",
            )
        )
    if mode & 0o077:
        wanted = "700" if kind == "directory" else "600"
        found.append(
            Finding(
                check,
                "problem",
                f"{kind} {path} has mode {mode:04o}; others can read it",
                f"chmod {wanted} {shell_word(str(path))}",
            )
        )
    return found


def judge_disk(path: Path, free_bytes: int, minimum_mb: int) -> Finding:
    free_mb = free_bytes // (1024 * 1024)
    if free_mb < minimum_mb:
        return Finding(
            "disk",
            "problem",
            f"only {free_mb} MiB free on the disk holding {path}",
            "free some space: orcad cannot commit jobs or approvals on a full disk",
        )
    return Finding("disk", "ok", f"{free_mb} MiB free on the disk holding {path}")


def judge_in_place(
    check: str, path: Path, info: os.stat_result, projects_dir: Path
) -> list[Finding]:
    """A project's lock file or jobs directory that something else stands in place of: orcad
    locks a project only through a regular file (not a symbolic link, not a directory), and
    captures no turn without jobs/."""
    from orcad.capture.projects import JOBS_DIR, LOCK_FILE  # noqa: PLC0415 - filelock

    if path.parent.parent != projects_dir:
        return []
    if path.name == LOCK_FILE and stat.S_ISLNK(info.st_mode):
        return [
            Finding(
                check,
                "problem",
                f"{path} is a symbolic link; orcad refuses to lock the project through it",
                f"rm {shell_word(str(path))}  (orcad makes the file again)",
            )
        ]
    if path.name == LOCK_FILE and not stat.S_ISREG(info.st_mode):
        return [
            Finding(
                check,
                "problem",
                f"{path} is not a file; orcad cannot lock the project through it",
                f"mv {shell_word(str(path))} {shell_word(f'{path}.aside')}  (orcad makes the "
                "file again)",
            )
        ]
    # a link to a directory is one orcad writes jobs through
    if path.name == JOBS_DIR and not (stat.S_ISDIR(info.st_mode) or os.path.isdir(path)):
        return [
            Finding(
                check,
                "problem",
                f"{path} is not a directory; no turn of this project can be captured",
                f"mv {shell_word(str(path))} {shell_word(f'{path}.aside')}  (the next session "
                "opened in the project makes the directory again)",
            )
        ]
    return []


def judge_refused(paths: Paths, walked: frozenset[Path] = frozenset()) -> list[Finding]:
    """What orcad refuses in the memory root, found as orcad finds it and said in its words, so
    that it is named whether or not a daemon runs (one that cannot start records nothing): a
    directory at orcad.pid, which stops a start, a user.md or memory.md it cannot read, which
    refuses `remember`, no directory at projects/, and in each project
    a file (or a link that leads to no directory) in place of its directory, or a
    forgotten-jobs.json that is not such a list, which refuse its turns, and its .lock or
    jobs/ (judge_in_place) when the walk of the memory root stopped before it (`walked`: what
    it judged). Only looked at or read as orcad reads them: never waited on."""
    from orcad.capture import jobstore, projects  # noqa: PLC0415 - filelock
    from orcad.explicit import PROJECT_MEMORY_FILE  # noqa: PLC0415
    from orcad.runtime import instance_file_blocked  # noqa: PLC0415

    found: list[Finding] = []
    blocked = instance_file_blocked(paths)
    if blocked is not None:
        problem, advice = blocked
        found.append(Finding("memory", "problem", f"{problem}; orcad refuses to start", advice))
    found.extend(judge_facts_file(paths.user_memory_file))
    wrong = projects.projects_dir_wrong(paths.projects_dir)
    if wrong is not None:
        problem, advice = wrong
        found.append(Finding("memory", "problem", f"{problem}; no turn is captured", advice))
        return found
    try:
        names = sorted(os.listdir(paths.projects_dir))
    except OSError:  # none yet; anything else there is the index check's to name
        return found
    for name in names:
        if not projects.is_project_id(name):
            continue
        directory = paths.projects_dir / name
        found.extend(judge_facts_file(directory / PROJECT_MEMORY_FILE))
        in_place = projects.file_in_place_of_directories(directory)
        if in_place is not None and in_place[0] == directory:  # jobs/: judge_in_place
            _, problem, advice = in_place
            found.append(
                Finding(
                    "memory", "problem", f"{problem}; no turn of this project is captured", advice
                )
            )
            continue
        for path in (directory / projects.LOCK_FILE, directory / projects.JOBS_DIR):
            if path in walked:
                continue
            try:
                info = path.lstat()
            except OSError:  # none (orcad makes it), or no directory above it: named above
                continue
            found.extend(judge_in_place("memory", path, info, paths.projects_dir))
        try:
            jobstore.read_forgotten_jobs(directory)
        except jobstore.ForgottenJobsDamaged as exc:
            found.append(Finding("memory", "problem", exc.wrong, exc.advice))
        except StorageError as exc:  # one it may not read refuses the same turns
            found.append(
                Finding(
                    "memory",
                    "problem",
                    f"{exc.message}; this project's new turns and forgets are refused",
                    "make it a file you can read (chown, chmod)",
                )
            )
    return found


def judge_facts_file(path: Path) -> list[Finding]:
    """user.md or a project's memory.md that orcad cannot read: `remember` is refused, and a
    session starts without its facts (in orcad's words; opened as orcad opens it)."""
    from orcad.explicit import facts_file_problem  # noqa: PLC0415

    problem = facts_file_problem(path)
    if problem is None:
        return []
    wrong, advice = problem
    consequence = "remember is refused there, and a new session starts without them"
    return [Finding("memory", "problem", f"{wrong}; {consequence}", advice)]


def check_storage(paths: Paths, uid: int) -> list[Finding]:
    found: list[Finding] = []
    roots = [(paths.memory_root, "memory"), (paths.deliberate_db.parent, "database")]
    for root, check in roots:
        named_by = (
            DATABASE_VARIABLE if check == "database" and os.environ.get(DATABASE_VARIABLE) else None
        )
        unusable = judge_usable(check, root, named_by, paths.deliberate_db.name)
        if unusable is not None:
            found.append(unusable)
            continue
        if not root.exists():
            found.append(Finding(check, "ok", f"{root} does not exist yet"))
            continue
        problems: list[Finding] = []
        walked = _walk(root, only_named=check == "database", db=paths.deliberate_db)
        for path in walked:
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if not stat.S_ISLNK(info.st_mode):
                problems.extend(judge_private(check, path, info, uid))
            problems.extend(judge_in_place(check, path, info, paths.projects_dir))
        if check == "memory":
            problems.extend(judge_refused(paths, frozenset(walked)))
        found.extend(problems or [Finding(check, "ok", f"{root}: private to you")])
    return found


# What follows when a root cannot be used: orcad creates the memory root at start, and the
# deliberate database's directory when that memory is first used.
CONSEQUENCE = {
    "memory": "orcad cannot start",
    "database": "deliberate memory fails with a storage error",
}


# The variable that names the deliberate database's directory itself (ORCA_HOME names the
# directory above the memory root).
DATABASE_VARIABLE = "ORCA_CONFIG_DIR"


def judge_usable(
    check: str, root: Path, named_by: str | None = None, database: str = ""
) -> Finding | None:
    """A problem when orcad cannot use `root`: something other than a directory there, or,
    where it does not exist yet, nothing it could be created in (a file above it, a read-only
    file system or another user's directory). `named_by` is the variable set to `root`: a file
    it names is the user's (often the `database` file itself), fixed by the variable, not moved."""
    consequence = CONSEQUENCE[check]
    link = _broken_link(root)
    if link is not None:
        target = os.readlink(link)
        return Finding(
            check,
            "problem",
            f"{link} is a symbolic link to {target}, which does not exist (a drive not "
            f"mounted?) or leads back to the link; {consequence}",
            f"mount or create {target}, or remove the link {shell_word(str(link))} (orcad then "
            "creates the directory)",
        )
    if root.exists():
        if not root.is_dir():
            fix = (
                f"mv {shell_word(str(root))} {shell_word(f'{root}.aside')}  (orcad creates the "
                "directory at its next start)"
            )
            if named_by is not None and root.name == database:
                fix = (
                    f"{named_by} names the database file itself, not its directory: set "
                    f"{named_by}={shell_word(str(root.parent))}"
                )
            elif named_by is not None:
                fix = f"set {named_by} to a directory: {root} is not one"
            return Finding(check, "problem", f"{root} is not a directory; {consequence}", fix)
        parent, missing = root, ""
    else:
        parent = root.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        missing = f"{root} cannot be created: "
        if not parent.is_dir():
            return Finding(
                check,
                "problem",
                f"{missing}{parent} is not a directory; {consequence}",
                f"move {parent} aside, or point orcad at another directory (ORCA_HOME, "
                "ORCA_CONFIG_DIR)",
            )
    if os.access(parent, os.W_OK | os.X_OK):
        return None
    return Finding(
        check,
        "problem",
        f"{missing}{parent} is not writable (a read-only file system, or not yours); {consequence}",
        f"make {parent} writable, or point orcad at another directory (ORCA_HOME, ORCA_CONFIG_DIR)",
    )


def _broken_link(root: Path) -> Path | None:
    """`root`, or the nearest of the directories above it that do not exist, when it is a
    symbolic link that cannot be followed: orcad cannot make a directory where such a link
    is, though nothing seems to be there."""
    path = root
    while not path.exists() and path != path.parent:
        if path.is_symlink():
            return path
        path = path.parent
    return None


def _walk(root: Path, *, only_named: bool, db: Path) -> list[Path]:
    if only_named:  # the deliberate database's directory may hold the user's other files
        return [root] + [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
    paths = [root]
    for directory, dirnames, filenames in os.walk(root):
        paths.extend(Path(directory) / name for name in dirnames + filenames)
        if len(paths) > FILE_SCAN_LIMIT:
            break
    return paths[:FILE_SCAN_LIMIT]


def check_config(paths: Paths) -> tuple[list[Finding], Config | None]:
    """The config check, and the config read (None when it cannot be read or parsed)."""
    try:
        loaded = load_config(paths.config_file)
    except StartupError as exc:
        return [Finding("config", "problem", str(exc), f"edit {paths.config_file}")], None
    if loaded.path is None:
        return [Finding("config", "ok", f"no {paths.config_file}; defaults apply")], loaded.config
    if loaded.unknown_keys:
        keys = ", ".join(loaded.unknown_keys)
        spelt = spelling_hints(loaded.unknown_keys)
        return [
            Finding(
                "config",
                "problem",
                f"{loaded.path}: unknown keys: {keys} (ignored)",
                "remove them or correct their spelling (see the README's configuration keys)"
                + (f" ({spelt})" if spelt else ""),
            )
        ], loaded.config
    detail = f"{loaded.path} parses; every key is known"
    if unused := unused_sections(loaded.config):
        detail += f"; {', '.join(unused)}"
    return [Finding("config", "ok", detail)], loaded.config


def likely_meant_keys(unknown_keys: list[str]) -> dict[str, str]:
    """Each unknown key that is close to a known one, with that key (doctor, status and
    orcad's log suggest the same)."""
    return {key: known for key in unknown_keys if (known := likely_meant(key)) is not None}


def spelling_hints(unknown_keys: list[str]) -> str:
    """`auto_memroy: did you mean auto_memory?; ...`, or "" when no key is close to a known
    one."""
    meant = likely_meant_keys(unknown_keys)
    return "; ".join(f"{key}: did you mean {known}?" for key, known in meant.items())


def unused_sections(config: Config) -> list[str]:
    """The tables set in `config` that its choices leave unread, each with the choice that
    would read it: `[extraction.openai]` written out with `provider = "openai"` forgotten runs
    the heuristic, without a word."""
    extraction, recall = config.extraction, config.recall
    sections = [
        ("[extraction.openai]", extraction.openai != OpenAIConfig(), extraction.provider, "openai"),
        (
            "[extraction.command]",
            extraction.command != CommandConfig(),
            extraction.provider,
            "command",
        ),
        (
            "[recall.endpoint]",
            recall.endpoint != EmbeddingEndpointConfig(),
            recall.embedding,
            "endpoint",
        ),
    ]
    key = {"openai": "provider", "command": "provider", "endpoint": "embedding"}
    return [
        f'{table} is set but unused ({key[wanted]} is "{chosen}", not "{wanted}")'
        for table, written, chosen, wanted in sections
        if written and chosen != wanted
    ]


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _disks(paths: Paths) -> list[tuple[Path, Path]]:
    """The places the disk check looks at, each with the nearest directory there is of it:
    the memory root, and the directory of memory.sqlite3 when it is on another file system."""
    memory = _existing(paths.memory_root)
    disks = [(paths.memory_root, memory)]
    database = _existing(paths.deliberate_db.parent)
    if database.stat().st_dev != memory.stat().st_dev:
        disks.append((paths.deliberate_db.parent, database))
    return disks


def check_disk(paths: Paths, minimum_mb: int) -> list[Finding]:
    """Free space where the memory root is, and where memory.sqlite3 is when that is another
    file system (ORCA_CONFIG_DIR on its own disk): a full one refuses even its reads."""
    found = []
    for shown, there in _disks(paths):
        found.append(judge_disk(shown, shutil.disk_usage(there).free, minimum_mb))
        if _out_of_inodes(there):  # bytes free, but no file can be made
            found.append(
                Finding(
                    "disk",
                    "problem",
                    f"no inode left on the disk holding {shown}: no file can be made there, "
                    "though bytes are free",
                    "remove files on that file system (df -i shows its inodes): orcad cannot "
                    "write a job or a memory file without making one",
                )
            )
    return found


def disks_with_room(paths: Paths, minimum_mb: int) -> frozenset[int]:
    """The file systems (st_dev) the disk check looks at and finds room on now: at least
    `minimum_mb` free, and never less than 1 MiB (with --min-free-mb 0, a disk still full has
    no room), and files can still be made there. A full disk the running daemon recorded on
    one of them is judged by the disk check as it is now."""
    found = set()
    try:
        for _shown, there in _disks(paths):
            free_mb = shutil.disk_usage(there).free // (1024 * 1024)
            if free_mb >= max(minimum_mb, 1) and not _out_of_inodes(there):
                found.add(there.stat().st_dev)
    except OSError:  # the disk check says what it cannot look at; the faults stay reported
        return frozenset()
    return frozenset(found)


# Files a write of orcad's makes at once at most, beside the one it replaces: a temporary
# sibling, a directory and its lock (a job file in a new project's jobs/)
_FILES_A_WRITE_MAKES = 16


def _out_of_inodes(directory: Path) -> bool:
    """Whether the file system of `directory` has too few inodes left for a write of orcad's:
    it answers "No space left on device" with bytes free, which the free space the disk check
    measures does not show. A file system that counts no inodes (btrfs says 0 of 0) is not."""
    status = os.statvfs(directory)
    return status.f_files > 0 and status.f_favail < _FILES_A_WRITE_MAKES
