"""SF503 compaction-loop: compactions in a row with no user message between them."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.model.view import Kind, Role
from sessionfix.rules.analysis import compaction_clones
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    clones = ctx.shared(compaction_clones) if view.tree else {}
    compactions = view.in_path_order(view.records_of_kind(Kind.COMPACTION))
    for previous, index in pairwise(compactions):
        # A copy of the compaction before it (or of its survivor) is SF202's, not a loop.
        if index in clones or _user_between(ctx, previous, index):
            continue
        yield ctx.entry_diagnostic(
            RULE,
            index,
            said(
                "compaction follows the compaction ",
                on_line(view.rows[previous]),
                f" with no user message between them (tokensBefore {_tokens(ctx, previous)} → "
                f"{_tokens(ctx, index)}): a compaction loop",
            ),
        )


def _user_between(ctx: RuleContext, first: int, second: int) -> bool:
    view = ctx.view
    if view.linear:
        return view.roles.find(bytes([Role.USER]), first + 1, second) >= 0
    roles = view.roles
    return any(roles[i] == Role.USER for i in view.path_between(first, second))


def _tokens(ctx: RuleContext, index: int) -> str:
    facts = ctx.view.boundary(index)
    value = facts.tokens_before if facts is not None else None
    return "?" if value is None else jsonutil.stringify(value)


RULE = Rule(
    code="SF503",
    name="compaction-loop",
    severity=Severity.WARNING,
    fix="none",
    requires=frozenset({Capability.BOUNDARIES}),
    summary="Compactions in a row with no user message between them",
    check=check,
)
