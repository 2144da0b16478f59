"""SF602 invalid-tool-name: a tool call whose name the provider refuses."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index, names in sorted(view.invalid_calls.items()):
        if not view.on_path(index):
            continue
        listed = ", ".join(repr(name) for name in names)
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"tool call name {listed} is not one the provider accepts; every request that "
            "resends this turn fails",
        )


RULE = Rule(
    code="SF602",
    name="invalid-tool-name",
    severity=Severity.ERROR,
    fix="none",
    requires=frozenset({Capability.TOOL_NAMES}),
    summary="A tool call whose name the provider refuses",
    check=check,
)
