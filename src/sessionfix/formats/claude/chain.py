"""How Claude Code picks the leaf it resumes from and walks the chain back
(formats/claude-code.md §7)."""

from __future__ import annotations

from array import array
from collections.abc import Collection
from itertools import pairwise

from sessionfix.model.view import Kind, Role, SessionView

_CHAIN_ROLES = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL_RESULT})
"""Records of type `user` or `assistant`: the ones a resume may start from."""


class ClaudeChain:
    """Leaf: the `leafUuid` of the physically last `last-prompt` when it names a
    conversation record, walked back to the nearest user or assistant record; else the
    physically last user or assistant record. Path: the `parentUuid` walk back from it,
    plus the parallel tool calls and results that the loader re-attaches after the last
    on-chain record of their API message."""

    def relink(self, view: SessionView, parents: array[int]) -> None:
        """Claude Code's reader, for every boundary that keeps records: with a list of
        them that all resolve, the first hangs below the anchor and each below the one
        before; else the segment's head hangs below the anchor. Either way the anchor's
        other children move below the last kept record."""
        last_kept: dict[int, tuple[int, set[int]]] = {}
        for _, facts in sorted(view.boundaries.items()):
            segment = facts.preserved
            if segment is None or not isinstance(segment.anchor, str):
                continue
            anchor = view.resolve(segment.anchor)
            if anchor is None:
                continue
            listed = [u for u in segment.listed or () if isinstance(u, str)]
            members = [view.resolve(u) for u in dict.fromkeys(listed)]
            if members and None not in members:
                kept = [m for m in members if m is not None]
                parents[kept[0]] = anchor
                for before, member in pairwise(kept):
                    parents[member] = before
                last = kept[-1]
            else:
                head = view.resolve(segment.head) if isinstance(segment.head, str) else None
                tail = view.resolve(segment.tail) if isinstance(segment.tail, str) else None
                if head is None or tail is None:
                    continue
                parents[head] = anchor
                kept, last = [head], tail
            last_kept[anchor] = (last, {*kept, anchor, last})
        if not last_kept:
            return
        for child, parent in enumerate(parents):
            moved = last_kept.get(parent)
            if moved is not None and child not in moved[1]:
                parents[child] = moved[0]

    def leaf(self, view: SessionView) -> int | None:
        """A user or assistant record, always: Claude Code walks back from the record a
        `last-prompt` names (a `turn_duration` or `away_summary` that ends a turn, say)
        to the nearest one, as it does from every record nothing continues."""
        if view.leaf_hints:
            last = max(view.leaf_hints)
            target = view.resolve(view.leaf_hints[last])
            if target is not None and view.kinds[target] in (Kind.MESSAGE, Kind.COMPACTION):
                found = _nearest_turn(view, target)
                if found is not None:
                    return found
        kinds, roles = view.kinds, view.roles
        for index in range(len(kinds) - 1, -1, -1):
            if kinds[index] == Kind.MESSAGE and roles[index] in _CHAIN_ROLES:
                return index
        return None

    def complete_path(
        self, view: SessionView, path: list[int], unread: Collection[int] = ()
    ) -> list[int]:
        turns = view.turns
        if not turns:
            return path
        on_path = set(path)
        anchors: dict[int, int] = {}
        for index in path:
            turn = turns.get(index)
            if turn is not None:
                anchors[turn] = index
        if not anchors:
            return path
        members: dict[int, list[int]] = {}
        for index, turn in turns.items():
            if turn in anchors and index not in unread:
                members.setdefault(turn, []).append(index)
        results: dict[int, list[int]] = {}
        roles, parents, adopters = view.roles, view.parents, view.adopters
        tool_result = Role.TOOL_RESULT
        for index in range(len(roles)):
            if roles[index] == tool_result and index not in on_path and index not in unread:
                # A result belongs to the call its sourceToolAssistantUUID names, which is
                # its parent unless the link was broken or rewritten.
                source = adopters.get(index)
                owner = view.resolve(source) if source is not None else None
                parent = parents[index] if owner is None else owner
                if parent >= 0:
                    results.setdefault(parent, []).append(index)
        if not results and all(set(group) <= on_path for group in members.values()):
            return path
        spliced: dict[int, list[int]] = {}
        for turn, anchor in anchors.items():
            group = sorted(members[turn])
            extra = [index for index in group if index not in on_path]
            for member in group:
                extra.extend(r for r in results.get(member, ()) if r not in on_path)
            if extra:
                spliced[anchor] = extra
        if not spliced:
            return path
        completed: list[int] = []
        added: set[int] = set()
        for index in path:
            completed.append(index)
            for record in spliced.get(index, ()):
                if record not in added and record not in on_path:
                    added.add(record)
                    completed.append(record)
        return completed


def _nearest_turn(view: SessionView, index: int) -> int | None:
    """`index` or its nearest ancestor that is a user or assistant record (None past a
    root, a break or a cycle)."""
    kinds, roles = view.kinds, view.roles
    for record in (index, *view.ancestors(index)):
        if kinds[record] == Kind.MESSAGE and roles[record] in _CHAIN_ROLES:
            return record
    return None
