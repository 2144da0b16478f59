"""One streaming pass over a session file, then every selected rule.

The pass reads binary lines, hands each to the format adapter's typed partial
decode, and only sends lines that fail it to the reader's slow path. Memory holds
the compact per-record index of the view, never the file's text.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessionfix.diagnostics import Applicability, Diagnostic, Fix
from sessionfix.errors import InputError, SessionfixError
from sessionfix.formats import Format, FormatAdapter, RecordEditor, detect, make_adapter
from sessionfix.reader import (
    FileInfo,
    LineFinding,
    LineIssue,
    LineReport,
    RecordSource,
    classify_line,
    open_session,
)
from sessionfix.rules import RULES
from sessionfix.rules.base import RuleContext
from sessionfix.settings import Settings
from sessionfix.view import SessionView

FAST_PATH_MISSES = (ValueError, RecursionError)
"""msgspec's DecodeError/ValidationError and UnicodeDecodeError are ValueErrors."""

PROGRESS_STEP = 1 << 20

ProgressCallback = Callable[[int], None]


@dataclass(slots=True)
class ScannedFile:
    """The result of the streaming pass: the view and the line-level facts."""

    view: SessionView
    lines: LineReport
    info: FileInfo
    editor: RecordEditor


@dataclass(slots=True)
class FileReport:
    path: Path
    filename: str
    format: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    error: str | None = None
    size: int = 0


class _Pass:
    """State of one streaming pass."""

    def __init__(self, path: Path, forced: Format) -> None:
        self.path = path
        self.lines = LineReport()
        self.adapter: FormatAdapter | None = None
        if forced is not Format.AUTO:
            self.adapter = make_adapter(forced, path)
        self._damaged_row = 0

    def run(self, handle: Any, progress: ProgressCallback | None) -> None:
        lines = self.lines
        crlf_rows = lines.crlf_rows
        add_fast = self.adapter.add_fast if self.adapter is not None else None
        row = 0
        offset = 0
        last_row = 0
        reported = 0
        final_newline = True
        for raw in handle:
            row += 1
            length = len(raw)
            if raw[-1] == 10:
                size = length - 1
                if size and raw[size - 1] == 13:
                    size -= 1
                    crlf_rows.append(row)
            else:
                size = length
                final_newline = False
            if add_fast is not None:
                try:
                    add_fast(raw, row, offset, size)
                except FAST_PATH_MISSES:
                    pass
                else:
                    last_row = row
                    offset += length
                    if progress is not None and offset - reported >= PROGRESS_STEP:
                        progress(offset - reported)
                        reported = offset
                    continue
            if self._slow(raw[:size], row, offset):
                last_row = row
            if add_fast is None and self.adapter is not None:
                add_fast = self.adapter.add_fast
            offset += length
        if progress is not None and offset > reported:
            progress(offset - reported)
        lines.line_count = row
        lines.size = offset
        lines.final_newline = final_newline
        lines.last_row = last_row
        self._settle_last_line(last_row)

    def _slow(self, body: bytes, row: int, offset: int) -> bool:
        """Classify a line the fast path rejected. Returns whether it has content."""
        outcome = classify_line(body)
        has_content = outcome.damaged is not None or bool(outcome.records)
        for issue, extra in outcome.findings:
            finding = LineFinding(issue, row, offset, len(body), **extra)
            if issue is LineIssue.GLUED:
                finding.records = tuple((r.start, r.end) for r in outcome.records)
            elif issue is LineIssue.UNDEFINED:
                has_content = True
            self.lines.findings.append(finding)
        for record in outcome.records:
            if self.adapter is None:
                self.adapter = make_adapter(detect(record.value), self.path)
            column = _column(body, record.start)
            data = body[record.start : record.end]
            self.adapter.add_object(record.value, data, row, column, offset + record.start)
        if outcome.damaged is not None:
            self.lines.findings.append(
                LineFinding(
                    LineIssue.UNPARSABLE,
                    row,
                    offset,
                    len(body),
                    detail=outcome.damaged_reason,
                    span=outcome.damaged,
                    recoverable=outcome.recoverable,
                    truncated=outcome.damaged_truncated,
                )
            )
        return has_content

    def _settle_last_line(self, last_row: int) -> None:
        """A record cut off on the last non-blank line is a torn write, not mid-file damage."""
        lines = self.lines
        for finding in reversed(lines.findings):
            if finding.row > last_row:
                continue
            if finding.row < last_row:
                break
            if finding.issue is LineIssue.UNPARSABLE:
                lines.last_row_parsed = False
                if finding.truncated:
                    finding.issue = LineIssue.TORN

    def finish(self) -> FormatAdapter:
        if self.adapter is None:
            self.adapter = make_adapter(Format.UNKNOWN, self.path)
        self.adapter.finish(self.lines)
        return self.adapter


def _column(body: bytes, start: int) -> int:
    if start == 0:
        return 1
    return len(body[:start].decode("utf-8", "replace")) + 1


def read_session(
    path: Path, settings: Settings | None = None, progress: ProgressCallback | None = None
) -> ScannedFile:
    """Stream a file into its view and line report (no rules run)."""
    settings = settings or Settings()
    handle, info = open_session(path)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with handle:
            state = _Pass(path, settings.format)
            try:
                state.run(handle, progress)
            except OSError as exc:
                raise InputError(f"{path}: read failed ({exc.strerror or exc})") from None
        adapter = state.finish()
    finally:
        if gc_was_enabled:
            gc.enable()
    return ScannedFile(adapter.view, state.lines, info, adapter.editor)


def run_rules(scanned: ScannedFile, settings: Settings, filename: str) -> list[Diagnostic]:
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
    )
    diagnostics: list[Diagnostic] = []
    for rule in RULES:
        if rule.code not in enabled or fmt not in rule.formats:
            continue
        if rule.tree_only and not scanned.view.tree:
            continue
        diagnostics.extend(rule.check(context))
    adjusted = [_adjust_fix(d, settings, fmt) for d in diagnostics]
    adjusted.sort(key=lambda d: d.sort_key)
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
    scanned = read_session(path, settings, progress)
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
            scanned = read_session(path, settings, progress)
            diagnostics = run_rules(scanned, settings, display(path))
        except SessionfixError as exc:
            yield FileReport(path, display(path), "unknown", error=str(exc))
            continue
        yield FileReport(
            path, display(path), scanned.view.format, diagnostics, size=scanned.info.size
        )
