"""SF008 unparsable-line: a line that is not exactly one JSON object."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, DropLine, JoinLines, Severity, TrimDamage
from sessionfix.formats import Format, has_record_shape
from sessionfix.formats.capabilities import Capability
from sessionfix.read.reader import LineFinding, LineIssue
from sessionfix.rules.analysis import damaged_header_row, outside, stripped_bounds
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    header_row = ctx.shared(damaged_header_row)
    glued_rows = {f.row for f in ctx.lines.findings if f.issue is LineIssue.GLUED}
    unparsable = {
        f.row: f
        for f in ctx.lines.findings
        if f.issue is LineIssue.UNPARSABLE and f.row != header_row and f.row not in glued_rows
    }
    begun_on: dict[int, int] = {}
    for finding in ctx.lines.findings:
        if finding.issue is not LineIssue.UNPARSABLE or finding.row == header_row:
            continue
        span = (finding.offset, finding.length)
        if finding.row in begun_on:
            yield ctx.diagnostic(
                RULE,
                finding.row,
                f"line ends the record begun on line {begun_on[finding.row]}, split by a line "
                "break; readers skip both halves",
                span=span,
            )
            continue
        rest = unparsable.get(finding.row + 1)
        if finding.row in unparsable and rest is not None and _one_record(ctx, finding, rest):
            begun_on[rest.row] = finding.row
            yield ctx.diagnostic(
                RULE,
                finding.row,
                f"line holds the start of a record split by a line break; with line {rest.row} "
                "it is one whole record, and readers skip both halves",
                span=span,
                fix=unsafe(
                    f"join the line with line {rest.row}: together they are one record",
                    JoinLines(
                        finding.row,
                        rest=rest.row,
                        start=finding.length,
                        end=finding.length + _terminator_length(ctx, finding.row),
                        repairs=LineIssue.UNPARSABLE,
                    ),
                ),
            )
            continue
        reason = finding.detail or "not JSON"
        span = finding.span or (0, finding.length)
        if finding.row in glued_rows:
            message = f"the end of the line after its complete records does not parse ({reason})"
            fix = unsafe(
                "drop the damaged bytes after the last complete record",
                TrimDamage(
                    finding.row,
                    start=span[0],
                    end=ctx.shared(stripped_bounds)[finding.row][1],
                    repairs=LineIssue.UNPARSABLE,
                ),
            )
        else:
            if finding.truncated:
                message = "line holds a record cut off mid-write; readers skip it"
            elif finding.json_kind is not None:
                message = (
                    f"line is a JSON {finding.json_kind}, not an object; "
                    f"{_kept_value_consequence(ctx.format, finding.json_kind)}"
                )
            else:
                message = f"line is not a JSON object ({reason}); readers skip it"
            fix = unsafe("drop the line", DropLine(finding.row, repairs=LineIssue.UNPARSABLE))
        recovered = _recoverable(ctx, finding.offset, finding.recoverable)
        if recovered is not None:
            start = recovered[0]
            message += f"; a complete record follows the damaged prefix (byte {start + 1})"
            fix = unsafe(
                "drop the damaged prefix, keep the complete record after it",
                *(
                    TrimDamage(finding.row, start=a, end=b, repairs=LineIssue.UNPARSABLE)
                    for a, b in outside(recovered, span)
                ),
            )
        yield ctx.diagnostic(
            RULE, finding.row, message, span=(finding.offset, finding.length), fix=fix
        )


def _terminator_length(ctx: RuleContext, row: int) -> int:
    crlf = ctx.lines.crlf_rows
    return 2 if bisect_left(crlf, row) < bisect_right(crlf, row) else 1


_ESCAPE = re.compile(rb"\\.", re.DOTALL)


def _one_record(ctx: RuleContext, start: LineFinding, rest: LineFinding) -> bool:
    """Whether two unparsable lines, without the line break between them, are one record
    of the format's shape, and the break lay outside its strings, where JSON allows
    whitespace (inside a string it may stand for a byte that is gone)."""
    head = ctx.source.read(start.offset, start.length)
    if _ESCAPE.sub(b"", head).count(b'"') % 2:
        return False
    tail = ctx.source.read(rest.offset, rest.length)
    try:
        value = jsonutil.loads(head + tail)
    except ValueError:
        return False
    return has_record_shape(ctx.format, value)


def _kept_value_consequence(fmt: Format, kind: str) -> str:
    """What happens to a line of valid JSON that is not an object: `JSON.parse` accepts
    it, so pi keeps it as an entry (checked against pi's own loader)."""
    if fmt not in PI_FORMATS:
        return "readers expect a record here"
    if kind == "null":
        return "pi cannot open the session (it reads the type of every entry and throws)"
    return (
        "pi keeps it as an entry with no type or id; as the last line it leaves pi "
        "no leaf and an empty context"
    )


def _recoverable(
    ctx: RuleContext, offset: int, span: tuple[int, int] | None
) -> tuple[int, int] | None:
    if span is None:
        return None
    try:
        value = jsonutil.loads(ctx.source.read(offset + span[0], span[1] - span[0]))
    except ValueError:
        return None
    return span if has_record_shape(ctx.format, value) else None


RULE = Rule(
    code="SF008",
    name="unparsable-line",
    severity=Severity.ERROR,
    fix="unsafe",
    requires=frozenset({Capability.LINES}),
    summary="A line that is not exactly one JSON object",
    check=check,
)
