"""SF701 codex-index-drift: the index its agent lists sessions by disagrees with the
session files it indexes (the module is named for what it checks, as no module outside
`formats/` is named for a format)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, cast

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import IndexEntries
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import IndexDrift, IndexedSession
from sessionfix.rules.base import Invariant, Rule, RuleContext, unsafe

PROMPT_SHOWN: Final = 60
"""Characters of a first prompt a message quotes."""


def _quoted(prompt: str) -> str:
    shown = " ".join(prompt.split())
    return repr(shown if len(shown) <= PROMPT_SHOWN else shown[: PROMPT_SHOWN - 1] + "…")


def _said(found: IndexedSession) -> list[str]:
    """What is wrong, one clause per kind of drift, with what it does to the lists."""
    said: list[str] = []
    file = found.files[0] if found.files else None
    for drift in found.drift:
        if drift is IndexDrift.UNLISTED:
            said.append(
                f"the session index holds no entry for {file}, so the lists read from the "
                "index (resume picker, sidebar) do not show the session"
            )
        elif drift is IndexDrift.MISSING_FILE:
            elsewhere = (
                f"the session's file is {file}"
                if found.rebuildable and file is not None
                else "no session file holds its id, so resuming it by id fails"
            )
            said.append(f"its index entry names {found.named}, which is gone; {elsewhere}")
        elif drift is IndexDrift.ARCHIVED_FLAG:
            flag, folder = (
                ("archived", "outside the archive folder")
                if found.archived
                else ("not archived", "in the archive folder")
            )
            hidden = (
                "the list of active sessions leaves it out"
                if found.archived
                else "it is listed as active though archived"
            )
            said.append(f"its index entry says {flag} but its file is {folder}: {hidden}")
        elif drift is IndexDrift.UNTITLED:
            prompt = _quoted(found.first_prompt or "")
            said.append(
                f"its index entry holds no first prompt though its file has one ({prompt}), "
                "so lists that show only sessions with one leave it out"
            )
        elif drift is IndexDrift.SHARED_ID:
            said.append(
                f"{len(found.files)} session files hold its id ({', '.join(found.files)}); "
                "the index lists one of them"
            )
    return said


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    editor = cast(IndexEntries, ctx.editor)
    for index, found in sorted(view.indexed_sessions.items()):
        fix = None
        if found.rebuildable:
            action = (
                "make the missing index entry from the session's file"
                if found.named is None
                else "mend the index entry from the session's file"
            )
            fix = unsafe(action, ctx.rewrite_record(index, editor.rebuilt_entry()))
        yield ctx.entry_diagnostic(RULE, index, "; ".join(_said(found)), fix=fix)


RULE = Rule(
    code="SF701",
    name="codex-index-drift",
    severity=Severity.WARNING,
    fix="unsafe (makes or mends the entry from the session's file), else none",
    requires=frozenset({Capability.SESSION_INDEX}),
    summary="The index its agent lists sessions by disagrees with the session files",
    check=check,
    invariant=Invariant.NO_MORE,
)
