"""SF503 compaction-loop: compactions in a row with no user message between them."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.model.view import MISSING, Kind, Role
from sessionfix.rules.analysis import compaction_clones
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if ctx.provides(Capability.SUMMARY_REQUESTS):
        yield from _check_requests(ctx)
        return
    clones = ctx.shared(compaction_clones) if view.tree else {}
    compactions = view.in_path_order(view.records_of_kind(Kind.COMPACTION))
    for previous, index in pairwise(compactions):
        # A copy of the compaction before it (or of its survivor) is SF202's, not a loop.
        if index in clones or _user_between(ctx, previous, index):
            continue
        yield ctx.entry_diagnostic(
            RULE,
            index,
            said(
                "compaction follows the compaction ",
                on_line(view.rows[previous]),
                f" with no user message between them (tokensBefore {_tokens(ctx, previous)} → "
                f"{_tokens(ctx, index)}): a compaction loop",
            ),
        )


def _check_requests(ctx: RuleContext) -> Iterator[Diagnostic]:
    """Compactions that are a request and a summary answering it (opencode): a summary
    that failed or never finished, a request no summary answers, summaries in a row
    with no prompt of the user's between them."""
    view = ctx.view
    requests = set(view.boundaries)
    answered = {
        view.resolve(request)
        for request in view.summary_requests.values()
        if isinstance(request, str) and request != MISSING
    }
    # A summary naming no request is the broken link's finding (SF501), which re-links it.
    unlinked = [
        summary
        for summary, request in view.summary_requests.items()
        if not isinstance(request, str) or request == MISSING or view.resolve(request) is None
    ]
    for summary, reason in sorted(view.failed_summaries.items()):
        yield ctx.entry_diagnostic(
            RULE,
            summary,
            f"compaction summary {reason}: the agent takes it for no compaction, sends the "
            "whole history and compacts again",
        )
    for request in sorted(requests - answered):
        if any(summary > request for summary in unlinked):
            continue
        if not any(index > request for index in view.sort_times):
            yield ctx.entry_diagnostic(
                RULE,
                request,
                "compaction request is the session's last message: its summary may still "
                "be being written",
                severity=Severity.INFO,
            )
            continue
        yield ctx.entry_diagnostic(
            RULE,
            request,
            "compaction request has no summary answering it: the compaction never happened",
        )
    summaries = sorted(view.summary_requests)
    for previous, index in pairwise(summaries):
        prompted = any(
            view.roles[between] == Role.USER and between not in requests
            for between in range(previous + 1, index)
            if between in view.sort_times
        )
        if not prompted:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                said(
                    "compaction summary follows the summary ",
                    on_line(view.rows[previous]),
                    " with no prompt of the user's between them: a compaction loop",
                ),
            )


def _user_between(ctx: RuleContext, first: int, second: int) -> bool:
    view = ctx.view
    if view.linear:
        return view.roles.find(bytes([Role.USER]), first + 1, second) >= 0
    roles = view.roles
    return any(roles[i] == Role.USER for i in view.path_between(first, second))


def _tokens(ctx: RuleContext, index: int) -> str:
    facts = ctx.view.boundary(index)
    value = facts.tokens_before if facts is not None else None
    return "?" if value is None else jsonutil.stringify(value)


RULE = Rule(
    code="SF503",
    name="compaction-loop",
    severity=Severity.WARNING,
    fix="none",
    requires=frozenset({Capability.BOUNDARIES}),
    summary="Compactions in a row with no user message between them",
    check=check,
)
