"""SF109 missing-ordinal: a record without its sequence number, or with one already used."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.model.view import NO_ORDINAL
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    ordinals = view.ordinals
    if ordinals is None:
        return
    rows = view.rows
    highest = NO_ORDINAL
    highest_index = -1
    for index, ordinal in enumerate(ordinals):
        if ordinal == NO_ORDINAL:
            if highest_index >= 0:
                yield ctx.entry_diagnostic(
                    RULE,
                    index,
                    said(
                        f"record has no ordinal, though the records before it are numbered "
                        f"(up to {highest} ",
                        on_line(rows[highest_index]),
                        "); newer readers refuse to page past it and the resume fails",
                    ),
                )
            continue
        if ordinal <= highest:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                said(
                    f"ordinal {ordinal} does not follow {highest} ",
                    on_line(rows[highest_index]),
                    "; paged history reads skip or repeat records by it",
                ),
            )
            continue
        highest, highest_index = ordinal, index


RULE = Rule(
    code="SF109",
    name="missing-ordinal",
    severity=Severity.ERROR,
    fix="none",
    requires=frozenset({Capability.ORDINALS}),
    summary="A record without its ordinal, or with one already used",
    check=check,
)
