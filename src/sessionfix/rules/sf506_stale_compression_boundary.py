"""SF506 stale-compression-boundary: a summary that covers the first messages by their
number, which no longer are the messages it summarised."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import KeptLinkEdits
from sessionfix.formats.capabilities import Capability
from sessionfix.location import Cited, lines, said
from sessionfix.rules.base import Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    covered = view.covered_count
    if covered is None:
        return
    reasons: list[tuple[str | Cited, ...]] = []
    if covered.count > covered.sent:
        reasons.append(
            (
                f"it covers {covered.count} messages and the agent sends {covered.sent}: it "
                "summarises messages no longer on the current branch (the filter clamps the "
                "count and uses the summary anyway)",
            )
        )
    if covered.newer:
        reasons.append(
            (
                f"{len(covered.newer)} of the messages it covers (",
                lines(view.rows[index] for index in covered.newer),
                ") are newer than the summary: the branch was switched or edited after it",
            )
        )
    if covered.splits_tool_group:
        reasons.append(
            (
                "its count ends between a tool call and its results: the filter moves it back "
                "and sends summarised messages again",
            )
        )
    if not reasons:
        return
    editor = cast(KeptLinkEdits, ctx.editor)
    parts: list[str | Cited] = [f"{covered.holder} ({covered.count} messages): "]
    for number, reason in enumerate(reasons):
        if number:
            parts.append("; ")
        parts.extend(reason)
    yield ctx.entry_diagnostic(
        RULE,
        covered.record,
        said(*parts),
        fix=unsafe(
            f"delete {covered.holder}: the filter summarises the chat anew on its next turn",
            ctx.rewrite_record(covered.record, editor.drop_covered_count()),
        ),
    )


RULE = Rule(
    code="SF506",
    name="stale-compression-boundary",
    severity=Severity.WARNING,
    fix="unsafe",
    requires=frozenset({Capability.COVERED_COUNTS}),
    summary="A summary covering messages by a count that no longer fits them",
    check=check,
)
