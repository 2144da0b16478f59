"""Diagnostics: what a rule found, where, how bad it is, and the fix it proposes."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, ClassVar, Final

import msgspec
from msgspec import Struct

from sessionfix.escapes import escape
from sessionfix.location import Location, RecordNames, Said
from sessionfix.read.reader import LineIssue
from sessionfix.structs import PartlyCompared


class Severity(enum.IntEnum):
    """How much a finding matters; ordered so that `>=` compares against `--fail-on`."""

    INFO = 0
    WARNING = 1
    ERROR = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(
                f"unknown severity {text!r} (expected error, warning or info)"
            ) from None


class Applicability(enum.Enum):
    """Whether `repair` applies a fix by default (safe) or only with `--unsafe-fixes`."""

    SAFE = "safe"
    UNSAFE = "unsafe"


EXCERPT_CHARS: Final = 160
"""Characters of a record a report shows under its diagnostic."""
EXCERPT_BYTES: Final = EXCERPT_CHARS * 4
"""Bytes read for an excerpt: enough for `EXCERPT_CHARS` of any UTF-8 text."""


def excerpt_of(data: bytes, cut: bool) -> str:
    """The start of a record as a report shows it: on one line, bounded and escaped.
    `data` is its first bytes; `cut`: the record goes on past them."""
    text = data.decode("utf-8", "replace").replace("\t", " ").replace("\n", " ").replace("\r", " ")
    if len(text) > EXCERPT_CHARS or cut:
        text = text[:EXCERPT_CHARS] + "…"
    return escape(text)


STRUCTURAL_ISSUES: Final = frozenset({LineIssue.GLUED, LineIssue.NUL, LineIssue.BOM})
"""Line damage that must be fixed before the records on the line can be emitted apart."""


class EditOp(enum.Enum):
    """Where an edit's text goes, as `fix.edits` reports it."""

    DELETE = "delete"
    REPLACE = "replace"
    INSERT_AFTER = "insert_after"
    APPEND = "append"
    """`content` goes right after the bytes of line `row`, on that line (no new line)."""
    DELETE_BYTES = "delete_bytes"
    """Bytes `byte_column` up to `end_byte_column` (excluded) of line `row` are removed;
    columns count bytes from 1, the line's terminator included."""
    REPLACE_BYTES = "replace_bytes"
    """The same bytes become `content` (inserted there when the range is empty)."""
    SET_ASIDE = "set_aside"
    """The file `content` names, beside the session, is moved aside to a backup name
    beside it; no line of the session changes (`row` is the finding's)."""


Transform = Callable[[Any], Any]
"""A change to one decoded record (key order kept), applied before it is re-serialised."""


class Edit(PartlyCompared, Struct, frozen=True):
    """One change to a physical input line, as reported in `fix.edits`.

    Each kind of change is a subclass that says what it does; `repair` decides by the
    kind and the facts it carries. The replacement text of large records is produced
    on demand (`content`), so a scan never holds the new text of every changed record.
    """

    uncompared: ClassVar[frozenset[str]] = frozenset({"produce"})

    row: int
    produce: Callable[[], str] | None = None

    @property
    def op(self) -> EditOp:
        return EditOp.REPLACE

    @property
    def content(self) -> str | None:
        return None if self.produce is None else self.produce()

    @property
    def byte_range(self) -> tuple[int, int] | None:
        """For an edit of some bytes of line `row`: the 0-based offsets, within the line,
        of the first byte and of the byte after the last one."""
        return None

    @property
    def end_row(self) -> int | None:
        """For an edit of several whole lines: the last of them (`row` the first)."""
        return None

    @property
    def rows(self) -> tuple[int, ...]:
        """The input lines the edit changes."""
        return tuple(range(self.row, (self.end_row or self.row) + 1))

    @property
    def changes_session(self) -> bool:
        """Whether the edit changes the session's own bytes (else a file beside it)."""
        return True


# ---- line edits: the plan derives their bytes from the line report -----------------


class LineEdit(Edit, frozen=True, kw_only=True):
    """A change to a damaged physical line; `repairs` names the damage it removes."""

    repairs: LineIssue | None = None

    @property
    def structural(self) -> bool:
        """Whether the records on the line can be emitted apart only once this is fixed."""
        return self.repairs in STRUCTURAL_ISSUES


class ByteEdit(LineEdit, frozen=True, kw_only=True):
    """A change to some bytes of a damaged line: bytes `start` up to `end` (excluded,
    0-based within the line) become `text`, so the edit carries no copy of the bytes
    it keeps."""

    start: int
    end: int
    text: str = ""

    @property
    def op(self) -> EditOp:
        return EditOp.REPLACE_BYTES if self.text else EditOp.DELETE_BYTES

    @property
    def content(self) -> str | None:
        return self.text or None

    @property
    def byte_range(self) -> tuple[int, int] | None:
        return self.start, self.end


class SplitLine(ByteEdit, frozen=True, kw_only=True):
    """Split a line holding several records into one line per record: the bytes between
    two records become a line break."""


class StripBytes(ByteEdit, frozen=True, kw_only=True):
    """Remove bytes around a record (a NUL run, a byte-order mark), keeping the record."""


class TrimDamage(ByteEdit, frozen=True, kw_only=True):
    """Keep the complete records of a line and drop its damaged bytes."""


class JoinLines(ByteEdit, frozen=True, kw_only=True):
    """Part of writing a record spread over lines, from line `first` on, onto one line:
    bytes `start` up to `end` of line `row` are whitespace between its tokens (a line
    break among them), which the join removes, as it removes all such whitespace."""

    first: int


class DropLine(LineEdit, frozen=True, kw_only=True):
    """Drop a whole line that holds no record, or a run of them up to line `last`."""

    last: int | None = None

    @property
    def op(self) -> EditOp:
        return EditOp.DELETE

    @property
    def end_row(self) -> int | None:
        return self.last


class NormaliseTerminator(Edit, frozen=True, kw_only=True):
    """End a line with LF instead of CRLF; one decision for every such line of a file.
    The edit removes the carriage return, the byte at offset `cr` of the line."""

    cr: int

    @property
    def op(self) -> EditOp:
        return EditOp.DELETE_BYTES

    @property
    def byte_range(self) -> tuple[int, int] | None:
        return self.cr, self.cr + 1


class AddFinalNewline(Edit, frozen=True):
    """Terminate the file's unterminated last line: one byte appended, so the edit
    carries that byte and not a copy of the record."""

    @property
    def op(self) -> EditOp:
        return EditOp.APPEND

    @property
    def content(self) -> str | None:
        return "\n"


class RebuildHeader(Edit, frozen=True, kw_only=True):
    """Write a new session header over a damaged one, or before the first line."""

    replaces: bool
    """Whether it takes the place of line `row` (else it goes before line `row + 1`)."""

    @property
    def op(self) -> EditOp:
        return EditOp.REPLACE if self.replaces else EditOp.INSERT_AFTER


class SetAside(Edit, frozen=True, kw_only=True):
    """Move a file the agent keeps beside the session out of its way, to a backup name
    beside it, so that the agent builds it again from the sessions: an in-place repair
    does it, and no line of the session changes (`row` is the line of the finding)."""

    path: Path

    @property
    def op(self) -> EditOp:
        return EditOp.SET_ASIDE

    @property
    def content(self) -> str | None:
        return self.path.name

    @property
    def changes_session(self) -> bool:
        return False


# ---- record edits: decisions the plan resolves with every reference (rules.md §8) ----


class RecordEdit(Edit, frozen=True, kw_only=True):
    """A decision about one record of the view."""

    record: int
    """View index of the record concerned (the anchor of an insertion)."""


class DropRecord(RecordEdit, frozen=True, kw_only=True):
    """Drop a record; references to it move to its survivor, else on up the tree."""

    survivor: int | None = None
    """For a dropped copy: the record it duplicates."""

    @property
    def op(self) -> EditOp:
        return EditOp.DELETE


class RewriteRecord(RecordEdit, frozen=True, kw_only=True):
    """Change a record's content; it is re-serialised the way its writer does. The edit
    names only the bytes of line `row` that change (`changed`), not the whole record."""

    uncompared: ClassVar[frozenset[str]] = Edit.uncompared | {"transform", "changed"}

    transform: Transform
    changed: Callable[[], tuple[int, int, str]] | None = None
    """The 0-based byte offsets within the line of the first changed byte and of the
    byte after the last one, and their new text."""

    @property
    def op(self) -> EditOp:
        # Known without reading the record (its `content` may be empty: a deletion).
        return EditOp.REPLACE if self.changed is None else EditOp.REPLACE_BYTES

    @property
    def content(self) -> str | None:
        if self.changed is None:
            return None if self.produce is None else self.produce()
        return self.changed()[2]

    @property
    def byte_range(self) -> tuple[int, int] | None:
        if self.changed is None:
            return None
        start, end, _ = self.changed()
        return start, end


class MoveCut(RewriteRecord, frozen=True, kw_only=True):
    """Move a compaction's cut: the entry it keeps from changes."""


class InsertRecord(RecordEdit, frozen=True, kw_only=True):
    """Insert a new record after `record`; the entry that followed moves below it."""

    uncompared: ClassVar[frozenset[str]] = Edit.uncompared | {"build", "new_id"}

    build: Callable[[], dict[str, Any]]
    """The new record, before its references are resolved."""
    new_id: str | None = None
    """For an id-linked session: the id the new record gets."""

    @property
    def op(self) -> EditOp:
        return EditOp.INSERT_AFTER


# ---- what a preview lists: lines of the written result -----------------------------


class WrittenLine(Edit, frozen=True, kw_only=True):
    """A line of the repaired file at input line `row`, with its exact bytes."""

    uncompared: ClassVar[frozenset[str]] = Edit.uncompared | {"raw", "end"}

    placement: EditOp
    raw: Callable[[], bytes]
    end: str
    """The terminator written after the line ("\n", "\r\n", "" for an unterminated last
    line)."""

    @property
    def op(self) -> EditOp:
        return self.placement


class EndedLine(Edit, frozen=True, kw_only=True):
    """An unterminated last input line written unchanged but for the terminator `end`
    now after it: listed as that terminator appended, not as the whole line again."""

    end: str

    @property
    def op(self) -> EditOp:
        return EditOp.APPEND

    @property
    def content(self) -> str | None:
        return self.end


class RemovedLine(Edit, frozen=True):
    """An input line the repaired file no longer holds, or several, up to line `last`."""

    last: int | None = None

    @property
    def op(self) -> EditOp:
        return EditOp.DELETE

    @property
    def end_row(self) -> int | None:
        return self.last


class DescribedEdit(Edit, frozen=True, kw_only=True):
    """An edit as `fix.edits` reports it, its text already made: what a worker process
    hands back (the edits it made hold closures over its open file)."""

    described: EditOp
    text: str | None = None
    span: tuple[int, int] | None = None
    last: int | None = None

    @classmethod
    def of(cls, edit: Edit) -> DescribedEdit:
        return cls(
            edit.row,
            described=edit.op,
            text=edit.content,
            span=edit.byte_range,
            last=edit.end_row,
        )

    @property
    def op(self) -> EditOp:
        return self.described

    @property
    def content(self) -> str | None:
        return self.text

    @property
    def byte_range(self) -> tuple[int, int] | None:
        return self.span

    @property
    def end_row(self) -> int | None:
        return self.last


class Fix(Struct, frozen=True):
    applicability: Applicability
    message: str
    edits: Sequence[Edit] = ()
    said: Said | None = None
    """The message with the records it names kept as references (see `Diagnostic.said`)."""

    @property
    def changes_session(self) -> bool:
        """Whether applying the fix changes the session's own bytes: false only for a fix
        whose every edit changes a file beside it (a fix that lists no edits decides
        what its plan writes)."""
        return not self.edits or any(edit.changes_session for edit in self.edits)

    @property
    def set_aside(self) -> tuple[Path, ...]:
        """The files beside the session the fix moves aside (`SetAside`)."""
        return tuple(edit.path for edit in self.edits if isinstance(edit, SetAside))

    def described(self, *, edits: bool) -> Fix:
        """The fix with its edits' text made now (`edits`), or without its edits."""
        made = (
            tuple(DescribedEdit.of(edit) if edit.changes_session else edit for edit in self.edits)
            if edits
            else ()
        )
        return Fix(self.applicability, self.message, made, self.said)

    def named(self, names: RecordNames) -> Fix:
        """The fix with the records its message names named by their container."""
        if self.said is None:
            return self
        return msgspec.structs.replace(self, message=self.said.text(names))


class Diagnostic(PartlyCompared, Struct, frozen=True):
    """A finding in one session, located by the 1-based line of the session's text it
    was read from and, in a store, by the store's key of the record (`location`)."""

    uncompared: ClassVar[frozenset[str]] = frozenset({"span", "source", "excerpt"})

    code: str
    name: str
    severity: Severity
    message: str
    filename: str
    row: int
    column: int = 1
    entry_id: str | None = None
    fix: Fix | None = None
    format: str = "unknown"
    end_row: int | None = None
    """The last line of a finding on several (a run of blank lines, a spread record)."""
    span: tuple[int, int] | None = None
    """Byte offset and length of the record in the file, for excerpts."""
    source: Path | None = None
    """The file the span refers to."""
    excerpt: str | None = None
    """The start of the record, escaped and bounded, read when the finding was made:
    a report shows it without opening the session again."""
    session_id: str = ""
    """In a session store (`filename` names the store): the session; else empty."""
    record_key: int | str | None = None
    """In a session store: the store's key of the record's row, named `key_noun` (`row`
    is its line in the session's transcript)."""
    key_noun: str = ""
    said: Said | None = None
    """The message with the records it names kept as references, for the container the
    finding is located in to name them (`message` is it as a session file names them)."""

    @property
    def sort_key(self) -> tuple[str, str, int, int, str]:
        return SORT_KEY(self)

    @property
    def location(self) -> Location:
        return Location(
            self.filename,
            self.row,
            self.column,
            self.end_row,
            self.session_id,
            self.record_key,
            self.key_noun,
        )

    @property
    def place(self) -> str:
        """Where a text report puts it: `file:row:column`, or in a store
        `store:session:seq N`."""
        return self.location.text

    def with_fix(self, fix: Fix | None) -> Diagnostic:
        return msgspec.structs.replace(self, fix=fix)

    def detached(self, *, edits: bool) -> Diagnostic:
        """The diagnostic with nothing left to read from its file: its fix's edits made
        (`edits`) or left out, so that it can travel to another process."""
        return self if self.fix is None else self.with_fix(self.fix.described(edits=edits))

    def located(self, container: str, names: RecordNames) -> Diagnostic:
        """This finding of a store session's transcript, located in the store `container`,
        and the records it names named by it."""
        return msgspec.structs.replace(
            self,
            filename=container,
            session_id=names.session,
            record_key=names.key(self.row),
            key_noun=names.noun,
            message=self.message if self.said is None else self.said.text(names),
            fix=None if self.fix is None else self.fix.named(names),
        )


SORT_KEY: Final[Callable[[Diagnostic], tuple[str, str, int, int, str]]] = attrgetter(
    "filename", "session_id", "row", "column", "code"
)
"""Report order: file, session (in a store), line, column, code."""
