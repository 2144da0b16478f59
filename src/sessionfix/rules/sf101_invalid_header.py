"""SF101 invalid-header: the session header is missing, damaged or invalid."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic, RebuildHeader, Severity
from sessionfix.formats import Format
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.pi import VALID_VERSIONS
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
        stem = ctx.origin.name.removesuffix(".jsonl")
        if stem != header.id and not stem.startswith(header.id + "-topic-"):
            yield ctx.diagnostic(
                RULE,
                header.row,
                f"OpenClaw header id {header.id!r} differs from the file name {stem!r}; "
                "the SQLite import refuses such transcripts",
                index=0,
            )


def _missing_header(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    damaged_row = ctx.shared(damaged_header_row)
    if damaged_row is not None:
        row = damaged_row
        message = f"line {row} is a damaged session header; {view.headerless}"
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
    header["id"] = session_id_from_name(ctx.origin, ctx.format)
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


def session_id_from_name(path: Path, fmt: Format) -> str:
    """OpenClaw names a transcript `<sessionId>.jsonl`; pi `<timestamp>_<sessionId>.jsonl`."""
    stem = path.name.removesuffix(".jsonl")
    if fmt is Format.OPENCLAW or "_" not in stem:
        return stem
    return stem.split("_", 1)[1]


RULE = Rule(
    code="SF101",
    name="invalid-header",
    severity=Severity.ERROR,
    fix="unsafe (pi missing/damaged header, with --cwd), else none",
    requires=frozenset({Capability.HEADER}),
    summary="The session header is missing, damaged or invalid",
    check=check,
)
