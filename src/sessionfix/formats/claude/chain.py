"""How Claude Code picks the leaf it resumes from and walks the chain back
(formats/claude-code.md §7)."""

from __future__ import annotations

from sessionfix.view import Kind, Role, SessionView

_CHAIN_ROLES = frozenset({Role.USER, Role.ASSISTANT, Role.TOOL_RESULT})
"""Records of type `user` or `assistant`: the ones a resume may start from."""


class ClaudeChain:
    """Leaf: the `leafUuid` of the physically last `last-prompt` when it names a
    conversation record, else the physically last user or assistant record. Path: the
    `parentUuid` walk back from it, plus the parallel tool calls and results that the
    loader re-attaches after the last on-chain record of their API message."""

    def leaf(self, view: SessionView) -> int | None:
        if view.leaf_hints:
            last = max(view.leaf_hints)
            target = view.resolve(view.leaf_hints[last])
            if target is not None and view.kinds[target] in (Kind.MESSAGE, Kind.COMPACTION):
                return target
        kinds, roles = view.kinds, view.roles
        for index in range(len(kinds) - 1, -1, -1):
            if kinds[index] == Kind.MESSAGE and roles[index] in _CHAIN_ROLES:
                return index
        return None

    def complete_path(self, view: SessionView, path: list[int]) -> list[int]:
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
            if turn in anchors:
                members.setdefault(turn, []).append(index)
        results: dict[int, list[int]] = {}
        roles, parents, adopters = view.roles, view.parents, view.adopters
        tool_result = Role.TOOL_RESULT
        for index in range(len(roles)):
            if roles[index] == tool_result and index not in on_path:
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
