"""SF501 broken-first-kept-reference: a compaction keeps history from the wrong place."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
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
    if ctx.provides(Capability.SUMMARY_REQUESTS):
        yield from _check_requests(ctx)
        return
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


WHOLE_HISTORY = "the agent then takes it for no compaction and sends the whole history"


def _check_requests(ctx: RuleContext) -> Iterator[Diagnostic]:
    """A compaction that is a request and a summary answering it by id (opencode): the
    summary must name a request before it, and the request's kept tail a record before
    the request; else the agent ignores the compaction and sends everything."""
    view = ctx.view
    requests = sorted(view.boundaries)
    named = {request for request in view.summary_requests.values() if isinstance(request, str)}
    previous = -1
    for summary in sorted(view.summary_requests):
        yield from _check_summary(ctx, summary, requests, named, previous)
        previous = summary
    for request in requests:
        yield from _check_tail(ctx, request)


def _stop_sending(ctx: RuleContext, cut: int) -> str:
    """How many records sent to the model before `cut` a sound compaction stops sending."""
    view = ctx.view
    count = sum(1 for index in range(cut) if view.flags[index] & Flag.CONTEXT)
    return f": {count} record{'s' if count != 1 else ''} before it stop being sent" if count else ""


def _check_summary(
    ctx: RuleContext, summary: int, requests: list[int], named: set[str], previous: int
) -> Iterator[Diagnostic]:
    view = ctx.view
    request = view.summary_requests[summary]
    target = view.resolve(request) if isinstance(request, str) and request != MISSING else None
    if target is not None and target in view.boundaries:
        return  # before the summary, or sorted after it (the message order's finding)
    if target is not None:
        yield ctx.entry_diagnostic(
            RULE,
            summary,
            said(
                f"summary answers {request!r} (",
                line(view.rows[target]),
                f"), which is no compaction request before it; {WHOLE_HISTORY}",
            ),
        )
        return
    shown = "no compaction request" if request == MISSING else f"{request!r}, which names no record"
    candidates = requests[bisect_right(requests, previous) : bisect_left(requests, summary)]
    fix = None
    if len(candidates) == 1 and view.entry_id(candidates[0]) not in named:
        found = candidates[0]
        found_id = view.entry_id(found)
        fix = safe(
            said(
                f"name the one compaction request before it, {found_id} (",
                line(view.rows[found]),
                ")" + _stop_sending(ctx, found),
            ),
            ctx.rewrite_record(summary, ctx.editor.set_parent(found_id)),
        )
    yield ctx.entry_diagnostic(RULE, summary, f"summary answers {shown}; {WHOLE_HISTORY}", fix=fix)


def _check_tail(ctx: RuleContext, request: int) -> Iterator[Diagnostic]:
    view = ctx.view
    facts = view.boundaries[request]
    kept = facts.first_kept
    if not isinstance(kept, str) or kept == MISSING:
        return
    holder = facts.held_by if facts.held_by is not None else request
    target = view.resolve(kept)
    if target is not None:
        if target >= request:
            yield ctx.entry_diagnostic(
                RULE,
                holder,
                said(
                    f"compaction keeps history from {kept!r} (",
                    line(view.rows[target]),
                    f"), which is not before its request; {WHOLE_HISTORY}",
                ),
            )
        return
    what = f"compaction keeps history from {kept!r}, which names no record; {WHOLE_HISTORY}"
    after = view.made_after(kept) if view.made_after is not None else None
    if after is None:
        yield ctx.entry_diagnostic(RULE, holder, what)
        return
    if after < request:
        new_id = view.entry_id(after)
        fix = safe(
            said(
                f"keep history from {new_id}, the first record made after the one named (",
                line(view.rows[after]),
                ")" + _stop_sending(ctx, after),
            ),
            ctx.rewrite_record(holder, ctx.editor.set_first_kept(new_id, None)),
        )
    else:
        fix = safe(
            "keep no history before the compaction (no record was made after the one named)"
            + _stop_sending(ctx, request),
            ctx.rewrite_record(holder, ctx.editor.set_first_kept(None, None)),
        )
    yield ctx.entry_diagnostic(RULE, holder, what, fix=fix)


RULE = Rule(
    code="SF501",
    name="broken-first-kept-reference",
    severity=Severity.WARNING,
    fix="safe for tool-result targets and for requests a summary or tail can be re-linked "
    "to (opencode), else none",
    requires=frozenset({Capability.BOUNDARIES}),
    summary="A compaction keeps history from a missing or invalid entry",
    check=check,
    invariant=Invariant.NOT_ON_REWRITTEN,
)
