"""SF104 duplicate-entry-id: two records share one id."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import agent_of
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.rules.base import Rule, RuleContext, safe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    pairs: list[tuple[int, int, bool]] = []
    last_holder: dict[str, int] = {}
    different: set[str] = set()
    for first, later in view.duplicate_ids:
        entry_id = str(view.entry_id(later))
        # Only a byte-for-byte repeat is a copy: records that merely parse equal (`1e2`
        # and `100.0`, repeated keys, `-0`) or that pi reads differently (an escaped
        # surrogate and a raw byte) are different records (rules.md §4).
        identical = ctx.read_record(first) == ctx.read_record(later)
        pairs.append((first, later, identical))
        last_holder[entry_id] = max(later, last_holder.get(entry_id, later))
        if not identical:
            different.add(entry_id)
    for first, later, identical in pairs:
        entry_id = str(view.entry_id(later))
        if identical:
            # pi resolves an id to its last holder: dropping that one must not hand the
            # id to a different record.
            moves = last_holder[entry_id] == later and entry_id in different
            message = said(
                f"id {entry_id!r} repeats the identical record ", on_line(view.rows[first])
            )
            if moves:
                message += f"; it is the copy {_resolver(ctx)} the id to, so it stays"
            fix = None if moves else safe("drop the repeated copy", ctx.drop(later, first))
            yield ctx.entry_diagnostic(RULE, later, message, fix=fix)
        else:
            resolved = (
                "; pi resolves it to this later line, OpenClaw's TranscriptFileState to the first"
                if ctx.provides(Capability.LAST_ENTRY_LEAF)
                else f"; {_resolver(ctx)} it to this later line"
            )
            yield ctx.entry_diagnostic(
                RULE,
                later,
                said(
                    f"id {entry_id!r} is also used by a different record ",
                    on_line(view.rows[first]),
                    resolved,
                ),
            )


def _resolver(ctx: RuleContext) -> str:
    """Who reads the file and resolves an id to its last holder, and the verb."""
    if ctx.provides(Capability.LAST_ENTRY_LEAF):
        return "pi resolves"
    return f"{agent_of(ctx.format) or 'its agent'} resolves"


RULE = Rule(
    code="SF104",
    name="duplicate-entry-id",
    severity=Severity.ERROR,
    fix="safe (identical records), else none",
    requires=frozenset({Capability.TREE, Capability.UNIQUE_IDS}),
    summary="Two records share one id",
    check=check,
)
