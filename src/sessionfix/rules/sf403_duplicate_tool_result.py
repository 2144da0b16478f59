"""SF403 duplicate-tool-result: a tool call answered more than once."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.analysis import tool_groups
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext, delete, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index, first in ctx.shared(tool_groups).duplicates:
        facts = view.result(index)
        call_id = facts.call_id if facts is not None else None
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"second result for tool call {call_id!r} (first on line {view.rows[first]}); "
            "providers reject duplicate tool results",
            fix=safe("drop the repeated result, keep the first", delete(view.rows[index])),
        )


RULE = Rule(
    code="SF403",
    name="duplicate-tool-result",
    severity=Severity.ERROR,
    fix="safe",
    formats=PI_FORMATS,
    summary="A tool call answered more than once",
    check=check,
)
