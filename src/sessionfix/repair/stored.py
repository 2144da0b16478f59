"""Repairing the sessions of a session store.

Each session's transcript is repaired as a session file is, into a verified temporary
file; then it goes where the run sends it: back into the store (`--in-place`, in the
store's own transaction, after a backup of the session's rows), to a JSONL file (`-o`,
one session) or to a stream. After the last rewrite the whole store is checked once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

from msgspec import Struct

from sessionfix import stores
from sessionfix.diagnostics import Diagnostic
from sessionfix.engine import check_stored, relocated
from sessionfix.errors import InputError, SessionfixError, UsageError
from sessionfix.repair.planned import RepairResult
from sessionfix.repair.preview import RepairPreview, preview_repair
from sessionfix.repair.rowmap import PREFIX_ROW
from sessionfix.repair.targets import repair_to, repair_to_stream
from sessionfix.settings import Settings


class SessionRefused(Struct, frozen=True):
    """A session whose repair failed or was refused, with what a check of it finds."""

    error: SessionfixError
    findings: list[Diagnostic]
    session_id: str


def _shown(store: Path, session: stores.StoredSession) -> str:
    return f"{store} (session {session.id})"


def _located(
    result: RepairResult, transcript: stores.Transcript, store: Path, *, rewritten: bool
) -> RepairResult:
    """`result` named by the store and its session: its input's findings located by
    the rows they were read from; what is left after an in-place rewrite by the rows
    now stored, one per line of the repair (a copy elsewhere keeps its own names)."""
    shown = str(store)
    session_id = transcript.session.id
    result.path = store
    result.session_id = session_id
    result.filename = _shown(store, transcript.session)
    result.found = relocated(result.found, transcript, shown)
    result.applied = relocated(result.applied, transcript, shown)
    if rewritten:
        result.remaining = relocated(result.remaining, transcript, shown, _renumbered)
    elif not result.changed:
        result.remaining = relocated(result.remaining, transcript, shown)
    return result


def _renumbered(line: int) -> int:
    """The seq of a line of a rewritten session: rows are numbered from 0 again."""
    return line - 1


def repair_store(
    path: Path,
    settings: Settings,
    *,
    in_place: bool,
    output: Path | None,
    stream: BinaryIO | None,
    backup: bool,
    force: bool,
) -> Iterator[RepairResult | SessionRefused | SessionfixError]:
    """Repair the selected sessions of the store at `path`; a session that cannot be
    repaired is yielded as its refusal, and the others go on."""
    with ExitStack() as stack:
        store = stores.open_store(path)
        stack.callback(store.close)
        sessions = stores.select_sessions(store, settings.sessions, strict=False)
        if not in_place and len(sessions) > 1:
            raise UsageError(
                f"{path}: holds {len(sessions)} sessions; -o takes one (name it with --session)"
            )
        kept: list[Path] = []
        rewritten = False
        for session in sessions:
            refused: SessionRefused | None
            try:
                with stores.transcript_of(store, session) as transcript:
                    try:
                        result = _repair_session(
                            store, transcript, settings, in_place, output, stream, backup, force
                        )
                    except SessionfixError as exc:
                        refused = _refused(exc, transcript, settings, store.path)
                    else:
                        refused = None
            except SessionfixError as exc:  # the session could not be read
                refused = SessionRefused(exc, [], session.id)
            if refused is not None:
                yield refused
                if isinstance(refused.error, stores.StoreRefused):
                    return
                continue
            if in_place and result.changed:
                rewritten = True
                if result.backup is not None:
                    kept.append(result.backup)
            yield result
        if rewritten:
            try:
                store.check_integrity(kept)
            except SessionfixError as exc:
                yield exc


def _refused(
    error: SessionfixError, transcript: stores.Transcript, settings: Settings, store: Path
) -> SessionRefused:
    """A refusal must not read as "no problems": the session's findings go with it."""
    session_id = transcript.session.id
    if isinstance(error, InputError):
        return SessionRefused(error, [], session_id)
    try:
        findings = check_stored(transcript, settings, str(store))[1]
    except SessionfixError:
        findings = []
    return SessionRefused(error, findings, session_id)


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
    shown = _shown(store.path, transcript.session)
    if stream is not None:
        result = repair_to_stream(transcript.path, stream, settings, filename=shown)
        return _located(result, transcript, store.path, rewritten=False)
    if output is not None:
        result = repair_to(transcript.path, output, settings, replace=force, filename=shown)
        return _located(result, transcript, store.path, rewritten=False)
    preview = preview_repair(transcript.path, settings, filename=shown)
    try:
        result = preview.result
        if preview.output is not None:
            result.backup = store.replace(
                transcript, preview.output, _origins(preview), backup=backup
            )
            result.output = store.path
        return _located(result, transcript, store.path, rewritten=preview.output is not None)
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


class StoredPreview(Struct):
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


def preview_store(path: Path, settings: Settings) -> Iterator[StoredPreview | SessionfixError]:
    """Previews of the selected sessions' repairs, one at a time; a session that cannot
    be previewed is yielded as its error, and the others go on."""
    with ExitStack() as outer:
        store = stores.open_store(path)
        outer.callback(store.close)
        for session in stores.select_sessions(store, settings.sessions, strict=False):
            stack = ExitStack()
            try:
                transcript = stack.enter_context(stores.transcript_of(store, session))
                preview = preview_repair(transcript.path, settings, filename=_shown(path, session))
            except SessionfixError as exc:
                stack.close()
                yield exc
                continue
            except BaseException:
                stack.close()
                raise
            yield StoredPreview(preview, transcript, path, stack)
