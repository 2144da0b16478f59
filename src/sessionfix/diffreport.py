"""The unified diff of a repair (`repair --diff`, cli-and-safety.md §4).

Built from the plan's row changes while the input is streamed once, so a diff of a
large session costs one read. Headers carry no timestamps (stable snapshots); lines
longer than 4 KiB are cut with a `… (+N bytes)` marker unless full lines are asked
for; session text is escaped so that it cannot drive the terminal.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Final

from sessionfix.plan import RepairPlan, RowChange
from sessionfix.render import escape

LONG_LINE: Final = 4096
NO_NEWLINE: Final = b"\\ No newline at end of file\n"


@dataclass(slots=True)
class _Hunk:
    old_start: int
    new_start: int
    lines: list[bytes] = field(default_factory=list)
    old_count: int = 0
    new_count: int = 0

    def context(self, line: tuple[bytes, bool]) -> None:
        shown, newline = line
        self.lines.append(b" " + shown)
        if not newline:
            self.lines.append(NO_NEWLINE)
        self.old_count += 1
        self.new_count += 1

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
    """One line of session bytes as diff text: escaped, and cut when long."""
    cut = b""
    if not full and len(data) > LONG_LINE:
        cut = f"… (+{len(data) - LONG_LINE} bytes)".encode()
        data = data[:LONG_LINE]
    text = data.decode("utf-8", "backslashreplace")
    return escape(text).encode("utf-8", "backslashreplace") + cut


def _input_lines(plan: RepairPlan) -> Iterator[tuple[int, bytes, bool]]:
    """Every input line: row, bytes without the newline, and whether one followed."""
    with open(plan.source.path, "rb") as handle:
        row = 0
        remaining = plan.lines.size
        while remaining > 0:
            line = handle.readline(remaining)
            if not line:
                return
            remaining -= len(line)
            row += 1
            if line.endswith(b"\n"):
                yield row, line[:-1], True
            else:
                yield row, line, False


def write_diff(
    plan: RepairPlan,
    out: IO[bytes],
    name: str,
    *,
    context: int = 3,
    full_lines: bool = False,
) -> bool:
    """Write the diff of `plan` to `out`; return False (and write nothing) if empty."""
    changes = plan.changes()
    pending_change: RowChange | None = next(changes, None)
    prefix = plan.prefix()
    if pending_change is None and not prefix:
        return False
    out.write(f"--- a/{name}\n+++ b/{name}\n".encode("utf-8", "backslashreplace"))
    before: deque[tuple[bytes, bool]] = deque(maxlen=context)
    after: list[tuple[bytes, bool]] = []
    hunk: _Hunk | None = None
    new_row = 0
    if prefix:
        hunk = _Hunk(1, 1)
        hunk.lines.append(b"+" + show(prefix.rstrip(b"\r\n"), full_lines))
        hunk.new_count += 1
        new_row += 1
    for row, line, newline in _input_lines(plan):
        if pending_change is not None and pending_change.row == row:
            change = pending_change
            pending_change = next(changes, None)
            if hunk is None:
                hunk = _Hunk(row - len(before), new_row + 1 - len(before))
                for kept in before:
                    hunk.context(kept)
            else:
                for kept in after:
                    hunk.context(kept)
            after = []
            before.clear()
            added = change.lines
            if newline and len(added) > 1 and added[0] == line and plan.terminator == b"\n":
                # Records inserted after a line that stays as it was.
                hunk.context((show(line, full_lines), True))
                new_row += 1
                added = added[1:]
            else:
                hunk.lines.append(b"-" + show(line, full_lines))
                hunk.old_count += 1
                if not newline:
                    hunk.lines.append(NO_NEWLINE)
            last = len(added) - 1
            for number, new_line in enumerate(added):
                hunk.lines.append(b"+" + show(new_line, full_lines))
                if number == last and not change.terminated:
                    hunk.lines.append(NO_NEWLINE)
            hunk.new_count += len(added)
            new_row += len(added)
            continue
        new_row += 1
        shown = (show(line, full_lines), newline)
        if hunk is None:
            before.append(shown)
            continue
        after.append(shown)
        if len(after) > 2 * context:
            for kept in after[:context]:
                hunk.context(kept)
            _flush(hunk, out)
            hunk = None
            before.extend(after[-context:] if context else ())
            after = []
    if hunk is not None:
        for kept in after[:context]:
            hunk.context(kept)
        _flush(hunk, out)
    return True


def _flush(hunk: _Hunk, out: IO[bytes]) -> None:
    out.write(hunk.header())
    for line in hunk.lines:
        out.write(line if line is NO_NEWLINE else line + b"\n")
