"""Streaming a session file into its view and line report, on one core or several.

One pass reads binary lines and hands each to the format adapter's typed partial
decode; only lines that fail it go through the reader's slow path. Memory holds the
compact per-record index of the view, never the file's text. Large files are cut
into byte ranges decoded by worker processes, whose compact results are
concatenated in file order.
"""

from __future__ import annotations

import gc
import os
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import add, sub
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from msgspec import Struct, field

from sessionfix import jsonutil
from sessionfix.errors import InputError, NotASessionFile
from sessionfix.formats import (
    Format,
    FormatAdapter,
    RecordEditor,
    detect,
    has_record_shape,
    make_adapter,
    reads_in_ranges,
)
from sessionfix.model.tracking import PathTracker, Tracking
from sessionfix.model.view import SessionView, all_distinct
from sessionfix.read.reader import (
    JUNK_RUN,
    FileInfo,
    LineFinding,
    LineIssue,
    LineReport,
    SlowLine,
    SpreadRecord,
    add_finding,
    classify_line,
    control_bytes,
    foreign_data,
    open_session,
    spread_ends,
)
from sessionfix.scan.cores import default_workers

if TYPE_CHECKING:
    import xxhash

FAST_PATH_MISSES = (ValueError, RecursionError)
"""msgspec's DecodeError/ValidationError and UnicodeDecodeError are ValueErrors."""

READ_BYTES = 256 << 10
LONG_LINE_BYTES = 1 << 20
"""A line longer than this is read again in one piece rather than joined from blocks."""
SEARCH_BYTES = 1 << 20
_PLUS_ONE = (1).__add__
TASK_BYTES = 8 << 20
"""The byte range a worker reads at a time: its results are what the parent holds
twice while it takes them over (pickled and unpickled)."""
WORKER_MIN_BYTES = 24 << 20
"""At most one worker per this many bytes of a file: below two of them, forking and
joining cost more than a second process saves."""
PARALLEL_KEYS_MIN = 1 << 20
"""Entry ids checked for repeats in the parent below this many; above, in workers."""

ProgressCallback = Callable[[int], None]


class ScannedFile(Struct):
    """The result of reading a file: its view, line-level facts, conversation facts,
    and how to edit its records."""

    view: SessionView
    lines: LineReport
    info: FileInfo
    editor: RecordEditor
    tracking: Tracking
    parts: KeptParts | None = None
    """With `keep_parts`, the byte ranges read in parallel, for `read_spliced`."""


class _Pass:
    """State of one streaming pass over a file or a byte range of it.

    Lines are read in blocks. A block whose lines all decode as records of the format
    goes through one batch decode and column-wise indexing; any other block is
    handled line by line, with the reader's slow path for lines that do not decode.
    """

    def __init__(
        self,
        adapter: FormatAdapter | None,
        path: Path,
        *,
        give_up: bool = False,
        named_as: Path | None = None,
    ) -> None:
        self.path = path
        self.named_as = named_as
        """The name the file is read under (`make_adapter`), default its own."""
        self.lines = LineReport()
        self.adapter = adapter
        self.row = 0
        self.last_row = 0
        self.give_up = give_up
        """Refuse the file as no session once `NO_RECORD_LINES` lines held no record."""
        self.garbage_rows = 0
        self.part_start = 0
        """Where the lines of the part under way start."""
        self.parts: list[tuple[Chunk, int, int | None]] | None = None
        """With a list, each line of `LONG_LINE_BYTES` or more is a part of its own, as
        are the stretches between (`read_parts`): the parts done so far."""
        self.hasher: xxhash.xxh3_64 | None = None
        """Digests the bytes of the part under way, as they are indexed."""
        self.cut_format = Format.UNKNOWN
        self.cut_context: object = None
        self.fd = -1
        """The file read (a spread record's lines are read again, joined, once it closes)."""
        self.spread: SpreadRecord | None = None
        """A record begun on a line that does not close it, followed line by line."""
        self.spread_garbage = 0
        """Lines of the open spread record that count as garbage if it does not close."""
        self.spread_ends: dict[int, int] = {}
        """Where the records that may be spread over the lines read ahead close
        (`spread_ends`): the first line of each → the end of its last."""
        self.spread_read_to = -1
        """The end of the lines read ahead, by which each record they hold is decided."""
        self.spread_budget: int | None = None
        """Bytes the records read ahead for may still be parsed (`SPREAD_PARSE_FACTOR`)."""

    def run(
        self,
        fd: int,
        offset: int,
        end: int | None,
        progress: ProgressCallback | None,
    ) -> None:
        """Index the lines that start at `offset` or later (and before `end`), reading
        the open file `fd` at positions of its own (the file offset is left alone)."""
        self.fd = fd
        self.part_start = reported = position = offset
        pending: list[bytes] = []
        pending_bytes = 0
        final_newline = True
        while True:
            data = os.pread(fd, READ_BYTES, position)
            if not data:
                break
            position += len(data)
            begin = 0
            stopped = False
            if pending:
                # The line begun in the previous block goes on its own, so that the
                # block itself is never copied to join it.
                begin = data.find(b"\n") + 1
                if not begin:
                    pending.append(data)
                    pending_bytes += len(data)
                    if pending_bytes < LONG_LINE_BYTES:
                        continue
                    pending = []
                    pending_bytes = 0
                    if end is not None and offset >= end:
                        break
                    if self.parts is not None:
                        self._cut(offset)
                    offset, terminated = self._long_line(fd, offset, position)
                    position = offset
                    if self.parts is not None and terminated:
                        self._cut(offset)
                    if progress is not None:
                        progress(offset - reported)
                        reported = offset
                    if not terminated:
                        final_newline = False
                        break
                    continue
                pending.append(data[:begin])
                straddling = b"".join(pending)
                pending = []
                pending_bytes = 0
                before = offset
                offset, stopped = self._block(straddling, len(straddling), offset, end)
                if self.hasher is not None:
                    self.hasher.update(memoryview(straddling)[: offset - before])
                del straddling
                if stopped:
                    break
            limit = data.rfind(b"\n") + 1
            if not limit:
                pending.append(data)
                pending_bytes += len(data)
                continue
            if limit < len(data):
                pending.append(data[limit:])
                pending_bytes += len(data) - limit
            if begin < limit:
                before = offset
                offset, stopped = self._block(data, limit, offset, end, begin=begin)
                if self.hasher is not None:
                    self.hasher.update(memoryview(data)[begin : begin + offset - before])
            if progress is not None:
                progress(offset - reported)
                reported = offset
            if stopped:
                pending = []
                break
        if pending and (end is None or offset < end):
            # (A line begun at `end` or later is the next range's.)
            final_newline = False
            last = b"".join(pending)
            before = offset
            offset, _ = self._block(last, len(last), offset, end, terminated=False)
            if self.hasher is not None:
                self.hasher.update(memoryview(last)[: offset - before])
            if progress is not None:
                progress(offset - reported)
        lines = self.lines
        lines.spread_open = self.spread is not None
        self._spread_fails()
        lines.line_count = self.row
        lines.size = offset - self.part_start
        lines.final_newline = final_newline
        lines.last_row = self.last_row

    def _cut(self, offset: int) -> None:
        """End the part under way before `offset`, a line start, and begin the next
        (not inside a spread record: it goes on in the next part)."""
        if offset == self.part_start or self.spread is not None:
            return
        assert self.parts is not None
        assert self.adapter is not None
        lines = self.lines
        lines.line_count = self.row
        lines.size = offset - self.part_start
        lines.last_row = self.last_row
        self.parts.append((_chunk_of(self.adapter, lines), self.part_start, self.part_digest()))
        self.adapter = make_adapter(self.cut_format, self.path, self.cut_context, self.named_as)
        self.lines = LineReport()
        self.row = self.last_row = 0
        self.part_start = offset

    def part_digest(self) -> int | None:
        """The digest of the part under way, the hasher left ready for the next."""
        if self.hasher is None:
            return None
        digest = self.hasher.intdigest()
        self.hasher.reset()
        return digest

    def _long_line(self, fd: int, offset: int, searched: int) -> tuple[int, bool]:
        """Index the line at `offset`, which runs on past `searched`, reading it once
        into one object of its own size: the blocks it was seen in are dropped rather
        than joined (a gigabyte line would otherwise be held two or three times).

        Returns the offset after the line and whether a newline ended it.
        """
        stop, terminated = find_newline(fd, searched)
        crlf = stop > offset and os.pread(fd, 1, stop - 1) == b"\r"
        if crlf:
            self.lines.crlf_rows.append(self.row + 1)
        line = read_exactly(fd, stop - offset - crlf, offset)
        if self.hasher is not None:
            self.hasher.update(line)
            self.hasher.update((b"\r" if crlf else b"") + (b"\n" if terminated else b""))
        self._line(line, offset, len(line))
        return stop + terminated, terminated

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
        runs: dict[int, int] = {}
        starts = _line_starts(
            raw, limit, terminated, begin, runs, None if end is None else end - base
        )
        count = len(starts) - 1
        stopped = False
        if end is not None and base + starts[-2] >= end:
            count = bisect_left(starts, end - base, hi=count)
            del starts[count + 1 :]
            stopped = True
        if not count:
            return offset, stopped
        if runs:
            return self._block_with_runs(raw, starts, count, base, runs, terminated, stopped)
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
        if (
            adapter is not None
            and self.spread is None
            and rest > 1
            and _all_objects(raw, starts, sizes, done, count)
        ):
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

    def _block_with_runs(
        self,
        raw: bytes,
        starts: list[int],
        count: int,
        base: int,
        runs: dict[int, int],
        terminated: bool,
        stopped: bool,
    ) -> tuple[int, bool]:
        """`_block` for lines among which runs of empty lines stand as one line each
        (`runs`: their index → how many empty lines), line by line."""
        limit = starts[count] - 1
        next_offset = base + (starts[count] if terminated else limit)
        for k in range(count):
            start = starts[k]
            empty = runs.get(k)
            if empty is not None:
                self.row += empty
                self._blank(self.row - empty + 1, base + start, empty - 1, empty)
                continue
            stop = starts[k + 1] - 1
            line = raw[start:stop]
            size = len(line)
            if size and line[-1] == 13:
                size -= 1
                self.lines.crlf_rows.append(self.row + 1)
            self._line(line, base + start, size)
        return next_offset, stopped

    def _line(self, line: bytes, offset: int, size: int) -> None:
        self.row += 1
        row = self.row
        body = line[:size] if size < len(line) else line
        if not body or body.isspace():
            if body.strip(b" \t"):  # vertical tabs and form feeds are control bytes
                self.lines.control_bytes += control_bytes(body)
            self._blank(row, offset, size)
            return
        adapter = self.adapter
        if adapter is not None and line[:1] in _OBJECT_STARTS:
            try:
                record = adapter.decode(line)
            except FAST_PATH_MISSES:
                pass
            else:
                if self.spread is None or not self._spread_goes_on(row, offset):
                    self._spread_fails()
                    adapter.ingest(record, line, row, 1, offset, size)
                    self.last_row = row
                    return
        if self._slow(body, row, offset):
            self.last_row = row

    def _blank(self, row: int, offset: int, length: int, rows: int = 1) -> None:
        """An empty or whitespace-only line, or a run of `rows` of them (whitespace a
        record spread over lines may hold)."""
        findings = self.lines.findings
        if findings:
            last = findings[-1]
            if last.issue is LineIssue.BLANK and last.row + last.rows == row:
                last.rows += rows
                last.tail = offset + rows - 1 - last.offset
                last.length = offset + length - last.offset
                return
        findings.append(LineFinding(LineIssue.BLANK, row, offset, length, rows=rows, tail=rows - 1))

    def _add(self, finding: LineFinding) -> None:
        """Record a finding; one that carries on a run of blank lines or of junk joins it."""
        add_finding(self.lines.findings, finding, bridge=self.spread is None)

    def _junk_bridged(self, row: int) -> bool:
        """Whether the findings end in a run of junk and then blank lines up to `row`."""
        findings = self.lines.findings
        return (
            len(findings) > 1
            and findings[-1].issue is LineIssue.BLANK
            and findings[-1].last_row == row - 1
            and findings[-2].run_kind == JUNK_RUN
            and findings[-2].last_row == findings[-1].row - 1
        )

    def _slow(self, body: bytes, row: int, offset: int) -> bool:
        """Classify a line the fast path rejected. Returns whether it has content."""
        lines = self.lines
        lines.control_bytes += control_bytes(body)
        findings = lines.findings
        if self.spread is None and self._junk_bridged(row) and _plain_junk(body):
            blank = findings.pop()
            findings[-1].absorb(blank)
        if (
            findings
            and findings[-1].run_kind == JUNK_RUN
            and findings[-1].last_row == row - 1
            and _plain_junk(body)
            and (self.spread is None or _CLOSING.search(body) is None)
        ):
            # A run of junk goes on: the line is not classified again (nor followed by
            # a record spread over lines: it holds no bracket and no string).
            run = findings[-1]
            run.rows += 1
            run.tail = offset - run.offset
            run.length = offset + len(body) - run.offset
            run.span = (0, run.length)
            if self.give_up:
                self._junk()
            return True
        lines.foreign = lines.foreign or foreign_data(body)
        outcome = classify_line(body)
        # Damage only: no record, nothing else found (a line a spread record may hold).
        damage = not (outcome.records or outcome.findings) and outcome.damaged is not None
        spread = self.spread
        if spread is not None:
            if (damage and not SpreadRecord.begins(body)) or self._spread_goes_on(row, offset):
                followed = spread.follow(body)
                if followed and self._spread_closes(row, offset + len(body)):
                    return True
                if followed is not None:
                    self._spread_fails()
                elif not damage:  # its records are pieces of the one spread over lines
                    outcome = SlowLine(damaged=(0, len(body)), damaged_reason=_INSIDE)
                    damage = True
            else:
                self._spread_fails()
        has_content = outcome.damaged is not None or bool(outcome.records)
        for issue, extra in outcome.findings:
            finding = LineFinding(issue, row, offset, len(body), **extra)
            if issue is LineIssue.GLUED:
                finding.records = tuple((r.start, r.end) for r in outcome.records)
            elif issue is LineIssue.UNDEFINED:
                has_content = True
            self._add(finding)
        for record in outcome.records:
            if self.adapter is None:
                self.adapter = make_adapter(detect(record.value), self.path, None, self.named_as)
            column = _column(body, record.start)
            data = body[record.start : record.end]
            self.adapter.add_object(record.value, data, row, column, offset + record.start)
        if outcome.damaged is not None:
            self._add(
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
            if damage and self.spread is None and outcome.damaged_truncated:
                self._spread_begins(body, row, offset)
            if self.give_up and not outcome.records and outcome.recoverable is None:
                self._junk()
        return has_content

    def _junk(self) -> None:
        """A line that holds no record: counted as garbage (those of an open spread
        record once it does not close)."""
        if self.spread is None:
            self._garbage()
            return
        self.spread_garbage += 1
        if self.adapter is None and self.garbage_rows + self.spread_garbage >= NO_RECORD_LINES:
            self._spread_fails()

    def _spread_begins(self, body: bytes, row: int, offset: int) -> None:
        """Follow the record a line that does not close it may begin."""
        if SpreadRecord.begins(body):
            spread = SpreadRecord(row, offset)
            if spread.follow(body) is None:
                self.spread = spread

    def _spread_goes_on(self, row: int, offset: int) -> bool:
        """Whether the open spread record carries on through line `row` (at `offset`),
        a line that would otherwise end it (it begins with `{`, or holds records of its
        own): so it does when, read on, it closes into a record of the format's shape."""
        spread = self.spread
        assert spread is not None
        if spread.closes is None:
            if offset >= self.spread_read_to:
                self.spread_ends, self.spread_read_to = spread_ends(
                    spread.depth, _lines_ahead(self.fd, row, offset)
                )
                key = -1
            else:
                key = spread.row
            end = self.spread_ends.get(key)
            spread.closes = end is not None and self._affords(end - spread.offset)
            if spread.closes:
                assert end is not None
                spread.closes = self._spread_record(spread, end) is not None
        return spread.closes

    def _affords(self, size: int) -> bool:
        """Whether `size` more bytes of records read ahead for may be parsed: records
        nested in one another, each of no format's shape, would otherwise parse the same
        bytes again for every level (a file then read in time growing as its square)."""
        if self.spread_budget is None:
            self.spread_budget = SPREAD_PARSE_FACTOR * os.fstat(self.fd).st_size + (64 << 20)
        self.spread_budget -= size
        return self.spread_budget >= 0

    def _spread_record(
        self, spread: SpreadRecord, end: int
    ) -> tuple[Format, dict[str, Any], bytes] | None:
        """The record the spread record's lines make up to `end` (its format, value and
        bytes), if they make one of the format's shape (of a known format, before the
        first record)."""
        data = read_exactly(self.fd, end - spread.offset, spread.offset)
        try:
            value = jsonutil.loads(data)
        except (ValueError, RecursionError):
            return None
        adapter = self.adapter
        fmt = detect(value) if adapter is None else Format(adapter.view.format)
        if fmt is Format.UNKNOWN or not has_record_shape(fmt, value):
            return None
        return fmt, value, data

    def _spread_closes(self, row: int, end: int) -> bool:
        """Take the spread record that closes at `end`, on line `row`, if its lines
        joined are one record of the format's shape (of a known format, before the
        first record): its lines' findings become one, and the record is indexed."""
        spread = self.spread
        assert spread is not None
        found = self._spread_record(spread, end)
        if found is None:
            return False
        fmt, value, data = found
        adapter = self.adapter
        self.spread = None
        self.spread_garbage = 0
        lines = self.lines
        findings, crlf = lines.findings, lines.crlf_rows
        while findings and findings[-1].row >= spread.row:
            findings.pop()
        if findings and findings[-1].last_row >= spread.row:
            # A run its first line carried on (records cut off) ends before it.
            run = findings[-1]
            k = bisect_left(crlf, spread.row - 1)
            terminator = 2 if k < len(crlf) and crlf[k] == spread.row - 1 else 1
            run.rows = spread.row - run.row
            run.length = spread.offset - terminator - run.offset
            run.tail = 0  # (not known again: only a run that ends the file is split)
            if run.span is not None:
                run.span = (0, run.length)
        # Its carriage returns are whitespace inside the record: the join removes them.
        # (The rows of its block after it may be listed already.)
        del crlf[bisect_left(crlf, spread.row) : bisect_right(crlf, row)]
        rows = row - spread.row + 1
        findings.append(
            LineFinding(LineIssue.SPREAD, spread.row, spread.offset, end - spread.offset, rows=rows)
        )
        if adapter is None:
            adapter = self.adapter = make_adapter(fmt, self.path, None, self.named_as)
        adapter.add_object(value, data, spread.row, 1, spread.offset)
        self.last_row = row
        return True

    def _spread_fails(self) -> None:
        """The open spread record is none: its lines are what they were found to be."""
        if self.spread is None:
            return
        self.spread = None
        garbage, self.spread_garbage = self.spread_garbage, 0
        if garbage:
            self._garbage(garbage)

    def _garbage(self, count: int = 1) -> None:
        self.garbage_rows += count
        if self.adapter is None and self.garbage_rows >= NO_RECORD_LINES:
            raise NotASessionFile(
                f"{self.path}: not a session file of a known format (its first "
                f"{NO_RECORD_LINES} lines that are not blank hold no JSON object)"
            )


_INSIDE: Final = "a line of a record spread over lines"
SPREAD_PARSE_FACTOR: Final = 4
"""Times the file's size (plus 64 MiB) that the records it may spread over lines are
parsed at most when read ahead for: beyond, a line that begins with `{` ends one."""
AHEAD_BYTES: Final = 1 << 16
"""Bytes read at a time when reading on to where a record spread over lines closes."""


def _lines_ahead(fd: int, row: int, offset: int) -> Iterator[tuple[int, int, bytes]]:
    """The lines of the file from line `row` at `offset` on: (line number, offset of the
    end of its body, body without its line break)."""
    carried = b""
    position = start = offset
    while True:
        data = os.pread(fd, AHEAD_BYTES, position)
        position += len(data)
        if not data:
            if carried:
                yield row, start + len(carried), carried
            return
        pieces = (carried + data).split(b"\n")
        carried = pieces.pop()
        for piece in pieces:
            body = piece[:-1] if piece[-1:] == b"\r" else piece
            yield row, start + len(body), body
            row += 1
            start += len(piece) + 1


_CLOSING: Final = re.compile(rb"[]}]")
_NEWLINES: Final = re.compile(rb"\n+")
_NOT_PLAIN: Final = re.compile(
    rb'[{\["\x00\xef]|\A\s*(?:true|false|null|undefined|-?[0-9][0-9.eE+-]*)\s*\Z'
)
"""What a line holds that may make it more than junk: a record or a JSON value may
start there (a bracket or a quote), or it is a JSON scalar or `undefined`; NUL bytes
and a byte-order mark are findings of their own."""


def _plain_junk(body: bytes) -> bool:
    """Whether a line that does not decode is junk with no more to it (no record, no
    JSON value, nothing another rule reports), known without parsing it."""
    return _NOT_PLAIN.search(body) is None and not body.isspace()


_OBJECT_STARTS: Final = b"{ \t\r\n"
"""First bytes of a line that may decode as a record (JSON whitespace, then `{`)."""
NO_RECORD_LINES: Final = 1000
"""Lines of garbage before any record after which a file is refused without reading on:
a session starts with records, and a large file of text or binary is read in vain."""


def find_newline(fd: int, position: int, stop: int | None = None) -> tuple[int, bool]:
    """Where the first newline at or after `position` (and before `stop`) is, and True;
    or where the search ended (the end of the file, or `stop`), and False."""
    # One buffer read into again and again: a fresh object for each read would be as
    # large as malloc's mmap threshold, mapped and zeroed by the kernel every time.
    buffer = bytearray(SEARCH_BYTES)
    view = memoryview(buffer)
    while stop is None or position < stop:
        size = SEARCH_BYTES if stop is None else min(SEARCH_BYTES, stop - position)
        got = os.preadv(fd, [view[:size]], position)
        if not got:
            break
        found = buffer.find(b"\n", 0, got)
        if found >= 0:
            return position + found, True
        position += got
    return position, False


def read_exactly(fd: int, size: int, offset: int) -> bytes:
    """`size` bytes at `offset` (fewer at the end of the file), in one object of that
    size: a single read up to 2 GiB, joined pieces beyond."""
    data = os.pread(fd, size, offset)
    if len(data) == size or not data:
        return data
    pieces = [data]
    done = len(data)
    while done < size:
        more = os.pread(fd, size - done, offset + done)
        if not more:
            break
        pieces.append(more)
        done += len(more)
    return b"".join(pieces)


def _line_starts(
    raw: bytes,
    limit: int,
    terminated: bool,
    begin: int = 0,
    runs: dict[int, int] | None = None,
    cut: int | None = None,
) -> list[int]:
    """Start offsets of the lines of `raw[begin:limit]`, and the end (plus one for the
    newline) of the last: line k is `raw[starts[k] : starts[k + 1] - 1]`. With `runs`, a
    run of empty lines is found at once and stands as one line (its index → how many
    empty lines), a run that passes `cut` ending there."""
    starts = [begin]
    append = starts.append
    find = raw.find
    line = begin
    position = find(b"\n", begin, limit)
    while position >= 0:
        if position == line and runs is not None:
            stop = _NEWLINES.match(raw, position, limit).end()  # type: ignore[union-attr]
            if cut is not None and position < cut < stop:
                stop = cut
            if stop - position > 1:
                runs[len(starts) - 1] = stop - position
                position = stop - 1
        position += 1
        append(position)
        line = position
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
    """A record cut off on the last non-blank line is a torn write, not mid-file damage
    (one that ends a run of records cut off is split off the run)."""
    last_row = lines.last_row
    findings = lines.findings
    for position in range(len(findings) - 1, -1, -1):
        finding = findings[position]
        if finding.row > last_row:
            continue
        if finding.last_row < last_row:
            break
        if finding.issue is LineIssue.UNPARSABLE and finding.last_row == last_row:
            lines.last_row_parsed = False
            if finding.truncated:
                if finding.rows > 1:
                    crlf = lines.crlf_rows
                    k = bisect_left(crlf, last_row - 1)
                    crlf_before = k < len(crlf) and crlf[k] == last_row - 1
                    finding = finding.last_line_apart(2 if crlf_before else 1)
                    findings.insert(position + 1, finding)
                finding.issue = LineIssue.TORN


BINARY_CONTROL_BYTES: Final = 64
BINARY_DENSITY: Final = 1024
"""Binary data: at least this many control bytes, and one in this many bytes or more."""


def refuse_non_jsonl(path: Path, lines: LineReport, records: int, detected: Format) -> None:
    """Bytes that are not a session are not checked or repaired: binary data without a
    known signature (control bytes no JSON text holds), or, unless the first record is
    one of a known session format, lines that are mostly not JSON objects (a log, a
    pretty-printed document)."""
    if lines.foreign is not None:
        raise NotASessionFile(f"{path}: not a session file of a known format ({lines.foreign})")
    control = lines.control_bytes
    if control >= BINARY_CONTROL_BYTES and control * BINARY_DENSITY >= lines.size:
        raise NotASessionFile(
            f"{path}: not a session file of a known format (binary data: {control} control "
            "bytes no JSON text holds; --format FORMAT reads it as a session anyway)"
        )
    if detected is not Format.UNKNOWN:
        return
    garbage = sum(
        {
            finding.row: finding.rows - finding.blanks
            for finding in lines.findings
            if finding.issue is LineIssue.UNPARSABLE
            and not finding.truncated
            and finding.recoverable is None
        }.values()
    )
    if garbage > records:
        content = garbage + records
        raise NotASessionFile(
            f"{path}: not a session file of a known format ({garbage} of {content} "
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
    """Processes to read with: `jobs`, else one per core (up to 8), but at most one per
    `WORKER_MIN_BYTES`. Only forked workers share the parent's string hashing, which
    the id keys of byte ranges read apart must agree on."""
    return max(1, min(default_workers(jobs), size // WORKER_MIN_BYTES))


def read_session(
    path: Path,
    forced: Format = Format.AUTO,
    progress: ProgressCallback | None = None,
    jobs: int | None = None,
    *,
    session_only: bool = True,
    keep_parts: bool = False,
    named_as: Path | None = None,
) -> ScannedFile:
    """Stream a file into its view and line report (no rules run). Unless not
    `session_only` (a repair's own result, checked by the rules instead), bytes that are
    not a session file are refused with `NotASessionFile`. With `keep_parts`, a file
    read in parallel keeps its byte ranges' parts (`ScannedFile.parts`). What the
    file's name and folder tell the reader comes from `named_as`, default `path`."""
    handle, info = open_session(path)
    with handle, gc_paused():
        workers = worker_count(info.size, jobs)
        counted = _CountedProgress(progress)
        parallel = (
            _read_parallel(
                handle, info, forced, workers, counted, keep=keep_parts, named_as=named_as
            )
            if workers > 1
            else None
        )
        kept = None
        if parallel is not None:
            adapter, lines, tracker, kept = parallel
        else:
            state = _Pass(
                None if forced is Format.AUTO else make_adapter(forced, path, None, named_as),
                path,
                give_up=session_only and forced is Format.AUTO,
                named_as=named_as,
            )
            try:
                state.run(handle.fileno(), 0, None, counted.again())
            except OSError as exc:
                raise InputError(f"{path}: read failed ({exc.strerror or exc})") from None
            lines = state.lines
            adapter = state.adapter or make_adapter(Format.UNKNOWN, path, None, named_as)
            tracker = adapter.tracker
        settle_last_line(lines)
        if session_only and forced is Format.AUTO:
            refuse_non_jsonl(path, lines, len(adapter.view), Format(adapter.view.format))
        scanned = finished_read(adapter, lines, tracker, handle, info)
    scanned.parts = kept
    return scanned


def finished_read(
    adapter: FormatAdapter,
    lines: LineReport,
    tracker: PathTracker,
    handle: BinaryIO,
    info: FileInfo,
) -> ScannedFile:
    """The scanned file, once every line is read: the tree, leaf and path derived, and
    the conversation facts of the active path."""
    adapter.finish(lines)
    view = adapter.view
    tracking = tracker.finish() if view.linear else _replay_path(adapter, handle)
    return ScannedFile(view, lines, info, adapter.editor, tracking)


class _CountedProgress:
    """Passes progress on, counting it, so that a read begun again after a worker died
    does not report the same bytes twice."""

    def __init__(self, progress: ProgressCallback | None) -> None:
        self.progress = progress
        self.reported = 0

    def __call__(self, done: int) -> None:
        if self.progress is not None:
            self.reported += done
            self.progress(done)

    def again(self) -> ProgressCallback | None:
        """A callback for reading from the start again: silent until it passes what
        was already reported."""
        progress, skipped = self.progress, self.reported
        if progress is None or not skipped:
            return progress
        seen = 0

        def resumed(done: int) -> None:
            nonlocal seen
            before = seen
            seen += done
            if seen > skipped:
                progress(seen - max(before, skipped))

        return resumed


def _replay_path(adapter: FormatAdapter, handle: BinaryIO) -> Tracking:
    """Conversation facts of a branched session: walk the active path's records again.

    The single pass followed file order, which is the path only in a linear session.
    """
    view = adapter.view
    adapter.tracker = tracker = adapter.tracker.again()
    offsets, sizes = view.offsets, view.sizes
    try:
        for index in view.active_path:
            handle.seek(offsets[index])
            adapter.replay(index, handle.read(sizes[index]))
    except OSError as exc:
        raise InputError(f"{view.path}: read failed ({exc.strerror or exc})") from None
    return tracker.finish()


# ---- parallel reading ------------------------------------------------------------------


class Task(Struct, frozen=True):
    fd: int
    """The parent's descriptor of the file, inherited by the forked workers: every
    byte range is read from the file the parent opened, whatever the path names now."""
    path: Path
    start: int
    end: int
    format: Format
    context: object
    named_as: Path | None = None
    """The name the file is read under, default `path`."""


class Chunk(Struct):
    view: SessionView
    lines: LineReport
    tracker: PathTracker


PEEK_LINE_BYTES = 1 << 20
"""The first record is looked for only in lines shorter than this: past a longer one,
the file is read in one process rather than the line read twice."""


def detect_format(path: Path) -> Format:
    """The format a scan of `path` detects (from its first record), UNKNOWN if none."""
    handle, _ = open_session(path)
    with handle:
        peeked = peek_format(handle, path, Format.AUTO, limit=None)
    return Format.UNKNOWN if peeked is None else peeked[0]


def peek_format(
    handle: BinaryIO, path: Path, forced: Format, limit: int | None = PEEK_LINE_BYTES
) -> tuple[Format, object] | None:
    """Detect the format and what later byte ranges need to know, from the first record
    (None when there is none among the first `NO_RECORD_LINES` lines that hold anything,
    or a record spread over lines may come first: the one-process read then decides what
    the file is)."""
    handle.seek(0)
    looked = 0
    while raw := handle.readline(-1 if limit is None else limit):
        if limit is not None and len(raw) == limit and not raw.endswith(b"\n"):
            return None
        outcome = classify_line(raw.rstrip(b"\r\n"))
        if not outcome.records:
            if outcome.damaged is not None and SpreadRecord.begins(raw):
                return None
            looked += outcome.damaged is not None
            if looked >= NO_RECORD_LINES:
                return None
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
    progress: ProgressCallback,
    *,
    keep: bool = False,
    named_as: Path | None = None,
) -> tuple[FormatAdapter, LineReport, PathTracker, KeptParts | None] | None:
    """Read byte ranges in forked workers and join their results in file order; None
    when the file is to be read in one process (no format found up front, or a worker
    died). With `keep`, the ranges' parts are kept too, unless they outgrow their budget."""
    peeked = peek_format(handle, info.path, forced)
    if peeked is None:
        return None
    fmt, context = peeked
    if not reads_in_ranges(fmt):
        return None
    from sessionfix.scan.workers import OrderedWorkers, WorkerDied  # only a large file needs them

    # Ranges of at most TASK_BYTES, as many for each worker; a free worker claims the next.
    count = workers * -(-info.size // (workers * TASK_BYTES))
    bounds = [info.size * k // count for k in range(count + 1)]
    fd = handle.fileno()
    tasks = [
        Task(fd, info.path, bounds[k], bounds[k + 1], fmt, None if k == 0 else context, named_as)
        for k in range(count)
    ]
    joined = JoinedParts(fmt, info.path, context, named_as)
    kept: KeptParts | None = None
    try:
        if keep:
            kept = KeptParts(fmt, context, joined.adapter.named)
            kept_tasks = [KeptTask(task, context) for task in tasks]
            with OrderedWorkers(read_range_kept, kept_tasks, workers) as results:
                for task, parts in zip(tasks, results, strict=True):
                    for part in parts:
                        chunk = part.chunk()
                        first = joined.lines.line_count + 1
                        joined.add(chunk)
                        if kept is not None:
                            kept = kept.keep(part, range(first, first + chunk.lines.line_count))
                        del chunk
                    del parts
                    if kept is not None:
                        kept = kept.within_budget(task.end, info.size)
                    progress(task.end - task.start)
        else:
            with OrderedWorkers(read_range, tasks, workers) as chunks:
                for task, chunk in zip(tasks, chunks, strict=True):
                    joined.add(chunk)
                    del chunk
                    progress(task.end - task.start)
    except WorkerDied:
        return None
    if joined.read_whole:
        return None
    adapter, lines, tracker = joined.done(workers)
    return adapter, lines, tracker, kept


class JoinedParts:
    """The parts of a file read as byte ranges, joined in file order."""

    def __init__(
        self, fmt: Format, path: Path, context: object, named_as: Path | None = None
    ) -> None:
        self.adapter = make_adapter(fmt, path, context, named_as)
        self.lines = LineReport()
        self.tracker: PathTracker | None = None
        self.read_whole = False
        """The parts cannot stand for the file, which is to be read in one piece: a
        record begun in one may go on in the next, read apart; or the first record is
        in a later part, read as one that follows records (not as a file's start)."""
        self.added = 0

    def add(self, chunk: Chunk, byte_shift: int = 0) -> None:
        """Append the next part; `byte_shift` moves its byte offsets (a part read from
        another file whose bytes lie elsewhere in this one)."""
        lines = self.lines
        if chunk.lines.line_count and lines.spread_open:
            self.read_whole = True
        if self.added and len(chunk.view) and not len(self.adapter.view):
            self.read_whole = True
        self.added += 1
        row_offset = lines.line_count
        view = self.adapter.view
        base = len(view)
        view.extend(chunk.view, row_offset, byte_shift)
        lines.extend(chunk.lines, row_offset, byte_shift)
        if self.tracker is None:
            self.tracker = chunk.tracker
        else:
            self.tracker.absorb(chunk.tracker, base)

    def done(self, workers: int) -> tuple[FormatAdapter, LineReport, PathTracker]:
        view = self.adapter.view
        if view.key_buckets is not None:
            view.keys_distinct = _buckets_distinct(view.key_buckets, workers)
            view.key_buckets = None
        assert self.tracker is not None
        return self.adapter, self.lines, self.tracker


def _buckets_distinct(buckets: list[array[float]], workers: int) -> bool:
    """`all_distinct` over the buckets, shared out between forked workers."""
    if sum(map(len, buckets)) < PARALLEL_KEYS_MIN:
        return all_distinct(buckets)
    from sessionfix.scan.workers import OrderedWorkers, WorkerDied

    shares = [buckets[k::workers] for k in range(workers)]
    try:
        with OrderedWorkers(all_distinct, shares, workers) as results:
            return all(results)
    except WorkerDied:
        return all_distinct(buckets)


def read_range(task: Task) -> Chunk:
    """Worker: decode the lines that start inside [start, end)."""
    return read_parts(task)[0][0]


def read_parts(
    task: Task, cut_context: object = None, *, cut: bool = False
) -> list[tuple[Chunk, int, int | None]]:
    """Decode the lines that start inside the task's range, as one part, or with `cut`
    as one for each line of `LONG_LINE_BYTES` or more and one for each stretch between
    (those after the first read with `cut_context`); each with the offset of its first
    line (it covers `lines.size` bytes from there)."""
    adapter = make_adapter(task.format, task.path, task.context, task.named_as)
    state = _Pass(adapter, task.path, named_as=task.named_as)
    if cut:
        import xxhash

        state.parts = []
        state.cut_format = task.format
        state.cut_context = cut_context
        state.hasher = xxhash.xxh3_64()
    start = task.start
    try:
        if start > 0 and os.pread(task.fd, 1, start - 1) != b"\n":
            newline, found = find_newline(task.fd, start, task.end)
            start = newline + 1 if found else task.end
        state.part_start = start
        if start < task.end:
            state.run(task.fd, start, task.end, None)
    except OSError as exc:
        raise InputError(f"{task.path}: read failed ({exc.strerror or exc})") from None
    assert state.adapter is not None
    parts = state.parts or []
    parts.append((_chunk_of(state.adapter, state.lines), state.part_start, state.part_digest()))
    return parts


def _chunk_of(adapter: FormatAdapter, lines: LineReport) -> Chunk:
    view = adapter.view
    view.largest_size = max(view.sizes, default=0)
    if view.tree:
        view.partition_keys()
    return Chunk(view, lines, adapter.tracker)


KEPT_BYTES: Final = 32 << 20
"""The most a read keeps of its parts, pickled; past it, or once the parts so far
promise more for the whole file, none are kept."""


class KeptPart(Struct):
    """The part decoded from the lines of input bytes [start, end)."""

    start: int
    end: int
    digest: int
    """xxh3-64 of those bytes, as they were decoded."""
    terminated: bool
    """The last line ends in a newline."""
    data: bytes
    """The pickled `Chunk`."""
    rows: range = range(0)
    """Its lines' rows in the input (set as the parts are joined)."""

    def chunk(self) -> Chunk:
        import pickle  # only a repair keeps parts

        chunk = pickle.loads(self.data)
        assert isinstance(chunk, Chunk)
        return chunk


class KeptParts(Struct):
    """The parts of an input read in parallel, in file order, and what every range of
    it after the first was read with."""

    format: Format
    context: object
    named: object
    """What the reader took from the input's name (`FormatAdapter.named`)."""
    parts: list[KeptPart] = field(default_factory=list)
    held: int = 0

    def keep(self, part: KeptPart, rows: range) -> KeptParts | None:
        """Add the next part, holding input `rows`; None once they hold more than
        `KEPT_BYTES`."""
        self.held += len(part.data)
        if self.held > KEPT_BYTES:
            return None
        if part.end > part.start:
            part.rows = rows
            self.parts.append(part)
        return self

    def within_budget(self, read: int, size: int) -> KeptParts | None:
        """None when the parts of the first `read` bytes, held at that rate for all
        `size`, would exceed `KEPT_BYTES`."""
        return None if self.held * size > KEPT_BYTES * max(read, 1) else self

    def untouched(self, changed: Sequence[int]) -> KeptParts | None:
        """Only the parts holding none of the `changed` rows (sorted), the others
        being of no use to a read of the result; None when no part is left."""
        self.parts = [
            part
            for part in self.parts
            if bisect_left(changed, part.rows.start) == bisect_left(changed, part.rows.stop)
        ]
        self.held = sum(len(part.data) for part in self.parts)
        return self if self.parts else None


class KeptTask(Struct, frozen=True):
    """A byte range for a worker to read into parts to keep."""

    task: Task
    context: object
    """What the file's start tells a reader of a later part."""


def read_range_kept(kept: KeptTask) -> list[KeptPart]:
    """Worker: `read_parts` cut at long lines, each part pickled, with the digest of the
    bytes it decoded. A long line has a part of its own, since a repair that changes any line near
    it would otherwise leave it to be decoded again."""
    import pickle

    task = kept.task
    parts: list[KeptPart] = []
    for chunk, start, digest in read_parts(task, kept.context, cut=True):
        assert digest is not None
        data = pickle.dumps(chunk, pickle.HIGHEST_PROTOCOL)
        end = start + chunk.lines.size
        parts.append(KeptPart(start, end, digest, chunk.lines.final_newline, data))
    return parts
