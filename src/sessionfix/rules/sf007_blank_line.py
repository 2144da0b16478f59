"""SF007 blank-line: an empty or whitespace-only line between records."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, DropLine, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import line, said
from sessionfix.read.reader import LineIssue
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for finding in ctx.lines.findings:
        if finding.issue is not LineIssue.BLANK:
            continue
        count = finding.rows
        if count == 1:
            what = "empty" if finding.length == 0 else "whitespace-only"
            yield ctx.diagnostic(
                RULE,
                finding.row,
                f"{what} line; strict JSONL readers reject it",
                span=(finding.offset, finding.length),
                fix=safe("drop the line", DropLine(finding.row, repairs=LineIssue.BLANK)),
            )
            continue
        # A run holds only its line breaks when every line in it is empty.
        what = "empty" if finding.length == count - 1 else "blank (empty or whitespace-only)"
        yield ctx.diagnostic(
            RULE,
            finding.row,
            said(
                f"{count} {what} lines in a row, to ",
                line(finding.last_row),
                "; strict JSONL readers reject them",
            ),
            span=(finding.offset, finding.length),
            end_row=finding.last_row,
            fix=safe(
                f"drop the {count} lines",
                DropLine(finding.row, last=finding.last_row, repairs=LineIssue.BLANK),
            ),
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
