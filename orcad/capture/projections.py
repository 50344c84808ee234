"""Projections derived from the ledger: `auto-memory.md` and the FTS5 cache `index.sqlite3`.

Both are rebuilt whole from a ledger and replaced atomically; a failed projection never fails
the ledger commit that preceded it, and the next publish (or a recall that finds the index
missing, stale or corrupt) repairs it.

The index is never modified in place: every publish builds a fresh database in a temp file
beside it and renames it over `index.sqlite3`. Its `meta` table holds the fingerprint of the
ledger it was built from, so "current" means "meta fingerprint == ledger fingerprint". This
module owns the index's format (`open_index` checks a file and reads its fingerprint); recall
searches it (orcad.recall.automatic).

The index also holds the facts' embeddings (table `vectors`, float16 bytes, all of the model
named by meta `vector_model`): a publish brings the vectors of its new facts, made before the
project lock is taken (`IndexVectors`), and every rebuild carries over the vectors of the facts
still in the ledger from the index it replaces. So the vectors are derived like the rest of the
index; an index without them (built before embeddings, or whose model is not recall's) only
means recall embeds those facts itself.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import structlog

from orcad import limits
from orcad.capture.ledger import CandidateRecord, Ledger, ledger_path, read_ledger
from orcad.capture.projects import FORGOTTEN_JOBS_FILE, JOBS_DIR
from orcad.control_characters import escape_control_characters, escapes_as_words
from orcad.durable_files import (
    fsync_directory,
    remove_leftover_temps,
    remove_stale_temps,
    replace_file_atomically,
    temp_beside,
)
from orcad.errors import StorageError
from orcad.limits import INDEX_BUSY_TIMEOUT_MS, STALE_INDEX_TEMP_AGE_S
from orcad.query import FTS5_TOKENIZE
from orcad.regular_files import read_regular_file
from orcad.storage_faults import fault_text
from protocol.types import IndexState

MARKDOWN_FILE = "auto-memory.md"
INDEX_FILE = "index.sqlite3"
# 2: a written-out control character is indexed as a word of its own (orcad.control_characters)
INDEX_FORMAT = "2"
INDEX_TOKENIZER = FTS5_TOKENIZE  # "porter unicode61 remove_diacritics 2", as deliberate search
_INDEX_SIDE_FILES = ("-wal", "-shm", "-journal")
# KiB of pages a read-only connection to an index keeps (SQLite's default is 2000). Recall
# keeps one such connection open per project (PROJECTS_CACHED of them), and the quick check at
# open reads every page: with the default, each held its whole file (about 190 KiB with 128
# facts and their vectors) for as long as it stayed open. A search touches far fewer pages, and
# the file itself stays in the system's cache.
INDEX_READER_CACHE_KIB = 64

log = structlog.get_logger("orcad.capture.projections")


class IndexVectors(NamedTuple):
    """Embeddings of fact texts by one model: the text -> float16 vector bytes."""

    model: str
    by_text: Mapping[str, bytes]


class IndexUnavailable(Exception):
    """The index cannot answer for this ledger; `state` says why (missing, stale, corrupt)."""

    def __init__(self, state: IndexState, detail: str = "") -> None:
        super().__init__(f"index is {state}" + (f": {detail}" if detail else ""))
        self.state: IndexState = state


# --- publication ----------------------------------------------------------------------------


def publish_projections(
    project_dir: Path, ledger: Ledger, vectors: IndexVectors | None = None
) -> list[str]:
    """Rewrite auto-memory.md and index.sqlite3 from `ledger` (with `vectors` of new facts);
    the problems, never an exception.

    Call after every successful `write_ledger`, still holding the project lock.
    """
    problems: list[str] = []
    steps: tuple[tuple[str, Callable[[], object]], ...] = (
        (MARKDOWN_FILE, lambda: write_markdown(project_dir, ledger)),
        (INDEX_FILE, lambda: write_index(project_dir, ledger, vectors)),
    )
    for name, publish in steps:
        try:
            publish()
        except Exception as exc:  # a projection must never fail the commit before it
            problems.append(f"{name}: {exc}")
            log.warning(
                "projection.failed", file=name, project_dir=str(project_dir), error=str(exc)
            )
    if not problems:
        log.info("projection.published", project_dir=str(project_dir), revision=ledger.revision)
    return problems


def refresh_projections(project_dir: Path, ledger: Ledger) -> list[str]:
    """Rewrite auto-memory.md and index.sqlite3 where they do not answer for `ledger` (as read
    with the project lock held); the problems, never an exception. Nothing for a project with
    nothing published yet."""
    if ledger.revision == 0:
        return []
    problems: list[str] = []
    steps: tuple[tuple[str, Callable[[], object]], ...] = (
        (MARKDOWN_FILE, lambda: ensure_markdown(project_dir, ledger)),
        (INDEX_FILE, lambda: ensure_index(project_dir, ledger)),
    )
    for name, refresh in steps:
        try:
            refresh()
        except Exception as exc:  # as for a publish: reported, and the next change writes it
            problems.append(f"{name}: {exc}")
            log.warning(
                "projection.failed", file=name, project_dir=str(project_dir), error=str(exc)
            )
    return problems


# --- auto-memory.md -------------------------------------------------------------------------


def render_markdown(ledger: Ledger) -> str:
    """The human-readable view: the newest 64 candidates, newest first, with provenance."""
    shown = list(reversed(ledger.candidates[-limits.MARKDOWN_MAX_CANDIDATES :]))
    lines = [
        "# Automatic memory",
        "",
        f"<!-- derived from candidates.jsonl revision {ledger.revision}, "
        f"fingerprint {ledger.fingerprint}; rewritten on every change, edits here are lost -->",
        "",
        f"Newest {len(shown)} of {len(ledger.candidates)} candidates, newest first. "
        "They are claims recorded from past sessions, to be verified before use.",
        "",
    ]
    for candidate in shown:
        lines.append(f"- **{candidate.category}**: {_markdown_text(candidate.fact)}")
        lines.append(f"  {_provenance_comment(candidate)}")
    return "\n".join(lines) + "\n"


def write_markdown(project_dir: Path, ledger: Ledger) -> None:
    """Replace auto-memory.md (with the project lock held, which every writer of it holds: the
    temps a crash left beside it, which may hold facts since forgotten, go first)."""
    path = project_dir / MARKDOWN_FILE
    remove_stale_temps(path)
    replace_file_atomically(path, render_markdown(ledger).encode())


def ensure_markdown(project_dir: Path, ledger: Ledger) -> bool:
    """Rewrite auto-memory.md unless it shows `ledger` already (with the project lock held);
    whether it was rewritten. A stop between a ledger's write and this file's leaves it
    showing the ledger before, which may hold a fact forgotten since."""
    try:
        shown = read_regular_file(project_dir / MARKDOWN_FILE, follow_symlinks=False)
    except OSError:
        shown = None  # missing, unreadable or a link: written again (a link, in its place)
    if shown == render_markdown(ledger).encode():
        return False
    write_markdown(project_dir, ledger)
    return True


def restore_markdown(project_dir: Path) -> bool:
    """Write auto-memory.md again when it is missing (deleted by hand) and the ledger holds
    facts, with the project lock held; whether it was written. One lstat when it is there: a
    view that is there but out of date is left to the next change or start."""
    if os.path.lexists(project_dir / MARKDOWN_FILE):
        return False
    ledger = read_ledger(project_dir)
    if ledger.revision == 0:
        return False
    write_markdown(project_dir, ledger)
    return True


def _visible(text: str) -> str:
    # a terminal showing the file (`cat`) acts on an escape sequence (retitles, clears, writes
    # the clipboard) and a bidirectional override reorders what a reader sees (white space is
    # collapsed before this, so tab and newline are gone)
    return escape_control_characters(text)


def _markdown_text(fact: str) -> str:
    # one line per fact, and a fact cannot open a comment that would hide the entries after it
    return _visible(" ".join(fact.split())).replace("<!--", "&lt;!--")


def _comment_value(value: str) -> str:
    return _visible("_".join(value.split())).replace("--", "-\u2010") or "-"


def _provenance_comment(candidate: CandidateRecord) -> str:
    fields = {
        "session": candidate.session_id,
        "turn": candidate.turn_id,
        "job": candidate.job_id,
        "recorded": candidate.recorded_at,
        "provider": candidate.provider,
        "model": candidate.model,
        "prompt": candidate.prompt_version,
    }
    rendered = " ".join(f"{key}={_comment_value(value)}" for key, value in fields.items())
    return f"<!-- {candidate.id} {rendered} -->"


# --- index.sqlite3 --------------------------------------------------------------------------


def index_path(project_dir: Path) -> Path:
    return project_dir / INDEX_FILE


def write_index(
    project_dir: Path,
    ledger: Ledger,
    vectors: IndexVectors | None = None,
    previous: IndexVectors | None = None,
    *,
    unlocked: bool = False,
) -> bool:
    """Build a fresh index for `ledger` beside the old one and rename it into place. Its
    vectors: `vectors` (new facts) over those of `previous` (read from the old index unless
    given) of the same model.

    `unlocked`: the caller does not hold the project lock, so the ledger may have been
    replaced while the index was built; then the index is removed again
    (`_remove_if_outdated`) and False returned."""
    target = index_path(project_dir)
    remove_index_leftovers(project_dir)
    if previous is None:
        previous = read_index_vectors(target)
    if vectors is None or (previous is not None and previous.model == vectors.model):
        vectors = _merged(previous, vectors)
    with temp_beside(target) as temp:
        try:
            _build_index_file(temp, ledger, vectors)
            for suffix in _INDEX_SIDE_FILES:  # a leftover journal must never apply to the new file
                with contextlib.suppress(FileNotFoundError):
                    target.with_name(target.name + suffix).unlink()
            placed = os.stat(temp)
            os.replace(temp, target)
            fsync_directory(project_dir)
        except (OSError, sqlite3.Error) as exc:
            for leftover in (temp, temp.with_name(temp.name + "-journal")):
                with contextlib.suppress(OSError):
                    leftover.unlink()
            raise StorageError(f"cannot write {target}: {exc}", path=str(target)) from exc
    return not unlocked or not _remove_if_outdated(project_dir, ledger, placed)


def _remove_if_outdated(project_dir: Path, ledger: Ledger, placed: os.stat_result) -> bool:
    """Remove the index just renamed into place (`placed`) when the ledger it was built from
    is no longer the project's. A forget (or publish) that wrote the ledger and its own index
    while this one was built, renamed before this one, would otherwise be undone on disk: the
    index would hold a forgotten fact's text until the next search rebuilt it. Without the
    file, the next search builds it from the ledger as it is now. Whether the ledger had
    changed."""
    try:
        current = read_ledger(project_dir).fingerprint
    except StorageError:
        current = None  # whatever the ledger holds now, it is not known to be this one
    if current == ledger.fingerprint:
        return False
    target = index_path(project_dir)
    try:
        found = os.lstat(target)
        if (found.st_dev, found.st_ino) == (placed.st_dev, placed.st_ino):
            target.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StorageError(f"cannot remove {target}: {exc.strerror}", path=str(target)) from exc
    log.info("index.outdated_removed", project_dir=str(project_dir), revision=ledger.revision)
    return True


def rebuild_index(project_dir: Path, ledger: Ledger, *, unlocked: bool = False) -> bool:
    """Remove the index (and its -wal/-shm/-journal) and build it again from `ledger`;
    whether it stands once built.

    Safe without the project lock (`unlocked`, with `ledger` as read from the project): if a
    concurrent publish wins the rename, the index is merely stale and the next check rebuilds
    it; if the ledger was replaced before this rename (a forget or publish that wrote its own
    index meanwhile), the index built here is removed again, since it may hold a fact
    forgotten since, and False returned. Raises StorageError when it cannot.
    """
    target = index_path(project_dir)
    previous = read_index_vectors(target)  # what can be read of it before it goes
    for suffix in ("", *_INDEX_SIDE_FILES):
        path = target.with_name(target.name + suffix)
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StorageError(f"cannot remove {path}: {exc.strerror}", path=str(path)) from exc
    placed = write_index(
        project_dir, ledger, previous=previous or IndexVectors("", {}), unlocked=unlocked
    )
    log.info("index.rebuilt", project_dir=str(project_dir), revision=ledger.revision)
    return placed


def index_state(project_dir: Path, ledger: Ledger) -> IndexState:
    """Whether index.sqlite3 answers for `ledger`: current, stale, missing or corrupt."""
    path = index_path(project_dir)
    if not os.path.lexists(path):
        return "missing"
    try:
        connection, fingerprint = open_index(path)
    except IndexUnavailable:
        return "corrupt"
    connection.close()
    return "current" if fingerprint == ledger.fingerprint else "stale"


def open_index(path: Path) -> tuple[sqlite3.Connection, str]:
    """A read-only connection to an index that passes SQLite's quick check, and the ledger
    fingerprint it was built from. IndexUnavailable("corrupt") when it is not such an index."""
    try:
        connection = _open_read_only(path)
    except (sqlite3.Error, OSError) as exc:
        raise IndexUnavailable("corrupt", fault_text(exc)) from exc
    try:
        connection.execute(f"PRAGMA cache_size = -{INDEX_READER_CACHE_KIB}")  # reads the schema
        return connection, _checked_fingerprint(connection)
    except (sqlite3.Error, ValueError) as exc:
        connection.close()
        raise IndexUnavailable("corrupt", fault_text(exc)) from exc


def read_index_vectors(path: Path) -> IndexVectors | None:
    """The vectors an index holds, by fact text as indexed; None when it holds none or cannot
    be read (the vectors are a cache: a damaged index only costs recall some embedding)."""
    try:
        connection, _fingerprint = open_index(path)
    except IndexUnavailable:
        return None
    try:
        row = connection.execute("SELECT value FROM meta WHERE key = 'vector_model'").fetchone()
        if row is None:
            return None
        rows = connection.execute(
            "SELECT c.fact, v.vector FROM vectors AS v "
            "JOIN candidates AS c ON c.candidate_id = v.candidate_id"
        ).fetchall()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    return IndexVectors(str(row[0]), {str(fact): bytes(vector) for fact, vector in rows})


def _merged(previous: IndexVectors | None, new: IndexVectors | None) -> IndexVectors | None:
    if previous is None or not previous.model:
        return new
    if new is None:
        return previous
    return IndexVectors(new.model, {**previous.by_text, **new.by_text})


def ensure_index(project_dir: Path, ledger: Ledger) -> IndexState:
    """Rebuild the index unless it is current; the state found before. StorageError on failure."""
    state = index_state(project_dir, ledger)
    if state != "current":
        rebuild_index(project_dir, ledger)
    return state


_SCHEMA = (
    "CREATE VIRTUAL TABLE candidates USING fts5(fact, candidate_id UNINDEXED, "
    "category UNINDEXED, recorded_at UNINDEXED, session_id UNINDEXED, turn_id UNINDEXED, "
    f"tokenize = '{INDEX_TOKENIZER}')",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE vectors (candidate_id TEXT PRIMARY KEY, vector BLOB NOT NULL)",
)


def _build_index_file(path: Path, ledger: Ledger, vectors: IndexVectors | None) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # private whatever umask
    connection = sqlite3.connect(str(path), isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = OFF")  # a private temp file: fsync at the end
        connection.execute("PRAGMA synchronous = OFF")
        connection.execute("BEGIN")
        for statement in _SCHEMA:
            connection.execute(statement)
        connection.executemany(
            "INSERT INTO candidates (fact, candidate_id, category, recorded_at, session_id, "
            "turn_id) VALUES (?, ?, ?, ?, ?, ?)",
            [  # a word a written-out control character touches is a word of its own
                (
                    escapes_as_words(c.fact),
                    c.id,
                    c.category,
                    c.recorded_at,
                    c.session_id,
                    c.turn_id,
                )
                for c in ledger.candidates
            ],
        )
        meta = [
            ("format", INDEX_FORMAT),
            ("fingerprint", ledger.fingerprint),
            ("revision", str(ledger.revision)),
            ("candidates", str(len(ledger.candidates))),
        ]
        if vectors is not None and vectors.model:
            meta.append(("vector_model", vectors.model))
            connection.executemany(
                "INSERT OR IGNORE INTO vectors (candidate_id, vector) VALUES (?, ?)",
                [(c.id, vector) for c in ledger.candidates if (vector := _vector_of(vectors, c))],
            )
        connection.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta)
        connection.execute("COMMIT")
    finally:
        connection.close()
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _vector_of(vectors: IndexVectors, candidate: CandidateRecord) -> bytes | None:
    """The fact's vector: by its text, or by its text as indexed (read from an earlier index)."""
    found = vectors.by_text.get(candidate.fact)
    return found if found is not None else vectors.by_text.get(escapes_as_words(candidate.fact))


def _open_read_only(path: Path) -> sqlite3.Connection:
    # a link could serve another file's facts: like anything not a regular file, it is corrupt
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise sqlite3.OperationalError(f"{path} is not a regular file")
    uri = f"file:{quote(str(path))}?mode=ro&nofollow=1"
    connection = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    connection.execute(f"PRAGMA busy_timeout = {INDEX_BUSY_TIMEOUT_MS}")
    return connection


def _checked_fingerprint(connection: sqlite3.Connection) -> str:
    """The ledger fingerprint recorded in an index that passes SQLite's quick check. An index
    of another format (another version's) answers for no ledger: it is stale, so it is rebuilt
    as any stale index is, its vectors carried over, rather than searched as it was written."""
    (verdict,) = connection.execute("PRAGMA quick_check").fetchone()
    if verdict != "ok":
        raise ValueError(f"quick_check: {verdict}")
    meta = dict(connection.execute("SELECT key, value FROM meta").fetchall())
    if "format" not in meta or "fingerprint" not in meta:
        raise ValueError("meta table lacks the format or fingerprint row")
    (count,) = connection.execute("SELECT count(*) FROM candidates").fetchone()
    if str(count) != meta.get("candidates"):
        raise ValueError("row count differs from the meta row")
    if meta["format"] != INDEX_FORMAT:
        return f"format {meta['format']}"  # no ledger fingerprint looks like this
    return str(meta["fingerprint"])


def remove_index_leftovers(project_dir: Path) -> None:
    """Remove the index temps no live build is using. Recall rebuilds the index without the
    project lock, so a build may be running right now, in this process (its temp is known) or,
    briefly, in another; the temps of a writer that died are leftovers, which may hold facts
    since forgotten."""
    remove_leftover_temps(project_dir, INDEX_FILE, STALE_INDEX_TEMP_AGE_S)


def remove_crash_leftovers(project_dir: Path) -> None:
    """Remove the temps a crash left beside the project's ledger, derived files and job files.
    Call with the project lock held, which every writer of the ledger and auto-memory.md holds;
    the index and new job files are written without it, so only their unused temps go."""
    remove_stale_temps(ledger_path(project_dir))
    remove_stale_temps(project_dir / MARKDOWN_FILE)
    remove_stale_temps(project_dir / FORGOTTEN_JOBS_FILE)  # written under the lock too
    remove_index_leftovers(project_dir)
    remove_leftover_temps(project_dir / JOBS_DIR)
