"""SF108 dangling-reference: a label, branch summary or leaf row naming no record."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import Kind, RefKind
from sessionfix.rules.analysis import describe
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index, references in sorted(view.references.items()):
        for reference in references:
            if reference.kind is not RefKind.BACKWARD or view.resolve(reference.target) is not None:
                continue
            what = describe(ctx, index)
            fix = None
            if view.kinds[index] == Kind.LABEL:
                fix = safe(
                    "drop the label row (labels never reach the model)",
                    ctx.drop(index),
                )
            yield ctx.entry_diagnostic(
                RULE,
                index,
                f"{what} `{reference.field}` {reference.target!r} names no entry",
                fix=fix,
            )


RULE = Rule(
    code="SF108",
    name="dangling-reference",
    severity=Severity.WARNING,
    fix="safe for labels, else none",
    requires=frozenset({Capability.TREE}),
    summary="A label, branch summary or leaf row naming no record",
    check=check,
)
