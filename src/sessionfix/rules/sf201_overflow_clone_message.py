"""SF201 overflow-clone-message: a user message re-appended by overflow recovery."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.rules.analysis import user_clones
from sessionfix.rules.base import Rule, RuleContext, safe, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index, clone in sorted(ctx.shared(user_clones).items()):
        survivor = clone.survivor
        survivor_id = view.entry_id(survivor)
        where = said(f"entry {survivor_id} ", on_line(view.rows[survivor]))
        edit = ctx.drop(index, survivor)
        remap = f"drop the clone; references to it move to {survivor_id}"
        if clone.answered_between:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                "user message is identical to "
                + where
                + " (same content and message.timestamp) but comes after an assistant answered it",
                fix=unsafe(remap + " (the answered prompt disappears from the dialogue)", edit),
            )
        else:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                "user message is identical to "
                + where
                + " (same content and message.timestamp): a clone appended by context-overflow "
                "recovery",
                fix=safe(remap, edit),
            )


RULE = Rule(
    code="SF201",
    name="overflow-clone-message",
    severity=Severity.WARNING,
    fix="safe / unsafe",
    requires=frozenset({Capability.ENTRIES, Capability.TREE, Capability.RETRY_COPIES}),
    summary="A user message re-appended by context-overflow recovery",
    check=check,
)
