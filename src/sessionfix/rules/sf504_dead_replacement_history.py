"""SF504 dead-replacement-history: compactions whose carried history a newer one supersedes."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.model.view import Flag
from sessionfix.rules.base import Counted, Rule, RuleContext, unsafe
from sessionfix.units import human_bytes


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    carriers = view.history_carriers()
    if len(carriers) < 2:
        return
    newest = carriers[-1]
    rollback = next(view.records_flagged(Flag.ROLLBACK), None)
    rows, sizes = view.rows, view.sizes
    seen: set[tuple[int, int]] = set()
    for index in carriers[:-1]:
        facts = view.boundaries[index]
        repeated = [image for image in facts.images if image in seen]
        seen.update(facts.images)
        message = said(
            f"compaction holds {human_bytes(sizes[index])} of replacement history that the "
            "newer one ",
            on_line(rows[newest]),
            " supersedes",
        )
        if rollback is None:
            message += "; a resume never reads it"
        if repeated:
            message += (
                f" ({len(repeated)} inline image{'s' if len(repeated) != 1 else ''}, "
                f"{human_bytes(sum(length for _, length in repeated))}, repeated from earlier "
                "compactions)"
            )
        fix = None
        if rollback is None:
            fix = unsafe(
                "drop the superseded replacement history (the newest compaction keeps its own)",
                ctx.rewrite_record(index, ctx.editor.drop_carried_history()),
            )
        else:
            message += said(
                "; not shrunk: with the rollback ",
                on_line(rows[rollback]),
                ", a resume replays the lines and each compaction's summary instead, and a "
                "shrunk record would change what it sends",
            )
        yield ctx.entry_diagnostic(RULE, index, message, fix=fix)


RULE = Rule(
    code="SF504",
    name="dead-replacement-history",
    severity=Severity.INFO,
    fix="unsafe",
    requires=frozenset({Capability.CARRIED_HISTORIES}),
    summary="Compactions whose carried history a newer one supersedes",
    check=check,
    counted=Counted.HISTORIES_DROPPED,
)
