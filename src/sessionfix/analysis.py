"""Analyses several rules share, computed once per file on the format-neutral view."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from sessionfix import jsonutil
from sessionfix.diagnostics import Fix
from sessionfix.reader import LineIssue
from sessionfix.rules.base import RuleContext, unsafe
from sessionfix.view import MISSING, Flag, Kind, Role, ToolCall


def records_on_row(ctx: RuleContext, row: int) -> range:
    """View indexes of the records a physical line holds (several on a glued line)."""
    rows = ctx.view.rows
    return range(bisect_left(rows, row), bisect_right(rows, row))


def describe(ctx: RuleContext, index: int) -> str:
    """A short, format-neutral name for a record, e.g. `assistant message`, `compaction`."""
    view = ctx.view
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


# ---- tool-call groups ------------------------------------------------------------------


@dataclass(slots=True)
class ToolGroup:
    """One assistant turn's tool calls and the results that answer them (rules.md §6.1)."""

    assistant: int
    calls: tuple[ToolCall, ...]
    incomplete: bool
    segment: int
    """Index of the compaction window (between boundaries) the group lies in."""
    results: dict[int, int] = field(default_factory=dict)
    """Call position in `calls` → view index of its first result."""
    displaced: set[int] = field(default_factory=set)
    """Call positions answered by a result outside the group (SF404)."""
    ended_by: int | None = None
    """View index of the entry that closed the group; None when the path ends first."""

    def call_position(self, call_id: str) -> int | None:
        for position, call in enumerate(self.calls):
            if call.id == call_id and position not in self.results:
                return position
        for position, call in enumerate(self.calls):
            if call.id == call_id:
                return position
        return None


@dataclass(slots=True)
class GroupAnalysis:
    groups: list[ToolGroup] = field(default_factory=list)
    orphans: list[int] = field(default_factory=list)
    duplicates: list[tuple[int, int]] = field(default_factory=list)
    """(duplicate result, first result for the same call)."""
    displaced: list[tuple[int, ToolGroup, int]] = field(default_factory=list)
    """(result, the earlier group it answers, call position)."""
    group_of_result: dict[int, ToolGroup] = field(default_factory=dict)


def tool_groups(ctx: RuleContext) -> GroupAnalysis:
    """Pair tool calls and results along the active path, group by group."""
    view = ctx.view
    analysis = GroupAnalysis()
    current: ToolGroup | None = None
    segment = 0
    segment_groups: list[ToolGroup] = []
    for index in view.active_path:
        kind = view.kinds[index]
        if kind == Kind.COMPACTION or kind == Kind.RESET:
            if current is not None:
                current.ended_by = index
            current = None
            segment += 1
            segment_groups = []
            continue
        role = view.roles[index]
        if kind == Kind.MESSAGE and role == Role.TOOL_RESULT:
            _place_result(view.result(index), index, current, segment_groups, analysis)
            continue
        if not view.flags[index] & Flag.CONTEXT:
            continue
        if current is not None:
            current.ended_by = index
        current = None
        facts = view.calls(index) if role == Role.ASSISTANT else None
        if facts is not None and facts.calls:
            current = ToolGroup(index, facts.calls, facts.incomplete, segment)
            analysis.groups.append(current)
            segment_groups.append(current)
    return analysis


def _place_result(
    facts: object,
    index: int,
    current: ToolGroup | None,
    segment_groups: list[ToolGroup],
    analysis: GroupAnalysis,
) -> None:
    call_id = getattr(facts, "call_id", None)
    if current is not None and call_id is not None:
        position = current.call_position(call_id)
        if position is not None:
            first = current.results.get(position)
            if first is None:
                current.results[position] = index
                analysis.group_of_result[index] = current
            else:
                analysis.duplicates.append((index, first))
            return
    if call_id is not None:
        for group in reversed(segment_groups):
            if group is current:
                continue
            for position, call in enumerate(group.calls):
                if (
                    call.id == call_id
                    and position not in group.results
                    and position not in group.displaced
                ):
                    group.displaced.add(position)
                    analysis.displaced.append((index, group, position))
                    return
    analysis.orphans.append(index)


# ---- replayed user messages (SF201) ------------------------------------------------


@dataclass(frozen=True, slots=True)
class Clone:
    clone: int
    survivor: int
    answered_between: bool
    """An assistant message lies between survivor and clone on the path."""


def user_clones(ctx: RuleContext) -> dict[int, Clone]:
    """Byte-identical user messages re-appended on the active path (rules.md §4.1)."""
    view = ctx.view
    clones: dict[int, Clone] = {}
    if not view.tree:
        return clones
    first_seen: dict[bytes, tuple[int, int]] = {}
    assistants = 0
    for index in view.active_path:
        kind = view.kinds[index]
        if kind == Kind.COMPACTION or kind == Kind.RESET:
            first_seen.clear()
            continue
        if kind != Kind.MESSAGE:
            continue
        role = view.roles[index]
        if role == Role.ASSISTANT:
            assistants += 1
            continue
        facts = view.user(index)
        if facts is None:
            continue
        seen = first_seen.get(facts.identity)
        if seen is None:
            first_seen[facts.identity] = (index, assistants)
            continue
        survivor, assistants_then = seen
        if _same_message(ctx, survivor, index):
            clones[index] = Clone(index, survivor, assistants != assistants_then)
    return clones


def _same_message(ctx: RuleContext, first: int, second: int) -> bool:
    """Confirm a hash match on the canonical bytes before calling anything a copy."""
    try:
        a = ctx.load_record(first).get("message")
        b = ctx.load_record(second).get("message")
        return jsonutil.canonical(a) == jsonutil.canonical(b)
    except (ValueError, AttributeError):
        return False


def survivor_of(ctx: RuleContext, entry_id: str) -> str:
    """The id a reference to `entry_id` resolves to once SF201 clones are dropped."""
    if "SF201" not in ctx.enabled:
        return entry_id
    index = ctx.view.resolve(entry_id)
    if index is None:
        return entry_id
    clone = ctx.shared(user_clones).get(index)
    if clone is None:
        return entry_id
    return ctx.view.ids[clone.survivor] or entry_id


# ---- cloned compactions (SF202) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactionClone:
    clone: int
    survivor: int
    safe: bool


def compaction_clones(ctx: RuleContext) -> dict[int, CompactionClone]:
    """Later compactions on the path equal to an earlier one (rules.md §4.2)."""
    view = ctx.view
    found: dict[int, CompactionClone] = {}
    first_seen: dict[tuple[object, str, bytes], int] = {}
    path = view.active_path
    for position, index in enumerate(path):
        if view.kinds[index] != Kind.COMPACTION:
            continue
        facts = view.boundary(index)
        if facts is None or facts.identity is None:
            continue
        kept = facts.first_kept
        kept_ref = MISSING if kept is None or kept == MISSING else survivor_of(ctx, kept)
        key = (_number_key(facts.tokens_before), kept_ref, facts.identity)
        survivor = first_seen.get(key)
        if survivor is None:
            first_seen[key] = index
            continue
        if not _same_payload(ctx, survivor, index):
            continue
        found[index] = CompactionClone(
            index, survivor, _context_unchanged(ctx, survivor, position, kept_ref)
        )
    return found


def _number_key(value: object) -> bytes:
    try:
        return jsonutil.canonical(value)
    except ValueError:
        return repr(value).encode()


def _same_payload(ctx: RuleContext, first: int, second: int) -> bool:
    def payload(index: int) -> bytes:
        record = ctx.load_record(index)
        return jsonutil.canonical(
            {
                key: record[key]
                for key in ("summary", "details", "fromHook", "tokensBefore")
                if key in record
            }
        )

    try:
        return payload(first) == payload(second)
    except (ValueError, TypeError, AttributeError):
        return False


def _context_unchanged(ctx: RuleContext, survivor: int, position: int, kept_ref: str) -> bool:
    """Dropping the clone leaves the model context as it was (rules.md §4.2 fix safety)."""
    view = ctx.view
    survivor_position = view.path_positions[survivor]
    between = view.active_path[survivor_position + 1 : position]
    if any(view.kinds[i] in (Kind.COMPACTION, Kind.RESET) for i in between):
        # Another boundary in between would become the last one.
        return False
    kept_index = None if kept_ref == MISSING else view.resolve(kept_ref)
    if kept_index is not None:
        kept_position = view.path_positions[kept_index]
        if 0 <= kept_position <= survivor_position:
            return True
    return not any(view.flags[i] & Flag.CONTEXT for i in between)


# ---- damaged header ----------------------------------------------------------------


def damaged_header_row(ctx: RuleContext) -> int | None:
    """The row of a pi header line that was torn or damaged, if the file has one."""
    view = ctx.view
    if view.header is not None or not ctx.format.is_pi_family:
        return None
    first_record_row = view.rows[0] if len(view) else None
    for finding in ctx.lines.findings:
        if first_record_row is not None and finding.row > first_record_row:
            return None
        if finding.issue in (LineIssue.UNPARSABLE, LineIssue.TORN) and finding.span:
            start, end = finding.span
            head = ctx.source.read(finding.offset + start, min(end - start, 64))
            if head.lstrip().startswith(b'{"type":"session"'):
                return finding.row
            return None
    return None


# ---- re-linking --------------------------------------------------------------------


def relink_target(
    ctx: RuleContext, index: int, exclude: frozenset[int] = frozenset()
) -> tuple[int, str] | None:
    """The nearest earlier entry in file order that can adopt `index` without a cycle.

    This is how OpenClaw's tolerant reader and the known repair scripts re-link a
    broken parent link (rules.md SF103). Returns the entry and its id.
    """
    view = ctx.view
    for candidate in range(index - 1, -1, -1):
        candidate_id = view.ids[candidate]
        if not view.is_entry(candidate) or candidate in exclude or candidate_id is None:
            continue
        if view.kinds[candidate] == Kind.HEADER:
            continue
        if index in view.ancestors(candidate):
            continue
        return candidate, candidate_id
    return None


def relink_fix(
    ctx: RuleContext, index: int, what: str, exclude: frozenset[int] = frozenset()
) -> Fix | None:
    """The unsafe fix that re-links `index` below `relink_target`, or None if none exists."""
    target = relink_target(ctx, index, exclude)
    if target is None:
        return None
    target_index, target_id = target
    return unsafe(
        f"{what} {target_id} (line {ctx.view.rows[target_index]})",
        ctx.rewrite_record(index, ctx.editor.set_parent(target_id)),
    )
