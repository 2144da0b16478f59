"""SF006 crlf-line-ending: lines ending in CRLF instead of LF."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import overload

from sessionfix.diagnostics import (
    Applicability,
    Diagnostic,
    Edit,
    Fix,
    NormaliseTerminator,
    Severity,
)
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.analysis import records_on_row
from sessionfix.rules.base import Rule, RuleContext


class _TerminatorEdits(Sequence[Edit]):
    """One replace edit per CRLF line, built on demand (a file may have millions)."""

    def __init__(self, ctx: RuleContext) -> None:
        self._ctx = ctx
        self._rows = ctx.lines.crlf_rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> Edit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Edit]: ...
    def __getitem__(self, index: int | slice) -> Edit | Sequence[Edit]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        row = self._rows[index]
        view = self._ctx.view
        records = records_on_row(self._ctx, row)
        if not records:
            # A blank or damaged line: its own rule (SF007, SF002, SF008) decides its fate.
            return NormaliseTerminator(row, _unchanged_line(self._ctx, row))
        start = view.offsets[records[0]]
        end = view.offsets[records[-1]] + view.sizes[records[-1]]
        return NormaliseTerminator(
            row, self._ctx.line_text(self._ctx.line_bytes(start, end - start))
        )


def _unchanged_line(ctx: RuleContext, row: int) -> Callable[[], str]:
    finding = next((f for f in ctx.lines.findings if f.row == row), None)
    if finding is None:
        return lambda: ""
    read = ctx.line_bytes(finding.offset, finding.length)
    return lambda: read().decode("utf-8", "replace")


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    rows = ctx.lines.crlf_rows
    if not rows:
        return
    count = len(rows)
    more = f" ({count} lines in this file end with CRLF)" if count > 1 else ""
    lines = ctx.lines
    if count == 1 and not lines.final_newline and rows[0] == lines.line_count:
        ending = "the last line ends with a carriage return and no newline"
    else:
        ending = "line ends with CRLF"
    yield ctx.diagnostic(
        RULE,
        rows[0],
        f"{ending}; every agent writes LF{more}",
        fix=Fix(Applicability.SAFE, "end every line with LF", _TerminatorEdits(ctx)),
    )


RULE = Rule(
    code="SF006",
    name="crlf-line-ending",
    severity=Severity.INFO,
    fix="safe",
    requires=frozenset({Capability.LINES}),
    summary="Lines ending in CRLF",
    check=check,
)
