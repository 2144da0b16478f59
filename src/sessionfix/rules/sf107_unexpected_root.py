"""SF107 unexpected-root: a `parentId: null` entry that cuts the active path."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import NULL_KEY
from sessionfix.rules.analysis import relink_fix
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if not len(view.active_path):
        return
    root = view.active_path[0]
    first_entry = next(iter(view.entries()), None)
    if root == first_entry or view.parent_keys[root] != NULL_KEY:
        return
    fix = relink_fix(ctx, root, "re-link to the previous entry")
    yield ctx.entry_diagnostic(
        RULE,
        root,
        "entry on the active path has parentId null; the path starts here and the history "
        "written before it is cut from context",
        fix=fix,
    )


RULE = Rule(
    code="SF107",
    name="unexpected-root",
    severity=Severity.WARNING,
    fix="unsafe",
    requires=frozenset({Capability.TREE, Capability.ENTRY_LINKS}),
    summary="A parentId-null entry in the middle of the active path",
    check=check,
)
