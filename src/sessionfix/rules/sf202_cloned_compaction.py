"""SF202 cloned-compaction: a compaction entry copied at once, only its id changed."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import line, said
from sessionfix.rules.analysis import compaction_clones
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    for index, clone in sorted(ctx.shared(compaction_clones).items()):
        survivor_id = view.entry_id(clone.survivor)
        message = said(
            f"compaction repeats entry {survivor_id} (",
            line(view.rows[clone.survivor]),
            "): same summary, tokensBefore and kept entry, only the id differs",
        )
        fix = safe(
            f"drop the clone; references to it move to {survivor_id}",
            ctx.drop(index, clone.survivor),
        )
        yield ctx.entry_diagnostic(RULE, index, message, fix=fix)


RULE = Rule(
    code="SF202",
    name="cloned-compaction",
    severity=Severity.WARNING,
    fix="safe",
    requires=frozenset({Capability.BOUNDARIES, Capability.TREE, Capability.RETRY_COPIES}),
    summary="A compaction entry copied at once, only its id changed",
    check=check,
)
