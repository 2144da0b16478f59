"""Reading an opencode session's transcript (`transcript`: one line per row) into the
neutral model, as `view` puts a session's rows.

Lines are indexed as they come; what a record is (a message in context, a tool call,
the compaction opencode stops at) depends on the whole session (its compaction window),
so kinds, links and conversation events are set once every line is read. A session is
read in one piece: its transcript is never split into byte ranges.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec

from sessionfix.formats.common import TranscriptLines, text_exceeds
from sessionfix.formats.opencode.context import CLEARED
from sessionfix.formats.opencode.decode import TOOL, Unreadable, decode_part
from sessionfix.formats.opencode.edit import OpencodeEditor
from sessionfix.formats.opencode.transcript import (
    ENVELOPE,
    PART,
    SESSION,
    Envelope,
    envelope_of_line,
    envelope_of_value,
    is_envelope,
    load_order,
    stored_messages,
)
from sessionfix.formats.opencode.view import FORMAT_NAME, _Builder, build
from sessionfix.model.tracking import PathTracker
from sessionfix.model.view import MISSING, Kind, SessionView
from sessionfix.read.reader import LineReport, RecordSource


class _SessionLine(msgspec.Struct, gc=False):
    directory: str = ""
    events: int | None = None
    unread: str | None = None


_SESSION_LINE: Final = msgspec.json.Decoder(_SessionLine)


class OpencodeAdapter(TranscriptLines[Envelope]):
    """Indexes a transcript's lines; `finish` makes records of them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.view = SessionView(path=path, format=FORMAT_NAME, tree=False)
        self.editor = OpencodeEditor()
        self.tracker = PathTracker()
        self._envelopes: list[tuple[int, Envelope]] = []
        self._directory = ""
        self._keys: dict[int, str] = {}

    decode = staticmethod(ENVELOPE.decode)
    decode_lines = staticmethod(ENVELOPE.decode_lines)

    def ingest(
        self, record: Envelope, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        index = self.view.add(row, column, offset, size, Kind.OTHER)
        self._keys[index] = record.id
        if record.opencode == SESSION:
            if not self._envelopes:
                self._session(record)
            return
        self._envelopes.append((index, record))

    def _session(self, record: Envelope) -> None:
        """What the session's own line says: its folder (which relative paths of its
        tool calls are relative to), its event log's bytes, why opencode does not read it."""
        try:
            found = _SESSION_LINE.decode(bytes(record.data))
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        self._directory = found.directory
        self.view.event_log_bytes = found.events
        self.view.unread = found.unread

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        """A line that is not one of this format's rows: a record of no kind."""
        index = self.view.add(row, column, offset, len(data), Kind.OTHER)
        if is_envelope(value):
            try:
                record = envelope_of_value(value, data)
            except (msgspec.ValidationError, ValueError):
                return
            self._keys[index] = record.id
            if record.opencode != SESSION:
                self._envelopes.append((index, record))
            elif not self._envelopes:
                self._session(record)

    def replay(self, index: int, data: bytes) -> None:
        """Records are positional (no tree): nothing is walked again."""

    def finish(self, lines: LineReport) -> None:
        view = self.view
        keys = [""] * len(view)
        for index, key in self._keys.items():
            keys[index] = key
        groups = load_order(stored_messages(iter(self._envelopes)))
        slots = iter([index for indexes, _ in groups for index in indexes])
        builder = _Builder(view, self._directory, self.tracker, slots, keys)
        parents = builder.parents
        view.read_ids = lambda index: (keys[index] or None, parents.get(index, MISSING))
        build(builder, [message for _, message in groups])
        source = RecordSource(self.path)
        view.result_text_exceeds = partial(_result_text_exceeds, source, view)
        self._envelopes = []
        view.finish()


def _result_text_exceeds(
    source: RecordSource, view: SessionView, index: int, limit: int, prefix: str
) -> bool:
    """Whether a tool part's output is over `limit` bytes and not already a placeholder
    (opencode's own, for a part it pruned; or one starting with `prefix`)."""
    try:
        found = envelope_of_line(source.read(view.offsets[index], view.sizes[index]))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    if found.opencode != PART:
        return False
    try:
        part = decode_part(found.id, found.raw)
    except Unreadable:
        return False
    state = part.state
    if part.data.type != TOOL or state is None or state.compacted:
        return False
    output = state.output
    if not isinstance(output, str) or output == CLEARED:
        return False
    return text_exceeds(output, limit, prefix)
