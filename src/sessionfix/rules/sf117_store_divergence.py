"""SF117 store-divergence: a record stored twice whose two copies disagree."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for index, difference in sorted(ctx.view.copy_differences.items()):
        if not difference.fields:
            what = f"is kept in only one of {difference.read} and {difference.other}"
        else:
            fields = ", ".join(f"`{name}`" for name in difference.fields)
            what = f"differs between {difference.read} and {difference.other} in {fields}"
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"message {what}: the agent sends {difference.read}'s, while search and "
            "gap filling read the other; sessionfix does not choose between them",
        )


RULE = Rule(
    code="SF117",
    name="store-divergence",
    severity=Severity.WARNING,
    fix="none",
    requires=frozenset({Capability.STORED_TWICE}),
    summary="A record stored twice whose copies disagree",
    check=check,
)
