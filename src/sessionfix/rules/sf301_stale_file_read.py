"""SF301 stale-file-read: a file read whose file was later fully rewritten."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.paths import matches_glob, normalize
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext, safe
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
    reads, writes = tracking.reads, tracking.writes
    if not reads or not writes:
        return []
    positions = view.path_positions
    written: dict[str, list[tuple[int, int]]] = {}
    for number, (record, path, base, bits) in enumerate(
        zip(writes.index, writes.paths, writes.bases, writes.bits, strict=True)
    ):
        if bits & Bit.SUCCEEDED:
            key = normalize(path, base)
            written.setdefault(key, []).append((positions[record], number))
    # Normalisation never changes a path's last segment (unless it is "." or ".."),
    # so reads of other file names are ruled out before normalising them.
    names = {key.rpartition("/")[2] for key in written}
    protected_from = _protected_position(ctx)
    protect = ctx.settings.protect
    skip = Bit.ERRORED | Bit.OWN_MARKER
    found: list[StaleRead] = []
    for record, path, base, bits, size in zip(
        reads.index, reads.paths, reads.bases, reads.bits, reads.sizes, strict=True
    ):
        if bits & skip or not bits & Bit.TEXT_ONLY:
            continue
        name = path.replace("\\", "/").rstrip("/").rpartition("/")[2]
        if name not in names and name not in ("", ".", ".."):
            continue
        key = normalize(path, base)
        candidates = written.get(key)
        if candidates is None:
            continue
        position = positions[record]
        if position >= protected_from:
            continue
        later = next((number for p, number in candidates if p > position), None)
        if later is None or any(matches_glob(key, glob) for glob in protect):
            continue
        call_id = writes.call_ids[later]
        placeholder = PLACEHOLDER.format(path=path, call_id=call_id)
        if size <= len(placeholder.encode("utf-8", "surrogatepass")):
            continue
        found.append(StaleRead(record, path, call_id, view.rows[writes.index[later]]))
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
