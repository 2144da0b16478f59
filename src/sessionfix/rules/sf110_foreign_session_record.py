"""SF110 foreign-session-record: records stamped with another session's id."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    by_session: dict[str, list[int]] = {}
    for index, session in sorted(view.foreign_sessions.items()):
        by_session.setdefault(session, []).append(index)
    for session, records in by_session.items():
        count = len(records)
        more = f" and {count - 1} more record{'s' if count > 2 else ''}" if count > 1 else ""
        yield ctx.entry_diagnostic(
            RULE,
            records[0],
            f"this record{more} carry sessionId {session!r}, not the session the file is "
            "named after: entries of another session landed in this file",
        )


RULE = Rule(
    code="SF110",
    name="foreign-session-record",
    severity=Severity.INFO,
    fix="none",
    requires=frozenset({Capability.SESSION_STAMPS}),
    summary="Records stamped with another session's id",
    check=check,
)
