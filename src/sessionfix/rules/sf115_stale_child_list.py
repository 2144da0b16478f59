"""SF115 stale-child-list: a stored list of a record's children that its children's
parent links contradict."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import KeptLinkEdits
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext, safe, unsafe


def _listed(ids: tuple[str, ...]) -> str:
    shown = ", ".join(repr(found) for found in ids[:6])
    return f"[{shown}{', …' if len(ids) > 6 else ''}]"


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    links = ctx.view.kept_links
    if links is None:
        return
    view = ctx.view
    editor = cast(KeptLinkEdits, ctx.editor)
    leaf = view.entry_id(view.leaf) if view.leaf is not None else None
    for index, (stored, mended) in sorted(links.children.items()):
        lacking = [child for child in mended if child not in stored]
        extra = sorted({child for child in stored if child not in mended})
        repeated = len(set(stored)) != len(stored)
        parts = []
        if lacking:
            parts.append(f"lacks {_listed(tuple(lacking))}, whose parent link names it")
        if extra:
            parts.append(f"lists {_listed(tuple(extra))}, whose parent link does not name it")
        if repeated:
            parts.append("lists a child twice")
        fix = None
        store = f"store `{links.children_field}` as the parent links give it: {_listed(mended)}"
        if view.cycle_on_path:
            pass  # where the loop is broken decides the lists (SF105)
        elif leaf is not None and links.leaf_settled:
            # The agent picks its leaf by the child lists: the one it reads from now is
            # stored with them, so that the session goes on from where it does.
            edits = [ctx.rewrite_record(index, editor.set_children(mended))]
            if links.stored_leaf != leaf:
                edits.append(ctx.rewrite_record(links.leaf_record, editor.set_leaf_pointer(leaf)))
            fix = safe(store, *edits)
        else:
            fix = unsafe(
                f"{store}; the agent then picks the message it continues from anew",
                ctx.rewrite_record(index, editor.set_children(mended)),
            )
        yield ctx.entry_diagnostic(
            RULE,
            index,
            f"`{links.children_field}` {'; '.join(parts)}: the agent's model context follows "
            "the parent links, but switching branches in its interface does not",
            fix=fix,
        )


RULE = Rule(
    code="SF115",
    name="stale-child-list",
    severity=Severity.WARNING,
    fix="safe where the agent keeps the leaf it reads from, else unsafe",
    requires=frozenset({Capability.KEPT_LINKS}),
    summary="A stored list of a record's children that their parent links contradict",
    check=check,
)
