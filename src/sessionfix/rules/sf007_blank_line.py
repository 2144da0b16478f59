"""SF007 blank-line: an empty or whitespace-only line between records."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, DropLine, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.read.reader import LineIssue
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for finding in ctx.lines.findings:
        if finding.issue is LineIssue.BLANK:
            what = "empty" if finding.length == 0 else "whitespace-only"
            yield ctx.diagnostic(
                RULE,
                finding.row,
                f"{what} line; strict JSONL readers reject it",
                span=(finding.offset, finding.length),
                fix=safe("drop the line", DropLine(finding.row, repairs=LineIssue.BLANK)),
            )


RULE = Rule(
    code="SF007",
    name="blank-line",
    severity=Severity.INFO,
    fix="safe",
    requires=frozenset({Capability.LINES}),
    summary="An empty or whitespace-only line",
    check=check,
)
