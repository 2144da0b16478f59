"""SF003 undefined-line: a line holding the literal `undefined`."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, DropLine, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.read.reader import LineIssue
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for finding in ctx.lines.findings:
        if finding.issue is LineIssue.UNDEFINED:
            yield ctx.diagnostic(
                RULE,
                finding.row,
                "line is the literal `undefined` (a serialised missing value), not a record",
                span=(finding.offset, finding.length),
                fix=safe("drop the line", DropLine(finding.row, repairs=LineIssue.UNDEFINED)),
            )


RULE = Rule(
    code="SF003",
    name="undefined-line",
    severity=Severity.WARNING,
    fix="safe",
    requires=frozenset({Capability.LINES}),
    summary="A line holding the literal `undefined`",
    check=check,
)
