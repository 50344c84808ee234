"""Passwords in a table's password column: a Markdown table or a CSV (or TSV) export whose
header names a column `password` (`passwd`, `pwd`, `passphrase`; `pass` or `secret` beside a
user's column).

Pure module: no I/O. A row's cell in that column is a password when it looks chosen (letters
with digits or symbols, or four digits or more), as a pair's password must (`admin` or `see
vault` in that column stays). Rows are read below the header, while they keep the table's
shape (a Markdown row starts with `|`; a CSV row has as many fields as the header); reading
goes on after the table, so a text is read once whatever its tables.
"""

from __future__ import annotations

from collections.abc import Iterator

from orcad.lazy_patterns import lazy_compile
from orcad.secret_formats import Span
from orcad.secret_values import is_chosen_password, is_label, names_a_credential

_COLUMN_NAMES = frozenset({"password", "passwd", "pwd", "passphrase"})
# names that mean a password only beside a user's column (a test report's `Pass` column holds
# counts, a docs table's `Secret` column names secrets)
_PAIRED_NAMES = frozenset({"pass", "secret"})
_USER_NAMES = frozenset({"user", "username", "login", "email", "account", "user name"})
_MARKUP = "`*_ \t"
_MARKDOWN_SEPARATOR = lazy_compile(r"[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*:?-*:?[ \t]*\r?\Z")
_CSV_DELIMITERS = (",", "\t", ";")


def _cells(line: str, delimiter: str) -> list[tuple[int, int]]:
    """Each cell's span in `line` (offsets in it), markup and blanks around it left out."""
    spans = []
    start = 0
    for end in [*(i for i, c in enumerate(line) if c == delimiter), len(line)]:
        cell_start, cell_end = start, end
        while cell_start < cell_end and line[cell_start] in _MARKUP:
            cell_start += 1
        while cell_end > cell_start and line[cell_end - 1] in _MARKUP + "\r":
            cell_end -= 1
        spans.append((cell_start, cell_end))
        start = end + 1
    return spans


def _column(line: str, delimiter: str) -> tuple[int, bool] | None:
    """The index of the header's password column, if it names one, and whether its name means
    a password only beside a user's column."""
    names = [line[a:b].lower() for a, b in _cells(line, delimiter)]
    found = [index for index, name in enumerate(names) if name in _COLUMN_NAMES]
    if found:
        return found[0], False
    if not _USER_NAMES.isdisjoint(names):
        found = [index for index, name in enumerate(names) if name in _PAIRED_NAMES]
    return (found[0], True) if found else None


def _lines(text: str, at: int) -> Iterator[tuple[int, str]]:
    """The lines of `text` from offset `at` (the start of one), with their offsets."""
    while at <= len(text):
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        yield at, text[at:end]
        at = end + 1


def _password(value: str, *, paired: bool) -> bool:
    """A cell that looks chosen, not a credential's name (`db-password`, `DEPLOY_TOKEN`); in a
    `pass` or `secret` column, not shaped as a label either (`stored-in-vault`)."""
    return (
        is_chosen_password(value)
        and not any(char.isspace() for char in value)
        and not names_a_credential(value)
        and not (paired and is_label(value))
    )


def _rows(
    lines: Iterator[tuple[int, str]],
    column: int,
    delimiter: str,
    width: int,
    *,
    markdown: bool,
    paired: bool,
) -> tuple[list[Span], int]:
    """The passwords of the rows `lines` begins with while they keep the table's shape, and
    where the table ends (the offset after its last row)."""
    found: list[Span] = []
    ends = -1
    for line_offset, line in lines:
        row, offset = line, line_offset
        if markdown:
            inner = line.lstrip()
            if not inner.startswith("|"):
                break
            offset += len(line) - len(inner) + 1
            row = inner[1:].rstrip().removesuffix("|")
        cells = _cells(row, delimiter)
        if len(cells) != width:
            break
        ends = line_offset + len(line)
        start, end = cells[column]
        value = row[start:end]
        if _password(value, paired=paired):
            found.append((offset + start, offset + end))
    return found, ends


def _header(line: str) -> tuple[str, str, tuple[int, bool]] | None:
    """(its cells' text, delimiter, password column) when `line` heads a table that names a
    password column."""
    stripped = line.strip()
    if stripped.startswith("|"):
        inner = stripped[1:].removesuffix("|")
        column = _column(inner, "|")
        return None if column is None else (inner, "|", column)
    for delimiter in _CSV_DELIMITERS:
        if delimiter in line:
            column = _column(line, delimiter)
            if column is not None:
                return line, delimiter, column
    return None


_WORDS = lazy_compile(r"[^\s,]+")
# passwords named last before the colon, as the rows' last column (`(host, user, password):`),
# not by the way (`Password hashing options:`, `Test results for pwd module:`)
_NAMES_PASSWORDS_LAST = lazy_compile(r"(?<![a-z])(?:passw(?:or)?ds?|pwds?|passphrases?)[)\]]?:\Z")


def _named_over_tabs(
    text: str, line_start: int, line_end: int
) -> tuple[str, str, tuple[int, bool]] | None:
    """A header for the tab-separated rows below a line that names their columns with spaces
    (`host user password`), or that names passwords last, before a colon (`logins (host, user,
    password):`, whose rows then end with theirs). Tab-separated rows with no header are
    left alone: a row of three words says nothing of which is a password."""
    below_end = text.find("\n", line_end + 1)
    below = text[line_end + 1 : len(text) if below_end < 0 else below_end]
    if "\t" not in below:
        return None
    width = len(_cells(below, "\t"))
    line = text[line_start:line_end].strip()
    words = _WORDS.findall(line.lstrip("#").replace("|", " "))
    if len(words) == width:
        column = _column("\t".join(words), "\t")
        if column is not None:
            return "\t".join(words), "\t", column
    if width >= 2 and _NAMES_PASSWORDS_LAST.search(line.lower()) is not None:
        return "\t".join("x" * width), "\t", (width - 1, True)
    return None


# what every column name holds: each place is looked at on its line alone (three searches for
# a literal run at C speed, where one for a choice of them tries every position)
_COLUMN_WORDS = ("pass", "pwd", "secret")


def _places(lowered: str) -> list[int]:
    places = []
    for word in _COLUMN_WORDS:
        at = lowered.find(word)
        while at >= 0:
            places.append(at)
            at = lowered.find(word, at + len(word))
    return sorted(places)


def find_table_passwords(text: str, lowered: str) -> Iterator[Span]:
    """The passwords in the password column of each table in `text`."""
    read_to = -1  # the text up to here is read (a header's line, a table's rows)
    for at in _places(lowered):
        if at <= read_to:
            continue
        line_start = lowered.rfind("\n", 0, at) + 1
        line_end = lowered.find("\n", at)
        line_end = len(lowered) if line_end < 0 else line_end
        read_to = line_end
        header = _header(text[line_start:line_end])
        if header is None:
            header = _named_over_tabs(text, line_start, line_end)
        if header is None:
            continue
        cells, delimiter, (column, paired) = header
        markdown = delimiter == "|"
        lines = _lines(text, line_end + 1)
        if markdown:  # a Markdown table's header is followed by its separator row
            separator = next(lines, None)
            if separator is None or not _MARKDOWN_SEPARATOR.match(separator[1]):
                continue
        width = len(_cells(cells, delimiter))
        found, ends = _rows(lines, column, delimiter, width, markdown=markdown, paired=paired)
        yield from found
        read_to = max(read_to, ends)
