"""Analyses several rules share, computed once per file on the format-neutral view."""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from itertools import chain
from typing import Final

from msgspec import Struct

from sessionfix import jsonutil
from sessionfix.diagnostics import Fix
from sessionfix.formats import header_start
from sessionfix.location import line, said
from sessionfix.model.view import MISSING, NO_ID_KEY, Flag, Kind, Role, SessionView
from sessionfix.read.reader import BOM, LineIssue
from sessionfix.rules.base import RuleContext, unsafe
from sessionfix.rules.sf201_overflow_clone_message import survivor_of


def records_on_row(ctx: RuleContext, row: int) -> range:
    """View indexes of the records a physical line holds (several on a glued line)."""
    rows = ctx.view.rows
    return range(bisect_left(rows, row), bisect_right(rows, row))


def stripped_bounds(ctx: RuleContext) -> dict[int, tuple[int, int]]:
    """Damaged line → the bytes of it left once its byte-order mark (SF005) and NUL runs
    (SF004) are gone, as offsets within the line: the part other rules' byte edits
    describe, so that edits of different rules never cover the same byte."""
    bounds: dict[int, tuple[int, int]] = {}
    for finding in ctx.lines.findings:
        start, end = bounds.get(finding.row, (0, finding.length))
        if finding.issue is LineIssue.BOM:
            start = max(start, len(BOM))
        elif finding.issue is LineIssue.NUL and finding.span is not None:
            start, end = max(start, finding.span[0]), min(end, finding.span[1])
        bounds[finding.row] = (start, end)
    return bounds


def outside(span: tuple[int, int], bounds: tuple[int, int]) -> list[tuple[int, int]]:
    """The non-empty byte ranges of `bounds` before and after `span`."""
    ranges = ((bounds[0], span[0]), (span[1], bounds[1]))
    return [(start, end) for start, end in ranges if start < end]


def describe(ctx: RuleContext, index: int) -> str:
    """A short, format-neutral name for a record, e.g. `assistant message`, `compaction`."""
    view = ctx.view
    if view.type_name is not None:
        name = view.type_name(index)
        if name is not None:
            return name
    kind = view.kind(index)
    if kind is Kind.MESSAGE:
        role = view.role(index)
        names = {
            Role.USER: "user message",
            Role.ASSISTANT: "assistant message",
            Role.TOOL_RESULT: "tool result",
            Role.BASH: "bash execution",
            Role.CUSTOM: "custom message",
        }
        return names.get(role, "message")
    if kind is Kind.OTHER:
        return "record"
    return kind.name.lower().replace("_", " ")


# ---- cloned compactions (SF202) ------------------------------------------------------

CLONE_MOMENT_MS: Final = 30_000
"""How far apart a compaction and its copy may be written and still count as written at
one moment. Overflow recovery appends its copies within milliseconds; a compaction run
again at once repeats within seconds (50 to 134 ms in #3645, 1.6 s in #7594; #71691's
loop wrote 9 in 21 s). The same summary written again by a later scheduled turn (an
OpenClaw heartbeat, every 30 minutes by default) comes minutes apart."""

_BETWEEN_COPIES: Final = frozenset(
    int(kind) for kind in (Kind.LABEL, Kind.SESSION_INFO, Kind.SETTING, Kind.CUSTOM)
)
"""What may lie between a compaction and its copy: metadata that never reaches the model
(labels, session names, model and thinking-level changes, extension data)."""


class CompactionClone(Struct, frozen=True):
    clone: int
    survivor: int


def compaction_clones(ctx: RuleContext) -> dict[int, CompactionClone]:
    """Compactions on the path that copy the compaction just before them (rules.md §4.2):
    the same kept entry and a summary payload that repeats it byte for byte, with nothing
    but metadata between the two, written at one moment (`CLONE_MOMENT_MS`). A run of
    copies collapses into its first. Dropping a copy leaves the model's context as it
    was (the same summary, the same kept range), and leaves no pair that the same test
    would call a copy: the fix converges."""
    view = ctx.view
    found: dict[int, CompactionClone] = {}
    moved: dict[str, str] = {}  # a copy's id → its survivor's, for later kept entries
    previous: int | None = None
    previous_key: tuple[str | None, bytes] | None = None
    previous_ms: int | float | None = None
    for index in view.in_path_order(view.records_of_kind(Kind.COMPACTION)):
        facts = view.boundary(index)
        key = None
        written_ms = None
        if facts is not None and facts.identity is not None:
            kept = facts.first_kept
            # An explicit null and an absent field keep the same (nothing), but a replayed
            # copy repeats the record as it was: they are not copies of each other.
            if kept is not None and kept != MISSING:
                kept = moved.get(kept) or survivor_of(ctx, kept)
            key = (kept, facts.identity)
            written_ms = facts.written_ms
        if (
            previous is not None
            and key is not None
            and key == previous_key
            and written_ms is not None
            and previous_ms is not None
            and abs(written_ms - previous_ms) <= CLONE_MOMENT_MS
            and _only_metadata_between(view, previous, index)
            and _same_payload(ctx, previous, index)
        ):
            run = found.get(previous)
            survivor = previous if run is None else run.survivor
            found[index] = CompactionClone(index, survivor)
            clone_id, survivor_id = view.entry_id(index), view.entry_id(survivor)
            if clone_id is not None and survivor_id is not None:
                moved[clone_id] = survivor_id
        previous, previous_key, previous_ms = index, key, written_ms
    return found


def _only_metadata_between(view: SessionView, first: int, second: int) -> bool:
    """Nothing but `_BETWEEN_COPIES` entries lies between two records on the path."""
    kinds, path, positions = view.kinds, view.active_path, view.path_positions
    return all(
        kinds[path[position]] in _BETWEEN_COPIES
        for position in range(positions[first] + 1, positions[second])
    )


def _same_payload(ctx: RuleContext, first: int, second: int) -> bool:
    """Confirm a digest match on the bytes themselves before calling anything a copy."""
    copied_bytes = ctx.view.copied_bytes
    if copied_bytes is None:
        return False
    payload = copied_bytes(first)
    return payload is not None and payload == copied_bytes(second)


# ---- damaged header ----------------------------------------------------------------


def damaged_header_row(ctx: RuleContext) -> int | None:
    """The row of a session header line that was torn or damaged, if the file has one."""
    view = ctx.view
    opening = header_start(ctx.format)
    if view.header is not None or opening is None:
        return None
    first_record_row = view.rows[0] if len(view) else None
    for finding in ctx.lines.findings:
        if first_record_row is not None and finding.row > first_record_row:
            return None
        if finding.issue in (LineIssue.UNPARSABLE, LineIssue.TORN) and finding.span:
            start, end = finding.span
            head = ctx.source.read(finding.offset + start, min(end - start, 64))
            if head.lstrip().startswith(opening):
                return finding.row
            return None
    return None


# ---- re-linking --------------------------------------------------------------------


class TreeOrder(Struct):
    """Depth-first entry and exit times of the parent forest: O(1) descendant tests.

    Entries on a parent cycle (or hanging below one) are reached from no root and
    keep -1.
    """

    enter: array[int]
    leave: array[int]

    def is_descendant(self, node: int, ancestor: int) -> bool | None:
        """Whether `node` lies below `ancestor`; None when either sits on a cycle."""
        start = self.enter[ancestor]
        if start < 0:
            return None
        at = self.enter[node]
        if at < 0:
            return False
        return start <= at < self.leave[ancestor]


def tree_order(ctx: RuleContext) -> TreeOrder:
    return order_of(ctx.view)


def order_of(view: SessionView) -> TreeOrder:
    """The entry and exit times of `view`'s parent forest (see `TreeOrder`)."""
    count = len(view)
    parents = view.parents
    child_count = array("q", bytes(8 * (count + 1)))
    for parent in parents:
        if parent >= 0:
            child_count[parent + 1] += 1
    for index in range(count):
        child_count[index + 1] += child_count[index]
    starts = array("q", child_count)
    children = array("q", bytes(8 * max(1, child_count[count])))
    fill = array("q", child_count)
    for index, parent in enumerate(parents):
        if parent >= 0:
            children[fill[parent]] = index
            fill[parent] += 1
    enter = array("q", [-1]) * count
    leave = array("q", [-1]) * count
    clock = 0
    for root in range(count):
        if parents[root] >= 0:
            continue
        stack = [root]
        while stack:
            node = stack.pop()
            if node >= 0:
                enter[node] = clock
                clock += 1
                stack.append(~node)
                stack.extend(children[starts[node] : starts[node + 1]])
            else:
                leave[~node] = clock
    return TreeOrder(enter, leave)


_NOT_ADOPTERS: Final = frozenset({Kind.HEADER, Kind.CONTROL, Kind.METADATA})
"""Records a broken link is never re-linked to: headers, and rows children link through."""


def recovered_ids(ctx: RuleContext) -> dict[str, int]:
    """Ids of the complete records that SF008's fix recovers from after a damaged
    prefix (with --unsafe-fixes), and their lines: links to them are not broken."""
    found: dict[str, int] = {}
    if not ctx.settings.unsafe_fixes:
        return found
    for finding in ctx.lines.findings:
        if finding.issue is not LineIssue.UNPARSABLE or finding.recoverable is None:
            continue
        start, end = finding.recoverable
        try:
            value = jsonutil.loads(ctx.source.read(finding.offset + start, end - start))
        except ValueError:
            continue
        identity = ctx.editor.identity(value)
        if identity is not None:
            found.setdefault(identity, finding.row)
    return found


def relink_target(
    ctx: RuleContext, index: int, exclude: frozenset[int] = frozenset()
) -> tuple[int, str] | None:
    """The nearest earlier entry in file order that can adopt `index` without a cycle.

    This is how OpenClaw's tolerant reader and the known repair scripts re-link a
    broken parent link (rules.md SF103). The candidate's id must resolve to itself
    (not to a later duplicate). Returns the entry and its id.
    """
    view = ctx.view
    order = ctx.shared(tree_order)
    relinked = ctx.shared(relinks)
    careful = bool(relinked) or bool(view.duplicate_ids)
    own_id = view.entry_id(index)
    keys = view.id_keys
    side = view.flags[index] & Flag.SIDECHAIN
    adopter = view.adopters.get(index)
    named = view.resolve(adopter) if adopter is not None else None
    candidates: Iterable[int] = range(index - 1, -1, -1)
    if view.adopters_only:
        candidates = [] if named is None else [named]
    elif named is not None:
        # The record the format says this one answers (Claude's own write rule).
        candidates = chain([named], candidates)
    for candidate in candidates:
        if keys[candidate] == NO_ID_KEY:
            continue
        candidate_id = view.entry_id(candidate)
        if candidate_id is None or candidate in exclude or not view.is_entry(candidate):
            continue
        if view.kinds[candidate] in _NOT_ADOPTERS or view.resolve(candidate_id) != candidate:
            continue
        if view.flags[candidate] & Flag.SIDECHAIN != side:
            continue
        below = order.is_descendant(candidate, index)
        if below is None:
            below = index in view.ancestors(candidate)
        if below or (careful and _below_once_relinked(view, candidate, index, own_id, relinked)):
            continue
        relinked[index] = candidate
        return candidate, candidate_id
    return None


def relinks(ctx: RuleContext) -> dict[int, int]:
    """The re-links the rules of a file have proposed so far (entry → new parent), so
    that no two of them together close a cycle."""
    return {}


def _below_once_relinked(
    view: SessionView, candidate: int, index: int, own_id: str | None, relinked: dict[int, int]
) -> bool:
    """Whether `candidate` would hang below `index` once the proposed re-links apply, or
    below an entry holding its id (a duplicate that other fixes may drop or keep)."""
    seen: set[int] = set()
    current = candidate
    while current >= 0 and current not in seen:
        if current == index or (own_id is not None and view.entry_id(current) == own_id):
            return True
        seen.add(current)
        current = relinked.get(current, view.parents[current])
    return False


def relink_fix(
    ctx: RuleContext, index: int, what: str, exclude: frozenset[int] = frozenset()
) -> Fix | None:
    """The unsafe fix that re-links `index` below `relink_target`, or None if none exists."""
    target = relink_target(ctx, index, exclude)
    if target is None:
        return None
    target_index, target_id = target
    return unsafe(
        said(f"{what} {target_id} (", line(ctx.view.rows[target_index]), ")"),
        ctx.rewrite_record(index, ctx.editor.set_parent(target_id)),
    )
