"""Where the rows of a repaired file come from, across every pass of the repair.

A repair pass copies most rows of its input unchanged and turns a few into zero or
more output lines. `RowMap` records what one pass did; `RepairTrace` composes the
passes, so that every change the written file holds is known by the input row it came
from and by the decisions that caused it. The diff and the JSON plan are built from
it, so that they show exactly what `-o` and `--in-place` write.

Both are columns of integers, not objects: a pass that normalises line endings changes
every row of a file.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import BinaryIO, Final

PREFIX_ROW: Final = 0
"""Stands for the lines written before the first row of the input."""


class Causes:
    """The causes of each changed row: indexes of applied diagnostics, one per row in
    the common case, a set where several decisions change one row."""

    __slots__ = ("_several", "_single")

    def __init__(self) -> None:
        self._single: array[int] = array("q")
        self._several: dict[int, frozenset[int]] = {}

    def append(self, causes: frozenset[int]) -> None:
        if len(causes) == 1:
            self._single.append(next(iter(causes)))
        else:
            self._several[len(self._single)] = causes
            self._single.append(-1)

    def __getitem__(self, position: int) -> frozenset[int]:
        single = self._single[position]
        return frozenset((single,)) if single >= 0 else self._several[position]


class RowMap:
    """How one pass turned the rows (1-based) of its input into rows of its output.

    Rows it does not name are copied one to one; a named row, with the `spans[k] - 1`
    rows after it (a run of lines changed as one), became `counts[k]` lines (0 when
    dropped); `PREFIX_ROW` holds the lines written before the first row.
    """

    __slots__ = ("_offsets", "causes", "counts", "rows", "spans")

    def __init__(self) -> None:
        self.rows: array[int] = array("Q")
        self.counts: array[int] = array("Q")
        self.spans: array[int] = array("Q")
        self.causes = Causes()
        """Indexes into the pass's applied diagnostics."""
        self._offsets: array[int] | None = None

    def add(self, row: int, count: int, causes: frozenset[int], span: int = 1) -> None:
        """Name input `row` (named in ascending order), and the `span - 1` rows after
        it, as having become `count` lines."""
        self.rows.append(row)
        self.counts.append(count)
        self.spans.append(0 if row == PREFIX_ROW else span)
        self.causes.append(causes)
        self._offsets = None

    def output_row(self, row: int) -> int:
        """The output row where input row `row` (≥ 1) starts (for a row inside a run
        changed as one, the row after what the run became); the row after the last
        input row gives the row after the last output row."""
        offsets = self._offsets
        if offsets is None:
            offsets = self._offsets = array("q", [0])
            total = 0
            for count, span in zip(self.counts, self.spans, strict=True):
                total += count - span
                offsets.append(total)
        k = bisect_right(self.rows, row) - 1
        if k >= 0 and self.rows[k] < row < self.rows[k] + self.spans[k]:
            return self.rows[k] + offsets[k] + self.counts[k]
        return row + offsets[bisect_left(self.rows, row)]


class RepairTrace:
    """The passes of one repair composed: each input row that any pass changed (with
    the `spans[k] - 1` rows after it, for a run changed as one), the rows of the final
    output it became (`starts[k]`, `counts[k]` of them), and the causes of the change
    (indexes into the applied diagnostics of all passes, concatenated in pass order).
    Rows not listed were copied byte for byte."""

    def __init__(self, first: RowMap) -> None:
        self.rows: array[int] = array("Q", first.rows)
        self.counts: array[int] = array("Q", first.counts)
        self.spans: array[int] = array("Q", first.spans)
        self.starts: array[int] = array(
            "Q", (1 if row == PREFIX_ROW else first.output_row(row) for row in first.rows)
        )
        self._causes: list[frozenset[int]] | Causes = first.causes

    def __len__(self) -> int:
        return len(self.rows)

    def causes(self, position: int) -> frozenset[int]:
        return self._causes[position]

    def _after(self, k: int) -> int:
        """The input row after those change `k` covers."""
        return self.rows[k] + max(self.spans[k], 1)

    def origin(self, row: int) -> int:
        """The input row that row `row` of the current output comes from (`PREFIX_ROW`
        for lines written before the first input row)."""
        k = bisect_right(self.starts, row) - 1
        if k < 0:
            return row
        end = self.starts[k] + self.counts[k]
        if row < end:
            return self.rows[k]
        return self._after(k) + row - end

    def then(self, later: RowMap, offset: int) -> None:
        """Compose a pass over the current output; its causes are numbered from `offset`."""
        added: dict[int, set[int]] = {}
        for position, output_row in enumerate(later.rows):
            made = {c + offset for c in later.causes[position]}
            if output_row == PREFIX_ROW:
                added.setdefault(PREFIX_ROW, set()).update(made)
                continue
            for row in range(output_row, output_row + later.spans[position]):
                added.setdefault(self.origin(row), set()).update(made)
        known = {row: k for k, row in enumerate(self.rows)}
        rows = sorted(known.keys() | added.keys())
        starts: array[int] = array("Q")
        counts: array[int] = array("Q")
        spans: array[int] = array("Q")
        causes: list[frozenset[int]] = []
        for row in rows:
            k = known.get(row)
            if k is not None:
                start, count, before = self.starts[k], self.counts[k], self.causes(k)
                span = self.spans[k]
            elif row == PREFIX_ROW:
                start, count, before, span = 1, 0, frozenset(), 0
            else:
                start, count, before, span = self._output_row(row), 1, frozenset(), 1
            end = start + count
            if row == PREFIX_ROW:
                new_start = 1
                new_count = later.output_row(end) - 1
            else:
                new_start = later.output_row(start)
                new_count = later.output_row(end) - new_start
            starts.append(new_start)
            counts.append(new_count)
            spans.append(span)
            causes.append(before | added.get(row, set()))
        self.rows = array("Q", rows)
        self.starts = starts
        self.counts = counts
        self.spans = spans
        self._causes = causes

    def _output_row(self, row: int) -> int:
        """The current output row of an input row no pass has changed."""
        k = bisect_left(self.rows, row) - 1
        if k < 0:
            return row
        return self.starts[k] + self.counts[k] + row - self._after(k)

    def locate(self, output: BinaryIO) -> dict[int, list[tuple[int, int, str]]]:
        """The byte offset and length of every line of the final output that a changed
        row became, with the terminator after it ("\n", "\r\n", or "" at the end of the
        file), keyed by the input row, from one read."""
        wanted = sorted(
            (self.starts[k], self.counts[k], self.rows[k])
            for k in range(len(self.rows))
            if self.counts[k]
        )
        found: dict[int, list[tuple[int, int, str]]] = {}
        if not wanted:
            return found
        targets = iter(wanted)
        first, count, row = next(targets)
        for number, start, end, terminator in line_spans(output):
            while number >= first + count:
                step = next(targets, None)
                if step is None:
                    return found
                first, count, row = step
            if number >= first:
                found.setdefault(row, []).append((start, end - start, terminator))
        return found


def line_spans(handle: BinaryIO, block: int = 1 << 20) -> Iterator[tuple[int, int, int, str]]:
    """(row, start, end, terminator) of every line of a binary file: `end` before its
    terminator, which is "\n", "\r\n" or, for a last line without one, "" (a last
    line's trailing CR is its own). Read in blocks: a line is never held whole."""
    handle.seek(0)
    number, start, position = 1, 0, 0
    before = b""
    """The byte before the current block."""
    while data := handle.read(block):
        at = data.find(b"\n")
        while at >= 0:
            carriage = (data[at - 1 : at] if at else before) == b"\r"
            end = position + at - carriage
            yield number, start, max(start, end), "\r\n" if carriage else "\n"
            number += 1
            start = position + at + 1
            at = data.find(b"\n", at + 1)
        position += len(data)
        before = data[-1:]
    if position > start:
        yield number, start, position, ""
