"""The repair plan: every fix's decision, references resolved once, changes by row.

rules.md §1 steps 4-6. Fixes only record decisions: drop a record (a copy names its
survivor), change a record's content, insert a record after one, or rewrite a
damaged line. The plan resolves every reference with all decisions known (§8), then
yields, in file order, what each changed row becomes. Rows it does not yield are
copied byte for byte; a changed record is re-serialised the way its writer does.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import Struct

from sessionfix import jsonutil
from sessionfix.diagnostics import (
    STRUCTURAL_ISSUES,
    AddFinalNewline,
    DescribedEdit,
    Diagnostic,
    DropRecord,
    Edit,
    EditOp,
    InsertRecord,
    JoinLines,
    LineEdit,
    NormaliseTerminator,
    RebuildHeader,
    RewriteRecord,
    Transform,
)
from sessionfix.model.view import MISSING, Flag, Kind, RefRole
from sessionfix.read.reader import BOM, LineFinding, LineIssue, RecordSource
from sessionfix.repair.rowmap import PREFIX_ROW, RowMap
from sessionfix.rules.analysis import TreeOrder, order_of
from sessionfix.rules.base import changed_bytes
from sessionfix.scan.scanner import ScannedFile
from sessionfix.scan.splice import CopiedRun

COPY_BYTES: Final = 4 << 20
_PLACED_ROLES: Final = frozenset(
    {
        RefRole.FIRST_KEPT,
        RefRole.FIRST_KEPT_POSITION,
        RefRole.SEGMENT_MEMBER,
        RefRole.SEGMENT_HEAD,
    }
)
"""References resolved by the place of the record that holds them in the session."""
REWRITES_AHEAD_BYTES: Final = 8 << 20
"""Bytes of records to rewrite from which forked workers rewrite them while the output is
written (each rewrite parses and serialises a whole record: 6 ms a MiB)."""
REWRITE_BATCH_BYTES: Final = 1 << 20
"""Bytes of records a worker rewrites at a time (one record at least), and so about how
far ahead of the writer each one gets."""
NO_SURVIVOR: Final = -1


class RowChange(Struct):
    """What one physical input line becomes: zero or more output lines."""

    row: int
    start: int
    """Byte offset of the line in the input."""
    end: int
    """Byte offset just past its terminator."""
    lines: list[bytes]
    terminated: bool = True
    """Whether the last output line gets a terminator (not when the input's last line
    had none and no final newline is added)."""
    rows: int = 1
    """How many input lines it covers, from `row` on (a run, a spread record); `lines`
    may then hold several of them kept whole, line breaks and all."""
    causes: frozenset[int] = frozenset()
    """The applied diagnostics (indexes into `RepairPlan.diagnostics`) whose decisions
    change this line, follow-on changes included (a child re-parented past a dropped
    record belongs to the drop)."""


class RepairPlan:
    """The decisions of the applied fixes for one file, resolved into row changes."""

    def __init__(
        self,
        scanned: ScannedFile,
        applied: Iterable[Diagnostic],
        source: RecordSource,
        *,
        map_rows: bool = False,
        children: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        self.view = scanned.view
        self.children = children
        """The children of records the decisions may drop (`children_of`), when several
        plans of one file share them; found here for the records it does not hold."""
        self.lines = scanned.lines
        self.editor = scanned.editor
        self.source = source
        self.diagnostics = sorted(applied, key=lambda d: (d.code, d.row))
        """The applied diagnostics, in the order their decisions are taken; a decision's
        cause is its diagnostic's index here."""
        self.dropped: dict[int, int] = {}
        """Record index → the survivor it is a copy of, or NO_SURVIVOR."""
        self.drop_causes: dict[int, int] = {}
        self.transforms: dict[int, list[Transform]] = {}
        self.transform_causes: dict[int, set[int]] = {}
        self.insertions: dict[int, list[InsertRecord]] = {}
        self.insertion_causes: dict[int, list[int]] = {}
        self.row_fixes: dict[int, set[LineIssue | None]] = {}
        """Damaged line → the damage the applied line edits remove from it."""
        self.row_causes: dict[int, set[int]] = {}
        self.header: RebuildHeader | None = None
        self.header_cause = -1
        self.crlf = False
        self.crlf_cause = -1
        self.final_newline = False
        self.final_newline_cause = -1
        self.codes: dict[str, int] = {}
        """Applied diagnostics per rule code."""
        for cause, diagnostic in enumerate(self.diagnostics):
            self._take(diagnostic, cause)
        self._by_row: dict[int, list[LineFinding]] | None = None
        self._order: TreeOrder | None = None
        self._parent_overrides: dict[int, str] = {}
        self._override_causes: dict[int, int] = {}
        self._rewrites: set[int] = set()
        self._shifts: list[tuple[int, int, int]] = []
        """(position, change in output position from there on, cause), by position."""
        self._record_causes: dict[int, frozenset[int]] = {}
        """Records the last `changes()` rewrote → the causes of their new content."""
        self._dropped_ids: set[str | None] = set()
        """Ids of dropped records: a reference to any other id needs no resolving."""
        self._reserialised: set[int] = set()
        """Records the last `chunks()` wrote with changed content."""
        self.rows_written = 0
        """Rows the last `chunks()` wrote differently from the input (prefix included)."""
        self.map_rows = map_rows
        self.row_map: RowMap | None = None
        """With `map_rows`: how the last `chunks()` turned input rows into output rows."""
        self.copied_runs: list[CopiedRun] | None = None
        """Where the output of the last `chunks()`, read to its end, repeats the input."""
        self._ahead: _RewritesAhead | None = None
        self._resolve()

    # ---- collecting decisions ------------------------------------------------------------

    def _take(self, diagnostic: Diagnostic, cause: int) -> None:
        fix = diagnostic.fix
        if fix is None:
            return
        code = diagnostic.code
        self.codes[code] = self.codes.get(code, 0) + 1
        for edit in fix.edits:
            match edit:
                case NormaliseTerminator():
                    self.crlf = True
                    self.crlf_cause = cause
                    return
                case AddFinalNewline():
                    self.final_newline = True
                    self.final_newline_cause = cause
                case JoinLines():
                    # One decision for all the lines of the record (the edits only
                    # describe it, line by line).
                    self.row_fixes.setdefault(edit.first, set()).add(edit.repairs)
                    self.row_causes.setdefault(edit.first, set()).add(cause)
                    return
                case LineEdit():
                    self.row_fixes.setdefault(edit.row, set()).add(edit.repairs)
                    self.row_causes.setdefault(edit.row, set()).add(cause)
                case RebuildHeader():
                    self.header = edit
                    self.header_cause = cause
                case DropRecord():
                    self._take_drop(edit, cause)
                case InsertRecord():
                    self.insertions.setdefault(edit.record, []).append(edit)
                    self.insertion_causes.setdefault(edit.record, []).append(cause)
                case RewriteRecord():
                    self.transforms.setdefault(edit.record, []).append(edit.transform)
                    self.transform_causes.setdefault(edit.record, set()).add(cause)

    def _follow_leaf(self, leaf: int, new_id: str, cause: int) -> None:
        """Records inserted after the leaf end the active path: a pointer naming the leaf
        (CodeWhale's `leaf_id`) names the last of them instead, else they would hang off
        the path the agent resumes."""
        view = self.view
        for index, references in view.references.items():
            for reference in references:
                if reference.role is RefRole.LEAF and view.resolve(reference.target) == leaf:
                    transform = self.editor.set_field(reference.field, new_id)
                    self.transforms.setdefault(index, []).append(transform)
                    self.transform_causes.setdefault(index, set()).add(cause)

    def _take_drop(self, edit: DropRecord, cause: int) -> None:
        index = edit.record
        survivor = NO_SURVIVOR if edit.survivor is None else edit.survivor
        if self.dropped.get(index, NO_SURVIVOR) == NO_SURVIVOR:
            self.dropped[index] = survivor
            self.drop_causes[index] = cause

    @property
    def drop_codes(self) -> dict[int, str]:
        """Record index → the code of the rule whose decision drops it."""
        return {index: self.diagnostics[cause].code for index, cause in self.drop_causes.items()}

    # ---- resolving references (rules.md §8) ----------------------------------------------

    def _resolve(self) -> None:
        view = self.view
        self._drop_orphaned_labels()
        for anchor, edits in self.insertions.items():
            last_id = edits[-1].new_id
            successor = self._path_successor(anchor)
            if last_id is not None and successor is not None and successor not in self.dropped:
                self._parent_overrides[successor] = last_id
                self._override_causes[successor] = self.insertion_causes[anchor][-1]
            elif last_id is not None and successor is None and anchor == view.leaf:
                self._follow_leaf(anchor, last_id, self.insertion_causes[anchor][-1])
        rewrites = self._rewrites
        rewrites.update(self.transforms)
        rewrites.update(self._parent_overrides)
        dropped = self.dropped
        if dropped:
            moved = {x for x in dropped if not self._same_id_survives(x)}
            if moved:
                known = self.children or {}
                unknown = children_of(view.parents, moved.difference(known))
                for index in moved:
                    rewrites.update(known[index] if index in known else unknown[index])
            for index, references in view.references.items():
                for reference in references:
                    target = view.resolve(reference.target)
                    if target is not None and target in moved:
                        rewrites.add(index)
        if not view.tree:
            self._positional_shifts()
        rewrites.difference_update(dropped)
        self._dropped_ids = {view.entry_id(index) for index in dropped} - {None}

    def _drop_orphaned_labels(self) -> None:
        """A label whose target goes without survivor or ancestor goes too (§8)."""
        view = self.view
        changed = bool(self.dropped)
        while changed:
            changed = False
            for index, references in view.references.items():
                if index in self.dropped or view.kinds[index] != Kind.LABEL:
                    continue
                for reference in references:
                    target = view.resolve(reference.target)
                    if target is None or target not in self.dropped:
                        continue
                    if self._survivor(target) is None and self._climb(target)[0] is None:
                        self.dropped[index] = NO_SURVIVOR
                        self.drop_causes[index] = self.drop_causes[target]
                        changed = True

    def _same_id_survives(self, index: int) -> bool:
        """A dropped copy whose survivor has its id: references need no change."""
        survivor = self._survivor(index)
        return survivor is not None and self.view.entry_id(survivor) == self.view.entry_id(index)

    def _survivor(self, index: int) -> int | None:
        """survivor(x): the record a dropped copy duplicates, transitively."""
        seen = {index}
        current = self.dropped.get(index, NO_SURVIVOR)
        while current != NO_SURVIVOR and current in self.dropped and current not in seen:
            seen.add(current)
            current = self.dropped[current]
        if current == NO_SURVIVOR or current in self.dropped:
            return None
        return current

    def _climb(self, index: int, owner: int | None = None) -> tuple[int | None, object]:
        """up(x): the nearest surviving ancestor of a dropped record, and otherwise the
        parent value the chain ended on (null, or a name that was already dangling).
        `owner` is the record that takes the result as its parent: never itself or a
        record below it."""
        view = self.view
        seen: set[int] = set()
        current = index
        while current in self.dropped and current not in seen:
            seen.add(current)
            if view.flags[current] & Flag.NO_PARENT_KEY:
                preceding = self._preceding_entry(current, owner)
                if preceding is None:
                    return None, None
                current = preceding
                continue
            parent = view.parents[current]
            if parent < 0:
                value = view.parent_id(current)
                return None, None if value is MISSING else value
            current = parent
        if current in self.dropped:
            return None, None
        return current, view.entry_id(current)

    def _preceding_entry(self, index: int, owner: int | None = None) -> int | None:
        """The nearest earlier surviving entry with an id (re-linking past one without) that is not
        `owner` and does not hang below it."""
        view = self.view
        for candidate in range(index - 1, -1, -1):
            if candidate in self.dropped or not view.is_entry(candidate):
                continue
            if view.kinds[candidate] == Kind.HEADER or view.entry_id(candidate) is None:
                continue
            if owner is not None and (candidate == owner or self._below(candidate, owner)):
                continue
            return candidate
        return None

    def _below(self, node: int, ancestor: int) -> bool:
        """Whether `node` hangs below `ancestor` in the input's tree."""
        if self._order is None:
            self._order = order_of(self.view)
        below = self._order.is_descendant(node, ancestor)
        return ancestor in self.view.ancestors(node) if below is None else below

    def _down(self, index: int, boundary: int) -> int:
        """down(x, C): the next surviving cut point after x toward C, else C itself."""
        view = self.view
        if view.tree:
            chain = list(view.ancestors(boundary))
            chain.reverse()
            if index not in chain:
                return boundary
            after: Sequence[int] = chain[chain.index(index) + 1 :]
        else:
            after = range(index + 1, boundary)
        for candidate in after:
            if candidate not in self.dropped and view.flags[candidate] & Flag.CUT_POINT:
                return candidate
        return boundary

    def _path_successor(self, anchor: int) -> int | None:
        """The surviving entry that follows `anchor` on the active path, if it hangs below
        it once dropped records are skipped."""
        view = self.view
        position = view.path_positions[anchor] if view.tree else -1
        if position < 0:
            return None
        path = view.active_path
        for next_position in range(position + 1, len(path)):
            successor = path[next_position]
            if successor in self.dropped:
                continue
            parent = view.parents[successor]
            seen: set[int] = set()
            while parent in self.dropped and parent not in seen:
                seen.add(parent)
                parent = view.parents[parent]
            return successor if parent == anchor else None
        return None

    def remap(self, value: object, role: RefRole, owner: int) -> object:
        """What a reference field of record `owner` becomes once the decisions apply."""
        view = self.view
        if role is RefRole.FIRST_KEPT_POSITION:
            return self._remap_position(value, owner)
        if role is RefRole.SEGMENT_MEMBER and isinstance(value, list):
            kept = [item for item in value if self.remap(item, role, owner) == item]
            return value if len(kept) == len(value) else kept
        if not isinstance(value, str) or value not in self._dropped_ids:
            return value
        target = view.resolve(value)
        if target is None or target not in self.dropped or self._same_id_survives(target):
            return value
        survivor = self._survivor(target)
        if role is RefRole.PARENT:
            return self._climb(target, owner)[1]
        if survivor is not None:
            return view.entry_id(survivor)
        if role is RefRole.FIRST_KEPT:
            return view.entry_id(self._down(target, owner))
        if role is RefRole.SEGMENT_MEMBER:
            return None
        if role is RefRole.SEGMENT_HEAD:
            child = self._surviving_child(target)
            return self.editor.unlinked(role) if child is None else view.entry_id(child)
        ancestor, _ = self._climb(target)
        if ancestor is not None:
            return view.entry_id(ancestor)
        return self.editor.unlinked(role)

    def _surviving_child(self, index: int) -> int | None:
        """The first surviving record in file order below a dropped one (its child, or
        the child of a dropped child)."""
        parents = self.view.parents
        frontier = {index}
        for candidate in range(index + 1, len(parents)):
            if parents[candidate] in frontier:
                if candidate not in self.dropped:
                    return candidate
                frontier.add(candidate)
        return None

    # ---- positions (pi v1) -------------------------------------------------------------

    def _positional_shifts(self) -> None:
        """Where output positions move: -1 after each dropped record, +1 after each
        inserted or recovered one. Boundaries whose kept position moves are rewritten."""
        view = self.view
        shifts = [(index + 1, -1, self.drop_causes[index]) for index in self.dropped]
        for anchor, edits in self.insertions.items():
            shifts.append((anchor + 1, len(edits), self.insertion_causes[anchor][-1]))
        if self.header is not None:
            shifts.append((0, 1, self.header_cause))
        for row, fixed in self.row_fixes.items():
            if LineIssue.UNPARSABLE in fixed:
                for finding in self._findings_on(row):
                    if finding.issue is LineIssue.UNPARSABLE and finding.recoverable is not None:
                        cause = min(self.row_causes[row])
                        shifts.append((bisect_left(view.rows, row), 1, cause))
        shifts.sort()
        self._shifts = shifts
        if not shifts:
            return
        for index, facts in view.boundaries.items():
            kept = facts.first_kept_index
            if kept is None or index in self.dropped:
                continue
            if self._remap_position(kept, index) != kept:
                self._rewrites.add(index)

    def _output_position(self, index: int) -> int:
        shifts = self._shifts
        end = bisect_right(shifts, (index, 1 << 62))
        return index + sum(delta for _, delta, _ in shifts[:end])

    def _position_cause(self, value: object) -> int:
        """The decision that moved a kept position: the drop of the kept record itself,
        else the nearest drop or insertion before it (its follow-on edit is listed with
        that decision)."""
        position = int(str(value))
        if position in self.dropped:
            return self.drop_causes[position]
        end = bisect_right(self._shifts, (position, 1 << 62))
        return self._shifts[end - 1][2] if end else self._shifts[0][2]

    def _remap_position(self, value: object, owner: int) -> object:
        if isinstance(value, bool) or not isinstance(value, int | str):
            return value
        try:
            position = int(value)
        except ValueError:
            return value
        if not 0 < position < len(self.view) or not self._shifts:
            return value
        if position in self.dropped:
            position = self._down(position, owner)
        moved = self._output_position(position)
        return value if moved == int(value) else moved

    # ---- emitting ----------------------------------------------------------------------

    @property
    def dropped_entries(self) -> int:
        return len(self.dropped)

    @property
    def inserted_records(self) -> int:
        return sum(len(edits) for edits in self.insertions.values())

    def rewritten_ids(self) -> set[str]:
        """Ids of the records the last `chunks()` wrote changed, or inserted."""
        view = self.view
        named = [view.entry_id(index) for index in self._reserialised]
        named.extend(edit.new_id for edits in self.insertions.values() for edit in edits)
        return {entry_id for entry_id in named if entry_id is not None}

    @property
    def terminator(self) -> bytes:
        """Rewritten lines use LF, unless CRLF is kept and most lines use it."""
        lines = self.lines
        if self.crlf or len(lines.crlf_rows) * 2 <= lines.line_count:
            return b"\n"
        return b"\r\n"

    def is_empty(self) -> bool:
        return not (
            self.dropped
            or self._rewrites
            or self.insertions
            or self.row_fixes
            or self.header
            or self.crlf
            or self.final_newline
        )

    def _findings_on(self, row: int) -> list[LineFinding]:
        if self._by_row is None:
            self._by_row = {}
            for finding in self.lines.findings:
                self._by_row.setdefault(finding.row, []).append(finding)
        return self._by_row.get(row, [])

    def _first_rows(self) -> tuple[list[int], list[int]]:
        """The first and last lines of every finding on several lines, in file order."""
        firsts: list[int] = []
        lasts: list[int] = []
        for finding in self.lines.findings:
            if finding.rows > 1:
                firsts.append(finding.row)
                lasts.append(finding.last_row)
        return firsts, lasts

    def changed_rows(self) -> list[int]:
        view = self.view
        rows = set(self.row_fixes)
        rows.update(view.rows[index] for index in self.dropped)
        rows.update(view.rows[index] for index in self._rewrites)
        rows.update(view.rows[index] for index in self.insertions)
        within: list[int] = []
        """Lines that may lie inside a finding on several lines."""
        if self.crlf:
            within.extend(self.lines.crlf_rows)
        if self.final_newline and not self.lines.final_newline:
            within.append(self.lines.line_count)
        if within:
            firsts, lasts = self._first_rows()
            for row in within:
                k = bisect_right(firsts, row) - 1
                rows.add(firsts[k] if k >= 0 and row <= lasts[k] else row)
        header = self.header
        if header is not None and header.replaces:
            rows.add(header.row)
        return sorted(rows)

    def fix_edits(self, own: Iterable[Edit]) -> list[Edit]:
        """For the plan of one fix, every edit that fix makes as the repair writes it:
        its `own` edits of each changed line (or lines, a run or a record spread over
        several) where they give what the plan writes there, else the bytes that change;
        and each line its decisions change besides (a child re-linked past a dropped
        record, a kept position that moves, a last line that gets its newline) as the
        bytes of it that change, or deleted."""
        changes = {change.row: change for change in self.changes()}
        covering = {
            row: change.row
            for change in changes.values()
            if change.rows > 1
            for row in range(change.row, change.row + change.rows)
        }
        named: dict[int, list[Edit]] = {}
        edits: list[Edit] = []
        for edit in own:
            if not edit.changes_session:
                edits.append(edit)
            elif edit.row == PREFIX_ROW or len(edit.rows) > 1:
                # A header before line 1, a run of lines: as the plan takes them.
                edits.append(edit)
                for row in edit.rows:
                    changes.pop(covering.get(row, row), None)
            else:
                named.setdefault(covering.get(edit.row, edit.row), []).append(edit)
        terminator = self.terminator
        for row, change in changes.items():
            old = self.source.read(change.start, change.end - change.start)
            new = self._written(change)
            mine = named.get(row)
            applied = None if mine is None else _applied_lines(old, row, mine, terminator)
            if mine is not None and applied == new:
                edits.extend(mine)
            elif not change.lines:
                last = row + change.rows - 1
                edits.append(
                    DescribedEdit(row, described=EditOp.DELETE, last=last if last > row else None)
                )
            elif (
                change.rows > 1
                and applied is not None
                and (ending := _line_ending_change(old, applied, new, row))
            ):
                edits.extend((*(mine or ()), ending))
            else:
                edits.extend(_changed_lines(old, new, row))
        return edits

    def _written(self, change: RowChange) -> bytes:
        """The bytes a changed line becomes, its terminators included."""
        terminator = self.terminator
        return terminator.join(change.lines) + (terminator if change.terminated else b"")

    def prefix(self) -> bytes:
        """Bytes written before the first input line (a rebuilt header)."""
        header = self.header
        if header is None or header.replaces or header.content is None:
            return b""
        return jsonutil.encode_text(header.content) + self.terminator

    def changes(self) -> Iterator[RowChange]:
        view = self.view
        for row in self.changed_rows():
            if self._findings_on(row) or bisect_left(view.rows, row) < bisect_right(view.rows, row):
                change = self._row_change(row)
                if not self._unchanged(change):
                    yield change

    def _unchanged(self, change: RowChange) -> bool:
        """A row whose references all resolve as before comes out as its input bytes."""
        lines = change.lines
        size = change.end - change.start
        if len(lines) != 1 or not change.terminated or size != len(lines[0]) + len(self.terminator):
            return False
        return self.source.read(change.start, size) == lines[0] + self.terminator

    def _row_change(self, row: int) -> RowChange:
        view, source = self.view, self.source
        findings = self._findings_on(row)
        records = range(bisect_left(view.rows, row), bisect_right(view.rows, row))
        covered = 1
        if findings:
            start, length = findings[0].offset, findings[0].length
            covered = findings[0].rows
        else:
            start, length = view.offsets[records[0]], view.sizes[records[0]]
        after = source.read(start + length, 2)
        ending = 2 if after == b"\r\n" else 1 if after[:1] in (b"\n", b"\r") else 0
        header = self.header
        damaged_tail = False
        if header is not None and header.replaces and header.row == row:
            lines = [jsonutil.encode_text(header.content or ""), *self._record_lines(records)]
            body = source.read(start, length)
            for finding in findings:
                if finding.issue is LineIssue.UNPARSABLE and finding.recoverable is not None:
                    # A whole record the damaged header's line holds after it stays.
                    lines.append(self._recovered(body[slice(*finding.recoverable)]))
            if covered > 1:  # the lines after the damaged header in its run stay
                lines.append(self._kept_lines(body[body.index(b"\n") + 1 :]))
        elif findings:
            lines, damaged_tail = self._damaged_row(row, findings, records, start, length)
        else:
            lines = self._record_lines(records)
        for index in records:
            for edit in self.insertions.get(index, ()):
                lines.append(self._inserted(index, edit))
                damaged_tail = False
        last_line = row + covered - 1 == self.lines.line_count and not self.lines.final_newline
        # An unterminated last line stays so only while it is still the damaged bytes it
        # was (a write in progress); complete records always end with a newline.
        terminated = not last_line or self.final_newline or not damaged_tail
        causes = self._causes_of(row, records)
        if last_line and self.final_newline:
            causes.add(self.final_newline_cause)
        change = RowChange(row, start, start + length + ending, lines, terminated, covered)
        change.causes = frozenset(causes)
        return change

    def _kept_lines(self, body: bytes) -> bytes:
        """Lines kept as they are, as one piece (their line breaks LF when line endings
        are normalised)."""
        return body.replace(b"\r\n", b"\n") if self.crlf else body

    def _causes_of(self, row: int, records: range) -> set[int]:
        """The decisions that change line `row`, once its records were emitted."""
        causes = set(self.row_causes.get(row, ()))
        header = self.header
        if header is not None and header.replaces and header.row == row:
            causes.add(self.header_cause)
        crlf_rows = self.lines.crlf_rows
        if self.crlf and bisect_left(crlf_rows, row) < bisect_right(crlf_rows, row):
            causes.add(self.crlf_cause)
        for index in records:
            if index in self.dropped:
                causes.add(self.drop_causes[index])
            causes.update(self._record_causes.get(index, ()))
            causes.update(self.insertion_causes.get(index, ()))
        return causes

    def _damaged_row(
        self, row: int, findings: list[LineFinding], records: range, start: int, length: int
    ) -> tuple[list[bytes], bool]:
        """The output lines of a line with findings, and whether the last of them is
        damaged bytes kept as they were."""
        fixed = self.row_fixes.get(row, set())
        issues = {finding.issue: finding for finding in findings}
        if LineIssue.SPREAD in issues:
            lines = self._record_lines(records)
            if LineIssue.SPREAD in fixed:
                lines = [jsonutil.compact(line) for line in lines]
            return lines, False
        body = self.source.read(start, length)
        if findings[0].rows > 1:  # a run of blank lines or of junk
            return ([], False) if findings[0].issue in fixed else ([self._kept_lines(body)], True)
        if LineIssue.BLANK in issues:
            return ([], False) if LineIssue.BLANK in fixed else ([body], True)
        if LineIssue.UNDEFINED in issues:
            return ([], False) if LineIssue.UNDEFINED in fixed else ([body], True)
        if not records:
            lines = self._recordless_row(issues, fixed, body)
            return lines, bool(lines) and lines[-1] is body
        unfixed = {issue for issue in STRUCTURAL_ISSUES if issue in issues and issue not in fixed}
        mark = b""
        if unfixed == {LineIssue.BOM} and body.startswith(BOM):
            mark = BOM  # the mark stays (its rule is off); the other damage goes
        elif unfixed:
            return self._patched_whole(body, start, findings, fixed, records)
        lines = self._record_lines(records)
        if mark and lines:
            lines[0] = mark + lines[0]
        damaged_tail = False
        for finding in findings:
            if finding.issue not in (LineIssue.TORN, LineIssue.UNPARSABLE) or not finding.span:
                continue
            if finding.issue not in fixed:
                lines.append(body[finding.span[0] : finding.span[1]])
                damaged_tail = True
            elif finding.issue is LineIssue.UNPARSABLE and finding.recoverable is not None:
                # The fix drops the damaged bytes around a whole record, not the record.
                lines.append(self._recovered(body[slice(*finding.recoverable)]))
        return lines, damaged_tail

    def _patched_whole(
        self,
        body: bytes,
        start: int,
        findings: list[LineFinding],
        fixed: set[LineIssue | None],
        records: range,
    ) -> tuple[list[bytes], bool]:
        """A line whose records cannot be written apart (their glue or NULs stay), kept
        whole with every other decision applied in place: its mark removed, its damaged
        bytes dropped, its records dropped or rewritten. Whether it still ends in damage."""
        view = self.view
        patches: list[tuple[int, int, bytes]] = []
        if LineIssue.BOM in fixed and body.startswith(BOM):
            patches.append((0, len(BOM), b""))
        damaged_tail = False
        for finding in findings:
            if finding.issue in (LineIssue.TORN, LineIssue.UNPARSABLE) and finding.span:
                if finding.issue in fixed:
                    kept = finding.recoverable
                    text = b"" if kept is None else self._recovered(body[slice(*kept)])
                    patches.append((*finding.span, text))
                else:
                    damaged_tail = damaged_tail or finding.span[1] == len(body)
        for index in records:
            at = view.offsets[index] - start
            if index in self.dropped:
                patches.append((at, at + view.sizes[index], b""))
            elif index in self._rewrites:
                patches.append((at, at + view.sizes[index], self._rewritten(index)))
        if not patches:
            return [body], True
        patches.sort()
        pieces: list[bytes] = []
        position = 0
        for first, end, text in patches:
            pieces += (body[position:first], text)
            position = end
        pieces.append(body[position:])
        return [b"".join(pieces)], damaged_tail

    def _recordless_row(
        self, issues: dict[LineIssue, LineFinding], fixed: set[LineIssue | None], body: bytes
    ) -> list[bytes]:
        """A line holding no complete record: kept as it is unless its fix applies."""
        torn = issues.get(LineIssue.TORN)
        if torn is not None:
            return [] if LineIssue.TORN in fixed else [body]
        unparsable = issues.get(LineIssue.UNPARSABLE)
        if unparsable is not None and LineIssue.UNPARSABLE in fixed:
            recovered = unparsable.recoverable
            return [self._recovered(body[slice(*recovered)])] if recovered else []
        nul = issues.get(LineIssue.NUL)
        if nul is not None and unparsable is None and LineIssue.NUL in fixed:
            return []
        if LineIssue.BOM in issues and LineIssue.BOM in fixed and body.startswith(BOM):
            return [body[len(BOM) :]]
        return [body]

    def _recovered(self, data: bytes) -> bytes:
        """A whole record a fix keeps from a damaged line (the view does not hold it): its
        links to records this repair drops resolved as any record's are (§8), those a
        record's place decides (cut points, kept segments) aside."""
        if not self._dropped_ids:
            return data
        try:
            record = jsonutil.loads_preserving(data)
        except ValueError:
            return data
        view, editor = self.view, self.editor
        changed = False
        for name, role in editor.references(record):
            if role in _PLACED_ROLES:
                continue
            value = editor.get_field(record, name)
            if not isinstance(value, str) or value not in self._dropped_ids:
                continue
            target = view.resolve(value)
            if target is None or target not in self.dropped or self._same_id_survives(target):
                continue
            new = self._climb(target)[1] if role is RefRole.PARENT else self.remap(value, role, -1)
            if new != value:
                record = editor.set_field(name, new)(record)
                changed = True
        return jsonutil.stringify_preserved(record) if changed else data

    def _record_lines(self, records: range) -> list[bytes]:
        view, source = self.view, self.source
        lines: list[bytes] = []
        for index in records:
            if index in self.dropped:
                continue
            if index in self._rewrites:
                lines.append(self._rewritten(index))
            else:
                lines.append(source.read(view.offsets[index], view.sizes[index]))
        return lines

    def _rewritten(self, index: int) -> bytes:
        ahead = self._ahead
        line, causes = self._rewrite(index) if ahead is None else ahead.take(index)
        if causes is not None:
            self._reserialised.add(index)
            self._record_causes[index] = causes
        return line

    @contextmanager
    def rewriting_ahead(self, jobs: int | None) -> Iterator[None]:
        """While open, a plan with many records to rewrite has forked workers rewrite
        them (`jobs`, default one per core) in file order, a batch of about
        `REWRITE_BATCH_BYTES` each at a time, for the next `chunks()` or `pieces()`: the
        writer then mostly copies. The workers go once that writing ends, or once one
        of them fails (the writer then rewrites the rest itself)."""
        from sessionfix.scan.cores import default_workers

        sizes = self.view.sizes
        indexes = sorted(self._rewrites.difference(self.dropped))
        workers = default_workers(jobs)
        if workers < 2 or sum(map(sizes.__getitem__, indexes)) < REWRITES_AHEAD_BYTES:
            yield
            return
        from sessionfix.scan.workers import OrderedWorkers, WorkerDied

        batches: list[list[int]] = [[]]
        held = 0
        for index in indexes:
            if held >= REWRITE_BATCH_BYTES:
                batches.append([])
                held = 0
            batches[-1].append(index)
            held += sizes[index]
        with ExitStack() as stack:
            try:
                rewriters = stack.enter_context(
                    OrderedWorkers(self._rewrite_batch, batches, workers)
                )
            except WorkerDied:  # none could start: rewritten here
                yield
                return
            self._ahead = _RewritesAhead(self, iter(rewriters), stack.close)
            try:
                yield
            finally:
                self._ahead = None

    def _rewrite_batch(self, indexes: list[int]) -> list[tuple[int, bytes, frozenset[int] | None]]:
        """Worker: `_rewrite` of each record."""
        return [(index, *self._rewrite(index)) for index in indexes]

    def _rewrite(self, index: int) -> tuple[bytes, frozenset[int] | None]:
        """A record's output line, and the decisions that changed its content (None when
        it comes out as it was)."""
        raw = self.source.read(*self.view.span(index))
        record = jsonutil.loads_preserving(raw)
        causes: set[int] = set()
        transforms = self.transforms.get(index, ())
        for transform in transforms:
            record = transform(record)
        if transforms:
            causes.update(self.transform_causes[index])
        override = self._parent_overrides.get(index)
        if override is not None:
            record = self.editor.set_parent(override)(record)
            causes.add(self._override_causes[index])
        record, remapped = self._remap_record(record, index, causes)
        if not (transforms or override is not None or remapped):
            return raw, None
        return jsonutil.stringify_preserved(record), frozenset(causes)

    def _inserted(self, anchor: int, edit: InsertRecord) -> bytes:
        return jsonutil.stringify_bytes(self._remap_record(edit.build(), anchor)[0])

    def _remap_record(
        self, record: Any, owner: int, causes: set[int] | None = None
    ) -> tuple[Any, bool]:
        """The record with its references resolved, and whether any changed; the
        decisions that changed them are added to `causes`."""
        remapped = False
        for name, role in self.editor.references(record):
            value = self.editor.get_field(record, name)
            new = self.remap(value, role, owner)
            if new is not value and new != value:
                record = self.editor.set_field(name, new)(record)
                remapped = True
                if causes is not None:
                    causes.add(self._reference_cause(value, role))
        return record, remapped

    def _reference_cause(self, value: object, role: RefRole) -> int:
        if role is RefRole.FIRST_KEPT_POSITION:
            return self._position_cause(value)
        if isinstance(value, list):
            gone = [item for item in value if self.remap(item, role, -1) != item]
            return self._reference_cause(gone[0], role)
        target = self.view.resolve(str(value))
        assert target is not None
        return self.drop_causes[target]

    # ---- output bytes --------------------------------------------------------------------

    def chunks(self) -> Iterator[bytes]:
        """The repaired file: untouched byte ranges copied, changed rows rewritten."""
        source = self.source
        for piece in self.pieces():
            if isinstance(piece, CopiedRange):
                yield from _copy(source, piece.start, piece.end)
            else:
                yield piece

    def pieces(self) -> Iterator[bytes | CopiedRange]:
        """`chunks()`, with the untouched byte ranges of the input named rather than read
        (a writer copies them in the kernel)."""
        terminator = self.terminator
        prefix = self.prefix()
        self._reserialised.clear()
        self._record_causes.clear()
        self.rows_written = 0
        self.row_map = row_map = RowMap() if self.map_rows else None
        self.copied_runs = None
        copied: list[CopiedRun] = []
        written = 0
        if prefix:
            self.rows_written += 1
            if row_map is not None:
                row_map.add(PREFIX_ROW, 1, frozenset({self.header_cause}))
            yield prefix
            written += len(prefix)
        position = 0
        for change in self.changes():
            self.rows_written += 1
            if row_map is not None:
                count = len(change.lines)
                if change.rows > 1:  # lines kept whole in one piece
                    count += sum(line.count(b"\n") for line in change.lines)
                row_map.add(change.row, count, change.causes, change.rows)
            if change.start > position:
                copied.append(CopiedRun(position, change.start, written))
                written += change.start - position
                yield CopiedRange(position, change.start)
            if change.lines:
                last = len(change.lines) - 1
                for number, line in enumerate(change.lines):
                    yield line
                    written += len(line)
                    if number < last or change.terminated:
                        yield terminator
                        written += len(terminator)
            position = change.end
        if self.lines.size > position:
            copied.append(CopiedRun(position, self.lines.size, written))
            yield CopiedRange(position, self.lines.size)
        self.copied_runs = copied
        if self._ahead is not None:
            self._ahead.done()


class _RewritesAhead:
    """The workers' rewrites, taken in file order."""

    def __init__(
        self,
        plan: RepairPlan,
        batches: Iterator[list[tuple[int, bytes, frozenset[int] | None]]],
        stop: Callable[[], None],
    ) -> None:
        self.plan = plan
        self.batches: Iterator[list[tuple[int, bytes, frozenset[int] | None]]] | None = batches
        self.stop = stop
        """Ends the workers (they have nothing more to give)."""
        self.ready: dict[int, tuple[bytes, frozenset[int] | None]] = {}
        self.last = -1
        """The last record of the batches taken so far."""

    def take(self, index: int) -> tuple[bytes, frozenset[int] | None]:
        """`plan._rewrite(index)`, from the workers while they are ahead (a record the
        writer asks for again, in a later `chunks()`, is rewritten here)."""
        ready = self.ready
        while index > self.last and self.batches is not None:
            try:
                batch = next(self.batches, None)
            except Exception:  # a worker died, or a rewrite failed: done here, if asked for
                batch = None
            if batch is None:
                self.done()
                break
            # The writer goes forward: what it passed over is never asked for.
            ready.clear()
            ready.update((record, (line, causes)) for record, line, causes in batch)
            self.last = batch[-1][0]
        taken = ready.pop(index, None)
        return self.plan._rewrite(index) if taken is None else taken

    def done(self) -> None:
        """No more is taken from the workers: they go."""
        self.batches = None
        self.ready.clear()
        self.stop()


def described_fixes(scanned: ScannedFile, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics with each fix listing every edit the repair of that fix alone
    makes (`RepairPlan.fix_edits`): a fix's own edits name its decisions (drop this
    record, rewrite that one); its plan resolves what they entail (a child re-linked past
    a dropped record, a kept position that moves). An `engine.FixDescriber`."""
    dropped = (
        edit.record
        for diagnostic in diagnostics
        if diagnostic.fix is not None
        for edit in diagnostic.fix.edits
        if isinstance(edit, DropRecord)
    )
    children = children_of(scanned.view.parents, dropped)
    described: list[Diagnostic] = []
    with RecordSource(scanned.info.path) as source:
        for diagnostic in diagnostics:
            fix = diagnostic.fix
            if fix is not None:
                plan = RepairPlan(scanned, [diagnostic], source, children=children)
                edits = plan.fix_edits(fix.edits)
                diagnostic = diagnostic.with_fix(msgspec.structs.replace(fix, edits=edits))
            described.append(diagnostic)
    return described


def children_of(parents: Sequence[int], records: Iterable[int]) -> dict[int, list[int]]:
    """The children of each of `records` (in one pass over the parent links)."""
    children: dict[int, list[int]] = {index: [] for index in records}
    if children:
        for index, parent in enumerate(parents):
            if parent in children:
                children[parent].append(index)
    return children


def _lines_of(data: bytes) -> list[bytes]:
    """The lines of `data`, each with its newline (the last may have none)."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def _applied_lines(data: bytes, row: int, edits: Sequence[Edit], terminator: bytes) -> bytes:
    """What `edits` make of the lines `data` holds, the first of them line `row`."""
    by_row: dict[int, list[Edit]] = {}
    for edit in edits:
        by_row.setdefault(edit.row, []).append(edit)
    return b"".join(
        _applied(line, by_row[at], terminator) if at in by_row else line
        for at, line in enumerate(_lines_of(data), row)
    )


def _line_ending_change(old: bytes, applied: bytes, new: bytes, row: int) -> Edit | None:
    """The edit of the last line's ending (CRLF written LF) that makes `applied`, the
    lines `old` (from line `row` on) with a fix's own edits, into `new`, if that is all
    that differs."""
    lines = _lines_of(old)
    last = lines[-1]
    body = len(last.rstrip(b"\r\n"))
    ending = last[body:]
    written = new[len(new.rstrip(b"\r\n")) :]
    if ending == written or not applied.endswith(ending):
        return None
    if applied[: len(applied) - len(ending)] != new[: len(new) - len(written)]:
        return None
    op = EditOp.REPLACE_BYTES if written else EditOp.DELETE_BYTES
    text = written.decode("ascii") or None
    return DescribedEdit(row + len(lines) - 1, described=op, text=text, span=(body, len(last)))


def _changed_lines(old: bytes, new: bytes, row: int) -> list[Edit]:
    """The bytes that change between `old`, lines from line `row` on, and `new`, as
    edits of those lines: the change's first line replaced from where it begins (its
    line break and all), the lines after it up to its last deleted, and the last line
    cut up to where it ends."""
    first, end, text = changed_bytes(old, new)
    starts = [0]
    for line in _lines_of(old)[:-1]:
        starts.append(starts[-1] + len(line))
    top = bisect_right(starts, first) - 1
    bottom = max(top, bisect_right(starts, end - 1) - 1)
    if top == bottom:
        op = EditOp.REPLACE_BYTES if text else EditOp.DELETE_BYTES
        span = (first - starts[top], end - starts[top])
        return [DescribedEdit(row + top, described=op, text=text or None, span=span)]
    cut = starts[top + 1] - starts[top]
    edits: list[Edit] = [
        DescribedEdit(
            row + top,
            described=EditOp.REPLACE_BYTES if text else EditOp.DELETE_BYTES,
            text=text or None,
            span=(first - starts[top], cut),
        )
    ]
    if bottom > top + 1:
        last = row + bottom - 1
        edits.append(
            DescribedEdit(
                row + top + 1, described=EditOp.DELETE, last=last if last > row + top + 1 else None
            )
        )
    edits.append(
        DescribedEdit(row + bottom, described=EditOp.DELETE_BYTES, span=(0, end - starts[bottom]))
    )
    return edits


def _applied(line: bytes, edits: Sequence[Edit], terminator: bytes) -> bytes:
    """What `edits` of one line make of its bytes (its terminator included), as the JSON
    output documents them."""
    inserted = [
        jsonutil.encode_text(edit.content or "") + terminator
        for edit in edits
        if edit.op is EditOp.INSERT_AFTER
    ]
    kept = line
    ranges: list[tuple[int, int, bytes]] = []
    for edit in edits:
        op, content = edit.op, jsonutil.encode_text(edit.content or "")
        if op is EditOp.DELETE:
            return b"".join(inserted)
        if op is EditOp.REPLACE:
            ending = line[len(line.rstrip(b"\r\n")) :]
            kept = content + (ending and terminator)
        elif op is EditOp.APPEND:
            ranges.append((len(line), len(line), content))
        elif edit.byte_range is not None:
            ranges.append((*edit.byte_range, content))
    for first, end, text in sorted(ranges, reverse=True):
        kept = kept[:first] + text + kept[end:]
    return kept + b"".join(inserted)


class CopiedRange(NamedTuple):
    """Input bytes the output repeats unchanged."""

    start: int
    end: int


def _copy(source: RecordSource, start: int, end: int) -> Iterator[bytes]:
    while start < end:
        size = min(COPY_BYTES, end - start)
        data = source.read(start, size)
        if not data:
            return
        yield data
        start += len(data)
