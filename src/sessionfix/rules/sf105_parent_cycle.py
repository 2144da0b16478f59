"""SF105 parent-cycle: parent links that loop back on themselves."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import compress
from operator import ge

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import Said, lines, said
from sessionfix.rules.analysis import relink_fix
from sessionfix.rules.base import Invariant, Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if view.linear or not view.has_forward_links():
        return
    parents = view.parents
    state = bytearray(len(view))
    # Every cycle holds a link to a later record (or to itself): walks start there only.
    starts = compress(range(len(parents)), map(ge, parents, range(len(parents))))
    for start in starts:
        if state[start] or not view.is_entry(start):
            continue
        walk: list[int] = []
        current = start
        while current >= 0 and state[current] == 0:
            state[current] = 1
            walk.append(current)
            current = parents[current]
        if current >= 0 and state[current] == 1:
            cycle = walk[walk.index(current) :]
            yield _report(ctx, cycle)
        for member in walk:
            state[member] = 2


def _report(ctx: RuleContext, cycle: list[int]) -> Diagnostic:
    view = ctx.view
    # A cycle needs a link to a later record: re-linking the first member that has one
    # keeps the others in file order below it, so none of them falls off the path.
    forward = [i for i in sorted(cycle) if view.parents[i] > i]
    breaker = forward[0] if forward else max(cycle)
    if len(cycle) == 1:
        message: str | Said = (
            "entry names itself as its parent; loaders without cycle detection hang"
        )
    else:
        message = said(
            f"parent links form a cycle through {len(cycle)} entries (",
            lines((view.rows[i] for i in sorted(cycle)[:8]), more=len(cycle) > 8),
            "); loaders without cycle detection hang",
        )
    fix = relink_fix(ctx, breaker, "break the cycle: re-link this entry to", frozenset(cycle))
    if fix is None and view.adopters_only:
        return ctx.entry_diagnostic(RULE, breaker, message)
    if fix is None:
        # Nothing outside the cycle can adopt it: its first entry in file order becomes
        # the root instead, so that every member stays on the path.
        first = min(cycle)
        return ctx.entry_diagnostic(
            RULE,
            first,
            message,
            fix=unsafe(
                f"break the cycle: make this entry the root ({ctx.editor.parent_link} null)",
                ctx.rewrite_record(first, ctx.editor.set_parent(None)),
            ),
        )
    return ctx.entry_diagnostic(RULE, breaker, message, fix=fix)


RULE = Rule(
    code="SF105",
    name="parent-cycle",
    severity=Severity.ERROR,
    fix="unsafe (none where branches are kept side by side: open-webui)",
    requires=frozenset({Capability.TREE}),
    summary="Parent links that form a cycle",
    check=check,
    invariant=Invariant.NO_MORE,
)
