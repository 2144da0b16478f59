"""SF114 message-order: a reply its agent sorts before the message it answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import TimedRecords
from sessionfix.formats.capabilities import Capability
from sessionfix.location import line, said
from sessionfix.model.view import MISSING, Flag, Role, SessionView
from sessionfix.rules.base import Rule, RuleContext, safe


def load_order(view: SessionView) -> list[int]:
    """The messages in the order the agent loads them: by the time stamped on each,
    then by id."""
    times = view.sort_times
    return sorted(times, key=lambda index: (times[index], view.entry_id(index) or ""))


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    order = load_order(view)
    place = {index: position for position, index in enumerate(order)}
    times = view.sort_times
    for index in order:
        if view.roles[index] != Role.ASSISTANT:
            continue
        parent = view.parent_id(index)
        target = view.resolve(parent) if isinstance(parent, str) and parent != MISSING else None
        if target is None or target not in place or place[target] < place[index]:
            continue
        summary = bool(view.flags[index] & Flag.SUMMARY)
        what = "summary" if summary else "reply"
        effect = (
            "the agent then takes it for no compaction and sends the whole history"
            if summary
            else "the agent sends it before the message it answers"
        )
        moved = times[target] + 1
        after = place[target] + 1
        if after < len(order) and order[after] == index:
            after += 1
        following = order[after] if after < len(order) else None
        fix = None
        if following is None or times[following] > moved:
            editor = cast(TimedRecords, ctx.editor)
            fix = safe(
                "stamp it 1 ms after the message it answers, where the agent then loads it",
                ctx.rewrite_record(index, editor.set_sort_time(moved)),
            )
        yield ctx.entry_diagnostic(
            RULE,
            index,
            said(
                f"{what} is stamped {times[index]}, before the message it answers (",
                line(view.rows[target]),
                f", stamped {times[target]}): {effect}",
            ),
            fix=fix,
        )


RULE = Rule(
    code="SF114",
    name="message-order",
    severity=Severity.WARNING,
    fix="safe where a time fits, else none",
    requires=frozenset({Capability.TIME_ORDER}),
    summary="A reply its agent sorts before the message it answers",
    check=check,
)
