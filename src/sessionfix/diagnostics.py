"""Diagnostics: what a rule found, where, how bad it is, and the fix it proposes."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Final


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


class EditOp(enum.Enum):
    DELETE = "delete"
    REPLACE = "replace"
    INSERT_AFTER = "insert_after"


Transform = Callable[[Any], Any]
"""A change to one decoded record (key order kept), applied before it is re-serialised."""


@dataclass(frozen=True, slots=True)
class Edit:
    """One change to a physical input line, as reported in `fix.edits`.

    The replacement text of large records is produced on demand (`content`), so
    a scan never holds the new text of every changed record at once. Record-level
    edits also carry the decision `repair` resolves (rules.md §1 step 4): the record
    they concern, the survivor of a dropped copy, a content transform, or the record
    an insertion builds.
    """

    op: EditOp
    row: int
    produce: Callable[[], str] | None = field(default=None, repr=False, compare=False)
    record: int | None = field(default=None, compare=False)
    """View index of the record a record-level edit concerns (the anchor of an insert)."""
    survivor: int | None = field(default=None, compare=False)
    """For a dropped copy: the record it duplicates."""
    transform: Transform | None = field(default=None, repr=False, compare=False)
    build: Callable[[], dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    """For an insertion: the new record, before its references are resolved."""
    new_id: str | None = field(default=None, compare=False)
    """For an insertion into an id-linked session: the id the new record gets."""
    raw: Callable[[], bytes] | None = field(default=None, repr=False, compare=False)
    """The line's exact bytes, when `content` is known to be only their text."""
    end: str | None = field(default=None, compare=False)
    """The terminator written after the line ("\n", "\r\n", "" for an unterminated last
    line), where it is known."""

    @property
    def content(self) -> str | None:
        return None if self.produce is None else self.produce()


@dataclass(frozen=True, slots=True)
class Fix:
    applicability: Applicability
    message: str
    edits: Sequence[Edit] = ()


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A finding in one session file, located by 1-based physical line."""

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
    span: tuple[int, int] | None = field(default=None, compare=False)
    """Byte offset and length of the record in the file, for excerpts."""
    source: Path | None = field(default=None, compare=False, repr=False)
    """The file the span refers to."""

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return SORT_KEY(self)

    def with_fix(self, fix: Fix | None) -> Diagnostic:
        return Diagnostic(
            code=self.code,
            name=self.name,
            severity=self.severity,
            message=self.message,
            filename=self.filename,
            row=self.row,
            column=self.column,
            entry_id=self.entry_id,
            fix=fix,
            format=self.format,
            span=self.span,
            source=self.source,
        )


SORT_KEY: Final[Callable[[Diagnostic], tuple[str, int, int, str]]] = attrgetter(
    "filename", "row", "column", "code"
)
"""Report order: file, line, column, code."""
