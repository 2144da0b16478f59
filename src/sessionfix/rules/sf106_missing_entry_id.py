"""SF106 missing-entry-id: a tree entry without an id or without a parent link."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import Flag
from sessionfix.rules.base import Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index in view.records_flagged(Flag.BAD_ID | Flag.NO_PARENT_KEY):
        flags = view.flags[index]
        no_id = bool(flags & Flag.BAD_ID)
        no_parent = bool(flags & Flag.NO_PARENT_KEY)
        if not (no_id or no_parent):
            continue
        if no_id and no_parent:
            what = "has neither an `id` nor a `parentId`"
        elif no_id:
            what = "has no non-empty string `id`"
        else:
            what = "has no `parentId` key"
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"entry {what}; nothing can link to it and readers disagree on where it belongs",
            fix=unsafe(
                "drop the entry (OpenClaw's tolerant reader rejects it); its children are "
                "re-linked",
                ctx.drop(index),
            ),
        )


RULE = Rule(
    code="SF106",
    name="missing-entry-id",
    severity=Severity.WARNING,
    fix="unsafe",
    requires=frozenset({Capability.TREE, Capability.ENTRY_LINKS}),
    summary="An entry without an id or a parent link",
    check=check,
)
