"""SF103 dangling-parent: a parent link naming no record."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.model.view import Kind, SessionView
from sessionfix.rules.analysis import recovered_ids, relink_fix
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    first_linked = _first_tree_record(ctx) if view.may_start_mid_session else None
    elsewhere = _in_main_file(view)
    for index in view.dangling():
        if not view.is_entry(index):
            continue
        parent = str(view.parent_id(index))
        if parent in elsewhere:
            continue
        link = ctx.editor.parent_link
        if index == first_linked:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                f"{link} {parent!r} names no record: the file starts mid-session (a slice "
                "of a longer transcript), so its history begins here",
                severity=Severity.INFO,
            )
            continue
        recovered = ctx.shared(recovered_ids).get(parent)
        if recovered is not None and "SF008" in ctx.enabled:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                said(
                    f"{link} {parent!r} names the record ",
                    on_line(recovered),
                    ", which only a fix of its damaged line (SF008) brings back",
                ),
            )
            continue
        where = (
            "; the active path stops here and everything before it is lost from context"
            if view.on_path(index)
            else ""
        )
        fix = relink_fix(
            ctx,
            index,
            "re-link to the one record that lists it as a child,"
            if view.adopters_only
            else "re-link to the preceding entry",
        )
        yield ctx.entry_diagnostic(RULE, index, f"{link} {parent!r} names no entry{where}", fix=fix)


def _in_main_file(view: SessionView) -> set[str]:
    """The parents named outside the file that its session's main file holds: a side
    conversation (a sub-agent's) begins below records of the main one."""
    if view.main_file is None:
        return set()
    named = {
        parent
        for index in view.dangling()
        if view.is_entry(index) and isinstance(parent := view.parent_id(index), str)
    }
    return view.main_file.holding(named)


def _first_tree_record(ctx: RuleContext) -> int | None:
    """The first record in file order that takes part in the tree."""
    kinds = ctx.view.kinds
    for index in range(len(kinds)):
        if kinds[index] in (Kind.MESSAGE, Kind.COMPACTION, Kind.CONTROL, Kind.OTHER):
            return index
    return None


RULE = Rule(
    code="SF103",
    name="dangling-parent",
    severity=Severity.WARNING,
    fix="unsafe (only to the record that lists it as a child: open-webui)",
    requires=frozenset({Capability.TREE}),
    summary="A parent link naming no record",
    check=check,
)
