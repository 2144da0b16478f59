"""SF603 oversized-record: a single record large enough to strain loads and context."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import compress, repeat
from operator import lt

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.analysis import describe
from sessionfix.rules.base import Rule, RuleContext
from sessionfix.units import human_bytes


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    limit = ctx.settings.max_record_size
    sizes = view.sizes
    largest = view.largest_size if view.largest_size is not None else max(sizes, default=0)
    if largest <= limit:
        return
    for index in compress(range(len(sizes)), map(lt, repeat(limit), sizes)):
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"{describe(ctx, index)} is {human_bytes(sizes[index])}, over the "
            f"{human_bytes(limit)} limit (--max-record-size); every load reads it, and "
            "while it is in context it is resent with every request",
        )


RULE = Rule(
    code="SF603",
    name="oversized-record",
    severity=Severity.INFO,
    fix="none",
    requires=frozenset({Capability.LINES}),
    summary="A single record over the size limit",
    check=check,
)
