"""SF101 invalid-header: the session header is missing, damaged or invalid."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, RebuildHeader, Severity
from sessionfix.formats import Format
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.pi import VALID_VERSIONS
from sessionfix.formats.pi.location import openclaw_session_of, pi_session_id_of
from sessionfix.location import Said, line, said
from sessionfix.rules.analysis import damaged_header_row
from sessionfix.rules.base import Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if ctx.format is Format.UNKNOWN:
        if not len(view) and ctx.lines.size == 0:
            yield ctx.diagnostic(RULE, 1, "file is empty: no session header and no records")
            return
        row = view.rows[0] if len(view) else 1
        yield ctx.diagnostic(
            RULE,
            row,
            "session format not recognised: the first record is neither a pi/OpenClaw header "
            "nor a Claude Code or Codex record",
            index=0 if len(view) else None,
        )
        return
    header = view.header
    if header is None:
        yield from _missing_header(ctx)
        return
    if not isinstance(header.id, str) or not header.id:
        yield ctx.diagnostic(
            RULE, header.row, "session header has no non-empty string `id`", index=0
        )
    version = header.version
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version not in VALID_VERSIONS
    ):
        yield ctx.diagnostic(
            RULE,
            header.row,
            f"session header `version` is {jsonutil.stringify(version)}, not 1, 2 or 3; "
            "OpenClaw's strict reader rejects the file",
            index=0,
        )
    if ctx.format is Format.OPENCLAW and isinstance(header.id, str) and header.id:
        named = openclaw_session_of(ctx.origin.name)
        # A checkpoint copies its transcript; the import neither takes nor checks it.
        if not named.checkpoint and named.session_id != header.id:
            yield ctx.diagnostic(
                RULE,
                header.row,
                f"OpenClaw header id {header.id!r} differs from the session id its file name "
                f"gives, {named.session_id!r}; the SQLite import refuses such transcripts",
                index=0,
            )


def _missing_header(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    damaged_row = ctx.shared(damaged_header_row)
    if damaged_row is not None:
        row = damaged_row
        message: str | Said = said(line(row), f" is a damaged session header; {view.headerless}")
    else:
        row = view.rows[0] if len(view) else 1
        message = f"the first record is not a session header; {view.headerless}"
    if not ctx.provides(Capability.HEADER_REBUILD):
        yield ctx.diagnostic(RULE, row, message, index=0 if len(view) else None)
        return
    if ctx.settings.cwd is None:
        yield ctx.diagnostic(RULE, row, message + " (pass --cwd to rebuild the header)", index=None)
        return
    header = _rebuilt_header(ctx)
    content = jsonutil.stringify(header)
    if damaged_row is not None:
        edit = RebuildHeader(damaged_row, lambda: content, replaces=True)
    else:
        edit = RebuildHeader(row - 1, lambda: content, replaces=False)
    yield ctx.diagnostic(
        RULE,
        row,
        message,
        fix=unsafe(f"write a new session header with id {header['id']!r}", edit),
    )


def _rebuilt_header(ctx: RuleContext) -> dict[str, Any]:
    view = ctx.view
    header: dict[str, Any] = {"type": "session"}
    if view.tree:
        header["version"] = 3
    name = ctx.origin.name
    header["id"] = (
        openclaw_session_of(name).session_id
        if ctx.format is Format.OPENCLAW
        else pi_session_id_of(name)
    )
    if len(view):
        try:
            first = ctx.load_record(0)
        except ValueError:
            first = {}
        timestamp = first.get("timestamp") if isinstance(first, dict) else None
        if isinstance(timestamp, str):
            header["timestamp"] = timestamp
    header["cwd"] = ctx.settings.cwd
    return header


RULE = Rule(
    code="SF101",
    name="invalid-header",
    severity=Severity.ERROR,
    fix="unsafe (pi missing/damaged header, with --cwd), else none",
    requires=frozenset({Capability.HEADER}),
    summary="The session header is missing, damaged or invalid",
    check=check,
)
