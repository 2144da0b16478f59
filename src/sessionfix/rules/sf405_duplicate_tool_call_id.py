"""SF405 duplicate-tool-call-id: one call id used by two calls where ids must be distinct."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for record, call_id, first in ctx.tracking.repeated_calls:
        yield ctx.entry_diagnostic(
            RULE,
            record,
            said(
                f"tool call id {call_id!r} is already used by the call ",
                on_line(view.rows[first]),
                "; providers reject the request (tool call ids must be unique)",
            ),
        )


RULE = Rule(
    code="SF405",
    name="duplicate-tool-call-id",
    severity=Severity.ERROR,
    fix="none",
    requires=frozenset({Capability.TOOL_CALLS, Capability.DISTINCT_CALL_IDS}),
    summary="One tool call id used by two calls",
    check=check,
)
