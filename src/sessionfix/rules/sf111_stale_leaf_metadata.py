"""SF111 stale-leaf-metadata: the last entry, a metadata entry, moved the leaf back onto
a branch older than the newest conversation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import line, on_line, said
from sessionfix.model.view import Kind, SessionView
from sessionfix.rules.analysis import describe
from sessionfix.rules.base import Rule, RuleContext, unsafe

METADATA: Final = frozenset(
    int(kind) for kind in (Kind.SESSION_INFO, Kind.LABEL, Kind.CUSTOM, Kind.SETTING, Kind.OTHER)
)
"""Entries that carry no conversation: a session name, a label, extension data, a model
or thinking-level change, an entry of a type the agent does not know (oh-my-pi's
`session_exit`). An OpenClaw leaf row is no such entry: it moves the leaf on purpose."""
CONVERSATION: Final = (
    Kind.MESSAGE,
    Kind.COMPACTION,
    Kind.RESET,
    Kind.BRANCH_SUMMARY,
    Kind.CUSTOM_MESSAGE,
)
"""Entries that are the conversation (a branch summary is what `/tree` writes when it
moves to another branch and summarises the one it leaves)."""


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    leaf = view.leaf
    if leaf is None or leaf != len(view) - 1 or view.kinds[leaf] not in METADATA:
        return
    newest = _newest_conversation(view)
    if newest is None or view.on_path(newest):
        return
    stale = next((i for i in view.ancestors(leaf) if view.kinds[i] not in METADATA), None)
    if stale is None or view.kinds[stale] not in CONVERSATION:
        return
    if view.kinds.find(bytes([Kind.LEAF]), newest) >= 0:
        return  # a leaf row after the newest conversation moved the leaf on purpose
    tip_id = view.entry_id(newest)
    fix = None
    if tip_id is not None:
        fix = unsafe(
            "re-parent the last entry to the newest conversation entry, where the agent "
            "then resumes (a deliberate move to the older branch is undone)",
            ctx.rewrite_record(leaf, ctx.editor.set_parent(tip_id)),
        )
    yield ctx.entry_diagnostic(
        RULE,
        leaf,
        said(
            f"the last entry ({_named(ctx, leaf)}), which the agent resumes from, hangs on a "
            "branch whose conversation ends ",
            on_line(view.rows[stale]),
            ", older than the newest conversation entry (",
            line(view.rows[newest]),
            "): the agent resumes on that stale branch, without the newer messages",
        ),
        fix=fix,
    )


def _named(ctx: RuleContext, index: int) -> str:
    if ctx.view.kinds[index] == Kind.OTHER:
        return "a type unknown to the agent"
    return describe(ctx, index)


def _newest_conversation(view: SessionView) -> int | None:
    """The conversation entry written last (a byte search of the kind column per kind)."""
    kinds = view.kinds
    start = view.first_entry
    newest = max(kinds.rfind(bytes([kind]), start) for kind in CONVERSATION)
    return newest if newest >= 0 else None


RULE = Rule(
    code="SF111",
    name="stale-leaf-metadata",
    severity=Severity.WARNING,
    fix="unsafe",
    requires=frozenset({Capability.TREE, Capability.LAST_ENTRY_LEAF}),
    summary="A metadata entry appended last that moves the leaf onto a stale branch",
    check=check,
)
