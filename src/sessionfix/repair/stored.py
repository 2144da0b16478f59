"""Repairing the sessions of a session store.

Each session's transcript is repaired as a session file is, into a verified temporary
file; then it goes where the run sends it: back into the store (`--in-place`, in the
store's own transaction, after a backup of the session's rows), to a JSONL file (`-o`,
one session) or to a stream.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

from sessionfix import stores
from sessionfix.diagnostics import Diagnostic
from sessionfix.engine import relocated
from sessionfix.errors import SessionfixError, UsageError
from sessionfix.repair.apply import (
    RepairPreview,
    RepairResult,
    preview_repair,
    repair_to,
    repair_to_stream,
)
from sessionfix.repair.rowmap import PREFIX_ROW
from sessionfix.settings import Settings


def _located(result: RepairResult, transcript: stores.Transcript, store: Path) -> RepairResult:
    """`result` named by the store and its session, its findings located by row."""
    shown = str(store)
    result.path = store
    result.filename = f"{store} (session {transcript.session.id})"
    result.found = relocated(result.found, transcript, shown)
    result.applied = relocated(result.applied, transcript, shown)
    result.remaining = relocated(result.remaining, transcript, shown)
    return result


def _sessions(store: stores.SessionStore, settings: Settings) -> list[stores.StoredSession]:
    return stores.select_sessions(store, settings.sessions)


def repair_store(
    path: Path,
    settings: Settings,
    *,
    in_place: bool,
    output: Path | None,
    stream: BinaryIO | None,
    backup: bool,
    force: bool,
) -> Iterator[RepairResult | SessionfixError]:
    """Repair the selected sessions of the store at `path`; a session that cannot be
    repaired is yielded as its error, and the others go on."""
    with ExitStack() as stack:
        store = stores.open_store(path)
        stack.callback(store.close)
        sessions = _sessions(store, settings)
        if not in_place and len(sessions) != 1:
            raise UsageError(
                f"{path}: holds {len(sessions)} sessions; -o and --diff take one "
                "(name it with --session)"
            )
        for session in sessions:
            try:
                with stores.transcript_of(store, session) as transcript:
                    yield _repair_session(
                        store, transcript, settings, in_place, output, stream, backup, force
                    )
            except SessionfixError as exc:
                yield exc


def _repair_session(
    store: stores.SessionStore,
    transcript: stores.Transcript,
    settings: Settings,
    in_place: bool,
    output: Path | None,
    stream: BinaryIO | None,
    backup: bool,
    force: bool,
) -> RepairResult:
    shown = f"{store.path} (session {transcript.session.id})"
    if stream is not None:
        result = repair_to_stream(transcript.path, stream, settings, filename=shown)
        return _located(result, transcript, store.path)
    if output is not None:
        result = repair_to(transcript.path, output, settings, replace=force, filename=shown)
        return _located(result, transcript, store.path)
    preview = preview_repair(transcript.path, settings, filename=shown)
    try:
        result = preview.result
        if preview.output is not None:
            result.backup = store.replace(
                transcript, preview.output, _origins(preview), backup=backup
            )
            result.output = store.path
        return _located(result, transcript, store.path)
    finally:
        preview.close()


def _origins(preview: RepairPreview) -> stores.Origins:
    trace = preview.trace
    assert trace is not None, "a preview that changes anything is traced"
    changed = frozenset(trace.rows)

    def origin(line: int) -> tuple[int, bool]:
        row = trace.origin(line)
        return row, row != PREFIX_ROW and row not in changed

    return origin


@dataclasses.dataclass
class StoredPreview:
    """A preview of one store session's repair, with the transcript it reads."""

    preview: RepairPreview
    transcript: stores.Transcript
    store: Path
    stack: ExitStack

    @property
    def shown(self) -> str:
        return f"{self.store}:{self.transcript.session.id}"

    def locate(self, found: list[Diagnostic]) -> list[Diagnostic]:
        """The preview's findings named by the store, session and row."""
        return relocated(found, self.transcript, str(self.store))

    def close(self) -> None:
        self.preview.close()
        self.stack.close()


def preview_store(path: Path, settings: Settings) -> Iterator[StoredPreview]:
    """Previews of the selected sessions' repairs, one at a time."""
    with ExitStack() as outer:
        store = stores.open_store(path)
        outer.callback(store.close)
        for session in _sessions(store, settings):
            stack = ExitStack()
            try:
                transcript = stack.enter_context(stores.transcript_of(store, session))
                shown = f"{path} (session {session.id})"
                preview = preview_repair(transcript.path, settings, filename=shown)
            except BaseException:
                stack.close()
                raise
            yield StoredPreview(preview, transcript, path, stack)
