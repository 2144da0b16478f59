"""SF004 nul-bytes: raw NUL bytes left by an interrupted write."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, DropLine, Severity, StripBytes
from sessionfix.formats.capabilities import Capability
from sessionfix.read.reader import BOM, LineIssue, NulPlacement
from sessionfix.rules.base import Rule, RuleContext, safe

_WHERE = {
    NulPlacement.LEADING: "before the record",
    NulPlacement.TRAILING: "after the record",
    NulPlacement.AROUND: "around the record",
}


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    bom_rows = {f.row for f in ctx.lines.findings if f.issue is LineIssue.BOM}
    for finding in ctx.lines.findings:
        if finding.issue is not LineIssue.NUL:
            continue
        if finding.nul is NulPlacement.ONLY or finding.span is None:
            if ctx.provides(Capability.WHOLE_DOCUMENT):
                yield ctx.diagnostic(
                    RULE,
                    finding.row,
                    f"the session is {finding.length} NUL bytes (a zero-filled copy from an "
                    "interrupted write); its agent loads none of it",
                    span=(finding.offset, finding.length),
                )
                continue
            yield ctx.diagnostic(
                RULE,
                finding.row,
                f"line is {finding.length} NUL bytes (a zero-filled region from an interrupted "
                "write)",
                span=(finding.offset, finding.length),
                fix=safe("drop the line", DropLine(finding.row, repairs=LineIssue.NUL)),
            )
            continue
        start, end = finding.span
        # A byte-order mark before the NULs is SF005's to remove.
        first = len(BOM) if finding.row in bom_rows else 0
        stripped = finding.length - first - (end - start)
        runs = [(a, b) for a, b in ((first, start), (end, finding.length)) if a < b]
        where = _WHERE.get(finding.nul or NulPlacement.AROUND, "around the record")
        yield ctx.diagnostic(
            RULE,
            finding.row,
            f"{stripped} raw NUL byte{'s' if stripped != 1 else ''} {where}; "
            + (
                "its agent loads none of the session"
                if ctx.provides(Capability.WHOLE_DOCUMENT)
                else "readers skip the whole line"
            ),
            span=(finding.offset, finding.length),
            fix=safe(
                "strip the NUL bytes, keep the record",
                *(StripBytes(finding.row, start=a, end=b, repairs=LineIssue.NUL) for a, b in runs),
            ),
        )


RULE = Rule(
    code="SF004",
    name="nul-bytes",
    severity=Severity.ERROR,
    fix="safe (NUL-only lines, NUL runs before or after a record)",
    requires=frozenset({Capability.LINES}),
    summary="Raw NUL bytes in a line",
    check=check,
)
