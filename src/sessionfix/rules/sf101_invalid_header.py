"""SF101 invalid-header: the session header is missing, damaged or invalid."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, RebuildHeader, Severity
from sessionfix.formats import Format, header_problems, known_agents, rebuilt_header
from sessionfix.formats.capabilities import Capability
from sessionfix.location import Said, line, said
from sessionfix.rules.analysis import damaged_header_row
from sessionfix.rules.base import Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if ctx.format is Format.UNKNOWN:
        if not len(view) and ctx.lines.size == 0:
            yield ctx.diagnostic(RULE, 1, "file is empty: no session header and no records")
            return
        row = view.rows[0] if len(view) else 1
        *agents, last = known_agents()
        yield ctx.diagnostic(
            RULE,
            row,
            f"session format not recognised: the first record is no {', '.join(agents)} "
            f"or {last} record",
            index=0 if len(view) else None,
        )
        return
    header = view.header
    if header is None:
        yield from _missing_header(ctx)
        return
    for problem in header_problems(ctx.format, header, ctx.origin.name):
        yield ctx.diagnostic(RULE, header.row, problem, index=0)


def _missing_header(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    damaged_row = ctx.shared(damaged_header_row)
    if damaged_row is not None:
        row = damaged_row
        message: str | Said = said(line(row), f" is a damaged session header; {view.headerless}")
    else:
        row = view.rows[0] if len(view) else 1
        message = f"the first record is not a session header; {view.headerless}"
    if not ctx.provides(Capability.HEADER_REBUILD):
        yield ctx.diagnostic(RULE, row, message, index=0 if len(view) else None)
        return
    if ctx.settings.cwd is None:
        yield ctx.diagnostic(RULE, row, message + " (pass --cwd to rebuild the header)", index=None)
        return
    header = _rebuilt_header(ctx)
    content = jsonutil.stringify(header)
    if damaged_row is not None:
        edit = RebuildHeader(damaged_row, lambda: content, replaces=True)
    else:
        edit = RebuildHeader(row - 1, lambda: content, replaces=False)
    yield ctx.diagnostic(
        RULE,
        row,
        message,
        fix=unsafe(f"write a new session header with id {header['id']!r}", edit),
    )


def _rebuilt_header(ctx: RuleContext) -> dict[str, Any]:
    """The header the format writes for this file (its name and first record say what
    it holds)."""
    first: object = None
    if len(ctx.view):
        try:
            first = ctx.load_record(0)
        except ValueError:
            first = None
    assert ctx.settings.cwd is not None
    return rebuilt_header(ctx.format, ctx.view, first, ctx.origin.name, ctx.settings.cwd)


RULE = Rule(
    code="SF101",
    name="invalid-header",
    severity=Severity.ERROR,
    fix="unsafe (pi missing/damaged header, with --cwd), else none",
    requires=frozenset({Capability.HEADER}),
    summary="The session header is missing, damaged or invalid",
    check=check,
)
