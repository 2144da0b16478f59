"""SF104 duplicate-entry-id: two records share one id."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for first, later in view.duplicate_ids:
        entry_id = view.entry_id(later)
        try:
            identical = jsonutil.canonical(ctx.load_record(first)) == jsonutil.canonical(
                ctx.load_record(later)
            )
        except ValueError:
            identical = False
        if identical:
            yield ctx.entry_diagnostic(
                RULE,
                later,
                f"id {entry_id!r} repeats the identical record on line {view.rows[first]}",
                fix=safe("drop the repeated copy", ctx.drop(later, first)),
            )
        else:
            yield ctx.entry_diagnostic(
                RULE,
                later,
                f"id {entry_id!r} is also used by a different record on line "
                f"{view.rows[first]}; pi resolves it to this later line, OpenClaw's "
                "TranscriptFileState to the first",
            )


RULE = Rule(
    code="SF104",
    name="duplicate-entry-id",
    severity=Severity.ERROR,
    fix="safe (identical records), else none",
    formats=PI_FORMATS,
    summary="Two records share one id",
    check=check,
    tree_only=True,
)
