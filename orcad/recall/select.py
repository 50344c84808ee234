"""Recall selection: the caps on what is injected, and the wire entries. Pure: no I/O.

The automatic part injects at most 6 entries and at most 3,072 bytes (spec: Recall); the
deliberate part at most 8 records and at most 4,096 characters (deliberate spec). Each size cap
covers the whole block its part would make alone (frame, heading and lines), so the lines get
what the frame leaves. Ranked input is taken in order; an entry that would overflow the
size budget is skipped so that a shorter, lower-ranked one can still fit. A deliberate record
too long for any block (a record may hold 4,096 characters, and the frame takes part of the
cap) would never be injected that way: its beginning fills the room left instead, marked as cut.

Every text an entry carries has its control and bidirectional formatting characters written
visibly, as the block writes them: a ledger written before extracted facts were escaped, and
deliberate records (stored as given), may hold them raw.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from orcad.capture.ledger import CandidateRecord
from orcad.clock import format_time, parse_time
from orcad.control_characters import escape_control_characters
from orcad.limits import (
    RECALL_AUTOMATIC_MAX_BYTES,
    RECALL_AUTOMATIC_MAX_ENTRIES,
    RECALL_DELIBERATE_MAX_CHARS,
    RECALL_DELIBERATE_MAX_RECORDS,
)
from orcad.recall.render import (
    AUTOMATIC_FRAME_BYTES,
    DELIBERATE_FRAME_CHARS,
    automatic_line,
    deliberate_line,
)
from protocol.types import AutomaticEntry, DeliberateEntry, RecallResult


def to_entry(record: CandidateRecord, now: float) -> AutomaticEntry:
    """A ledger candidate as recall answers it, with its age at `now`."""
    recorded_at = parse_time(record.recorded_at)
    return AutomaticEntry(
        id=record.id,
        category=record.category,
        text=escape_control_characters(record.fact),
        age_s=round(max(0.0, now - recorded_at), 3),
        session_id=record.session_id,
        turn_id=record.turn_id,
        recorded_at=format_time(recorded_at),
    )


def visible_record(entry: DeliberateEntry) -> DeliberateEntry:
    """A deliberate record as recall answers it: its content escaped like the block's."""
    content = escape_control_characters(entry.content)
    return entry if content == entry.content else msgspec.structs.replace(entry, content=content)


def visible_result(result: RecallResult) -> RecallResult:
    """A recall result with every text escaped as recall answers it now: one persisted by a
    version that answered the entries raw."""
    context = escape_control_characters(result.context)
    return msgspec.structs.replace(
        result,
        automatic=[
            msgspec.structs.replace(entry, text=escape_control_characters(entry.text))
            for entry in result.automatic
        ],
        deliberate=[visible_record(entry) for entry in result.deliberate],
        context=context,
        bytes=len(context.encode("utf-8")),
    )


def cap_automatic(
    ranked: Iterable[AutomaticEntry],
    max_entries: int = RECALL_AUTOMATIC_MAX_ENTRIES,
    max_bytes: int = RECALL_AUTOMATIC_MAX_BYTES - AUTOMATIC_FRAME_BYTES,
) -> list[AutomaticEntry]:
    chosen: list[AutomaticEntry] = []
    used = 0
    for entry in ranked:
        if len(chosen) == max_entries:
            break
        size = len(automatic_line(entry).encode("utf-8"))
        if used + size <= max_bytes:
            chosen.append(entry)
            used += size
    return chosen


# the least room a record cut to fit gets: less than this would be a fragment, not a record
CUT_MIN_CHARS = 512
# a cut goes back to the white space before a word it would split, at most this far: a longer
# token is cut inside rather than dropped whole
CUT_WORD_MAX_CHARS = 64


def cut_marker(omitted: int) -> str:
    return f" [... {omitted} more characters of this record not shown]"


def cut_to_fit(entry: DeliberateEntry, now: float, room: int) -> DeliberateEntry | None:
    """`entry` with its content cut, at a word where there is one, so that its line (marker
    included) takes at most `room` characters; None when not even a word fits."""
    content = entry.content.strip()

    def cut(keep: int) -> DeliberateEntry:
        kept = content[:keep]
        if keep < len(content) and not content[keep].isspace():  # not inside a word...
            for end in range(keep - 1, max(0, keep - CUT_WORD_MAX_CHARS) - 1, -1):
                if content[end].isspace():
                    kept = content[:end]
                    break  # (...unless it is a long token: a key, a path, a URL)
        kept = kept.rstrip()
        return msgspec.structs.replace(entry, content=kept + cut_marker(len(content) - len(kept)))

    low, high = 0, len(content) - 1  # the most characters kept whose line fits
    while low < high:
        middle = (low + high + 1) // 2
        if len(deliberate_line(cut(middle), now)) <= room:
            low = middle
        else:
            high = middle - 1
    return cut(low) if low else None


def cap_deliberate(
    ranked: Iterable[DeliberateEntry],
    now: float,
    max_records: int = RECALL_DELIBERATE_MAX_RECORDS,
    max_chars: int = RECALL_DELIBERATE_MAX_CHARS - DELIBERATE_FRAME_CHARS,
) -> list[DeliberateEntry]:
    chosen: list[DeliberateEntry] = []
    used = 0
    for entry in ranked:
        if len(chosen) == max_records:
            break
        size = len(deliberate_line(entry, now))
        if used + size <= max_chars:
            chosen.append(entry)
            used += size
        elif size > max_chars and max_chars - used >= CUT_MIN_CHARS:
            shortened = cut_to_fit(entry, now, max_chars - used)
            if shortened is not None:  # it fills the block: nothing after it would fit
                chosen.append(shortened)
                break
    return chosen
