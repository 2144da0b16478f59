"""SF001 glued-records: two or more records written onto one line."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Final

from sessionfix.diagnostics import Diagnostic, Severity, SplitLine
from sessionfix.formats.capabilities import Capability
from sessionfix.read.reader import LineIssue
from sessionfix.rules.analysis import describe, records_on_row
from sessionfix.rules.base import Counted, Rule, RuleContext, safe

LISTED: Final = 4
"""Record kinds named in a message before the rest are counted."""


def _listing(names: list[str]) -> str:
    if len(names) <= LISTED + 1:
        return ", ".join(names)
    return ", ".join(names[:LISTED]) + f" and {len(names) - LISTED} more"


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for finding in ctx.lines.findings:
        if finding.issue is not LineIssue.GLUED:
            continue
        spans = list(finding.records)
        names = _listing([describe(ctx, index) for index in records_on_row(ctx, finding.row)])
        damaged = next(
            (
                f
                for f in ctx.lines.findings
                if f.row == finding.row and f.issue in (LineIssue.TORN, LineIssue.UNPARSABLE)
            ),
            None,
        )
        if damaged is not None and damaged.span is not None:
            message = f"a complete record ({names}) and damaged bytes share one line"
            spans.append(damaged.span)
        else:
            message = f"{len(spans)} records glued on one line ({names})"
        message += "; readers drop the whole line"
        produce = partial(_split, ctx.line_bytes(finding.offset, finding.length), tuple(spans))
        yield ctx.diagnostic(
            RULE,
            finding.row,
            message,
            span=(finding.offset, finding.length),
            fix=safe(
                f"split into {len(spans)} lines, each record's bytes unchanged",
                SplitLine(finding.row, ctx.line_text(produce), repairs=LineIssue.GLUED),
            ),
        )


def _split(read_line: Callable[[], bytes], spans: tuple[tuple[int, int], ...]) -> bytes:
    line = read_line()
    return b"\n".join(line[start:end] for start, end in spans)


RULE = Rule(
    code="SF001",
    name="glued-records",
    severity=Severity.ERROR,
    fix="safe",
    requires=frozenset({Capability.LINES}),
    summary="Two or more records glued onto one line",
    check=check,
    counted=Counted.GLUED_LINES_SPLIT,
)
