"""SF103 dangling-parent: a parent link naming no record."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.analysis import relink_fix
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext
from sessionfix.view import DANGLING


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index in view.entries():
        if view.parents[index] != DANGLING:
            continue
        parent = str(view.parent_ids[index]).lstrip("\x00")
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
    formats=PI_FORMATS,
    summary="A parent link naming no record",
    check=check,
    tree_only=True,
)
