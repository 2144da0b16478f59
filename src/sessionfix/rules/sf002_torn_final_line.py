"""SF002 torn-final-line: the last line was cut off mid-write."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, DropLine, LineEdit, Severity, TrimDamage
from sessionfix.formats.capabilities import Capability
from sessionfix.read.reader import LineIssue
from sessionfix.rules.analysis import damaged_header_row, stripped_bounds
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    header_row = ctx.shared(damaged_header_row)
    for finding in ctx.lines.findings:
        if finding.issue is not LineIssue.TORN or finding.row == header_row:
            continue
        glued = (
            finding.span is not None
            and finding.span[0] > 0
            and any(f.row == finding.row and f.issue is LineIssue.GLUED for f in ctx.lines.findings)
        )
        what = "the end of the last line" if glued else "the last line"
        what += " is a record cut off mid-write"
        if not ctx.quiescent:
            yield ctx.diagnostic(
                RULE,
                finding.row,
                f"{what}; the file changed recently or is locked, so this may be a write "
                "in progress",
                severity=Severity.INFO,
                span=(finding.offset, finding.length),
            )
            continue
        if glued and finding.span is not None:
            edit: LineEdit = TrimDamage(
                finding.row,
                start=finding.span[0],
                end=ctx.shared(stripped_bounds)[finding.row][1],
                repairs=LineIssue.TORN,
            )
        else:
            edit = DropLine(finding.row, repairs=LineIssue.TORN)
        yield ctx.diagnostic(
            RULE,
            finding.row,
            f"{what} (a torn write); every reader skips it",
            span=(finding.offset, finding.length),
            fix=safe("drop the torn bytes and end the file with a newline", edit),
        )


RULE = Rule(
    code="SF002",
    name="torn-final-line",
    severity=Severity.WARNING,
    fix="safe if quiescent, else none",
    requires=frozenset({Capability.LINES}),
    summary="The last line is an incomplete record",
    check=check,
)
