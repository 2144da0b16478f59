"""SF501 broken-first-kept-reference: a compaction keeps history from the wrong place."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import line, said
from sessionfix.model.view import MISSING, Flag, Kind, Role
from sessionfix.rules.analysis import describe
from sessionfix.rules.base import Invariant, Rule, RuleContext, safe

NOTHING_KEPT = "so nothing before it is kept in context"


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index in sorted(view.boundaries):
        if view.tree:
            yield from _check_by_id(ctx, index)
        else:
            yield from _check_by_position(ctx, index)


def _check_by_id(ctx: RuleContext, index: int) -> Iterator[Diagnostic]:
    view = ctx.view
    facts = view.boundary(index)
    if facts is None:
        return
    kept = facts.first_kept
    what = describe(ctx, index)
    if kept == view.entry_id(index):
        return
    if kept == MISSING:
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"{what} has no firstKeptEntryId, {NOTHING_KEPT}",
            severity=Severity.INFO,
        )
        return
    target = view.resolve(kept) if isinstance(kept, str) and not kept.startswith("\x00") else None
    shown = str(kept).lstrip("\x00")
    if kept is None:
        yield ctx.entry_diagnostic(RULE, index, f"{what} has firstKeptEntryId null, {NOTHING_KEPT}")
        return
    if target is None:
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"{what} keeps history from {shown!r}, which names no entry, {NOTHING_KEPT}",
        )
        return
    chain = _chain_between(ctx, target, index)
    if chain is None:
        yield ctx.entry_diagnostic(
            RULE,
            index,
            said(
                f"{what} keeps history from {shown!r} (",
                line(view.rows[target]),
                f"), which is not before it on its branch, {NOTHING_KEPT}",
            ),
        )
        return
    if view.roles[target] == Role.TOOL_RESULT and view.kinds[target] == Kind.MESSAGE:
        cut = next((i for i in chain if view.flags[i] & Flag.CUT_POINT), index)
        new_id = view.entry_id(cut)
        yield ctx.entry_diagnostic(
            RULE,
            index,
            said(
                f"{what} keeps history from a tool result ({shown!r}, ",
                line(view.rows[target]),
                "); the kept range starts with a result whose call was summarised away",
            ),
            fix=safe(
                said(f"move the cut forward to {new_id} (", line(view.rows[cut]), ")"),
                ctx.move_cut(index, new_id, None),
            ),
        )


def _chain_between(ctx: RuleContext, target: int, boundary: int) -> list[int] | None:
    """Entries after `target` up to `boundary` along its ancestors, or None if not an ancestor."""
    view = ctx.view
    target_position = view.path_positions[target]
    boundary_position = view.path_positions[boundary]
    if boundary_position >= 0:
        if not 0 <= target_position < boundary_position:
            return None
        return list(view.active_path[target_position + 1 : boundary_position])
    chain: list[int] = []
    for ancestor in view.ancestors(boundary):
        if ancestor == target:
            chain.reverse()
            return chain
        chain.append(ancestor)
    return None


def _check_by_position(ctx: RuleContext, index: int) -> Iterator[Diagnostic]:
    view = ctx.view
    facts = view.boundary(index)
    if facts is None:
        return
    what = describe(ctx, index)
    position = facts.first_kept_index
    if position is None:
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"{what} has no firstKeptEntryIndex, {NOTHING_KEPT}",
            severity=Severity.INFO,
        )
        return
    if position == index:
        return
    if position <= 0 or position >= len(view) or position > index or not view.is_entry(position):
        reason = (
            "the header"
            if position == 0
            else ("after the compaction" if index < position < len(view) else "out of range")
        )
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"{what} keeps history from position {position}, which is {reason}, {NOTHING_KEPT}",
        )
        return
    if view.roles[position] == Role.TOOL_RESULT and view.kinds[position] == Kind.MESSAGE:
        cut = next((i for i in range(position + 1, index) if view.flags[i] & Flag.CUT_POINT), index)
        yield ctx.entry_diagnostic(
            RULE,
            index,
            said(
                f"{what} keeps history from a tool result (position {position}, ",
                line(view.rows[position]),
                "); the kept range starts with a result whose call was summarised away",
            ),
            fix=safe(
                said(f"move the cut forward to position {cut} (", line(view.rows[cut]), ")"),
                ctx.move_cut(index, None, cut),
            ),
        )


RULE = Rule(
    code="SF501",
    name="broken-first-kept-reference",
    severity=Severity.WARNING,
    fix="safe for tool-result targets, else none",
    requires=frozenset({Capability.BOUNDARIES}),
    summary="A compaction keeps history from a missing or invalid entry",
    check=check,
    invariant=Invariant.NOT_ON_REWRITTEN,
)
