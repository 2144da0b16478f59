"""SF112 empty-message: a message stored without any of its content."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import MISSING, Role
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    counts = view.part_counts
    if not counts:
        return
    answered = {view.parent_id(index) for index in counts} - {MISSING, None}
    last = max(counts)
    for index, count in sorted(counts.items()):
        if count:
            continue
        role = view.roles[index]
        if index == last:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                "the last message has no content yet; the agent may still be writing it",
                severity=Severity.INFO,
            )
        elif role == Role.USER:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                "user message has no content: its prompt is lost, the agent skips it and "
                "its reply follows another reply",
            )
        elif role == Role.ASSISTANT and view.entry_id(index) not in answered:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                "assistant message has no content: the agent sends nothing of it",
                severity=Severity.INFO,
                fix=safe("delete the empty message", ctx.drop(index)),
            )
        else:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                "message has no content: the agent sends nothing of it",
                severity=Severity.INFO,
            )


RULE = Rule(
    code="SF112",
    name="empty-message",
    severity=Severity.WARNING,
    fix="safe for an assistant message no message answers, else none",
    requires=frozenset({Capability.MESSAGE_PARTS}),
    summary="A message stored without any of its content",
    check=check,
)
