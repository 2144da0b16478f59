"""SF001 glued-records: two or more records written onto one line."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from operator import attrgetter
from typing import Final

from sessionfix.diagnostics import Diagnostic, Severity, SplitLine
from sessionfix.formats.capabilities import Capability
from sessionfix.read.reader import LineIssue
from sessionfix.rules.analysis import describe, outside, records_on_row, stripped_bounds
from sessionfix.rules.base import Counted, Rule, RuleContext, safe

LISTED: Final = 4
"""Record kinds named in a message before the rest are counted."""


def _listing(names: list[str]) -> str:
    if len(names) <= LISTED + 1:
        return ", ".join(names)
    return ", ".join(names[:LISTED]) + f" and {len(names) - LISTED} more"


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    bounds = ctx.shared(stripped_bounds)
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
        row = finding.row
        # Line breaks between the parts, and the bytes around them dropped.
        edits = [
            SplitLine(row, start=end, end=start, text="\n", repairs=LineIssue.GLUED)
            for (_, end), (start, _) in itertools.pairwise(spans)
        ]
        edits[:0] = [
            SplitLine(row, start=start, end=end, repairs=LineIssue.GLUED)
            for start, end in outside((spans[0][0], spans[-1][1]), bounds[row])
        ]
        edits.sort(key=attrgetter("start"))
        yield ctx.diagnostic(
            RULE,
            finding.row,
            message,
            span=(finding.offset, finding.length),
            fix=safe(f"split into {len(spans)} lines, each record's bytes unchanged", *edits),
        )


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
