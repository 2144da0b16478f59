"""SF404 displaced-tool-result: a result separated from its call by another turn."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    dropped = ctx.provides(Capability.PAIRS_CHECKED_ON_SEND)
    for event, group, position in ctx.tracking.displaced:
        call = group.calls[position]
        if dropped:
            yield ctx.entry_diagnostic(
                RULE,
                event.index,
                said(
                    f"result for tool call {call.id!r} comes after the turn that issued it (call ",
                    on_line(view.rows[group.assistant]),
                    "): the agent leaves both out of every request it sends",
                ),
                severity=Severity.INFO,
            )
            continue
        yield ctx.entry_diagnostic(
            RULE,
            event.index,
            said(
                f"result for tool call {call.id!r} comes after the turn that issued it ended "
                "(call ",
                on_line(view.rows[group.assistant]),
                "); providers see an unanswered call followed by an unexpected result",
            ),
        )


RULE = Rule(
    code="SF404",
    name="displaced-tool-result",
    severity=Severity.WARNING,
    fix="none",
    requires=frozenset({Capability.TOOL_CALLS}),
    summary="A tool result separated from its call by another turn",
    check=check,
)
