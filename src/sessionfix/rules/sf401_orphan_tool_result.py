"""SF401 orphan-tool-result: a tool result answering no call."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import DANGLING, Kind, Role
from sessionfix.rules.base import Rule, RuleContext, safe, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    sliced_head = _slice_head(ctx)
    before = (
        "the file is a slice of a longer session"
        if ctx.view.main_file is None
        else "a side conversation's chain begins in its session's main file"
    )
    for event in ctx.tracking.orphans:
        index = event.index
        if index in sliced_head:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                f"tool result for call {event.call_id!r} answers a call made before this file "
                f"starts ({before})",
                severity=Severity.INFO,
            )
            continue
        if ctx.provides(Capability.PAIRS_CHECKED_ON_SEND):
            yield ctx.entry_diagnostic(
                RULE,
                index,
                f"{_result(event.call_id)} answers no tool call of its turn: the agent leaves "
                "it out of every request it sends",
                severity=Severity.INFO,
            )
            continue
        if ctx.provides(Capability.RESULT_REPAIRS):
            fix = safe(
                "drop the orphan result; its children move to its parent",
                ctx.drop_result(index, event.call_id),
            )
            why = "of its turn; providers reject it (unexpected tool_use_id)"
        else:
            fix = unsafe(
                "drop the orphan result (its call may lie in history sessionfix cannot see)",
                ctx.drop(index),
            )
            why = "in the context before it; providers reject a result without its call"
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"{_result(event.call_id)} answers no tool call {why}",
            fix=fix,
        )


def _result(call_id: str | None) -> str:
    return (
        "tool result without a call id" if call_id is None else f"tool result for call {call_id!r}"
    )


def _slice_head(ctx: RuleContext) -> frozenset[int]:
    """Records before the first assistant of a path that starts mid-session: their calls
    lie before the slice."""
    view = ctx.view
    path = view.active_path
    if not view.may_start_mid_session or not len(path) or view.parents[path[0]] != DANGLING:
        return frozenset()
    head = []
    for index in path:
        if view.kinds[index] == Kind.MESSAGE and view.roles[index] == Role.ASSISTANT:
            break
        head.append(index)
    return frozenset(head)


RULE = Rule(
    code="SF401",
    name="orphan-tool-result",
    severity=Severity.ERROR,
    fix="safe (unsafe where the agent keeps orphans: Codex; none where it drops them: open-webui)",
    requires=frozenset({Capability.TOOL_CALLS}),
    summary="A tool result that answers no tool call",
    check=check,
)
