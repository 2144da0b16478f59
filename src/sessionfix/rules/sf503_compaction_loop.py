"""SF503 compaction-loop: compactions in a row with no user message between them."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix import jsonutil
from sessionfix.analysis import compaction_clones
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext
from sessionfix.view import Kind, Role


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    clones = ctx.shared(compaction_clones) if view.tree else {}
    previous: int | None = None
    for index in view.active_path:
        kind = view.kinds[index]
        if kind == Kind.MESSAGE and view.roles[index] == Role.USER:
            previous = None
            continue
        if kind != Kind.COMPACTION:
            continue
        if previous is not None and index not in clones:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                f"compaction follows the compaction on line {view.rows[previous]} with no user "
                f"message between them (tokensBefore {_tokens(ctx, previous)} → "
                f"{_tokens(ctx, index)}): a compaction loop",
            )
        previous = index


def _tokens(ctx: RuleContext, index: int) -> str:
    facts = ctx.view.boundary(index)
    value = facts.tokens_before if facts is not None else None
    return "?" if value is None else jsonutil.stringify(value)


RULE = Rule(
    code="SF503",
    name="compaction-loop",
    severity=Severity.WARNING,
    fix="none",
    formats=PI_FORMATS,
    summary="Compactions in a row with no user message between them",
    check=check,
)
