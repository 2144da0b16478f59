"""Checking files: read each into its view (`sessionfix.scan.scanner`), then run every rule."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Final

import msgspec
from msgspec import Struct, field

from sessionfix import stores
from sessionfix.containers import FILE_SESSION, HeldSession, SessionFile, is_store, open_container
from sessionfix.diagnostics import SORT_KEY, Applicability, Diagnostic
from sessionfix.discovery import discover, is_directory, is_foreign, is_plain_file
from sessionfix.errors import SessionfixError
from sessionfix.formats import Format, coverage
from sessionfix.formats.capabilities import Capability, listed
from sessionfix.model.view import SessionView
from sessionfix.read.reader import RecordSource
from sessionfix.rules import RULES
from sessionfix.rules.base import Rule, RuleContext
from sessionfix.scan.cores import default_workers
from sessionfix.scan.scanner import (
    WORKER_MIN_BYTES,
    ProgressCallback,
    ScannedFile,
    gc_paused,
    read_session,
)
from sessionfix.settings import Settings
from sessionfix.units import human_bytes


class Inapplicable(Struct, frozen=True):
    """A rule selected by its code that a file's format cannot run: it lacks `missing`."""

    rule: Rule
    format: Format
    missing: tuple[Capability, ...]
    positional: bool = False
    """The format provides what is missing, but only in its id-linked (tree) sessions."""

    def __str__(self) -> str:
        rule = self.rule
        sessions = f"{self.format.value} sessions"
        if self.positional:
            sessions = f"positional (v1) {sessions}"
        return (
            f"{rule.code} ({rule.name}) does not apply to {sessions}: needs {listed(self.missing)}"
        )


class FileReport(Struct):
    path: Path
    filename: str
    format: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None
    size: int = 0
    inapplicable: tuple[Inapplicable, ...] = ()
    """Rules selected by code that this file's format cannot run."""
    session_id: str = ""
    """In a session store: the session this report is of (a store gives one per session)."""


def inapplicable(settings: Settings, view: SessionView) -> tuple[Inapplicable, ...]:
    """The rules `settings` names by code that a file read into `view` cannot run."""
    named = settings.named(rule.code for rule in RULES)
    if not named:
        return ()
    fmt = Format(view.format)
    found = []
    for rule in RULES:
        if rule.code in named:
            lacking = rule.missing_for(fmt, tree=view.tree)
            if lacking:
                positional = not view.tree and not rule.missing_for(fmt, tree=True)
                found.append(Inapplicable(rule, fmt, tuple(lacking), positional))
    return tuple(found)


class Notices:
    """Collects what a run says once: each inapplicable rule on the first file it met."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self.lines: list[str] = []

    def add(self, found: Iterable[Inapplicable]) -> list[Inapplicable]:
        """Record `found`; return those not reported earlier in the run."""
        new = [item for item in found if item.rule.code not in self._seen]
        self._seen.update(item.rule.code for item in new)
        self.lines.extend(str(item) for item in new)
        return new


def run_rules(
    scanned: ScannedFile,
    settings: Settings,
    filename: str,
    origin: Path | None = None,
    *,
    excerpts: bool = True,
    hold: bool = False,
) -> list[Diagnostic]:
    """Every enabled rule's diagnostics for a read file, in report order. `origin` is
    the session's own path when the bytes were read from elsewhere; `excerpts`: the
    diagnostics carry the start of their record; `hold`: the file is opened now, since
    its name goes away before the diagnostics' content is read (a decompressed copy)."""
    fmt = Format(scanned.view.format)
    enabled = settings.enabled(rule.code for rule in RULES)
    provided = coverage.provided(fmt, tree=scanned.view.tree)
    source = RecordSource(scanned.info.path)
    if hold:
        source.hold()
    context = RuleContext(
        view=scanned.view,
        lines=scanned.lines,
        settings=settings,
        source=source,
        info=scanned.info,
        filename=filename,
        enabled=enabled,
        editor=scanned.editor,
        tracking=scanned.tracking,
        origin=origin,
        excerpts=excerpts,
    )
    diagnostics: list[Diagnostic] = []
    for rule in RULES:
        if rule.code not in enabled or not rule.runs_on(provided):
            continue
        diagnostics.extend(rule.check(context))
    adjusted = [_adjust_fix(d, settings, fmt) for d in diagnostics]
    adjusted.sort(key=SORT_KEY)
    return adjusted


def _adjust_fix(diagnostic: Diagnostic, settings: Settings, fmt: Format) -> Diagnostic:
    fix = diagnostic.fix
    if fix is None:
        return diagnostic
    if fmt is Format.UNKNOWN:
        return diagnostic.with_fix(None)
    if fix.applicability is Applicability.UNSAFE and settings.promoted_to_safe(diagnostic.code):
        return diagnostic.with_fix(msgspec.structs.replace(fix, applicability=Applicability.SAFE))
    if fix.applicability is Applicability.SAFE and settings.demoted_to_unsafe(diagnostic.code):
        return diagnostic.with_fix(msgspec.structs.replace(fix, applicability=Applicability.UNSAFE))
    return diagnostic


FixDescriber = Callable[[ScannedFile, list[Diagnostic]], list[Diagnostic]]
"""Completes the fixes of a file's diagnostics, while its view is at hand, with every edit
each makes (`sessionfix.repair.plan.described_fixes`: the repair's plan resolves what a
fix's decisions entail, a stage above this one)."""


def check_file(
    path: str | Path,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
    describe: FixDescriber | None = None,
) -> list[Diagnostic]:
    """Diagnostics for one session file (`*.zst`: compressed); `describe` completes
    their fixes' edits. Raises `InputError` when it cannot be read."""
    path = Path(path)
    settings = settings or Settings()
    return _check(path, settings, filename or str(path), progress, describe=describe)[1]


def _check(
    path: Path,
    settings: Settings,
    filename: str,
    progress: ProgressCallback | None,
    *,
    excerpts: bool = True,
    describe: FixDescriber | None = None,
) -> tuple[ScannedFile, list[Diagnostic]]:
    """Read a session file (decompressed first if it is compressed) and run the rules;
    `excerpts`: the diagnostics carry the start of their record; `describe` completes
    their fixes' edits."""
    with SessionFile(path, filename).hold(FILE_SESSION) as held:
        return check_held(held, settings, progress, excerpts=excerpts, describe=describe)


def check_held(
    held: HeldSession,
    settings: Settings,
    progress: ProgressCallback | None = None,
    *,
    excerpts: bool = True,
    describe: FixDescriber | None = None,
) -> tuple[ScannedFile, list[Diagnostic]]:
    """Read a container's session and run the rules; the findings located and worded by
    the container (`describe` completes their fixes' edits)."""
    scanned = read_session(
        held.text,
        held.format or settings.format,
        held.progress(progress),
        settings.jobs,
        named_as=held.named_as,
    )
    with gc_paused():
        found = run_rules(scanned, settings, held.shown, excerpts=excerpts, hold=held.hold_open)
        if describe is not None:
            found = describe(scanned, found)
    return scanned, held.located(found)


def check_paths(
    paths: Iterable[Path],
    settings: Settings | None = None,
    *,
    display: Callable[[Path], str] = str,
    progress: ProgressCallback | None = None,
    edits: bool = True,
    excerpts: bool = True,
    describe: FixDescriber | None = None,
) -> Generator[FileReport, None, None]:
    """Check several files, in order; an unreadable one yields a report with `error` set.
    A session store yields a report per session.

    Small files are spread over `settings.jobs` worker processes (default one per core)
    when there are enough of them; a large file is read in this process, itself in
    parallel, and so is a store. The reports of files checked by workers hold no open
    file: their fixes' edits are made there (`edits`), or left out where the caller
    does not report them; so are the excerpts of their records (`excerpts`); `describe`
    completes the fixes' edits where they are kept. Close the iterator when leaving it
    early: that stops the workers."""
    settings = settings or Settings()
    paths = list(paths)
    describe = describe if edits else None
    shared = shared_files(paths, settings)
    results: Iterator[FileReport] = iter(())
    with contextlib.ExitStack() as stack:
        if shared:
            from sessionfix.scan.workers import OrderedWorkers

            tasks = [(path, display(path)) for path in shared]  # in the order of `paths`
            alone = msgspec.structs.replace(settings, jobs=1)
            workers = OrderedWorkers(
                partial(
                    _checked_apart,
                    settings=alone,
                    edits=edits,
                    excerpts=excerpts,
                    describe=describe,
                ),
                tasks,
                default_workers(settings.jobs),
            )
            results = iter(stack.enter_context(workers))
        for path in paths:
            if path in shared:
                report = next(results)
                if progress is not None:
                    progress(shared[path])
                yield report
            else:
                yield from _checked_container(
                    path, settings, display(path), progress, excerpts=excerpts, describe=describe
                )


MIN_SHARED_FILES: Final = 8
"""Fewer small files than this are checked in this process: starting workers would cost
more than it saves."""


def shared_files(paths: list[Path], settings: Settings) -> dict[Path, int]:
    """The files worker processes check, with their sizes: plain session files too small
    to be read in parallel themselves, when there are enough of them for more than one
    worker (and no file is named twice)."""
    if default_workers(settings.jobs) < 2 or len(set(paths)) != len(paths):
        return {}
    small: dict[Path, int] = {}
    for path in paths:
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0  # its error is a worker's to report
        if size < 2 * WORKER_MIN_BYTES and not is_store(path):
            small[path] = size
    return small if len(small) >= MIN_SHARED_FILES else {}


def _checked(
    path: Path,
    settings: Settings,
    filename: str,
    progress: ProgressCallback | None,
    *,
    excerpts: bool = True,
    describe: FixDescriber | None = None,
) -> FileReport:
    """The report of a session file, which holds one session."""
    (report,) = _checked_container(
        path, settings, filename, progress, excerpts=excerpts, describe=describe
    )
    return report


def _checked_container(
    path: Path,
    settings: Settings,
    filename: str,
    progress: ProgressCallback | None,
    *,
    excerpts: bool,
    describe: FixDescriber | None,
) -> Iterator[FileReport]:
    """A report per session of the container at `path` (a store: each session it holds
    that the run selects); one that cannot be read is reported so, and the others go on."""
    try:
        container = open_container(path, filename)
    except SessionfixError as exc:
        yield FileReport(path, filename, "unknown", error=str(exc))
        return
    try:
        try:
            sessions = container.sessions(settings.sessions)
        except SessionfixError as exc:
            yield FileReport(path, filename, "unknown", error=str(exc))
            return
        for session in sessions:
            try:
                with container.hold(session) as held:
                    scanned, diagnostics = check_held(
                        held, settings, progress, excerpts=excerpts, describe=describe
                    )
            except SessionfixError as exc:
                yield FileReport(path, filename, "unknown", error=str(exc), session_id=session.id)
                continue
            yield _report_of(path, filename, scanned, diagnostics, settings, session.id)
    finally:
        container.close()


def _report_of(
    path: Path,
    filename: str,
    scanned: ScannedFile,
    diagnostics: list[Diagnostic],
    settings: Settings,
    session_id: str = "",
) -> FileReport:
    return FileReport(
        path,
        filename,
        scanned.view.format,
        diagnostics,
        size=scanned.info.size,
        inapplicable=inapplicable(settings, scanned.view),
        session_id=session_id,
    )


def _checked_apart(
    task: tuple[Path, str],
    *,
    settings: Settings,
    edits: bool,
    excerpts: bool,
    describe: FixDescriber | None,
) -> FileReport:
    """`_checked` in a worker process: the report as plain data."""
    path, filename = task
    report = _checked(path, settings, filename, None, excerpts=excerpts, describe=describe)
    report.diagnostics = [d.detached(edits=edits) for d in report.diagnostics]
    return report


class Selection(Struct):
    """The files a run reads, and what was refused before reading any."""

    files: list[Path]
    errors: list[str] = field(default_factory=list)
    skipped: int = 0
    """Sibling artefacts a walk left out (locks, trajectories, resets)."""
    unknown: int = 0
    """JSONL files a walk left out because no format reads their first records."""
    foreign: list[Path] = field(default_factory=list)
    """Files given by name that no format reads, left out (`strict`: errors instead)."""
    origins: list[str] = field(default_factory=list)
    """Where the paths came from, when the user named none (the agents' folders)."""
    size: int = 0
    """Total bytes of `files`."""
    started: float = field(default_factory=time.perf_counter)


NOT_A_SESSION: Final = (
    "not a session file of a known format (no agent writes records like its first)"
)
"""What is said of a JSONL file whose first records no format package recognises."""


def select_files(
    paths: Iterable[Path], *, walk: bool, sniff: bool = False, strict: bool = False
) -> Selection:
    """The session files under `paths` (`walk`: folders are searched), or the files as
    given, a folder among them being an error.

    `sniff`: JSONL files whose first records no format reads are left out, silently in
    a walk, into `foreign` when named; `strict` makes each of them an error instead.
    """
    paths = list(paths)
    selection = Selection([])
    if walk:
        found = discover(paths, sniff=sniff)
        selection.files = found.files
        selection.skipped = len(found.skipped)
        selection.unknown = len(found.foreign)
        selection.errors.extend(f"{path}: {reason}" for path, reason in found.unreadable)
        if strict:
            selection.errors.extend(f"{path}: {NOT_A_SESSION}" for path in found.foreign)
    else:
        for path in paths:
            if is_directory(path):
                selection.errors.append(
                    f"{path}: is a directory (use `sessionfix scan` for directories)"
                )
            else:
                selection.files.append(path)
    if sniff:
        named = {path for path in paths if not is_directory(path)}
        kept: list[Path] = []
        for path in selection.files:
            if path in named and is_plain_file(path) and is_foreign(path):
                if strict:
                    selection.errors.append(f"{path}: {NOT_A_SESSION}")
                else:
                    selection.foreign.append(path)
            else:
                kept.append(path)
        selection.files = kept
    for path in selection.files:
        with suppress(OSError):
            selection.size += path.stat().st_size
    return selection


# ---- what a run comes to (cli-and-safety.md §2) ------------------------------------
# 0: nothing at or above `--fail-on`; 1: problems found (or, when asked, fixes made);
# 2: a usage error, unreadable input or an internal error.

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1
EXIT_ERROR: Final = 2


def exit_code(
    diagnostics: Iterable[Diagnostic], errors: bool, settings: Settings, exit_zero: bool
) -> int:
    """2 on any error; else 1 when a finding reaches `--fail-on`, unless `exit_zero`."""
    if errors:
        return EXIT_ERROR
    if exit_zero:
        return EXIT_OK
    if any(d.severity >= settings.fail_on for d in diagnostics):
        return EXIT_PROBLEMS
    return EXIT_OK


def scan_note(
    scanned: int,
    size: int,
    elapsed: float,
    skipped: int,
    *,
    nothing: bool,
    stored: int = 0,
    unknown: int = 0,
    origins: Sequence[str] = (),
) -> str:
    """How much a scan read and how long it took; `nothing`: no file was found at all;
    `stored`: sessions read from session stores among the files; `unknown`: files of no
    known format left out; `origins`: the folders searched, when the user named none."""
    where = f" in {', '.join(origins)}" if origins else ""
    if nothing:
        note = f"No session files found{where}"
    else:
        note = f"Scanned {scanned} file{'s' if scanned != 1 else ''} ({human_bytes(size)}"
        if stored:
            note += f"; {stored} session{'s' if stored != 1 else ''} in stores"
        note += f") in {elapsed:.2f}s"
        if origins:
            note += f" from {', '.join(origins)}"
    if skipped:
        note += f"; skipped {skipped} sibling file{'s' if skipped != 1 else ''}"
    if unknown:
        note += f"; skipped {unknown} file{'s' if unknown != 1 else ''} of no known format"
    return note


class CheckRun(Struct):
    """What checking a selection of files found."""

    selection: Selection
    reports: list[FileReport]
    diagnostics: list[Diagnostic]
    """Every file's diagnostics, in report order."""
    errors: list[str]
    """Files refused or unreadable, one line each."""
    notices: list[str]
    """Warnings to print once: rules selected by code that a file's format cannot run."""
    elapsed: float

    def exit_code(self, settings: Settings, exit_zero: bool) -> int:
        return exit_code(self.diagnostics, bool(self.errors), settings, exit_zero)

    def note(self) -> str:
        """How much was read, how fast; or that there was nothing to read."""
        selection = self.selection
        read = len({r.path for r in self.reports if r.error is None})
        stored = sum(1 for r in self.reports if r.error is None and r.session_id)
        nothing = not selection.files and not self.errors
        return scan_note(
            read,
            selection.size,
            self.elapsed,
            selection.skipped,
            nothing=nothing,
            stored=stored,
            unknown=selection.unknown,
            origins=selection.origins,
        )


def check_run(
    selection: Selection,
    settings: Settings,
    *,
    progress: ProgressCallback | None = None,
    edits: bool = True,
    excerpts: bool = True,
    describe: FixDescriber | None = None,
) -> CheckRun:
    """Check every selected file; an unreadable one becomes an error line, not a failure.
    `edits`: the diagnostics' fixes keep their edits (completed by `describe`);
    `excerpts`: the diagnostics carry the start of their record (`check_paths`)."""
    errors = list(selection.errors)
    diagnostics: list[Diagnostic] = []
    reports: list[FileReport] = []
    notices = Notices()
    # Closed however the loop ends, so that the file workers are reaped at once.
    with contextlib.closing(
        check_paths(
            selection.files,
            settings,
            progress=progress,
            edits=edits,
            excerpts=excerpts,
            describe=describe,
        )
    ) as checked:
        for report in checked:
            reports.append(report)
            if report.error is not None:
                errors.append(report.error)
            diagnostics.extend(report.diagnostics)
            notices.add(report.inapplicable)
    if settings.sessions:
        found = (r.session_id for r in reports if r.session_id)
        errors.extend(stores.unmatched_sessions(settings.sessions, found))
    if len(reports) > 1:
        diagnostics.sort(key=SORT_KEY)  # each file's own are in order already
    elapsed = time.perf_counter() - selection.started
    return CheckRun(selection, reports, diagnostics, errors, notices.lines, elapsed)
