"""SF702 undiscoverable-session: the agent's list of sessions to resume leaves the
session out, or shows it without its title."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import ListingFacts
from sessionfix.rules.base import Rule, RuleContext, unsafe

SHOWN_CHARS = 60
"""Characters of the title the list shows instead that a message quotes."""


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if view.listing is None or not len(view):
        return
    facts = view.listing.facts(view)
    window = f"{facts.window >> 10} KiB"
    if facts.unnamed:
        yield ctx.entry_diagnostic(
            RULE,
            0,
            f"the agent's list of sessions to resume reads only the first and the last "
            f"{window} of the file and finds nothing there to name the session by (a "
            "title, its first prompt, its last prompt, a summary): the list leaves it out",
        )
    if facts.buried_title is not None:
        yield _buried_title(ctx, facts, window)
    if facts.index is not None:
        yield from _index(ctx, facts)


def _buried_title(ctx: RuleContext, facts: ListingFacts, window: str) -> Diagnostic:
    view = ctx.view
    index = facts.buried_title
    assert index is not None
    instead = "no title" if facts.shown_title is None else _quoted(facts.shown_title)
    return ctx.entry_diagnostic(
        RULE,
        index,
        f"the session's newest title lies more than {window} from both ends of the file, "
        f"where the agent's list of sessions to resume reads none: it shows {instead} "
        "instead",
        fix=unsafe(
            "append a copy of the title at the end of the file, as the agent itself does "
            "when it resumes the session",
            ctx.insert_after(len(view) - 1, _copy_of(ctx, index), None),
        ),
    )


def _copy_of(ctx: RuleContext, index: int) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        record: dict[str, Any] = jsonutil.loads_preserving(ctx.read_record(index))
        return record

    return build


def _quoted(title: str) -> str:
    short = title if len(title) <= SHOWN_CHARS else title[:SHOWN_CHARS] + "…"
    return jsonutil.stringify(short)


def _index(ctx: RuleContext, facts: ListingFacts) -> Iterator[Diagnostic]:
    index = facts.index
    assert index is not None
    name = f"`{index.name}`"
    listing = "releases of the agent that list sessions from that index"
    row = ctx.view.rows[0]
    fix = unsafe(
        f"move {name} aside, kept beside it under a backup name, so that the agent builds "
        "it again from the session files (an in-place repair does)",
        ctx.set_aside(row, index),
    )
    if facts.index_unreadable is not None:
        yield ctx.entry_diagnostic(
            RULE,
            0,
            f"{name} beside the session {facts.index_unreadable}: {listing} cannot list "
            "this folder's sessions from it",
            fix=fix,
        )
    if facts.unindexed:
        yield ctx.entry_diagnostic(
            RULE,
            0,
            f"{name} beside the session leaves it out: {listing} do not offer it for resuming",
            fix=fix,
        )
    if facts.stray_entries:
        count = len(facts.stray_entries)
        shown = ", ".join(facts.stray_entries[:3]) + (", …" if count > 3 else "")
        sessions = "session whose file is" if count == 1 else "sessions whose files are"
        them = "it" if count == 1 else "them"
        yield ctx.entry_diagnostic(
            RULE,
            0,
            f"{name} beside the session names {count} {sessions} gone ({shown}): "
            f"{listing} offer {them} and fail to open {them}",
            fix=fix,
        )


RULE = Rule(
    code="SF702",
    name="undiscoverable-session",
    severity=Severity.WARNING,
    fix="unsafe for a title the list does not read and a stale or broken index, else none",
    requires=frozenset({Capability.SESSION_LISTING}),
    summary="A session the agent's list of sessions to resume leaves out or shows "
    "without its title",
    check=check,
)
