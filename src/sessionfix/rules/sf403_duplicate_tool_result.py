"""SF403 duplicate-tool-result: a tool call answered more than once."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for event, first in ctx.tracking.duplicates:
        index = event.index
        fix = None
        if ctx.provides(Capability.RESULT_REPAIRS):
            fix = safe(
                "drop the repeated result, keep the first", ctx.drop_result(index, event.call_id)
            )
        yield ctx.entry_diagnostic(
            RULE,
            index,
            said(
                f"second result for tool call {event.call_id!r} (first ",
                on_line(view.rows[first]),
                "); providers reject duplicate tool results",
            ),
            fix=fix,
        )


RULE = Rule(
    code="SF403",
    name="duplicate-tool-result",
    severity=Severity.ERROR,
    fix="safe (none where the agent's loader keeps both: Codex)",
    requires=frozenset({Capability.TOOL_CALLS}),
    summary="A tool call answered more than once",
    check=check,
)
