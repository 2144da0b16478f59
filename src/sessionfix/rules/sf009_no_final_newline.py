"""SF009 no-final-newline: the file does not end with a newline."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import AddFinalNewline, Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.analysis import records_on_row
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    lines = ctx.lines
    if lines.final_newline or lines.last_row != lines.line_count or not lines.last_row_parsed:
        return
    records = records_on_row(ctx, lines.last_row)
    if not records:
        return
    yield ctx.diagnostic(
        RULE,
        lines.last_row,
        "file does not end with a newline; the next append glues two records together (SF001)",
        index=records[-1],
        fix=safe("append a newline", AddFinalNewline(lines.last_row)),
    )


RULE = Rule(
    code="SF009",
    name="no-final-newline",
    severity=Severity.INFO,
    fix="safe",
    requires=frozenset({Capability.LINES}),
    summary="The file does not end with a newline",
    check=check,
)
