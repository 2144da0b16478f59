"""SF405 duplicate-tool-call-id: one call id used twice in one turn."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for record, call_id, first in ctx.tracking.repeated_calls:
        yield ctx.entry_diagnostic(
            RULE,
            record,
            f"tool call id {call_id!r} is already used by a call of the same turn on line "
            f"{view.rows[first]}; providers reject the request (tool_use ids must be unique)",
        )


RULE = Rule(
    code="SF405",
    name="duplicate-tool-call-id",
    severity=Severity.ERROR,
    fix="none",
    requires=frozenset({Capability.TOOL_CALLS, Capability.TURNS}),
    summary="One tool call id used twice in one turn",
    check=check,
)
