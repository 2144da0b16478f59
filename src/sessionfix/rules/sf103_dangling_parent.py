"""SF103 dangling-parent: a parent link naming no record."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.analysis import relink_fix
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index in view.dangling():
        if not view.is_entry(index):
            continue
        parent = str(view.parent_id(index))
        where = (
            "; the active path stops here and everything before it is lost from context"
            if view.on_path(index)
            else ""
        )
        fix = relink_fix(ctx, index, "re-link to the preceding entry")
        yield ctx.entry_diagnostic(
            RULE, index, f"parentId {parent!r} names no entry{where}", fix=fix
        )


RULE = Rule(
    code="SF103",
    name="dangling-parent",
    severity=Severity.WARNING,
    fix="unsafe",
    requires=frozenset({Capability.TREE}),
    summary="A parent link naming no record",
    check=check,
)
