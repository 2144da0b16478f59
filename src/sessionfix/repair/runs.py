"""Repairing or previewing several files at once: one result or error line per file
(`RepairRun`, `PreviewRun`), in place spread over worker processes (`repair_paths`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

import msgspec
from msgspec import Struct, field

from sessionfix import containers, stores
from sessionfix.diagnostics import SORT_KEY, Diagnostic
from sessionfix.engine import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PROBLEMS,
    Notices,
    check_file,
    exit_code,
    shared_files,
)
from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.interrupts import signals_deferred
from sessionfix.repair import summary
from sessionfix.repair.planned import RepairResult
from sessionfix.repair.preview import RepairPreview, preview_repair
from sessionfix.repair.stored import SessionRefused, preview_store, repair_store
from sessionfix.repair.targets import repair_in_place, repair_to, repair_to_stream
from sessionfix.scan.cores import default_workers
from sessionfix.scan.workers import OrderedWorkers, WorkerDied
from sessionfix.settings import Settings


class RepairRun(Struct):
    """What repairing several files did, and what a report of them shows."""

    results: list[RepairResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Files that could not be repaired, one line each."""
    unrepaired: list[Diagnostic] = field(default_factory=list)
    """The problems of files whose repair was refused, as a check of them finds them:
    a refusal must not read as "no problems"."""
    notices: list[str] = field(default_factory=list)
    """Warnings to print once: rules selected by code that a file's format cannot run."""
    ended_early: bool = False
    """An in-place run stopped before every file was repaired."""
    stopped: BaseException | None = None
    """What stopped it, to raise once the files finished are reported (an interrupt, an
    internal error); None when an error line says it (a worker process died)."""
    stopped_during: list[str] = field(default_factory=list)
    """Files the run was repairing when it stopped that now hold their repair, though
    no result says so (the stop came right after the swap)."""

    @property
    def remaining(self) -> list[Diagnostic]:
        """What is left to report: the results' remaining problems and the refused files'."""
        left = [*(d for r in self.results for d in r.remaining), *self.unrepaired]
        return sorted(left, key=SORT_KEY)

    @property
    def fixed(self) -> int:
        return sum(len(r.applied) for r in self.results)

    @property
    def unsettled(self) -> list[str]:
        """Warnings about lines appended during an in-place repair and left as written."""
        return [
            f"{r.filename}: repaired, but {r.unsettled}"
            for r in self.results
            if r.unsettled is not None
        ]

    @property
    def rewrite_notes(self) -> list[str]:
        """What stores say their rewrites left as they were, one line each."""
        return [f"{r.filename}: {note}" for r in self.results for note in r.notes]

    @property
    def repaired_before_stop(self) -> list[str]:
        """When the run stopped early: every file it changed, one line each, so that
        none goes unmentioned."""
        if not self.ended_early:
            return []
        lines = [
            f"{r.filename}: repaired before the run stopped"
            + (f"; backup: {r.backup}" if r.backup is not None else "")
            for r in self.results
            if r.changed
        ]
        lines += [
            f"{name}: repaired as the run stopped; its backup is beside it"
            for name in self.stopped_during
        ]
        return lines

    def note(self, *, in_place: bool) -> str | None:
        return summary.repair_note(self.results, in_place=in_place) if self.results else None

    def exit_code(self, settings: Settings, *, exit_zero: bool, exit_on_fix: bool) -> int:
        """2 on any error; 1 when problems remain (or, with `exit_on_fix`, a file
        changed), unless `exit_zero`."""
        if self.errors or self.stopped is not None:
            return EXIT_ERROR
        if exit_zero:
            return EXIT_OK
        if exit_on_fix and any(r.changed for r in self.results):
            return EXIT_PROBLEMS
        return exit_code(self.remaining, False, settings, exit_zero)

    def record(self, outcome: FileOutcome, notices: Notices) -> None:
        """Add one file's outcome."""
        if outcome.result is None:
            assert outcome.error is not None
            self.errors.append(outcome.error)
            self.unrepaired.extend(outcome.unrepaired)
            return
        self.results.append(outcome.result)
        notices.add(outcome.result.inapplicable)


class FileOutcome(Struct):
    """One file's repair: its result, or the line that says why there is none, with the
    findings a check of the file still reports."""

    result: RepairResult | None = None
    error: str | None = None
    unrepaired: list[Diagnostic] = field(default_factory=list)

    def detached(self) -> FileOutcome:
        """The outcome as plain data, to travel from a worker process: the reported
        findings keep their fixes' edits, made now; the input's and the applied ones
        (which a report only counts) lose them."""
        unrepaired = [d.detached(edits=True) for d in self.unrepaired]
        result = self.result
        if result is not None:
            result = msgspec.structs.replace(
                result,
                found=[d.detached(edits=False) for d in result.found],
                applied=[d.detached(edits=False) for d in result.applied],
                remaining=[d.detached(edits=True) for d in result.remaining],
            )
        return FileOutcome(result, self.error, unrepaired)


def repair_paths(
    files: list[Path],
    settings: Settings,
    *,
    in_place: bool = False,
    output: Path | None = None,
    stream: BinaryIO | None = None,
    backup: bool = True,
    force: bool = False,
    follow_symlinks: bool = False,
    break_stale_lock: bool = False,
    keep_stopped: bool = False,
) -> RepairRun:
    """Repair every file in place, or the one file to `output` or `stream`; a file that
    cannot be repaired becomes an error line and its findings are still reported.

    In place, small files are spread over `settings.jobs` worker processes (default one
    per core) as `check_paths` spreads them, when there are enough of them; a large
    file is repaired here, itself read in parallel, and so is a store. The results
    come in the order of `files` whoever made them, and the files repaired by workers
    have their reported findings' edits made there (`FileOutcome.detached`).

    An interrupt or an internal error stops an in-place run without cutting a repair
    short: each worker finishes the file it has under way, and what stopped it is
    raised once every finished file is in the run; with `keep_stopped` the run is
    returned instead, its `stopped` set, for the caller to report what was done before
    raising it. A worker that dies makes its file an error line and stops the run.
    (`--diff` previews, `PreviewRun`, are made one file at a time.)
    """
    run = RepairRun()
    notices = Notices()
    stored: list[str] = []
    if in_place:
        repair = _InPlace(settings, backup, force, follow_symlinks, break_stale_lock)
        _repair_in_place_all(files, settings, run, notices, stored, repair)
    else:
        for path in files:
            if containers.is_store(path):
                stored += _repair_store(
                    path, settings, run, notices, in_place, output, stream, backup, force
                )
                continue
            run.record(_repaired_copy(path, settings, output, stream, force), notices)
    if settings.sessions and not run.ended_early:
        run.errors.extend(stores.unmatched_sessions(settings.sessions, stored))
    run.notices = notices.lines
    if run.stopped is not None and not keep_stopped:
        raise run.stopped
    return run


def _repaired_copy(
    path: Path, settings: Settings, output: Path | None, stream: BinaryIO | None, force: bool
) -> FileOutcome:
    def repair() -> RepairResult:
        if stream is not None:
            return repair_to_stream(path, stream, settings)
        assert output is not None, "repair to a path, a stream or in place"
        return repair_to(path, output, settings, replace=force)

    return _outcome(path, settings, repair)


def _outcome(path: Path, settings: Settings, repair: Callable[[], RepairResult]) -> FileOutcome:
    """`repair()`'s result, or its refusal as an error line with the file's findings."""
    try:
        return FileOutcome(repair())
    except SessionfixError as exc:
        findings = [] if isinstance(exc, InputError) else _findings_of(path, settings)
        return FileOutcome(error=str(exc), unrepaired=findings)
    except BrokenPipeError:
        raise
    except OSError as exc:
        return FileOutcome(
            error=f"{path}: {described(exc)}; nothing written",
            unrepaired=_findings_of(path, settings),
        )


class _InPlace(Struct, frozen=True):
    """How every file of an in-place run is repaired."""

    settings: Settings
    backup: bool
    force: bool
    follow_symlinks: bool
    break_stale_lock: bool

    def __call__(self, path: Path) -> FileOutcome:
        def repair() -> RepairResult:
            return repair_in_place(
                path,
                self.settings,
                backup=self.backup,
                force=self.force,
                follow_symlinks=self.follow_symlinks,
                break_stale_lock=self.break_stale_lock,
            )

        return _outcome(path, self.settings, repair)

    def apart(self, path: Path) -> FileOutcome:
        """`self(path)` in a worker process (`settings.jobs` 1): the outcome as plain
        data."""
        return self(path).detached()


def _repair_in_place_all(
    files: list[Path],
    settings: Settings,
    run: RepairRun,
    notices: Notices,
    stored: list[str],
    repair: _InPlace,
) -> None:
    """Repair `files` in place into `run`, the small ones by worker processes. Whatever
    stops the run is kept in it once every repair under way has ended."""
    shared = shared_files(files, settings)
    tasks = list(shared)  # in the order of `files`
    workers: OrderedWorkers[Path, FileOutcome] | None = None
    if tasks:
        workers = OrderedWorkers(
            msgspec.structs.replace(
                repair, settings=msgspec.structs.replace(settings, jobs=1)
            ).apart,
            tasks,
            default_workers(settings.jobs),
            finish_started=True,
        )
    here: tuple[Path, tuple[int, int] | None] | None = None
    """The file being repaired in this process, and its inode before."""
    try:
        with ExitStack() as stack:
            taken: Iterator[FileOutcome] = iter(())
            if workers is not None:
                taken = iter(stack.enter_context(workers))
            for path in files:
                if path in shared:
                    # Taken and recorded with signals held, so that no result is lost.
                    with signals_deferred():
                        run.record(next(taken), notices)
                elif containers.is_store(path):
                    stored += _repair_store(
                        path, settings, run, notices, True, None, None, repair.backup, repair.force
                    )
                else:
                    here = (path, _inode(path))
                    run.record(repair(path), notices)
                    here = None
    except (KeyboardInterrupt, Exception) as exc:
        run.ended_early = True
        run.stopped = exc
        if here is not None and _swapped_unrecorded(here[0], here[1], run):
            run.stopped_during.append(str(here[0]))
    if workers is None:
        return
    if isinstance(run.stopped, WorkerDied) and workers.cut_short:
        run.stopped = None  # the error line of its file says it
    for _, outcome in workers.finished:
        if isinstance(outcome, BaseException):
            run.errors.append(f"internal error: {type(outcome).__name__}: {outcome}")
        else:
            run.record(outcome, notices)
    for index in workers.cut_short:
        run.errors.append(
            f"{tasks[index]}: the worker process repairing it died; the file holds either "
            "its original or its repair, and the run stopped"
        )


def _swapped_unrecorded(path: Path, before: tuple[int, int] | None, run: RepairRun) -> bool:
    """Whether the file a stop came during holds a new inode (its repair) and no result
    of the run says so."""
    if before is None or _inode(path) == before:
        return False
    return not any(r.path == path for r in run.results)


def _inode(path: Path) -> tuple[int, int] | None:
    """The file at `path` (device, inode): an in-place repair gives it a new one."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _repair_store(
    path: Path,
    settings: Settings,
    run: RepairRun,
    notices: Notices,
    in_place: bool,
    output: Path | None,
    stream: BinaryIO | None,
    backup: bool,
    force: bool,
) -> list[str]:
    """Repair a store's sessions, each a result or an error line of `run` (a refused
    session's findings still reported); returns the ids of the sessions it read."""
    read: list[str] = []
    try:
        for outcome in repair_store(
            path,
            settings,
            in_place=in_place,
            output=output,
            stream=stream,
            backup=backup,
            force=force,
        ):
            if isinstance(outcome, SessionRefused):
                run.errors.append(str(outcome.error))
                run.unrepaired.extend(outcome.findings)
                read.append(outcome.session_id)
            elif isinstance(outcome, SessionfixError):
                run.errors.append(str(outcome))
            else:
                run.results.append(outcome)
                notices.add(outcome.inapplicable)
                read.append(outcome.session_id)
    except SessionfixError as exc:
        run.errors.append(str(exc))
    return read


def _findings_of(path: Path, settings: Settings) -> list[Diagnostic]:
    """What a check of a file whose repair was refused finds in it."""
    try:
        return check_file(path, settings)
    except SessionfixError:
        return []


class PreviewRun:
    """Previews of several files' repairs, made one at a time as they are iterated; a
    file that cannot be previewed becomes an error line. Closing the run removes the
    previews still open."""

    def __init__(self, files: list[Path], settings: Settings) -> None:
        self.files = files
        self.settings = settings
        self.errors: list[str] = []
        self.changed = 0
        """Files the repair would change."""
        self.would_fix = 0
        """Fixes the previews taken so far (`diffs`, `plan`) would make."""
        self._notices = Notices()
        self._open: list[RepairPreview] = []

    @property
    def notices(self) -> list[str]:
        """Warnings to print once: rules selected by code that a file's format cannot run."""
        return self._notices.lines

    def diffs(self) -> Iterator[RepairPreview]:
        """Each file's preview, for a diff of it: closed (its repaired bytes removed)
        once the next is asked for."""
        for preview in self:
            self._open.append(preview)
            self.would_fix += len(preview.result.applied)
            yield preview
            self._open.pop().close()

    def plan(self) -> list[Diagnostic]:
        """Every fix of every file as the plan of its input (`RepairPreview.planned`), in
        report order. Their edits read the repaired bytes: the previews stay until the
        run is closed."""
        planned: list[Diagnostic] = []
        for preview in self:
            self._open.append(preview)
            planned.extend(preview.planned(str(preview.path)))
        self.would_fix = len(planned)
        return sorted(planned, key=SORT_KEY)

    def __iter__(self) -> Iterator[RepairPreview]:
        for path in self.files:
            if containers.is_store(path):
                yield from self._store_previews(path)
                continue
            try:
                preview = preview_repair(path, self.settings)
            except SessionfixError as exc:
                self.errors.append(str(exc))
                continue
            self._notices.add(preview.result.inapplicable)
            if preview.changes_anything:
                self.changed += 1
            yield preview

    def _store_previews(self, path: Path) -> Iterator[RepairPreview]:
        try:
            for stored in preview_store(path, self.settings):
                if isinstance(stored, SessionfixError):
                    self.errors.append(str(stored))
                    continue
                preview = stored.preview
                preview.path = Path(stored.shown)
                preview.located = stored.locate
                preview.keep(stored.stack)
                self._notices.add(preview.result.inapplicable)
                if preview.changes_anything:
                    self.changed += 1
                yield preview
        except SessionfixError as exc:
            self.errors.append(str(exc))

    def close(self) -> None:
        for preview in self._open:
            preview.close()
        self._open.clear()

    def __enter__(self) -> PreviewRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def note(self) -> str | None:
        return summary.preview_note(self.would_fix, self.changed, bool(self.errors))

    def exit_code(self, exit_zero: bool) -> int:
        return summary.preview_exit_code(self.changed, bool(self.errors), exit_zero)
