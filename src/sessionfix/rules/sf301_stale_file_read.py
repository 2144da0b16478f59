"""SF301 stale-file-read: a file read whose file was later fully rewritten."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import compress, repeat
from operator import and_, itemgetter, lt, methodcaller
from typing import NamedTuple, cast

from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.formats import ResultMarks
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.model.view import Bit, SessionView
from sessionfix.rules.base import Counted, Rule, RuleContext, Weight, safe
from sessionfix.rules.paths import matches_glob, normalize

_FORWARD = methodcaller("replace", "\\", "/")
_TRIM = methodcaller("rstrip", "/")
_TAIL = methodcaller("rpartition", "/")
_LAST = itemgetter(2)
_FIRST = itemgetter(0)
_ERRORED_ONLY = bytes(value & Bit.ERRORED for value in range(256))
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
    write_record: int
    placeholder: str
    """What the result's text becomes."""


def stale_reads(ctx: RuleContext) -> list[StaleRead]:
    """Read results superseded by a later successful full write of the same path (§5.2).

    Column-wise: a read is stale when its path position comes before the last
    successful write of its path (and before the protected tail); only the stale
    ones are then paired with the first such write after them.
    """
    view = ctx.view
    tracking = ctx.tracking
    reads, writes = tracking.reads, tracking.writes
    if not reads or not writes:
        return []
    protect = ctx.settings.protect
    written: dict[str, list[int]] = {}
    writers: dict[str, list[int]] = {}
    spelled: dict[tuple[str, str | None], str] = {}
    write_positions = view.positions_of(writes.index)
    for number in compress(range(len(writes)), map(and_, writes.bits, repeat(Bit.SUCCEEDED))):
        pair = (writes.paths[number], writes.bases[number])
        key = spelled.get(pair)
        if key is None:
            key = spelled[pair] = normalize(*pair)
        written.setdefault(key, []).append(write_positions[number])
        writers.setdefault(key, []).append(number)
    # Reads usually spell a path as its write did: those resolve without normalising.
    targets = {pair: _unprotected(key, protect) for pair, key in spelled.items()}
    # Normalisation never changes a path's last segment (unless it is "." or ".."),
    # so reads of other file names are ruled out before normalising.
    names = {key.rpartition("/")[2] for key in written} | {"", ".", ".."}
    paths, bases = reads.paths, reads.bases
    joined = "\n".join(paths)
    if "\\" in joined or "/\n" in joined or joined.endswith("/"):
        segments = map(_LAST, map(_TAIL, map(_TRIM, map(_FORWARD, paths))))
    else:
        segments = map(_LAST, map(_TAIL, paths))
    candidates = list(compress(range(len(paths)), map(names.__contains__, segments)))
    errored = reads.bits.translate(_ERRORED_ONLY)
    if Bit.ERRORED in errored:
        candidates = [number for number in candidates if not errored[number]]
    pairs = list(
        zip(map(paths.__getitem__, candidates), map(bases.__getitem__, candidates), strict=True)
    )
    for pair in set(pairs).difference(targets):
        targets[pair] = _written_key(*pair, written, protect)
    # Reads at or after this position are protected; so is any read with no write after it.
    before: dict[str | None, int] = {None: -1}
    protected_from = _protected_position(ctx)
    before.update((key, min(later[-1], protected_from)) for key, later in written.items())
    records = list(map(reads.index.__getitem__, candidates))
    positions = view.positions_of(records)
    resolved = list(map(targets.__getitem__, pairs))
    found: list[StaleRead] = []
    for position, record, key, path in compress(
        zip(positions, records, resolved, map(_FIRST, pairs), strict=True),
        map(lt, positions, map(before.__getitem__, resolved)),
    ):
        assert key is not None
        write = writers[key][bisect_right(written[key], position)]
        call_id = writes.call_ids[write]
        placeholder = PLACEHOLDER.format(path=path, call_id=call_id)
        if _worth_replacing(view, record, placeholder):
            found.append(
                StaleRead(
                    record,
                    path,
                    call_id,
                    view.rows[writes.index[write]],
                    writes.index[write],
                    placeholder,
                )
            )
    return found


def _written_key(
    path: str, base: str | None, written: dict[str, list[int]], protect: Sequence[str]
) -> str | None:
    """The normalised path a read targets, if that path was written and is not protected."""
    key = normalize(path, base)
    return _unprotected(key, protect) if key in written else None


def _unprotected(key: str, protect: Sequence[str]) -> str | None:
    return None if any(matches_glob(key, glob) for glob in protect) else key


def _worth_replacing(view: SessionView, result: int, placeholder: str) -> bool:
    """The result is text only, longer than its placeholder, and not one already."""
    limit = len(placeholder.encode("utf-8", "surrogatepass"))
    if view.sizes[result] <= limit or view.result_text_exceeds is None:
        return False
    return view.result_text_exceeds(result, limit, MARKER)


def _protected_position(ctx: RuleContext) -> int:
    """Path position from which reads are protected by --protect-last-turns."""
    return ctx.view.last_turns_start(ctx.settings.protect_last_turns)


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    marks = ctx.provides(Capability.PRUNE_MARKS)
    found = ctx.shared(stale_reads)
    newest = max((stale.result for stale in found), default=None)
    for stale in found:
        if marks:
            yield _marked(ctx, stale, _shielded(ctx, found) if stale.result == newest else 0)
            continue
        if ctx.provides(Capability.APPEND_ONLY):
            yield ctx.entry_diagnostic(
                RULE,
                stale.result,
                said(
                    f"read of {stale.path!r} is stale: the file was fully rewritten later "
                    f"(write {stale.write_call_id} ",
                    on_line(stale.write_row),
                    "); left as it is: the agent would append everything after it again",
                ),
            )
            continue
        yield ctx.entry_diagnostic(
            RULE,
            stale.result,
            said(
                f"read of {stale.path!r} is stale: the file was fully rewritten later "
                f"(write {stale.write_call_id} ",
                on_line(stale.write_row),
                ")",
            ),
            fix=safe(
                "replace the file contents with a placeholder telling the model to re-read",
                ctx.rewrite_record(stale.result, ctx.editor.replace_result_text(stale.placeholder)),
            ),
        )


def _shielded(ctx: RuleContext, found: list[StaleRead]) -> int:
    """Results before the newest mark that the agent's own pruning could still clear,
    and which it no longer reaches: it stops at the first mark it meets, walking back."""
    newest = max(stale.result for stale in found)
    marked = {stale.result for stale in found}
    return sum(1 for index in ctx.view.unpruned_results if index < newest and index not in marked)


def _marked(ctx: RuleContext, stale: StaleRead, shielded: int) -> Diagnostic:
    """A stale read in a format whose agent prunes results by a mark: marked as the
    agent marks it, the output kept for its UI and undo (not when the superseding call
    tells no time to date the mark by); the newest mark says how many older results the
    agent's own pruning, which stops at it, no longer reaches."""
    editor = cast(ResultMarks, ctx.editor)
    behind = (
        f"; the agent's own pruning stops at this mark: {shielded} older "
        + (
            "result it could still clear lies"
            if shielded == 1
            else "results it could still clear lie"
        )
        + " behind it"
        if shielded
        else ""
    )
    at = editor.pruned_at(ctx.load_record(stale.write_record))
    fix = None
    if at is not None:
        fix = safe(
            "mark the result pruned, as the agent's own pruning does: the model is sent "
            "the agent's placeholder, the output stays for its UI" + behind,
            ctx.rewrite_record(stale.result, editor.mark_pruned(at)),
        )
    return ctx.entry_diagnostic(
        RULE,
        stale.result,
        said(
            f"read of {stale.path!r} is stale: the file was fully rewritten later "
            f"(write {stale.write_call_id} ",
            on_line(stale.write_row),
            ")",
        ),
        fix=fix,
    )


RULE = Rule(
    code="SF301",
    name="stale-file-read",
    severity=Severity.INFO,
    fix="safe (none where an edit rebranches: CodeWhale)",
    requires=frozenset({Capability.TOOL_CALLS, Capability.FILE_ACTIONS}),
    summary="A file read whose file was later fully rewritten",
    check=check,
    counted=Counted.STALE_READS_PRUNED,
    weighs=Weight.STALE_READS,
)
