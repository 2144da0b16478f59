"""SF301 stale-file-read: a file read whose file was later fully rewritten."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import compress
from operator import itemgetter, methodcaller
from typing import NamedTuple

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.paths import matches_glob, normalize
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext, safe
from sessionfix.view import Bit, Kind, Role, SessionView

_FORWARD = methodcaller("replace", "\\", "/")
_TRIM = methodcaller("rstrip", "/")
_TAIL = methodcaller("rpartition", "/")
_LAST = itemgetter(2)
MARKER = "[sessionfix:"
"""How every placeholder sessionfix writes begins."""
PLACEHOLDER = (
    "[sessionfix: stale read of {path} removed - file was fully rewritten later "
    "(call {call_id}); re-read it if needed]"
)


class StaleRead(NamedTuple):
    result: int
    path: str
    """The read call's path argument, as written."""
    write_call_id: str
    write_row: int
    placeholder: str
    """What the result's text becomes."""


def stale_reads(ctx: RuleContext) -> list[StaleRead]:
    """Read results superseded by a later successful full write of the same path (§5.2)."""
    view = ctx.view
    tracking = ctx.tracking
    reads, writes = tracking.reads, tracking.writes
    if not reads or not writes:
        return []
    positions = view.path_positions
    written: dict[str, list[int]] = {}
    writers: dict[str, list[int]] = {}
    # Reads usually spell a path as its write did: those resolve without normalising.
    spelled: dict[tuple[str, str | None], str] = {}
    for number, (record, path, base, bits) in enumerate(
        zip(writes.index, writes.paths, writes.bases, writes.bits, strict=True)
    ):
        if bits & Bit.SUCCEEDED:
            key = normalize(path, base)
            written.setdefault(key, []).append(positions[record])
            writers.setdefault(key, []).append(number)
            spelled[path, base] = key
    # Normalisation never changes a path's last segment (unless it is "." or ".."),
    # so reads of other file names are ruled out, column-wise, before normalising.
    names = {key.rpartition("/")[2] for key in written} | {"", ".", ".."}
    paths, bases = reads.paths, reads.bases
    joined = "\n".join(paths)
    if "\\" in joined or "/\n" in joined or joined.endswith("/"):
        segments = map(_LAST, map(_TAIL, map(_TRIM, map(_FORWARD, paths))))
    else:
        segments = map(_LAST, map(_TAIL, paths))
    protect = ctx.settings.protect
    targets = {pair: _unprotected(key, protect) for pair, key in spelled.items()}
    protected_from = _protected_position(ctx)
    found: list[StaleRead] = []
    for number in compress(range(len(paths)), map(names.__contains__, segments)):
        if reads.bits[number] & Bit.ERRORED:
            continue
        pair = (paths[number], bases[number])
        if pair in targets:
            target = targets[pair]
        else:
            target = targets[pair] = _written_key(*pair, written, protect)
        if target is None:
            continue
        record = reads.index[number]
        position = positions[record]
        if position >= protected_from:
            continue
        later = bisect_right(written[target], position)
        if later == len(written[target]):
            continue
        write = writers[target][later]
        path, call_id = paths[number], writes.call_ids[write]
        placeholder = PLACEHOLDER.format(path=path, call_id=call_id)
        if _worth_replacing(view, record, placeholder):
            found.append(
                StaleRead(record, path, call_id, view.rows[writes.index[write]], placeholder)
            )
    return found


def _written_key(
    path: str, base: str | None, written: dict[str, list[int]], protect: Sequence[str]
) -> str | None:
    key = normalize(path, base)
    return _unprotected(key, protect) if key in written else None


def _unprotected(key: str, protect: Sequence[str]) -> str | None:
    return None if any(matches_glob(key, glob) for glob in protect) else key


def _worth_replacing(view: SessionView, result: int, placeholder: str) -> bool:
    """The result is text only, longer than its placeholder, and not one already."""
    limit = len(placeholder.encode("utf-8", "surrogatepass"))
    if view.sizes[result] <= limit or view.read_result_text is None:
        return False
    text = view.read_result_text(result)
    return (
        text is not None
        and not text.startswith(MARKER)
        and len(text.encode("utf-8", "surrogatepass")) > limit
    )


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
        yield ctx.entry_diagnostic(
            RULE,
            stale.result,
            f"read of {stale.path!r} is stale: the file was fully rewritten later "
            f"(write {stale.write_call_id} on line {stale.write_row})",
            fix=safe(
                "replace the file contents with a placeholder telling the model to re-read",
                ctx.rewrite_record(stale.result, ctx.editor.replace_result_text(stale.placeholder)),
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
