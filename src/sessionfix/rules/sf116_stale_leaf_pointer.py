"""SF116 stale-leaf-pointer: a stored pointer to the session's leaf that its agent moves
elsewhere whenever it reads the session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import KeptLinkEdits
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import MISSING
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    links = view.kept_links
    if links is None or view.leaf is None or view.cycle_on_path:
        return  # in a loop of parent links the leaf is where the loop is broken (SF105)
    leaf = view.entry_id(view.leaf)
    stored = links.stored_leaf
    if leaf is None:
        return
    named = view.resolve(stored) if isinstance(stored, str) else None
    field = f"`{links.leaf_field}`"
    severity = Severity.WARNING
    if stored == leaf:
        copy = links.leaf_copy
        if copy is MISSING or copy == leaf:
            return
        message = (
            f"`{links.leaf_copy_field}` {copy!r} is not {field} {leaf!r}, which the agent "
            "reads the session from"
        )
        severity = Severity.INFO
    elif named is None:
        what = "is missing" if stored is MISSING else f"{stored!r} names no entry"
        message = (
            f"{field} {what}: the agent picks the newest leaf, {leaf!r}, on every read "
            "(older versions load such a session forever)"
        )
    elif view.on_path(named):
        message = (
            f"{field} {stored!r} is not a leaf: the agent continues from its last "
            f"descendant, {leaf!r}, on every read"
        )
        severity = Severity.INFO
    else:
        message = (
            f"{field} {stored!r} names a message the agent does not continue from (one "
            f"without a role): it picks the newest leaf, {leaf!r}, on every read"
        )
    stored_as = f"{field} and `{links.leaf_copy_field}`" if links.leaf_copy_field else field
    editor = cast(KeptLinkEdits, ctx.editor)
    yield ctx.entry_diagnostic(
        RULE,
        links.leaf_record,
        message,
        severity=severity,
        fix=safe(
            f"store {stored_as} {leaf!r}, the leaf the agent reads the session from",
            ctx.rewrite_record(links.leaf_record, editor.set_leaf_pointer(leaf)),
        ),
    )


RULE = Rule(
    code="SF116",
    name="stale-leaf-pointer",
    severity=Severity.WARNING,
    fix="safe",
    requires=frozenset({Capability.KEPT_LINKS}),
    summary="A stored leaf pointer its agent moves elsewhere on every read",
    check=check,
)
