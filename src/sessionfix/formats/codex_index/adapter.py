"""Reading the transcript of Codex's thread index (`transcript`: one line per thread)
into the neutral model: each line a record, named by its thread's id, with how the
thread's row disagrees with its rollouts (`SessionView.indexed_sessions`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from sessionfix.formats.codex_index.edit import IndexEditor
from sessionfix.formats.codex_index.transcript import LINE, ThreadLine, indexed, is_thread_line
from sessionfix.formats.common import TranscriptLines
from sessionfix.model.tracking import PathTracker
from sessionfix.model.view import MISSING, NO_ID_KEY, Kind, SessionView, key_of
from sessionfix.read.reader import LineReport

FORMAT_NAME = "codex-index"


class IndexAdapter(TranscriptLines[ThreadLine]):
    """Indexes a transcript's lines, one thread each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.view = SessionView(path=path, format=FORMAT_NAME, tree=False)
        self.editor = IndexEditor()
        self.tracker = PathTracker()
        self._keys: dict[int, str] = {}

    decode = staticmethod(LINE.decode)
    decode_lines = staticmethod(LINE.decode_lines)

    def ingest(
        self, record: ThreadLine, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        index = self.view.add(row, column, offset, size, Kind.OTHER, id_key=key_of(record.id))
        self._thread(index, record)

    def _thread(self, index: int, record: ThreadLine) -> None:
        self._keys[index] = record.id
        found = indexed(record)
        if found.drift:
            self.view.indexed_sessions[index] = found

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        """A line decoded the slow way: a thread's when it is one, else a record of no kind."""
        try:
            record = msgspec.convert(value, ThreadLine) if is_thread_line(value) else None
        except msgspec.ValidationError:
            record = None
        key = NO_ID_KEY if record is None else key_of(record.id)
        index = self.view.add(row, column, offset, len(data), Kind.OTHER, id_key=key)
        if record is not None:
            self._thread(index, record)

    def replay(self, index: int, data: bytes) -> None:
        """Records are positional (no tree): nothing is walked again."""

    def finish(self, lines: LineReport) -> None:
        keys = self._keys
        self.view.read_ids = lambda index: (keys.get(index), MISSING)
        self.view.finish()
