"""SF502 broken-preserved-segment: a compaction's kept records that do not link up."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Fix, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import line, said
from sessionfix.model.view import DANGLING, MISSING, BoundaryFacts, Flag, Kind, SessionView
from sessionfix.rules.base import Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    replayed = {later for _, later in view.duplicate_ids}
    sliced = _starts_mid_session(view)
    for index, facts in sorted(view.boundaries.items()):
        if view.kinds[index] != Kind.COMPACTION:
            continue
        problems = list(_problems(view, index, facts, replayed, sliced))
        if problems:
            yield ctx.entry_diagnostic(
                RULE, index, "; ".join(problems), fix=_past_the_replay(ctx, facts, replayed)
            )


def _problems(
    view: SessionView, index: int, facts: BoundaryFacts, replayed: set[int], sliced: bool
) -> Iterator[str]:
    logical = facts.logical_parent
    if view.parent_id(index) not in (None, MISSING):
        yield "the boundary has a parent: loaders expect a compaction to start a new chain"
    if isinstance(logical, str) and not sliced and view.resolve(logical) is None:
        yield f"logical parent {logical!r} names no record"
    segment = facts.preserved
    if segment is None:
        return
    resolved: dict[str, int | None] = {}
    for role, value in (("head", segment.head), ("anchor", segment.anchor), ("tail", segment.tail)):
        target = view.resolve(value) if isinstance(value, str) else None
        resolved[role] = target
        if target is None or view.kinds[target] not in (Kind.MESSAGE, Kind.COMPACTION):
            yield f"preserved segment {role} {value!r} names no conversation record"
    anchor = resolved["anchor"]
    if anchor is not None and anchor != index and not view.flags[anchor] & Flag.SUMMARY:
        yield "preserved segment anchor is neither the summary nor the boundary"
    if segment.listed is not None:
        if segment.listed_anchor != segment.anchor:
            yield "preservedMessages names another anchor than preservedSegment"
        missing = [u for u in segment.listed if not (isinstance(u, str) and view.resolve(u))]
        if missing:
            yield f"{len(missing)} preserved record(s) name no record (first {missing[0]!r})"
    else:
        head, tail = resolved["head"], resolved["tail"]
        if head is not None and tail is not None:
            walk = [tail, *view.ancestors(tail)]
            if head not in walk and anchor not in walk:
                yield (
                    "walking back from the preserved tail does not reach its head: the "
                    "loader relinks nothing and loses the kept records"
                )
    for role, target in (("logical parent", _resolved(view, logical)), ("tail", resolved["tail"])):
        if target is not None and (target in replayed or view.parents[target] in replayed):
            yield (
                f"the {role} leads into a replayed block of records (a second /compact "
                "re-appended earlier history)"
            )


def _past_the_replay(ctx: RuleContext, facts: BoundaryFacts, replayed: set[int]) -> Fix | None:
    """The #92089 repair: the first record after a replayed block that hangs below the
    block's last copy moves to the block's pre-replay cursor, when the preserved tail
    then reaches its head (rules.md §7.2)."""
    view = ctx.view
    segment = facts.preserved
    if segment is None:
        return None
    tail, head = _resolved(view, segment.tail), _resolved(view, segment.head)
    if tail is None or head is None:
        return None
    block_last = next((i for i in (tail, *view.ancestors(tail)) if i in replayed), None)
    if block_last is None:
        return None
    follower = next(
        (
            i
            for i in range(block_last + 1, len(view))
            if view.parents[i] == block_last and i not in replayed
        ),
        None,
    )
    cursor = block_last
    while cursor >= 0 and (
        cursor in replayed or view.kinds[cursor] in (Kind.METADATA, Kind.CONTROL)
    ):
        cursor -= 1
    cursor_id = view.entry_id(cursor) if cursor >= 0 else None
    if follower is None or cursor_id is None:
        return None
    walk = [tail]
    current = tail
    while current != head and len(walk) <= len(view):
        current = cursor if current == follower else view.parents[current]
        if current < 0 or current in walk:
            return None
        walk.append(current)
    return unsafe(
        said(
            "re-parent ",
            line(view.rows[follower]),
            " to ",
            line(view.rows[cursor]),
            ", where the conversation stood before the replay",
        ),
        ctx.rewrite_record(follower, ctx.editor.set_parent(cursor_id)),
    )


def _resolved(view: SessionView, value: object) -> int | None:
    return view.resolve(value) if isinstance(value, str) else None


def _starts_mid_session(view: SessionView) -> bool:
    """A slice of a longer transcript: its first tree record's parent is not in it."""
    if not view.may_start_mid_session:
        return False
    for index in range(len(view.kinds)):
        if view.kinds[index] in (Kind.MESSAGE, Kind.COMPACTION, Kind.CONTROL):
            return view.parents[index] == DANGLING
    return False


RULE = Rule(
    code="SF502",
    name="broken-preserved-segment",
    severity=Severity.WARNING,
    fix="unsafe for the replay case, else none",
    requires=frozenset({Capability.TREE, Capability.PRESERVED_SEGMENTS}),
    summary="A compaction's preserved records that do not link up",
    check=check,
)
