"""SF402 missing-tool-result: a tool call that never got its result."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import ResultMarks
from sessionfix.formats.capabilities import Capability
from sessionfix.location import Said, line, said
from sessionfix.model.tracking import Group
from sessionfix.model.view import ToolCall
from sessionfix.rules.base import Rule, RuleContext, safe, unsafe

SYNTHETIC_TEXT = (
    "[sessionfix: tool result missing from session history; synthetic error result inserted]"
)


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for group in ctx.tracking.unanswered:
        yield from _check_group(ctx, group)


def _check_group(ctx: RuleContext, group: Group) -> Iterator[Diagnostic]:
    view = ctx.view
    owners = group.owners or [group.assistant]
    crashed = ctx.provides(Capability.CRASHED_CALLS)
    anchor = group.assistant if crashed else max(*group.answers, *owners)
    anchor_id = view.entry_id(anchor)
    seen: set[str] = set()
    for position, call in enumerate(group.calls):
        repeated = call.id in seen
        seen.add(call.id)
        if group.answers[position] != -1 or repeated:
            continue
        owner = group.owner(position)
        what = f"tool call {call.id!r} ({call.name})"
        if group.incomplete:
            yield ctx.entry_diagnostic(
                RULE,
                owner,
                f"{what} has no result; the turn stopped with {group.stop_reason!r}, so its "
                "calls may be incomplete and get no result by design",
                severity=Severity.INFO,
            )
        elif group.ended_by is None and not crashed:
            yield ctx.entry_diagnostic(
                RULE,
                owner,
                f"{what} has no result yet; the session ends mid-call",
                severity=Severity.INFO,
            )
        elif not group.carried and not view.in_context(group.assistant):
            yield ctx.entry_diagnostic(
                RULE,
                owner,
                f"{what} has no result; the turn is summarised away by a later compaction",
                severity=Severity.INFO,
            )
        elif ctx.provides(Capability.PAIRS_CHECKED_ON_SEND):
            yield ctx.entry_diagnostic(
                RULE,
                owner,
                f"{what} has no result: the agent leaves the call out of every request it sends",
                severity=Severity.INFO,
            )
        elif group.ended_by is not None and ctx.provides(Capability.RESULTS_IN_CALLS):
            editor = cast(ResultMarks, ctx.editor)
            yield ctx.entry_diagnostic(
                RULE,
                owner,
                said(
                    f"{what} was left without a result before ",
                    line(view.rows[group.ended_by]),
                    "; the agent sends it as interrupted, older clients and other readers "
                    "send a call without output, which the provider rejects",
                ),
                fix=safe(
                    "record the call as ended by an interruption, as the agent sends it",
                    ctx.rewrite_record(owner, editor.interrupted_call()),
                ),
            )
        elif group.ended_by is not None and not ctx.provides(Capability.RESULT_REPAIRS):
            yield ctx.entry_diagnostic(
                RULE,
                owner,
                said(
                    f"{what} has no result before ",
                    line(view.rows[group.ended_by]),
                    "; the provider receives a tool call without output unless the agent "
                    "patches it in memory",
                ),
            )
        else:
            new_id = None
            if view.tree:
                new_id = ctx.editor.new_record_id(view, anchor_id or "", RULE.code)
            build = _synthetic_result(ctx, group.owner(position), call, new_id, anchor_id)
            if group.ended_by is None:
                message: str | Said = (
                    f"{what} has no result and the session ends there (a crash mid-call); "
                    "the agent's resume gives it a crashed result in memory on every load"
                )
            else:
                message = said(
                    f"{what} has no result before ",
                    line(view.rows[group.ended_by]),
                    "; the provider receives a tool_use without tool_result and rejects the "
                    "request",
                )
            yield ctx.entry_diagnostic(
                RULE,
                owner,
                message,
                fix=unsafe(
                    "insert the agent's own crashed result right after the call"
                    if crashed
                    else "insert a synthetic error result after the call's group",
                    ctx.insert_after(anchor, build, new_id),
                ),
            )
            anchor_id = new_id


def _synthetic_result(
    ctx: RuleContext, assistant: int, call: ToolCall, new_id: str | None, parent_id: str | None
) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        return ctx.editor.synthetic_tool_result(
            jsonutil.loads_preserving(ctx.read_record(assistant)),
            call,
            new_id,
            parent_id,
            SYNTHETIC_TEXT,
        )

    return build


RULE = Rule(
    code="SF402",
    name="missing-tool-result",
    severity=Severity.ERROR,
    fix="unsafe (error cases), safe where results live in their calls (opencode), none "
    "(info cases, and Codex)",
    requires=frozenset({Capability.TOOL_CALLS}),
    summary="A tool call without a result",
    check=check,
)
