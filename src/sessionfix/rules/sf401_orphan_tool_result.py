"""SF401 orphan-tool-result: a tool result answering no call."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.analysis import tool_groups
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext, delete, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index in ctx.shared(tool_groups).orphans:
        facts = view.result(index)
        call_id = facts.call_id if facts is not None else None
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"tool result for call {call_id!r} answers no tool call of its turn; providers "
            "reject it (unexpected tool_use_id)",
            fix=safe(
                "drop the orphan result; its children move to its parent",
                delete(view.rows[index]),
            ),
        )


RULE = Rule(
    code="SF401",
    name="orphan-tool-result",
    severity=Severity.ERROR,
    fix="safe",
    formats=PI_FORMATS,
    summary="A tool result that answers no tool call",
    check=check,
)
