"""SF605 empty-text-block: a text block that is empty or whitespace only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from sessionfix.diagnostics import Diagnostic, Edit, Severity
from sessionfix.formats import ContentBlocks
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import Role
from sessionfix.rules.analysis import describe
from sessionfix.rules.base import Rule, RuleContext, safe, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    editor = cast(ContentBlocks, ctx.editor)
    for index, blank in sorted(view.blank_texts.items()):
        count = len(blank.at)
        what = "a text block that is" if count == 1 else f"{count} text blocks that are"
        blocks = "it" if count == 1 else "them"
        if all(blank.empty):
            kind, refusal = "empty", "text content blocks must be non-empty"
        elif not any(blank.empty):
            kind, refusal = (
                "whitespace only",
                "text content blocks must contain non-whitespace text",
            )
        else:
            kind, refusal = "empty or whitespace only", "text content blocks must be non-empty"
        if view.on_path(index) and view.in_context(index):
            why = f"the provider refuses every request that holds {blocks} ({refusal})"
            severity = None
        else:
            verb = "is" if count == 1 else "are"
            why = f"{blocks} {verb} not sent now (not in the context the agent resumes)"
            severity = Severity.INFO
        edit: Edit
        if blank.kept:
            edit = ctx.rewrite_record(index, editor.drop_blank_texts())
            how = f"remove {blocks}"
        else:
            edit = ctx.drop(index)
            how = (
                f"remove {blocks}; the record holds nothing else, so it goes and its "
                "children move to its parent"
            )
        signed = (
            view.roles[index] == Role.ASSISTANT and view.signed is not None and view.signed(index)
        )
        fix = (
            unsafe(f"{how} (the message carries signed thinking, never edited by a safe fix)", edit)
            if signed
            else safe(how, edit)
        )
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"{describe(ctx, index)} holds {what} {kind}; {why}",
            severity=severity,
            fix=fix,
        )


RULE = Rule(
    code="SF605",
    name="empty-text-block",
    severity=Severity.ERROR,
    fix="safe (unsafe in a message that carries thinking)",
    requires=frozenset({Capability.BLANK_TEXT}),
    summary="A text block that is empty or whitespace only",
    check=check,
)
