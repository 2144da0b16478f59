"""SF005 byte-order-mark: a UTF-8 BOM that JSON.parse rejects."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity, StripBytes
from sessionfix.formats.capabilities import Capability
from sessionfix.read.reader import BOM, LineIssue
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for finding in ctx.lines.findings:
        if finding.issue is not LineIssue.BOM:
            continue
        if ctx.provides(Capability.WHOLE_DOCUMENT):
            consequence = "its agent's parser rejects it and loads none of the session"
        elif finding.row != 1:
            consequence = "JSON.parse rejects the line and readers skip it"
        elif ctx.provides(Capability.FIRST_LINE_BOM_TRIMMED):
            consequence = (
                "pi's loader trims it away, but the first line alone does not parse "
                "(`pi --continue`, OpenClaw's session repair and other JSON-lines readers "
                "reject it)"
            )
        else:
            consequence = "JSON.parse rejects the line, so readers lose the first record"
        yield ctx.diagnostic(
            RULE,
            finding.row,
            f"line starts with a UTF-8 byte-order mark; {consequence}",
            span=(finding.offset, finding.length),
            fix=safe(
                "remove the byte-order mark",
                StripBytes(finding.row, start=0, end=len(BOM), repairs=LineIssue.BOM),
            ),
        )


RULE = Rule(
    code="SF005",
    name="byte-order-mark",
    severity=Severity.ERROR,
    fix="safe",
    requires=frozenset({Capability.LINES}),
    summary="A UTF-8 byte-order mark at the start of a line",
    check=check,
)
