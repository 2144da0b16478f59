"""SF205 abandoned-branch-bloat: most of the file is history off the active path."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Applicability, Diagnostic, Fix, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import Kind
from sessionfix.rules.base import Rule, RuleContext
from sessionfix.units import human_bytes

THRESHOLD = 0.5


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    total = ctx.lines.size
    if not total or not len(view.active_path) or view.linear:
        return
    off_path = [i for i in view.entries() if not view.on_path(i) and not _kept(ctx, i)]
    held = sum(view.sizes[i] for i in off_path)
    if held <= total * THRESHOLD:
        return
    yield ctx.diagnostic(
        RULE,
        view.header.row if view.header else 1,
        f"{human_bytes(held)} of {human_bytes(total)} ({held / total:.0%}) is held by "
        f"{len(off_path)} entries on abandoned branches that never reach the model",
        fix=Fix(
            Applicability.UNSAFE,
            "keep only the active path (--prune-to-leaf); /tree history is lost",
            [ctx.drop(index) for index in off_path],
        ),
    )


def _kept(ctx: RuleContext, index: int) -> bool:
    """Labels and session info naming an entry on the path survive a prune."""
    view = ctx.view
    if view.kinds[index] not in (Kind.LABEL, Kind.SESSION_INFO):
        return False
    for reference in view.references.get(index, ()):
        target = view.resolve(reference.target)
        if target is not None and view.on_path(target):
            return True
    return view.kinds[index] == Kind.SESSION_INFO


RULE = Rule(
    code="SF205",
    name="abandoned-branch-bloat",
    severity=Severity.INFO,
    fix="unsafe (--prune-to-leaf)",
    requires=frozenset({Capability.TREE, Capability.BRANCHES}),
    summary="Most of the file is history on abandoned branches",
    check=check,
    prunes_to_leaf=True,
)
