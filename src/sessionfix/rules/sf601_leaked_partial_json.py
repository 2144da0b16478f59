"""SF601 leaked-partial-json: streaming state left on stored tool calls."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index, blocks in sorted(view.leaked.items()):
        count = len(blocks)
        what = "block carries" if count == 1 else f"{count} blocks carry"
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"toolCall {what} leaked `partialJson` streaming state; its raw control "
            "characters make strict readers fail",
            fix=safe(
                "delete the `partialJson` keys (the unsigned streaming field only)",
                ctx.rewrite_record(index, ctx.editor.drop_leaked_partial_json(blocks)),
            ),
        )


RULE = Rule(
    code="SF601",
    name="leaked-partial-json",
    severity=Severity.WARNING,
    fix="safe",
    requires=frozenset({Capability.TOOL_CALLS, Capability.STREAMING_STATE}),
    summary="Streaming `partialJson` state left on stored tool calls",
    check=check,
)
