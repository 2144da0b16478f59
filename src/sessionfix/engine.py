"""Checking files: read each into its view (`sessionfix.scanner`), then run every rule."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sessionfix.diagnostics import SORT_KEY, Applicability, Diagnostic, Fix
from sessionfix.errors import SessionfixError
from sessionfix.formats import Format
from sessionfix.reader import RecordSource
from sessionfix.rules import RULES
from sessionfix.rules.base import RuleContext
from sessionfix.scanner import ProgressCallback, ScannedFile, gc_paused, read_session
from sessionfix.settings import Settings


@dataclass(slots=True)
class FileReport:
    path: Path
    filename: str
    format: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None
    size: int = 0


def run_rules(
    scanned: ScannedFile, settings: Settings, filename: str, origin: Path | None = None
) -> list[Diagnostic]:
    """Every enabled rule's diagnostics for a read file, in report order. `origin` is
    the session's own path when the bytes were read from elsewhere."""
    fmt = Format(scanned.view.format)
    enabled = settings.enabled(rule.code for rule in RULES)
    context = RuleContext(
        view=scanned.view,
        lines=scanned.lines,
        settings=settings,
        source=RecordSource(scanned.info.path),
        info=scanned.info,
        filename=filename,
        enabled=enabled,
        editor=scanned.editor,
        tracking=scanned.tracking,
        origin=origin,
    )
    diagnostics: list[Diagnostic] = []
    for rule in RULES:
        if rule.code not in enabled or fmt not in rule.formats:
            continue
        if rule.tree_only and not scanned.view.tree:
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
        return diagnostic.with_fix(Fix(Applicability.SAFE, fix.message, fix.edits))
    if fix.applicability is Applicability.SAFE and settings.demoted_to_unsafe(diagnostic.code):
        return diagnostic.with_fix(Fix(Applicability.UNSAFE, fix.message, fix.edits))
    return diagnostic


def check_file(
    path: str | Path,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
) -> list[Diagnostic]:
    """Diagnostics for one session file. Raises `InputError` when it cannot be read."""
    path = Path(path)
    settings = settings or Settings()
    scanned = read_session(path, settings.format, progress, settings.jobs)
    with gc_paused():
        return run_rules(scanned, settings, filename or str(path))


def check_paths(
    paths: Iterable[Path],
    settings: Settings | None = None,
    *,
    display: Callable[[Path], str] = str,
    progress: ProgressCallback | None = None,
) -> Iterator[FileReport]:
    """Check several files; an unreadable one yields a report with `error` set."""
    settings = settings or Settings()
    for path in paths:
        try:
            scanned = read_session(path, settings.format, progress, settings.jobs)
            with gc_paused():
                diagnostics = run_rules(scanned, settings, display(path))
        except SessionfixError as exc:
            yield FileReport(path, display(path), "unknown", error=str(exc))
            continue
        yield FileReport(
            path, display(path), scanned.view.format, diagnostics, size=scanned.info.size
        )
