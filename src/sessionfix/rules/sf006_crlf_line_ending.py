"""SF006 crlf-line-ending: lines ending in CRLF instead of LF."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
    """One edit per CRLF line, removing its carriage return, built on demand (a file may
    have millions)."""

    def __init__(self, ctx: RuleContext) -> None:
        self._ctx = ctx
        self._rows = ctx.lines.crlf_rows
        self._bodies: dict[int, int] | None = None

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
        return NormaliseTerminator(row, cr=self._body_length(row))

    def _body_length(self, row: int) -> int:
        """Bytes of line `row` before its terminator: those of its findings' line, else
        of its one record, which then is the whole line (as the repair plan reads it)."""
        if self._bodies is None:
            self._bodies = {f.row: f.length for f in reversed(self._ctx.lines.findings)}
        length = self._bodies.get(row)
        if length is not None:
            return length
        records = records_on_row(self._ctx, row)
        return self._ctx.view.sizes[records[0]] if records else 0


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
