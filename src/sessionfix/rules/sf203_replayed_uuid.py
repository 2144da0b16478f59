"""SF203 replayed-uuid: one uuid on several lines of a Claude transcript."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import line, on_line, said
from sessionfix.model.view import Kind
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if not view.duplicate_ids:
        return
    occurrences: dict[int, list[int]] = {}
    for first, later in view.duplicate_ids:
        occurrences.setdefault(first, [first]).append(later)
    boundaries = list(view.records_of_kind(Kind.COMPACTION))
    for first, found in sorted(occurrences.items()):
        # The survivor is the first copy inside the latest compaction segment holding one:
        # a loader that skips what lies before the last boundary must still find it.
        segments = [bisect_right(boundaries, index) for index in found]
        latest = max(segments)
        survivor = found[segments.index(latest)]
        kept = view.copied_bytes(survivor) if view.copied_bytes else None
        uuid = view.entry_id(first)
        for index in found:
            if index == survivor:
                continue
            where = on_line(view.rows[survivor])
            if kept is not None and view.copied_bytes and view.copied_bytes(index) == kept:
                message = (
                    said(
                        f"uuid {uuid!r} replays the record ",
                        where,
                        " (a copy re-appended with its uuid, parent and timestamp); loaders "
                        "keep one of them",
                    )
                    if index > survivor
                    else said(
                        f"uuid {uuid!r} is appended again ",
                        where,
                        ", after a compaction: that copy is the one a loader reading from the "
                        "last compaction finds, so this earlier one goes",
                    )
                )
                yield ctx.entry_diagnostic(
                    RULE,
                    index,
                    message,
                    fix=safe(
                        said("drop the replayed copy, keep ", line(view.rows[survivor])),
                        ctx.drop(index, survivor),
                    ),
                )
            elif _equal_but_nulls(ctx, index, survivor):
                yield ctx.entry_diagnostic(
                    RULE,
                    index,
                    said(
                        f"uuid {uuid!r} repeats the record ",
                        where,
                        " as another version of the agent wrote it (the copies differ only in "
                        "fields one leaves null); loaders keep one of them",
                    ),
                    severity=Severity.INFO,
                )
            else:
                yield ctx.entry_diagnostic(
                    RULE,
                    index,
                    said(
                        f"uuid {uuid!r} is also used by a different record ",
                        where,
                        "; loaders keep only one of them",
                    ),
                    severity=Severity.ERROR,
                )


def _equal_but_nulls(ctx: RuleContext, first: int, second: int) -> bool:
    """The two records' replayed members are equal once null-valued members are left out
    (a newer writer adds `"key": null` members an older one omits)."""
    view = ctx.view
    if view.copied_bytes is None:
        return False
    left, right = view.copied_bytes(first), view.copied_bytes(second)
    if left is None or right is None:
        return False
    try:
        return bool(_without_nulls(jsonutil.loads(left)) == _without_nulls(jsonutil.loads(right)))
    except ValueError:
        return False


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


RULE = Rule(
    code="SF203",
    name="replayed-uuid",
    severity=Severity.WARNING,
    fix="safe (equal copies), else none",
    requires=frozenset({Capability.TREE, Capability.REPLAYED_IDS}),
    summary="One uuid on several lines",
    check=check,
)
