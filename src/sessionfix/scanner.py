"""Streaming a session file into its view and line report, on one core or several.

One pass reads binary lines and hands each to the format adapter's typed partial
decode; only lines that fail it go through the reader's slow path. Memory holds the
compact per-record index of the view, never the file's text. Large files are cut
into byte ranges decoded by worker processes, whose compact results are
concatenated in file order.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from bisect import bisect_left
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import repeat
from operator import add, sub
from pathlib import Path
from typing import BinaryIO

from sessionfix.errors import InputError, NotASessionFile
from sessionfix.formats import Format, FormatAdapter, RecordEditor, detect, make_adapter
from sessionfix.reader import (
    FileInfo,
    LineFinding,
    LineIssue,
    LineReport,
    classify_line,
    open_session,
)
from sessionfix.tracking import PathTracker, Tracking
from sessionfix.view import SessionView, all_distinct

FAST_PATH_MISSES = (ValueError, RecursionError)
"""msgspec's DecodeError/ValidationError and UnicodeDecodeError are ValueErrors."""

READ_BYTES = 256 << 10
_PLUS_ONE = (1).__add__
PARALLEL_MIN_BYTES = 48 << 20
"""Below this, starting worker processes costs more than it saves."""
TASK_BYTES = 24 << 20

ProgressCallback = Callable[[int], None]


@dataclass(slots=True)
class ScannedFile:
    """The result of reading a file: its view, line-level facts, conversation facts,
    and how to edit its records."""

    view: SessionView
    lines: LineReport
    info: FileInfo
    editor: RecordEditor
    tracking: Tracking


class _Pass:
    """State of one streaming pass over a file or a byte range of it.

    Lines are read in blocks. A block whose lines all decode as records of the format
    goes through one batch decode and column-wise indexing; any other block is
    handled line by line, with the reader's slow path for lines that do not decode.
    """

    def __init__(self, adapter: FormatAdapter | None, path: Path) -> None:
        self.path = path
        self.lines = LineReport()
        self.adapter = adapter
        self.row = 0
        self.last_row = 0

    def run(
        self,
        handle: BinaryIO,
        offset: int,
        end: int | None,
        progress: ProgressCallback | None,
    ) -> None:
        start = reported = offset
        pending: list[bytes] = []
        final_newline = True
        while True:
            data = handle.read(READ_BYTES)
            if not data:
                break
            begin = 0
            if pending:
                # The line begun in the previous block goes on its own, so that the
                # block itself is never copied to join it.
                begin = data.find(b"\n") + 1
                if not begin:
                    pending.append(data)
                    continue
                pending.append(data[:begin])
                straddling = b"".join(pending)
                pending = []
                offset, stopped = self._block(straddling, len(straddling), offset, end)
                if stopped:
                    break
            limit = data.rfind(b"\n") + 1
            if not limit:
                pending.append(data)
                continue
            if limit < len(data):
                pending.append(data[limit:])
            if begin < limit:
                offset, stopped = self._block(data, limit, offset, end, begin=begin)
            if progress is not None:
                progress(offset - reported)
                reported = offset
            if stopped:
                pending = []
                break
        if pending:
            final_newline = False
            last = b"".join(pending)
            offset, _ = self._block(last, len(last), offset, end, terminated=False)
            if progress is not None:
                progress(offset - reported)
        lines = self.lines
        lines.line_count = self.row
        lines.size = offset - start
        lines.final_newline = final_newline
        lines.last_row = self.last_row

    def _block(
        self,
        raw: bytes,
        limit: int,
        offset: int,
        end: int | None,
        *,
        terminated: bool = True,
        begin: int = 0,
    ) -> tuple[int, bool]:
        """Index the lines of `raw[begin:limit]` (each ending in a newline unless not
        `terminated`), the first of which starts at file offset `offset`.

        Returns the next offset and whether the byte range ended inside the block.
        """
        base = offset - begin
        starts = _line_starts(raw, limit, terminated, begin)
        count = len(starts) - 1
        stopped = False
        if end is not None and base + starts[-2] >= end:
            count = bisect_left(starts, end - base, hi=count)
            del starts[count + 1 :]
            stopped = True
        if not count:
            return offset, stopped
        next_offset = base + (starts[-1] if terminated else limit)
        lengths = list(map(sub, starts[1:], map(_PLUS_ONE, starts)))
        first_row = self.row + 1
        sizes = lengths
        has_cr = raw.find(b"\r", starts[0], limit) >= 0
        if has_cr:
            sizes = [
                size - 1 if size and raw[start + size - 1] == 13 else size
                for start, size in zip(starts, lengths, strict=False)
            ]
            # An unterminated last line ending in "\r" counts too: the newline that would
            # complete it makes it a CRLF line.
            self.lines.crlf_rows.extend(
                first_row + k for k in range(count) if sizes[k] != lengths[k]
            )
        done = 0
        while self.adapter is None and done < count:
            start = starts[done]
            self._line(raw[start : start + lengths[done]], base + start, sizes[done])
            done += 1
        adapter = self.adapter
        rest = count - done
        if adapter is not None and rest > 1 and _all_objects(raw, starts, sizes, done, count):
            first = starts[done]
            last = starts[count - 1] + lengths[-1]
            try:
                records = adapter.decode_lines(memoryview(raw)[first:last])
            except FAST_PATH_MISSES:
                records = None
            # decode_lines takes newlines for whitespace: as many records as lines, and
            # every line a "{" ... "}" (after which JSON never continues with "{"), prove
            # one record per line, none glued and none spanning two lines.
            if records is not None and len(records) == rest:

                def line(k: int) -> bytes:
                    return raw[starts[done + k] : starts[done + k] + sizes[done + k]]

                adapter.ingest_batch(
                    records,
                    first_row + done,
                    list(map(base.__add__, starts[done:count])),
                    sizes[done:] if done else sizes,
                    line,
                )
                self.row += rest
                self.last_row = self.row
                return next_offset, stopped
        for k in range(done, count):
            self._line(raw[starts[k] : starts[k] + lengths[k]], base + starts[k], sizes[k])
        return next_offset, stopped

    def _line(self, line: bytes, offset: int, size: int) -> None:
        self.row += 1
        row = self.row
        adapter = self.adapter
        if adapter is not None:
            try:
                record = adapter.decode(line)
            except FAST_PATH_MISSES:
                pass
            else:
                adapter.ingest(record, line, row, 1, offset, size)
                self.last_row = row
                return
        if self._slow(line[:size], row, offset):
            self.last_row = row

    def _slow(self, body: bytes, row: int, offset: int) -> bool:
        """Classify a line the fast path rejected. Returns whether it has content."""
        outcome = classify_line(body)
        has_content = outcome.damaged is not None or bool(outcome.records)
        for issue, extra in outcome.findings:
            finding = LineFinding(issue, row, offset, len(body), **extra)
            if issue is LineIssue.GLUED:
                finding.records = tuple((r.start, r.end) for r in outcome.records)
            elif issue is LineIssue.UNDEFINED:
                has_content = True
            self.lines.findings.append(finding)
        for record in outcome.records:
            if self.adapter is None:
                self.adapter = make_adapter(detect(record.value), self.path)
            column = _column(body, record.start)
            data = body[record.start : record.end]
            self.adapter.add_object(record.value, data, row, column, offset + record.start)
        if outcome.damaged is not None:
            self.lines.findings.append(
                LineFinding(
                    LineIssue.UNPARSABLE,
                    row,
                    offset,
                    len(body),
                    detail=outcome.damaged_reason,
                    span=outcome.damaged,
                    recoverable=outcome.recoverable,
                    truncated=outcome.damaged_truncated,
                    json_kind=outcome.json_kind,
                )
            )
        return has_content


def _line_starts(raw: bytes, limit: int, terminated: bool, begin: int = 0) -> list[int]:
    """Start offsets of the lines of `raw[begin:limit]`, and the end (plus one for the
    newline) of the last: line k is `raw[starts[k] : starts[k + 1] - 1]`."""
    starts = [begin]
    append = starts.append
    find = raw.find
    position = find(b"\n", begin, limit)
    while position >= 0:
        position += 1
        append(position)
        position = find(b"\n", position, limit)
    if not terminated:
        append(limit + 1)
    return starts


def _all_objects(raw: bytes, starts: list[int], sizes: list[int], first: int, stop: int) -> bool:
    """Whether lines first..stop-1 all start with "{" and end with "}" (so none is blank
    and no JSON value can run on from one line into the next)."""
    heads = bytes(map(raw.__getitem__, starts[first:stop]))
    if heads.count(b"{") != stop - first:
        return False
    ends = map(add, starts[first:stop], sizes[first:stop])
    tails = bytes(map(raw.__getitem__, map(sub, ends, repeat(1))))
    return tails.count(b"}") == stop - first


def _column(body: bytes, start: int) -> int:
    if start == 0:
        return 1
    return len(body[:start].decode("utf-8", "replace")) + 1


def settle_last_line(lines: LineReport) -> None:
    """A record cut off on the last non-blank line is a torn write, not mid-file damage."""
    last_row = lines.last_row
    for finding in reversed(lines.findings):
        if finding.row > last_row:
            continue
        if finding.row < last_row:
            break
        if finding.issue is LineIssue.UNPARSABLE:
            lines.last_row_parsed = False
            if finding.truncated:
                finding.issue = LineIssue.TORN


def refuse_non_jsonl(path: Path, lines: LineReport, records: int) -> None:
    """Lines that are mostly not JSON objects are not a session to check or repair: a
    log, a pretty-printed document, binary data without a known signature."""
    garbage = {
        finding.row
        for finding in lines.findings
        if finding.issue is LineIssue.UNPARSABLE
        and not finding.truncated
        and finding.recoverable is None
    }
    if len(garbage) > records:
        content = len(garbage) + records
        raise NotASessionFile(
            f"{path}: not a session file of a known format ({len(garbage)} of {content} "
            "lines are not JSON objects)"
        )


@contextmanager
def gc_paused() -> Iterator[None]:
    """The index is millions of small objects that live until the end: no cycles to collect."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def worker_count(size: int, jobs: int | None) -> int:
    """Processes to read with. Only forked workers share the parent's string hashing,
    which the id keys of byte ranges read apart must agree on."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if jobs is not None:
        return max(1, jobs)
    if size < PARALLEL_MIN_BYTES:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def read_session(
    path: Path,
    forced: Format = Format.AUTO,
    progress: ProgressCallback | None = None,
    jobs: int | None = None,
    *,
    session_only: bool = True,
) -> ScannedFile:
    """Stream a file into its view and line report (no rules run). Unless not
    `session_only` (a repair's own result, checked by the rules instead), bytes that are
    not a session file are refused with `NotASessionFile`."""
    handle, info = open_session(path)
    with handle, gc_paused():
        workers = worker_count(info.size, jobs)
        parallel = _read_parallel(handle, info, forced, workers, progress) if workers > 1 else None
        if parallel is not None:
            adapter, lines, tracker = parallel
        else:
            state = _Pass(None if forced is Format.AUTO else make_adapter(forced, path), path)
            try:
                handle.seek(0)
                state.run(handle, 0, None, progress)
            except OSError as exc:
                raise InputError(f"{path}: read failed ({exc.strerror or exc})") from None
            lines = state.lines
            adapter = state.adapter or make_adapter(Format.UNKNOWN, path)
            tracker = adapter.tracker
        settle_last_line(lines)
        if session_only:
            refuse_non_jsonl(path, lines, len(adapter.view))
        adapter.finish(lines)
        view = adapter.view
        tracking = tracker.finish() if view.linear else _replay_path(adapter, handle)
    return ScannedFile(view, lines, info, adapter.editor, tracking)


def _replay_path(adapter: FormatAdapter, handle: BinaryIO) -> Tracking:
    """Conversation facts of a branched session: walk the active path's records again.

    The single pass followed file order, which is the path only in a linear session.
    """
    view = adapter.view
    adapter.tracker = tracker = PathTracker()
    offsets, sizes = view.offsets, view.sizes
    try:
        for index in view.active_path:
            handle.seek(offsets[index])
            adapter.replay(index, handle.read(sizes[index]))
    except OSError as exc:
        raise InputError(f"{view.path}: read failed ({exc.strerror or exc})") from None
    return tracker.finish()


# ---- parallel reading ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Task:
    path: Path
    start: int
    end: int
    format: Format
    context: object


@dataclass(slots=True)
class _Chunk:
    view: SessionView
    lines: LineReport
    tracker: PathTracker


def detect_format(path: Path) -> Format:
    """The format a scan of `path` detects (from its first record), UNKNOWN if none."""
    handle, _ = open_session(path)
    with handle:
        peeked = _peek_format(handle, path, Format.AUTO)
    return Format.UNKNOWN if peeked is None else peeked[0]


def _peek_format(handle: BinaryIO, path: Path, forced: Format) -> tuple[Format, object] | None:
    """Detect the format and what later byte ranges need to know, from the first record."""
    handle.seek(0)
    for raw in handle:
        outcome = classify_line(raw.rstrip(b"\r\n"))
        if not outcome.records:
            continue
        fmt = forced if forced is not Format.AUTO else detect(outcome.records[0].value)
        if fmt is Format.UNKNOWN:
            return None
        probe = make_adapter(fmt, path)
        probe.add_object(outcome.records[0].value, b"", 1, 1, 0)
        return fmt, probe.context
    return None


def _read_parallel(
    handle: BinaryIO,
    info: FileInfo,
    forced: Format,
    workers: int,
    progress: ProgressCallback | None,
) -> tuple[FormatAdapter, LineReport, PathTracker] | None:
    peeked = _peek_format(handle, info.path, forced)
    if peeked is None:
        return None
    fmt, context = peeked
    count = max(workers, -(-info.size // TASK_BYTES))
    bounds = [info.size * k // count for k in range(count + 1)]
    tasks = [
        _Task(info.path, bounds[k], bounds[k + 1], fmt, None if k == 0 else context)
        for k in range(count)
    ]
    merged = make_adapter(fmt, info.path, context)
    lines = LineReport()
    tracker: PathTracker | None = None
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for task, chunk in zip(tasks, pool.imap(_read_range, tasks), strict=True):
            row_offset = lines.line_count
            base = len(merged.view)
            merged.view.extend(chunk.view, row_offset)
            lines.extend(chunk.lines, row_offset)
            if tracker is None:
                tracker = chunk.tracker
            else:
                tracker.absorb(chunk.tracker, base)
            if progress is not None:
                progress(task.end - task.start)
        view = merged.view
        if view.key_buckets is not None:
            shares = [view.key_buckets[k::workers] for k in range(workers)]
            view.keys_distinct = all(pool.map(all_distinct, shares))
            view.key_buckets = None
    assert tracker is not None
    return merged, lines, tracker


def _read_range(task: _Task) -> _Chunk:
    """Worker: decode the lines that start inside [start, end)."""
    gc.disable()
    adapter = make_adapter(task.format, task.path, task.context)
    state = _Pass(adapter, task.path)
    try:
        with open(task.path, "rb") as handle:
            start = task.start
            if start > 0:
                handle.seek(start - 1)
                if handle.read(1) != b"\n":
                    start += len(handle.readline())
            handle.seek(start)
            if start < task.end:
                state.run(handle, start, task.end, None)
    except OSError as exc:
        raise InputError(f"{task.path}: read failed ({exc.strerror or exc})") from None
    view = adapter.view
    view.largest_size = max(view.sizes, default=0)
    if view.tree:
        view.partition_keys()
    return _Chunk(view, state.lines, adapter.tracker)
