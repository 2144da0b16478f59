"""SF301 stale-file-read: a file read whose file was later fully rewritten."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.paths import matches_glob, normalize
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext, safe
from sessionfix.tracking import FileEvent
from sessionfix.view import Bit, Kind, Role

PLACEHOLDER = (
    "[sessionfix: stale read of {path} removed - file was fully rewritten later "
    "(call {call_id}); re-read it if needed]"
)


@dataclass(frozen=True, slots=True)
class StaleRead:
    result: int
    path: str
    """The read call's path argument, as written."""
    write_call_id: str
    write_row: int


def stale_reads(ctx: RuleContext) -> list[StaleRead]:
    """Read results superseded by a later successful full write of the same path (§5.2)."""
    view = ctx.view
    tracking = ctx.tracking
    if not tracking.reads or not tracking.writes:
        return []
    positions = view.path_positions
    normalized: dict[tuple[str, str | None], str] = {}
    writes: dict[str, list[tuple[int, FileEvent]]] = {}
    for write in tracking.writes:
        if not write.bits & Bit.SUCCEEDED:
            continue
        raw = (write.path, write.base)
        key = normalized.get(raw)
        if key is None:
            key = normalized[raw] = normalize(write.path, write.base)
        writes.setdefault(key, []).append((positions[write.record], write))
    protected_from = _protected_position(ctx)
    protect = ctx.settings.protect
    found: list[StaleRead] = []
    skip = Bit.ERRORED | Bit.OWN_MARKER
    for read in tracking.reads:
        bits = read.bits
        if bits & skip or not bits & Bit.TEXT_ONLY:
            continue
        raw = (read.path, read.base)
        path = normalized.get(raw)
        if path is None:
            path = normalized[raw] = normalize(read.path, read.base)
        later_writes = writes.get(path)
        if later_writes is None:
            continue
        position = positions[read.record]
        if position >= protected_from:
            continue
        later = next((w for p, w in later_writes if p > position), None)
        if later is None or any(matches_glob(path, glob) for glob in protect):
            continue
        placeholder = PLACEHOLDER.format(path=read.path, call_id=later.call_id)
        if read.text_size <= len(placeholder.encode("utf-8", "surrogatepass")):
            continue
        found.append(StaleRead(read.record, read.path, later.call_id, view.rows[later.record]))
    return found


def _protected_position(ctx: RuleContext) -> int:
    """Path position from which reads are protected by --protect-last-turns."""
    turns = ctx.settings.protect_last_turns
    view = ctx.view
    if turns <= 0:
        return len(view.active_path)
    seen = 0
    for position in range(len(view.active_path) - 1, -1, -1):
        index = view.active_path[position]
        if view.kinds[index] == Kind.MESSAGE and view.roles[index] == Role.USER:
            seen += 1
            if seen == turns:
                return position
    return 0


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for stale in ctx.shared(stale_reads):
        placeholder = PLACEHOLDER.format(path=stale.path, call_id=stale.write_call_id)
        yield ctx.entry_diagnostic(
            RULE,
            stale.result,
            f"read of {stale.path!r} is stale: the file was fully rewritten later "
            f"(write {stale.write_call_id} on line {stale.write_row})",
            fix=safe(
                "replace the file contents with a placeholder telling the model to re-read",
                ctx.rewrite_record(stale.result, ctx.editor.replace_result_text(placeholder)),
            ),
        )


RULE = Rule(
    code="SF301",
    name="stale-file-read",
    severity=Severity.INFO,
    fix="safe",
    formats=PI_FORMATS,
    summary="A file read whose file was later fully rewritten",
    check=check,
)
