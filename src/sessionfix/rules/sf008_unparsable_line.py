"""SF008 unparsable-line: a line that is not exactly one JSON object."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from sessionfix import jsonutil
from sessionfix.diagnostics import (
    Applicability,
    Diagnostic,
    DropLine,
    Edit,
    Fix,
    JoinLines,
    Severity,
    TrimDamage,
)
from sessionfix.formats import has_record_shape
from sessionfix.formats.capabilities import Capability
from sessionfix.location import Said, line, said
from sessionfix.read.reader import LineFinding, LineIssue
from sessionfix.rules.analysis import damaged_header_row, outside, records_on_row, stripped_bounds
from sessionfix.rules.base import Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    header_row = ctx.shared(damaged_header_row)
    glued_rows = {f.row for f in ctx.lines.findings if f.issue is LineIssue.GLUED}
    for finding in ctx.lines.findings:
        if finding.issue is LineIssue.SPREAD:
            yield _spread(ctx, finding)
            continue
        if finding.issue is not LineIssue.UNPARSABLE or finding.row == header_row:
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
        elif finding.rows > 1:
            what: str | Said
            if finding.truncated:
                what = "hold records cut off mid-write; readers skip them"
            elif finding.json_kind is not None:
                what = (
                    f"are JSON {finding.json_kind}s, not objects; "
                    f"{_kept_value_consequence(ctx, finding.json_kind, several=True)}"
                )
            else:
                blank = f"{finding.blanks} of them blank; " if finding.blanks else ""
                what = said(
                    f"are not JSON objects ({blank}",
                    line(finding.row),
                    f": {reason}); readers skip them",
                )
            yield ctx.diagnostic(
                RULE,
                finding.row,
                said(f"{finding.rows} lines in a row, to ", line(finding.last_row), ", ") + what,
                span=(finding.offset, finding.length),
                end_row=finding.last_row,
                fix=unsafe(
                    f"drop the {finding.rows} lines",
                    DropLine(finding.row, last=finding.last_row, repairs=LineIssue.UNPARSABLE),
                ),
            )
            continue
        elif ctx.provides(Capability.WHOLE_DOCUMENT):
            # The line is the whole session: dropping it would drop the session.
            what = "is cut off mid-write" if finding.truncated else f"does not parse ({reason})"
            yield ctx.diagnostic(
                RULE,
                finding.row,
                f"the session {what}; its agent loads none of it (recover it from a copy)",
                span=(finding.offset, finding.length),
            )
            continue
        else:
            if finding.truncated:
                message = "line holds a record cut off mid-write; readers skip it"
            elif finding.json_kind is not None:
                message = (
                    f"line is a JSON {finding.json_kind}, not an object; "
                    f"{_kept_value_consequence(ctx, finding.json_kind)}"
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


def _spread(ctx: RuleContext, finding: LineFinding) -> Diagnostic:
    """A record spread over lines (pretty-printed, or broken where JSON allows
    whitespace): each line alone is no JSON object, so every reader skips them all.
    Written on one line without the whitespace between its tokens, it is the record
    as a compact writer writes it, every token's bytes unchanged: safe."""
    return ctx.diagnostic(
        RULE,
        finding.row,
        said(
            f"one record is spread over {finding.rows} lines, to ",
            line(finding.last_row),
            "; readers parse each line alone and skip them all",
        ),
        index=records_on_row(ctx, finding.row)[0],
        end_row=finding.last_row,
        fix=Fix(
            Applicability.SAFE,
            "write the record on one line, without the whitespace between its tokens",
            _JoinEdits(ctx, finding),
        ),
    )


class _JoinEdits(Sequence[Edit]):
    """The whitespace between a spread record's tokens, line by line (its line breaks
    among it): what writing it on one line removes. Found when first asked for, by
    reading the record again."""

    def __init__(self, ctx: RuleContext, finding: LineFinding) -> None:
        self._ctx = ctx
        self._finding = finding
        self._parts: list[tuple[int, int, int]] | None = None

    def _made(self) -> list[tuple[int, int, int]]:
        if self._parts is None:
            finding = self._finding
            data = self._ctx.source.read(finding.offset, finding.length)
            parts: list[tuple[int, int, int]] = []
            row, line_start = finding.row, 0
            for start, end in jsonutil.spaces_between_tokens(data):
                while start < end:
                    newline = data.find(b"\n", start, end)
                    stop = end if newline < 0 else newline + 1
                    parts.append((row, start - line_start, stop - line_start))
                    if newline >= 0:
                        row, line_start = row + 1, stop
                    start = stop
            self._parts = parts
        return self._parts

    def __len__(self) -> int:
        return len(self._made())

    @overload
    def __getitem__(self, index: int) -> Edit: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Edit]: ...
    def __getitem__(self, index: int | slice) -> Edit | Sequence[Edit]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        row, start, end = self._made()[index]
        return JoinLines(
            row, start=start, end=end, first=self._finding.row, repairs=LineIssue.SPREAD
        )


def _kept_value_consequence(ctx: RuleContext, kind: str, *, several: bool = False) -> str:
    """What happens to a line of valid JSON that is not an object (or to `several`):
    `JSON.parse` accepts it, so pi keeps it as an entry (checked against pi's own
    loader)."""
    if not ctx.provides(Capability.VALUES_AS_ENTRIES):
        return "readers expect records here" if several else "readers expect a record here"
    if kind == "null":
        return "pi cannot open the session (it reads the type of every entry and throws)"
    if several:
        return (
            "pi keeps each as an entry with no type or id; as the last line, one leaves "
            "pi no leaf and an empty context"
        )
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
    fix="safe (a record spread over lines), else unsafe",
    requires=frozenset({Capability.LINES}),
    summary="A line that is not exactly one JSON object",
    check=check,
)
