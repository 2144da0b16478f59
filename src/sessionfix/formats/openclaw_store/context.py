"""What OpenClaw loads from a session of its store (`SessionManager.open`), which is what
`sessionfix context` counts for it.

Its reader parses every row with `JSON.parse` and throws on one that is not JSON (a blank
or whitespace row among them, which pi's file reader would skip); a row that is JSON but
not an object (`null`) it keeps aside, where pi's file reader throws; a row spread over
several lines (pretty-printed) it reads whole, where pi's file reader skips each line. It
refuses a session whose `session` header is missing or older than version 3 ("Persisted
legacy session transcripts require doctor/import migration"). Otherwise it builds the
context as pi does from the same lines.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import Final

import msgspec

from sessionfix import jsonutil
from sessionfix.formats.pi.context import loaded_messages as pi_loaded_messages
from sessionfix.model.loaded import Loaded, Loader, LoadRefused
from sessionfix.model.view import SessionView
from sessionfix.read.reader import LineFinding, LineIssue, LineReport, RecordSource
from sessionfix.stores import Transcript

CURRENT_VERSION: Final = 3
"""The header version OpenClaw's store reader takes without a migration."""
_NOT_JSON: Final = frozenset(
    {
        LineIssue.GLUED,
        LineIssue.TORN,
        LineIssue.UNDEFINED,
        LineIssue.NUL,
        LineIssue.BOM,
        LineIssue.BLANK,
    }
)
"""Line findings whose line `JSON.parse` rejects, as it is (nothing is skipped first)."""
MIGRATION: Final = "requires doctor/import migration"


def loader(transcript: Transcript) -> Loader:
    """OpenClaw's loader, for the session `transcript` holds and for a repaired copy of
    it (whose lines are its rows, one each)."""

    def load(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
        rows = transcript.rows if view.path == transcript.path else None
        return loaded_messages(view, source, lines, rows)

    return load


def loaded_messages(
    view: SessionView, source: RecordSource, lines: LineReport, rows: Sequence[int] | None
) -> Iterator[Loaded]:
    """The messages OpenClaw builds from the session's lines (`rows`: the store row of
    each line, when rows may span several lines; else each line is a row)."""
    broken = _row_not_json(source, lines, rows)
    if broken is not None:
        raise LoadRefused(f"OpenClaw throws on row {broken}, which is not JSON")
    if view.header is None and lines.line_count:
        raise LoadRefused(f"OpenClaw refuses a session without a header (it {MIGRATION})")
    if view.header is not None and _below_current(view.header.version):
        raise LoadRefused(
            f"OpenClaw refuses a session whose header is version "
            f"{view.header.version!r} (it {MIGRATION})"
        )
    read = [
        finding
        for finding in lines.findings
        if finding.json_kind != "null" and not _whole_row(finding, rows)
    ]
    return pi_loaded_messages(view, source, msgspec.structs.replace(lines, findings=read))


def _whole_row(finding: LineFinding, rows: Sequence[int] | None) -> bool:
    """A record spread over the lines of one row and no more: `JSON.parse` reads the row
    whole, where pi's file reader skips each of its lines."""
    if finding.issue is not LineIssue.SPREAD or rows is None:
        return False
    row = rows[finding.row - 1]
    return rows[finding.last_row - 1] == row and rows.count(row) == finding.rows


def _row_not_json(
    source: RecordSource, lines: LineReport, rows: Sequence[int] | None
) -> int | None:
    """The first row `JSON.parse` rejects (its store row, else its line), if any."""
    if rows is None or len(set(rows)) == len(rows):
        for finding in lines.findings:
            if _not_json(finding):
                return finding.row if rows is None else rows[finding.row - 1]
        return None
    for row, group in groupby(lines.findings, key=lambda f: rows[f.row - 1]):
        found = list(group)
        if rows.count(row) == 1:
            if _not_json(found[0]):
                return row
            continue
        start, end = found[0].offset, found[-1].offset + found[-1].length
        try:
            jsonutil.loads(source.read(start, end - start))
        except ValueError:
            return row
    return None


def _not_json(finding: LineFinding) -> bool:
    return finding.issue in _NOT_JSON or (
        finding.issue is LineIssue.UNPARSABLE and finding.json_kind is None
    )


def _below_current(version: object) -> bool:
    """`(version ?? 1) < 3` as JavaScript compares it."""
    if version is None:
        number = 1.0
    elif isinstance(version, bool | int | float):
        number = float(version)
    elif isinstance(version, str):
        try:
            number = float(version.strip() or 0)
        except ValueError:
            return False  # NaN < 3 is false
    else:
        return False
    return number < CURRENT_VERSION
