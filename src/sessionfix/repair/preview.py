"""Previewing a repair (`--diff`, the JSON plan): the repair written and verified in a
temporary file nothing else sees, with where each of its changes comes from.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Final

import msgspec

from sessionfix.diagnostics import (
    Diagnostic,
    Edit,
    EditOp,
    EndedLine,
    RemovedLine,
    WrittenLine,
)
from sessionfix.location import FILE_NAMES, RecordNames
from sessionfix.model.loaded import Loader
from sessionfix.read.reader import RecordSource
from sessionfix.repair.planned import PlannedRepair, RepairResult
from sessionfix.repair.rowmap import PREFIX_ROW
from sessionfix.repair.verification import verified_in_temp
from sessionfix.scan.scanner import ProgressCallback
from sessionfix.settings import Settings

_COMPARE_BLOCK: Final = 1 << 20
"""Bytes compared at a time when checking that a written line is an input line."""


class RepairPreview:
    """What a repair of one file would write, verified like any repair, in a temporary
    file that nothing else sees; with where each of its changes comes from. `--diff`
    and the JSON plan are built from it, so they show exactly what `-o` would write."""

    def __init__(self, planned: PlannedRepair, result: RepairResult, output: Path | None):
        self.path = planned.origin
        self.input = planned.path
        """The input's text (a decompressed copy of a compressed session, kept until the
        preview is closed)."""
        self._text = planned.keep_text()
        self.result = result
        self.output = output
        """The repaired bytes (None when the repair changes nothing)."""
        self.input_size = planned.scanned.lines.size
        self._lines = planned.scanned.lines
        self.trace = planned.trace
        self._traced = planned.traced
        self._first_pass = len(planned.plan.diagnostics)
        self._source: RecordSource | None = None
        self.located: Callable[[list[Diagnostic]], list[Diagnostic]] | None = None
        """Names the plan's findings by the session store the input was read from."""

    def keep(self, stack: ExitStack) -> None:
        """Close `stack` (what the input's text needs) when the preview is closed."""
        self._text.callback(stack.close)

    @property
    def changes_anything(self) -> bool:
        return self.output is not None

    def planned(self, filename: str) -> list[Diagnostic]:
        """Every fix the repair applies, in every pass, as the plan of the input: each on
        the input row it concerns, with the edits of the written result that its
        decisions cause (follow-on changes included: a child re-linked past a dropped
        record is listed with the drop). A line several fixes change is listed once,
        whole, with the first of them (in the order of the rule catalogue), so that
        applying every edit of the plan to the input gives the written result."""
        if self.trace is None or self.output is None:
            return []
        trace = self.trace
        with open(self.output, "rb") as handle:
            located = trace.locate(handle)
        edits: dict[int, list[Edit]] = {}
        source = self._source = self._source or RecordSource(self.output)
        lines = self._lines
        unterminated = 0 if lines.final_newline else lines.line_count
        for k in range(len(trace)):
            row = trace.rows[k]
            written = located.get(row, [])
            change = _edits_of(row, written, source, trace.spans[k])
            if row == unterminated and written:
                offset, length, end = written[0]
                if end and self._is_last_line(offset, length):
                    change[0] = EndedLine(row, end=end)
            edits.setdefault(min(trace.causes(k)), []).extend(change)
        listed: list[Diagnostic] = []
        for cause, (diagnostic, row) in enumerate(self._traced):
            fix = diagnostic.fix
            assert fix is not None
            first_pass = cause < self._first_pass
            listed.append(
                Diagnostic(
                    code=diagnostic.code,
                    name=diagnostic.name,
                    severity=diagnostic.severity,
                    message=diagnostic.message,
                    said=diagnostic.said,
                    filename=filename,
                    row=row,
                    column=diagnostic.column if first_pass else 1,
                    entry_id=diagnostic.entry_id,
                    fix=msgspec.structs.replace(fix, edits=tuple(edits.get(cause, ()))),
                    format=diagnostic.format,
                    span=diagnostic.span if first_pass else None,
                    source=diagnostic.source if first_pass else None,
                    excerpt=diagnostic.excerpt if first_pass else None,
                    end_row=diagnostic.end_row if first_pass else None,
                )
            )
        return listed if self.located is None else self.located(listed)

    def _is_last_line(self, offset: int, length: int) -> bool:
        """Whether the written bytes at `offset` are exactly the input's unterminated last
        line, compared a block at a time (a last line can be a huge record)."""
        assert self.output is not None
        start = self.input_size - length
        if start < 0:
            return False
        with open(self.input, "rb") as before, open(self.output, "rb") as after:
            if start:
                before.seek(start - 1)
                if before.read(1) != b"\n":
                    return False
            else:
                before.seek(0)
            after.seek(offset)
            left = length
            while left:
                block = min(left, _COMPARE_BLOCK)
                if before.read(block) != after.read(block):
                    return False
                left -= block
        return True

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
        if self.output is not None:
            with suppress(OSError):
                self.output.unlink()
        self._text.close()


def _edits_of(
    row: int, lines: list[tuple[int, int, str]], source: RecordSource, span: int = 1
) -> list[Edit]:
    """An input row's change as edits: dropped, replaced by its first new line and the
    rest inserted after it; lines written before the first row go after row 0. Each
    names the terminator written after it, and keeps its exact bytes for the JSON. The
    `span - 1` rows after it that the change covers (a run changed as one) go, in one
    edit."""

    def edit(op: EditOp, line: tuple[int, int, str]) -> Edit:
        offset, length, end = line

        def raw() -> bytes:
            return source.read(offset, length)

        return WrittenLine(
            row, lambda: raw().decode("utf-8", "replace"), placement=op, raw=raw, end=end
        )

    if row == PREFIX_ROW:
        return [edit(EditOp.INSERT_AFTER, line) for line in lines]
    last = row + span - 1
    if not lines:
        return [RemovedLine(row, last=last if span > 1 else None)]
    first, *rest = lines
    covered = [RemovedLine(row + 1, last=last if span > 2 else None)] if span > 1 else []
    return [
        edit(EditOp.REPLACE, first),
        *(edit(EditOp.INSERT_AFTER, line) for line in rest),
        *covered,
    ]


def preview_repair(
    path: str | Path,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
    result_names: RecordNames = FILE_NAMES,
    loader: Loader | None = None,
) -> RepairPreview:
    """Repair `path` into a temporary file and verify it, as `repair_to` would, without
    writing anywhere else; close the preview to remove the file. A refusal names the
    result's records as `result_names` does (where the result is to go); `loader`: as
    `PlannedRepair` takes it."""
    planned = PlannedRepair(
        Path(path),
        settings or Settings(),
        filename,
        progress,
        trace=True,
        result_names=result_names,
        loader=loader,
    )
    try:
        result = planned.result()
        if not planned.changes_anything:
            result.remaining = planned.found
            result.output_size = result.input_size
            return RepairPreview(planned, result, None)
        temp = verified_in_temp(planned, result, filename or str(path))
        result.changed = True
        return RepairPreview(planned, result, temp)
    finally:
        planned.close()
