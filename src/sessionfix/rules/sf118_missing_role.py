"""SF118 missing-role: a message in the model's context stored without a role."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for index in ctx.view.roleless:
        yield ctx.entry_diagnostic(
            RULE,
            index,
            "message has no role: the agent sends it as it is, and the provider refuses "
            "the request",
        )


RULE = Rule(
    code="SF118",
    name="missing-role",
    severity=Severity.ERROR,
    fix="none",
    requires=frozenset({Capability.KEPT_LINKS}),
    summary="A message in the model's context stored without a role",
    check=check,
)
