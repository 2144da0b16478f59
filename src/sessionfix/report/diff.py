"""The unified diff of a repair (`repair --diff`, cli-and-safety.md §4).

Built from a verified preview of the repair: the input and the repaired bytes are read
once, side by side, and the trace of the repair's passes says which input rows became
which output rows. So the diff shows exactly what `-o` writes, the changes of later
passes included. Headers carry no timestamps (stable snapshots).

For a terminal, lines longer than 4 KiB are cut with a `… (+N bytes)` marker unless
full lines are asked for, and session text is escaped so that it cannot drive the
terminal. Elsewhere (a pipe, a file) the lines are the exact bytes, so that `patch`
applied to the input gives the repaired file byte for byte.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import IO, BinaryIO, Final, TypeVar

from msgspec import Struct, field

from sessionfix.escapes import escape
from sessionfix.repair.preview import RepairPreview
from sessionfix.repair.rowmap import PREFIX_ROW

LONG_LINE: Final = 4096
NO_NEWLINE: Final = b"\\ No newline at end of file\n"

Line = tuple[bytes, bool]
"""A line without its newline, and whether one followed it."""


class _Hunk(Struct):
    old_start: int
    new_start: int
    lines: list[bytes] = field(default_factory=list)
    old_count: int = 0
    new_count: int = 0

    def context(self, line: Line) -> None:
        self._put(b" ", line, old=1, new=1)

    def removed(self, line: Line) -> None:
        self._put(b"-", line, old=1, new=0)

    def added(self, line: Line) -> None:
        self._put(b"+", line, old=0, new=1)

    def _put(self, mark: bytes, line: Line, *, old: int, new: int) -> None:
        shown, newline = line
        self.lines.append(mark + shown)
        if not newline:
            self.lines.append(NO_NEWLINE)
        self.old_count += old
        self.new_count += new

    def header(self) -> bytes:
        return (
            f"@@ -{_range(self.old_start, self.old_count)} "
            f"+{_range(self.new_start, self.new_count)} @@\n".encode()
        )


def _range(start: int, count: int) -> str:
    if count == 0:
        return f"{start - 1},0"
    return str(start) if count == 1 else f"{start},{count}"


def show(data: bytes, full: bool) -> bytes:
    """One line of session bytes as text for a terminal: escaped, and cut when long."""
    cut = b""
    if not full and len(data) > LONG_LINE:
        cut = f"… (+{len(data) - LONG_LINE} bytes)".encode()
        data = data[:LONG_LINE]
    text = data.decode("utf-8", "backslashreplace")
    return escape(text).encode("utf-8", "backslashreplace") + cut


def _lines(handle: BinaryIO, size: int | None = None) -> Iterator[Line]:
    """The lines of a file (the first `size` bytes of it, when given)."""
    remaining = size
    while remaining is None or remaining > 0:
        line = handle.readline() if remaining is None else handle.readline(remaining)
        if not line:
            return
        if remaining is not None:
            remaining -= len(line)
        if line.endswith(b"\n"):
            yield line[:-1], True
        else:
            yield line, False


def write_diff(
    preview: RepairPreview,
    out: IO[bytes],
    name: str,
    *,
    context: int = 3,
    full_lines: bool = False,
    exact: bool = False,
) -> bool:
    """Write the diff of `preview` to `out`; return False (and write nothing) if the
    repair changes nothing. `exact`: the lines as bytes, neither escaped nor cut."""
    trace = preview.trace
    if preview.output is None or trace is None:
        return False

    def shown(line: Line) -> Line:
        return line if exact else (show(line[0], full_lines), line[1])

    shown_name = escape(name)  # a path is no line of the file: never raw, even for patch
    out.write(f"--- a/{shown_name}\n+++ b/{shown_name}\n".encode("utf-8", "backslashreplace"))
    writer = _HunkWriter(out, context, shown)
    changes = iter(range(len(trace)))
    pending = next(changes, None)
    with open(preview.input, "rb") as old, open(preview.output, "rb") as new:
        new_lines = _lines(new)
        if pending is not None and trace.rows[pending] == PREFIX_ROW:
            writer.change(0, [], [_next(new_lines) for _ in range(trace.counts[pending])])
            pending = next(changes, None)
        old_lines = enumerate(_lines(old, preview.input_size), 1)
        for row, line in old_lines:
            removed = [line]
            if pending is not None and trace.rows[pending] == row:
                added = [_next(new_lines) for _ in range(trace.counts[pending])]
                # The rows after it that it covers (a run of lines changed as one).
                removed.extend(_next(old_lines)[1] for _ in range(trace.spans[pending] - 1))
                pending = next(changes, None)
            else:
                added = [_next(new_lines)]
                if added[0] == line:
                    writer.same(line)
                    continue
            if len(removed) == 1 and len(added) > 1 and added[0] == line:
                # Records inserted after a line that stays as it was.
                writer.change(row, [], added[1:], anchor=line)
            else:
                writer.change(row, removed, added)
        rest = list(new_lines)
        if rest:
            writer.change(writer.old_row, [], rest)
    writer.finish()
    return True


T = TypeVar("T")


def _next(lines: Iterator[T]) -> T:
    line = next(lines, None)
    if line is None:
        raise ValueError("a file ended before the trace of its repair did")
    return line


class _HunkWriter:
    """Groups changed lines into hunks with `context` lines around each."""

    def __init__(self, out: IO[bytes], context: int, shown: Callable[[Line], Line]) -> None:
        self.out = out
        self.context = context
        self.shown = shown
        self.before: deque[Line] = deque(maxlen=context or None)
        self.after: list[Line] = []
        self.hunk: _Hunk | None = None
        self.old_row = 0
        """Input rows seen so far."""
        self.new_row = 0
        """Output rows seen so far."""

    def same(self, line: Line) -> None:
        self.old_row += 1
        self.new_row += 1
        if self.hunk is None:
            if self.context:
                self.before.append(line)
            return
        self.after.append(line)
        if len(self.after) > 2 * self.context:
            for kept in self.after[: self.context]:
                self.hunk.context(self.shown(kept))
            self._flush()
            if self.context:
                self.before.extend(self.after[-self.context :])
            self.after = []

    def change(
        self, row: int, removed: list[Line], added: list[Line], anchor: Line | None = None
    ) -> None:
        """Input row `row` (0: before the first) is replaced by `added`, or, with an
        `anchor` (the row itself, unchanged), followed by it."""
        if self.hunk is None:
            lead = len(self.before)
            start = row if removed or anchor is not None else row + 1
            self.hunk = _Hunk(start - lead, self.new_row + 1 - lead)
            for kept in self.before:
                self.hunk.context(self.shown(kept))
            self.before.clear()
        else:
            for kept in self.after:
                self.hunk.context(self.shown(kept))
            self.after = []
        if anchor is not None:
            self.hunk.context(self.shown(anchor))
            self.old_row += 1
            self.new_row += 1
        for line in removed:
            self.hunk.removed(self.shown(line))
        for line in added:
            self.hunk.added(self.shown(line))
        self.old_row += len(removed)
        self.new_row += len(added)

    def finish(self) -> None:
        if self.hunk is not None:
            for kept in self.after[: self.context]:
                self.hunk.context(self.shown(kept))
            self._flush()

    def _flush(self) -> None:
        hunk = self.hunk
        assert hunk is not None
        self.out.write(hunk.header())
        for line in hunk.lines:
            self.out.write(line if line is NO_NEWLINE else line + b"\n")
        self.hunk = None
