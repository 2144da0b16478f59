"""SF705 event-log-bloat: a session's log of writes, which its agent never loads, is large."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.rules.base import Rule, RuleContext
from sessionfix.units import human_bytes

LARGE_LOG: Final = 64 << 20
"""Bytes of a session's event log from which it is reported."""


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    logged = view.event_log_bytes
    if logged is None or logged < LARGE_LOG or not len(view):
        return
    records = sum(view.sizes)
    yield ctx.entry_diagnostic(
        RULE,
        0,
        f"the agent's event log holds {human_bytes(logged)} for this session, "
        f"{logged / max(records, 1):.0f} times its {human_bytes(records)} of records; the "
        "agent loads none of it (it feeds workspace sync only) and VACUUM frees none of it",
    )


RULE = Rule(
    code="SF705",
    name="event-log-bloat",
    severity=Severity.INFO,
    fix="none",
    requires=frozenset({Capability.EVENT_LOG}),
    summary="A session's event log, which its agent never loads, is large",
    check=check,
)
