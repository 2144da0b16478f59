"""SF102 duplicate-header: a second session header inside the file."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.model.view import Kind
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if view.header is None:
        return
    first_id = view.header.id
    for index in view.records_of_kind(Kind.HEADER, 1):
        try:
            other_id = ctx.load_record(index).get("id")
        except (ValueError, AttributeError):
            other_id = None
        if other_id == first_id:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                said(
                    "second session header with the same id (first ",
                    on_line(view.header.row),
                    "); readers ignore it",
                ),
                fix=safe("drop the repeated header", ctx.drop(index)),
            )
        else:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                f"second session header with another id ({other_id!r}, first is {first_id!r}): "
                "two sessions concatenated",
            )


RULE = Rule(
    code="SF102",
    name="duplicate-header",
    severity=Severity.WARNING,
    fix="safe (same id), else none",
    requires=frozenset({Capability.HEADER, Capability.ENTRIES}),
    summary="A second session header inside the file",
    check=check,
)
