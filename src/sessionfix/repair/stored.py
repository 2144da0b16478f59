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
from sessionfix.containers import HeldSession, StoreContainer
from sessionfix.diagnostics import Diagnostic
from sessionfix.engine import check_held
from sessionfix.errors import InputError, SessionfixError, UsageError
from sessionfix.repair.planned import RepairResult
from sessionfix.repair.preview import RepairPreview, preview_repair
from sessionfix.repair.rowmap import PREFIX_ROW
from sessionfix.repair.targets import repair_to, repair_to_stream
from sessionfix.settings import Settings
from sessionfix.slim import refuse_size_in_store


class SessionRefused(Struct, frozen=True):
    """A session whose repair failed or was refused, with what a check of it finds."""

    error: SessionfixError
    findings: list[Diagnostic]
    session_id: str


def _shown(store: Path, session_id: str) -> str:
    return f"{store} (session {session_id})"


def _located(
    result: RepairResult, container: StoreContainer, held: HeldSession, *, rewritten: bool
) -> RepairResult:
    """`result` named by the store and its session: its input's findings located by
    the rows they were read from; what is left after an in-place rewrite by the rows
    now stored, one per line of the repair (a copy elsewhere keeps its own names)."""
    result.path = container.path
    result.session_id = held.session
    result.filename = _shown(container.path, held.session)
    result.found = held.located(result.found)
    result.applied = held.located(result.applied)
    if rewritten:
        result.remaining = container.rewritten(held).located(result.remaining)
    elif not result.changed:
        result.remaining = held.located(result.remaining)
    return result


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
    refuse_size_in_store(path, settings)
    with ExitStack() as stack:
        container = StoreContainer(stores.open_store(path), str(path))
        stack.callback(container.close)
        sessions = container.sessions(settings.sessions)
        if not in_place and len(sessions) > 1:
            raise UsageError(
                f"{path}: holds {len(sessions)} sessions; -o takes one (name it with --session)"
            )
        kept: list[Path] = []
        rewritten = False
        for session in sessions:
            refused: SessionRefused | None
            try:
                with container.hold(session) as held:
                    try:
                        result = _repair_session(
                            container, held, settings, in_place, output, stream, backup, force
                        )
                    except SessionfixError as exc:
                        refused = _refused(exc, held, settings)
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
                container.store.check_integrity(kept)
            except SessionfixError as exc:
                yield exc


def _refused(error: SessionfixError, held: HeldSession, settings: Settings) -> SessionRefused:
    """A refusal must not read as "no problems": the session's findings go with it."""
    if isinstance(error, InputError):
        return SessionRefused(error, [], held.session)
    try:
        findings = check_held(held, settings)[1]
    except SessionfixError:
        findings = []
    return SessionRefused(error, findings, held.session)


def _repair_session(
    container: StoreContainer,
    held: HeldSession,
    settings: Settings,
    in_place: bool,
    output: Path | None,
    stream: BinaryIO | None,
    backup: bool,
    force: bool,
) -> RepairResult:
    shown = _shown(container.path, held.session)
    loader = container.loader(held)
    if stream is not None:
        result = repair_to_stream(held.text, stream, settings, filename=shown, loader=loader)
        return _located(result, container, held, rewritten=False)
    if output is not None and not container.store.copies_as_store:
        result = repair_to(
            held.text, output, settings, replace=force, filename=shown, loader=loader
        )
        return _located(result, container, held, rewritten=False)
    names = container.rewritten(held).names
    preview = preview_repair(held.text, settings, filename=shown, result_names=names, loader=loader)
    try:
        result = preview.result
        if output is not None:
            origins = _origins(preview) if preview.output is not None else None
            container.write_copy(output, held, preview.output, origins, replace=force)
            result.output = output
            return _located(result, container, held, rewritten=preview.output is not None)
        if preview.output is not None:
            result.backup = container.take_back(
                held,
                preview.output,
                _origins(preview),
                backup=backup,
                quiescence=settings.quiescence,
            )
            result.output = container.path
            result.notes = container.rewrite_notes(held)
        return _located(result, container, held, rewritten=preview.output is not None)
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
    """A preview of one store session's repair, with the session it reads."""

    preview: RepairPreview
    held: HeldSession
    stack: ExitStack

    @property
    def shown(self) -> str:
        return f"{self.held.container}:{self.held.session}"

    def locate(self, found: list[Diagnostic]) -> list[Diagnostic]:
        """The preview's findings named by the store, session and row."""
        return self.held.located(found)


def preview_store(path: Path, settings: Settings) -> Iterator[StoredPreview | SessionfixError]:
    """Previews of the selected sessions' repairs, one at a time; a session that cannot
    be previewed is yielded as its error, and the others go on."""
    refuse_size_in_store(path, settings)
    with ExitStack() as outer:
        container = StoreContainer(stores.open_store(path), str(path))
        outer.callback(container.close)
        for session in container.sessions(settings.sessions):
            stack = ExitStack()
            try:
                held = stack.enter_context(container.hold(session))
                preview = preview_repair(
                    held.text,
                    settings,
                    filename=_shown(path, session.id),
                    result_names=container.rewritten(held).names,
                    loader=container.loader(held),
                )
            except SessionfixError as exc:
                stack.close()
                yield exc
                continue
            except BaseException:
                stack.close()
                raise
            yield StoredPreview(preview, held, stack)
