"""SF401 orphan-tool-result: a tool result answering no call."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for event in ctx.tracking.orphans:
        index = event.index
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"tool result for call {event.call_id!r} answers no tool call of its turn; providers "
            "reject it (unexpected tool_use_id)",
            fix=safe(
                "drop the orphan result; its children move to its parent",
                ctx.drop(index),
            ),
        )


RULE = Rule(
    code="SF401",
    name="orphan-tool-result",
    severity=Severity.ERROR,
    fix="safe",
    requires=frozenset({Capability.TOOL_CALLS}),
    summary="A tool result that answers no tool call",
    check=check,
)
