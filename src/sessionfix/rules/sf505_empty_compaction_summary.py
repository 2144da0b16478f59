"""SF505 empty-compaction-summary: a compaction that replaced history with a summary of
nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import Cited, Said, on_line, said
from sessionfix.model.view import Kind, Role, SessionView
from sessionfix.rules.base import Rule, RuleContext

_CONVERSATION: Final = frozenset({int(Role.USER), int(Role.ASSISTANT)})


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    previous: int | None = None
    for index in view.in_path_order(view.boundaries):
        facts = view.boundaries[index]
        hollow = facts.hollow_summary
        if view.kinds[index] == Kind.COMPACTION and hollow is not None:
            lost = _messages_dropped(view, previous, index)
            summary_lost = _summarised(view, previous)
            if lost or summary_lost:
                yield ctx.entry_diagnostic(
                    RULE, index, _message(view, hollow, lost, previous if summary_lost else None)
                )
        previous = index


def _kept_from(view: SessionView, boundary: int) -> int:
    """The path position a boundary's context starts at: its kept entry's, when that lies
    before it, else just after the boundary (whose summary stands for the rest)."""
    position = view.path_positions[boundary]
    target = view.first_kept_target(boundary)
    kept = -1 if target is None else view.path_positions[target]
    return kept if 0 <= kept < position else position + 1


def _messages_dropped(view: SessionView, previous: int | None, compaction: int) -> int:
    """User and assistant messages in the context before the compaction that are not in
    it after: from where the previous boundary's context starts (or the path's start) to
    the entry the compaction keeps from."""
    start = 0 if previous is None else _kept_from(view, previous)
    end = min(_kept_from(view, compaction), view.path_positions[compaction])
    roles, kinds = view.roles, view.kinds
    return sum(
        1
        for index in view.active_path[start:end]
        if kinds[index] == Kind.MESSAGE and roles[index] in _CONVERSATION
    )


def _summarised(view: SessionView, previous: int | None) -> bool:
    """The previous boundary is a compaction with a summary, which the next one replaces."""
    if previous is None or view.kinds[previous] != Kind.COMPACTION:
        return False
    facts = view.boundaries[previous]
    return facts.hollow_summary is None


def _message(view: SessionView, hollow: str, lost: int, summary: int | None) -> Said:
    """`compaction's summary is empty: 12 messages of the conversation and the summary of
    the compaction on line 4 left the context …`."""
    parts: list[str | Cited] = [f"compaction's summary is {hollow}: "]
    if lost:
        parts.append(f"{lost} message{'s' if lost > 1 else ''} of the conversation")
        if summary is not None:
            parts.append(" and ")
    if summary is not None:
        parts += ["the summary of the compaction ", on_line(view.rows[summary])]
    parts.append(
        " left the context and nothing summarises them; the agent goes on without that history"
    )
    return said(*parts)


RULE = Rule(
    code="SF505",
    name="empty-compaction-summary",
    severity=Severity.WARNING,
    fix="none",
    requires=frozenset({Capability.BOUNDARIES, Capability.SUMMARIES}),
    summary="A compaction whose summary holds none of the history it replaced",
    check=check,
)
