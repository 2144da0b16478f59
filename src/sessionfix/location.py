"""Where a finding is, and how a message names other records: each container's own way.

A session file addresses a record by its line (`file:line:column`); a store of sessions
by the session and the key of the record's row (`store:session:seq N`, later a text id).
Rules see every session as lines of text; a finding keeps its line, and its container's
`RecordNames` turn that line into the record's key and into words. A message that names
another record keeps the reference as such (`Said`), so that each container names it:
no text is rewritten after the fact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from msgspec import Struct


class RecordNames(Struct, frozen=True):
    """How a container names the records of one session: by `key_of` their line (the
    line itself in a file), as `noun` ("line 12", "seq 11"), a place `preposition` before
    it ("on line 12", "at seq 11")."""

    noun: str = "line"
    preposition: str = "on"
    session: str = ""
    """In a store: the session; empty in a file."""
    key_of: Callable[[int], int | str | None] | None = None
    """Line of the session's text → the record's key (None: no record of the container
    holds that line); unset: the line is the key."""
    own: str = "on its"
    """The place before a record's own key, in a message about that record ("on its
    line 12", "at seq 11")."""

    def key(self, line: int) -> int | str | None:
        return line if self.key_of is None else self.key_of(line)

    def named(
        self, lines: tuple[int, ...], *, at: bool = False, more: bool = False, own: bool = False
    ) -> str:
        """`lines` named as their records ("line 3", "lines 3, 4, …", "at seq 2", "on its
        line 3"); a line no record of the container holds keeps its line number, as the
        file names it."""
        keys = [self.key(line) for line in lines]
        if any(key is None for key in keys):
            return FILE_NAMES.named(lines, at=at, more=more, own=own)
        noun = self.noun if len(keys) == 1 or not self.noun else f"{self.noun}s"
        words = f"{noun} {', '.join(map(str, keys))}{', …' if more else ''}".lstrip()
        if own:
            return f"{self.own} {words}"
        return f"{self.preposition} {words}" if at else words


FILE_NAMES: Final = RecordNames()
"""A session file's lines: the line is the record's key."""


class Cited(Struct, frozen=True):
    """Records a message names: their lines in the session's text (`more`: and others
    not listed); `at`: named as a place ("on line 12")."""

    lines: tuple[int, ...]
    at: bool = False
    more: bool = False
    own: bool = False
    """Named as the place of the record the message is about ("on its line 12")."""

    def __format__(self, spec: str) -> str:
        raise TypeError("records are named in a message by `said`, never formatted into text")


class Said(Struct, frozen=True):
    """A message whose references to records stay references, for each container to
    name its own way."""

    parts: tuple[str | Cited, ...]

    def text(self, names: RecordNames = FILE_NAMES) -> str:
        return "".join(
            part
            if isinstance(part, str)
            else names.named(part.lines, at=part.at, more=part.more, own=part.own)
            for part in self.parts
        )

    def __add__(self, other: str | Said) -> Said:
        return Said((*self.parts, *(other.parts if isinstance(other, Said) else (other,))))

    def __radd__(self, other: str) -> Said:
        return Said((other, *self.parts))

    def __format__(self, spec: str) -> str:
        raise TypeError("a message naming records is joined with +, never formatted into text")


def said(*parts: str | Cited) -> Said:
    """A message from text and references to records (`line`, `on_line`, `lines`)."""
    return Said(parts)


def line(number: int) -> Cited:
    """The record on line `number`: "line 12" in a file, "seq 11" in a store."""
    return Cited((number,))


def on_line(number: int) -> Cited:
    """The record on line `number` as a place: "on line 12", "at seq 11"."""
    return Cited((number,), at=True)


def on_its_line(number: int) -> Cited:
    """The place of the record a message is about: "on its line 12", "at seq 11"."""
    return Cited((number,), own=True)


def lines(numbers: Iterable[int], *, more: bool = False) -> Cited:
    """Several records: "lines 3, 4 and 5" in a file, "seqs 2, 3 and 4" in a store."""
    return Cited(tuple(numbers), more=more)


def text_of(message: str | Said) -> str:
    """A message as a session file names its records."""
    return message if isinstance(message, str) else message.text()


class Location(Struct, frozen=True):
    """Where a finding is: `line` and `column` of the session's text as it was read (the
    file's own lines, a store session's transcript) and, in a store, the `session` and
    the `key` of the record's row, named `noun`."""

    container: str
    line: int
    column: int = 1
    end_line: int | None = None
    session: str = ""
    key: int | str | None = None
    noun: str = ""

    @property
    def in_store(self) -> bool:
        return bool(self.session)

    @property
    def record_key(self) -> int | str | None:
        """The container's key of the record: its line in a file, its row's key in a store."""
        return self.key if self.in_store else self.line

    @property
    def record(self) -> str:
        """The record as a report names it: "12" (a line) or "seq 11"."""
        if not self.in_store:
            return str(self.line)
        return f"{self.noun} {self.key}".lstrip() if self.key is not None else f"line {self.line}"

    @property
    def text(self) -> str:
        """The location as every text report writes it: `file:line:column`, or
        `store:session:seq N`."""
        if self.in_store:
            return f"{self.container}:{self.session}:{self.record}"
        return f"{self.container}:{self.line}:{self.column}"

    def json(self) -> dict[str, int | str | None]:
        """The form a machine report adds beside the container's name."""
        return {
            "session": self.session or None,
            "record_key": self.record_key,
            "place": self.text,
        }
