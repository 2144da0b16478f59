"""SF206 repeated-metadata: the same title, mode or last prompt re-appended again and again."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import line, on_line, said
from sessionfix.model.view import Flag, Kind
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if view.type_name is None:
        return
    kinds = view.kinds
    last: dict[str, tuple[int, bytes]] = {}
    run_end: dict[int, int] = {}
    for index in view.records_flagged(Flag.STATE):
        if kinds[index] != Kind.METADATA:
            continue
        name = str(view.type_name(index))
        data = ctx.read_record(index)
        previous = last.get(name)
        if previous is not None and previous[1] == data:
            run_end[previous[0]] = index
        last[name] = (index, data)
    for index, later in sorted(run_end.items()):
        # Each copy in a run of equal copies goes; the last copy of the run stays.
        survivor = later
        while survivor in run_end:
            survivor = run_end[survivor]
        yield ctx.entry_diagnostic(
            RULE,
            index,
            said(
                f"`{view.type_name(index)}` line repeated unchanged ",
                on_line(view.rows[later]),
                "; readers use only the last copy",
            ),
            fix=safe(
                said("drop the repeated copy, keep ", line(view.rows[survivor])),
                ctx.drop(index, survivor),
            ),
        )


RULE = Rule(
    code="SF206",
    name="repeated-metadata",
    severity=Severity.INFO,
    fix="safe",
    requires=frozenset({Capability.STATE_METADATA}),
    summary="A metadata line repeated unchanged",
    check=check,
)
