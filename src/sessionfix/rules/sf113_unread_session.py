"""SF113 unread-session: a session kept where its agent no longer reads it."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if view.unread is None or not len(view):
        return
    yield ctx.entry_diagnostic(
        RULE, 0, f"session is {view.unread}; sessionfix reads nothing of it and leaves it alone"
    )


RULE = Rule(
    code="SF113",
    name="unread-session",
    severity=Severity.INFO,
    fix="none",
    requires=frozenset({Capability.UNREAD_SESSIONS}),
    summary="A session kept where its agent no longer reads it",
    check=check,
)
